-- Admit runs one scheduler tick: it takes up to a limit of front visitors off the queue and gives
-- each a pass whose not-before time is now + lead + its jitter offset. Silent visitors met on the way
-- are dropped and never take a slot. A bounded sweep then drops silent visitors deeper in the queue.
-- Everything happens in this one script, so a crash at any moment admits nobody twice and loses
-- nobody; the tick id makes a retried call (after a lost reply, or from a second scheduler) a no-op.
-- The script's work follows the visitors it admits and examines, never the size of the plan: the
-- caller sends a limit, not one offset per slot, and the offsets are drawn here for the admitted only.
-- Commands are grouped per last-seen block because each redis.call costs far more than its work.
--
-- KEYS[1] waiting set, KEYS[2] active set (score = pass expiry), KEYS[3] totals hash, KEYS[4] sequence,
-- KEYS[5] revocations (released passes), KEYS[6] last-seen hash, KEYS[7] pass hash, KEYS[8] the shadow
-- set (swept, never admitted), KEYS[9] the plan hash (where the queues' fronts go for the proxies),
-- KEYS[10] the shadow places' lanes (hash, emptied of the places swept), KEYS[11..] the waiting sets
-- of the room's lanes, in the order of ARGV[17]
-- ARGV[1] tick id (increasing), ARGV[2] pass ttl ms, ARGV[3] abandon-after ms,
-- ARGV[4] front budget (visitors examined beyond the limit), ARGV[5] sweep blocks,
-- ARGV[6] limit (most visitors admitted), ARGV[7] jitter window ms, ARGV[8] lead ms,
-- ARGV[9] jitter seed (1 … 2147483646), ARGV[10] instant budget (most visitors enter may admit at
-- once until the next tick, out of what this tick leaves unused), ARGV[11] tick ms, ARGV[12] the most
-- active passes (0: no cap), ARGV[13] the last arrival sequence that may be admitted (-1: any; while
-- the pre-queue is drawn, the visitors behind the part already placed wait), ARGV[14] how long the
-- room may sleep, in ms (0: it may not): when the tick leaves nobody waiting and an instant budget,
-- the budget lasts that long (and a second) and carries the mark that the room sleeps, which enter
-- clears, announcing on the wake channel, when it gives a visitor a place; ARGV[15] the share of
-- each tick the sleeping room's budget is refilled to, once per tick, while it sleeps, ARGV[16] the
-- replication id of the primary the last tick ran on ("": unknown), ARGV[17] the lanes as
-- "name:percent" separated by spaces ("" for none): each lane's share of every tick's batch, the
-- main queue taking the rest (see the lanes below), ARGV[18] quiet-after ms (0: none): a place the
-- tick takes whose visitor was silent that long is counted as gone quiet, whether or not it was
-- silent long enough to be dropped, ARGV[19] abandon-at-turn ms (0: abandon-after): a place the
-- tick takes off the front whose visitor was silent that long is dropped, not admitted
-- Returns {1, now, abandoned, asleep, sequence, primary, fronts, id1, notBefore1, expiry1, arrival1, id2, ...},
-- {0, now, lastTick, primary} when this tick id was already run, or {2, now, primary} when the
-- primary is not the one the last tick ran on: a failover, which may have lost admissions the
-- proxies have yet to write back, so nothing is done. The sequence is the last arrival given out
-- by now, and each arrival the admitted visitor's: the scheduler times waits with them; primary is
-- this server's replication id ("" when it does not say). fronts tells how each queue's front moved,
-- the main queue first, then the lanes in the order of ARGV[17], separated by spaces:
-- "head:admitted:emptied:depth:taken:quiet:samples", head being the arrival at the queue's front when
-- the tick began to take from it (-1 when it took nobody), admitted how many it admitted from it,
-- emptied 1 when it took the queue's last place, depth the places left in it, taken the places it
-- took off the front (admitted or dropped), quiet how many of those had gone quiet (ARGV[18]), and
-- samples up to QUIET_SAMPLES of them as "arrival/silenceMs" separated by commas ("-" for none):
-- the scheduler measures the front's advance, forecasts the lanes' shares and tells how the places
-- that go quiet are dropped with them (docs/architecture.md, "Wait estimates").
local tick = tonumber(ARGV[1])
local ttl, abandon_ms = tonumber(ARGV[2]), tonumber(ARGV[3])
local front_budget, sweep_blocks = tonumber(ARGV[4]), tonumber(ARGV[5])
local limit, window, lead, seed = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local instant_cap, tick_ms = tonumber(ARGV[10]), tonumber(ARGV[11])
local max_active = tonumber(ARGV[12])
local max_seq = tonumber(ARGV[13]) or -1
local sleep_ms, sleep_share = tonumber(ARGV[14]) or 0, tonumber(ARGV[15]) or 0
local quiet_ms = tonumber(ARGV[18]) or 0
-- A few of the quiet places a queue's front takes per tick are enough to tell how long visitors
-- stay before they go quiet; a bounded reply keeps a tick's cost its own.
local QUIET_SAMPLES = 8
local seen_key = KEYS[6]
local now = now_ms()

-- A client that followed a failover within one call (its retries reached the new primary) learns of
-- it here, before anyone is admitted there.
local primary = ''
local info = redis.pcall('INFO', 'replication')
if type(info) == 'string' then
  primary = string.match(info, 'master_replid:(%w+)') or ''
end
local expected = ARGV[16] or ''
if expected ~= '' and primary ~= '' and primary ~= expected then
  return {2, now, primary}
end
-- Numbers become text once, with int (see common.lua); a visitor last seen before silent_before is
-- silent too long.
local now_s, silent_before = int(now), int(now - abandon_ms)
-- At its turn a visitor may have been silent for less, when the room asks for it (spec.abandonAtTurnAfter).
local turn_ms = tonumber(ARGV[19]) or 0
local silent_at_turn = silent_before
if turn_ms > 0 and turn_ms < abandon_ms then
  silent_at_turn = int(now - turn_ms)
end

-- The last tick id and the sweep cursor are read together here and written together at the end.
local state = redis.call('HMGET', KEYS[3], 'tick', 'sweep')
local last = tonumber(state[1])
if last and tick <= last then
  return {0, now, last, primary}
end

-- Lua's unpack is limited by the C stack; send long argument lists in chunks.
local CHUNK = 1000
local function call_chunked(cmd, key, args, step)
  for i = 1, #args, CHUNK * step do
    redis.call(cmd, key, unpack(args, i, math.min(#args, i + CHUNK * step - 1)))
  end
end

-- pop removes up to n front visitors of the set key and their last-seen times; it returns them in
-- order with their last-seen times and arrivals as text (the time nil when unknown).
local function pop(key, n)
  local front = redis.call('ZPOPMIN', key, n)
  local popped, times, block_order = {}, {}, {}
  for i = 1, #front, 2 do
    local block, off = seen_slot(front[i + 1])
    if times[block] == nil then
      times[block] = redis.call('HGET', seen_key, block) or false
      block_order[#block_order + 1] = block
    end
    popped[#popped + 1] = {front[i], block, off, nil, front[i + 1]}
  end
  for _, p in ipairs(popped) do
    local t = times[p[2]]
    if t then
      p[4] = slot_time(t, p[3])
      times[p[2]] = with_time(t, p[3], NO_TIME)
    end
  end
  for _, block in ipairs(block_order) do
    if times[block] then
      store_times(seen_key, block, times[block])
    end
  end
  return popped
end

-- A cap on active passes (admitted, not expired, not released) takes the room left under it.
if max_active > 0 then
  local active_now = redis.call('ZCOUNT', KEYS[2], '(' .. now_s, '+inf')
  limit = math.max(0, math.min(limit, max_active - active_now))
end

-- The arrival sequence as of now: every visitor who took a place so far has an arrival up to it.
local sequence = tonumber(redis.call('GET', KEYS[4])) or 0
local out = {1, now, 0, 0, sequence, primary, ''}
local abandoned = 0
local chosen, arrivals = {}, {}
-- heads are the arrivals at the front of each set as the tick first took from it, taken by set;
-- popped, quiet and samples count the places taken off each set's front and those gone quiet.
local heads, taken = {}, {}
local popped_of, quiet_of, samples_of = {}, {}, {}
-- A pop that returns fewer visitors than it asked for leaves the waiting set empty.
local drained = false
-- take admits up to want visitors from the front of the set key, dropping the silent ones it meets
-- and examining at most want + front_budget (up to the arrival max_seq for the main queue), so a
-- queue of silent visitors cannot make one tick unbounded. It returns how many it admitted, and
-- whether it emptied the set.
local function take(key, want, bound)
  local got, emptied = 0, false
  local budget = want + front_budget
  if bound then
    -- ZPOPMIN takes the front, so popping no more than the visitors up to max_seq never passes it.
    budget = math.min(budget, redis.call('ZCOUNT', key, '-inf', max_seq))
  end
  while got < want and budget > 0 do
    local asked = math.min(want - got, budget)
    local popped = pop(key, asked)
    if #popped < asked then
      emptied = true
    end
    if #popped == 0 then
      break
    end
    budget = budget - #popped
    if not heads[key] then
      heads[key] = popped[1][5]
    end
    popped_of[key] = (popped_of[key] or 0) + #popped
    for _, p in ipairs(popped) do
      local seen = p[4]
      if seen and quiet_ms > 0 and now - tonumber(seen) >= quiet_ms then
        quiet_of[key] = (quiet_of[key] or 0) + 1
        local samples = samples_of[key] or {}
        samples_of[key] = samples
        if #samples < QUIET_SAMPLES then
          samples[#samples + 1] = p[5] .. '/' .. int(now - tonumber(seen))
        end
      end
      if seen and earlier(seen, silent_at_turn) then
        abandoned = abandoned + 1
      else
        got = got + 1
        chosen[#chosen + 1] = p[1]
        arrivals[#chosen] = p[5]
      end
    end
  end
  taken[key] = (taken[key] or 0) + got
  if emptied then
    taken[key .. ':emptied'] = true
  end
  return got, emptied
end

-- The room's lanes share each tick's batch by their percentages, the main queue taking the rest. A
-- lane's credit (totals hash, laneCredit:<name>) carries the fraction of a visitor its share left
-- over from tick to tick, so that over the ticks each busy lane is admitted exactly its share. A lane
-- with nobody waiting gives its share to the others, by their weights, and keeps no credit: it
-- cannot save up a burst. Inside a lane the order is FIFO.
local lane_keys, lane_names, weights = {KEYS[1]}, {'main'}, {0}
for name, pct in string.gmatch(ARGV[17] or '', '([%w-]+):(%d+)') do
  lane_keys[#lane_keys + 1] = KEYS[10 + #lane_keys]
  lane_names[#lane_names + 1] = name
  weights[#weights + 1] = tonumber(pct)
  weights[1] = weights[1] + tonumber(pct)
end
weights[1] = 100 - weights[1]
if #lane_keys == 1 then
  drained = select(2, take(KEYS[1], limit, max_seq >= 0))
else
  local fields, depths, active_weight = {}, {}, 0
  for i, name in ipairs(lane_names) do
    fields[i] = 'laneCredit:' .. name
    if max_seq >= 0 then
      -- While the draw runs, each lane too admits only its part of the pre-queue placed so far.
      depths[i] = redis.call('ZCOUNT', lane_keys[i], '-inf', max_seq)
    else
      depths[i] = redis.call('ZCARD', lane_keys[i])
    end
    if depths[i] > 0 then
      active_weight = active_weight + weights[i]
    end
  end
  local credits, allot, given = redis.call('HMGET', KEYS[3], unpack(fields)), {}, 0
  for i = 1, #lane_keys do
    allot[i] = 0
    if depths[i] > 0 and active_weight > 0 then
      credits[i] = (tonumber(credits[i]) or 0) + limit * weights[i] / active_weight
      allot[i] = math.min(depths[i], math.max(0, math.floor(credits[i] + 1e-9)))
      given = given + allot[i]
    else
      credits[i] = 0
    end
  end
  -- What the floors left goes to the lanes with visitors to spare, the most owed first.
  while given < limit do
    local best = nil
    for i = 1, #lane_keys do
      if depths[i] > allot[i] and (not best or credits[i] - allot[i] > credits[best] - allot[best]) then
        best = i
      end
    end
    if not best then
      break
    end
    allot[best], given = allot[best] + 1, given + 1
  end
  local admitted_of, emptied = {}, {}
  for i = 1, #lane_keys do
    admitted_of[i], emptied[i] = 0, depths[i] == 0
    if allot[i] > 0 then
      admitted_of[i], emptied[i] = take(lane_keys[i], allot[i], max_seq >= 0)
    end
  end
  -- Silent visitors dropped on the way leave room: a second round offers it to the lanes with more.
  local short = limit - #chosen
  for i = 1, #lane_keys do
    if short <= 0 then
      break
    end
    if not emptied[i] and depths[i] > admitted_of[i] then
      local got, gone = take(lane_keys[i], short, max_seq >= 0)
      admitted_of[i], emptied[i], short = admitted_of[i] + got, gone, short - got
    end
  end
  local kept = {}
  drained = true
  for i, name in ipairs(lane_names) do
    local c = credits[i] - admitted_of[i]
    if emptied[i] or depths[i] == 0 then
      c = 0
    else
      drained = false
    end
    -- What a lane took of another's share is forgiven beyond one visitor.
    kept[#kept + 1] = fields[i]
    kept[#kept + 1] = fmt('%.6f', math.min(limit + 1, math.max(-1, c)))
    if admitted_of[i] > 0 then
      redis.call('HINCRBY', KEYS[3], 'laneAdmitted:' .. name, int(admitted_of[i]))
    end
  end
  redis.call('HSET', KEYS[3], unpack(kept))
  -- The batch reaches the workload in arrival order across the lanes: the earliest, the earliest
  -- slot of the jitter window.
  local order = {}
  for i = 1, #chosen do
    order[i] = i
  end
  table.sort(order, function(a, b) return tonumber(arrivals[a]) < tonumber(arrivals[b]) end)
  local sorted_chosen, sorted_arrivals = {}, {}
  for i, j in ipairs(order) do
    sorted_chosen[i], sorted_arrivals[i] = chosen[j], arrivals[j]
  end
  chosen, arrivals = sorted_chosen, sorted_arrivals
end

local fronts = {}
for i, key in ipairs(lane_keys) do
  local depth = redis.call('ZCARD', key)
  -- A pop that took exactly the last places does not know it did.
  local emptied = taken[key .. ':emptied'] or (heads[key] and depth == 0)
  local samples = samples_of[key]
  fronts[i] = (heads[key] or '-1') .. ':' .. int(taken[key] or 0) .. ':' .. (emptied and '1' or '0') .. ':' .. int(depth) ..
    ':' .. int(popped_of[key] or 0) .. ':' .. int(quiet_of[key] or 0) .. ':' .. (samples and table.concat(samples, ',') or '-')
end
out[7] = table.concat(fronts, ' ')

-- The window is cut into one slot per admitted visitor, earliest first, and each offset falls within
-- its own slot, drawn from a Park–Miller generator (exact in Lua's doubles: every product stays below
-- 2^53) so that queue.JitterOffsets computes the same offsets in Go. Slot i is
-- [floor(i×window/n), floor((i+1)×window/n)) milliseconds.
local n = #chosen
local admitted = n
local active, records = {}, {}
local x = seed
for i = 1, n do
  x = (x * 48271) % 2147483647
  local lo = math.floor((i - 1) * window / n)
  local width = math.floor(i * window / n) - lo
  local off = lo
  if width > 0 then
    off = lo + x % width
  end
  local visitor = chosen[i]
  local nb = now + lead + off
  local exp = nb + ttl
  local exp_s = int(exp)
  records[#records + 1] = visitor
  records[#records + 1] = int(nb) .. ':' .. exp_s
  active[#active + 1] = exp_s
  active[#active + 1] = visitor
  out[#out + 1] = visitor
  out[#out + 1] = nb
  out[#out + 1] = exp
  out[#out + 1] = tonumber(arrivals[i])
end
if #active > 0 then
  call_chunked('HSET', KEYS[7], records, 2)
  call_chunked('ZADD', KEYS[2], active, 2)
end

-- The sweep walks the last-seen blocks from a cursor, at most sweep_blocks blocks per tick, and
-- starts over at the front block when it passes the newest. A block holds last-seen times only
-- while its visitors wait, so a block with times lies inside the queue; the queue's bounds are read
-- only when the cursor meets an empty block, which spares two calls on most ticks.
local cursor = tonumber(state[2])
local first, newest
-- The sweep drops silent visitors of the shadow set too: its places hold signs of life like any.
-- lane_keys starts with the main queue, which holds most places, so it is read first.
local swept_keys = {}
for _, key in ipairs(lane_keys) do
  swept_keys[#swept_keys + 1] = key
end
swept_keys[#swept_keys + 1] = KEYS[8]
for _ = 1, sweep_blocks do
  local block = cursor and int(cursor)
  local times = block and redis.call('HGET', seen_key, block)
  if not times then
    if not first then
      -- The front is the earliest place of any set the sweep reads: the main queue may be empty
      -- while a lane or the shadow set still holds places.
      for _, key in ipairs(swept_keys) do
        local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        if #head > 0 then
          local b = math.floor(tonumber(head[2]) / SEEN_BLOCK)
          if not first or b < first then
            first = b
          end
        end
      end
      if not first then
        break
      end
      newest = math.floor(sequence / SEEN_BLOCK)
    end
    if not cursor or cursor < first or cursor > newest then
      cursor = first
      block = int(cursor)
      times = redis.call('HGET', seen_key, block)
    end
  end
  if times then
    local kept = times
    for off = 0, SLOT * (SEEN_BLOCK - 1), SLOT do
      -- Times and silent_before are SLOT digits, so text order is time order, and an empty slot
      -- (NO_TIME) sorts above every time.
      local t = string.sub(times, off + 1, off + SLOT)
      if t < silent_before then
        kept = with_time(kept, off, NO_TIME)
        local seq = int(cursor * SEEN_BLOCK + off / SLOT)
        for _, key in ipairs(swept_keys) do
          local member = redis.call('ZRANGE', key, seq, seq, 'BYSCORE', 'LIMIT', 0, 1)
          if #member > 0 then
            redis.call('ZREM', key, member[1])
            if key == KEYS[8] then
              redis.call('HDEL', KEYS[10], member[1])
            end
            abandoned = abandoned + 1
            break
          end
        end
      end
    end
    if kept ~= times then
      store_times(seen_key, block, kept)
    end
  end
  cursor = cursor + 1
end

-- What the tick could not admit from the queue, enter may admit at once until the next tick replaces
-- it, so that under light load nobody waits. It is this tick's own unused share, whenever it is
-- claimed: ticks and instant admissions together never pass the plan. It lasts a second longer than
-- the tick, so that a next tick a little late leaves no gap, and a scheduler that stopped leaves no
-- budget behind for long.
-- A room left with nobody waiting may sleep: its scheduler skips the ticks until the budget's end,
-- and the budget lasts until then. Enter refills it once per tick of the skipped ones, as those ticks
-- would have (to sleep_share, under max_active), and wakes the room when someone has to wait
-- (docs/architecture.md). "untilMs:left:passTtlMs:1:tickMs:share:maxActive:windowMs", the window
-- being the start of the tick whose share left is.
local left = math.min(limit - admitted, instant_cap)
local asleep = false
if left > 0 and sleep_ms > 0 and max_seq < 0 then
  if not drained then
    drained = true
    for _, key in ipairs(lane_keys) do
      drained = drained and redis.call('ZCARD', key) == 0
    end
  end
  asleep = drained
end
if asleep then
  redis.call('HSET', KEYS[3], 'instant', int(now + sleep_ms + 1000) .. ':' .. int(left) .. ':' .. ARGV[2] .. ':1:' ..
    int(tick_ms) .. ':' .. int(sleep_share) .. ':' .. int(max_active) .. ':' .. now_s)
  out[4] = 1
elseif left > 0 then
  redis.call('HSET', KEYS[3], 'instant', int(now + tick_ms + 1000) .. ':' .. int(left) .. ':' .. ARGV[2])
else
  redis.call('HDEL', KEYS[3], 'instant')
end

-- Expired passes leave the active set, and their records the pass hash, a bounded number per tick:
-- as many as ticks admit, and more, so that the backlog of a room that slept clears within a few
-- ticks. A record is dropped only when it expired too: a visitor may hold a newer pass.
local expired = redis.call('ZRANGE', KEYS[2], '-inf', now_s, 'BYSCORE', 'LIMIT', 0, 1000)
if #expired > 0 then
  local recs = redis.call('HMGET', KEYS[7], unpack(expired))
  local ended = {}
  for i = 1, #expired do
    local rec = recs[i]
    if rec and not earlier(now_s, string.sub(rec, string.find(rec, ':', 1, true) + 1)) then
      ended[#ended + 1] = expired[i]
    end
  end
  if #ended > 0 then
    redis.call('HDEL', KEYS[7], unpack(ended))
  end
  redis.call('ZREM', KEYS[2], unpack(expired))
end
-- Revocations of released passes outlive their passes for nothing: drop the oldest that expired, a
-- bounded number per tick. An entry is "expiryMs|visitor|notBeforeMs", scored by its sequence.
local rev = redis.call('ZRANGE', KEYS[5], 0, 15)
local gone = {}
for i = 1, #rev do
  local exp = string.sub(rev[i], 1, string.find(rev[i], '|', 1, true) - 1)
  if not earlier(now_s, exp) then
    gone[#gone + 1] = rev[i]
  end
end
if #gone > 0 then
  redis.call('ZREM', KEYS[5], unpack(gone))
end
if cursor then
  redis.call('HSET', KEYS[3], 'tick', ARGV[1], 'sweep', int(cursor))
else
  redis.call('HSET', KEYS[3], 'tick', ARGV[1])
end
if admitted > 0 then
  redis.call('HINCRBY', KEYS[3], 'admitted', int(admitted))
end
if abandoned > 0 then
  redis.call('HINCRBY', KEYS[3], 'abandoned', int(abandoned))
end
-- The arrival at each queue's front after the tick and its sweep goes with the phase the proxies
-- read at every status call (status.lua): a visitor is told the admissions between it and its
-- queue's front, and reading it there costs a status call no command of its own.
local after = {}
for i, key in ipairs(lane_keys) do
  after[i] = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2] or '0'
end
redis.call('HSET', KEYS[9], 'fronts', table.concat(after, ' '))
out[3] = abandoned
return out
