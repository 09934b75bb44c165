-- request.lua: an operator asks for a new attempt of a slot (not fenced).
--
-- KEYS[1] run hash  KEYS[2] open zset  KEYS[3] index zset  KEYS[4] pending zset
-- KEYS[5] retry zset  KEYS[6] unit hash
-- ARGV[1] slot  ARGV[2] reason  ARGV[3] now (unix ms)
--
-- Returns 1 when the slot is pending; -2 when it is running (its run hash
-- says so, or it is the unit's hot run: see redisledger's fence.lua).
local run = KEYS[1]
if redis.call('HGET', KEYS[6], 'hot') == ARGV[1] then return -2 end
if redis.call('HGET', run, 'status') == 'running' then return -2 end
local attempt = tonumber(redis.call('HGET', run, 'attempt') or '0')
redis.call('HSET', run, 'status', 'pending', 'attempt', attempt, 'base', attempt,
  'reason', ARGV[2], 'retry_at', '', 'updated', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[1], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
return 1
