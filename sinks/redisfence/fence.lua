-- fence.lua: the scoped fence state, prepended to every write script of
-- package redisfence (after internal/fencerule's rule and slotscope.lua).
-- It defines functions only and touches no key itself.
--
-- holdfast_fence(fence_key, scope, token, owner) applies the rule to the
-- fence state of scope in the hash fence_key and, when it passes, raises
-- that state to (token, owner). The hash keeps one fence per scope (the
-- lease name of the token): fields "token" and "owner" for scope "", and
-- "token:<scope>" and "owner:<scope>" for any other, so tokens of different
-- scopes are never compared. It returns nil when the write is accepted, and
-- the script's refusal reply when it is refused:
--
--   {2, watermark}     scope is a slot scope of a unit U (slotscope.lua)
--                      and its slot is below the hash's field "closed:<U>"
--                      (Writer.PruneSlotScopes): the slot is closed,
--                      whatever the token;
--   {0, stored token}  otherwise, unless no state is stored, or
--                      token > stored token, or token == stored token and
--                      owner == stored owner.
--
-- A slot scope's watermark is read by the same HMGET as its fence, so a
-- write under any scope costs one read and at most one write.
--
-- The rule itself is fencerule's holdfast_accepts (internal/fencerule/
-- fence.lua, prepended before this file): tokens are canonical decimal
-- strings, compared exactly over the whole uint64 range.

local function holdfast_fence(fence_key, scope, token, owner)
  local token_field, owner_field, state = 'token', 'owner', nil
  if scope == '' then
    state = redis.call('HMGET', fence_key, token_field, owner_field)
  else
    token_field, owner_field = 'token:' .. scope, 'owner:' .. scope
    local unit, slot = holdfast_slot_scope(scope)
    if unit then
      state = redis.call('HMGET', fence_key, token_field, owner_field, 'closed:' .. unit)
      local closed = state[3]
      if closed and slot < tonumber(closed) then
        return {2, closed}
      end
    else
      state = redis.call('HMGET', fence_key, token_field, owner_field)
    end
  end
  local stored_token, stored_owner = state[1], state[2]
  if not holdfast_accepts(stored_token, stored_owner, token, owner) then
    return {0, stored_token}
  end
  if token == stored_token then
    return nil -- the same holder again: nothing to raise
  end
  redis.call('HSET', fence_key, token_field, token, owner_field, owner)
  return nil
end
