-- Shared helpers, prepended to every script. Times are Redis server milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Lua 5.1 writes a number as text with "%.14g", a multi-precision division per number, and Redis
-- turns a number given to redis.call into text with "%.17g". Under a herd that formatting was a large
-- share of the scripts' work (docs/performance.md), so the scripts write integers with int ("%d",
-- several times cheaper) where text is needed, and keep text that Redis gave them as text.
local fmt = string.format
local function int(n)
  return fmt('%d', n)
end

-- earlier tells whether integer text a is below integer text b (no sign, no leading zeros), without
-- converting either: the shorter is smaller, and equal lengths compare digit by digit.
local function earlier(a, b)
  local la, lb = #a, #b
  return la < lb or (la == lb and a < b)
end

-- A waiting visitor's last-seen time lives in a small hash per block of SEEN_BLOCK arrivals, field
-- seq % SEEN_BLOCK. Small hashes use Redis' compact listpack encoding, which costs a few bytes per
-- visitor where a hash or sorted set over the whole queue would cost about a hundred, and Redis walks
-- a listpack to find a field, so a short one is a fast poll. A block of ten makes its number and the
-- field the head and the last digit of the sequence's text: a poll parses and formats no number to
-- find its record. Block keys start with seen_stem, which names the block size, so that engines built
-- with different sizes, as during an upgrade, never read each other's fields as their own.
local SEEN_BLOCK = 10
local function seen_stem(prefix)
  return prefix .. ':s10:'
end

-- seen_slot returns the key and field of the last-seen record of arrival sequence seq, given as
-- integer text (as Redis answers a score).
local function seen_slot(stem, seq)
  local n = #seq
  if n == 1 then
    return stem .. '0', seq
  end
  return stem .. string.sub(seq, 1, n - 1), string.sub(seq, n)
end

-- A pass record is "notBeforeMs:expiryMs"; read_pass returns both as text, or nil when the pass has
-- expired by now (integer text) or was issued before passes_from (integer text, '0' for none): the
-- schedule's pre-queue, before which a pass belongs to an opening that is over.
local function read_pass(prefix, visitor, now, passes_from)
  local rec = redis.call('GET', prefix .. ':p:' .. visitor)
  if not rec then
    return nil
  end
  local sep = string.find(rec, ':', 1, true)
  local nb, exp = string.sub(rec, 1, sep - 1), string.sub(rec, sep + 1)
  if not earlier(now, exp) or earlier(nb, passes_from) then
    return nil
  end
  return nb, exp
end

-- The room's phase as the plan hash holds it (phase_code in plan.go); a plan without one is Open.
local PHASE_OPEN, PHASE_SCHEDULED, PHASE_PREQUEUE, PHASE_OPENING, PHASE_CLOSED = '0', '1', '2', '3', '4'

-- drawn_through is the last arrival sequence the running draw has settled: the pre-queue is placed
-- from base + 1 on, and everyone up to base + placed holds a final place (draw.lua).
local function drawn_through(draw_key)
  local d = redis.call('HMGET', draw_key, 'base', 'placed')
  return (tonumber(d[1]) or 0) + (tonumber(d[2]) or 0)
end

-- forget removes a waiting visitor and its last-seen slot.
local function forget(wait_key, visitor, skey, sfield)
  redis.call('ZREM', wait_key, visitor)
  redis.call('HDEL', skey, sfield)
end

-- add_reply appends one visitor's reply, "n v1 .. vn", to the list that table.concat(parts, ' ')
-- turns into the batch's single reply string: the client reads one string instead of an array
-- element and an allocation per number, and the script makes no table per visitor. Values are text
-- (see int); n is the list's length so far, and the new length is returned.
local reply_counts = {'0', '1', '2', '3', '4', '5', '6'}
local function add_reply(parts, n, a, b, c, d, e, f)
  local count = (a and 1 or 0) + (b and 1 or 0) + (c and 1 or 0) + (d and 1 or 0) + (e and 1 or 0) + (f and 1 or 0)
  parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4], parts[n + 5], parts[n + 6], parts[n + 7] = reply_counts[count + 1], a, b, c, d, e, f
  return n + 1 + count
end

-- fresh_reports reads a hash of replica reports stamped "reportedAtMs|report", returns {replica1,
-- report1, …} of those reported at or after oldest (ms), and deletes the older ones: replicas that
-- are gone.
local function fresh_reports(key, oldest)
  local all = redis.call('HGETALL', key)
  local out, stale = {}, {}
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
    redis.call('HDEL', key, unpack(stale))
  end
  return out
end
