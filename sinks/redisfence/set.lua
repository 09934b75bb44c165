-- set.lua: a fenced SET (fencerule's rule, slotscope.lua and fence.lua
-- are prepended).
--
-- KEYS[1]  the value key
-- KEYS[2]  its fence key: FenceKey(KEYS[1]), see redisfence.go
-- ARGV[1]  token (canonical decimal)
-- ARGV[2]  owner
-- ARGV[3]  scope (the lease name of the token; '' is a scope of its own)
-- ARGV[4]  value
-- ARGV[5]  expiry of the value key in milliseconds: '0' none, '-1' keep the
--          key's current TTL (KEEPTTL)
--
-- Returns {1} when the rule accepted and the value was set, {0, stored
-- token} when it refused and {2, watermark} when the scope is a closed slot
-- scope (fence.lua); nothing was written then.

local refused = holdfast_fence(KEYS[2], ARGV[3], ARGV[1], ARGV[2])
if refused then
  return refused
end
local ttl = ARGV[5]
if ttl == '0' then
  redis.call('SET', KEYS[1], ARGV[4])
elseif ttl == '-1' then
  redis.call('SET', KEYS[1], ARGV[4], 'KEEPTTL')
else
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ttl)
end
return {1}
