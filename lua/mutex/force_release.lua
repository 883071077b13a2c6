-- mutex/force_release.lua: free the lock whoever holds it and hand it to the next waiter.
--
-- KEYS: lock, queue (an election's: and its history; see lib/mutex.lua),
--       the revoke's record (not used), then this call's record (the
--       last: lib/common.lua's record_forced)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<client id>#<call id>": the record keeps it with the
--         answer, so the same call delivered again answers as the first
--         did instead of freeing whoever holds the lock since
-- Returns the owner id that held the lock, or false (nil) when it was free.
-- The holder is told at once, "L <token> <lock key>" on its client's
-- channel, and its renewals find the lock gone should the message be lost.
-- An election's script also says on the election's channel who it handed
-- the lock to, or that the hold ended when it freed it (lib/mutex.lua: ANNOUNCE).
-- Cost: O(log N), and a PUBLISH to the holder's client, one more to the
-- waiter it hands the lock to (an election's: and its announcement,
-- PUBLISH, LPUSH, LTRIM and PEXPIRE).

-- The lock key's mark says which call freed whose hold ("F<call key>
-- <holder>"): a renewal of that hold tells a force release (renew.lua).
local this_call = 'F' .. ARGV[3]
local stored = redis.call('GET', LOCK)
local token, holder, _, _, _, _, waiters = read_lock(stored)
local before = forced_before()
if before then
  return before ~= '-' and before
end
record_forced(holder or '-')
-- With no key, no last token to keep: a free key written then would start
-- the next take's token from 0, so nothing is written. A lease run out
-- goes on to the next live waiter now, as a freed hold does: a head that
-- came to head the queue by a grant to the one before it does not know
-- when that lease ended.
if not holder then
  if stored and not (waiters and hand_over(nil, nil, token, this_call)) then
    write_free(token, this_call, waiters)
    if waiters then
      -- A fence life may end before the queue's TTL: the key outlives it.
      keep_anchor(redis.call('PTTL', QUEUE))
    end
  end
  return false
end
local now_us, now_ms = server_time()
free_lock(now_us, now_ms, token, this_call .. ' ' .. holder)
tell_holders({ holder }, 'L', token)
return holder
