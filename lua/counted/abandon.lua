-- counted/abandon.lua: undo one call on a counted lock whose outcome its
-- client never learned (a timeout, a connection lost mid-call, a reply
-- that could not be used), or a release that could not be sent: the hold
-- that call made is given back (and the waiters it blocked admitted), or
-- its queue entry removed. Idempotent: the client sends it until Redis
-- answers.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] the call's queue entry
--         "<owner> <call id> <lease ms> <fixed 0|1> <units>" (its hold,
--         if it got one, is "<owner> <call id> <units>")
-- Returns 1 when the call's hold was given back, 2 when its queue entry
--         was removed, 0 when it left nothing to undo (or was undone
--         already, or its lease ran out).
-- A hold given back here is marked as a release marks it, so a release of
-- the same call sent later answers as released.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); with nobody waiting, or nothing to undo, it
-- builds none of the queue's steps.

local entry = ARGV[3]
local owner, call, _, _, units = entry_arg(entry, split_counted_entry)
local member = owner .. ' ' .. call .. ' ' .. fmt(units)
local now_us, now_ms = server_time()
local meta = read_meta(now_ms)
local held = hold_of(meta, member, now_ms)
-- The common give-back first: nobody waiting.
if held and give_back_call_counted(meta, member, owner, call, units, now_ms) then
  return 1
end
if not held and not redis.call('ZSCORE', QUEUE, entry) then
  return 0
end

if held then
  pass_on(meta, now_us, now_ms)
  if meta.capacity then
    keep_anchor_counted(meta, now_ms)
  end
  return 1
end
leave_counted_queue(meta, entry, now_us, now_ms)
return 2
