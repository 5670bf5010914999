-- Seen records, in one call, the signs of life of waiting visitors that a proxy answered from what
-- it knows (their position bounded by a RankSnapshot) instead of a status call each: their
-- last-seen times are refreshed as a status call would, so abandonment keeps working, and those no
-- longer waiting under that sequence are named, so that the proxy stops answering for them.
-- KEYS[1] waiting set, KEYS[2] totals hash, KEYS[3] last-seen hash
-- ARGV[1] abandon-after ms, then pairs of (visitor, arrival sequence)
-- Returns {now, admitted from the queue so far, depth, gone visitor, …}.
local abandon_ms = tonumber(ARGV[1])
local seen_key = KEYS[3]
local now = now_ms()
local now_s, silent_before = int(now), int(now - abandon_ms)
local admitted = tonumber(redis.call('HGET', KEYS[2], 'admitted') or '0')
  - tonumber(redis.call('HGET', KEYS[2], 'instantAdmitted') or '0')
local out = {now, admitted, 0}
for i = 2, #ARGV, 2 do
  local visitor, seq = ARGV[i], ARGV[i + 1]
  local score = redis.call('ZSCORE', KEYS[1], visitor)
  if score == seq then
    local block, off = seen_slot(seq)
    local times = redis.call('HGET', seen_key, block)
    local seen = slot_time(times, off)
    if seen and earlier(seen, silent_before) then
      -- Silent too long before this sign of life: gone, as a status call would find it.
      forget(KEYS[1], visitor, seen_key, block, times, off)
      redis.call('HINCRBY', KEYS[2], 'abandoned', 1)
      out[#out + 1] = visitor
    else
      redis.call('HSET', seen_key, block, with_time(times, off, now_s))
    end
  else
    out[#out + 1] = visitor
  end
end
out[3] = redis.call('ZCARD', KEYS[1])
return out
