-- clear.lua: begin_if_clear(K, A), Begin of a scheduled slot when nothing
-- else is due for its (job, partition), shared by the claim script
-- (claim.lua, RedisLedger.BeginIfClear) and the joined claim script
-- (claimall.lua, RedisLedger.ClaimAll). After fence.lua and begin.lua.
--
-- K[1..7] as begin.lua; K[8] horizon; K[9] the job's pause flag
-- (<prefix>{<job>}:paused: another hash tag than the rest on Cluster,
-- where the caller reads it beforehand and passes no K[9])
-- A[1..5] as begin.lua; A[6] the schedule's fire before the slot
-- (unix s); A[7] since (unix s): open slots before it are not due
--
-- run, when given, is the run hash's HMGET of status, attempt, base and
-- owner, read in this script already (begin_attempt's seen.run); holder
-- the attempt's holder label (begin_attempt's).
--
-- seen (unix s, '0' or nil for none) is the latest slot the caller knows
-- the ledger recorded (ledger.BeginRequest.Seen).
--
-- Returns {2} when something else needs planning (paused, another open or
-- pending slot, the slot waiting for its retry time, a slot between the
-- last one seen and this one that nobody began, or a last slot missing or
-- before seen: the store lost data the caller saw, which only a State
-- read, compared with what it saw, tells): nothing changed but the
-- horizon, set as State sets it. Otherwise what begin_attempt returns.
local function begin_if_clear(K, A, run, holder, seen)
  local floor = tonumber(seen or '0') or 0
  local last = redis.call('GET', K[4])
  if not last then
    -- A unit with a last slot had its horizon set when that slot began.
    redis.call('SET', K[8], A[4], 'NX')
  end
  -- The common case, nothing paused, open, pending or waiting for a
  -- retry, costs one EXISTS over the four keys rather than a read each.
  local found
  if K[9] then
    found = redis.call('EXISTS', K[3], K[6], K[7], K[9])
  else
    found = redis.call('EXISTS', K[3], K[6], K[7])
  end
  if found == 0 then
    local n = tonumber(last or '0')
    if n < floor or (n ~= 0 and n < tonumber(A[6])) then return {2} end
    return begin_attempt(K, A, {run = run, last = last, pending = false, retry = false}, holder)
  end
  if K[9] and redis.call('EXISTS', K[9]) == 1 then return {2} end
  local slot = A[3]
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', K[3], A[7], '+inf', 'LIMIT', 0, 2)) do
    if m ~= slot then return {2} end
  end
  local pending = false
  for _, m in ipairs(redis.call('ZRANGE', K[6], 0, 1)) do
    if m ~= slot then return {2} end
    pending = true
  end
  local retry = redis.call('ZSCORE', K[7], slot)
  if retry and tonumber(retry) > tonumber(A[4]) then return {2} end
  local n = tonumber(last or '0')
  if n < floor or (n ~= 0 and n < tonumber(A[6])) then return {2} end
  return begin_attempt(K, A, {run = run, last = last, pending = pending, retry = retry ~= false}, holder)
end
