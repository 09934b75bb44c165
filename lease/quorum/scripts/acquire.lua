-- acquire.lua: on one node, take the lease key if it is free and issue this
-- node's token candidate, in one round trip. It replaces redsync's SET NX.
--
-- KEYS[1]  lease key          <prefix>{<name>}         (value: owner)
-- KEYS[2]  fence counter key  <prefix>{<name>}:fence   (value: last candidate or raised token)
-- ARGV[1]  owner (random per acquisition)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  the acquirer's proposal, decimal (< 2^53), "0" for none
--
-- Returns {1, candidate} when the key was taken, {0, pttl, holder} when it
-- is held (pttl: the holder's remaining TTL in ms; holder: its owner).
--
-- A key that already holds ARGV[1] was taken by this very acquisition: the
-- command was sent again after its reply was lost or late (go-redis retries
-- a read timeout). It answers {1, counter} like the first run, so that the
-- acquirer counts the key as its own and deletes it if the try fails; the
-- counter is at least the candidate that first run issued (only this
-- owner's acquisition has touched it since, and raises only raise it).
--
-- The candidate is max(INCR(counter), server TIME in microseconds rounded
-- up to a multiple of 10 ms, proposal), stored back in the counter: greater
-- than everything this node issued or was raised to before, and, after the
-- counter was lost (restart without persistence, FLUSHALL, eviction),
-- greater than every token issued before the loss as long as clocks did
-- not step back past it. The proposal (the acquirer's clock plus a lead)
-- lets every master of a majority answer the same value, which then needs
-- no raise. The rounding does much the same without a proposal: masters
-- whose scripts run within one 10 ms step of each other answer the same
-- floor, and counters that agree answer the same INCR, so the raise is
-- only needed when a step boundary falls between them. Candidates run
-- ahead of TIME by less than 10 ms for it, as with a proposal of the
-- default lead. Values stay below 2^53, so Lua numbers hold them exactly;
-- the floor is built as a string of whole 10 ms steps ('%d', exact)
-- followed by '0000', so no float formatting is involved.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local candidate = redis.call('INCR', KEYS[2])
  local text = nil -- the candidate as a string, when it is not the INCR
  local now = redis.call('TIME')
  local cs = tonumber(now[1]) * 100 + math.ceil(tonumber(now[2]) / 10000)
  local micros = string.format('%d', cs) .. '0000'
  if tonumber(micros) > candidate then
    candidate, text = tonumber(micros), micros
  end
  if tonumber(ARGV[3]) > candidate then
    candidate, text = tonumber(ARGV[3]), ARGV[3]
  end
  if text then
    redis.call('SET', KEYS[2], text)
  end
  return {1, candidate}
end
local holder = redis.call('GET', KEYS[1]) or ''
if holder == ARGV[1] then
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, redis.call('PTTL', KEYS[1]), holder}
