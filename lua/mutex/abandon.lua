-- mutex/abandon.lua: undo one call whose outcome its client never learned (a
-- timeout, a connection lost mid-call, a reply that could not be used),
-- or a release that could not be sent: whatever that call holds or queued
-- is given back. Idempotent: the client sends it until Redis answers.
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry "<owner> <call id> <lease ms> <fixed 0|1>"
-- Returns 1 when the call's hold (one count of it) was given back, 2 when
--         its queue entry was removed, 0 when it left nothing to undo.
-- An election's script also says on the election's channel who it handed
-- the lock to, or that the hold ended when it freed it (lib/mutex.lua: ANNOUNCE).
-- Cost: O(log N).

local entry = ARGV[3]
local owner, call = entry_arg(entry, split_entry)
local token, holder, calls, mark, fence, left, waiters = read_lock(redis.call('GET', LOCK))
if holder == owner and give_back(owner, token, calls, mark, fence, call, waiters) then
  return 1
end
if redis.call('ZSCORE', QUEUE, entry) then
  leave_queue(entry, holder, token, mark, left)
  return 2
end
return 0
