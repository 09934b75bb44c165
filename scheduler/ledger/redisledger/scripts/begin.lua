-- begin.lua: fenced start of a slot's next attempt: begin_attempt(KEYS, ARGV),
-- shared by the Begin script and the claim script (claim.lua).
--
-- KEYS[1] the fence of the scope (the unit hash, or the slot's fence hash)
-- KEYS[2] run hash  KEYS[3] open zset  KEYS[4] unit hash  KEYS[5] index
-- zset  KEYS[6] pending zset  KEYS[7] retry zset
-- (all <prefix>{<job>|<partition>}:...)
-- ARGV[1] token  ARGV[2] owner  ARGV[3] slot (unix s)  ARGV[4] now (unix ms)
-- ARGV[5] max attempts since the last request
--
-- holder is the holder label (ledger.Fence.Holder) stored with a new
-- attempt as a<n>.holder (nil or '': none).
--
-- seen, when given, is what the caller read in this script already: its
-- run the run hash's HMGET of status, attempt, base and owner, its last the
-- unit's last (false: none), its pending and retry false when the slot is
-- in neither zset (nothing to remove), and its cold true when the unit has
-- no hot run (fence.lua); otherwise the hot run is written out first.
--
-- Returns {1, attempt, left} started (left: attempts the budget allows after
-- this one); {0, 0} nothing to do; {-1, current} stale.
local function begin_attempt(K, A, seen, holder)
  seen = seen or {}
  if not seen.cold and unhot(K[4]) then seen.run = nil end
  local ok, cur = raise(K[1], A[1], A[2])
  if not ok then return {-1, cur} end
  local run = K[2]
  local cur_run = seen.run or redis.call('HMGET', run, 'status', 'attempt', 'base', 'owner')
  local status = cur_run[1]
  local attempt = tonumber(cur_run[2] or '0')
  local base = tonumber(cur_run[3] or '0')
  if status == 'succeeded' or status == 'skipped' or status == 'missed' then
    return {0, 0}
  end
  if status == 'failed' and not redis.call('ZSCORE', K[3], A[3]) then
    -- Failed for good; a retry entry left by an older build goes.
    if seen.retry ~= false then redis.call('ZREM', K[7], A[3]) end
    return {0, 0}
  end
  if status == 'running' then
    if cur_run[4] == A[2] then
      return {1, attempt, tonumber(A[5]) - (attempt - base)} -- ours, begun again after a lost reply
    end
    -- Its holder lost the lease: it is abandoned.
    redis.call('HSET', run, 'a' .. attempt .. '.status', 'abandoned', 'a' .. attempt .. '.finished', A[4])
  end
  if attempt - base >= tonumber(A[5]) then
    redis.call('HSET', run, 'status', status == 'running' and 'abandoned' or status)
    redis.call('ZREM', K[3], A[3])
    redis.call('ZREM', K[6], A[3])
    -- Spent: its retry entry goes too (State lists a retry due within
    -- the window whatever the slot's age, so a stale one would list it).
    if seen.retry ~= false then redis.call('ZREM', K[7], A[3]) end
    return {0, 0}
  end
  attempt = attempt + 1
  local a = 'a' .. attempt .. '.'
  redis.call('HSET', run, 'status', 'running', 'attempt', attempt, 'base', base, 'owner', A[2],
    a .. 'owner', A[2], a .. 'token', A[1], a .. 'status', 'running',
    a .. 'started', A[4], a .. 'hb', A[4])
  if holder and holder ~= '' then
    redis.call('HSET', run, a .. 'holder', holder)
  end
  redis.call('ZADD', K[3], A[3], A[3])
  redis.call('ZADD', K[5], A[3], A[3])
  if seen.pending ~= false then redis.call('ZREM', K[6], A[3]) end
  if seen.retry ~= false then redis.call('ZREM', K[7], A[3]) end
  mark(K[4], A[3], seen.last)
  return {1, attempt, tonumber(A[5]) - (attempt - base)}
end
