-- counted/downgrade.lua: turn a reader-writer lock's write into a read or
-- an upgradable read, or an upgradable read into a read, in place and
-- atomically: nobody can write between the two, and the
-- waiters at the head of the queue that fit beside what is left (the
-- reads queued behind the write, an upgradable read among them if it
-- fits) are admitted in the same step, each with its "G" message, as a
-- release admits them.
--
-- The hold takes a new token, max(last + 1, server clock in µs), as
-- upgrade.lua's write does: every token names one access, so a resource
-- can tell the read from the write before it. Its call and lease end stay.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id
-- ARGV[4] fencing token of the hold
-- ARGV[5] call id of the acquisition that made it
-- ARGV[6] the units it keeps: 1 (a read) or 2147483648 (an upgradable
--         read), fewer than it has
-- Returns {token, lease ms left, owner1, call id1, token1, lease ms1,
--         owner2, ...}: the hold's new token and its lease left, then the
--         waiters admitted (each also sent "G"; a client may act on this
--         reply first); the same call delivered again
--         (the hold of that call found with those units) answers with the
--         hold and admits nobody again; -1 when the call holds nothing
--         live (its lease ran out, or force unlocked). A hold with no more
--         units than it would keep, or another count, stops the script
--         with "ERR fairlock: downgrade: ...", nothing written; a write
--         made an upgradable read beside another hold of 2^31 units or
--         more (an upgradable read or a write its thread re-entered) with
--         "FAIRLOCK_UPGRADE_REFUSED <owner> <token> downgrade upgradable",
--         nothing written.
-- Cost: one round trip, O(log N) in waiters and holders (amortised over
-- dropped dead waiters and expired holds), plus the admissions' O(log N)
-- each.

local owner, token, call = ARGV[3], ARGV[4], ARGV[5]
local to = whole_arg(ARGV[6], 'units kept', 'units')
holder_arg(owner, call)
if to ~= 1 and to ~= 2147483648 then
  fail('ERR fairlock: downgrade: a hold keeps 1 or 2147483648 units, got ' .. ARGV[6])
end
local now_us, now_ms = server_time()
local meta = read_meta(now_ms, false, nil, nil, now_us)
-- A reader-writer lock's capacity is known even when its meta is gone.
meta.capacity = meta.capacity or 4294967295
local member, units = hold_by_token(meta, token, owner, call, now_ms)
if not member then
  -- Downgraded already (a repeat), or lost.
  local held, left = hold_of(meta, owner .. ' ' .. call .. ' ' .. fmt(to), now_ms)
  return held and { tonumber(held), left } or -1
end
if units <= to or (units ~= 4294967295 and units ~= 2147483648) then
  fail('ERR fairlock: downgrade: the hold of token ' .. token .. ' takes ' .. fmt(units)
    .. ' units, not a write\'s or an upgradable read\'s above ' .. fmt(to))
end
-- Only one upgradable read at a time: a write beside another hold of
-- 2^31 units or more (its thread's upgradable read or write, re-entered)
-- is not made one.
if to == 2147483648 and meta.used - units >= to then
  fail('FAIRLOCK_UPGRADE_REFUSED ' .. owner .. ' ' .. token .. ' downgrade upgradable')
end
local new_token, left = change_hold(meta, member, units, to, now_us, now_ms)
local handed = pass_on(meta, now_us, now_ms)
keep_anchor_counted(meta, now_ms)
return with_grants({ tonumber(new_token), left }, handed)
