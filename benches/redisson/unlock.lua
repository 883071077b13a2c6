-- A replay of Redisson's RedissonFairLock unlock script (release 4.7),
-- written for this bench from the public description of what it does
-- (/work/shared/reference/anchors.md, sections 1 and 10), not from its
-- source (see acquire.lua).
--
-- KEYS[1] the lock, KEYS[2] the queue, KEYS[3] the deadlines (acquire.lua)
-- KEYS[4] the channel prefix "redisson_lock__channel:{<name>}": a waiter's
--         channel is the prefix .. ':' .. its owner id
-- ARGV[1] the unlock message (Redisson's is "0")
-- ARGV[2] lease ms, renewed when a re-entry is left
-- ARGV[3] owner id
-- ARGV[4] the client's clock, ms
-- Returns 1 when the lock is free now (or was already), 0 when the caller
--         still holds it (a re-entry left), nil when the caller does not
--         hold it. Freeing it publishes to the queue's head only.

local lock, queue, deadlines, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, lease, owner, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

-- The same sweep of stale heads as acquire.lua's.
while true do
  local head = redis.call('LINDEX', queue, 0)
  if not head then
    break
  end
  local deadline = tonumber(redis.call('ZSCORE', deadlines, head))
  if deadline > tonumber(now) then
    break
  end
  redis.call('ZREM', deadlines, head)
  redis.call('LPOP', queue)
end

-- Already free (its lease ran out): make sure the head knows. (Written
-- out twice, as the description has it, rather than as a closure that
-- each call would build.)
if redis.call('EXISTS', lock) == 0 then
  local head = redis.call('LINDEX', queue, 0)
  if head then
    redis.call('PUBLISH', channel .. ':' .. head, message)
  end
  return 1
end
if redis.call('HEXISTS', lock, owner) == 0 then
  return nil
end
if redis.call('HINCRBY', lock, owner, -1) > 0 then
  redis.call('PEXPIRE', lock, lease)
  return 0
end
redis.call('DEL', lock)
local head = redis.call('LINDEX', queue, 0)
if head then
  redis.call('PUBLISH', channel .. ':' .. head, message)
end
return 1
