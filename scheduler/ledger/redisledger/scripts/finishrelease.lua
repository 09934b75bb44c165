-- finishrelease.lua: the fenced end of an attempt and the release of the
-- lease it ran under, in one script (RedisLedger.FinishRelease), where
-- they took one each. After internal/fencerule's fence.lua, fence.lua,
-- finish.lua and internal/leaselua's release.lua. The release is the
-- lease's own compare-and-delete, made whether or not the fence accepted
-- the finish: the lease is given back either way.
--
-- KEYS[1..6] as finish_attempt's K (finish.lua); KEYS[7] the lease key,
-- KEYS[8] its waiting flag (lease.RedisBackend.Keys)
-- ARGV[1..9] as finish_attempt's A; the owner ARGV[2] is the lease's.
--
-- Returns {released (1, or 0 when the key was gone or another owner's),
-- then what finish_attempt returns}.
local r = finish_attempt(KEYS, ARGV)
return {holdfast_lease_release(KEYS[7], KEYS[8], ARGV[2]), r[1], r[2] or false}
