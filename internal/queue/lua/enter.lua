-- Enter puts visitors at the back of the queue, or reports where they already are. The proxy sends
-- the entries that arrive together in one call; each is handled as if it came alone, in order.
-- While nobody waits and the last tick left part of its quota unused (the instant budget the admit
-- script writes), a new visitor is admitted at once instead: a pass valid now, no place, no poll.
-- What a new visitor gets depends on the room's phase, which the scheduler publishes in the plan
-- (see phase_code in plan.go): in PreQueue a pre-queue place, whose order is drawn at opening; in
-- Opening a place behind the whole pre-queue; in Scheduled and Closed nothing.
-- KEYS[1] waiting set (score = arrival sequence), KEYS[2] sequence, KEYS[3] totals hash,
-- KEYS[4] active set (score = pass expiry), KEYS[5] plan hash, KEYS[6] pre-queue set (score =
-- arrival sequence), KEYS[7] draw state hash, KEYS[8] last-seen hash, KEYS[9] pass hash, KEYS[10]
-- the shadow set (visitors who never come up), KEYS[11] the pre-queue's lanes (hash: the lane a
-- pre-queue place joins at the draw, by visitor), KEYS[12] the shadow places' lanes (hash: the
-- lane a shadow place reads as, by visitor), KEYS[13 .. 12 + ARGV[7]] the waiting sets of the room's
-- lanes, in order (common.lua, in_lanes)
-- ARGV[1] key prefix, ARGV[2] abandon-after ms, ARGV[3] entry burst and ARGV[4] places per minute
-- (0: no limit), ARGV[5] the highest arrival sequence the caller has seen (0: none), ARGV[6] the
-- highest the caller saw the primary before the last failover give (0: none or long ago), ARGV[7]
-- the number of lanes, ARGV[8] the shadow factor (0: none; a client that asks for that many times
-- its burst takes shadow places), ARGV[9..] each visitor followed by its client ("" for none), its single-use
-- tokens ("id:untilMs" separated by spaces, "" for none; "id:untilMs:uses" for a token that enters
-- up to uses visitors), the arrival sequence of the place it held before a failover ("" for none;
-- prefixed with "=" when the visitor asks only for that place back, and takes nothing else; followed
-- by "@" and the lane's number when the place was in a lane) and the lane it joins when it takes a
-- new place (0: the main queue, i: lane i; -1 - i: the shadow set, whatever the phase, reading as
-- that queue)
-- Returns one reply per visitor: {1, notBefore, expiry, now} for a visitor holding a pass,
-- {2, position, depth, now, 0, seq, lane, front} for one waiting with its place known (in its lane, 0
-- being the main queue; -1 - i for a shadow place, which reads as a place behind everyone waiting in
-- lane i, or the main queue for 0; front the arrival at its lane's front, 0 for a shadow place), {3,
-- phase, now} for one turned away, {4, arrival, preQueueDepth, now, 0, lane} for one holding a
-- pre-queue place (lane as for 2, a shadow place giving the lane it reads as), {5, now} for one
-- whose place the draw has not settled yet, {6, retryAfterMs, now} for one whose client has no
-- place left to take (nothing was taken), {7, index, now} for one presenting a single-use token
-- (1-based index in its list) that another visitor entered with (nothing was taken), {8, position,
-- depth, now, seq, lane} for one whose place a failover lost and who has it back, {0, now, phase} for one
-- who asked only for a place back and is not given it.
--
-- A failover can lose the last places the old primary gave, and the sequence with them: the new
-- primary would give the same numbers again, to later visitors. The sequence is therefore never left
-- below the highest one a caller has seen, and a sequence found below it, or below a place a visitor
-- brings back, records the lost range (lostFrom, lostTo] in the totals hash for abandon-after. A
-- caller that saw the old primary give more than lostTo widens the range to that: another caller may
-- have given those numbers again first. A visitor who is nowhere and brings back a place in that
-- range re-enters at it (docs/guides/redis.md).
local prefix, abandon_ms = ARGV[1], tonumber(ARGV[2])
local burst, per_minute = tonumber(ARGV[3]), tonumber(ARGV[4])
local seen_key = KEYS[8]
local shadow_key, shadow_factor = KEYS[10], tonumber(ARGV[8])
local pre_lanes_key, shadow_lanes_key = KEYS[11], KEYS[12]
local lanes = {}
for i = 1, tonumber(ARGV[7]) do
  lanes[i] = KEYS[12 + i]
end

-- shadow_place is where a shadow place reads: behind everyone waiting in the queue it reads as (lane
-- i, or the main queue for 0), at its rank in the shadow set, and the reply's lane that says so.
-- Nobody in the real queues sees it: their positions and depth leave the shadow set out.
local function shadow_place(visitor, lane)
  local ahead = redis.call('ZCARD', lanes[lane] or KEYS[1])
  return int(ahead + redis.call('ZRANK', shadow_key, visitor) + 1), int(ahead + redis.call('ZCARD', shadow_key)), int(-1 - lane)
end
local now = now_ms()
-- Numbers become text once, with int (see common.lua).
local now_s, silent_before = int(now), int(now - abandon_ms)

-- note_lost records that the places after sequence from, up to to, were lost, widening a range
-- recorded within abandon-after (two proxies, or a visitor, may each learn of part of it).
local function note_lost(from, to)
  local r = redis.call('HMGET', KEYS[3], 'lostFrom', 'lostTo', 'lostAt')
  if r[3] and now - tonumber(r[3]) <= abandon_ms then
    from, to = math.min(from, tonumber(r[1])), math.max(to, tonumber(r[2]))
  end
  redis.call('HSET', KEYS[3], 'lostFrom', int(from), 'lostTo', int(to), 'lostAt', now_s)
end

-- raise_sequence lifts the sequence to at least seq, recording what lay between as lost; true when
-- it had to.
local function raise_sequence(seq)
  local current = tonumber(redis.call('GET', KEYS[2]) or '0')
  if current >= seq then
    return false
  end
  redis.call('SET', KEYS[2], int(seq))
  note_lost(current, seq)
  return true
end

local floor, old_floor = tonumber(ARGV[5]), tonumber(ARGV[6])
if floor > 0 then
  raise_sequence(floor)
end
if old_floor > 0 then
  local r = redis.call('HMGET', KEYS[3], 'lostTo', 'lostAt')
  if r[2] and now - tonumber(r[2]) <= abandon_ms and old_floor > tonumber(r[1]) then
    redis.call('HSET', KEYS[3], 'lostTo', int(old_floor))
  end
end

local plan = redis.call('HMGET', KEYS[5], 'phase', 'preQueueFrom', 'fronts')
local fronts = fronts_of(plan[3])
local phase = plan[1] or PHASE_OPEN
-- A pass issued before the schedule's pre-queue is of an opening that is over: it counts for nothing.
local passes_from = plan[2] or '0'
-- While the pre-queue is drawn, arrivals up to settled hold their final place.
local settled = nil
if phase == PHASE_OPENING then
  settled = drawn_through(KEYS[7])
end

-- The depth is read once per call and kept current: entries add one, abandoned visitors take one.
-- While the draw runs, the pre-queue not placed yet is ahead of every new visitor.
local depth = redis.call('ZCARD', KEYS[1])
local pre_depth = nil
if phase == PHASE_PREQUEUE or phase == PHASE_OPENING then
  pre_depth = redis.call('ZCARD', KEYS[6])
end

-- The instant budget, "untilMs:left:passTtlMs", read at the first new visitor who finds nobody
-- waiting; claims are written back once, at the end. A sleeping room's budget goes on
-- ":1:tickMs:share:maxActive:windowMs" (see admit.lua): it is refilled to share, under maxActive, for
-- each tick past its window, and a visitor who takes a place wakes the room's scheduler (woke).
local budget, claimed, woke, rolled = nil, 0, false, false
-- lanes_waiting is how many wait in the lanes, read at the first new visitor who finds the main
-- queue empty: nobody is admitted at once while anyone waits in any lane.
local lanes_waiting = nil
local function claim_instant()
  if depth ~= 0 or phase ~= PHASE_OPEN then
    return nil
  end
  if lanes_waiting == nil then
    lanes_waiting = 0
    for _, key in ipairs(lanes) do
      lanes_waiting = lanes_waiting + redis.call('ZCARD', key)
    end
  end
  if lanes_waiting ~= 0 then
    return nil
  end
  if budget == nil then
    budget = false
    local rec = redis.call('HGET', KEYS[3], 'instant')
    if rec then
      local f = {}
      for part in string.gmatch(rec, '[^:]+') do
        f[#f + 1] = part
      end
      if earlier(now_s, f[1]) then
        budget = {f[1], tonumber(f[2]), tonumber(f[3]), f[4] == '1'}
        if budget[4] then
          local tick_ms, share, max_active, window = tonumber(f[5]), tonumber(f[6]), tonumber(f[7]), tonumber(f[8])
          budget[5], budget[6], budget[7], budget[8] = tick_ms, share, max_active, window
          if tick_ms > 0 and now >= window + tick_ms then
            -- The ticks the room slept through each had their share: the current one's is left.
            budget[8] = window + tick_ms * math.floor((now - window) / tick_ms)
            local left = share
            if max_active > 0 then
              left = math.min(left, max_active - redis.call('ZCOUNT', KEYS[4], '(' .. now_s, '+inf'))
            end
            budget[2] = math.max(0, left)
            rolled = true
          end
        end
      end
    end
  end
  if not budget or budget[2] <= 0 then
    return nil
  end
  budget[2] = budget[2] - 1
  claimed = claimed + 1
  return budget[3]
end

-- take_place takes one token of the client's bucket: burst tokens, refilled at per_minute, kept as
-- "tokens:atMs" and expiring once full again. Returns nil when taken, or the ms until one is, and
-- true when the client has asked for shadow_factor times its burst: with a shadow factor, each ask
-- the bucket refuses is owed too, down to (1 - shadow_factor) × burst, where the asks go to the
-- shadow set.
local function take_place(client)
  if burst <= 0 or per_minute <= 0 or client == '' then
    return nil
  end
  local key = prefix .. ':c:' .. client
  local tokens, at = burst, now
  local rec = redis.call('GET', key)
  if rec then
    local sep = string.find(rec, ':', 1, true)
    tokens, at = tonumber(string.sub(rec, 1, sep - 1)), tonumber(string.sub(rec, sep + 1))
    tokens = math.min(burst, tokens + math.max(0, now - at) * per_minute / 60000)
  end
  if tokens < 1 then
    local wait = math.ceil((1 - tokens) * 60000 / per_minute)
    if shadow_factor <= 0 then
      return wait
    end
    local floor = (1 - shadow_factor) * burst
    -- Whole asks owed: a refill of a fraction since the last ask does not put the shadow off.
    local shadowed = math.floor(tokens) - 1 <= floor
    tokens = math.max(floor, tokens - 1)
    local full_in = math.ceil((burst - tokens) * 60000 / per_minute)
    redis.call('SET', key, string.format('%.6f', tokens) .. ':' .. now_s, 'PX', full_in + 1000)
    return wait, shadowed
  end
  tokens = tokens - 1
  local full_in = math.ceil((burst - tokens) * 60000 / per_minute)
  redis.call('SET', key, string.format('%.6f', tokens) .. ':' .. now_s, 'PX', full_in + 1000)
  return nil
end

-- spend_tokens binds each single-use token to the first visitor that enters with it, until the
-- token's own expiry; the same visitor may present it again (enter is idempotent), another may not.
-- A token of several uses (a lane's code) enters up to that many visitors, each as often as it
-- likes. Returns the index of a token spent by someone else, after binding nothing.
local function spend_tokens(visitor, tokens)
  if tokens == '' then
    return nil
  end
  local fresh, counted, i = {}, {}, 0
  for id, until_ms, uses in string.gmatch(tokens, '([0-9a-f]+):([0-9]+):?([0-9]*)') do
    i = i + 1
    if uses ~= '' and tonumber(uses) > 1 then
      local key = prefix .. ':lc:' .. id
      if redis.call('SISMEMBER', key, visitor) == 0 then
        if redis.call('SCARD', key) >= tonumber(uses) then
          return i
        end
        counted[#counted + 1] = {key, until_ms}
      end
    else
      local key = prefix .. ':u:' .. id
      local owner = redis.call('GET', key)
      if owner and owner ~= visitor then
        return i
      end
      if not owner then
        fresh[#fresh + 1] = {key, until_ms}
      end
    end
  end
  for _, t in ipairs(fresh) do
    redis.call('SET', t[1], visitor, 'PXAT', t[2])
  end
  for _, t in ipairs(counted) do
    redis.call('SADD', t[1], visitor)
    redis.call('PEXPIREAT', t[1], t[2])
  end
  return nil
end

-- restorable says whether a visitor may re-enter at the place seq it held: a place above the
-- sequence was lost (a failover took the sequence back), and so was one in the lost range recorded
-- within abandon-after. Any other place was given and kept, and whoever held it was admitted or
-- left: bringing it back would jump the line.
local function restorable(seq)
  if raise_sequence(seq) then
    return true
  end
  local r = redis.call('HMGET', KEYS[3], 'lostFrom', 'lostTo', 'lostAt')
  return r[3] ~= false and now - tonumber(r[3]) <= abandon_ms and seq > tonumber(r[1]) and seq <= tonumber(r[2])
end

local function enter(visitor, client, tokens, held, lane)
  local only = string.sub(held, 1, 1) == '='
  if only then
    held = string.sub(held, 2)
  end
  -- A place held in a lane comes back to that lane, or to the main queue when the room has it no more.
  local held_lane = 0
  local at = string.find(held, '@', 1, true)
  if at then
    held_lane = tonumber(string.sub(held, at + 1)) or 0
    held = string.sub(held, 1, at - 1)
  end
  local spent = spend_tokens(visitor, tokens)
  if spent then
    return '7', int(spent), now_s
  end
  local nb, exp = read_pass(KEYS[9], visitor, now_s, passes_from)
  if nb then
    return '1', nb, exp, now_s
  end
  local seq = redis.call('ZSCORE', KEYS[1], visitor)
  if not seq and #lanes > 0 then
    -- A visitor keeps the lane it took its place in, whatever it enters with now.
    local key, at, lane_seq = in_lanes(lanes, visitor)
    if lane_seq then
      local block, off = seen_slot(lane_seq)
      local times = redis.call('HGET', seen_key, block)
      local seen = slot_time(times, off)
      if not (seen and earlier(seen, silent_before)) then
        redis.call('HSET', seen_key, block, with_time(times, off, now_s))
        if settled and tonumber(lane_seq) > settled then
          -- A lane's arrival while the draw runs waits behind the lane's part of the pre-queue.
          return '5', now_s
        end
        return '2', int(redis.call('ZRANK', key, visitor) + 1), int(redis.call('ZCARD', key)), now_s, '0', lane_seq, int(at), fronts[at] or '0'
      end
      forget(key, visitor, seen_key, block, times, off)
      redis.call('HINCRBY', KEYS[3], 'abandoned', 1)
    end
  end
  if not seq then
    local shadow_seq = redis.call('ZSCORE', shadow_key, visitor)
    if shadow_seq then
      local block, off = seen_slot(shadow_seq)
      local times = redis.call('HGET', seen_key, block)
      local seen = slot_time(times, off)
      if not (seen and earlier(seen, silent_before)) then
        redis.call('HSET', seen_key, block, with_time(times, off, now_s))
        local shadow_lane = hashed_lane(shadow_lanes_key, KEYS[1], lanes, visitor)
        if pre_depth then
          -- Before the draw a shadow place reads as a pre-queue place, then as one being drawn.
          if phase == PHASE_PREQUEUE then
            return '4', shadow_seq, int(pre_depth), now_s, '0', int(shadow_lane)
          end
          return '5', now_s
        end
        local position, shadow_depth, reads_as = shadow_place(visitor, shadow_lane)
        return '2', position, shadow_depth, now_s, '0', shadow_seq, reads_as, '0'
      end
      forget(shadow_key, visitor, seen_key, block, times, off)
      redis.call('HDEL', shadow_lanes_key, visitor)
    end
  end
  if seq then
    local block, off = seen_slot(seq)
    local times = redis.call('HGET', seen_key, block)
    local seen = slot_time(times, off)
    if not (seen and earlier(seen, silent_before)) then
      redis.call('HSET', seen_key, block, with_time(times, off, now_s))
      if settled and tonumber(seq) > settled then
        return '5', now_s
      end
      return '2', int(redis.call('ZRANK', KEYS[1], visitor) + 1), int(depth + (pre_depth or 0)), now_s, '0', seq, '0', fronts[0] or '0'
    end
    -- Silent too long: the old place is gone, the visitor starts again at the back.
    forget(KEYS[1], visitor, seen_key, block, times, off)
    depth = depth - 1
    redis.call('HINCRBY', KEYS[3], 'abandoned', 1)
  end
  if pre_depth then
    -- A pre-queue place has no order to lose: coming back refreshes it, however long the silence.
    local arrival = redis.call('ZSCORE', KEYS[6], visitor)
    if arrival then
      local block, off = seen_slot(arrival)
      touch_seen(seen_key, block, off, now_s)
      if phase == PHASE_PREQUEUE then
        return '4', arrival, int(pre_depth), now_s, '0', int(hashed_lane(pre_lanes_key, KEYS[1], lanes, visitor))
      end
      return '5', now_s
    end
  end
  if phase == PHASE_SCHEDULED or phase == PHASE_CLOSED then
    return '3', phase, now_s
  end
  if held ~= '' and phase == PHASE_OPEN and restorable(tonumber(held)) then
    -- Nothing new is taken: the place was given, and paid for, before the failover.
    local block, off = seen_slot(held)
    touch_seen(seen_key, block, off, now_s)
    redis.call('HINCRBY', KEYS[3], 'restored', 1)
    local held_key = lanes[held_lane]
    if held_key then
      redis.call('ZADD', held_key, held, visitor)
      if lanes_waiting then
        lanes_waiting = lanes_waiting + 1
      end
      return '8', int(redis.call('ZRANK', held_key, visitor) + 1), int(redis.call('ZCARD', held_key)), now_s, held, int(held_lane)
    end
    redis.call('ZADD', KEYS[1], held, visitor)
    depth = depth + 1
    return '8', int(redis.call('ZRANK', KEYS[1], visitor) + 1), int(depth), now_s, held, '0'
  end
  if only then
    return '0', now_s, phase
  end
  -- From here on the visitor takes something new: a pass at once or a place.
  local wait, shadowed = take_place(client)
  if shadowed or (lane < 0 and not wait) then
    -- A shadow place: a place in the sequence and signs of life like any, in a set no tick reads.
    -- A client over its limit is refused first, whatever its challenge: a shadow place is no way
    -- around the limit. It reads as a place in the queue the visitor would have joined, lane
    -- included, so that nothing in its answers tells it apart.
    local reads_as = lane
    if lane < 0 then
      reads_as = -1 - lane
    end
    if not lanes[reads_as] then
      reads_as = 0
    end
    local shadow_seq = int(redis.call('INCR', KEYS[2]))
    local block, off = seen_slot(shadow_seq)
    touch_seen(seen_key, block, off, now_s)
    redis.call('ZADD', shadow_key, 'NX', shadow_seq, visitor)
    if reads_as > 0 then
      redis.call('HSET', shadow_lanes_key, visitor, string.sub(lanes[reads_as], #KEYS[1] + 2))
    end
    redis.call('HINCRBY', KEYS[3], shadowed and 'shadowedOverLimit' or 'shadowedChallengeFailed', 1)
    if phase == PHASE_PREQUEUE then
      return '4', shadow_seq, int(pre_depth), now_s, '0', int(reads_as)
    end
    local position, shadow_depth, reply_lane = shadow_place(visitor, reads_as)
    return '2', position, shadow_depth, now_s, '0', shadow_seq, reply_lane, '0'
  end
  if wait then
    return '6', int(wait), now_s
  end
  local ttl = claim_instant()
  if ttl then
    local exp_s = int(now + ttl)
    redis.call('HSET', KEYS[9], visitor, now_s .. ':' .. exp_s)
    redis.call('ZADD', KEYS[4], exp_s, visitor)
    return '1', now_s, exp_s, now_s
  end
  -- The sequence, not a clock, orders arrivals: strict FIFO across any number of proxies. Every
  -- waiting visitor holds an earlier number, so the new one's place is the back: the depth.
  seq = redis.call('INCR', KEYS[2])
  local seq_s = int(seq)
  local block, off = seen_slot(seq_s)
  touch_seen(seen_key, block, off, now_s)
  local lane_key = lanes[lane]
  if phase == PHASE_PREQUEUE then
    redis.call('ZADD', KEYS[6], 'NX', seq_s, visitor)
    pre_depth = pre_depth + 1
    if lane_key then
      -- The draw orders the pre-queue as one, and places each visitor in the lane it joined here.
      redis.call('HSET', pre_lanes_key, visitor, string.sub(lane_key, #KEYS[1] + 2))
      return '4', seq_s, int(pre_depth), now_s, '0', int(lane)
    end
    return '4', seq_s, int(pre_depth), now_s
  end
  if lane_key then
    -- While the draw runs, a lane's new visitor waits behind the lane's part of the pre-queue: its
    -- arrival is above every drawn place, and no tick admits it before the draw is done.
    redis.call('ZADD', lane_key, 'NX', seq_s, visitor)
    if lanes_waiting then
      lanes_waiting = lanes_waiting + 1
    end
    if budget and budget[4] then
      budget[4] = false
      woke = true
    end
    if settled then
      return '5', now_s
    end
    local lane_depth = int(redis.call('ZCARD', lane_key))
    return '2', lane_depth, lane_depth, now_s, '0', seq_s, int(lane), fronts[lane] or '0'
  end
  redis.call('ZADD', KEYS[1], 'NX', seq_s, visitor)
  depth = depth + 1
  if budget and budget[4] then
    budget[4] = false
    woke = true
  end
  if settled then
    return '5', now_s
  end
  local depth_s = int(depth)
  return '2', depth_s, depth_s, now_s, '0', seq_s, '0', fronts[0] or '0'
end

local parts, n = {}, 0
for i = 9, #ARGV, 5 do
  n = add_reply(parts, n, enter(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])))
end
if claimed > 0 or woke or rolled then
  local rec
  if budget[4] then
    rec = budget[1] .. ':' .. int(budget[2]) .. ':' .. int(budget[3]) .. ':1:' .. int(budget[5]) .. ':' .. int(budget[6]) ..
      ':' .. int(budget[7]) .. ':' .. int(budget[8])
  else
    -- Awake again: what is left lasts until the tick the wake-up asks for replaces it.
    local until_s = budget[1]
    if budget[5] and earlier(int(now + budget[5] + 1000), until_s) then
      until_s = int(now + budget[5] + 1000)
    end
    rec = until_s .. ':' .. int(budget[2]) .. ':' .. int(budget[3])
  end
  redis.call('HSET', KEYS[3], 'instant', rec)
end
if claimed > 0 then
  redis.call('HINCRBY', KEYS[3], 'admitted', int(claimed))
  redis.call('HINCRBY', KEYS[3], 'instantAdmitted', int(claimed))
end
if woke then
  redis.call('PUBLISH', WAKE_CHANNEL, prefix)
end
return table.concat(parts, ' ', 1, n)
