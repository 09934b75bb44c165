-- claim.lua: Begin of a scheduled slot when nothing else is due for its
-- (job, partition) (RedisLedger.BeginIfClear): one round trip where State
-- and Begin take two. Prepended in Go by the two fence.lua, begin.lua and
-- clear.lua.
--
-- KEYS[1..9] and ARGV[1..7] as begin_if_clear's K and A (clear.lua), the
-- pause flag KEYS[9] always given (so never used on Cluster).
--
-- Returns what begin_if_clear returns.
return begin_if_clear(KEYS, ARGV)
