-- release.lua: the lease's release as a function, the prelude of the
-- lease package's release script and of every other script that gives
-- back a lease in its own round trip. It defines a function only and
-- touches no key.
--
-- holdfast_lease_release(lease_key, waiting_key, owner) deletes a lease
-- that owner still holds (compare-and-delete), and wakes its waiters.
-- The flag waiting_key, set by the tries of blocked acquisitions (the
-- lease package's acquire.lua), goes with the lease key; only when it was
-- there does the release publish on <lease_key>:released. A release
-- nobody waits for costs no PUBLISH, which on a Cluster goes to every
-- node. The fence counter is kept: the next holder's token must be
-- larger. Returns 1 when deleted, 0 when the key is gone or owned by
-- someone else.
local function holdfast_lease_release(lease_key, waiting_key, owner)
  if redis.call('GET', lease_key) == owner then
    if redis.call('DEL', lease_key, waiting_key) == 2 then
      redis.call('PUBLISH', lease_key .. ':released', '1')
    end
    return 1
  end
  return 0
end
