-- finishall.lua: the ends of several runs joined in one script
-- (RedisLedger.FinishRelease, when concurrent runs end together): for
-- each, what finishrelease.lua does, the fenced end of its attempt and the
-- release of its lease. After internal/fencerule's fence.lua, fence.lua,
-- finish.lua and internal/leaselua's release.lua. Off on Cluster, where the
-- units' keys are in different slots.
--
-- ARGV[1] n, the runs; then per run the 9 values of finish_attempt's A
-- (finish.lua; the owner A[2] is the lease's).
-- KEYS per run, 2: the lease key (redislease.Keys.Lease; its waiting flag
-- is it with ":waiting") and the unit's key base (<prefix>{<unit>}:):
-- finish_attempt's K are the base's unit, run:<slot>, open, retry, unit
-- and index (a joined finish is of the unit scope, whose fence is the
-- unit hash). The keys a run's commands touch all share its hash tag.
--
-- Returns 3 values per run: as finishrelease.lua, {released (1, or 0 when
-- the key was gone or another owner's), finish_attempt's code, its
-- current token or false}; or, when a command of the run failed (a key of
-- the wrong type), {-1, 0, the error's message}: a run's error is its
-- own, the others are made.
local function one(K, A, lease_key, waiting_key)
  local r = finish_attempt(K, A)
  return holdfast_lease_release(lease_key, waiting_key, A[2]), r[1], r[2] or false
end
local out, o, ki, ai = {}, 0, 0, 1
for _ = 1, tonumber(ARGV[1]) do
  local lease, b = KEYS[ki + 1], KEYS[ki + 2]
  local A = {ARGV[ai + 1], ARGV[ai + 2], ARGV[ai + 3], ARGV[ai + 4], ARGV[ai + 5],
    ARGV[ai + 6], ARGV[ai + 7], ARGV[ai + 8], ARGV[ai + 9]}
  local unit = b .. 'unit'
  -- finish_attempt's K; its open and retry keys are made when needed
  local K = {unit, b .. 'run:' .. A[3], false, false, unit, b .. 'index'}
  local ok, released, code, cur = pcall(one, K, A, lease, lease .. ':waiting')
  if not ok then
    local e = released -- read before released is set: gopher-lua (miniredis) assigns left to right
    cur = type(e) == 'table' and (e.err or '?') or tostring(e)
    released, code = -1, 0
  end
  out[o + 1], out[o + 2], out[o + 3] = released, code, cur
  o, ki, ai = o + 3, ki + 2, ai + 9
end
return out
