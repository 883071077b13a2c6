-- cancel.lua: leave the queue (a timed-out try_lock_for), leaving nothing behind.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id
-- ARGV[3] lease ms (kept if the lock was handed over meanwhile)
-- ARGV[4] fixed: "1" fixed lease, "0" watchdog-renewed
-- ARGV[5] wait id of the call that is giving up
-- Returns {1, token, lock pttl ms} when the lock had already been handed to
--         this call (the caller keeps it), or {0} when the caller left the
--         queue. A hold of the same owner made by another call is not this
--         call's to keep: it is left as it is.
-- Cost: O(log N).

local owner, wait_id = ARGV[2], ARGV[5]
local lock = redis.call('HMGET', LOCK, 'owner', 'token', 'call:' .. wait_id)
if lock[1] == owner and lock[3] then
  if ARGV[4] == '0' then
    extend_lease(ms_arg(ARGV[3], 'lease'))
  end
  return { 1, tonumber(lock[2]), redis.call('PTTL', LOCK) }
end
local now_us, now_ms = server_time()
leave_queue(owner, lock[1], now_us, now_ms)
return { 0 }
