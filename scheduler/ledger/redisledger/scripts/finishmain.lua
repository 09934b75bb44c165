-- finishmain.lua: the body of the Finish script (RedisLedger.Finish), after
-- fence.lua and finish.lua.
--
-- KEYS[1..6] and ARGV[1..9] as finish_attempt's K and A (finish.lua).
return finish_attempt(KEYS, ARGV)
