-- abandon.lua: delete an in-flight record we still hold, so that a retry
-- with the same key runs the handler again.
--
-- KEYS[1]  record  <prefix>{<sha256(key)>}  (see begin.lua)
-- ARGV[1]  our lock id
--
-- Returns 1 when deleted, 0 when the record is gone or holds another lock.
if redis.call('HGET', KEYS[1], 'lock') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
