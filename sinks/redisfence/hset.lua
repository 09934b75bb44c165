-- hset.lua: a fenced HSET (fencerule's rule, slotscope.lua and fence.lua
-- are prepended).
--
-- KEYS[1]  the hash key
-- KEYS[2]  its fence key: FenceKey(KEYS[1]), see redisfence.go
-- ARGV[1]  token (canonical decimal)
-- ARGV[2]  owner
-- ARGV[3]  scope (the lease name of the token; '' is a scope of its own)
-- ARGV[4], ARGV[5], ...  field, value, field, value, ... (at least one pair)
--
-- Returns {1} when the rule accepted and the fields were set, {0, stored
-- token} when it refused and {2, watermark} when the scope is a closed slot
-- scope (fence.lua); nothing was written then.

local refused = holdfast_fence(KEYS[2], ARGV[3], ARGV[1], ARGV[2])
if refused then
  return refused
end
-- unpack in chunks: Lua's C stack holds a few thousand values at most.
-- A chunk has an even length and starts on a field, so pairs stay whole.
local chunk = 1000
for i = 4, #ARGV, chunk do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + chunk - 1, #ARGV)))
end
return {1}
