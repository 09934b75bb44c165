-- claimall.lua: the joined claim of units due together (RedisLedger.ClaimAll):
-- for each unit, take its lease and, when taken and asked for, begin its
-- slot under the token just issued, as BeginIfClear would: one script for
-- many units, where acquire and begin took a script each per unit, and a
-- replica that finds the leases held pays a few commands per unit, not a
-- script call. Prepended in Go by internal/fencerule's fence.lua,
-- fence.lua, begin.lua, clear.lua and internal/leaselua's acquire.lua and release.lua. The
-- token is issued in the same script, so a slot is begun only under a
-- lease this call holds, fenced as every Begin is (raise in begin_attempt).
--
-- ARGV[1] now (unix ms)  ARGV[2] limit, the most leases to take (0: no
-- limit)  ARGV[3] n, the units  ARGV[4] the leases' idle counter TTL (ms,
-- 0: none; redislease.Options.IdleCounterTTL)
-- then per unit, 10 values: owner, lease TTL (ms), k (its keys: 1, or with
-- a slot to begin or check 2, or 3 with the job's pause flag), slot (unix s), max attempts (0: the
-- slot is checked only: read for done before the lease, never begun),
-- prev (unix s), since (unix s), the lease's holder label
-- (lease.RedisOptions.Holder, '' for none), the attempt's holder label
-- (ledger.Fence.Holder), seen (unix s, 0: none; clear.lua)
-- then m, the claim markers to set, and per marker 3 values: the first and
-- the last unit of its group (1-based, in the order above) and its TTL (ms)
-- KEYS per unit, in order: its lease key (redislease.Keys.Lease, whose
-- fence counter, waiting flag and holder label keys are it with ":fence",
-- ":waiting" and ":holder"), and with k > 1 the unit's key base
-- (<prefix>{<unit>}:, whose keys begin_if_clear's K are: unit, run:<slot>,
-- open, index, pending, retry; clear.lua) and with k = 3 the job's pause
-- flag; then the m marker keys. The keys a unit's script touches all
-- share its hash tag. A lease taken stores its holder label as the lease
-- package's acquire script does (holdfast_lease_label).
--
-- Returns 4 values per unit: the token (a decimal string) when the lease
-- was taken, else minus the holder's remaining TTL (an integer <= 0);
-- then 3 when no slot was begun for want of a lease or a request, or what
-- begin_if_clear returns, padded to 3 values: {2, 0, 0} not clear,
-- {1, attempt, left}, {-1, current, 0} stale (current a decimal string or
-- nil), and {4, 0, 0} when the slot was done: then the lease, unused, was
-- released in the same script; {5, 0, 0} when, the limit reached, the
-- lease was free and not tried (its first value then 0).
--
-- A unit with a slot to begin has its unit hash read first, before its
-- lease, and its run hash too when the slot is not after the unit's last
-- (a slot after it has no record): a replica whose try comes after
-- another's run ended would otherwise take the lease, find the slot done
-- and give it back, and one whose try comes during the run would pay the
-- acquisition's failure. When the slot is done (succeeded, skipped or
-- missed) and nothing is pending for the unit, no lease is taken: {0, 4,
-- 0, 0}, as a slot found done after the acquisition answers. When it is
-- running under another owner (its hot run, or its run hash) and the
-- lease key holds another owner, the lease is held: its remaining TTL is
-- answered as a failed acquisition's. What was read is handed to
-- begin_if_clear (nothing writes it between).
--
-- Claim markers (RedisLedger.ClaimAll): once every unit of a group was
-- tried (none answered 5, not tried), the group's marker is set, with its
-- TTL, so that the other replicas skip the group as held. A marker is set
-- only here, after its units' tries in the same script: it stands for
-- answers a try of each unit would have had then.
local now, limit, n, idle = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out, o, ki, ai, taken = {}, 0, 1, 5, 0
local tried = {}
local function held_by_other(lease_key, owner)
  local v = redis.call('GET', lease_key)
  return v and v ~= owner
end
for i = 1, n do
  local owner, k = ARGV[ai], tonumber(ARGV[ai + 2])
  local lease = KEYS[ki]
  local token, remaining = false, 0
  local c1, c2, c3 = 3, 0, 0 -- the unit's last 3 values
  local run, answered = nil, false
  local u, K, slot = nil, nil, nil
  if k > 1 then
    local b = KEYS[ki + 1]
    slot = ARGV[ai + 3]
    -- begin_if_clear's K; the run hash and index are made when needed
    K = {b .. 'unit', false, b .. 'open', false, b .. 'pending', b .. 'retry', KEYS[ki + 2]}
    u = redis.call('HMGET', K[1], 'token', 'owner', 'last', 'horizon', 'hot', 'hot.owner')
    if u[5] == slot then
      if u[6] ~= owner and held_by_other(lease, owner) then
        remaining, answered = math.max(redis.call('PTTL', lease), 0), true
      end
    elseif u[3] and tonumber(slot) <= tonumber(u[3]) then
      K[2], K[4] = b .. 'run:' .. slot, b .. 'index'
      run = redis.call('HMGET', K[2], 'status', 'attempt', 'base', 'owner')
      local st = run[1]
      if (st == 'succeeded' or st == 'skipped' or st == 'missed') and redis.call('EXISTS', K[5]) == 0 then
        c1, answered = 4, true
      elseif st == 'running' and run[4] ~= owner and held_by_other(lease, owner) then
        remaining, answered = math.max(redis.call('PTTL', lease), 0), true
      end
    end
  end
  if answered then
    -- answered from the run hash: no lease taken
  elseif limit > 0 and taken >= limit then
    remaining = redis.call('PTTL', lease)
    if remaining == -2 then
      c1 = 5 -- free, not tried: the caller has no place left
    end
    remaining = math.max(remaining, 0)
  else
    token, remaining = holdfast_lease_acquire(lease, lease .. ':fence', owner, ARGV[ai + 1], idle)
    if token then
      taken = taken + 1
      holdfast_lease_label(lease .. ':holder', token, ARGV[ai + 7], idle)
    end
  end
  if token and k > 1 and ARGV[ai + 4] ~= '0' then
    local r = begin_if_clear(K, {token, owner, slot, now, ARGV[ai + 4], ARGV[ai + 5], ARGV[ai + 6]}, run, ARGV[ai + 8], ARGV[ai + 9], u)
    c1, c2, c3 = r[1], r[2] or false, r[3] or 0
  end
  if c1 == 0 then
    -- The slot is done (a replica whose claim came after the run): the
    -- lease is given back at once, unused, as the claim would release it.
    holdfast_lease_release(lease, lease .. ':waiting', owner)
    c1, taken = 4, taken - 1
  end
  tried[i] = c1 ~= 5
  out[o + 1] = token or -remaining
  out[o + 2] = c1
  out[o + 3] = c2
  out[o + 4] = c3
  o, ki, ai = o + 4, ki + k, ai + 10
end
for _ = 1, tonumber(ARGV[ai] or '0') do
  local all = true
  for u = tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2]) do
    if not tried[u] then
      all = false
      break
    end
  end
  if all then
    redis.call('SET', KEYS[ki], '1', 'PX', ARGV[ai + 3])
  end
  ki, ai = ki + 1, ai + 3
end
return out
