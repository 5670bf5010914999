-- Workload records or reads what the admission proxy replicas measured of the protected requests,
-- stamped with Redis' clock so that replicas on skewed clocks compare alike, and which admitted
-- visitors used their pass: a HyperLogLog per second of the passes' not-before times, so that a
-- visitor whose requests reach two replicas counts once.
-- KEYS[1] reports hash (field = replica, value = "reportedAtMs|report"), KEYS[2..] the uses of the
-- seconds reported or read, one HyperLogLog each
-- ARGV[1] "report": ARGV[2] replica, ARGV[3] report, ARGV[4] seconds a use record lives, then per
-- second, in the order of its key: n, n pass ids; returns now.
-- ARGV[1] "read": ARGV[2] age in ms beyond which a report is dropped; returns {now, replicas,
-- replica1, report1, …, count1, …}, a count per second's key, and deletes the stale reports.
local now = now_ms()
if ARGV[1] == 'report' then
  redis.call('HSET', KEYS[1], ARGV[2], int(now) .. '|' .. ARGV[3])
  local ttl, i = ARGV[4], 5
  for k = 2, #KEYS do
    local n = tonumber(ARGV[i])
    if n > 0 then
      redis.call('PFADD', KEYS[k], unpack(ARGV, i + 1, i + n))
      redis.call('EXPIRE', KEYS[k], ttl)
    end
    i = i + 1 + n
  end
  return now
end
local reports = fresh_reports(KEYS[1], now - tonumber(ARGV[2]))
local out = {now, #reports / 2}
for _, v in ipairs(reports) do
  out[#out + 1] = v
end
for k = 2, #KEYS do
  out[#out + 1] = redis.call('PFCOUNT', KEYS[k])
end
return out
