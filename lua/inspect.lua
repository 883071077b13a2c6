-- inspect.lua: read the lock's state in one round trip (changes nothing).
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix (unused)
-- ARGV[2] owner id of the calling thread
-- ARGV[3] token of the hold the caller's client has a live guard of, or "0"
-- Returns {holder owner id or "", hold count of the caller (0 if it holds
--          nothing a live guard of its stands for),
--          holder's token or 0, lock pttl ms (-2 when free), live waiters queued}.
-- Cost: O(log N) (ZCOUNT over the deadline index).

local _, now_ms = server_time()
local lock = redis.call('HMGET', LOCK, 'owner', 'count', 'token')
local count = 0
if lock[1] == ARGV[2] and lock[3] == ARGV[3] then
  count = tonumber(lock[2]) or 0
end
return {
  lock[1] or '',
  count,
  tonumber(lock[3] or '0') or 0,
  redis.call('PTTL', LOCK),
  redis.call('ZCOUNT', DEADLINES, fmt(now_ms), '+inf'),
}
