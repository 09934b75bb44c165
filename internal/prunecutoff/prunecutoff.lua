-- prunecutoff.lua: fence.CheckPruneCutoff in Lua, the prelude of the
-- scripts that raise a slot-scope watermark (redisfence's prune.lua,
-- httpfence redisstore's). It defines a function only and touches no key.
--
-- holdfast_prune_cutoff_refused(seconds, micros, margin) takes the cutoff
-- as unix seconds (a decimal integer) and the microseconds within that
-- second (0 to 999999), and the margin in microseconds
-- (fence.PruneMargin). It returns nil when the cutoff is at most the
-- server's clock (TIME) minus the margin, and TIME's reply {seconds,
-- microseconds} when it is later: the script returns that reply at once,
-- before any write, and the Go side makes it a *fence.PruneCutoffError
-- (prunecutoff.Refused). The clock is the server's, read in the script
-- that raises the watermark, never the caller's.
--
-- Number model: TIME in microseconds (about 1.8e15 now) and a cutoff near
-- it are exact Lua numbers (below 2^53 until the year 2255); a cutoff far
-- from it is not, but lies so far from the limit that the comparison
-- holds all the same.
local function holdfast_prune_cutoff_refused(seconds, micros, margin)
  local now = redis.call('TIME')
  local limit = tonumber(now[1]) * 1000000 + tonumber(now[2]) - tonumber(margin)
  if tonumber(seconds) * 1000000 + tonumber(micros) > limit then
    return now
  end
  return nil
end
