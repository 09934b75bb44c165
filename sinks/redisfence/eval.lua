-- eval.lua: the end of a caller's fenced script. Before it come
-- fencerule's rule, slotscope.lua, fence.lua, and the caller's body made
-- into the function holdfast_body(KEYS, ARGV) (see NewScript).
--
-- KEYS[1 .. n-1]  the caller's keys; KEYS[1] is the fenced resource
-- KEYS[n]         the fence key: FenceKey(KEYS[1]), see redisfence.go
-- ARGV[1]         token (canonical decimal)
-- ARGV[2]         owner
-- ARGV[3]         scope (the lease name of the token)
-- ARGV[4 ..]      the caller's arguments
--
-- The body runs only when the rule accepts, after the fence is raised, and
-- sees KEYS and ARGV as the caller passed them (without the fence key,
-- token, owner and scope).
--
-- Returns {1, what the body returned} when it ran (a body returning nil or
-- false gives {1}), {0, stored token} when the rule refused and {2,
-- watermark} when the scope is a closed slot scope (fence.lua); nothing ran
-- then.

local n = #KEYS
local refused = holdfast_fence(KEYS[n], ARGV[3], ARGV[1], ARGV[2])
if refused then
  return refused
end
return {1, holdfast_body({unpack(KEYS, 1, n - 1)}, {unpack(ARGV, 4)})}
