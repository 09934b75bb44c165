-- prune.lua: deletes the done records of one batch of slots of one
-- (job, partition) (ledger.Pruner), with each one's own fence (fence:<unix>,
-- OverlapAllow's; the slot is then closed, see fence.lua). Not fenced: it
-- never touches the pair's fence, the horizon, the pause flag, or a slot
-- that still needs an attempt.
--
-- KEYS[1] index zset  KEYS[2] open zset  KEYS[3] pending zset  KEYS[4] unit hash
-- KEYS[4+i] run hash of ARGV[1+i]  (all <prefix>{<job>|<partition>}:...)
-- ARGV[1] mode: "delete", or "list" (a dry run: PrunePreview)
-- ARGV[1+i] slot (unix s), a member of the index
--
-- A slot is done when its status is succeeded, skipped, missed or
-- abandoned, or failed and no longer open (no retry left). The latest slot
-- (the unit's last) and every open or pending slot are kept, whatever their status
-- says. Returns how many records it deleted; in "list" mode it writes
-- nothing and returns the slots it would delete.
local list = ARGV[1] == 'list'
local last = redis.call('HGET', KEYS[4], 'last')
local n = 0
local would = {}
for i = 1, #ARGV - 1 do
  local slot = ARGV[1 + i]
  local run = KEYS[4 + i]
  local status = redis.call('HGET', run, 'status')
  local open = redis.call('ZSCORE', KEYS[2], slot) or redis.call('ZSCORE', KEYS[3], slot)
  if not status then
    if not open and not list then redis.call('ZREM', KEYS[1], slot) end -- an index entry without a record
  elseif slot ~= last and not open and (status == 'succeeded' or status == 'skipped'
      or status == 'missed' or status == 'abandoned' or status == 'failed') then
    if list then
      would[#would + 1] = slot
    else
      -- The slot's own fence (OverlapAllow) goes with it: the slot is
      -- before the cutoff, and fence.lua's raise refuses every token for
      -- a slot before the cutoff whose fence is missing.
      redis.call('DEL', run, string.sub(run, 1, #run - #('run:' .. slot)) .. 'fence:' .. slot)
      redis.call('ZREM', KEYS[1], slot)
    end
    n = n + 1
  end
end
if list then return would end
return n
