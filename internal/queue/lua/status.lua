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

-- The replies go straight into one list, "n v1 .. vn" per visitor, as encode_replies writes them:
-- under a herd this loop is what Redis spends its time on, so it makes no table per visitor.
local call, wait_key = redis.call, KEYS[1]
local parts, n = {}, 0
for i = 4, #ARGV do
  local visitor = ARGV[i]
  -- Most polls come from waiting visitors, so that path is tried first and kept short.
  local seq = call('ZSCORE', wait_key, visitor)
  if seq then
    local skey, sfield = seen_slot(prefix, tonumber(seq), block)
    local seen = tonumber(call('HGET', skey, sfield))
    if seen and now - seen > abandon_ms then
      forget(wait_key, visitor, skey, sfield)
      depth = depth - 1
      call('HINCRBY', KEYS[2], 'abandoned', 1)
      parts[n + 1], parts[n + 2], parts[n + 3] = 2, 0, now
      n = n + 3
    else
      -- Every poll counts as a sign of life, even one the proxy will refuse as too early: a
      -- client that polls too fast is refused until it waits the interval it was told.
      call('HSET', skey, sfield, now)
      parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4] = 5, 2, call('ZRANK', wait_key, visitor) + 1, depth
      parts[n + 5], parts[n + 6] = now, seen or 0
      n = n + 6
    end
  else
    local nb, exp = read_pass(prefix, visitor, now)
    if nb then
      parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4], parts[n + 5] = 4, 1, nb, exp, now
      n = n + 5
    else
      parts[n + 1], parts[n + 2], parts[n + 3] = 2, 0, now
      n = n + 3
    end
  end
end
return table.concat(parts, ' ')
