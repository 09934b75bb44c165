-- inspect.lua: read what an operator sees of one lease, in one round trip.
-- Read-only: it writes no key.
--
-- KEYS[1]  lease key          <prefix>{<name>}          (value: owner)
-- KEYS[2]  fence counter key  <prefix>{<name>}:fence    (value: last token)
-- KEYS[3]  waiting flag       <prefix>{<name>}:waiting
--
-- Returns {owner, pttl, token, waiting}: the owner ('' when the lease is not
-- held), the lease key's PTTL in ms (-2 when not held, -1 when it has no
-- expiry), the last token issued as a decimal string ('0' when none) and 1
-- when the waiting flag is set, 0 otherwise.
local owner = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local token = redis.call('GET', KEYS[2])
local waiting = redis.call('EXISTS', KEYS[3])
return {owner or '', pttl, token or '0', waiting}
