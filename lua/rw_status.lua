-- rw_status.lua: read the whole picture of one reader-writer lock for
-- operators (changes nothing).
--
-- KEYS: holders, queue, deadlines, tokens, meta, writers (see lib.lua)
-- ARGV[1] wake channel prefix (unused)
-- ARGV[2] fence life ms (unused)
-- ARGV[3] most waiters to list, from the head of the queue
-- ARGV[4] most holders to list, by lease end (any larger number than
--         there are lists them all; each bound from 0 to 1000000000)
-- Returns {live holds (read and write), live write holds, live waiters
--          queued, last fencing token issued or 0, holders listed h,
--          holder1 owner id, call id 1, access 1 ("r" or "w"), token 1,
--          ms of lease left 1, ... (h of them),
--          waiter1 owner id, access 1 ("r", "w", or "" for a member
--          fairlock did not write), ms of liveness left 1, waiter2, ...}
-- listing at most ARGV[3] queued waiters in order; a negative "ms left"
-- marks a dead entry that has not been dropped yet. Expired holds not
-- dropped yet are not listed.
-- Cost: O(log N + listed).

local _, now_ms = server_time()
local last = read_rw_meta()
local waiter_limit = math.min(tonumber(ARGV[3]) or 0, 1000000000)
local holder_limit = math.min(tonumber(ARGV[4]) or 0, 1000000000)
local out = {
  redis.call('ZCOUNT', HOLDERS, fmt(now_ms), '+inf'),
  redis.call('ZCOUNT', WRITERS, fmt(now_ms), '+inf'),
  redis.call('ZCOUNT', DEADLINES, fmt(now_ms), '+inf'),
  tonumber(last),
  0,
}
if holder_limit > 0 then
  local holders = redis.call('ZRANGEBYSCORE', HOLDERS, fmt(now_ms), '+inf', 'WITHSCORES',
    'LIMIT', 0, fmt(holder_limit))
  for i = 1, #holders, 2 do
    local owner, call, rw = string.match(holders[i], '^(%S+) (%d+) ([rw])$')
    if not rw then
      -- A member fairlock did not write: a write hold if the writers zset
      -- says so.
      rw = 'r'
      if redis.call('ZSCORE', WRITERS, holders[i]) then
        rw = 'w'
      end
    end
    out[#out + 1] = owner or holders[i]
    out[#out + 1] = tonumber(call) or 0
    out[#out + 1] = rw
    out[#out + 1] = tonumber(redis.call('HGET', TOKENS, holders[i]) or '0') or 0
    out[#out + 1] = tonumber(holders[i + 1]) - now_ms
  end
  out[5] = #holders / 2
end
if waiter_limit > 0 then
  for _, entry in ipairs(redis.call('ZRANGE', QUEUE, 0, fmt(waiter_limit - 1))) do
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, entry) or '0') or 0
    local owner, _, _, _, rw = parse_rw_entry(entry)
    out[#out + 1] = owner or entry
    out[#out + 1] = rw or ''
    out[#out + 1] = deadline - now_ms
  end
end
return out
