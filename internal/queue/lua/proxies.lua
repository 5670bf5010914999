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
local oldest = now - tonumber(ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local out, stale = {now}, {}
for i = 1, #all, 2 do
  local value = all[i + 1]
  local sep = string.find(value, '|', 1, true)
  if sep and tonumber(string.sub(value, 1, sep - 1)) >= oldest then
    out[#out + 1] = all[i]
    out[#out + 1] = string.sub(value, sep + 1)
  else
    stale[#stale + 1] = all[i]
  end
end
if #stale > 0 then
  redis.call('HDEL', KEYS[1], unpack(stale))
end
return out
