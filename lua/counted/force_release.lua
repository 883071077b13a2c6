-- counted/force_release.lua: free every hold of a counted lock, whoever
-- holds it, and admit the waiters at the head of the queue that fit.
--
-- KEYS: holders, queue, deadlines, tokens, meta (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<client id>#<call id>": the meta remembers it with the
--         holds it freed, so the same call delivered again answers as the
--         first did instead of freeing the waiters just admitted
-- Returns the number of live holds freed (0 when none was held). Each
--         holder learns it lost its lease at its next renewal.
-- Cost: O(H log N) for H holds, plus the admissions' O(log N) each.

-- @helpers QUEUE, DEADLINES, HOLDERS, TOKENS, META, WAKE_PREFIX, fmt, fail,
-- @helpers ms_arg, FENCE_LIFE, server_time, parse_entry, forget, live_head,
-- @helpers wake, tell_head, parse_holder, parse_counted_entry, count_used, live_used,
-- @helpers read_meta, drop_hold, drop_expired, take_hold, first_lease_left,
-- @helpers admit_waiters, write_meta, keep_counted
local this_call = 'F' .. ARGV[3]
local now_us, now_ms = server_time()
local capacity, used, last, mark = read_meta()
local seen, freed = string.match(mark, '^(%S+)/(%d+)$')
if seen == this_call then
  return tonumber(freed)
end
used = drop_expired(now_ms, used)
local holds = 0
while true do
  local members = redis.call('ZRANGE', HOLDERS, 0, 99)
  if #members == 0 then
    break
  end
  for _, member in ipairs(members) do
    local token = redis.call('HGET', TOKENS, member)
    local _, _, units = parse_holder(member)
    used = drop_hold(member, token or '', units or 0, used)
    holds = holds + 1
  end
end
if not capacity then
  return holds
end
mark = this_call .. '/' .. holds
local _
last, used, _ = admit_waiters(now_us, now_ms, capacity, used, last, nil)
keep_counted(now_ms, capacity, used, last, mark)
return holds
