-- acquire.lua: the lease's acquisition as functions, the prelude of the
-- lease package's acquire script and of every other script that takes a
-- lease in its own round trip (release.lua has the release). It defines
-- functions only and touches no key.
--
-- holdfast_lease_acquire(lease_key, fence_key, owner, ttl_ms, idle_ms) takes
-- the lease (SET lease_key owner NX PX ttl_ms) and, only when that
-- succeeded, issues its fencing token. With idle_ms > 0 (redislease's
-- Options.IdleCounterTTL) the counter expires idle_ms after this
-- acquisition; nil or 0 keeps it for ever. It returns the token, a canonical decimal
-- string, when the lease was taken (or was taken already by this owner: a
-- re-sent call gets its token again); otherwise false and the holder's
-- remaining TTL in ms (>= 0).
--
-- The token is max(last token + 1, server TIME in microseconds), stored as
-- the new last token: strictly greater than the previous token, and greater
-- than every token issued before a loss or rollback of the counter (restart
-- without persistence, FLUSHALL, eviction, failover to a stale replica), as
-- long as the server clock has not stepped back past the outage. Both values
-- stay below 2^53, so Lua numbers hold them exactly; the microsecond value is
-- built as a string so that no float formatting is involved, and the
-- incremented counter is formatted with %.0f, exact below 2^53.
--
-- The counter is written once (SET ... GET reads the last token in the same
-- call): the time is almost always the larger value. Only when it is not
-- (two acquisitions in one microsecond, a clock stepped back) is the last
-- token put back and incremented (Redis 6.2+ for SET ... GET).
local function holdfast_lease_acquire(lease_key, fence_key, owner, ttl_ms, idle_ms)
  if redis.call('SET', lease_key, owner, 'NX', 'PX', ttl_ms) then
    local now = redis.call('TIME')
    local us = now[2]
    if #us < 6 then
      us = string.sub('00000', #us) .. us -- zero-pad to 6 digits
    end
    local micros = now[1] .. us
    local idle = tonumber(idle_ms or 0) or 0
    local last
    if idle > 0 then
      last = redis.call('SET', fence_key, micros, 'GET', 'PX', idle)
    else
      last = redis.call('SET', fence_key, micros, 'GET')
    end
    -- last >= micros, compared as canonical decimals, with no conversion
    -- to a number: every write of the counter (here, and the quorum's
    -- raise.lua) is one. A value written by hand with leading zeros could
    -- only compare greater, and then INCR refuses it: an error, never a
    -- smaller token.
    if last and (#last > #micros or (#last == #micros and last >= micros)) then
      if idle > 0 then
        redis.call('SET', fence_key, last, 'PX', idle)
      else
        redis.call('SET', fence_key, last)
      end
      return string.format('%.0f', redis.call('INCR', fence_key))
    end
    return micros
  end
  -- Held. By this very owner when the same acquisition ran before (a
  -- pipeline that the client re-sent after a lost reply or TRYAGAIN): answer
  -- its token again rather than leave an orphan key for its TTL.
  if redis.call('GET', lease_key) == owner then
    local token = redis.call('GET', fence_key)
    if token then return token end
  end
  return false, math.max(redis.call('PTTL', lease_key), 0)
end

-- holdfast_lease_label(holder_key, token, label, idle_ms) stores the holder
-- label of an acquisition just granted (holdfast_lease_acquire returned
-- token) in holder_key (<lease_key>:holder) as "<token> <label>", with no
-- TTL (or idle_ms, as the counter). For '' (or nil) it writes nothing: a reader
-- (redislease's Inspect) shows the label only when its token is the fence
-- counter's, the current holder's, so an earlier holder's label is never
-- shown for a holder with none, and an acquisition without a label costs
-- no command. Every labelled acquisition calls it, so while the lease is
-- held the key names its holder; views show it in place of the owner,
-- which is a write capability.
local function holdfast_lease_label(holder_key, token, label, idle_ms)
  if not label or label == '' then
    return
  end
  local idle = tonumber(idle_ms or 0) or 0
  if idle > 0 then
    redis.call('SET', holder_key, token .. ' ' .. label, 'PX', idle)
  else
    redis.call('SET', holder_key, token .. ' ' .. label)
  end
end
