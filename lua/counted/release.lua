-- counted/release.lua: give back one hold of a counted lock; the units it
-- frees go to the live waiters at the head of the queue, in arrival order,
-- as far as they fit.
--
-- KEYS: holders, queue, deadlines, meta (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id
-- ARGV[4] fencing token of the hold being released
-- ARGV[5] call id of the acquisition this release gives back: a release
--         delivered twice (a retry after a lost reply) counts once, and is
--         answered as the first was while the meta still names it as the
--         last release (later releases of others replace that mark)
-- Returns 0 when released (or released already by this call) and nobody
--         was admitted, {owner1, wait id1, token1, lease ms1, owner2, ...}
--         for the waiters admitted (each also sent "G" as always; the new
--         head "H"; a client may act on this reply first), or -1 when this
--         call holds no live hold with that token (the lease was lost);
--         then nothing is changed.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); with nobody waiting, of a lone hold GET,
-- TIME, EXISTS, SET, as the mutex's; of one of two or more holds
-- ZRANGEBYSCORE, ZSCORE and ZREM too.

local owner, token, call = ARGV[3], ARGV[4], ARGV[5]
holder_arg(owner, call)
local meta = read_meta(true)
local now_us, now_ms = server_time()
local member, units = hold_by_token(meta, token, owner, call, now_ms)
if not member then
  return meta.mark == owner .. '#' .. call and 0 or -1
end
drop_hold(meta, member, units)
if not meta.capacity then
  -- The meta is gone (deleted by hand): the capacity is unknown, so
  -- nobody is admitted here; waiters take theirs when they poll.
  return 0
end
meta.mark = owner .. '#' .. call
-- The common case first: nobody waiting. The meta already outlives the
-- holds left by a fence life; with none left, it keeps a fence life.
if redis.call('EXISTS', QUEUE) == 0 then
  write_meta(meta, meta.used == 0 and FENCE_LIFE or nil)
  return 0
end

local handed = pass_on(meta, now_us, now_ms)
keep_counted(meta, now_ms)
if #handed == 0 then
  return 0
end
return with_grants({}, handed)
