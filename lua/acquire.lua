-- acquire.lua: take the lock, re-enter it, or join (and stay in) its queue.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id "<client id>:<thread number>"
-- ARGV[3] lease ms: the lock's TTL when this owner gets it
-- ARGV[4] fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it
-- ARGV[5] waiter timeout ms: liveness deadline of a queued entry
-- ARGV[6] mode: "try"   never queue (try_lock);
--               "first" first attempt of a waiting call: re-enter or queue;
--               "poll"  later attempt of a queued call: owning the lock
--                       means it was handed over, not re-entered
-- ARGV[7] wait id: this call's id inside its client, echoed in wake
--         messages and kept as the lock's 'call' field, so that a call
--         delivered twice (a retry after a lost reply) takes or re-enters once
-- Returns {1, token, lock pttl ms} when the caller holds the lock, or
--         {0, lock pttl ms, queue position} when it does not
--         (position -1 for "try": not queued).
-- Cost: O(log N) in the number of waiters N (amortised over dropped dead waiters).

local owner, lease, fixed = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local waiter_timeout, mode, wait_id = tonumber(ARGV[5]), ARGV[6], ARGV[7]

local lock = redis.call('HMGET', LOCK, 'owner', 'call')
local holder = lock[1]
if holder == owner then
  if mode == 'poll' then
    if fixed == '0' then
      extend_lease(lease)
    end
  elseif lock[2] ~= wait_id then
    redis.call('HINCRBY', LOCK, 'count', 1)
    redis.call('HSET', LOCK, 'call', wait_id)
    extend_lease(lease)
  end
  return { 1, tonumber(redis.call('HGET', LOCK, 'token')), redis.call('PTTL', LOCK) }
end

local now_us, now_ms = server_time()
if not holder then
  local head = live_head(now_ms)
  if head == nil or head == owner then
    if head == owner then
      forget(owner)
    end
    local token = take(owner, lease, now_us, wait_id)
    if head == owner then
      tell_head(now_ms, lease)
    end
    return { 1, token, lease }
  end
  -- Free but a live waiter was first: it gets the lock, not the caller.
  hand_over(now_us, now_ms)
end

if mode == 'try' then
  return { 0, redis.call('PTTL', LOCK), -1 }
end

local position = nil
if mode == 'poll' then
  position = redis.call('ZRANK', QUEUE, owner)
end
if not position then
  local last = redis.call('ZRANGE', QUEUE, -1, -1, 'WITHSCORES')[2]
  if redis.call('ZADD', QUEUE, 'NX', (tonumber(last) or 0) + 1, owner) == 1 then
    position = redis.call('ZCARD', QUEUE) - 1
    -- Each arrival clears up to PRUNE_BATCH dead entries: they go at
    -- least as fast as they come.
    prune(now_ms)
  else
    position = redis.call('ZRANK', QUEUE, owner)
  end
end
redis.call('ZADD', DEADLINES, now_ms + waiter_timeout, owner)
redis.call('HSET', GRANTS, owner, ARGV[3] .. ' ' .. fixed .. ' ' .. wait_id)
keep_queue_for(waiter_timeout)
return { 0, redis.call('PTTL', LOCK), position }
