-- acquire.lua: take the lock, re-enter it, or join (and stay in) its queue.
--
-- KEYS: lock, queue, deadlines, grants, fence (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] owner id "<client id>:<thread number>"
-- ARGV[3] lease ms: the lock's TTL when this owner gets it (1 .. MAX_MS)
-- ARGV[4] fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it
-- ARGV[5] waiter timeout ms: liveness deadline of a queued entry (1 .. MAX_MS)
-- ARGV[6] mode: "try"   never queue (try_lock);
--               "first" first attempt of a waiting call: re-enter or queue;
--               "poll"  later attempt of a queued call
-- ARGV[7] wait id: this call's id inside its client, echoed in wake
--         messages and counted in the hold as field "call:<id>", so that a
--         call delivered twice (a retry after a lost reply) takes or
--         re-enters once, and can be given back by its id (abandon.lua)
-- ARGV[8] token of the hold this owner's client has a live guard of on
--         this lock, or "0": only that hold can be re-entered. A hold of
--         this owner that no live guard stands for (a call whose reply was
--         lost) is given back first, never counted as a re-entry.
-- Returns {1, token, lock pttl ms} when the caller holds the lock, or
--         {0, lock pttl ms, queue position, last token issued} when it does
--         not (position -1 for "try": not queued). A handoff message for
--         this call carrying a token up to that last one is stale: that
--         grant is over, as this call holds nothing now.
-- Cost: O(log N) in the number of waiters N (amortised over dropped dead waiters).

local owner, lease, fixed = ARGV[2], ms_arg(ARGV[3], 'lease'), ARGV[4]
local waiter_timeout, mode, wait_id = ms_arg(ARGV[5], 'waiter timeout'), ARGV[6], ARGV[7]
local live_token = ARGV[8]
if fixed ~= '0' and fixed ~= '1' then
  fail('ERR fairlock: fixed must be 0 or 1')
end
local this_call = 'call:' .. wait_id

local lock = redis.call('HMGET', LOCK, 'owner', 'token', this_call)
local holder = lock[1]
if holder == owner then
  if lock[3] then
    -- This very call holds it: handed over while it waited, or delivered twice.
    if mode == 'poll' and fixed == '0' then
      extend_lease(lease)
    end
    return { 1, tonumber(lock[2]), redis.call('PTTL', LOCK) }
  end
  if lock[2] == live_token then
    redis.call('HSET', LOCK, this_call, 1)
    redis.call('HINCRBY', LOCK, 'count', 1)
    extend_lease(lease)
    return { 1, tonumber(lock[2]), redis.call('PTTL', LOCK) }
  end
  -- An orphaned hold of this owner: free it (for the queue first) as its
  -- lost call's give-back would, then ask like any newcomer.
  local t_us, t_ms = server_time()
  free_lock(t_us, t_ms, lock[2], nil)
  holder = redis.call('HGET', LOCK, 'owner')
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
  return { 0, redis.call('PTTL', LOCK), -1, (read_fence()) }
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
redis.call('HSET', GRANTS, owner, fmt(lease) .. ' ' .. fixed .. ' ' .. wait_id)
keep_queue_for(waiter_timeout)
return { 0, redis.call('PTTL', LOCK), position, (read_fence()) }
