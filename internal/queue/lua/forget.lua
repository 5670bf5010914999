-- Forget drops the passes of an earlier opening. When a schedule opens, a pass issued before its
-- pre-queue opens nothing (the proxies refuse it, enter and status ignore it), so it must not hold a
-- slot under maxActive either. One call scans a bounded part of the active set; the caller repeats it
-- with the cursor returned until that is 0.
-- KEYS[1] active set (score = pass expiry), KEYS[2] pass hash
-- ARGV[1] scan cursor, ARGV[2] passes count from this not-before time (ms), ARGV[3] how many
-- entries to scan
-- Returns {next cursor, passes forgotten}.
local from = ARGV[2]
local scanned = redis.call('ZSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[3])
local items, forgotten = scanned[2], 0
for i = 1, #items, 2 do
  local visitor = items[i]
  local rec = redis.call('HGET', KEYS[2], visitor)
  -- No record: the pass expired or was released this very millisecond; its entry goes too.
  if not rec or earlier(string.sub(rec, 1, string.find(rec, ':', 1, true) - 1), from) then
    if rec then
      redis.call('HDEL', KEYS[2], visitor)
    end
    redis.call('ZREM', KEYS[1], visitor)
    forgotten = forgotten + 1
  end
end
return {scanned[1], forgotten}
