-- fence.lua: the prelude of every fenced ledger script, after
-- internal/fencerule's fence.lua (both prepended in Go).
--
-- raise(fenceKey, token, owner) applies fence's acceptance rule
-- (holdfast_accepts) to the fields token and owner of a scope's fence: the
-- unit hash (<base>unit) for the unit scope, the slot's fence hash
-- (<base>fence:<unix>) for a slot scope:
-- when it accepts, it raises the hash (unless it holds {token, owner}
-- already: a finish under the token its begin raised writes nothing) and
-- returns true; otherwise false. Either way its second result is the
-- stored token, a decimal string, or false when the hash holds none.
-- Tokens are never converted to Lua numbers (exact only below 2^53); the
-- caller refuses token 0 before running a script.
--
-- A slot's own fence (<base>fence:<unix>, OverlapAllow) that is missing for
-- a slot before the pair's prune cutoff (<base>pruned) is closed: Prune
-- deleted it with the slot's record (prune.lua), and no token is accepted,
-- so a stale holder of the pruned slot cannot write it again.
local function raise(fenceKey, token, owner)
  local cur = redis.call('HMGET', fenceKey, 'token', 'owner')
  if not cur[1] then
    local base, slot = string.match(fenceKey, '^(.*)fence:(%d+)$')
    if base then
      local cutoff = redis.call('ZSCORE', base .. 'pruned', 'cutoff')
      if cutoff and tonumber(slot) < tonumber(cutoff) then
        return false, false
      end
    end
  end
  if not holdfast_accepts(cur[1], cur[2], token, owner) then
    return false, cur[1]
  end
  if cur[1] ~= token or cur[2] ~= owner then
    redis.call('HSET', fenceKey, 'token', token, 'owner', owner)
  end
  return true, cur[1]
end

-- mark(unit, slot, last) keeps the latest slot seen (unix s, exact as a
-- Lua number) in the unit hash's field last; last, when not nil, is the
-- field's value read in this script already (false: none).
local function mark(unit, slot, last)
  if last == nil then last = redis.call('HGET', unit, 'last') end
  if tonumber(slot) > tonumber(last or '0') then
    redis.call('HSET', unit, 'last', slot)
  end
end

-- The hot run. A slot's first attempt begun by a claim of a unit that has
-- nothing else open, pending or waiting for a retry (begin_hot, clear.lua)
-- is kept in the unit hash <base>unit, in the fields of HOT: hot (its
-- slot, unix s), hot.owner, hot.token, hot.started and hot.hb (unix ms),
-- hot.holder ('' for none). It has no run hash, open or index entry until
-- it ends, when finish_attempt (finish.lua) writes its whole record at
-- once. Anything else that touches a unit with a hot run (a begin, a
-- claim, a finish or heartbeat that is not its owner's, a skip, a request)
-- first writes it out as begin_attempt would have (materialize): the run
-- hash, open and index then say what they said before, and the rest of
-- the script reads them as ever. The hot fields but hot stay after a run
-- ends and are rewritten by the next: only hot says a hot run exists.
local HOT = {'hot', 'hot.owner', 'hot.token', 'hot.started', 'hot.hb', 'hot.holder'}

-- materialize writes out the hot run h (the unit's HMGET of HOT, h[1] its
-- slot) into its run hash, open and index, and clears hot. The run hash,
-- open and index keys are the unit's: <base>run:<slot>, <base>open and
-- <base>index, where the unit key is <base>unit.
local function materialize(unit, h)
  local base = string.sub(unit, 1, #unit - #'unit')
  local slot = h[1]
  local run = base .. 'run:' .. slot
  redis.call('HSET', run, 'status', 'running', 'attempt', 1, 'base', 0, 'owner', h[2],
    'a1.owner', h[2], 'a1.token', h[3], 'a1.status', 'running', 'a1.started', h[4], 'a1.hb', h[5])
  if h[6] and h[6] ~= '' then
    redis.call('HSET', run, 'a1.holder', h[6])
  end
  redis.call('ZADD', base .. 'open', slot, slot)
  redis.call('ZADD', base .. 'index', slot, slot)
  redis.call('HDEL', unit, 'hot')
end

-- unhot writes out the unit's hot run, if it has one, and reports whether
-- it did.
local function unhot(unit)
  local h = redis.call('HMGET', unit, unpack(HOT))
  if not h[1] then return false end
  materialize(unit, h)
  return true
end
