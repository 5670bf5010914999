-- Sessions ends and extends admitted visitors' passes, and lists the passes ended, for the proxies
-- that check passes in memory. A pass is named by its visitor and its not-before time: a newer pass
-- of the same visitor is another pass.
-- KEYS[1] active set (score = pass expiry), KEYS[2] revocations (score = sequence, member =
-- "expiryMs|visitor|notBeforeMs"), KEYS[3] revocation sequence, KEYS[4] totals hash, KEYS[5] pass
-- hash
-- ARGV[1] revocations to list after this sequence, ARGV[2] most to list, ARGV[3] how many releases
-- follow, then per release: visitor, notBeforeMs, the pass's expiryMs;
-- then per renewal: visitor, notBeforeMs, new expiryMs.
-- Returns {released, renewed, sequence, seq1, entry1, seq2, entry2, ...}: the revocations after the
-- sequence asked for, up to the most asked for, and the latest sequence (lower than the one asked
-- for when Redis lost its data: then the list starts over).
local after, most, releases = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local now_s = int(now)

-- the pass record of visitor when it is the pass that began at nb: its expiry as text, else nil
local function current(visitor, nb)
  local rec = redis.call('HGET', KEYS[5], visitor)
  if not rec then
    return nil
  end
  local sep = string.find(rec, ':', 1, true)
  if string.sub(rec, 1, sep - 1) ~= nb then
    return nil
  end
  return string.sub(rec, sep + 1)
end

local released, renewed = 0, 0
local i = 4
for _ = 1, releases do
  local visitor, nb, exp = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  local held = current(visitor, nb)
  -- Released once: a second release of the same pass, from another replica, finds no record.
  if held then
    redis.call('HDEL', KEYS[5], visitor)
    redis.call('ZREM', KEYS[1], visitor)
    released = released + 1
    exp = held
  end
  -- Listed once; a pass Redis lost (a failover) is listed with the expiry the proxy knows.
  local entry = exp .. '|' .. visitor .. '|' .. nb
  if earlier(now_s, exp) and not redis.call('ZSCORE', KEYS[2], entry) then
    redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), entry)
  end
end
while i + 2 <= #ARGV do
  local visitor, nb, new_exp = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  local exp = current(visitor, nb)
  if exp and earlier(exp, new_exp) then
    redis.call('HSET', KEYS[5], visitor, nb .. ':' .. new_exp)
    redis.call('ZADD', KEYS[1], 'XX', new_exp, visitor)
    renewed = renewed + 1
  end
end
if released > 0 then
  redis.call('HINCRBY', KEYS[4], 'released', int(released))
end

local seq = tonumber(redis.call('GET', KEYS[3])) or 0
local out = {released, renewed, seq}
if seq < after then
  after = 0
end
local listed = redis.call('ZRANGE', KEYS[2], '(' .. int(after), '+inf', 'BYSCORE', 'LIMIT', 0, most, 'WITHSCORES')
for j = 1, #listed, 2 do
  out[#out + 1] = tonumber(listed[j + 1])
  out[#out + 1] = listed[j]
end
return out
