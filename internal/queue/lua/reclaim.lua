-- Reclaim writes passes the proxies hold back into a queue whose Redis may have lost them in a
-- failover: the visitor leaves the waiting queue (where a lost admission left it, to be admitted a
-- second time), its pass record comes back unless it has a newer one, and it counts as active under
-- maxActive until the pass expires. A pass that has expired since still took its visitor's place:
-- only that is written back. (The proxies send only passes alive at the failover.)
-- A pass released since (its revocation is listed) keeps its visitor out of the queue, and nothing
-- more: its slot stays free.
-- KEYS[1] waiting queue, KEYS[2] active set (score = pass expiry), KEYS[3] revocations, KEYS[4] pass
-- hash
-- ARGV per pass: visitor, notBeforeMs, expiryMs.
-- Returns {left the queue, restored to the active set}.
local now = int(now_ms())
local left, restored = 0, 0
for i = 1, #ARGV - 2, 3 do
  local visitor, nb, exp = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  left = left + redis.call('ZREM', KEYS[1], visitor)
  if earlier(now, exp) and not redis.call('ZSCORE', KEYS[3], exp .. '|' .. visitor .. '|' .. nb) then
    local rec = redis.call('HGET', KEYS[4], visitor)
    local held = rec and string.sub(rec, 1, string.find(rec, ':', 1, true) - 1)
    if not held or earlier(held, nb) then
      redis.call('HSET', KEYS[4], visitor, nb .. ':' .. exp)
    end
    -- GT: the active entry keeps the latest expiry of the visitor's passes, so that it leaves the
    -- set no earlier than the record it stands for.
    restored = restored + redis.call('ZADD', KEYS[2], 'GT', exp, visitor)
  end
end
return {left, restored}
