-- Seen records, in one call, the signs of life of waiting visitors that a proxy answered from what
-- it knows (their position bounded by a RankSnapshot) instead of a status call each: their
-- last-seen times are refreshed as a status call would, so abandonment keeps working, and those no
-- longer waiting under that sequence are named, so that the proxy stops answering for them.
-- KEYS[1] waiting set, KEYS[2] totals hash
-- ARGV[1] key prefix, ARGV[2] abandon-after ms, then pairs of (visitor, arrival sequence)
-- Returns {now, admitted from the queue so far, depth, gone visitor, …}.
local prefix, abandon_ms = ARGV[1], tonumber(ARGV[2])
local stem = seen_stem(prefix)
local now = now_ms()
local now_s, silent_before = int(now), int(now - abandon_ms)
local admitted = tonumber(redis.call('HGET', KEYS[2], 'admitted') or '0')
  - tonumber(redis.call('HGET', KEYS[2], 'instantAdmitted') or '0')
local out = {now, admitted, 0}
for i = 3, #ARGV, 2 do
  local visitor, seq = ARGV[i], ARGV[i + 1]
  local score = redis.call('ZSCORE', KEYS[1], visitor)
  if score == seq then
    local skey, sfield = seen_slot(stem, seq)
    local seen = redis.call('HGET', skey, sfield)
    if seen and earlier(seen, silent_before) then
      -- Silent too long before this sign of life: gone, as a status call would find it.
      forget(KEYS[1], visitor, skey, sfield)
      redis.call('HINCRBY', KEYS[2], 'abandoned', 1)
      out[#out + 1] = visitor
    else
      redis.call('HSET', skey, sfield, now_s)
    end
  else
    out[#out + 1] = visitor
  end
end
out[3] = redis.call('ZCARD', KEYS[1])
return out
