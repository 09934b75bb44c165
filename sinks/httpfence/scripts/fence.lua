-- fence.lua: the fence acceptance rule, checked and raised in one step.
--
-- KEYS[1]  fence record of one (resource, scope):
--          <prefix>{<sha256(len(scope) ":" scope ":" resource)>}, or
--          <prefix>{<sha256(resource)>} for scope "" (the pre-scope name)
--          hash: resource, scope, token (canonical decimal uint64), owner;
--          no TTL.
-- ARGV[1]  presented token, canonical decimal (no sign, no leading zero),
--          never "0" (the caller refuses fence.None)
-- ARGV[2]  presenting owner
-- ARGV[3]  the resource itself (kept for operators; not compared)
-- ARGV[4]  the scope (kept for operators; the key already tells scopes apart)
--
-- Returns {1} when accepted (token > stored, or token == stored and owner ==
-- stored owner; the record now holds the token and owner), {0, current}
-- when refused. Tokens are compared as decimal strings (longer is larger,
-- then byte by byte), so the whole uint64 range is exact: Lua numbers are
-- doubles and would round above 2^53.
local cur = redis.call('HMGET', KEYS[1], 'token', 'owner')
local t, c = ARGV[1], cur[1]

local function greater(a, b)
  if #a ~= #b then
    return #a > #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return false
end

if not c or greater(t, c) or (t == c and cur[2] == ARGV[2]) then
  redis.call('HSET', KEYS[1], 'resource', ARGV[3], 'scope', ARGV[4], 'token', t, 'owner', ARGV[2])
  return {1}
end
return {0, c}
