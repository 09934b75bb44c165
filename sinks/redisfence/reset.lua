-- reset.lua: remove the fence state of one scope of a resource, for an
-- operator (Writer.Reset), when it still holds the token inspected.
--
-- KEYS[1]  the fence key: FenceKey(resource), the resource's fence hash
-- ARGV[1]  scope (fields "token"/"owner" for '', else "token:<scope>" and
--          "owner:<scope>", as in fence.lua)
-- ARGV[2]  the expected token in canonical decimal, or '' for any
--
-- Returns {0} when no state is stored, {1, token} after removing it, and
-- {2, token} when the stored token is not the expected one (nothing is
-- changed).

local token_field, owner_field = 'token', 'owner'
if ARGV[1] ~= '' then
  token_field, owner_field = 'token:' .. ARGV[1], 'owner:' .. ARGV[1]
end
local stored = redis.call('HGET', KEYS[1], token_field)
if not stored then
  return {0}
end
if ARGV[2] ~= '' and stored ~= ARGV[2] then
  return {2, stored}
end
redis.call('HDEL', KEYS[1], token_field, owner_field)
return {1, stored}
