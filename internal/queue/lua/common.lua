-- Shared helpers, prepended to every script. Times are Redis server milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A waiting visitor's last-seen time lives in a small hash per block of sequence numbers, field
-- seq % block. Small hashes use Redis' compact listpack encoding, which costs a few bytes per visitor
-- where a hash or sorted set over the whole queue would cost about a hundred.
local function seen_slot(prefix, seq, block)
  -- Lua prints integral numbers below 1e14 without a fraction, so plain concatenation is exact.
  return prefix .. ':s:' .. math.floor(seq / block), seq % block
end

-- A pass record is "notBeforeMs:expiryMs"; it returns both, or nil when the pass has expired.
local function read_pass(prefix, visitor, now)
  local rec = redis.call('GET', prefix .. ':p:' .. visitor)
  if not rec then
    return nil
  end
  local sep = string.find(rec, ':', 1, true)
  local nb, exp = tonumber(string.sub(rec, 1, sep - 1)), tonumber(string.sub(rec, sep + 1))
  if exp <= now then
    return nil
  end
  return nb, exp
end

-- forget removes a waiting visitor and its last-seen slot.
local function forget(wait_key, visitor, skey, sfield)
  redis.call('ZREM', wait_key, visitor)
  redis.call('HDEL', skey, sfield)
end

-- add_reply appends one visitor's reply, "n v1 .. vn", to the list that table.concat(parts, ' ')
-- turns into the batch's single reply string: the client reads one string instead of an array
-- element and an allocation per number, and the script makes no table per visitor. n is the list's
-- length so far; the new length is returned. Lua prints integral numbers below 1e14 exactly, which
-- covers milliseconds and positions.
local function add_reply(parts, n, a, b, c, d, e)
  local count = (a and 1 or 0) + (b and 1 or 0) + (c and 1 or 0) + (d and 1 or 0) + (e and 1 or 0)
  parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4], parts[n + 5], parts[n + 6] = count, a, b, c, d, e
  return n + 1 + count
end
