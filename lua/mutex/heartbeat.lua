-- mutex/heartbeat.lua: keep one client's queued waiters on one lock alive (watchdog).
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] waiter timeout ms: new liveness deadline is server now + this
-- ARGV[4], ARGV[5], ... : one queue entry per waiting call, as acquire.lua
--         queued it: "<owner> <call id> <lease ms> <fixed 0|1>"
-- Also hands a lock whose holder vanished to its first live waiter, so no
-- waiter depends on a message to learn that the lock came free.
-- Returns {lock pttl ms (after any extension; -1: no expiry, -2: free),
--          last token issued,
--          status1, value1, status2, value2, ...} per entry:
--   0, position  still queued (deadline renewed)
--   1, token     the lock was handed to this wait (its call is counted in
--                the hold); a watchdog-renewed lease is kept at its lease
--  -1, 0         not queued and not holding (evicted or never queued)
-- A hold of the same owner made by another call is never extended here
-- (nor by a re-entry's call counted in it): a heartbeat still in flight
-- must not stretch a fixed lease taken since, or a maximum hold.
-- An election's script also says on the election's channel who it handed
-- the lock to (lib/mutex.lua: ANNOUNCE).
-- Cost: O(k log N) for k waiters of this client (amortised over dropped
-- dead waiters).

local waiter_timeout = whole_arg(ARGV[3], 'waiter timeout')
for i = 4, #ARGV do
  entry_arg(ARGV[i], split_entry)
end
local now_us, now_ms = server_time()
-- The lock key first: another format's lock stops the script before the
-- prune writes its queue (docs/compatibility.md).
local token, holder, calls, mark, fence, left = read_lock(redis.call('GET', LOCK))
local pruned = prune(now_ms)
if not holder and hand_over(now_us, now_ms, token, mark) then
  token, holder, calls, mark, fence, left = read_lock(redis.call('GET', LOCK))
elseif holder and pruned == 16 then
  -- More dead entries than a prune drops (a client gone with many
  -- waiters): those ahead of the first live one go too, as a handoff
  -- drops them, so that a live head hears position 0 and claims the
  -- lease as it runs out.
  live_head(now_ms, split_entry)
end

local out = { 0, tonumber(token) }
-- An entry not queued holds when the hold counts its call: handed over
-- while it waited.
local queued = renew_entries(out, deadline_score(now_ms + waiter_timeout), function(entry)
  local owner, call, lease, fixed = split_entry(entry)
  if holder == owner and counts_call(calls, call) then
    -- (Only the call that made the hold, its first, keeps it alive: a
    -- re-entry's joins the hold's lease as it is, past a maximum hold too.)
    if string.find(calls .. ',', call .. ',', 1, true) == 1 then
      left = extend_lease(lease + 0, fence, left, fixed)
    end
    return tonumber(token)
  end
end)
if queued then
  -- The lock key's TTL caps the queue's, as an arrival's (keep_queue_for):
  -- the lock key grows only for a queue it does not cover.
  local queue_life = keep_queue_for(waiter_timeout, false,
    holder and left ~= -1 and left + fence or nil)
  if queue_life then
    keep_anchor(queue_life)
  end
end
out[1] = left or -2
return out
