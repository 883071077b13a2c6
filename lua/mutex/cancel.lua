-- mutex/cancel.lua: leave the queue (a timed-out try_lock_for), leaving nothing behind.
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry "<owner> <call id> <lease ms> <fixed 0|1>"
--         (its lease is kept if the lock was handed over meanwhile)
-- Returns {1, token, lock pttl ms} when the lock had already been handed to
--         this call (the caller keeps it), or {0} when the caller left the
--         queue. A hold of the same owner made by another call is not this
--         call's to keep: it is left as it is.
-- An election's script also says on the election's channel who it handed
-- a free lock to (lib/mutex.lua: ANNOUNCE).
-- Cost: O(log N).

local entry = ARGV[3]
local owner, call, lease, fixed = entry_arg(entry, split_entry)
local token, holder, calls, mark, fence, left = read_lock(redis.call('GET', LOCK))
if holder == owner and counts_call(calls, call) then
  left = extend_lease(lease, fence, left, fixed)
  return { 1, tonumber(token), left }
end
leave_queue(entry, holder, token, mark, left)
return { 0 }
