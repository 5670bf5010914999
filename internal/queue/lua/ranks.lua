-- Ranks counts the waiting visitors at or below each of a run of arrival-sequence boundaries, from
-- which a proxy bounds a visitor's position from above without a call per poll. Each count is a
-- ZCOUNT, logarithmic in the depth, so a call's work is the number of boundaries it is asked for.
-- KEYS[1] waiting set
-- ARGV[1] first boundary, ARGV[2] step between boundaries, ARGV[3] most boundaries
-- Returns {now, front seq or -1, tail seq or -1, count1, count2, …}, ending at the first boundary at
-- or beyond the tail.
local first, step, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {now_ms(), -1, -1}
local front = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #front == 0 then
  return out
end
local tail = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
out[2], out[3] = tonumber(front[2]), tonumber(tail[2])
local boundary = first
for _ = 1, most do
  out[#out + 1] = redis.call('ZCOUNT', KEYS[1], '-inf', boundary)
  if boundary >= out[3] then
    break
  end
  boundary = boundary + step
end
return out
