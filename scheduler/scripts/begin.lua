-- begin.lua: fenced start of a slot's next attempt.
--
-- KEYS[1]  fence hash   <prefix>{<job>|<partition>}:fence  (token, owner)
-- KEYS[2]  run hash     <prefix>{<job>|<partition>}:run:<slot unix s>
-- KEYS[3]  open zset    <prefix>{<job>|<partition>}:open   (slots not done)
-- KEYS[4]  last slot    <prefix>{<job>|<partition>}:last
-- ARGV[1]  token (decimal, < 2^53)   ARGV[2] owner
-- ARGV[3]  slot unix seconds          ARGV[4] now unix ms
-- ARGV[5]  max attempts
--
-- Returns {1, attempt} started; {0, 0} slot done; {-1, current token} stale.
local cur = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
local curOwner = redis.call('HGET', KEYS[1], 'owner') or ''
local token = tonumber(ARGV[1])
if not (token > cur or (token == cur and ARGV[2] == curOwner)) then
  return {-1, cur}
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2])
local status = redis.call('HGET', KEYS[2], 'status')
local attempt = tonumber(redis.call('HGET', KEYS[2], 'attempt') or '0')
if status == 'succeeded' or (status and status ~= 'running' and attempt >= tonumber(ARGV[5])) then
  return {0, 0}
end
if status == 'running' and redis.call('HGET', KEYS[2], 'owner') == ARGV[2] then
  return {1, attempt} -- our own attempt, begun again after a lost reply
end
attempt = attempt + 1
redis.call('HSET', KEYS[2], 'status', 'running', 'attempt', attempt, 'token', ARGV[1],
  'owner', ARGV[2], 'started', ARGV[4], 'finished', '')
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[3])
local last = tonumber(redis.call('GET', KEYS[4]) or '0')
if tonumber(ARGV[3]) > last then redis.call('SET', KEYS[4], ARGV[3]) end
return {1, attempt}
