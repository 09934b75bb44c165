-- complete.lua: store the response of an in-flight record we still hold.
--
-- KEYS[1]  record  <prefix>{<sha256(key)>}  (see begin.lua)
-- ARGV[1]  our lock id
-- ARGV[2]  status code (decimal)
-- ARGV[3]  header fields (JSON)
-- ARGV[4]  body (bytes)
-- ARGV[5]  completed TTL in milliseconds
--
-- Returns 1 when stored, 0 when the record is gone or holds another lock
-- (the lock expired); then nothing is written.
if redis.call('HGET', KEYS[1], 'lock') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], 'lock')
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'header', ARGV[3], 'body', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
