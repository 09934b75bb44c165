-- announce.lua: write the leader record, only while the lease key still holds
-- the new leader's owner (a fenced write), and tell observers.
--
-- KEYS[1]  lease key      <prefix>{<name>}          (value: owner)
-- KEYS[2]  leader record  <prefix>{<name>}:leader   (hash: owner, token, value)
-- ARGV[1]  owner of the leader's lease
-- ARGV[2]  its fencing token, in decimal
-- ARGV[3]  the leader's value
-- ARGV[4]  election channel <prefix>{<name>}:elected
--
-- Returns 1 when written, 0 when the lease key does not hold ARGV[1] (the
-- lease was lost, or this is not the Redis the lease lives in).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2], 'value', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[2])
return 1
