-- Stats reads the queue's counters in one round trip.
-- KEYS[1] waiting set, KEYS[2] active set, KEYS[3] totals hash, KEYS[4] pre-queue set, KEYS[5..] the
-- waiting sets of the room's lanes, named in ARGV in the same order
-- Returns {depth, active, admittedTotal, abandonedTotal, now, instantAdmittedTotal, releasedTotal,
-- preQueueDepth}, and with lanes, the main queue's admissions by tick and each lane's depth and
-- admissions after them.
local now = now_ms()
local totals = redis.call('HMGET', KEYS[3], 'admitted', 'abandoned', 'instantAdmitted', 'released')
local out = {
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%d', now), '+inf'),
  tonumber(totals[1]) or 0,
  tonumber(totals[2]) or 0,
  now,
  tonumber(totals[3]) or 0,
  tonumber(totals[4]) or 0,
  redis.call('ZCARD', KEYS[4]),
}
if #ARGV > 0 then
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[3], 'laneAdmitted:main')) or 0
  for i, name in ipairs(ARGV) do
    out[#out + 1] = redis.call('ZCARD', KEYS[4 + i])
    out[#out + 1] = tonumber(redis.call('HGET', KEYS[3], 'laneAdmitted:' .. name)) or 0
  end
end
return out
