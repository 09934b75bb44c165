-- release.lua: on one node, delete the lease key if it still holds our
-- owner, and wake the waiters subscribed on this node. It replaces redsync's
-- delete script in Backend.Release, with the same replies.
--
-- KEYS[1]  lease key  <prefix>{<name>}
-- ARGV[1]  owner
--
-- Returns 1 when deleted, -1 when the key is gone, 0 when another owner
-- holds it. The release channel is KEYS[1] .. ':released', as in package
-- lease. The fence counter is kept: the next holder's token must be larger.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', '1')
  return 1
elseif holder == false then
  return -1
end
return 0
