-- counted/force_release.lua: free every hold of a counted lock, whoever
-- holds it, and admit the waiters at the head of the queue that fit.
--
-- KEYS: holders, queue, meta (see lib/counted.lua), the revoke's record
--       (not used), this call's record (the last: lib/common.lua's
--       record_forced)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<client id>#<call id>": the record keeps it with the
--         holds it freed, so the same call delivered again answers as the
--         first did instead of freeing whoever holds the lock since
-- Returns the number of live holds freed (0 when none was held). Each
--         holding client is told at once, "L <last token> <holders key>" on
--         its channel (its holds with tokens up to that one are gone), and
--         its renewals find them gone should the message be lost.
-- Cost: O(H log N) for H holds, plus the admissions' O(log N) each, and a
-- PUBLISH per holding client.

local now_us, now_ms = server_time()
local meta = read_meta(now_ms, false, nil, nil, now_us)
local before = forced_before()
if before then
  return before + 0
end
drop_expired(meta, now_ms)
local owners = {}
if meta.lone then
  owners[1] = meta.lone.owner
  meta.lone = nil
end
-- Then every hold of the holders zset, its owner listed.
drop_expired(meta, now_ms, owners)
meta.used = 0
local holds = #owners
record_forced(holds)
tell_holders(owners, 'L', meta.last)
if not meta.capacity then
  return holds
end
-- The meta's mark says a force release freed the holds up to now: a
-- renewal of one tells it (renew.lua).
meta.mark = 'F' .. ARGV[3] .. '/' .. holds
admit_waiters(meta, now_us, now_ms, nil)
keep_anchor_counted(meta, now_ms)
return holds
