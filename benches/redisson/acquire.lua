-- A replay of Redisson's RedissonFairLock acquire script (release 4.7),
-- written for this bench from the public description of what it does
-- (/work/shared/reference/anchors.md, sections 1 and 10), not from its
-- source: the same data, the same commands in the same order, so that its
-- server cost can be counted beside fairlock's on the same server.
--
-- KEYS[1] the lock: a hash owner id -> re-entry count, with a PEXPIRE lease
-- KEYS[2] the queue: a list of waiting owner ids, in arrival order
-- KEYS[3] the deadlines: a zset owner id -> client ms after which that
--         waiter is treated as gone
-- ARGV[1] lease ms (30000: the watchdog's default)
-- ARGV[2] owner id "<client uuid>:<thread id>"
-- ARGV[3] waiting slot ms (fairLockWaitTimeout, 300000)
-- ARGV[4] the client's clock, ms (Redisson sends currentTimeMillis)
-- Returns nil when the caller holds the lock (taken or re-entered), else
--         how long to wait in ms (and the caller is queued).
-- Numbers are read from ARGV only where a step needs them (tonumber costs
-- ~1.3k instructions), as a script written for the fast path would.

local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, slot, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

-- 1. Drop heads whose deadline has passed.
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

-- 2. Free, and nobody waits or the caller is first: take it, and move every
--    other waiter's deadline one slot earlier.
if redis.call('EXISTS', lock) == 0
  and (redis.call('EXISTS', queue) == 0 or redis.call('LINDEX', queue, 0) == owner) then
  redis.call('LPOP', queue)
  redis.call('ZREM', deadlines, owner)
  local others = redis.call('ZRANGE', deadlines, 0, -1)
  for i = 1, #others do
    redis.call('ZINCRBY', deadlines, -tonumber(slot), others[i])
  end
  redis.call('HSET', lock, owner, 1)
  redis.call('PEXPIRE', lock, lease)
  return nil
end

-- 3. Re-entry.
if redis.call('HEXISTS', lock, owner) == 1 then
  redis.call('HINCRBY', lock, owner, 1)
  redis.call('PEXPIRE', lock, lease)
  return nil
end

-- 4. Already queued: wait for the lock's lease.
if redis.call('ZSCORE', deadlines, owner) then
  return redis.call('PTTL', lock)
end

-- 5. Queue at the tail, gone after the predecessor's deadline (or the
--    lock's lease) plus one slot.
local tail = redis.call('LINDEX', queue, -1)
local wait
if tail then
  wait = tonumber(redis.call('ZSCORE', deadlines, tail)) - tonumber(now)
else
  wait = redis.call('PTTL', lock)
end
redis.call('ZADD', deadlines, wait + tonumber(slot) + tonumber(now), owner)
redis.call('RPUSH', queue, owner)
return wait
