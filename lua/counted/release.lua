-- counted/release.lua: give back one hold of a counted lock; the units it
-- frees go to the live waiters at the head of the queue, in arrival order,
-- as far as they fit.
--
-- KEYS: holders, queue, deadlines, tokens, meta (see lib.lua)
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
-- waiters and expired holds); with nobody waiting GET, TIME, HGET,
-- ZSCORE, ZREM, HDEL, EXISTS, SET.

-- @helpers QUEUE, HOLDERS, TOKENS, META, fmt, fail, ms_arg, FENCE_LIFE,
-- @helpers server_time, holder_arg, parse_holder, count_used, live_used,
-- @helpers read_meta, write_meta, hold_by_token, drop_hold
local owner, token, call = ARGV[3], ARGV[4], ARGV[5]
holder_arg(owner, call, 0)
local capacity, used, last, mark = read_meta(true)
local now_us, now_ms = server_time()
local member, units = hold_by_token(token, owner, call, now_ms)
if not member then
  if mark == owner .. '#' .. call then
    return 0
  end
  return -1
end
used = drop_hold(member, token, units, used)
if not capacity then
  -- The meta is gone (deleted by hand): the capacity is unknown, so
  -- nobody is admitted here; waiters take theirs when they poll.
  return 0
end
mark = owner .. '#' .. call
-- The common case first: nobody waiting. The meta already outlives the
-- holds left by a fence life; with none left, it keeps a fence life.
if redis.call('EXISTS', QUEUE) == 0 then
  if used == 0 then
    write_meta(capacity, used, last, mark, FENCE_LIFE)
  else
    write_meta(capacity, used, last, mark, nil)
  end
  return 0
end

-- @helpers DEADLINES, WAKE_PREFIX, parse_entry, forget, live_head, wake,
-- @helpers tell_head, parse_counted_entry, drop_expired, take_hold,
-- @helpers first_lease_left, admit_waiters, pass_on, keep_counted

local handed
last, used, handed = pass_on(now_us, now_ms, capacity, used, last)
keep_counted(now_ms, capacity, used, last, mark)
if #handed == 0 then
  return 0
end
local out = {}
for _, grant in ipairs(handed) do
  for _, part in ipairs(grant) do
    out[#out + 1] = part
  end
end
return out
