-- counted/cancel.lua: leave a counted lock's queue (a timed-out or
-- cancelled wait), leaving nothing behind.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry
--         "<owner> <call id> <lease ms> <fixed 0|1> <units>"
-- Returns {1} when a hold had been given to this call meanwhile: it is
--         given back as its abandon gives it back (abandon.lua), the
--         waiters it blocked admitted, since nobody takes it (the wait is
--         over, and this leave may reach Redis after its caller stopped
--         reading the reply: a stalled link, a client gone); or {0} when
--         the caller left the queue (or was not in it); the waiters its
--         leaving unblocks are then admitted (a large head gone lets the
--         smaller calls behind it in), and a new head learns of it. A hold
--         of another call of the same owner is not this call's: it is left
--         as it is.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); a hold given back with nobody waiting builds
-- none of the queue's steps.

local entry = ARGV[3]
local owner, call, _, _, units = entry_arg(entry, split_counted_entry)
local member = owner .. ' ' .. call .. ' ' .. fmt(units)
local now_us, now_ms = server_time()
local meta = read_meta(now_ms)
local held = hold_of(meta, member, now_ms)
-- The common give-back first: nobody waiting.
if held and give_back_call_counted(meta, member, owner, call, units, now_ms) then
  return { 1 }
end

if held then
  pass_on(meta, now_us, now_ms)
  if meta.capacity then
    keep_anchor_counted(meta, now_ms)
  end
  return { 1 }
end
leave_counted_queue(meta, entry, now_us, now_ms)
return { 0 }
