-- current.lua: read the fence state of a resource.
--
-- KEYS[1]  the fence key: the resource's key .. ':fence'
--
-- Returns {token, owner}, each nil when nothing was ever accepted.

return redis.call('HMGET', KEYS[1], 'token', 'owner')
