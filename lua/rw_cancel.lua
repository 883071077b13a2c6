-- rw_cancel.lua: leave a reader-writer lock's queue (a timed-out or
-- cancelled wait), leaving nothing behind.
--
-- KEYS: holders, queue, deadlines, tokens, meta, writers (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry
--         "<owner> <wait id> <lease ms> <fixed 0|1> <r|w>" (its lease is
--         kept if a hold was given to it meanwhile)
-- Returns {1, token, lease ms left} when a hold had already been given to
--         this call (the caller keeps it; a watchdog-renewed lease is kept
--         at its lease), or {0} when the caller left the queue (or was not
--         in it); the waiters its leaving unblocks are then admitted (a
--         writer at the head gone lets the run of readers behind it in),
--         and a new head learns of it. A hold of another call of the same
--         owner is not this call's: it is left as it is.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds).

local entry = ARGV[3]
local owner, wait_id, lease, fixed, rw = rw_entry_arg(entry)
local member = owner .. ' ' .. wait_id .. ' ' .. rw
local now_us, now_ms = server_time()
local last, mark = read_rw_meta()
local held, left = hold_of(member, now_ms)
if held then
  local extended
  left, extended = extend_rw_hold(member, rw, lease, fixed, left, now_ms)
  if extended then
    keep_rwlock(now_ms, last, mark)
  end
  return { 1, tonumber(held), left }
end

-- @helpers

leave_rw_queue(entry, now_us, now_ms, last, mark)
return { 0 }
