-- mutex/release.lua: give back one hold; at zero, hand the lock to the next live waiter.
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<owner id>#<call id>" of the acquisition this release
--         gives back, as the lock's value names its hold (one argument:
--         the fast paths find it as given), so that a release delivered
--         twice (a retry after a lost reply) counts once, and is answered
--         as the first was even when that one freed the lock (the lock key
--         remembers the call key that last freed it)
-- ARGV[4] fencing token of the hold
-- ARGV[5] "check", or nothing: without it the client vouches that the
--         hold's lease lasts until this call's reply has come back (by its
--         own count, which ends before Redis's by the drift allowance), and
--         that the lease is at most the fence life: a hold found is freed
--         with no PTTL, keeping the TTL it has (its lease left and the
--         fence, at most two fence lives). "check": the lease is read, and
--         a hold whose lease ran out is not this release's (-1).
-- Returns the holds still left (0 = released and freed), or
--         "<new owner id> <its call id> <its token> <its lease ms>" (one
--         string: lib/common.lua's granted_reply) when the
--         lock was handed to a waiter (who is also sent "G" as always; its
--         client may act on this reply first), or -1 when the lock is not
--         held by this owner with this token (the lease was lost), -2 when
--         the lock key is gone (the server lost it: its lease and a fence
--         life after cannot have run out while its client counts it); then
--         nothing is changed.
-- An election's script also says on the election's channel who it handed
-- the lock to, or that the hold ended when it freed it (lib/mutex.lua: ANNOUNCE).
-- Cost: O(log N); with nobody waiting GET and one SET, and a PTTL when
-- checked; handing over: GET, ZPOPMIN, TIME, ZSCORE, ZREM, the queue's
-- PTTL, SET and PUBLISH (the new hold always with its '+'); with the '+'
-- and nobody queued (the first release after a handoff nobody joined
-- since): GET, ZPOPMIN and SET. An election's, on each: and its
-- announcement, PUBLISH, LPUSH, LTRIM and PEXPIRE (lib/mutex.lua's ANNOUNCE).

local call_key, token, check = ARGV[3], ARGV[4], ARGV[5]
if check then
  lease_check_arg(check)
end
local stored = redis.call('GET', LOCK)
-- The common case first: the only hold of this call, its value "v<format>
-- <token> <owner>#<call> <fence ms> <mark>" with this client's fence life
-- and no '+' (nobody waits), its lease not run out (vouched for, or PTTL
-- above the fence): one plain find. The freed key keeps the TTL it has
-- (the fence life and the lease left) while that is at most two fence
-- lives: a SET without PX costs the server less.
local pttl = nil
if stored and string.find(stored, 'v@FORMAT@ ' .. token .. ' ' .. call_key .. ' ' .. ARGV[2]
    .. ' ', 1, true) == 1 then
  pttl = check and redis.call('PTTL', LOCK)
  if not pttl or pttl > FENCE_LIFE then
    local free = 'v@FORMAT@ ' .. token .. ' - ' .. call_key
    if not pttl or pttl <= 2 * FENCE_LIFE then
      redis.call('SET', LOCK, free, 'KEEPTTL')
    else
      redis.call('SET', LOCK, free, 'PX', ARGV[2])
    end
    if ANNOUNCE then
      ANNOUNCE(token, nil, token)
    end
    return 0
  end
end

-- Next most common: the only hold of this call with '+' (waiters may be
-- queued), its lease not run out: the lock goes to the next live waiter,
-- with no parse of the value but its fence.
local fence = not pttl and stored and string.find(stored, 'v@FORMAT@ ' .. token .. ' ' .. call_key
  .. ' +', 1, true) == 1 and string.match(stored, '^%+(%d+) ', #token + #call_key + 5 + #'@FORMAT@')
if fence then
  pttl = check and redis.call('PTTL', LOCK)
  if not pttl or pttl > fence + 0 then
    local next_owner, next_call, _, _, next_token, ttl =
      free_lock(nil, nil, token, call_key)
    return next_owner and granted_reply(next_owner, next_call, next_token, ttl) or 0
  end
end

local held, holder, calls, mark, fence_ms, _, waiters = read_lock(stored, pttl)
local owner, call = call_key_arg(call_key)

if holder ~= owner or held ~= token then
  return split_mark(mark) == call_key and 0 or (stored and -1 or -2)
end
local _, left, next_owner, next_call, _, _, next_token, ttl =
  give_back(owner, token, calls, mark, fence_ms, call, waiters)
return next_owner and granted_reply(next_owner, next_call, next_token, ttl) or left
