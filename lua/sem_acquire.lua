-- sem_acquire.lua: take a permit of a semaphore, or join (and stay in) its
-- queue. Strict FIFO: a permit goes to the live waiters queued first, so a
-- newcomer (a "try" too) never passes one, even while a permit is free.
--
-- KEYS: holders, queue, deadlines, tokens, meta (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id "<client id>:<thread number>"
-- ARGV[4] lease ms: the permit's lease when this call gets it (1 .. MAX_MS)
-- ARGV[5] fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it
-- ARGV[6] waiter timeout ms: liveness deadline of a queued entry (1 .. MAX_MS)
-- ARGV[7] mode: "try"   never queue (try_acquire);
--               "first" first attempt of a waiting call: take or queue;
--               "poll"  later attempt of a queued call
-- ARGV[8] wait id: this call's id inside its client, echoed in wake
--         messages; the hold is "<owner> <wait id>", so a call delivered
--         twice (a retry after a lost reply) or handed a permit while
--         queued answers with its hold instead of taking a second one
-- ARGV[9] permits: N, the most holders at once (1 .. 4294967295); a call
--         whose N is not the one the semaphore has (its meta key, kept a
--         fence life past the last holder and waiter) gets the error reply
--         "ERR fairlock: permits mismatch: ..." naming both, nothing written
-- Returns token (an integer) when the caller took a free permit with its
--         lease, {1, token, lease ms left} when this call holds one
--         otherwise (handed over while queued, or a repeat), or
--         {0, ms until the first live lease runs out (0: none live),
--          queue position, last token issued} when it does not (position
--         -1 for "try": not queued). A handoff message for this call
--         carrying a token up to that last one is stale.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead ones
-- and expired holds); a free permit nobody waits for: GET, TIME,
-- ZRANGEBYSCORE, ZCOUNT, EXISTS, ZSCORE, ZADD, HSET, ZRANGE, two PEXPIREs,
-- PTTL and SET.

local owner, lease, fixed = ARGV[3], ms_arg(ARGV[4], 'lease'), ARGV[5]
local waiter_timeout, mode, wait_id = ms_arg(ARGV[6], 'waiter timeout'), ARGV[7], ARGV[8]
local permits = permits_arg(ARGV[9])
if fixed ~= '0' and fixed ~= '1' then
  fail('ERR fairlock: fixed must be 0 or 1')
end
if mode ~= 'try' and mode ~= 'first' and mode ~= 'poll' then
  fail('ERR fairlock: mode must be try, first or poll, got ' .. tostring(mode))
end
local member = holder_arg(owner, wait_id)
local stored, last, mark = read_meta()
check_permits(permits, stored)
local now_us, now_ms = server_time()
drop_expired(now_ms)
local free = free_permits(now_ms, permits)
-- The common case first: a permit free, nobody waiting, this call new.
if free > 0 and redis.call('EXISTS', QUEUE) == 0 and not redis.call('ZSCORE', HOLDERS, member) then
  last = take_permit(member, lease, now_us, now_ms, last)
  keep_semaphore(now_ms, permits, last, mark)
  return tonumber(last)
end

-- @helpers

local held, left = hold_of(member, now_ms)
if held then
  -- This very call holds a permit: handed over while it waited, or
  -- delivered twice. A poll keeps a short handed-over lease alive until
  -- its watchdog renews it.
  if mode == 'poll' then
    local extended
    left, extended = extend_permit(member, lease, fixed, left, now_ms)
    if extended then
      keep_semaphore(now_ms, permits, last, mark)
    end
  end
  return { 1, tonumber(held), left }
end

local entry = owner .. ' ' .. wait_id .. ' ' .. fmt(lease) .. ' ' .. fixed
local head = live_head(now_ms)
local handed = {}
if free > 0 and head and head ~= entry then
  -- Free permits go to the live waiters ahead of this call first.
  last, handed = hand_permits(now_us, now_ms, free, last, entry)
  free = free - #handed
  head = live_head(now_ms)
end
if free > 0 and (head == nil or head == entry) then
  if head then
    forget(entry)
  end
  last = take_permit(member, lease, now_us, now_ms, last)
  if head or #handed > 0 then
    tell_head(now_ms, first_lease_left(now_ms))
  end
  keep_semaphore(now_ms, permits, last, mark)
  return tonumber(last)
end
if #handed > 0 then
  tell_head(now_ms, first_lease_left(now_ms))
end

if mode == 'try' then
  if #handed > 0 then
    keep_semaphore(now_ms, permits, last, mark)
  end
  return { 0, first_lease_left(now_ms), -1, tonumber(last) }
end
local position = join_queue(entry, mode, now_ms, waiter_timeout)
keep_semaphore(now_ms, permits, last, mark)
return { 0, first_lease_left(now_ms), position, tonumber(last) }
