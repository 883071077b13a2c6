-- lib/queue.lua: the queue of a lock's waiting calls, kept the same way by
-- both engines, in the same places of their KEYS:
--   KEYS[2] queue      zset    entry -> arrival sequence number
--   KEYS[3] deadlines  zset    entry -> liveness deadline, server milliseconds
-- A mutex's queue entry is "<owner> <call id> <lease ms> <fixed 0|1>": the
-- waiting call and the grant it gets, so a handoff reads one member (a
-- counted lock's carries its units as a fifth field: counted.lua). Each
-- step here is O(log N) in the N entries, amortised over dropped dead ones.

-- A queue entry's parts as written (strings): owner id, call id, lease
-- ms, fixed ('0' or '1'); nil for a member fairlock did not write.
local function split_entry(entry)
  return string.match(entry, '^(%S+) (%d+) (%d+) ([01])$')
end

-- A queue entry's parts, its lease ms a number.
local function parse_entry(entry)
  local owner, call, lease, fixed = split_entry(entry)
  return owner, call, tonumber(lease), fixed
end

-- A queue entry given in ARGV, as parse_entry reads it, its lease checked;
-- anything else stops the script before it writes.
local function entry_arg(value)
  local owner, call, lease, fixed = parse_entry(value)
  if not owner then
    fail('ERR fairlock: a queue entry must be "<owner> <call id> <lease ms> <fixed 0|1>", got '
      .. value)
  end
  return owner, call, ms_arg(lease, 'lease'), fixed
end

-- Removes an entry from both queue structures.
local function forget(entry)
  redis.call('ZREM', QUEUE, entry)
  redis.call('ZREM', DEADLINES, entry)
end

-- Drops up to 16 entries whose client stopped renewing them (O(log N) each).
local function prune(now_ms)
  local dead = redis.call('ZRANGEBYSCORE', DEADLINES, '-inf', '(' .. fmt(now_ms), 'LIMIT', '0',
    '16')
  for _, entry in ipairs(dead) do
    forget(entry)
  end
end

-- The first queued entry that is still alive, its liveness deadline and
-- its parts as `parse` reads them, or nil. Dead or foreign entries ahead of
-- it are dropped; each entry is dropped once, so this is O(log N) amortised
-- per call. `parse` reads the entries (parse_entry when nil; a counted
-- lock's queue passes parse_counted_entry, or split_counted_entry for its
-- parts as written).
local function live_head(now_ms, parse)
  parse = parse or parse_entry
  while true do
    local head = redis.call('ZRANGE', QUEUE, '0', '0')[1]
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, head))
    if deadline and deadline >= now_ms then
      local owner, call, lease, fixed, units = parse(head)
      if owner then
        return head, deadline, owner, call, lease, fixed, units
      end
    end
    forget(head)
  end
end

-- Takes the first live entry out of the queue (ZPOPMIN, its deadline
-- dropped with it), dropping dead or foreign ones ahead of it as
-- live_head does: returns it, the server time (read here, and only when
-- an entry is there, when `now_us` is nil), its liveness deadline and its
-- parts as `split` reads them (split_entry, or split_counted_entry for a
-- counted lock's), or nil when none is left. For a caller that knows the
-- head leaves the queue whatever it asks.
local function pop_live_head(now_us, now_ms, split)
  while true do
    local head = redis.call('ZPOPMIN', QUEUE)[1]
    if not head then
      return nil
    end
    if not now_us then
      now_us, now_ms = server_time()
    end
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, head))
    redis.call('ZREM', DEADLINES, head)
    if deadline and deadline >= now_ms then
      local owner, call, lease, fixed, units = split(head)
      if owner then
        return head, now_us, now_ms, deadline, owner, call, lease, fixed, units
      end
    end
  end
end

-- Tells the (new) head of the queue that the current lease runs out in
-- `pttl` ms, so it can claim a lock whose holder dies without releasing it.
-- `parse` as live_head's; `head`, when the caller just read it (false:
-- nobody waits), saves reading it again.
local function tell_head(now_ms, pttl, parse, head)
  parse = parse or parse_entry
  if head == nil then
    head = live_head(now_ms, parse)
  end
  if head then
    local owner, call = parse(head)
    wake(owner, 'H ' .. call .. ' ' .. pttl)
  end
end

-- Queue keys outlive every liveness deadline in them. When the queue's TTL
-- falls under `ms`, both are pushed out to 2 * ms: one PTTL per call, and
-- two PEXPIREs about once per `ms`. Returns the new TTL when it pushed it.
-- `new`: the caller knows the queue keys were just made (no TTL yet).
local function keep_queue_for(ms, new)
  local ttl = new and -1 or redis.call('PTTL', QUEUE)
  if ttl == -1 or (ttl >= 0 and ttl < ms) then
    local life = queue_life_text(ms)
    redis.call('PEXPIRE', QUEUE, life)
    redis.call('PEXPIRE', DEADLINES, life)
    return 2 * ms
  end
end

-- Queues `entry` (or finds it queued: a call delivered twice, or a poll)
-- with a liveness deadline `waiter_timeout` ms from `now_ms`; returns its
-- position (0 = next) and, when the queue's TTL was pushed out, the new
-- one. `mode` "poll" looks for the entry first. `empty`: the caller knows
-- nobody is queued (a mutex's lock key without its '+'), so the entry
-- heads a queue it makes. The deadline is written before prune: were
-- prune to empty the deadlines zset first, the key would go with its TTL
-- and come back without one (the model test found it, tests/model.rs).
local function join_queue(entry, mode, now_ms, waiter_timeout, empty)
  redis.call('ZADD', DEADLINES, fmt(now_ms + waiter_timeout), entry)
  if empty then
    redis.call('ZADD', QUEUE, '1', entry)
    return 0, keep_queue_for(waiter_timeout, true)
  end
  local position = mode == 'poll' and redis.call('ZRANK', QUEUE, entry) or nil
  if not position then
    local last = redis.call('ZRANGE', QUEUE, '-1', '-1', 'WITHSCORES')[2]
    if redis.call('ZADD', QUEUE, 'NX', fmt((tonumber(last) or 0) + 1), entry) == 1 then
      position = redis.call('ZCARD', QUEUE) - 1
      -- Each arrival clears up to 16 dead entries: they go at least as
      -- fast as they come.
      prune(now_ms)
    else
      position = redis.call('ZRANK', QUEUE, entry)
    end
  end
  return position, keep_queue_for(waiter_timeout)
end
