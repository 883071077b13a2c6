-- counted/renew.lua: extend a held lease of a counted lock (watchdog),
-- only if that call still holds a live hold with that token.
--
-- KEYS: holders, queue, meta (see lib/counted.lua; the queue is
--       not used)
-- ARGV[1] wake channel prefix (not read here: every call of a client
--         starts with it)
-- ARGV[2] fence life ms
-- ARGV[3] owner id
-- ARGV[4] fencing token of the hold
-- ARGV[5] lease ms to set (1 .. 365 days in ms: lib/common.lua's whole_arg);
--         "0" leaves the lease as it is and
--         only writes the hold again, so that a WAIT after it covers the
--         handoff that made this hold (sync_replicas with a fixed lease)
-- ARGV[6] call id of the acquisition that made the hold
-- ARGV[7] the token the hold was granted with, when a change of its access
--         (upgrade.lua, downgrade.lua) gave it another since: a revocation
--         recorded up to that one asks it
-- Returns 1 when renewed, 2 when renewed and a revocation (revoke.lua)
--         asks this hold to let go (the meta records one up to a token at
--         least this hold's), 0 when this call holds no live hold with that
--         token (lease lost: run out, or given back), 3 when it holds none
--         and the meta's mark says a force release freed every hold up to
--         then (force_release.lua: "F<call key>/<holds>"), this one's token
--         being no later than the last issued, 4 when it holds none and the
--         meta is gone (the server lost it, as release.lua's -2).
-- Cost: O(log N) in holders: of a lone hold GET, TIME, PTTL, SET; of one
-- of two or more holds GET, TIME, ZRANGEBYSCORE, ZSCORE, ZADD and up to
-- two PTTLs and PEXPIREs (keys are only ever pushed further out).

local owner, token, lease, call = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if lease ~= '0' then
  lease = whole_arg(lease, 'lease')
end
holder_arg(owner, call)
local _, now_ms = server_time()
local meta = read_meta(now_ms, true)
local member = hold_by_token(meta, token, owner, call, now_ms)
if not member then
  local forced = string.sub(meta.mark, 1, 1) == 'F' and tonumber(token) <= tonumber(meta.last)
  return forced and 3 or (meta.capacity and 0 or 4)
end
local renewed = meta.revoked and tonumber(meta.revoked) >= tonumber(ARGV[7] or token) and 2 or 1
if meta.lone then
  if lease ~= '0' then
    meta.lone.ends = now_ms + lease
    write_meta(meta, math.max(meta.lone.pttl, lease + FENCE_LIFE), now_ms)
  else
    write_meta(meta, nil, now_ms)
  end
  return renewed
end
if lease == '0' then
  redis.call('ZADD', HOLDERS, 'XX', '-' .. token, '#' .. member)
  return renewed
end
redis.call('ZADD', HOLDERS, 'XX', now_ms + lease, member)
outlive(HOLDERS, lease + 1)
outlive(META, lease + 1 + FENCE_LIFE)
return renewed
