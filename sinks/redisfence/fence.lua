-- fence.lua: the acceptance rule, prepended to every write script of
-- package redisfence. It defines functions only and touches no key itself.
--
-- holdfast_fence(fence_key, scope, token, owner) applies the rule to the
-- fence state of scope in the hash fence_key and, when it passes, raises
-- that state to (token, owner). The hash keeps one fence per scope (the
-- lease name of the token): fields "token" and "owner" for scope "", and
-- "token:<scope>" and "owner:<scope>" for any other, so tokens of different
-- scopes are never compared. It returns nil when the write is accepted and
-- the scope's stored token (a string) when it is refused:
--
--   accepted iff no state is stored, or token > stored token,
--                or token == stored token and owner == stored owner.
--
-- Tokens are uint64 values in canonical decimal (no sign, no leading zero,
-- never "0": the Go side refuses token 0 before calling). They are compared
-- as strings, shorter first: exact over the whole uint64 range, where Lua
-- numbers (doubles) are exact only below 2^53.

local function holdfast_greater(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

local function holdfast_fence(fence_key, scope, token, owner)
  local token_field, owner_field = 'token', 'owner'
  if scope ~= '' then
    token_field, owner_field = 'token:' .. scope, 'owner:' .. scope
  end
  local state = redis.call('HMGET', fence_key, token_field, owner_field)
  local stored_token, stored_owner = state[1], state[2]
  if stored_token then
    if token == stored_token then
      if owner == stored_owner then
        return nil -- the same holder again: nothing to raise
      end
      return stored_token
    end
    if not holdfast_greater(token, stored_token) then
      return stored_token
    end
  end
  redis.call('HSET', fence_key, token_field, token, owner_field, owner)
  return nil
end

