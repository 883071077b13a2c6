-- counted/upgrade.lua: turn a reader-writer lock's upgradable read into
-- its write, in place (no other writer can come between). An upgradable read takes 2147483648
-- units of the 4294967295 there are: it shares with reads, and excludes
-- writes and other upgradable reads by the admission's number test
-- alone. It becomes the write once the reads granted before it are gone:
-- at once when none is left, else its claim (the entry "<owner> <call>
-- <lease ms> <fixed> 2147483647", the units a write takes beyond it) goes
-- to the head of the queue, ahead of every waiter, so nobody queued can
-- pass it, and admit_waiters settles it in place when the last of
-- those reads is released or runs out, with the "G" message any waiter
-- gets. It waits only for holds granted before it, never for a queued
-- call (those wait behind it), so no deadlock can come of it; and only
-- one upgradable read is held at a time, so two upgrades never wait for
-- each other.
--
-- The write takes a new token, max(last + 1, server clock in µs), larger
-- than every token issued before it, the reads' granted beside the
-- upgradable read included: a resource that remembers the largest token
-- it saw (reads' too) takes the write, and it can tell the write from the
-- read that preceded it. The hold keeps its call and its lease end.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id
-- ARGV[4] fencing token of the upgradable read
-- ARGV[5] call id of the acquisition that made it (its hold is "<owner>
--         <call> 2147483648"; the write "<owner> <call> 4294967295")
-- ARGV[6] lease ms and ARGV[7] fixed "0"|"1" of that call: its claim is
--         "<owner> <call> <lease ms> <fixed> 2147483647", the entry its
--         client's watchdog heartbeats
-- ARGV[8] waiter timeout ms: the claim's liveness deadline
-- ARGV[9] mode: "try" never claims; "first", "poll" claim (or find the
--         claim queued) when reads are still held; "cancel" withdraws the
--         claim (the waiters it held back are admitted)
-- Returns {1, token, lease ms left} when the call holds the write (now, or
--         before: a repeat, or the claim settled while it waited), the
--         token the write's; {0, ms until the first live lease runs out,
--         position (0: its claim heads the queue; -1: not queued), last
--         token issued} when it is still the upgradable read; -1 when it
--         holds neither (its lease ran out, or force unlocked): a claim
--         left behind is withdrawn. A hold of that token with other units
--         stops the script with "ERR fairlock: upgrade: ...", nothing
--         written.
-- Cost: one round trip, O(log N) in waiters and holders (amortised over
-- dropped dead waiters and expired holds).

local owner, token, call = ARGV[3], ARGV[4], ARGV[5]
local lease, fixed = whole_arg(ARGV[6], 'lease'), ARGV[7]
local waiter_timeout, mode = whole_arg(ARGV[8], 'waiter timeout'), ARGV[9]
holder_arg(owner, call)
if fixed ~= '0' and fixed ~= '1' then
  fail('ERR fairlock: fixed must be 0 or 1')
end
if mode ~= 'try' and mode ~= 'first' and mode ~= 'poll' and mode ~= 'cancel' then
  fail('ERR fairlock: mode must be try, first, poll or cancel, got ' .. tostring(mode))
end
local claim = owner .. ' ' .. call .. ' ' .. fmt(lease) .. ' ' .. fixed .. ' 2147483647'
local now_us, now_ms = server_time()
local meta = read_meta(now_ms, false, nil, nil, now_us)
-- A reader-writer lock's capacity is known even when its meta is gone.
meta.capacity = meta.capacity or 4294967295

-- Upgraded already: a repeat, or the claim settled while the call waited.
local held, left = hold_of(meta, owner .. ' ' .. call .. ' 4294967295', now_ms)
if held then
  return { 1, tonumber(held), left }
end
local queued = redis.call('ZSCORE', QUEUE, claim)
local member, units = hold_by_token(meta, token, owner, call, now_ms)
if member and units ~= 2147483648 then
  fail('ERR fairlock: upgrade: the hold of token ' .. token .. ' takes ' .. fmt(units)
    .. ' units, not an upgradable read\'s 2147483648')
end
-- A claim queued is withdrawn when its upgradable read is gone, or when
-- the call cancels.
if queued and (not member or mode == 'cancel') then
  leave_counted_queue(meta, claim, now_us, now_ms)
end
if not member then
  return -1
end
if mode == 'cancel' then
  return { 0, first_lease_left(meta, now_ms), -1, tonumber(meta.last) }
end

local dropped = drop_expired(meta, now_ms)
if meta.used == 2147483648 then
  -- Alone (the reads granted before it are gone): the write, now.
  local write_token, write_left = change_hold(meta, member, units, 4294967295, now_us, now_ms)
  if queued then
    -- The claim goes: the waiter behind it heads the queue now.
    forget(claim)
    tell_head(now_ms, write_left, split_counted_entry)
  end
  keep_anchor_counted(meta, now_ms)
  return { 1, tonumber(write_token), write_left }
end
if mode == 'try' then
  if dropped > 0 then
    keep_anchor_counted(meta, now_ms)
  end
  return { 0, first_lease_left(meta, now_ms), -1, tonumber(meta.last) }
end
if not queued then
  -- Ahead of every waiter: nobody queued passes an upgrade.
  redis.call('ZADD', QUEUE, fmt(first_number() - 1), claim)
end
redis.call('ZADD', QUEUE, deadline_score(now_ms + waiter_timeout), '~' .. claim)
local queue_life = keep_queue_for(waiter_timeout, false, queue_cap(meta, now_ms))
keep_queued(meta, queue_life, now_ms, dropped > 0)
return { 0, first_lease_left(meta, now_ms), 0, tonumber(meta.last) }
