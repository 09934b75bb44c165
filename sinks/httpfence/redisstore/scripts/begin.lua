-- begin.lua: claim an idempotency key, or report what holds it, in one
-- round trip.
--
-- KEYS[1]  record  <prefix>{<sha256(key)>}
--          hash: key, fp, lock (while in flight), status, header, body
--          (once completed); its TTL is the lock TTL while in flight and the
--          completed TTL afterwards.
-- ARGV[1]  request fingerprint
-- ARGV[2]  new lock id (random)
-- ARGV[3]  lock TTL in milliseconds
-- ARGV[4]  the idempotency key itself (kept for operators; not compared)
--
-- Returns {'new'} after creating the in-flight record, {'mismatch'} when the
-- record has another fingerprint, {'inflight', pttl} while it holds a lock
-- (pttl: the record's remaining time to live in milliseconds, the lock's
-- remaining time), and
-- {'completed', status, header, body} once it is completed. Only 'new'
-- writes anything.
local r = redis.call('HMGET', KEYS[1], 'fp', 'lock', 'status', 'header', 'body')
if not r[1] then
  redis.call('HSET', KEYS[1], 'key', ARGV[4], 'fp', ARGV[1], 'lock', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'new'}
end
if r[1] ~= ARGV[1] then
  return {'mismatch'}
end
if r[2] then
  return {'inflight', tostring(redis.call('PTTL', KEYS[1]))}
end
return {'completed', r[3], r[4], r[5]}
