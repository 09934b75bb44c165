-- fence.lua: the fence acceptance rule, checked and raised in one step
-- (internal/fencerule's rule is prepended).
--
-- KEYS[1]  fence record of one (resource, scope):
--          <prefix>{<sha256(len(scope) ":" scope ":" resource)>}, for
--          scope "" too (len 0), so that no (resource, scope) names another
--          hash: resource, scope, token (canonical decimal uint64), owner;
--          no TTL. A slot scope's fence is in its unit's hash instead
--          (slotfence.lua).
-- ARGV[1]  presented token, canonical decimal (no sign, no leading zero),
--          never "0" (the caller refuses fence.None)
-- ARGV[2]  presenting owner
-- ARGV[3]  the resource itself (kept for operators; not compared)
-- ARGV[4]  the scope (kept for operators; the key already tells scopes apart)
--
-- Returns {1} when accepted (holdfast_accepts: token > stored, or token ==
-- stored and owner == stored owner; the record now holds the token and
-- owner), {0, current} when refused. Tokens are compared exactly over the
-- whole uint64 range, as decimal strings (see internal/fencerule).
local cur = redis.call('HMGET', KEYS[1], 'token', 'owner')
if holdfast_accepts(cur[1], cur[2], ARGV[1], ARGV[2]) then
  redis.call('HSET', KEYS[1], 'resource', ARGV[3], 'scope', ARGV[4], 'token', ARGV[1], 'owner', ARGV[2])
  return {1}
end
return {0, cur[1]}
