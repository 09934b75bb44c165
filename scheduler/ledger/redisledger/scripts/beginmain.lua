-- beginmain.lua: the body of the Begin script (RedisLedger.Begin), after
-- the two fence.lua and begin.lua.
--
-- KEYS[1..7] and ARGV[1..5] as begin.lua; ARGV[6] the holder label of
-- the attempt ('' for none); with a Fence.Planner, KEYS[8] the pair's fence
-- hash and ARGV[7] token, ARGV[8] owner of the unit fence, checked and
-- raised first.
--
-- Returns what begin_attempt returns, or {-2, current} when the unit fence
-- refuses.
if KEYS[8] then
  local ok, cur = raise(KEYS[8], ARGV[7], ARGV[8])
  if not ok then return {-2, cur} end
end
return begin_attempt(KEYS, ARGV, nil, ARGV[6])
