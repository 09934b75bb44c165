-- prune.lua: close a unit's slots below a watermark and delete their
-- fences, in one step (PruneSlotScopes).
--
-- KEYS[1]  unit hash of one (resource, unit) (see slotfence.lua)
-- ARGV[1]  the new watermark, unix seconds, decimal int64
-- ARGV[2]  the resource itself (kept for operators)
-- ARGV[3]  the unit (kept for operators)
-- ARGV[4]  the cutoff's microseconds within the second ARGV[1] (0-999999)
-- ARGV[5]  the margin, microseconds (fence.PruneMargin)
--
-- First refuses a cutoff (ARGV[1] s and ARGV[4] us) later than the
-- server's clock (TIME) minus ARGV[5]: returns TIME's reply {seconds,
-- microseconds} and changes nothing (internal/prunecutoff's prelude).
-- Raises closed to ARGV[1] (never lowers it; the hash is created when
-- missing, so a unit never written is closed too), then deletes every
-- token:<slot> and owner:<slot> field whose slot is below closed. Returns
-- how many slots' tokens it deleted. Every Accept of a slot scope of the
-- unit reads closed in the same hash in its own script, so none can pass
-- a watermark once this ran, nor write a field this deleted. The work is
-- one HKEYS: O(fields of the hash), which pruning keeps bounded.
local now = holdfast_prune_cutoff_refused(ARGV[1], ARGV[4], ARGV[5])
if now then
  return now
end
local closed = redis.call('HGET', KEYS[1], 'closed')
if not closed or tonumber(ARGV[1]) > tonumber(closed) then
  closed = ARGV[1]
  redis.call('HSET', KEYS[1], 'resource', ARGV[2], 'unit', ARGV[3], 'closed', closed)
end
local limit = tonumber(closed)
local gone, n = {}, 0
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local kind, slot = string.match(f, '^(%a+):(%-?%d+)$')
  if (kind == 'token' or kind == 'owner') and tonumber(slot) < limit then
    gone[#gone + 1] = f
    if kind == 'token' then
      n = n + 1
    end
  end
end
-- HDEL in chunks: unpack is bounded by Lua's C stack (8000 values).
for i = 1, #gone, 1000 do
  redis.call('HDEL', KEYS[1], unpack(gone, i, math.min(i + 999, #gone)))
end
return n
