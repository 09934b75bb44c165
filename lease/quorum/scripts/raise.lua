-- raise.lua: raise one node's fence counter to a token issued by the quorum,
-- so that every later candidate from this node is larger than it.
--
-- KEYS[1]  fence counter key  <prefix>{<name>}:fence
-- ARGV[1]  token, decimal (< 2^53)
--
-- Returns the counter after the call: max(counter, token). It never lowers
-- the counter, so a late or repeated raise is harmless.
local token = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if token > current then
  redis.call('SET', KEYS[1], ARGV[1])
  return token
end
return current
