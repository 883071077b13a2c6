-- rw_abandon.lua: undo one reader-writer lock call whose outcome its
-- client never learned (a timeout, a connection lost mid-call, a reply
-- that could not be used), or a release that could not be sent: the read
-- or write hold that call made is given back (and the waiters it blocked
-- admitted), or its queue entry removed. Idempotent: the client sends it
-- until Redis answers.
--
-- KEYS: holders, queue, deadlines, tokens, meta, writers (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry
--         "<owner> <wait id> <lease ms> <fixed 0|1> <r|w>" (the wait id is
--         the call id; its hold is "<owner> <wait id> <r|w>")
-- Returns 1 when the call's hold was given back, 2 when its queue entry
--         was removed, 0 when it left nothing to undo (or was undone
--         already, or its lease ran out).
-- A hold given back here is marked as rw_release marks it, so a release
-- of the same call sent later answers as released.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); with nobody waiting, or nothing to undo, it
-- builds none of the queue's steps.

local entry = ARGV[3]
local owner, call, _, _, rw = rw_entry_arg(entry)
local member = owner .. ' ' .. call .. ' ' .. rw
local now_us, now_ms = server_time()
local last, mark = read_rw_meta()
local held = hold_of(member, now_ms)
if held then
  rw_drop(member, held)
  mark = owner .. '#' .. call
elseif not redis.call('ZSCORE', QUEUE, entry) then
  return 0
end
-- The common give-back first: nobody waiting.
if held and redis.call('EXISTS', QUEUE) == 0 then
  keep_rwlock(now_ms, last, mark)
  return 1
end

-- @helpers

if held then
  last = pass_rw_lock(now_us, now_ms, last)
  keep_rwlock(now_ms, last, mark)
  return 1
end
leave_rw_queue(entry, now_us, now_ms, last, mark)
return 2
