-- status.lua: read the whole picture of one lock for operators (changes nothing).
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix (unused)
-- ARGV[2] most waiters to list, from the head of the queue (any larger
--         number than the queue's length lists it all)
-- Returns {holder owner id or "", hold count, holder's token or 0,
--          lock pttl ms (-2 when free), live waiters queued,
--          last fencing token issued or 0,
--          waiter1, ms of liveness left 1, waiter2, ms left 2, ...}
-- listing at most ARGV[2] queued waiters in order; a negative "ms left"
-- marks a dead entry that has not been dropped yet.
-- Cost: O(log N + listed).

local _, now_ms = server_time()
local lock = redis.call('HMGET', LOCK, 'owner', 'count', 'token')
local out = {
  lock[1] or '',
  tonumber(lock[2] or '0') or 0,
  tonumber(lock[3] or '0') or 0,
  redis.call('PTTL', LOCK),
  redis.call('ZCOUNT', DEADLINES, fmt(now_ms), '+inf'),
  (read_fence()),
}
local limit = math.min(tonumber(ARGV[2]) or 0, 1000000000)
if limit > 0 then
  for _, waiter in ipairs(redis.call('ZRANGE', QUEUE, 0, fmt(limit - 1))) do
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, waiter) or '0') or 0
    out[#out + 1] = waiter
    out[#out + 1] = deadline - now_ms
  end
end
return out
