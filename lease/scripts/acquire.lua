-- acquire.lua: take a lease if it is free and issue its fencing token, in one
-- round trip.
--
-- KEYS[1]  lease key          <prefix>{<name>}         (value: owner)
-- KEYS[2]  fence counter key  <prefix>{<name>}:fence   (value: last token)
-- ARGV[1]  owner (random per acquisition)
-- ARGV[2]  TTL in milliseconds
--
-- Returns the token (> 0) when the lease was taken, and minus the holder's
-- remaining TTL in ms (<= 0) when it is held. One integer, so that the reply
-- costs the client no array.
--
-- The token is max(INCR(counter), server TIME in microseconds): strictly
-- greater than the previous token, and greater than every token issued before
-- a loss of the counter (restart without persistence, FLUSHALL, eviction), as
-- long as the server clock has not stepped back past the outage. Both values
-- stay below 2^53, so Lua numbers hold them exactly; the microsecond value is
-- built as a string so that no float formatting is involved.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local token = redis.call('INCR', KEYS[2])
  local now = redis.call('TIME')
  local micros = now[1] .. string.format('%06d', tonumber(now[2]))
  if tonumber(micros) > token then
    redis.call('SET', KEYS[2], micros)
    token = tonumber(micros)
  end
  return token
end
return -math.max(redis.call('PTTL', KEYS[1]), 0)
