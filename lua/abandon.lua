-- abandon.lua: undo one call whose outcome its client never learned (a
-- timeout, a connection lost mid-call, a reply that could not be used),
-- or a release that could not be sent: whatever that call holds or queued
-- is given back. Idempotent: the client sends it until Redis answers.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id the call was made for
-- ARGV[3] call id (an acquire call's wait id)
-- Returns 1 when the call's hold (one count of it) was given back, 2 when
--         its queue entry was removed, 0 when it left nothing to undo.
-- Cost: O(log N).

local owner, call = ARGV[2], ARGV[3]
local lock = redis.call('HMGET', LOCK, 'owner', 'token', 'count', 'call:' .. call)
if lock[1] == owner and give_back(owner, lock[2], lock[3], lock[4], call) then
  return 1
end
local grant = redis.call('HGET', GRANTS, owner)
if grant and select(3, parse_grant(grant)) == call then
  local now_us, now_ms = server_time()
  leave_queue(owner, lock[1], now_us, now_ms)
  return 2
end
return 0
