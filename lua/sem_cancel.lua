-- sem_cancel.lua: leave a semaphore's queue (a timed-out wait), leaving
-- nothing behind.
--
-- KEYS: holders, queue, deadlines, tokens, meta (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry "<owner> <wait id> <lease ms> <fixed 0|1>"
--         (its lease is kept if a permit was handed to it meanwhile)
-- Returns {1, token, lease ms left} when a permit had already been handed
--         to this call (the caller keeps it; a watchdog-renewed lease is
--         kept at its lease), or {0} when the caller left the queue (or was
--         not in it); the permits then free go to the next live waiters,
--         and a new head learns of it. A hold of another call of the same
--         owner is not this call's: it is left as it is.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds).

local entry = ARGV[3]
local owner, wait_id, lease, fixed = entry_arg(entry)
local member = owner .. ' ' .. wait_id
local now_us, now_ms = server_time()
local permits, last, mark = read_meta()
local held, left = hold_of(member, now_ms)
if held then
  if permits then
    local extended
    left, extended = extend_permit(member, lease, fixed, left, now_ms)
    if extended then
      keep_semaphore(now_ms, permits, last, mark)
    end
  end
  return { 1, tonumber(held), left }
end
leave_permit_queue(entry, now_us, now_ms, permits, last, mark)
return { 0 }
