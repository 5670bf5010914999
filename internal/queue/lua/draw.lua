-- Draw moves the pre-queue into the queue at opening, in the order the scheduler drew (internal/draw),
-- a bounded chunk per call so that no call holds Redis long; Enter and Status answer in between.
-- The draw state hash says how far it went: the pre-queue is frozen when the draw begins (Enter then
-- queues new visitors behind it), its size is reserved in the arrival sequence, and the k-th visitor
-- placed gets sequence base + k, so the pre-queue keeps the drawn order at the front of the queue.
-- Each chunk carries the step it expects, so a retried chunk (after a lost reply, or from a second
-- scheduler) changes nothing, and the caller learns to reload.
-- KEYS[1] pre-queue set (score = arrival), KEYS[2] waiting set, KEYS[3] sequence, KEYS[4] draw
-- state hash, KEYS[5] plan hash, KEYS[6] draw record list ("arrival place"), KEYS[7] totals hash,
-- KEYS[8] last-seen hash, KEYS[9] the pre-queue's lanes (hash: a visitor's lane name), KEYS[10..]
-- the waiting sets of the room's lanes: a visitor who joined a lane in the pre-queue is placed in
-- it, and one whose lane the room has no more in the main queue.
-- ARGV[1] "begin": ARGV[2] opensAt ms (names the draw), ARGV[3] phase after the draw.
-- ARGV[1] "place": ARGV[2] opensAt ms, ARGV[3] the step expected, ARGV[4] abandon-after ms,
-- ARGV[5] phase after the draw, ARGV[6..] arrivals in drawn order.
-- ARGV[1] "seed": ARGV[2] opensAt ms, ARGV[3] the record of the draw's seed ("" only reads it).
-- Begin and place return {moved, opensAt, base, size, placed, step, done, dropped}: moved is 1 when
-- the call did what it was asked, 0 when the state had moved on (or another draw is running). Seed
-- returns the record the draw keeps, the first written for it, or false when the draw is another's.
local FIELDS = {'opensAt', 'base', 'size', 'placed', 'step', 'done', 'dropped'}
local function reply(moved, s)
  return {moved, s[1] or '', s[2] or '0', s[3] or '0', s[4] or '0', s[5] or '0', s[6] or '0', s[7] or '0'}
end
local state = redis.call('HMGET', KEYS[4], unpack(FIELDS))

if ARGV[1] == 'seed' then
  -- The first scheduler to settle the draw's seed (a beacon's round, or the fallback) settles it
  -- for every scheduler that finishes the draw after it.
  if state[1] ~= ARGV[2] then
    return false
  end
  if ARGV[3] ~= '' then
    redis.call('HSETNX', KEYS[4], 'seed', ARGV[3])
  end
  return redis.call('HGET', KEYS[4], 'seed') or ''
end

if ARGV[1] == 'begin' then
  if state[1] and (state[1] == ARGV[2] or state[6] == '0') then
    -- This draw began already, or another is still running and goes on first.
    return reply(state[1] == ARGV[2] and 1 or 0, state)
  end
  local size = redis.call('ZCARD', KEYS[1])
  local base = tonumber(redis.call('GET', KEYS[3])) or 0
  if size > 0 then
    redis.call('INCRBY', KEYS[3], size)
  end
  -- UNLINK frees the last opening's record (up to the whole pre-queue) off Redis' main thread.
  redis.call('UNLINK', KEYS[6])
  local done = size == 0 and '1' or '0'
  if done == '1' then
    redis.call('UNLINK', KEYS[9])
  end
  local s = {ARGV[2], int(base), int(size), '0', '0', done, '0'}
  redis.call('HSET', KEYS[4], 'opensAt', s[1], 'base', s[2], 'size', s[3], 'placed', '0', 'step', '0', 'done', done, 'dropped', '0')
  redis.call('HDEL', KEYS[4], 'seed')
  redis.call('HSET', KEYS[5], 'phase', done == '1' and ARGV[3] or PHASE_OPENING)
  return reply(1, s)
end

-- place
if state[1] ~= ARGV[2] or state[5] ~= ARGV[3] or state[6] ~= '0' then
  return reply(0, state)
end
local seen_key = KEYS[8]
local now_s = int(now_ms())
local silent_before = int(tonumber(now_s) - tonumber(ARGV[4]))
local base, placed, dropped = tonumber(state[2]), tonumber(state[4]), tonumber(state[7])
local dropped_before = dropped
local pre_lanes = KEYS[9]
local lane_sets = {}
for i = 10, #KEYS do
  lane_sets[KEYS[i]] = true
end
-- set_of is the waiting set a drawn visitor takes its place in, forgetting its pre-queue lane.
local function set_of(visitor)
  local lane = redis.call('HGET', pre_lanes, visitor)
  if not lane then
    return KEYS[2]
  end
  redis.call('HDEL', pre_lanes, visitor)
  local key = KEYS[2] .. ':' .. lane
  return lane_sets[key] and key or KEYS[2]
end
local record = {}
for i = 6, #ARGV do
  local arrival = ARGV[i]
  local member = redis.call('ZRANGE', KEYS[1], arrival, arrival, 'BYSCORE', 'LIMIT', 0, 1)
  if #member > 0 then
    local visitor = member[1]
    local block, off = seen_slot(arrival)
    local times = redis.call('HGET', seen_key, block)
    local seen = slot_time(times, off)
    forget(KEYS[1], visitor, seen_key, block, times, off)
    local set = set_of(visitor)
    if seen and earlier(seen, silent_before) then
      -- Silent too long by opening: the place goes, as a waiting visitor's would.
      dropped = dropped + 1
    else
      placed = placed + 1
      local seq_s = int(base + placed)
      redis.call('ZADD', set, seq_s, visitor)
      local nblock, noff = seen_slot(seq_s)
      touch_seen(seen_key, nblock, noff, seen or now_s)
      record[#record + 1] = arrival .. ' ' .. int(placed)
    end
  end
end
if #record > 0 then
  redis.call('RPUSH', KEYS[6], unpack(record))
end
if dropped > dropped_before then
  redis.call('HINCRBY', KEYS[7], 'abandoned', int(dropped - dropped_before))
end
local done = redis.call('ZCARD', KEYS[1]) == 0 and '1' or '0'
local s = {state[1], state[2], state[3], int(placed), int(tonumber(state[5]) + 1), done, int(dropped)}
redis.call('HSET', KEYS[4], 'placed', s[4], 'step', s[5], 'done', done, 'dropped', s[7])
if done == '1' then
  redis.call('HSET', KEYS[5], 'phase', ARGV[5])
  redis.call('UNLINK', pre_lanes)
end
return reply(1, s)
