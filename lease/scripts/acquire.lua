-- acquire.lua: take a lease if it is free and issue its fencing token, in one
-- round trip.
--
-- KEYS[1]  lease key          <prefix>{<name>}         (value: owner)
-- KEYS[2]  fence counter key  <prefix>{<name>}:fence   (value: last token)
-- KEYS[3]  waiting flag       <prefix>{<name>}:waiting  (optional)
-- ARGV[1]  owner (random per acquisition)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  the flag's TTL in milliseconds (with KEYS[3])
--
-- Returns the token (> 0) when the lease was taken (or was taken already by
-- this owner: a re-sent call gets its token again), and minus the holder's
-- remaining TTL in ms (<= 0) when it is held. One integer, so that the reply
-- costs the client no array.
--
-- With KEYS[3] (the tries of a blocked Acquire, made once it listens on the
-- release channel), a held lease is flagged as waited for, for at least
-- ARGV[3] ms (a longer flag is kept): its release then publishes
-- (release.lua), and a release nobody waits for publishes nothing. The
-- client asks for twice its longest wait between two tries, so the flag
-- stays up while any waiter waits, and outlives the last one by no more
-- than that.
--
-- The token is max(last token + 1, server TIME in microseconds), stored as
-- the new last token: strictly greater than the previous token, and greater
-- than every token issued before a loss or rollback of the counter (restart
-- without persistence, FLUSHALL, eviction, failover to a stale replica), as
-- long as the server clock has not stepped back past the outage. Both values
-- stay below 2^53, so Lua numbers hold them exactly; the microsecond value is
-- built as a string so that no float formatting is involved.
--
-- The counter is written once (SET ... GET reads the last token in the same
-- call): the time is almost always the larger value. Only when it is not
-- (two acquisitions in one microsecond, a clock stepped back) is the last
-- token put back and incremented (Redis 6.2+ for SET ... GET).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local us = now[2]
  if #us < 6 then
    us = string.sub('00000', #us) .. us -- zero-pad to 6 digits
  end
  local micros = now[1] .. us
  local last = redis.call('SET', KEYS[2], micros, 'GET')
  if last and tonumber(last) >= tonumber(micros) then
    redis.call('SET', KEYS[2], last)
    return redis.call('INCR', KEYS[2])
  end
  return tonumber(micros)
end
-- Held. By this very owner when the same acquisition ran before (a
-- pipeline that the client re-sent after a lost reply or TRYAGAIN): answer
-- its token again rather than leave an orphan key for its TTL.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local token = redis.call('GET', KEYS[2])
  if token then return tonumber(token) end
end
if KEYS[3] and redis.call('PTTL', KEYS[3]) < tonumber(ARGV[3]) then
  -- Never shortened: another waiter's may be longer.
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
end
return -math.max(redis.call('PTTL', KEYS[1]), 0)
