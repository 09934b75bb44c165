-- finish.lua: fenced end of an attempt.
--
-- KEYS[1] fence hash  KEYS[2] run hash  KEYS[3] open zset  KEYS[4] retry zset
-- ARGV[1] token  ARGV[2] owner  ARGV[3] slot  ARGV[4] attempt
-- ARGV[5] status (succeeded | failed)  ARGV[6] class  ARGV[7] error
-- ARGV[8] now (unix ms)  ARGV[9] retry at (unix ms; "" = final)
--
-- Returns {1, 0} recorded (also when this owner's attempt ended so already:
-- a re-sent call); {-1, current} stale or not this attempt's.
local ok, cur = raise(KEYS[1], ARGV[1], ARGV[2])
if not ok then return {-1, cur} end
local run = KEYS[2]
local a = 'a' .. ARGV[4] .. '.'
if redis.call('HGET', run, 'status') ~= 'running' or redis.call('HGET', run, 'owner') ~= ARGV[2]
  or redis.call('HGET', run, 'attempt') ~= ARGV[4] then
  -- Recorded already by this very call (a pipeline the client re-sent)?
  if redis.call('HGET', run, 'attempt') == ARGV[4] and redis.call('HGET', run, a .. 'owner') == ARGV[2]
    and redis.call('HGET', run, a .. 'status') == ARGV[5] then
    return {1, 0}
  end
  return {-1, cur}
end
redis.call('HSET', run, 'status', ARGV[5], 'retry_at', ARGV[9],
  a .. 'status', ARGV[5], a .. 'class', ARGV[6], a .. 'error', ARGV[7], a .. 'finished', ARGV[8])
if ARGV[5] == 'succeeded' or ARGV[9] == '' then
  redis.call('ZREM', KEYS[3], ARGV[3])
  redis.call('ZREM', KEYS[4], ARGV[3])
else
  redis.call('ZADD', KEYS[4], ARGV[9], ARGV[3])
end
return {1, 0}
