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

-- A waiting visitor's last-seen time lives in the queue's one last-seen hash, which every script
-- that touches it declares: servers that run a script only on its declared keys (Dragonfly,
-- ElastiCache Serverless) refuse a key made inside the script. Its field is the visitor's block of
-- SEEN_BLOCK arrivals, the head of the sequence's text ('0' below 10), and the value holds the
-- block's SEEN_BLOCK times side by side, SLOT characters each (milliseconds, or NO_TIME), the
-- sequence's last digit choosing the slot: a poll parses and formats no number to find its record,
-- and a block of ten costs about what a field of its own in a small hash did, a few bytes a visitor
-- (docs/performance.md).
local SEEN_BLOCK, SLOT = 10, 13
local NO_TIME = '~~~~~~~~~~~~~' -- above any time, so that an empty slot never looks silent
local NO_TIMES = string.rep(NO_TIME, SEEN_BLOCK)
local slot_of = {['0'] = 0, ['1'] = 13, ['2'] = 26, ['3'] = 39, ['4'] = 52, ['5'] = 65, ['6'] = 78, ['7'] = 91,
  ['8'] = 104, ['9'] = 117}

-- seen_slot returns the block and the slot's offset of arrival sequence seq, given as integer text
-- (as Redis answers a score).
local function seen_slot(seq)
  local n = #seq
  if n == 1 then
    return '0', slot_of[seq]
  end
  return string.sub(seq, 1, n - 1), slot_of[string.sub(seq, n)]
end

-- slot_time is the time in the slot at off of a block's value (nil for none).
local function slot_time(times, off)
  if not times then
    return nil
  end
  local t = string.sub(times, off + 1, off + SLOT)
  if t == NO_TIME then
    return nil
  end
  return t
end

-- with_time is a block's value (nil for a new block) with t in the slot at off.
local function with_time(times, off, t)
  times = times or NO_TIMES
  return string.sub(times, 1, off) .. t .. string.sub(times, off + SLOT + 1)
end

-- store_times writes a block's value back, dropping a block left with no time.
local function store_times(seen_key, block, times)
  if times == NO_TIMES then
    redis.call('HDEL', seen_key, block)
  else
    redis.call('HSET', seen_key, block, times)
  end
end

-- touch_seen sets the last-seen time of the arrival at (block, off) to t.
local function touch_seen(seen_key, block, off, t)
  redis.call('HSET', seen_key, block, with_time(redis.call('HGET', seen_key, block), off, t))
end

-- A pass record is "notBeforeMs:expiryMs", the visitor's field of the queue's pass hash (one key,
-- so that scripts declare it; the admit script drops expired records). read_pass returns both as
-- text, or nil when the pass has expired by now (integer text) or was issued before passes_from
-- (integer text, '0' for none): the schedule's pre-queue, before which a pass belongs to an opening
-- that is over.
local function read_pass(passes_key, visitor, now, passes_from)
  local rec = redis.call('HGET', passes_key, visitor)
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

-- forget removes a waiting visitor and its last-seen time, times being its block's value as read.
local function forget(wait_key, visitor, seen_key, block, times, off)
  redis.call('ZREM', wait_key, visitor)
  if times then
    store_times(seen_key, block, with_time(times, off, NO_TIME))
  end
end

-- add_reply appends one visitor's reply, "n v1 .. vn", to the list that table.concat(parts, ' ')
-- turns into the batch's single reply string: the client reads one string instead of an array
-- element and an allocation per number, and the script makes no table per visitor. Values are text
-- (see int); n is the list's length so far, and the new length is returned.
local reply_counts = {'0', '1', '2', '3', '4', '5', '6', '7', '8'}
local function add_reply(parts, n, a, b, c, d, e, f, g, h)
  local count = (a and 1 or 0) + (b and 1 or 0) + (c and 1 or 0) + (d and 1 or 0) + (e and 1 or 0) + (f and 1 or 0) + (g and 1 or 0) + (h and 1 or 0)
  parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4], parts[n + 5], parts[n + 6], parts[n + 7], parts[n + 8], parts[n + 9] = reply_counts[count + 1], a, b, c, d, e, f, g, h
  return n + 1 + count
end

-- fronts_of reads the plan hash's fronts, the arrival at each queue's front as the last tick left
-- it (admit.lua): the main queue's at [0], lane i's at [i]; "0" when unknown. The proxy counts the
-- arrivals between a visitor and its queue's front for the admissions they will take
-- (capacity.Ahead).
local function fronts_of(text)
  local fronts, i = {}, 0
  for f in string.gmatch(text or '', '%S+') do
    fronts[i] = f
    i = i + 1
  end
  return fronts
end

-- A room's metered lanes (spec.lanes) wait in sets of their own beside the main queue (lane 0), in
-- the same arrival sequence and last-seen hash. in_lanes finds the lane set (of the list of keys
-- lanes) that holds visitor, for one the main queue does not: it returns the set's key, its lane
-- number (1 for the first) and the visitor's arrival, or nil.
local function in_lanes(lanes, visitor)
  for i, key in ipairs(lanes) do
    local seq = redis.call('ZSCORE', key, visitor)
    if seq then
      return key, i, seq
    end
  end
  return nil
end

-- hashed_lane is the lane number (in the list of keys lanes, 1 for the first) a hash of lanes by
-- name records for visitor: the lane its pre-queue place joins at the draw, or the one its shadow
-- place reads as; 0 for the main queue, and for a lane the room no longer has.
local function hashed_lane(lanes_key, wait_key, lanes, visitor)
  if #lanes == 0 then
    return 0
  end
  local name = redis.call('HGET', lanes_key, visitor)
  if not name then
    return 0
  end
  local key = wait_key .. ':' .. name
  for i, k in ipairs(lanes) do
    if k == key then
      return i
    end
  end
  return 0
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
