-- mutex/status.lua: read the whole picture of one lock for operators (changes nothing).
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix (unused)
-- ARGV[2] fence life ms (unused)
-- ARGV[3] most waiters to list, from the head of the queue (any larger
--         number than the queue's length lists it all)
-- Returns {holder owner id or "", hold count, holder's token or 0,
--          lock pttl ms (-2 when free), live waiters queued,
--          last fencing token issued or 0,
--          waiter1 owner id, ms of liveness left 1, waiter2, ms left 2, ...}
-- listing at most ARGV[3] queued waiters in order; a negative "ms left"
-- marks a dead entry that has not been dropped yet. An election's (given
-- its third key, the history) adds its history's entries, newest first,
-- as one last element, so that a watch reads the changes and the state
-- they led to in one atomic step.
-- Cost: O(log N + listed), and an election's history: at most 16 entries.

local _, now_ms = server_time()
local token, holder, calls, _, _, left = read_lock(redis.call('GET', LOCK))
-- (The hold count: its calls, one more than their commas.)
local out = holder and { holder, select(2, string.gsub(calls, ',', '')) + 1, tonumber(token), left }
  or { '', 0, 0, -2 }
out[5] = redis.call('ZCOUNT', QUEUE, deadline_score(now_ms), '+inf')
out[6] = tonumber(token)
list_waiters(out, ARGV[3], now_ms, split_entry)
if KEYS[3] then
  -- A pcall: a user an older ACL line made, without LRANGE, still reads
  -- the election's state (and its watches say they may miss changes).
  local history = redis.pcall('LRANGE', KEYS[3], 0, -1)
  out[#out + 1] = history.err and {} or history
end
return out
