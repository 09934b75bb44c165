-- heartbeat.lua: fenced heartbeat of a running attempt.
--
-- KEYS[1] the fence of the scope (the unit hash, or the slot's fence hash)
-- KEYS[2] run hash  KEYS[3] cancel request (a slot, unix s)  KEYS[4] unit
-- hash
-- ARGV[1] token  ARGV[2] owner  ARGV[3] attempt  ARGV[4] now (unix ms)
-- ARGV[5] this slot (unix s)
--
-- The heartbeat of its owner's hot run (fence.lua) is written in the unit
-- hash (hot.hb).
--
-- Returns {1, 0} recorded; {2, 0} recorded, and a later slot asked to
-- replace this one; {-1, current} stale or not this attempt's.
local ok, cur = raise(KEYS[1], ARGV[1], ARGV[2])
if not ok then return {-1, cur} end
local h = redis.call('HMGET', KEYS[4], 'hot', 'hot.owner')
if h[1] == ARGV[5] and h[2] == ARGV[2] and ARGV[3] == '1' and KEYS[1] == KEYS[4] then
  redis.call('HSET', KEYS[4], 'hot.hb', ARGV[4])
else
  local run = KEYS[2]
  local cur_run = redis.call('HMGET', run, 'status', 'owner', 'attempt')
  if cur_run[1] ~= 'running' or cur_run[2] ~= ARGV[2] or cur_run[3] ~= ARGV[3] then
    return {-1, cur}
  end
  redis.call('HSET', run, 'a' .. ARGV[3] .. '.hb', ARGV[4])
end
if tonumber(redis.call('GET', KEYS[3]) or '0') > tonumber(ARGV[5]) then
  return {2, 0}
end
return {1, 0}
