-- Status reports where visitors stand and refreshes their last-seen times. The proxy sends the polls
-- that arrive together in one call; each is handled as if it came alone, in order.
-- KEYS[1] waiting set, KEYS[2] totals hash, KEYS[3] plan hash, KEYS[4] pre-queue set, KEYS[5] draw
-- state hash, KEYS[6] last-seen hash, KEYS[7] pass hash, KEYS[8] the shadow set, KEYS[9] the
-- pre-queue's lanes (hash), KEYS[10] the shadow places' lanes (hash), KEYS[11..] the lanes' waiting
-- sets
-- ARGV[1] abandon-after ms, ARGV[2..] visitors
-- Returns one reply per visitor: {0, now, phase} when not queued, {1, notBefore, expiry, now} when
-- holding a pass, {2, position, depth, now, previousPoll, seq, lane, front} when waiting with its place
-- known (position and depth in its lane, lane 0 being the main queue; -1 - i for a shadow place, read
-- as a place behind everyone waiting in lane i, or the main queue for 0; front the arrival at its
-- lane's front, 0 for a shadow place),
-- {4, arrival, preQueueDepth, now, previousPoll, lane} when holding a pre-queue place (lane as for 2,
-- a shadow place giving the lane it reads as), {5, now,
-- previousPoll} when the draw has not settled its place yet (previousPoll 0 when unknown).
local abandon_ms = tonumber(ARGV[1])
local seen_key = KEYS[6]
local now = now_ms()
-- A visitor last seen before this is silent too long.
local now_s, silent_before = int(now), int(now - abandon_ms)

local plan = redis.call('HMGET', KEYS[3], 'phase', 'preQueueFrom', 'fronts')
local fronts = fronts_of(plan[3])
local phase = plan[1] or PHASE_OPEN
-- A pass issued before the schedule's pre-queue is of an opening that is over: it counts for nothing.
local passes_from = plan[2] or '0'
-- While the pre-queue is drawn (see enter.lua), arrivals up to settled hold their final place, and
-- the part of the pre-queue not placed yet counts in the depth.
local settled, pre_depth = nil, nil
if phase == PHASE_OPENING then
  settled = drawn_through(KEYS[5])
end
if phase == PHASE_PREQUEUE or phase == PHASE_OPENING then
  pre_depth = redis.call('ZCARD', KEYS[4])
end

-- The depth is read once per call and kept current: only an abandoned visitor's removal changes it.
local depth = redis.call('ZCARD', KEYS[1])
local depth_s = int(depth + (pre_depth or 0))

-- The lanes' sets, searched after the main queue's (common.lua, in_lanes).
local shadow_key, shadow_lanes_key = KEYS[8], KEYS[10]
local lanes = {}
for i = 11, #KEYS do
  lanes[#lanes + 1] = KEYS[i]
end

-- Under a herd this loop is what Redis spends its time on: it makes no table per visitor and
-- formats one number per waiting visitor (see int in common.lua).
local call, wait_key = redis.call, KEYS[1]
local parts, n = {}, 0
for i = 2, #ARGV do
  local visitor = ARGV[i]
  -- Most polls come from waiting visitors, so that path is tried first and kept short.
  local key, lane, seq = wait_key, 0, call('ZSCORE', wait_key, visitor)
  if not seq and #lanes > 0 then
    key, lane, seq = in_lanes(lanes, visitor)
  end
  if not seq then
    seq = call('ZSCORE', shadow_key, visitor)
    key, lane = shadow_key, -1
  end
  if seq then
    local block, off = seen_slot(seq)
    local times = call('HGET', seen_key, block)
    local seen = slot_time(times, off)
    if seen and earlier(seen, silent_before) then
      forget(key, visitor, seen_key, block, times, off)
      if lane == 0 then
        depth = depth - 1
        depth_s = int(depth + (pre_depth or 0))
      elseif lane == -1 then
        call('HDEL', shadow_lanes_key, visitor)
      end
      call('HINCRBY', KEYS[2], 'abandoned', 1)
      n = add_reply(parts, n, '0', now_s, phase)
    else
      -- Every poll counts as a sign of life, even one the proxy will refuse as too early: a
      -- client that polls too fast is refused until it waits the interval it was told.
      call('HSET', seen_key, block, with_time(times, off, now_s))
      if lane == -1 and pre_depth then
        -- Before the draw a shadow place reads as a pre-queue place, then as one being drawn.
        if phase == PHASE_PREQUEUE then
          n = add_reply(parts, n, '4', seq, int(pre_depth), now_s, seen or '0', int(hashed_lane(shadow_lanes_key, wait_key, lanes, visitor)))
        else
          n = add_reply(parts, n, '5', now_s, seen or '0')
        end
      elseif lane == -1 then
        -- Behind everyone waiting in the queue the visitor would have joined: what a shadow place
        -- reads as.
        local reads_as = hashed_lane(shadow_lanes_key, wait_key, lanes, visitor)
        local ahead = depth
        if reads_as > 0 then
          ahead = call('ZCARD', lanes[reads_as])
        end
        n = add_reply(parts, n, '2', int(ahead + call('ZRANK', key, visitor) + 1), int(ahead + call('ZCARD', key)), now_s, seen or '0', seq, int(-1 - reads_as), '0')
      elseif settled and tonumber(seq) > settled then
        -- Behind the part of the pre-queue the draw has not placed yet, in any lane.
        n = add_reply(parts, n, '5', now_s, seen or '0')
      elseif lane ~= 0 then
        n = add_reply(parts, n, '2', int(call('ZRANK', key, visitor) + 1), int(call('ZCARD', key)), now_s, seen or '0', seq, int(lane), fronts[lane] or '0')
      else
        n = add_reply(parts, n, '2', int(call('ZRANK', wait_key, visitor) + 1), depth_s, now_s, seen or '0', seq, '0', fronts[0] or '0')
      end
    end
  else
    local arrival = pre_depth and call('ZSCORE', KEYS[4], visitor)
    if arrival then
      local block, off = seen_slot(arrival)
      local times = call('HGET', seen_key, block)
      local seen = slot_time(times, off)
      call('HSET', seen_key, block, with_time(times, off, now_s))
      if phase == PHASE_PREQUEUE then
        n = add_reply(parts, n, '4', arrival, int(pre_depth), now_s, seen or '0', int(hashed_lane(KEYS[9], wait_key, lanes, visitor)))
      else
        n = add_reply(parts, n, '5', now_s, seen or '0')
      end
    else
      local nb, exp = read_pass(KEYS[7], visitor, now_s, passes_from)
      if nb then
        n = add_reply(parts, n, '1', nb, exp, now_s)
      else
        n = add_reply(parts, n, '0', now_s, phase)
      end
    end
  end
end
return table.concat(parts, ' ', 1, n)
