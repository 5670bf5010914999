-- Workload records or reads what the admission proxy replicas measured of the protected requests,
-- stamped with Redis' clock so that replicas on skewed clocks compare alike, and which admitted
-- visitors used their pass: a HyperLogLog per second of the passes' not-before times, so that a
-- visitor whose requests reach two replicas counts once.
-- KEYS[1] reports hash (field = replica, value = "reportedAtMs|report")
-- ARGV[1] "report": ARGV[2] replica, ARGV[3] report, ARGV[4] key prefix, ARGV[5] seconds a use
-- record lives, then groups of (second, n, n pass ids); returns now.
-- ARGV[1] "read": ARGV[2] age in ms beyond which a report is dropped, ARGV[3] key prefix, then the
-- seconds whose uses to count; returns {now, replicas, replica1, report1, …, count1, …} and deletes
-- the stale reports.
local now = now_ms()
if ARGV[1] == 'report' then
  redis.call('HSET', KEYS[1], ARGV[2], int(now) .. '|' .. ARGV[3])
  local prefix, ttl, i = ARGV[4], ARGV[5], 6
  while i <= #ARGV do
    local key, n = prefix .. ':used:' .. ARGV[i], tonumber(ARGV[i + 1])
    if n > 0 then
      redis.call('PFADD', key, unpack(ARGV, i + 2, i + 1 + n))
      redis.call('EXPIRE', key, ttl)
    end
    i = i + 2 + n
  end
  return now
end
local reports = fresh_reports(KEYS[1], now - tonumber(ARGV[2]))
local out = {now, #reports / 2}
for _, v in ipairs(reports) do
  out[#out + 1] = v
end
for i = 4, #ARGV do
  out[#out + 1] = redis.call('PFCOUNT', ARGV[3] .. ':used:' .. ARGV[i])
end
return out
