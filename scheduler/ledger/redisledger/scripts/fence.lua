-- fence.lua: the prelude of every fenced ledger script (prepended in Go).
--
-- raise(fenceKey, token, owner) applies fence's acceptance rule to the
-- (job, partition) fence hash {token, owner}: it accepts token t from owner
-- o iff t > stored or (t == stored and o == stored owner), raises the hash
-- and returns true; otherwise it returns false and the stored token.
-- Tokens are decimal strings below 2^53: exact as Lua numbers.
local function raise(fenceKey, token, owner)
  local cur = tonumber(redis.call('HGET', fenceKey, 'token') or '0')
  local curOwner = redis.call('HGET', fenceKey, 'owner') or ''
  local t = tonumber(token)
  if not (t > cur or (t == cur and owner == curOwner)) then
    return false, cur
  end
  redis.call('HSET', fenceKey, 'token', token, 'owner', owner)
  return true, cur
end

-- mark(slotKey, value) keeps the latest slot seen in a plain key.
local function mark(lastKey, slot)
  if tonumber(slot) > tonumber(redis.call('GET', lastKey) or '0') then
    redis.call('SET', lastKey, slot)
  end
end
