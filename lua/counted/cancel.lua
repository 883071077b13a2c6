-- counted/cancel.lua: leave a counted lock's queue (a timed-out or
-- cancelled wait), leaving nothing behind.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry
--         "<owner> <call id> <lease ms> <fixed 0|1> <units>" (its lease is
--         kept if a hold was given to it meanwhile)
-- Returns {1, token, lease ms left} when a hold had already been given to
--         this call (the caller keeps it; a watchdog-renewed lease is kept
--         at its lease), or {0} when the caller left the queue (or was not
--         in it); the waiters its leaving unblocks are then admitted (a
--         large head gone lets the smaller calls behind it in), and a new
--         head learns of it. A hold of another call of the same owner is
--         not this call's: it is left as it is.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds).

local entry = ARGV[3]
local owner, call, lease, fixed, units = entry_arg(entry, split_counted_entry)
local member = owner .. ' ' .. call .. ' ' .. fmt(units)
local now_us, now_ms = server_time()
local meta = read_meta(now_ms)
local held, left = hold_of(meta, member, now_ms)
if held then
  left = extend_lease_counted(meta, member, lease, fixed, left, now_ms)
  return { 1, tonumber(held), left }
end

leave_counted_queue(meta, entry, now_us, now_ms)
return { 0 }
