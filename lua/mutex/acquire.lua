-- mutex/acquire.lua: take the lock, re-enter it, or join (and stay in) its queue.
--
-- KEYS: lock, queue, deadlines (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id "<client id>:<thread number or u<call>>[@<identity>]"
-- ARGV[4] lease ms: the lock's TTL when this owner gets it (1 .. MAX_MS)
-- ARGV[5] fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it
-- ARGV[6] waiter timeout ms: liveness deadline of a queued entry (1 .. MAX_MS)
-- ARGV[7] mode: "try"   never queue (try_lock);
--               "first" first attempt of a waiting call: re-enter or queue;
--               "poll"  later attempt of a queued call
-- ARGV[8] wait id: this call's id inside its client, echoed in wake
--         messages and counted in the hold's calls, so that a call
--         delivered twice (a retry after a lost reply) takes, re-enters or
--         queues once, and can be given back by its id (abandon.lua)
-- ARGV[9] token of the hold this owner's client has a live guard of on
--         this lock, or "0": only that hold can be re-entered. A hold of
--         this owner that no live guard stands for (a call whose reply was
--         lost) is given back first, never counted as a re-entry.
-- Returns token (an integer) when the caller took the free lock with its
--         lease, {1, token, lock pttl ms} when it holds it otherwise (a
--         handoff, a re-entry, a repeat), or
--         {0, lock pttl ms, queue position, last token issued} when it does
--         not (position -1 for "try": not queued). A handoff message for
--         this call carrying a token up to that last one is stale: that
--         grant is over, as this call holds nothing now.
-- An election's script also says on the election's channel who it gave
-- the lock to, whenever it takes or hands it over (lib.lua: ANNOUNCE).
-- Cost: O(log N) in the number of waiters N (amortised over dropped dead
-- waiters); a free lock nobody waits for: GET, EXISTS and one SET, and a
-- TIME when its key is gone (an election's: and one PUBLISH).

local owner, lease, fixed = ARGV[3], ms_arg(ARGV[4], 'lease'), ARGV[5]
local waiter_timeout, mode, wait_id = ms_arg(ARGV[6], 'waiter timeout'), ARGV[7], ARGV[8]
if fixed ~= '0' and fixed ~= '1' then
  fail('ERR fairlock: fixed must be 0 or 1')
end
local stored = redis.call('GET', LOCK)
-- The common case first: a free lock (no key, or "v<format> <token> - - -[
-- <mark>]")
-- nobody waits for, read with one match of the value and no PTTL.
local free_token, free_mark = '0', ''
if stored then
  free_token, free_mark = string.match(stored, '^v@FORMAT@ (%d+) %- %- %- ?(.*)$')
end
if free_token and redis.call('EXISTS', QUEUE) == 0 then
  -- A key that keeps the last token gives last + 1 without a TIME: tokens
  -- then lag the clock, so the clock alone still exceeds them once the
  -- key is gone (take).
  return take(owner, lease, stored and 0 or server_time(), wait_id, free_token, free_mark)
end

local token, holder, calls, mark, fence, left = read_lock(stored)

local entry = owner .. ' ' .. wait_id .. ' ' .. fmt(lease) .. ' ' .. fixed
-- Next most common: someone else holds it; queue (or poll) behind them.
if holder and holder ~= owner then
  if mode == 'try' then
    return { 0, left, -1, tonumber(token) }
  end
  local _, now_ms = server_time()
  local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout)
  if queue_life then
    keep_anchor(queue_life)
  end
  return { 0, left, position, tonumber(token) }
end

if holder == owner then
  if counts_call(calls, wait_id) then
    -- This very call holds it: handed over while it waited, or delivered twice.
    if mode == 'poll' and fixed == '0' then
      left = extend_lease(lease, fence, left)
    end
    return { 1, tonumber(token), left }
  end
  if token == ARGV[9] then
    write_hold(token, owner, calls .. ',' .. wait_id, mark, fence, nil)
    return { 1, tonumber(token), extend_lease(lease, fence, left) }
  end
  -- An orphaned hold of this owner: free it (for the queue first) as its
  -- lost call's give-back would, then ask like any newcomer.
  local t_us, t_ms = server_time()
  free_lock(t_us, t_ms, token, mark)
  token, holder, calls, mark, fence, left = read_lock(redis.call('GET', LOCK))
end

local now_us, now_ms = server_time()
if not holder then
  local head = live_head(now_ms)
  if head == nil or head == entry then
    if head then
      forget(entry)
    end
    local taken = take(owner, lease, now_us, wait_id, token, mark)
    if head then
      tell_head(now_ms, lease)
    end
    return taken
  end
  -- Free but a live waiter was first: it gets the lock, not the caller.
  local _, _, handed, ttl = hand_over(now_us, now_ms, token, mark)
  if handed then
    token, left = fmt(handed), ttl
  end
end

if mode == 'try' then
  return { 0, left, -1, tonumber(token) }
end
local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout)
if queue_life then
  keep_anchor(queue_life)
end
return { 0, left, position, tonumber(token) }
