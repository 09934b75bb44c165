-- claim.lua: Begin of a scheduled slot when nothing else is due for its
-- (job, partition) (RedisLedger.BeginIfClear): one round trip where State
-- and Begin take two. Prepended in Go by the two fence.lua and begin.lua.
--
-- KEYS[1..7] as begin.lua; KEYS[8] horizon; KEYS[9] the job's pause flag
-- (<prefix>{<job>}:paused: another hash tag, so never used on Cluster)
-- ARGV[1..5] as begin.lua; ARGV[6] the schedule's fire before the slot
-- (unix s); ARGV[7] since (unix s): open slots before it are not due
--
-- Returns {2} when something else needs planning (paused, another open or
-- pending slot, the slot waiting for its retry time, or a slot between the
-- last one seen and this one that nobody began): nothing changed but the
-- horizon, set as State sets it. Otherwise what begin_attempt returns.
redis.call('SET', KEYS[8], ARGV[4], 'NX')
if redis.call('EXISTS', KEYS[9]) == 1 then return {2} end
local slot = ARGV[3]
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], ARGV[7], '+inf', 'LIMIT', 0, 2)) do
  if m ~= slot then return {2} end
end
for _, m in ipairs(redis.call('ZRANGE', KEYS[6], 0, 1)) do
  if m ~= slot then return {2} end
end
local retry = redis.call('ZSCORE', KEYS[7], slot)
if retry and tonumber(retry) > tonumber(ARGV[4]) then return {2} end
local last = tonumber(redis.call('GET', KEYS[4]) or '0')
if last ~= 0 and last < tonumber(ARGV[6]) then return {2} end
return begin_attempt(KEYS, ARGV)
