-- slotscope.lua: the parse of slot scopes, prepended to every write script
-- of package redisfence and to prune.lua. It defines functions only and
-- touches no key.
--
-- holdfast_slot_scope(scope) returns the unit and the slot (a number) of
-- scope when it is a slot scope, "<unit>@<unix seconds>", and nil
-- otherwise. It is fence.SplitSlotScope's rule, to the byte:
--
--   unit  everything before the LAST '@', not empty;
--   slot  the rest: a canonical decimal integer, '0' or an optional '-'
--         and a non-zero digit then digits (no '+', no leading zeros, no
--         space, no "-0"), at most 15 digits (fence.MaxSlotDigits).
--
-- 15 digits stay below 2^53, so the slot is an exact Lua number and
-- compares exactly with a watermark (Writer.PruneSlotScopes keeps those
-- within +-10^15). The patterns use [0-9], never %d, and '.' matches
-- every byte, so no locale or byte value changes the parse.

local function holdfast_slot_scope(scope)
  -- A plain search first: a scope shorter than "u@0" or with no '@' past
  -- its first byte (a unit's own scope, "settle|eu") is no slot scope, and
  -- costs no pattern.
  if #scope < 3 or not string.find(scope, '@', 2, true) then
    return nil
  end
  -- '.+' is greedy and the slot holds no '@': the '@' matched is the last.
  local unit, slot = string.match(scope, '^(.+)@(%-?[1-9][0-9]*)$')
  if not unit then
    unit, slot = string.match(scope, '^(.+)@(0)$')
    if not unit then
      return nil
    end
  end
  local digits = #slot
  if string.sub(slot, 1, 1) == '-' then
    digits = digits - 1
  end
  if digits > 15 then
    return nil
  end
  return unit, tonumber(slot)
end
