-- force_release.lua: free the lock whoever holds it and hand it to the next waiter.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- Returns the owner id that held the lock, or false (nil) when it was free.
-- Cost: O(log N).

local holder = redis.call('HGET', LOCK, 'owner')
if not holder then
  return false
end
redis.call('DEL', LOCK)
local now_us, now_ms = server_time()
hand_over(now_us, now_ms)
return holder
