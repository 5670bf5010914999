-- Stats reads the queue's counters in one round trip.
-- KEYS[1] waiting set, KEYS[2] active set, KEYS[3] totals hash, KEYS[4] pre-queue set
-- Returns {depth, active, admittedTotal, abandonedTotal, now, instantAdmittedTotal, releasedTotal,
-- preQueueDepth}.
local now = now_ms()
local totals = redis.call('HMGET', KEYS[3], 'admitted', 'abandoned', 'instantAdmitted', 'released')
return {
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%d', now), '+inf'),
  tonumber(totals[1]) or 0,
  tonumber(totals[2]) or 0,
  now,
  tonumber(totals[3]) or 0,
  tonumber(totals[4]) or 0,
  redis.call('ZCARD', KEYS[4]),
}
