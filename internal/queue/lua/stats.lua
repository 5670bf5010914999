-- Stats reads the queue's counters in one round trip.
-- KEYS[1] waiting set, KEYS[2] active set, KEYS[3] totals hash, KEYS[4] pre-queue set, KEYS[5] the
-- shadow set, KEYS[6..] the waiting sets of the room's lanes, named in ARGV in the same order
-- Returns {depth, active, admittedTotal, abandonedTotal, now, instantAdmittedTotal, releasedTotal,
-- preQueueDepth, shadowDepth, shadowedChallengeFailed, shadowedOverLimit}, and with lanes, the main queue's admissions by tick and
-- each lane's depth and admissions after them.
local now = now_ms()
local totals = redis.call('HMGET', KEYS[3], 'admitted', 'abandoned', 'instantAdmitted', 'released', 'shadowedChallengeFailed',
  'shadowedOverLimit')
local out = {
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%d', now), '+inf'),
  tonumber(totals[1]) or 0,
  tonumber(totals[2]) or 0,
  now,
  tonumber(totals[3]) or 0,
  tonumber(totals[4]) or 0,
  redis.call('ZCARD', KEYS[4]),
  redis.call('ZCARD', KEYS[5]),
  tonumber(totals[5]) or 0,
  tonumber(totals[6]) or 0,
}
if #ARGV > 0 then
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[3], 'laneAdmitted:main')) or 0
  for i, name in ipairs(ARGV) do
    out[#out + 1] = redis.call('ZCARD', KEYS[5 + i])
    out[#out + 1] = tonumber(redis.call('HGET', KEYS[3], 'laneAdmitted:' .. name)) or 0
  end
end
return out
