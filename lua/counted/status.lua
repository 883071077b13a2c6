-- counted/status.lua: read the whole picture of one counted lock for
-- operators (changes nothing).
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix (unused)
-- ARGV[2] fence life ms (unused)
-- ARGV[3] most waiters to list, from the head of the queue
-- ARGV[4] most holders to list, by lease end (any larger number than
--         there are lists them all; each bound from 0 to 1000000000)
-- Returns {capacity (0 when the meta is gone: not in use for a fence
--          life), units the live holds take, live holds, live waiters
--          queued, last fencing token issued or 0, holders listed h,
--          holder1 owner id, call id 1, units 1, token 1, ms of lease
--          left 1, ... (h of them),
--          waiter1 owner id, units 1 (0 for a member fairlock did not
--          write), ms of liveness left 1, waiter2, ...}
-- listing at most ARGV[3] queued waiters in order; a negative "ms left"
-- marks a dead entry that has not been dropped yet. Expired holds not
-- dropped yet are neither counted nor listed.
-- Cost: O(log N + listed + expired holds not dropped yet).

local _, now_ms = server_time()
local meta = read_meta(now_ms)
local holder_limit = math.min(tonumber(ARGV[4]) or 0, 1000000000)
local used, live = meta.used, 0
-- The reply: its first six numbers, set below (capacity, used, live, waiters,
-- last token, holders listed), then the holders listed, then the waiters.
local out = { meta.capacity or 0, 0, 0, 0, tonumber(meta.last), 0 }
local lone = meta.lone
if lone then
  if lone.ends >= now_ms then
    live = 1
    if holder_limit > 0 then
      out[7], out[8], out[9], out[10], out[11] = lone.owner, tonumber(lone.call), lone.units,
        tonumber(lone.token), lone.ends - now_ms
    end
  else
    used = used - lone.units
  end
else
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', HOLDERS, 0, '(' .. fmt(now_ms))) do
    local _, _, units = parse_holder(member)
    used = used - (units or 0)
  end
  live = redis.call('ZCOUNT', HOLDERS, fmt(now_ms), '+inf')
  if holder_limit > 0 then
    local holders = redis.call('ZRANGEBYSCORE', HOLDERS, fmt(now_ms), '+inf', 'WITHSCORES',
      'LIMIT', 0, fmt(holder_limit))
    for i = 1, #holders, 2 do
      local owner, call, units = parse_holder(holders[i])
      out[#out + 1] = owner or holders[i]
      out[#out + 1] = tonumber(call) or 0
      out[#out + 1] = units or 0
      out[#out + 1] = -(tonumber(redis.call('ZSCORE', HOLDERS, '#' .. holders[i])) or 0)
      out[#out + 1] = tonumber(holders[i + 1]) - now_ms
    end
  end
end
out[2], out[3], out[6] = math.max(0, used), live, (#out - 6) / 5
-- The live deadlines, but no more than the entries: a call refused for
-- more permits than set_permits left keeps its deadline, its entry gone,
-- until it polls (acquire.lua). (Both count more than the live waiters
-- only together: a dead entry not dropped yet beside such a refusal.)
out[4] = math.min(redis.call('ZCOUNT', QUEUE, deadline_score(now_ms), '+inf'),
  redis.call('ZCOUNT', QUEUE, '-inf', '(' .. DEADLINE_BASE_TEXT))
list_waiters(out, ARGV[3], now_ms, split_counted_entry)
return out
