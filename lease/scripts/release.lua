-- release.lua: delete a lease that we still own (compare-and-delete), and
-- wake its waiters.
--
-- KEYS[1]  lease key     <prefix>{<name>}
-- KEYS[2]  waiting flag  <prefix>{<name>}:waiting
-- ARGV[1]  owner
--
-- The flag, set by the tries of blocked acquisitions (acquire.lua), goes
-- with the lease key; only when it was there does the release publish on
-- <prefix>{<name>}:released (built here, so the client sends no channel
-- name). A release nobody waits for costs no PUBLISH, which on a Cluster
-- goes to every node.
-- Returns 1 when deleted, 0 when the key is gone or owned by someone else.
-- The fence counter is kept: the next holder's token must be larger.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if redis.call('DEL', KEYS[1], KEYS[2]) == 2 then
    redis.call('PUBLISH', KEYS[1] .. ':released', '1')
  end
  return 1
end
return 0
