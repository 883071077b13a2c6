-- lib/queue.lua: the queue of a lock's waiting calls, kept the same way by
-- both engines, in the same place of their KEYS:
--   KEYS[2] queue  zset  entry -> arrival sequence number, and for each
--                        entry "~<entry>" -> DEADLINE_BASE + its liveness
--                        deadline, server milliseconds
-- One key for both orders: every arrival number is below DEADLINE_BASE
-- and every deadline above it, so the entries come first in the zset, in
-- arrival order (ZRANK of an entry is its place in the queue), and the
-- deadlines after them, soonest first (a ZRANGEBYSCORE finds the dead).
-- A call joins, leaves and renews its place in one key, whose one TTL
-- outlives every deadline in it.
-- A mutex's queue entry is "<owner> <call id> <lease ms> <fixed 0|1>": the
-- waiting call and the grant it gets, so a handoff reads one member (a
-- counted lock's carries its units as a fifth field: counted.lua). An
-- owner id starts with its client's hex id, so no entry starts with '~'.
-- Each step here is O(log N) in the N entries, amortised over dropped dead
-- ones.

-- 2^50: above every arrival number, and with a deadline in ms added (about
-- 2^41 now) still an integer a double holds exactly (below 2^53).
local DEADLINE_BASE = 1125899906842624
local DEADLINE_BASE_TEXT = '1125899906842624'

-- A queue entry's parts as written (strings): owner id, call id, lease
-- ms, fixed ('0' or '1'); nil for a member fairlock did not write, a
-- deadline's among them (no owner id starts with its '~').
local function split_entry(entry)
  return string.match(entry, '^([^~%s]%S*) (%d+) (%d+) ([01])$')
end

-- A queue entry given in ARGV, as `split` reads it (split_entry, or a
-- counted lock's split_counted_entry, whose entries carry units), its
-- lease and units checked (numbers); anything else stops the script before
-- it writes.
local function entry_arg(value, split)
  local owner, call, lease, fixed, units = split(value)
  if not owner then
    fail('ERR fairlock: a queue entry must be "<owner> <call id> <lease ms> <fixed 0|1>'
      .. (split == split_entry and '' or ' <units>') .. '", got ' .. value)
  end
  return owner, call, whole_arg(lease, 'lease'), fixed, units and whole_arg(units, 'units', 'units')
end

-- A liveness deadline (server ms) as the queue scores it.
local function deadline_score(deadline_ms)
  return string.format('%d', DEADLINE_BASE + deadline_ms)
end

-- The liveness deadline of `entry` (server ms), or nil when it has none.
local function deadline_of(entry)
  local score = redis.call('ZSCORE', QUEUE, '~' .. entry)
  return score and score - DEADLINE_BASE
end

-- Appends to `out` the first `limit` (an ARGV string; any number past the
-- queue's length lists it all) waiters of the queue, in order, each as its
-- owner id (the entry when `split`, split_entry or a counted lock's
-- split_counted_entry, cannot read it), a counted entry's units, and its
-- ms of liveness left (negative: a dead entry not dropped yet). Their
-- deadlines, after them in the zset, are left out of the range.
local function list_waiters(out, limit, now_ms, split)
  limit = math.min(tonumber(limit) or 0, 1000000000)
  if limit > 0 then
    for _, entry in ipairs(redis.call('ZRANGEBYSCORE', QUEUE, '-inf',
        '(' .. DEADLINE_BASE_TEXT, 'LIMIT', '0', fmt(limit))) do
      local owner, _, _, _, units = split(entry)
      out[#out + 1] = owner or entry
      if split ~= split_entry then
        out[#out + 1] = tonumber(units) or 0
      end
      out[#out + 1] = (deadline_of(entry) or 0) - now_ms
    end
  end
end

-- The arrival number of the first entry, or 1 when nobody is queued.
local function first_number()
  local first = redis.call('ZRANGE', QUEUE, '0', '0', 'WITHSCORES')
  if first[1] and string.byte(first[1]) ~= 126 then
    return first[2] + 0
  end
  return 1
end

-- Removes an entry and its deadline from the queue.
local function forget(entry)
  redis.call('ZREM', QUEUE, entry, '~' .. entry)
end

-- Drops up to 16 entries whose client stopped renewing them, in one ZREM
-- (O(log N) each); returns how many it dropped.
local function prune(now_ms)
  local dead = emptied('ZRANGEBYSCORE', QUEUE, DEADLINE_BASE_TEXT,
    '(' .. deadline_score(now_ms), 'LIMIT', '0', '16') or {}
  if #dead > 0 then
    local members = {}
    for _, mark in ipairs(dead) do
      members[#members + 1] = mark
      members[#members + 1] = string.sub(mark, 2)
    end
    redis.call('ZREM', QUEUE, unpack(members))
  end
  return #dead
end

-- The first queued entry that is still alive, its liveness deadline and
-- its parts as `parse` reads them, or nil. Dead entries ahead of it are
-- dropped; each entry is dropped once, so this is O(log N) amortised per
-- call. A member `parse` cannot read (another program's sorted set at the
-- queue's key) stops the script (fail), left as it was. `parse` reads the
-- entries as written: split_entry (a mutex's queue), or a counted lock's
-- split_counted_entry.
local function live_head(now_ms, parse)
  while true do
    local head = (emptied('ZRANGE', QUEUE, '0', '0') or {})[1]
    if not head or string.byte(head) == 126 then
      -- No entry left ('~' = 126: a deadline first).
      return nil
    end
    local deadline = deadline_of(head)
    local owner, call, lease, fixed, units = parse(head)
    if not owner then
      fail('WRONGTYPE the queue key holds a member fairlock did not write')
    end
    if deadline and deadline >= now_ms then
      return head, deadline, owner, call, lease, fixed, units
    end
    forget(head)
  end
end

-- Takes the first live entry out of the queue (ZPOPMIN, its deadline
-- dropped with it), dropping dead ones ahead of it as live_head does (a
-- member it cannot read is put back, and the script stopped): returns it, the server time (read here, and only when
-- an entry is there, when `now_us` is nil), its liveness deadline and its
-- parts as `split` reads them (split_entry, or split_counted_entry for a
-- counted lock's), then the µs read here as fmt writes them when
-- server_time gives them (else false or nil), or nil when none is left.
-- For a caller that knows the head leaves the queue whatever it asks.
local function pop_live_head(now_us, now_ms, split)
  local now_text
  while true do
    local popped = redis.pcall('ZPOPMIN', QUEUE)
    if popped.err then
      popped = emptied('ZPOPMIN', QUEUE) or {}
    end
    local head = popped[1]
    if not head then
      return nil
    end
    local owner, call, lease, fixed, units = split(head)
    if not owner then
      if string.byte(head) == 126 then
        -- No entry left (a deadline popped has none to stand for).
        return nil
      end
      redis.call('ZADD', QUEUE, popped[2], head)
      fail('WRONGTYPE the queue key holds a member fairlock did not write')
    end
    if not now_us then
      now_us, now_ms, now_text = server_time(true)
    end
    local deadline = redis.call('ZSCORE', QUEUE, '~' .. head)
    redis.call('ZREM', QUEUE, '~' .. head)
    deadline = deadline and deadline - DEADLINE_BASE
    if deadline and deadline >= now_ms then
      return head, now_us, now_ms, deadline, owner, call, lease, fixed, units, now_text
    end
  end
end

-- A heartbeat's step for each of its queue entries (ARGV[4] on, checked
-- already): a queued one gets its liveness deadline renewed, to `deadline`
-- (a score: deadline_score); for one not queued, `held(entry)` gives the
-- token (a number) of the hold its call was handed, or nil. Appends each
-- one's status and value to `out` (0 and its position, 1 and that token,
-- -1 and 0: neither; heartbeat.lua) and returns whether any is queued.
local function renew_entries(out, deadline, held)
  local queued = false
  for i = 4, #ARGV do
    local entry = ARGV[i]
    local position = emptied('ZRANK', QUEUE, entry)
    local token = nil
    if position then
      redis.call('ZADD', QUEUE, 'XX', deadline, '~' .. entry)
      queued = true
    else
      token = held(entry)
    end
    out[#out + 1] = position and 0 or token and 1 or -1
    out[#out + 1] = position or token or 0
  end
  return queued
end

-- Tells the (new) head of the queue that the current lease runs out in
-- `pttl` ms, so it can claim a lock whose holder dies without releasing it.
-- `parse` as live_head's; `head`, when the caller just read it (false:
-- nobody waits), saves reading it again.
local function tell_head(now_ms, pttl, parse, head)
  if head == nil then
    head = live_head(now_ms, parse)
  end
  if head then
    local owner, call = parse(head)
    wake(owner, 'H ' .. call .. ' ' .. pttl)
  end
end

-- The queue key outlives every liveness deadline in it. When its TTL
-- falls under `ms`, it is pushed out to 2 * ms: one PTTL per call, and a
-- PEXPIRE about once per `ms`. `new`: the caller knows the queue key was
-- just made (no TTL yet). `cap`, when the caller knows it: the longest the
-- queue may live without its anchor having to grow (a mutex's lock key
-- outlives the queue: its TTL; a counted lock's meta outlives it by a
-- fence life: its TTL less that, queue_cap). The one rule every call site
-- follows: where 2 * ms would pass `cap` less a second (a PEXPIRE counts
-- from a later reading of the clock than the PTTL the caller read `cap`
-- from: with no second the queue outlived the lock key by 1 ms in a CI
-- run) and that still covers `ms`, the queue is pushed out to it instead,
-- so a long waiter timeout costs the anchor no write. Returns the new TTL
-- only when it pushed it and it is not known to be within `cap`: the
-- caller's anchor must then cover it.
local function keep_queue_for(ms, new, cap)
  local ttl = new and -1 or redis.call('PTTL', QUEUE)
  if ttl == -1 or (ttl >= 0 and ttl < ms) then
    local room = cap and cap - 1000
    local covered = room and room >= ms
    redis.call('PEXPIRE', QUEUE, covered and room < 2 * ms and fmt(room) or queue_life_text(ms))
    if not covered then
      return 2 * ms
    end
  end
end

-- Queues `entry` (or finds it queued: a call delivered twice, or a poll)
-- with a liveness deadline `waiter_timeout` ms from `now_ms`; returns its
-- position (0 = next) and what keep_queue_for returns (the queue's new
-- TTL, when the anchor must cover it). `mode` "poll" writes the deadline
-- and looks for the entry first. `empty`: the caller knows nobody is
-- queued (a mutex's lock key without its '+'), so the entry heads a queue
-- it makes; so does a queue whose ZCARD is 0 (no TTL to read: the key is
-- made here). Either way the entry and
-- its deadline are written by one ZADD, NX: an entry delivered again
-- keeps its place (and its deadline is then renewed on its own). With k
-- entries queued, each with its deadline (every step here writes and
-- removes them in pairs), the queue has 2k members, the last entry is at
-- index k - 1 (one ZRANGE by index reads it) and the new entry's place is
-- k: no search by score, which in a small zset (a listpack) reads every
-- deadline from the end. A count that is not even, or a member there that
-- is not an entry, means the pairs are not whole (keys written by hand,
-- or the deadline a poll wrote for an entry dropped meanwhile): then the
-- last entry is searched by score. `cap` as keep_queue_for's.
local function join_queue(entry, mode, now_ms, waiter_timeout, empty, cap)
  local deadline = deadline_score(now_ms + waiter_timeout)
  local position = nil
  if not empty and mode == 'poll' then
    redis.call('ZADD', QUEUE, deadline, '~' .. entry)
    position = redis.call('ZRANK', QUEUE, entry)
  end
  local k = not empty and not position and redis.call('ZCARD', QUEUE) / 2
  if empty or k == 0 then
    redis.call('ZADD', QUEUE, '1', entry, deadline, '~' .. entry)
    return 0, keep_queue_for(waiter_timeout, true, cap)
  end
  if not position then
    local index = k >= 1 and k % 1 == 0 and fmt(k - 1)
    local at = index and redis.call('ZRANGE', QUEUE, index, index, 'WITHSCORES')
    -- (Its score read as a number once.)
    local last = at and at[2] and string.byte(at[1]) ~= 126 and at[2] + 0
    if not last or last >= DEADLINE_BASE then
      -- Not k entries each with its deadline: the last entry by score.
      at = nil
      last = redis.call('ZRANGE', QUEUE, '(' .. DEADLINE_BASE_TEXT, '-inf', 'BYSCORE', 'REV',
        'LIMIT', '0', '1', 'WITHSCORES')[2] or 0
    end
    local number = last + 1
    if redis.call('ZADD', QUEUE, 'NX', fmt(number), entry, deadline, '~' .. entry) == 2 then
      position = (at or k == 0) and k or redis.call('ZRANK', QUEUE, entry)
      -- Every fourth arrival clears up to 16 dead entries: they go at
      -- least as fast as they come (and each heartbeat clears 16 more).
      if number % 4 == 0 then
        prune(now_ms)
      end
    else
      -- The entry, or its deadline, was there (a call delivered again):
      -- it keeps its place, and its deadline is renewed.
      redis.call('ZADD', QUEUE, deadline, '~' .. entry)
      position = redis.call('ZRANK', QUEUE, entry)
    end
  end
  return position, keep_queue_for(waiter_timeout, false, cap)
end
