-- cancel.lua: ask the running attempt of a (job, partition) to stop,
-- because a newer slot replaces it (OverlapCancelOther). Not fenced.
--
-- KEYS[1] cancel request  <prefix>{<job>|<partition>}:cancel
-- ARGV[1] the replacing slot (unix s)
--
-- Keeps the latest replacing slot (1 day): a heartbeat cancels only an
-- attempt of an earlier slot, so a replica that lost the race for the
-- same slot never cancels the winner.
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', 86400)
end
return 1
