-- skip.lua: fenced record of a slot that policy does not run.
--
-- KEYS[1] the fence of the scope (the unit hash, or the slot's fence hash)
-- KEYS[2] run hash  KEYS[3] unit hash  KEYS[4] index zset
-- ARGV[1] token  ARGV[2] owner  ARGV[3] slot  ARGV[4] status (skipped | missed)
-- ARGV[5] reason  ARGV[6] now (unix ms)
--
-- Returns {1, 0} recorded; {0, 0} the slot was begun before (unchanged);
-- {-1, current} stale.
local ok, cur = raise(KEYS[1], ARGV[1], ARGV[2])
if not ok then return {-1, cur} end
if redis.call('HGET', KEYS[3], 'hot') == ARGV[3] then return {0, 0} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {0, 0} end
redis.call('HSET', KEYS[2], 'status', ARGV[4], 'reason', ARGV[5], 'attempt', 0, 'base', 0, 'updated', ARGV[6])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[3])
mark(KEYS[3], ARGV[3])
return {1, 0}
