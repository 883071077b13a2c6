-- sem_abandon.lua: undo one semaphore call whose outcome its client never
-- learned (a timeout, a connection lost mid-call, a reply that could not
-- be used), or a release that could not be sent: the permit that call
-- holds is given back (and handed on), or its queue entry removed.
-- Idempotent: the client sends it until Redis answers.
--
-- KEYS: holders, queue, deadlines, tokens, meta (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry "<owner> <wait id> <lease ms> <fixed 0|1>"
--         (the wait id is the call id; its hold is "<owner> <wait id>")
-- Returns 1 when the call's permit was given back, 2 when its queue entry
--         was removed, 0 when it left nothing to undo (or was undone
--         already, or its lease ran out).
-- A permit given back here is marked as sem_release marks it, so a release
-- of the same call sent later answers as released.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds).

local entry = ARGV[3]
local owner, call = entry_arg(entry)
local member = owner .. ' ' .. call
local now_us, now_ms = server_time()
local permits, last, mark = read_meta()
if hold_of(member, now_ms) then
  redis.call('ZREM', HOLDERS, member)
  redis.call('HDEL', TOKENS, member)
  if permits then
    last = pass_permits(now_us, now_ms, permits, last)
    keep_semaphore(now_ms, permits, last, owner .. '#' .. call)
  end
  return 1
end
if redis.call('ZSCORE', QUEUE, entry) then
  leave_permit_queue(entry, now_us, now_ms, permits, last, mark)
  return 2
end
return 0
