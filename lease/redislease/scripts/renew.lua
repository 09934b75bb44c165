-- renew.lua: extend a lease that we still own. Never re-creates an expired
-- key and never touches the token.
--
-- KEYS[1]  lease key  <prefix>{<name>}
-- ARGV[1]  owner
-- ARGV[2]  TTL in milliseconds
--
-- Returns 1 when extended, 0 when the key is gone or owned by someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
