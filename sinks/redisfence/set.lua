-- set.lua: a fenced SET (fence.lua is prepended).
--
-- KEYS[1]  the value key
-- KEYS[2]  its fence key: KEYS[1] .. ':fence'
-- ARGV[1]  token (canonical decimal)
-- ARGV[2]  owner
-- ARGV[3]  value
-- ARGV[4]  expiry of the value key in milliseconds: '0' none, '-1' keep the
--          key's current TTL (KEEPTTL)
--
-- Returns {1} when the rule accepted and the value was set, {0, stored
-- token} when it refused and nothing was written.

local refused = holdfast_fence(KEYS[2], ARGV[1], ARGV[2])
if refused then
  return {0, refused}
end
local ttl = ARGV[4]
if ttl == '0' then
  redis.call('SET', KEYS[1], ARGV[3])
elseif ttl == '-1' then
  redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ttl)
end
return {1}
