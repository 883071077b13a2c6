-- mutex/renew.lua: extend a held lease (watchdog), only if the hold is still ours.
--
-- KEYS[1] lock (only this key)
-- ARGV[1] wake channel prefix, ARGV[2] fence life ms: not read here (the
--         two arguments every call of a client starts with)
-- ARGV[3] owner id
-- ARGV[4] fencing token of the hold (the hold is named by its owner and
--         token: a counted lock's renewal also takes the call id)
-- ARGV[5] lease ms to set (1 .. 365 days in ms: lib/common.lua's whole_arg);
--         "0" leaves the lease as it is and
--         only writes the hold again, so that a WAIT after it covers the
--         handoff that made this hold (sync_replicas with a fixed lease)
-- Returns 1 when renewed, 2 when renewed and a revocation (revoke.lua)
--         asks this hold to let go (the lock key's mark ends in "^<token>"
--         with a token up to this hold's), 0 when the lock is no longer this
--         hold's (lease lost: taken by another, or run out), 3 when it is
--         not and its mark says a force release freed this owner's hold
--         (force_release.lua: "F<call key> <owner>"), 4 when the lock key
--         is gone (the server lost it, as release.lua's -2).
--         A lock key of another data format stops it with
--         "FAIRLOCK_FORMAT ..." (lib/common.lua: fail).
-- Cost: O(1): GET, PTTL and one write.

if ARGV[5] ~= '0' then
  whole_arg(ARGV[5], 'lease')
end
local stored = redis.call('GET', LOCK)
local held_by = 'v@FORMAT@ ' .. ARGV[4] .. ' ' .. ARGV[3] .. '#'
if stored and string.sub(stored, 1, #held_by) == held_by then
  -- The hold's fence ms: the key outlives the lease by that much.
  local fence = tonumber(string.match(stored, '^[%d,]+ %+?(%d+) ', #held_by + 1))
  local pttl = redis.call('PTTL', LOCK)
  if not fence or (pttl ~= -1 and pttl <= fence) then
    return 0
  end
  if ARGV[5] == '0' then
    redis.call('SET', LOCK, stored, 'KEEPTTL')
  else
    redis.call('PEXPIRE', LOCK, ARGV[5] + fence)
  end
  if string.find(stored, ' ^', 1, true) then
    local revoked = tonumber(string.match(stored, ' %^(%d+)$'))
    if revoked and revoked >= tonumber(ARGV[4]) then
      return 2
    end
  end
  return 1
end

-- Not this hold's: lost, unless the key is of another format (read_lock
-- stops it); the PTTL is not needed for the mark.
local _, _, _, mark = read_lock(stored, -1)
local seen, holder = split_mark(mark)
return (string.sub(seen, 1, 1) == 'F' and holder == ARGV[3]) and 3 or (stored and 0 or 4)
