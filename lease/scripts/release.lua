-- release.lua: delete a lease that we still own (compare-and-delete), and
-- wake the waiters.
--
-- KEYS[1]  lease key  <prefix>{<name>}
-- ARGV[1]  owner
--
-- Publishes on the channel <prefix>{<name>}:released (built here, so the
-- client sends no channel name).
-- Returns 1 when deleted, 0 when the key is gone or owned by someone else.
-- The fence counter is kept: the next holder's token must be larger.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', '1')
  return 1
end
return 0
