-- mutex/revoke.lua: ask the holder of the lock to let go. Nothing is freed:
-- the holder decides when it releases.
--
-- KEYS: lock, queue (see lib/mutex.lua; the queue is not used; an
--       election's: and its history), then this call's record (the last:
--       lib/common.lua's answer_revoke)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<client id>#<call id>": the record keeps it with the
--         reply, so the same call delivered again answers as the first
--         did instead of asking whoever holds the lock since
-- Records the request in the lock key, as its mark's last word "^<token>"
-- with the hold's token: the hold of now (re-entries included) is asked,
-- a later hold has a larger token and is not. Its renewals report it
-- (renew.lua returns 2), so a holder whose push message was lost still
-- hears it at its next renewal; the push is "R <token> <lock key>" on the
-- holder's client channel.
-- Returns {holds asked (1, or 0 when the lock is free), the token up to
--         which holds are asked (0 when none)}. Asking twice (two calls)
--         asks again.
-- Cost: O(1): GETs, PTTLs, SETs and one PUBLISH.

local before = revoked_before()
if before then
  return before
end
local token, holder, calls, mark, fence, _, waiters = read_lock(redis.call('GET', LOCK))
if not holder then
  return answer_revoke(LOCK, 0, 0)
end
-- The mark with its revocation word, in place of any earlier one.
local _, _, bare = split_mark(mark)
mark = bare == '' and '^' .. token or bare .. ' ^' .. token
write_hold(token, holder, calls, mark, fence, nil, waiters)
tell_holders({ holder }, 'R', token)
return answer_revoke(LOCK, 1, token)
