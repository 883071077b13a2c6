-- cancel.lua: leave the queue (a timed-out try_lock_for), leaving nothing behind.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id
-- ARGV[3] lease ms (kept if the lock was handed over meanwhile)
-- ARGV[4] fixed: "1" fixed lease, "0" watchdog-renewed
-- Returns {1, token, lock pttl ms} when the lock had already been handed to the caller
--         (the caller keeps it), or {0} when the caller left the queue.
-- Cost: O(log N).

local owner = ARGV[2]
local lock = redis.call('HMGET', LOCK, 'owner', 'token')
if lock[1] == owner then
  if ARGV[4] == '0' then
    extend_lease(tonumber(ARGV[3]))
  end
  return { 1, tonumber(lock[2]), redis.call('PTTL', LOCK) }
end
local now_us, now_ms = server_time()
local was_head = redis.call('ZRANK', QUEUE, owner) == 0
forget(owner)
prune(now_ms)
if not lock[1] then
  hand_over(now_us, now_ms)
elseif was_head then
  tell_head(now_ms, redis.call('PTTL', LOCK))
end
return { 0 }
