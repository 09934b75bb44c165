-- inspect.lua: read what an operator sees of one lease, in one round trip.
-- Read-only: it writes no key.
--
-- KEYS[1]  lease key          <prefix>{<name>}          (value: owner)
-- KEYS[2]  fence counter key  <prefix>{<name>}:fence    (value: last token)
-- KEYS[3]  waiting flag       <prefix>{<name>}:waiting
-- KEYS[4]  holder label key   <prefix>{<name>}:holder   (value: "<token> <label>")
--
-- Returns {owner, pttl, token, waiting, holder}: the owner ('' when the lease
-- is not held), the lease key's PTTL in ms (-2 when not held, -1 when it has
-- no expiry), the last token issued as a decimal string ('0' when none), 1
-- when the waiting flag is set, 0 otherwise, and the holder key's value
-- ('' when none; Inspect keeps its label when its token is the counter's). The owner never leaves the Go code that reads it: Info carries its
-- fence.OwnerID.
local owner = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local token = redis.call('GET', KEYS[2])
local waiting = redis.call('EXISTS', KEYS[3])
local holder = redis.call('GET', KEYS[4])
return {owner or '', pttl, token or '0', waiting, holder or ''}
