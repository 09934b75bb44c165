-- release.lua: delete a lease that we still own (compare-and-delete), and
-- wake its waiters: holdfast_lease_release of internal/leaselua's
-- release.lua, prepended in Go.
--
-- KEYS[1]  lease key     <prefix>{<name>}
-- KEYS[2]  waiting flag  <prefix>{<name>}:waiting
-- ARGV[1]  owner
--
-- Returns 1 when deleted, 0 when the key is gone or owned by someone else.
return holdfast_lease_release(KEYS[1], KEYS[2], ARGV[1])
