-- release.lua: give back one hold; at zero, hand the lock to the next live waiter.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id
-- ARGV[3] fencing token of the hold being released
-- ARGV[4] call id of the acquisition this release gives back: a release
--         delivered twice (a retry after a lost reply) counts once
-- Returns the holds still left (0 = released and handed over or freed),
--         or -1 when the lock is not held by this owner with this token
--         (the lease was lost); then nothing is changed.
-- Cost: O(log N).

local lock = redis.call('HMGET', LOCK, 'owner', 'count', 'token', 'freed')
if lock[1] ~= ARGV[2] or lock[3] ~= ARGV[3] then
  return -1
end
if lock[4] == ARGV[4] then
  return tonumber(lock[2])
end
local count = (tonumber(lock[2]) or 1) - 1
if count > 0 then
  redis.call('HSET', LOCK, 'count', count, 'freed', ARGV[4])
  return count
end
local now_us, now_ms = server_time()
if not hand_over(now_us, now_ms) then
  redis.call('DEL', LOCK)
end
return 0
