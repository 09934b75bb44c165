-- clear.lua: begin_if_clear(K, A), Begin of a scheduled slot when nothing
-- else is due for its (job, partition), shared by the claim script
-- (claim.lua, RedisLedger.BeginIfClear) and the joined claim script
-- (claimall.lua, RedisLedger.ClaimAll). After fence.lua and begin.lua.
-- The fence is the unit scope's, in the unit hash.
--
-- K[1] unit hash  K[2] run hash  K[3] open zset  K[4] index zset
-- K[5] pending zset  K[6] retry zset  K[7] the job's pause flag
-- (K[2] and K[4] may be false, when both are: made from K[1]'s base
-- <base>unit, attempt_keys)
-- (<prefix>{<job>}:paused: another hash tag than the rest on Cluster,
-- where the caller reads it beforehand and passes no K[7])
-- A[1..5] as begin.lua; A[6] the schedule's fire before the slot
-- (unix s); A[7] since (unix s): open slots before it are not due
--
-- u, when given, is the unit hash's HMGET of token, owner, last, horizon
-- and hot, read in this script already; run, when given, the run hash's
-- HMGET of status, attempt, base and owner (begin_attempt's seen.run);
-- holder the attempt's holder label (begin_attempt's).
--
-- seen (unix s, '0' or nil for none) is the latest slot the caller knows
-- the ledger recorded (ledger.BeginRequest.Seen).
--
-- Returns {2} when something else needs planning (paused, another open or
-- pending slot, another slot's run abandoned (hot, or an open slot before
-- since whose run says running, of the newest 16; 16 or more such open
-- slots: not clear) whatever its age, another slot's retry due at or after
-- since, the slot
-- waiting for its retry time, a slot between the
-- last one seen and this one that nobody began, or a last slot missing or
-- before seen: the store lost data the caller saw, which only a State
-- read, compared with what it saw, tells): nothing changed but the
-- horizon, set as State sets it. Otherwise what begin_attempt returns; a
-- slot after the last one begun, on a unit with nothing open, pending or
-- waiting for a retry, is begun hot (begin_hot).

-- begin_hot begins the slot A[3] after the unit's last, on a unit with
-- nothing else open: its first attempt is the unit's hot run (fence.lua),
-- written with the fence, the last slot and the horizon in one HSET of the
-- unit hash. u as begin_if_clear's.
local function begin_hot(unit, A, u, holder)
  if not holdfast_accepts(u[1], u[2], A[1], A[2]) then
    if not u[4] then redis.call('HSET', unit, 'horizon', A[4]) end -- as State sets it
    return {-1, u[1]}
  end
  -- One HSET, its fields written out: no table to build and unpack.
  if u[4] then
    redis.call('HSET', unit, 'token', A[1], 'owner', A[2], 'last', A[3], 'hot', A[3], 'hot.owner', A[2],
      'hot.token', A[1], 'hot.started', A[4], 'hot.hb', A[4], 'hot.holder', holder or '')
  else
    redis.call('HSET', unit, 'token', A[1], 'owner', A[2], 'last', A[3], 'hot', A[3], 'hot.owner', A[2],
      'hot.token', A[1], 'hot.started', A[4], 'hot.hb', A[4], 'hot.holder', holder or '', 'horizon', A[4])
  end
  return {1, 1, tonumber(A[5]) - 1}
end

-- attempt_keys returns begin_attempt's K for begin_if_clear's K, whose
-- run hash K[2] and index K[4] may be false (claimall.lua makes them only
-- when needed): then made here from the unit key <base>unit and the slot.
local function attempt_keys(K, slot)
  if not K[2] then
    local base = string.sub(K[1], 1, #K[1] - 4)
    K[2], K[4] = base .. 'run:' .. slot, base .. 'index'
  end
  return {K[1], K[2], K[3], K[1], K[4], K[5], K[6]}
end

-- OLD_OPEN bounds the open slots before since that begin_if_clear looks at
-- for an abandoned run.
local OLD_OPEN = 16

local function begin_if_clear(K, A, run, holder, seen, u)
  local unit = K[1]
  u = u or redis.call('HMGET', unit, 'token', 'owner', 'last', 'horizon', 'hot')
  local floor = 0
  if seen and seen ~= '0' then floor = tonumber(seen) or 0 end
  local last = u[3]
  if u[5] then
    -- A hot run that did not end (its holder lost the lease, or this
    -- owner's claim is sent again): written out, it is an open slot.
    materialize(unit, redis.call('HMGET', unit, unpack(HOT)))
    run = nil
    if u[5] ~= A[3] then
      -- Another slot's run, abandoned: taken over by the plan (State
      -- lists it whatever its age), before this slot.
      if not u[4] then redis.call('HSET', unit, 'horizon', A[4]) end
      return {2}
    end
  end
  -- The common case, nothing paused, open, pending or waiting for a
  -- retry, costs one EXISTS over the four keys rather than a read each.
  local found
  if K[7] then
    found = redis.call('EXISTS', K[3], K[5], K[6], K[7])
  else
    found = redis.call('EXISTS', K[3], K[5], K[6])
  end
  local n = tonumber(last or '0')
  if found == 0 then
    if n < floor or (n ~= 0 and n < tonumber(A[6])) then
      if not u[4] then redis.call('HSET', unit, 'horizon', A[4]) end
      return {2}
    end
    if tonumber(A[3]) > n then return begin_hot(unit, A, u, holder) end
    if not u[4] then redis.call('HSET', unit, 'horizon', A[4]) end
    return begin_attempt(attempt_keys(K, A[3]), A, {run = run, last = last, pending = false, retry = false, cold = true}, holder)
  end
  -- A unit with a last slot had its horizon set when that slot began.
  if not u[4] then redis.call('HSET', unit, 'horizon', A[4]) end
  if K[7] and redis.call('EXISTS', K[7]) == 1 then return {2} end
  local slot = A[3]
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', K[3], A[7], '+inf', 'LIMIT', 0, 2)) do
    if m ~= slot then return {2} end
  end
  -- An open slot before since whose run says running was abandoned by a
  -- holder that lost the lease (this call holds it), however old: the
  -- plan takes it over (State lists it). The newest OLD_OPEN of them are
  -- looked at (an abandoned run is the latest begun; older open slots are
  -- failures whose retry time passed, kept with their retry entries); when
  -- there are that many, the plan looks at them all.
  local old = redis.call('ZREVRANGEBYSCORE', K[3], '(' .. A[7], '-inf', 'LIMIT', 0, OLD_OPEN)
  if #old >= OLD_OPEN then return {2} end
  for _, m in ipairs(old) do
    if m ~= slot and not redis.call('ZSCORE', K[6], m) then
      local base = string.sub(unit, 1, #unit - 4)
      if redis.call('HGET', base .. 'run:' .. m, 'status') == 'running' then return {2} end
    end
  end
  local pending = false
  for _, m in ipairs(redis.call('ZRANGE', K[5], 0, 1)) do
    if m ~= slot then return {2} end
    pending = true
  end
  local retry = redis.call('ZSCORE', K[6], slot)
  if retry and tonumber(retry) > tonumber(A[4]) then return {2} end
  -- Another slot's retry due within the window, whatever that slot's age
  -- (State lists it: a backfilled slot older than the window).
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', K[6], tonumber(A[7]) * 1000, '+inf', 'LIMIT', 0, 2)) do
    if m ~= slot then return {2} end
  end
  if n < floor or (n ~= 0 and n < tonumber(A[6])) then return {2} end
  return begin_attempt(attempt_keys(K, A[3]), A, {run = run, last = last, pending = pending, retry = retry ~= false, cold = true}, holder)
end
