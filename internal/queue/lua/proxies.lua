-- Proxies records or reads what the admission proxy replicas report of their config, stamped with
-- Redis' clock so that replicas on skewed clocks compare alike.
-- KEYS[1] reports hash (field = replica, value = "reportedAtMs|report")
-- ARGV[1] "report": ARGV[2] replica, ARGV[3] report; returns now.
-- ARGV[1] "read": ARGV[2] age in ms beyond which a report is dropped; returns {now, replica1,
-- report1, …} of the fresher reports, and deletes the stale ones.
local now = now_ms()
if ARGV[1] == 'report' then
  redis.call('HSET', KEYS[1], ARGV[2], int(now) .. '|' .. ARGV[3])
  return now
end
local out = {now}
for _, v in ipairs(fresh_reports(KEYS[1], now - tonumber(ARGV[2]))) do
  out[#out + 1] = v
end
return out
