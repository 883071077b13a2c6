-- lib.lua: helpers shared by every fairlock lock script. build.rs puts in
-- front of each operation's script only the definitions below it uses
-- (transitively), so each one stays a single, atomic EVALSHA that builds no
-- unused closure per call, while the shared steps are written once. Keep
-- every top-level definition at column 0 (`local NAME = ...` or `local
-- function NAME(...)` to an `end` at column 0): build.rs splits on that.
--
-- Keys of one lock (all share one cluster hash slot through a {tag}):
--   KEYS[1] lock       hash    owner, count, token, and "call:<id>" = 1 for each
--                              acquire call whose hold is still counted; its
--                              PEXPIRE is the holder's lease
--   KEYS[2] queue      zset    waiter (owner id) -> arrival sequence number
--   KEYS[3] deadlines  zset    waiter -> liveness deadline, server milliseconds
--   KEYS[4] grants     hash    waiter -> "<lease ms> <fixed 0|1> <wait id>"
--   KEYS[5] fence      string  "<last fencing token issued>[ <mark>[ <detail>]]":
--                              mark names the last call that freed the lock, so
--                              that the same call delivered again is known
-- ARGV[1] is always the wake channel prefix. An owner id is
-- "<client id>:<thread number>"; its client's channel is ARGV[1] .. client id.
-- A call id is unique per client; a hold counts one "call:<id>" field per
-- acquisition (the first and each re-entry), so any call can be given back
-- exactly once, by its id, whether or not its caller saw the reply.
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
-- Longest lease or waiter timeout accepted, in ms (365 days, as the client's
-- MAX_LEASE): every expiry a script sets is checked before the first write,
-- so no failing PEXPIRE can leave a key without a TTL behind a write.
local MAX_MS = 31536000000

-- Integers as exact decimal strings (tostring would print 1.7e+15).
local function fmt(n)
  return string.format('%.0f', n)
end

-- Stops the script with the error reply `message` ("<CODE> <text>"). Redis
-- 7.0 and later (which define redis.REDIS_VERSION) and Valkey reply with it
-- as is. Redis 6.2's error handler fails on a table raised as an error (the
-- reply then says only "attempt to concatenate"), so there it is raised as
-- a string and Redis replies
-- "ERR Error running script (call to f_<sha>): @user_script:<line>: <message>".
local function fail(message)
  if redis.REDIS_VERSION then
    error({ err = message })
  end
  error(message, 0)
end

-- `value` (an ARGV string) as a whole number of ms in [1, MAX_MS]; anything
-- else stops the script before it writes.
local function ms_arg(value, what)
  local n = tonumber(value)
  if not n or n ~= math.floor(n) or n < 1 or n > MAX_MS then
    fail('ERR fairlock: ' .. what .. ' must be a whole number of ms from 1 to '
      .. fmt(MAX_MS) .. ', got ' .. tostring(value))
  end
  return n
end

-- The fence key's parts: last token (0 if none), and the rest ("<mark>[
-- <detail>]", or nil when there is none).
local function read_fence()
  local stored = redis.call('GET', FENCE)
  if not stored then
    return 0, nil
  end
  local space = string.find(stored, ' ', 1, true)
  local token = tonumber(space and string.sub(stored, 1, space - 1) or stored)
  if not token then
    fail('WRONGTYPE the fence key holds a value fairlock did not write')
  end
  return token, space and string.sub(stored, space + 1)
end

-- The mark and detail of a fence's rest, as read_fence returns it.
local function split_mark(rest)
  if not rest then
    return nil, nil
  end
  local space = string.find(rest, ' ', 1, true)
  if not space then
    return rest, ''
  end
  return string.sub(rest, 1, space - 1), string.sub(rest, space + 1)
end

-- Writes the fence: `token`, and the mark of the call that freed the lock.
local function write_fence(token, mark)
  local value = fmt(token)
  if mark then
    value = value .. ' ' .. mark
  end
  redis.call('SET', FENCE, value, 'PX', FENCE_TTL_MS)
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
-- `mark` names the call that freed the lock for this take, if one did;
-- otherwise the last such mark is kept, so that a repeat of that call is
-- still known after later takes of a free lock.
local function next_token(now_us, mark)
  local last, rest = read_fence()
  local token = math.max(last + 1, now_us)
  write_fence(token, mark or rest)
  return token
end

-- A grant string's parts: lease ms (number), fixed ('0' or '1'), wait id.
local function parse_grant(grant)
  local lease, fixed, wait_id = string.match(grant, '^(%d+) ([01]) (%d+)$')
  return tonumber(lease), fixed, wait_id
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
    local _, _, wait_id = parse_grant(grant)
    if wait_id then
      wake(head, 'H ' .. wait_id .. ' ' .. pttl)
    end
  end
end

-- Takes the free lock for `owner` with a lease of `ttl` ms; returns the token.
-- `call` is the wait id of the acquire call it answers (see acquire.lua);
-- `mark` names the call that freed the lock for it, if any (see the fence).
-- The lock hash is gone (free_lock deletes it), so no old field survives.
local function take(owner, ttl, now_us, call, mark)
  local token = next_token(now_us, mark)
  redis.call('HSET', LOCK, 'owner', owner, 'count', 1, 'token', fmt(token), 'call:' .. call, 1)
  redis.call('PEXPIRE', LOCK, ttl)
  return token
end

-- Hands the lock to the first live waiter and wakes it with the token; the
-- next waiter learns it now heads the queue. Returns the new owner, or nil
-- (and changes nothing but dropping dead entries) when nobody live waits.
-- A watchdog-renewed grant lasts no longer than the waiter's own liveness
-- deadline, so a waiter that died while queued holds the lock no longer
-- than it would have held its place. `mark` (optional) names the call that
-- freed the lock. Without a time given, TIME is read only if someone waits.
local function hand_over(now_us, now_ms, mark)
  while true do
    local head = redis.call('ZPOPMIN', QUEUE)[1]
    if not head then
      return nil
    end
    if not now_us then
      now_us, now_ms = server_time()
    end
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, head))
    local grant = redis.call('HGET', GRANTS, head)
    redis.call('ZREM', DEADLINES, head)
    redis.call('HDEL', GRANTS, head)
    if deadline and deadline >= now_ms and grant then
      local ttl, fixed, wait_id = parse_grant(grant)
      if fixed == '0' then
        ttl = math.max(1, math.min(ttl, deadline - now_ms))
      end
      local token = take(head, ttl, now_us, wait_id, mark)
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

-- Frees the held lock (token `token`) for the next live waiter (the time
-- may be nil: see hand_over); either way the fence records `mark`, the call
-- that freed it, if given. The lock hash is deleted first: a call field of
-- the old holder must not survive into the new hold (call ids are unique
-- per client only).
local function free_lock(now_us, now_ms, token, mark)
  redis.call('DEL', LOCK)
  if not hand_over(now_us, now_ms, mark) and mark then
    write_fence(token, mark)
  end
end

-- Gives back the hold that acquire call `call` of `owner` counted, once.
-- `count` and `counted` are the hold's count and the call's field as read
-- (HMGET ... 'count', 'call:' .. call) by the caller, which checked that
-- `owner` holds the lock with `token`. Returns (true, holds left) when it
-- counted one, (false, holds left) when that call holds nothing (given
-- back already, or never counted).
local function give_back(owner, token, count, counted, call)
  local left = (tonumber(count) or 1) - 1
  if not counted then
    return false, left + 1
  end
  if left > 0 then
    redis.call('HDEL', LOCK, 'call:' .. call)
    redis.call('HSET', LOCK, 'count', left)
    return true, left
  end
  free_lock(nil, nil, token, owner .. '#' .. call)
  return true, 0
end

-- Removes `owner` from the queue; the lock goes to the next live waiter if
-- it is free (`held` false), and a new head learns of it.
local function leave_queue(owner, held, now_us, now_ms)
  local was_head = redis.call('ZRANK', QUEUE, owner) == 0
  forget(owner)
  prune(now_ms)
  if not held then
    hand_over(now_us, now_ms)
  elseif was_head then
    tell_head(now_ms, redis.call('PTTL', LOCK))
  end
end

-- Keeps a handed-over lease alive until the owner's watchdog renews it.
local function extend_lease(lease)
  if redis.call('PTTL', LOCK) < lease then
    redis.call('PEXPIRE', LOCK, lease)
  end
end

------------------------------------------------------------------------------
