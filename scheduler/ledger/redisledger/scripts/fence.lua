-- fence.lua: the prelude of every fenced ledger script, after
-- internal/fencerule's fence.lua (both prepended in Go).
--
-- raise(fenceKey, token, owner) applies fence's acceptance rule
-- (holdfast_accepts) to the (job, partition) fence hash {token, owner}:
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

-- mark(lastKey, slot, last) keeps the latest slot seen (unix s, exact as a
-- Lua number) in a plain key; last, when not nil, is the key's value read
-- in this script already (false: none).
local function mark(lastKey, slot, last)
  if last == nil then last = redis.call('GET', lastKey) end
  if tonumber(slot) > tonumber(last or '0') then
    redis.call('SET', lastKey, slot)
  end
end
