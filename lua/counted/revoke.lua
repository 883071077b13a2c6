-- counted/revoke.lua: ask every holder of a counted lock (a semaphore, a
-- reader-writer lock) to let go. Nothing is freed: each holder decides
-- when it releases.
--
-- KEYS: holders, queue, meta (see lib/counted.lua; the queue is
--       not used), then this call's record (the last: lib/common.lua's
--       answer_revoke)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<client id>#<call id>": the record keeps it with the
--         reply, so the same call delivered again answers as the first
--         did instead of asking holds taken since
-- Records the request in the meta, as the last token issued ("^<token>"
-- at the end of its mark): every live hold has a token up to it and is
-- asked; a later hold has a larger token and is not. Their renewals report
-- it (renew.lua returns 2), so a holder whose push message was lost still
-- hears it at its next renewal; the push is "R <token> <holders key>", once
-- to each holding client's channel. The record goes with the last hold.
-- Returns {holds asked (0 when none is live), the token up to which holds
--         are asked (0 when none)}. Asking twice (two calls) asks again.
-- Cost: O(H + log H) for H live holds: GETs, TIME, ZRANGEBYSCORE (of a
-- lone hold PTTL instead), PTTL, SETs and a PUBLISH per holding client.

local before = revoked_before()
if before then
  return before
end
local now_us, now_ms = server_time()
local meta = read_meta(now_ms, false, nil, nil, now_us)
local owners = {}
local lone = meta.lone
if lone and lone.ends >= now_ms then
  owners[1] = lone.owner
elseif not lone and meta.used > 0 then
  -- Lease ends are the scores from 0 up; the live ones from now.
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', HOLDERS, fmt(now_ms), '+inf')) do
    local owner = parse_holder(member)
    if owner then
      owners[#owners + 1] = owner
    end
  end
end
if #owners == 0 then
  return answer_revoke(META, 0, 0)
end
if meta.capacity then
  meta.revoked = meta.last
  write_meta(meta, nil, now_ms)
end
tell_holders(owners, 'R', meta.last)
return answer_revoke(META, #owners, meta.last)
