-- current.lua: read the fence state of one scope of a resource.
--
-- KEYS[1]  the fence key: FenceKey(the resource key), see redisfence.go
-- ARGV[1]  scope (fields "token"/"owner" for '', else "token:<scope>" and
--          "owner:<scope>", as in fence.lua)
--
-- Returns {token, owner}, each nil when nothing was ever accepted.

if ARGV[1] == '' then
  return redis.call('HMGET', KEYS[1], 'token', 'owner')
end
return redis.call('HMGET', KEYS[1], 'token:' .. ARGV[1], 'owner:' .. ARGV[1])
