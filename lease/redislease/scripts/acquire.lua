-- acquire.lua: take a lease if it is free and issue its fencing token, in one
-- round trip. Prepended in Go by internal/leaselua's acquire.lua, which holds
-- the transition (holdfast_lease_acquire) and the token rule.
--
-- KEYS[1]  lease key          <prefix>{<name>}         (value: owner)
-- KEYS[2]  fence counter key  <prefix>{<name>}:fence   (value: last token)
-- KEYS[3]  waiting flag       <prefix>{<name>}:waiting  (optional)
-- ARGV[1]  owner (random per acquisition)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  holder label ('' or absent for none)
-- ARGV[4]  the counter's idle TTL in milliseconds (Options.IdleCounterTTL;
--          0 or absent: the counter and the holder label are kept for ever)
-- ARGV[5]  the flag's TTL in milliseconds (with KEYS[3]; ARGV[3] and
--          ARGV[4] are then given)
--
-- The holder label key KEYS[1] .. ':holder' (value: "<token> <label>") is built here,
-- not passed: in the lease's hash tag, so in KEYS[1]'s Cluster slot, and an
-- argument more would cost the client an allocation per acquisition (a
-- boxed string; see lease.redisHandle).
--
-- Returns the token (> 0) when the lease was taken (or was taken already by
-- this owner: a re-sent call gets its token again), and minus the holder's
-- remaining TTL in ms (<= 0) when it is held. One integer, so that the reply
-- costs the client no array.
--
-- A grant with a holder label stores it in the holder key with its token,
-- no TTL; one without writes nothing. Inspect shows the label only when its
-- token is the counter's, so while the lease is held it is the holder's or
-- none. The views show it in place of the owner (a write capability).
--
-- With KEYS[3] (the tries of a blocked Acquire, made once it listens on the
-- release channel), a held lease is flagged as waited for, for at least
-- ARGV[5] ms (a longer flag is kept): its release then publishes
-- (release.lua), and a release nobody waits for publishes nothing. The
-- client asks for twice its longest wait between two tries, so the flag
-- stays up while any waiter waits, and outlives the last one by no more
-- than that.
local token, remaining = holdfast_lease_acquire(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4])
if token then
  holdfast_lease_label(KEYS[1] .. ':holder', token, ARGV[3], ARGV[4])
  return tonumber(token) -- below 2^53: exact
end
if KEYS[3] and redis.call('PTTL', KEYS[3]) < tonumber(ARGV[5]) then
  -- Never shortened: another waiter's may be longer.
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
end
return -remaining
