-- mutex/acquire.lua: take the lock, re-enter it, or join (and stay in) its queue.
--
-- KEYS: lock, queue (see lib/mutex.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id "<client id>:<thread number or u<call>>[@<identity>]"
-- ARGV[4] call id: this call's id inside its client, echoed in wake
--         messages and counted in the hold's calls, so that a call
--         delivered twice (a retry after a lost reply) takes, re-enters or
--         queues once, and can be given back by its id (abandon.lua)
-- ARGV[5] lease ms: the lock's TTL when this owner gets it (1 .. 365 days
--         in ms: lib/common.lua's whole_arg)
-- ARGV[6] what only a lock that is not free, or that someone waits for,
--         needs, as one string (so that the common take carries fewer
--         arguments): "<fixed> <waiter timeout ms> <mode> <live token>":
--         fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it;
--         waiter timeout: liveness deadline of a queued entry (1 .. 365
--         days in ms);
--         mode: "try"   never queue (try_lock);
--               "first" first attempt of a waiting call: re-enter or queue;
--               "poll"  later attempt of a queued call;
--         live token: the token of the hold this owner's client has a live
--         guard of on this lock, or "0": only that hold can be re-entered.
--         A hold of this owner that no live guard stands for (a call whose
--         reply was lost) is given back first, never counted as a re-entry.
-- Returns token (an integer) when the caller took the free lock with its
--         lease, {1, token, lock pttl ms} when it holds it otherwise (a
--         handoff, a re-entry, a repeat), or
--         {0, lock pttl ms, queue position, last token issued} when it does
--         not (position -1 for "try": not queued); behind another's hold,
--         those four as one string (lib/common.lua's waiting_reply). A
--         handoff message for this call carrying a token up to that last
--         one is stale: that grant is over, as this call holds nothing now.
-- An election's script also says on the election's channel who it gave
-- the lock to, whenever it takes or hands it over (lib/mutex.lua: ANNOUNCE).
-- Cost: O(log N) in the number of waiters N (amortised over dropped dead
-- waiters); a free lock nobody waits for: GET and one SET (an election's:
-- and its announcement, PUBLISH, LPUSH, LTRIM and PEXPIRE, lib/mutex.lua's
-- ANNOUNCE), and a TIME and an EXISTS when its key is gone; an arrival
-- behind another's hold: GET, PTTL, TIME, then into an empty queue ZADD,
-- PEXPIRE and a SET of the lock key when it lacks its '+', or ZCARD, ZADD,
-- PEXPIRE when it has it (a hold handed over keeps it), and into a queue
-- of others ZCARD, ZRANGE, ZADD and its PTTL (PEXPIRE when it must grow;
-- ZRANGEBYSCORE and ZREM on every fourth arrival).

local owner, call = ARGV[3], ARGV[4]
local lease, px = lease_arg(ARGV[5])
local stored = redis.call('GET', LOCK)
-- The common case first: a free lock nobody waits for ("v<format> <token>
-- - <mark>"), read with one match of the value and no PTTL. A key that
-- keeps the last token gives last + 1 without a TIME: tokens then lag the
-- clock, so the clock alone still exceeds them once the key is gone
-- (take).
if stored then
  local last, mark = string.match(stored, '^v@FORMAT@ (%d+) %- (.+)$')
  if last then
    local token = last + 1
    local token_s = fmt(token)
    redis.call('SET', LOCK, 'v@FORMAT@ ' .. token_s .. ' ' .. owner .. '#' .. call .. ' '
      .. ARGV[2] .. ' ' .. mark, 'PX', px)
    if ANNOUNCE then
      ANNOUNCE(token_s, owner, last)
    end
    return token
  end
end
-- No key: the lock is unused (its queue never outlives it, but for keys
-- deleted by hand, which the EXISTS covers). (A statement of its own: the
-- fast path above sets no value that only this one needs, build.rs.)
if not stored and redis.call('EXISTS', QUEUE) == 0 then
  return (take(owner, lease, server_time(), call, '0', '', false, px))
end

local fixed, waiter_timeout, mode, live_token = settings_arg(ARGV[6])

local token, holder, calls, mark, fence, left, waiters, fence_s = read_lock(stored)

local entry = owner .. ' ' .. call .. ' ' .. lease_text(lease) .. ' ' .. fixed
-- Next most common: someone else holds it; queue (or poll) behind them.
if holder and holder ~= owner then
  if mode == 'try' then
    return { 0, left, -1, token }
  end
  local _, now_ms = server_time()
  local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout, not waiters,
    left ~= -1 and left + fence or nil)
  -- The lock key says waiters may be queued ('+'), and outlives the
  -- queue: join_queue keeps the queue within the key's TTL where that
  -- covers the waiter timeout (keep_queue_for); when its new TTL is
  -- longer, the fence grows by the difference, so the lease stays as it
  -- is (as keep_anchor does, from the parts read here).
  if queue_life and left ~= -1 and left + fence < queue_life then
    write_hold(token, holder, calls, mark, queue_life - left, left, true,
      queue_life_text(waiter_timeout))
  elseif not waiters then
    write_hold(token, holder, calls, mark, fence, nil, true, nil, fence_s)
  end
  return waiting_reply(left, position, token)
end

if holder == owner then
  if counts_call(calls, call) then
    -- This very call holds it: handed over while it waited, or delivered twice.
    if mode == 'poll' then
      left = extend_lease(lease, fence, left, fixed)
    end
    return { 1, token, left }
  end
  if token == live_token then
    -- A re-entry joins the hold, its lease as it is: one past its maximum
    -- hold, or fixed, runs out when it would have.
    write_hold(token, owner, calls .. ',' .. call, mark, fence, nil, waiters)
    return { 1, token, left }
  end
  -- An orphaned hold of this owner: free it (for the queue first) as its
  -- lost call's give-back would (TIME read only if someone waits), then
  -- ask like any newcomer.
  free_lock(nil, nil, token, mark)
  stored = redis.call('GET', LOCK)
  token, holder, calls, mark, fence, left, waiters = read_lock(stored)
end

local now_us, now_ms = server_time()
if not holder then
  local head = live_head(now_ms, split_entry)
  if head == nil or head == entry then
    local next_head = false
    if head then
      forget(entry)
      next_head = live_head(now_ms, split_entry) or false
    end
    local taken = take(owner, lease, now_us, call, token, mark, next_head ~= false, px)
    if head then
      tell_head(now_ms, lease, split_entry, next_head)
    end
    return taken
  end
  -- Free but a live waiter was first: it gets the lock, not the caller.
  local _, _, handed, ttl = hand_over(now_us, now_ms, token, mark)
  if handed then
    -- The new hold has its '+' (hand_over) and lives its lease and at
    -- least a fence life (take): the queue may live that long.
    token, left, fence = fmt(handed), ttl, FENCE_LIFE
    stored, waiters = nil, true
  end
end

if mode == 'try' then
  return { 0, left, -1, token }
end
-- (As behind another's hold above: the lock key's TTL caps the queue's.)
local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout, false,
  left and left ~= -1 and left + fence or nil)
if queue_life or not waiters then
  keep_anchor(queue_life, stored)
end
return { 0, left, position, token }
