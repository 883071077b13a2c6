-- force_release.lua: free the lock whoever holds it and hand it to the next waiter.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] call key "<client id>#<call id>": the fence remembers it, so the
--         same call delivered again answers as the first did instead of
--         freeing the waiter that was just handed the lock
-- Returns the owner id that held the lock, or false (nil) when it was free.
-- Cost: O(log N).

local mark = 'F' .. ARGV[2]
local last, rest = read_fence()
local seen, detail = split_mark(rest)
if seen == mark then
  if detail == '' then
    return false
  end
  return detail
end
local lock = redis.call('HMGET', LOCK, 'owner', 'token')
local holder = lock[1]
if not holder then
  write_fence(last, mark)
  return false
end
local now_us, now_ms = server_time()
free_lock(now_us, now_ms, lock[2], mark .. ' ' .. holder)
return holder
