-- mutex/cancel.lua: leave the queue (a timed-out or cancelled wait),
-- leaving nothing behind.
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry "<owner> <call id> <lease ms> <fixed 0|1>"
-- Returns {1} when the lock had been handed to this call meanwhile: it is
--         given back as its abandon gives it back (abandon.lua), to the
--         next live waiter, since nobody takes it (the wait is over, and
--         this leave may reach Redis after its caller stopped reading the
--         reply: a stalled link, a client gone); or {0} when the caller
--         left the queue (or was not in it). A hold of the same owner made
--         by another call is not this call's: it is left as it is.
-- An election's script also says on the election's channel who it handed
-- the lock to, or that the hold ended when it freed it (lib/mutex.lua:
-- ANNOUNCE).
-- Cost: O(log N).

local entry = ARGV[3]
local owner, call = entry_arg(entry, split_entry)
local token, holder, calls, mark, fence, left, waiters = read_lock(redis.call('GET', LOCK))
if holder == owner and give_back(owner, token, calls, mark, fence, call, waiters) then
  return { 1 }
end
leave_queue(entry, holder, token, mark, left)
return { 0 }
