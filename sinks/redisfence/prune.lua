-- prune.lua: close the slot scopes of one unit of a resource below a
-- watermark and delete their fences (Writer.PruneSlotScopes; prunecutoff.lua
-- and slotscope.lua are prepended).
--
-- KEYS[1]  the fence key: FenceKey(the resource key), see redisfence.go
-- ARGV[1]  the unit (not empty)
-- ARGV[2]  the watermark: unix seconds, a canonical decimal within
--          +-10^15 (exact as a Lua number)
-- ARGV[3]  the cutoff's microseconds within the second ARGV[2] (0-999999)
-- ARGV[4]  the margin, microseconds (fence.PruneMargin)
--
-- First refuses a cutoff (ARGV[2] s and ARGV[3] us) later than the
-- server's clock (TIME) minus ARGV[4]: returns TIME's reply {seconds,
-- microseconds} and changes nothing (prunecutoff.lua).
-- Raises field "closed:<unit>" to the greater of its value and ARGV[2]
-- (never lowers it), then deletes fields "token:<s>" and "owner:<s>" of
-- every slot scope s of the unit (slotscope.lua) whose slot is below the
-- field's value. Every write script reads the field with the scope's fence
-- (fence.lua), so a deleted fence's scope stays closed. HKEYS walks the
-- whole hash: it holds the resource's scopes, which the pruning bounds.
--
-- Returns the number of scopes whose fences it deleted.

local now = holdfast_prune_cutoff_refused(ARGV[2], ARGV[3], ARGV[4])
if now then
  return now
end
local unit, field = ARGV[1], 'closed:' .. ARGV[1]
local closed = redis.call('HGET', KEYS[1], field)
if not closed or tonumber(closed) < tonumber(ARGV[2]) then
  closed = ARGV[2]
  redis.call('HSET', KEYS[1], field, closed)
end
local watermark = tonumber(closed)

local gone, n = {}, 0
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 6) == 'token:' then
    local scope = string.sub(f, 7)
    local u, slot = holdfast_slot_scope(scope)
    if u == unit and slot < watermark then
      n = n + 1
      gone[#gone + 1] = f
      gone[#gone + 1] = 'owner:' .. scope
    end
  end
end
-- HDEL in chunks: Lua's C stack holds a few thousand values at most.
local chunk = 1000
for i = 1, #gone, chunk do
  redis.call('HDEL', KEYS[1], unpack(gone, i, math.min(i + chunk - 1, #gone)))
end
return n
