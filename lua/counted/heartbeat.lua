-- counted/heartbeat.lua: keep one client's queued waiters on one counted
-- lock alive (watchdog).
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] waiter timeout ms: new liveness deadline is server now + this
-- ARGV[4], ARGV[5], ... : one queue entry per waiting call, as
--         counted/acquire.lua queued it:
--         "<owner> <call id> <lease ms> <fixed 0|1> <units>"
-- Also admits the live waiters at the head of the queue that fit (expired
-- holds dropped first), as a release does, so no waiter depends on a
-- message to learn that units came free.
-- Returns {ms until the first live lease runs out (0: none live), last
--          token issued, status1, value1, status2, value2, ...} per entry:
--   0, position  still queued (deadline renewed)
--   1, token     a hold was given to this wait (the hold is
--                "<owner> <call id> <units>"); a watchdog-renewed lease is
--                kept at its lease, a fixed one is left alone
--  -1, 0         not queued and not holding (evicted, never queued, or
--                its hold already given back or run out)
-- A hold of the same owner made by another call is never extended here.
-- Every key keeps a TTL past what it holds, the meta's past all of them.
-- A heartbeat needs no capacity: it takes it from the meta (when the meta
-- is gone, nobody is admitted and no lease is extended).
-- Cost: O(k log N) for k waiters of this client (amortised over dropped
-- dead waiters and expired holds).

local waiter_timeout = whole_arg(ARGV[3], 'waiter timeout')
for i = 4, #ARGV do
  entry_arg(ARGV[i], split_counted_entry)
end
local now_us, now_ms = server_time()
-- The meta first: another format's lock stops the script before the prune
-- writes its queue (docs/compatibility.md).
local meta = read_meta(now_ms)
prune(now_ms)
local handed, dropped = pass_on(meta, now_us, now_ms)
local written = #handed > 0 or dropped > 0

local out = { 0, tonumber(meta.last) }
-- An entry not queued holds when its call's hold is live: handed over
-- while it waited (its lease kept alive, the meta written below).
local queued = renew_entries(out, deadline_score(now_ms + waiter_timeout), function(entry)
  local owner, call, lease, fixed, units = split_counted_entry(entry)
  local member = owner .. ' ' .. call .. ' ' .. fmt(units)
  local held, left = hold_of(meta, member, now_ms)
  if held then
    local _, extended = extend_lease_counted(meta, member, lease + 0, fixed, left, now_ms, true)
    written = written or extended
  end
  return held and tonumber(held)
end)
if queued then
  keep_queue_for(waiter_timeout, false, queue_cap(meta, now_ms))
end
if meta.capacity and (written or queued) then
  keep_anchor_counted(meta, now_ms)
end
out[1] = first_lease_left(meta, now_ms)
return out
