-- lib.lua: helpers shared by every fairlock lock script. src/scripts.rs
-- prepends this file to each operation's script, so each one stays a single,
-- atomic EVALSHA while the shared steps are written once.
--
-- Keys of one lock (all share one cluster hash slot through a {tag}):
--   KEYS[1] lock       hash    owner, count, token; its PEXPIRE is the holder's lease
--   KEYS[2] queue      zset    waiter (owner id) -> arrival sequence number
--   KEYS[3] deadlines  zset    waiter -> liveness deadline, server milliseconds
--   KEYS[4] grants     hash    waiter -> "<lease ms> <fixed 0|1> <wait id>"
--   KEYS[5] fence      string  last fencing token issued for this name
-- ARGV[1] is always the wake channel prefix. An owner id is
-- "<client id>:<thread number>"; its client's channel is ARGV[1] .. client id.
-- Messages: "G <wait id> <token> <ttl ms>" = the lock was handed to you;
--           "H <wait id> <pttl ms>" = you head the queue, lock expires in pttl.
-- Time is read only from the server's TIME; clients never send timestamps.

local LOCK, QUEUE, DEADLINES, GRANTS, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local WAKE_PREFIX = ARGV[1]
-- Tokens are max(previous + 1, server clock in µs), so the fence key only has to
-- outlive a backwards step of the server clock; after it expires (or Redis
-- loses its data) the clock alone keeps tokens increasing.
local FENCE_TTL_MS = 3600000
-- Dead waiters dropped per call from anywhere in the queue (O(log N) each).
local PRUNE_BATCH = 16

-- Integers as exact decimal strings (tostring would print 1.7e+15).
local function fmt(n)
  return string.format('%.0f', n)
end

-- Server time as (microseconds, milliseconds).
local function server_time()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- Someone else's data under one of our keys is never overwritten: every
-- script reads a key before it writes it, so a key of another type stops
-- the script with WRONGTYPE first, and a foreign string here stops it below.
local function next_token(now_us)
  local stored = redis.call('GET', FENCE)
  local last = tonumber(stored or '0')
  if not last then
    error({ err = 'WRONGTYPE the fence key holds a value fairlock did not write' })
  end
  local token = math.max(last + 1, now_us)
  redis.call('SET', FENCE, fmt(token), 'PX', FENCE_TTL_MS)
  return token
end

-- Removes a waiter from every queue structure.
local function forget(waiter)
  redis.call('ZREM', QUEUE, waiter)
  redis.call('ZREM', DEADLINES, waiter)
  redis.call('HDEL', GRANTS, waiter)
end

-- Drops up to PRUNE_BATCH waiters whose client stopped renewing them.
local function prune(now_ms)
  local dead = redis.call('ZRANGEBYSCORE', DEADLINES, '-inf', '(' .. fmt(now_ms), 'LIMIT', 0, PRUNE_BATCH)
  for _, waiter in ipairs(dead) do
    forget(waiter)
  end
end

-- The first queued waiter that is still alive: (owner id, deadline, grant
-- string), or nil. Dead or half-written entries ahead of it are dropped;
-- each entry is dropped once, so this is O(log N) amortised per call.
local function live_head(now_ms)
  while true do
    local head = redis.call('ZRANGE', QUEUE, 0, 0)[1]
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, head))
    local grant = redis.call('HGET', GRANTS, head)
    if deadline and deadline >= now_ms and grant then
      return head, deadline, grant
    end
    forget(head)
  end
end

local function wake(waiter, message)
  local client = string.match(waiter, '^([^:]+):')
  if client then
    redis.call('PUBLISH', WAKE_PREFIX .. client, message)
  end
end

-- Tells the (new) head of the queue that the current lease runs out in
-- `pttl` ms, so it can claim a lock whose holder dies without releasing it.
local function tell_head(now_ms, pttl)
  local head, _, grant = live_head(now_ms)
  if head then
    wake(head, 'H ' .. string.match(grant, ' (%d+)$') .. ' ' .. pttl)
  end
end

-- Takes the free lock for `owner` with a lease of `ttl` ms; returns the token.
-- `call` is the wait id of the acquire call it answers (see acquire.lua).
-- Overwrites every field, so a released hold needs no DEL before a handoff.
local function take(owner, ttl, now_us, call)
  local token = next_token(now_us)
  redis.call('HSET', LOCK, 'owner', owner, 'count', 1, 'token', fmt(token),
    'call', call, 'freed', '')
  redis.call('PEXPIRE', LOCK, ttl)
  return token
end

-- Hands the lock to the first live waiter and wakes it with the token; the
-- next waiter learns it now heads the queue. Returns the new owner, or nil
-- (and changes nothing but dropping dead entries) when nobody live waits.
-- A watchdog-renewed grant lasts no longer than the waiter's own liveness
-- deadline, so a waiter that died while queued holds the lock no longer
-- than it would have held its place.
local function hand_over(now_us, now_ms)
  while true do
    local head = redis.call('ZPOPMIN', QUEUE)[1]
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, head))
    local grant = redis.call('HGET', GRANTS, head)
    redis.call('ZREM', DEADLINES, head)
    redis.call('HDEL', GRANTS, head)
    if deadline and deadline >= now_ms and grant then
      local lease, fixed, wait_id = string.match(grant, '^(%d+) ([01]) (%d+)$')
      local ttl = tonumber(lease)
      if fixed == '0' then
        ttl = math.max(1, math.min(ttl, deadline - now_ms))
      end
      local token = take(head, ttl, now_us, wait_id)
      wake(head, 'G ' .. wait_id .. ' ' .. fmt(token) .. ' ' .. fmt(ttl))
      tell_head(now_ms, ttl)
      return head
    end
  end
end

-- Queue keys outlive every liveness deadline in them. When the queue's TTL
-- falls under `ms`, all three are pushed out to 2 * ms: one PTTL per call,
-- and three PEXPIREs about once per `ms`.
local function keep_queue_for(ms)
  local ttl = redis.call('PTTL', QUEUE)
  if ttl == -1 or (ttl >= 0 and ttl < ms) then
    for _, key in ipairs({ QUEUE, DEADLINES, GRANTS }) do
      redis.call('PEXPIRE', key, 2 * ms)
    end
  end
end

-- Keeps a handed-over lease alive until the owner's watchdog renews it.
local function extend_lease(lease)
  if redis.call('PTTL', LOCK) < lease then
    redis.call('PEXPIRE', LOCK, lease)
  end
end

------------------------------------------------------------------------------
