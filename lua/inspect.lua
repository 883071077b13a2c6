-- inspect.lua: read the lock's state in one round trip (changes nothing).
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix (unused)
-- ARGV[2] owner id of the calling thread
-- Returns {holder owner id or "", hold count of the caller (0 if not holder),
--          holder's token or 0, lock pttl ms (-2 when free), live waiters queued}.
-- Cost: O(log N) (ZCOUNT over the deadline index).

local _, now_ms = server_time()
local lock = redis.call('HMGET', LOCK, 'owner', 'count', 'token')
local count = 0
if lock[1] == ARGV[2] then
  count = tonumber(lock[2]) or 0
end
return {
  lock[1] or '',
  count,
  tonumber(lock[3] or '0') or 0,
  redis.call('PTTL', LOCK),
  redis.call('ZCOUNT', DEADLINES, fmt(now_ms), '+inf'),
}
