-- renew.lua: extend a held lease (watchdog), only if the hold is still ours.
--
-- KEYS[1] lock hash (only this key)
-- ARGV[1] wake channel prefix (unused; kept for the common layout)
-- ARGV[2] owner id
-- ARGV[3] fencing token of the hold
-- ARGV[4] lease ms to set (1 .. MAX_MS); "0" leaves the lease as it is and only writes
--         the owner again, so that a WAIT after it covers the handoff that
--         made this hold (sync_replicas with a fixed lease)
-- Returns 1 when renewed, 0 when the lock is no longer this hold's (lease lost).
-- Cost: O(1).

if ARGV[4] ~= '0' then
  ms_arg(ARGV[4], 'lease')
end
local lock = redis.call('HMGET', LOCK, 'owner', 'token')
if lock[1] ~= ARGV[2] or lock[2] ~= ARGV[3] then
  return 0
end
if ARGV[4] == '0' then
  redis.call('HSET', LOCK, 'owner', ARGV[2])
else
  redis.call('PEXPIRE', LOCK, ARGV[4])
end
return 1
