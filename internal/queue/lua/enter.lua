-- Enter puts visitors at the back of the queue, or reports where they already are. The proxy sends
-- the entries that arrive together in one call; each is handled as if it came alone, in order.
-- KEYS[1] waiting set (score = arrival sequence), KEYS[2] sequence, KEYS[3] totals hash
-- ARGV[1] key prefix, ARGV[2] abandon-after ms, ARGV[3] last-seen block size, ARGV[4..] visitors
-- Returns one reply per visitor: {1, notBefore, expiry, now} for a visitor holding a pass, else
-- {2, position, depth, now}.
local prefix, abandon_ms, block = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()

local function enter(visitor)
  local nb, exp = read_pass(prefix, visitor, now)
  if nb then
    return 1, nb, exp, now
  end
  local seq = redis.call('ZSCORE', KEYS[1], visitor)
  local skey, sfield
  if seq then
    skey, sfield = seen_slot(prefix, tonumber(seq), block)
    local seen = tonumber(redis.call('HGET', skey, sfield))
    if seen and now - seen > abandon_ms then
      -- Silent too long: the old place is gone, the visitor starts again at the back.
      forget(KEYS[1], visitor, skey, sfield)
      redis.call('HINCRBY', KEYS[3], 'abandoned', 1)
      seq = nil
    end
  end
  if not seq then
    -- The sequence, not a clock, orders arrivals: strict FIFO across any number of proxies.
    seq = redis.call('INCR', KEYS[2])
    redis.call('ZADD', KEYS[1], 'NX', seq, visitor)
    skey, sfield = seen_slot(prefix, seq, block)
  end
  redis.call('HSET', skey, sfield, now)
  return 2, redis.call('ZRANK', KEYS[1], visitor) + 1, redis.call('ZCARD', KEYS[1]), now
end

local parts, n = {}, 0
for i = 4, #ARGV do
  n = add_reply(parts, n, enter(ARGV[i]))
end
return table.concat(parts, ' ', 1, n)
