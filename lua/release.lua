-- release.lua: give back one hold; at zero, hand the lock to the next live waiter.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id
-- ARGV[3] fencing token of the hold being released
-- ARGV[4] call id of the acquisition this release gives back: a release
--         delivered twice (a retry after a lost reply) counts once, and is
--         answered as the first was even when that one freed the lock
--         (the fence remembers the call that last freed it)
-- Returns the holds still left (0 = released and handed over or freed),
--         or -1 when the lock is not held by this owner with this token
--         (the lease was lost); then nothing is changed.
-- Cost: O(log N).

local owner, token, call = ARGV[2], ARGV[3], ARGV[4]
local lock = redis.call('HMGET', LOCK, 'owner', 'token', 'count', 'call:' .. call)
if lock[1] ~= owner or lock[2] ~= token then
  local mark = split_mark(select(2, read_fence()))
  if mark == owner .. '#' .. call then
    return 0
  end
  return -1
end
local _, left = give_back(owner, token, lock[3], lock[4], call)
return left
