-- Enter puts visitors at the back of the queue, or reports where they already are. The proxy sends
-- the entries that arrive together in one call; each is handled as if it came alone, in order.
-- KEYS[1] waiting set (score = arrival sequence), KEYS[2] sequence, KEYS[3] totals hash
-- ARGV[1] key prefix, ARGV[2] abandon-after ms, ARGV[3..] visitors
-- Returns one reply per visitor: {1, notBefore, expiry, now} for a visitor holding a pass, else
-- {2, position, depth, now}.
local prefix, abandon_ms = ARGV[1], tonumber(ARGV[2])
local stem = seen_stem(prefix)
local now = now_ms()
-- Numbers become text once, with int (see common.lua).
local now_s, silent_before = int(now), int(now - abandon_ms)

-- The depth is read once per call and kept current: entries add one, abandoned visitors take one.
local depth = redis.call('ZCARD', KEYS[1])

local function enter(visitor)
  local nb, exp = read_pass(prefix, visitor, now_s)
  if nb then
    return '1', nb, exp, now_s
  end
  local seq = redis.call('ZSCORE', KEYS[1], visitor)
  if seq then
    local skey, sfield = seen_slot(stem, seq)
    local seen = redis.call('HGET', skey, sfield)
    if not (seen and earlier(seen, silent_before)) then
      redis.call('HSET', skey, sfield, now_s)
      return '2', int(redis.call('ZRANK', KEYS[1], visitor) + 1), int(depth), now_s
    end
    -- Silent too long: the old place is gone, the visitor starts again at the back.
    forget(KEYS[1], visitor, skey, sfield)
    depth = depth - 1
    redis.call('HINCRBY', KEYS[3], 'abandoned', 1)
  end
  -- The sequence, not a clock, orders arrivals: strict FIFO across any number of proxies. Every
  -- waiting visitor holds an earlier number, so the new one's place is the back: the depth.
  seq = redis.call('INCR', KEYS[2])
  local seq_s = int(seq)
  redis.call('ZADD', KEYS[1], 'NX', seq_s, visitor)
  local skey, sfield = seen_slot(stem, seq_s)
  redis.call('HSET', skey, sfield, now_s)
  depth = depth + 1
  local depth_s = int(depth)
  return '2', depth_s, depth_s, now_s
end

local parts, n = {}, 0
for i = 3, #ARGV do
  n = add_reply(parts, n, enter(ARGV[i]))
end
return table.concat(parts, ' ', 1, n)
