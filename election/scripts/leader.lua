-- leader.lua: read the leader record, only if its leader still holds the
-- lease. A record left by a leader whose lease ended is not reported.
--
-- KEYS[1]  lease key      <prefix>{<name>}
-- KEYS[2]  leader record  <prefix>{<name>}:leader
--
-- Returns {owner, token, value}, or nil when there is no leader.
local owner = redis.call('GET', KEYS[1])
if not owner then
  return false
end
local rec = redis.call('HMGET', KEYS[2], 'owner', 'token', 'value')
if rec[1] ~= owner then
  return false
end
return rec
