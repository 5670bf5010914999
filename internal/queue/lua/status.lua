-- Status reports where visitors stand and refreshes their last-seen times. The proxy sends the polls
-- that arrive together in one call; each is handled as if it came alone, in order.
-- KEYS[1] waiting set, KEYS[2] totals hash
-- ARGV[1] key prefix, ARGV[2] abandon-after ms, ARGV[3..] visitors
-- Returns one reply per visitor: {0, now} when not queued, {1, notBefore, expiry, now} when holding a
-- pass, {2, position, depth, now, previousPoll} when waiting (previousPoll 0 when unknown).
local prefix, abandon_ms = ARGV[1], tonumber(ARGV[2])
local stem = seen_stem(prefix)
local now = now_ms()
-- A visitor last seen before this is silent too long.
local now_s, silent_before = int(now), int(now - abandon_ms)
-- The depth is read once per call and kept current: only an abandoned visitor's removal changes it.
local depth = redis.call('ZCARD', KEYS[1])
local depth_s = int(depth)

-- Under a herd this loop is what Redis spends its time on: it makes no table per visitor and
-- formats one number per waiting visitor (see int in common.lua).
local call, wait_key = redis.call, KEYS[1]
local parts, n = {}, 0
for i = 3, #ARGV do
  local visitor = ARGV[i]
  -- Most polls come from waiting visitors, so that path is tried first and kept short.
  local seq = call('ZSCORE', wait_key, visitor)
  if seq then
    local skey, sfield = seen_slot(stem, seq)
    local seen = call('HGET', skey, sfield)
    if seen and earlier(seen, silent_before) then
      forget(wait_key, visitor, skey, sfield)
      depth = depth - 1
      depth_s = int(depth)
      call('HINCRBY', KEYS[2], 'abandoned', 1)
      n = add_reply(parts, n, '0', now_s)
    else
      -- Every poll counts as a sign of life, even one the proxy will refuse as too early: a
      -- client that polls too fast is refused until it waits the interval it was told.
      call('HSET', skey, sfield, now_s)
      n = add_reply(parts, n, '2', int(call('ZRANK', wait_key, visitor) + 1), depth_s, now_s, seen or '0')
    end
  else
    local nb, exp = read_pass(prefix, visitor, now_s)
    if nb then
      n = add_reply(parts, n, '1', nb, exp, now_s)
    else
      n = add_reply(parts, n, '0', now_s)
    end
  end
end
return table.concat(parts, ' ', 1, n)
