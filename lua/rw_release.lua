-- rw_release.lua: give back one read or write hold; when the lock can
-- admit, it goes to the head of the queue: a writer alone, or the run of
-- consecutive readers there.
--
-- KEYS: holders, queue, deadlines, tokens, meta, writers (see lib.lua)
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
--         for the waiters admitted (each also sent "G"; the new head "H"),
--         or -1 when this call holds no live hold with that token (the
--         lease was lost); then nothing is changed.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds).

local owner, token, call = ARGV[3], ARGV[4], ARGV[5]
holder_arg(owner, call)
local now_us, now_ms = server_time()
local last, mark = read_rw_meta()
local member = rw_hold_by_token(token, owner, call, now_ms)
if not member then
  if mark == owner .. '#' .. call then
    return 0
  end
  return -1
end
rw_drop(member, token)
mark = owner .. '#' .. call
if redis.call('EXISTS', QUEUE) == 0 then
  keep_rwlock(now_ms, last, mark)
  return 0
end

-- @helpers

local handed
last, handed = pass_rw_lock(now_us, now_ms, last)
keep_rwlock(now_ms, last, mark)
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
