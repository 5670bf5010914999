-- Ranks counts the waiting visitors at or below each of a list of arrival-sequence boundaries, from
-- which a proxy bounds a visitor's position from above without a call per poll. Each count is a
-- ZCOUNT, logarithmic in the depth, so a call's work is the number of boundaries it is given.
-- KEYS[1] waiting set, KEYS[2] totals hash
-- ARGV boundaries, ascending (none: the first call, which learns the front and the tail)
-- Returns {now, front seq or -1, tail seq or -1, admitted from the queue so far, count1, count2, …}.
local admitted = tonumber(redis.call('HGET', KEYS[2], 'admitted') or '0')
  - tonumber(redis.call('HGET', KEYS[2], 'instantAdmitted') or '0')
local out = {now_ms(), -1, -1, admitted}
local front = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #front == 0 then
  return out
end
local tail = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
out[2], out[3] = tonumber(front[2]), tonumber(tail[2])
for i = 1, #ARGV do
  out[#out + 1] = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[i])
end
return out
