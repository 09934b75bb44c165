-- finish.lua: fenced end of an attempt.
--
-- KEYS[1]  fence hash   KEYS[2] run hash   KEYS[3] open zset
-- ARGV[1]  token   ARGV[2] owner   ARGV[3] slot unix seconds
-- ARGV[4]  attempt ARGV[5] status (succeeded | failed)
-- ARGV[6]  error text ARGV[7] now unix ms ARGV[8] "1" when final
--
-- Returns {1, 0} recorded; {-1, current token} stale (another holder
-- touched the ledger, or the record is no longer this attempt's).
local cur = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
local curOwner = redis.call('HGET', KEYS[1], 'owner') or ''
local token = tonumber(ARGV[1])
if not (token > cur or (token == cur and ARGV[2] == curOwner)) then
  return {-1, cur}
end
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2] or redis.call('HGET', KEYS[2], 'attempt') ~= ARGV[4] then
  return {-1, cur}
end
redis.call('HSET', KEYS[2], 'status', ARGV[5], 'error', ARGV[6], 'finished', ARGV[7])
if ARGV[5] == 'succeeded' or ARGV[8] == '1' then
  redis.call('ZREM', KEYS[3], ARGV[3])
end
return {1, 0}
