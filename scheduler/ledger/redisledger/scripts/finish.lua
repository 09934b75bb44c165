-- finish.lua: finish_attempt(K, A), the fenced end of an attempt, shared by
-- the Finish script (finishmain.lua) and the joined finish and release
-- (finishrelease.lua). After fence.lua.
--
-- K[1] the fence of the scope (the unit hash, or the slot's fence hash)
-- K[2] run hash  K[3] open zset  K[4] retry zset  K[5] unit hash
-- K[6] index zset (K[3] and K[4] may be false, when both are: made here
-- from K[5], <base>unit)
-- A[1] token  A[2] owner  A[3] slot  A[4] attempt
-- A[5] status (succeeded | failed)  A[6] class  A[7] error
-- A[8] now (unix ms)  A[9] retry at (unix ms; "" = final)
--
-- The end of its owner's hot run (fence.lua) writes the run's whole
-- record at once: its run hash, its index entry and, when it waits for a
-- retry, its open and retry entries, as begin_attempt and the finish
-- would have left them. Any other end writes out the unit's hot run first.
--
-- Returns {1, 0} recorded (also when this owner's attempt ended so already:
-- a re-sent call); {-1, current} stale or not this attempt's.
local RECORDED = {1, 0} -- never changed: shared by every answer

-- open_retry fills K[3] and K[4] when the caller left them false.
local function open_retry(K)
  if not K[3] then
    local base = string.sub(K[5], 1, #K[5] - 4)
    K[3], K[4] = base .. 'open', base .. 'retry'
  end
end

local function finish_attempt(K, A)
  local h = redis.call('HMGET', K[5], 'hot', 'hot.owner', 'hot.token', 'hot.started', 'hot.hb', 'hot.holder', 'token', 'owner')
  if h[1] == A[3] and h[2] == A[2] and A[4] == '1' and K[1] == K[5] then
    if not holdfast_accepts(h[7], h[8], A[1], A[2]) then return {-1, h[7]} end
    local base = 0
    if A[5] == 'failed' and A[6] == 'deferred' and A[9] ~= '' then base = 1 end
    -- One HSET, its fields written out: no table to build and unpack.
    if h[6] and h[6] ~= '' then
      redis.call('HSET', K[2], 'status', A[5], 'attempt', 1, 'base', base, 'owner', A[2], 'retry_at', A[9],
        'a1.owner', A[2], 'a1.token', h[3], 'a1.status', A[5], 'a1.class', A[6], 'a1.error', A[7],
        'a1.started', h[4], 'a1.hb', h[5], 'a1.finished', A[8], 'a1.holder', h[6])
    else
      redis.call('HSET', K[2], 'status', A[5], 'attempt', 1, 'base', base, 'owner', A[2], 'retry_at', A[9],
        'a1.owner', A[2], 'a1.token', h[3], 'a1.status', A[5], 'a1.class', A[6], 'a1.error', A[7],
        'a1.started', h[4], 'a1.hb', h[5], 'a1.finished', A[8])
    end
    if h[7] ~= A[1] or h[8] ~= A[2] then
      redis.call('HSET', K[5], 'token', A[1], 'owner', A[2])
    end
    redis.call('HDEL', K[5], 'hot')
    redis.call('ZADD', K[6], A[3], A[3])
    if A[5] ~= 'succeeded' and A[9] ~= '' then
      open_retry(K)
      redis.call('ZADD', K[3], A[3], A[3])
      redis.call('ZADD', K[4], A[9], A[3])
    end
    return RECORDED
  end
  open_retry(K)
  if h[1] then materialize(K[5], h) end
  local ok, cur = raise(K[1], A[1], A[2])
  if not ok then return {-1, cur} end
  local run = K[2]
  local a = 'a' .. A[4] .. '.'
  local cur_run = redis.call('HMGET', run, 'status', 'owner', 'attempt')
  if cur_run[1] ~= 'running' or cur_run[2] ~= A[2] or cur_run[3] ~= A[4] then
    -- Recorded already by this very call (a pipeline the client re-sent)?
    local prev = redis.call('HMGET', run, a .. 'owner', a .. 'status')
    if cur_run[3] == A[4] and prev[1] == A[2] and prev[2] == A[5] then
      return RECORDED
    end
    return {-1, cur}
  end
  redis.call('HSET', run, 'status', A[5], 'retry_at', A[9],
    a .. 'status', A[5], a .. 'class', A[6], a .. 'error', A[7], a .. 'finished', A[8])
  if A[5] == 'failed' and A[6] == 'deferred' and A[9] ~= '' then
    -- A deferral: not counted against the attempt budget.
    redis.call('HINCRBY', run, 'base', 1)
  end
  if A[5] == 'succeeded' or A[9] == '' then
    -- Not in the retry zset: begin_attempt took it out, and only this
    -- script puts a slot in, at the end of a running attempt.
    redis.call('ZREM', K[3], A[3])
  else
    redis.call('ZADD', K[4], A[9], A[3])
  end
  return RECORDED
end
