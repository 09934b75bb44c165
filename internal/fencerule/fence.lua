-- fence.lua: fence's acceptance rule in Lua, the prelude of every fenced
-- script (redisfence's writes, httpfence's RedisFence, the scheduler's Redis
-- ledger). It defines functions only and touches no key.
--
-- holdfast_accepts(stored_token, stored_owner, token, owner) reports whether
-- token presented by owner passes the rule against the stored state:
--
--   accepted iff nothing is stored (stored_token nil or false),
--             or token > stored_token,
--             or token == stored_token and owner == stored_owner.
--
-- Number model: tokens are uint64 values in canonical decimal strings (no
-- sign, no leading zero, never "0": callers refuse fence.None before
-- running a script). holdfast_token_greater compares two of them as
-- strings, the longer being the greater and equal lengths byte by byte,
-- which is exact over the whole uint64 range. Lua numbers are doubles and
-- exact only below 2^53, so tokens are never converted with tonumber.

local function holdfast_token_greater(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

local function holdfast_accepts(stored_token, stored_owner, token, owner)
  if not stored_token then
    return true
  end
  if token == stored_token then
    return owner == stored_owner
  end
  return holdfast_token_greater(token, stored_token)
end
