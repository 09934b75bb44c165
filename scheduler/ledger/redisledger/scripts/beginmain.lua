-- beginmain.lua: the body of the Begin script (RedisLedger.Begin), after
-- the two fence.lua and begin.lua.
--
-- KEYS[1..7] and ARGV[1..5] as begin.lua; with a Fence.Unit, KEYS[8] the
-- pair's fence hash and ARGV[6] token, ARGV[7] owner of the unit fence,
-- checked and raised first.
--
-- Returns what begin_attempt returns, or {-2, current} when the unit fence
-- refuses.
if KEYS[8] then
  local ok, cur = raise(KEYS[8], ARGV[6], ARGV[7])
  if not ok then return {-2, cur} end
end
return begin_attempt(KEYS, ARGV)
