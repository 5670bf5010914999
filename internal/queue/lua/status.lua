-- Status reports where visitors stand and refreshes their last-seen times. The proxy sends the polls
-- that arrive together in one call; each is handled as if it came alone, in order.
-- KEYS[1] waiting set, KEYS[2] totals hash
-- ARGV[1] key prefix, ARGV[2] abandon-after ms, ARGV[3] last-seen block size, ARGV[4..] visitors
-- Returns one reply per visitor: {0, now} when not queued, {1, notBefore, expiry, now} when holding a
-- pass, {2, position, depth, now, previousPoll} when waiting (previousPoll 0 when unknown).
local prefix, abandon_ms, block = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
-- The depth is read once per call and kept current: only an abandoned visitor's removal changes it.
local depth = redis.call('ZCARD', KEYS[1])

local function status(visitor)
  -- Most polls come from waiting visitors, so that path is tried first and kept short.
  local seq = redis.call('ZSCORE', KEYS[1], visitor)
  if not seq then
    local nb, exp = read_pass(prefix, visitor, now)
    if nb then
      return {1, nb, exp, now}
    end
    return {0, now}
  end
  local skey, sfield = seen_slot(prefix, tonumber(seq), block)
  local seen = tonumber(redis.call('HGET', skey, sfield))
  if seen and now - seen > abandon_ms then
    forget(KEYS[1], visitor, skey, sfield)
    depth = depth - 1
    redis.call('HINCRBY', KEYS[2], 'abandoned', 1)
    return {0, now}
  end
  -- Every poll counts as a sign of life, even one the proxy will refuse as too early: a client that
  -- polls too fast is refused until it waits the interval it was told.
  redis.call('HSET', skey, sfield, now)
  return {2, redis.call('ZRANK', KEYS[1], visitor) + 1, depth, now, seen or 0}
end

local out = {}
for i = 4, #ARGV do
  out[#out + 1] = status(ARGV[i])
end
return encode_replies(out)
