-- slotfence.lua: the fence acceptance rule for a slot scope
-- ("<unit>@<slot>", fence.SplitSlotScope), checked against the unit's
-- watermark and the slot's fence and raised in one step (internal/
-- fencerule's rule is prepended).
--
-- KEYS[1]  unit hash of one (resource, unit):
--          <prefix>{<sha256("@" len(unit) ":" unit ":" resource)>}, without
--          TTL: resource, unit (for operators), closed (the watermark, unix
--          seconds, once PruneSlotScopes ran), and per slot token:<slot>
--          (canonical decimal uint64) and owner:<slot>.
-- ARGV[1]  presented token, canonical decimal (no sign, no leading zero),
--          never "0" (the caller refuses fence.None)
-- ARGV[2]  presenting owner
-- ARGV[3]  the resource itself (kept for operators; not compared)
-- ARGV[4]  the unit (kept for operators; the key already tells units apart)
-- ARGV[5]  the slot, unix seconds, canonical decimal of at most 15 digits
--          (fence.MaxSlotDigits): exact as a Lua number
--
-- Returns {2, closed} when the slot is below the watermark (nothing is
-- written, whatever the token), {1} when accepted (holdfast_accepts, as
-- fence.lua; the slot's fields now hold the token and owner), {0, current}
-- when refused by the rule. closed may be any int64 in decimal: a double
-- rounds it, but never across a slot, since every slot is below 2^53.
local tf, of = 'token:' .. ARGV[5], 'owner:' .. ARGV[5]
local cur = redis.call('HMGET', KEYS[1], tf, of, 'closed')
if cur[3] and tonumber(ARGV[5]) < tonumber(cur[3]) then
  return {2, cur[3]}
end
if holdfast_accepts(cur[1], cur[2], ARGV[1], ARGV[2]) then
  redis.call('HSET', KEYS[1], 'resource', ARGV[3], 'unit', ARGV[4], tf, ARGV[1], of, ARGV[2])
  return {1}
end
return {0, cur[1]}
