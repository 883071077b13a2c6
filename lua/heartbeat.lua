-- heartbeat.lua: keep one client's queued waiters on one lock alive (watchdog).
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] waiter timeout ms: new liveness deadline is server now + this
-- ARGV[3], ARGV[4], ARGV[5], ...: triples of (owner id, wait id, lease ms
--         to keep if that wait was handed the lock, or 0 for a fixed lease)
-- Also hands a lock whose holder vanished to its first live waiter, so no
-- waiter depends on a message to learn that the lock came free.
-- Returns {lock pttl ms (after any extension), last token issued,
--          status1, value1, status2, value2, ...} per triple:
--   0, position  still queued (deadline renewed)
--   1, token     the lock was handed to this wait (its call is counted in the hold)
--  -1, 0         not queued and not holding (evicted or never queued)
-- A hold of the same owner made by another call is never extended here: a
-- heartbeat still in flight must not stretch a fixed lease taken since.
-- Cost: O(k log N) for k waiters of this client.

local waiter_timeout = ms_arg(ARGV[2], 'waiter timeout')
for i = 5, #ARGV, 3 do
  if ARGV[i] ~= '0' then
    ms_arg(ARGV[i], 'lease')
  end
end
local now_us, now_ms = server_time()
prune(now_ms)
if redis.call('EXISTS', LOCK) == 0 then
  hand_over(now_us, now_ms)
end

local lock = redis.call('HMGET', LOCK, 'owner', 'token')
local out = { 0, 0 }
local queued = false
for i = 3, #ARGV, 3 do
  local waiter, wait_id, lease = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local position = redis.call('ZRANK', QUEUE, waiter)
  if position then
    redis.call('ZADD', DEADLINES, 'XX', now_ms + waiter_timeout, waiter)
    queued = true
    out[#out + 1] = 0
    out[#out + 1] = position
  elseif lock[1] == waiter and redis.call('HGET', LOCK, 'call:' .. wait_id) then
    if lease > 0 then
      extend_lease(lease)
    end
    out[#out + 1] = 1
    out[#out + 1] = tonumber(lock[2])
  else
    out[#out + 1] = -1
    out[#out + 1] = 0
  end
end
if queued then
  keep_queue_for(waiter_timeout)
end
out[1] = redis.call('PTTL', LOCK)
out[2] = read_fence()
return out
