-- Plan publishes the scheduler's plan for the proxies. The phase is the one field a script also
-- writes (draw.lua): while a draw runs the room stays Opening whatever the caller says, so that no
-- visitor joins a pre-queue that is being drawn.
-- KEYS[1] plan hash, KEYS[2] draw state hash
-- ARGV[1] phase, ARGV[2..] field, value, ...
-- Returns the phase written.
local phase = ARGV[1]
if redis.call('HGET', KEYS[2], 'done') == '0' then
  phase = PHASE_OPENING
end
redis.call('HSET', KEYS[1], 'phase', phase, unpack(ARGV, 2))
return phase
