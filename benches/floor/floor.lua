#!lua name=fairlock_floor
-- The floor of fairlock's mutex cycle: only what its fast paths do (a free
-- lock nobody waits for taken; its lone hold released) and every guarantee
-- they keep: the format word, the waiters flag ('-': nobody queued), the
-- fencing token (the last one + 1, kept in the key), the lease (PX: lease
-- + fence; a release whose client vouches for the lease, as fairlock's
-- does when its own count of it has time to spare, reads no PTTL), the
-- holder and call checked before a release, the freeing call kept in the
-- free value (a repeated release is known), the freed key's TTL kept (a
-- lease of at most the fence life: at most two fence lives). No other
-- path, no argument check: not a lock, a measure.
--
-- KEYS: lock, queue (fairlock's two; only the lock is read).
-- floor_take, fairlock's arguments: ARGV wake prefix, fence ms, owner,
--   call id, lease ms, settings (as fairlock's mutex acquire).
-- floor_release, fairlock's arguments: ARGV wake prefix, fence ms,
--   "<owner>#<call id>", token (as fairlock's mutex release).
-- floor_take_packed: ARGV "<owner>#<call> <fence ms>" (the hold as
--   written), the PX (lease + fence ms), the rest of what a take that
--   queues needs as one string (unread here).
-- floor_release_packed: ARGV "v<format> <token> <owner>#<call> <fence ms> "
--   (the hold's value up to its mark), "v<format> <token> - <owner>#<call>" (the free
--   value).
-- Each take returns the token, each release 0 (-1: not this hold).

local function take(lock, hold, px)
  local stored = redis.call('GET', lock)
  if stored then
    local last, mark = string.match(stored, '^v@FORMAT@ (%d+) %- (.+)$')
    if last then
      local token = last + 1
      redis.call('SET', lock, 'v@FORMAT@ ' .. string.format('%d', token) .. ' ' .. hold .. ' ' .. mark,
        'PX', px)
      return token
    end
  end
  return redis.error_reply('ERR floor: a free lock nobody waits for only')
end

local function release(lock, held, free)
  local stored = redis.call('GET', lock)
  if stored and string.find(stored, held, 1, true) == 1 then
    redis.call('SET', lock, free, 'KEEPTTL')
    return 0
  end
  return -1
end

redis.register_function('floor_take', function(keys, args)
  return take(keys[1], args[3] .. '#' .. args[4] .. ' ' .. args[2], args[5] + args[2])
end)

redis.register_function('floor_release', function(keys, args)
  local held = 'v@FORMAT@ ' .. args[4] .. ' ' .. args[3] .. ' ' .. args[2] .. ' '
  return release(keys[1], held, 'v@FORMAT@ ' .. args[4] .. ' - ' .. args[3])
end)

redis.register_function('floor_take_packed', function(keys, args)
  return take(keys[1], args[1], args[2])
end)

redis.register_function('floor_release_packed', function(keys, args)
  return release(keys[1], args[1], args[2])
end)

-- The floor of the handoff on the same keys and format: an arrival that
-- queues behind a live hold of another owner, and a release that hands
-- the lone hold of its call to the head of the queue, doing only what
-- fairlock's do there, with every guarantee they keep: the holder's lease
-- checked (PTTL above the fence) by the arrival, vouched for by the
-- releasing client; the entry's liveness deadline
-- from the server's clock (TIME, "~<entry>" in the queue zset), FIFO by
-- arrival number, up to 16 dead entries pruned by every fourth arrival
-- into a queue, the queue's TTL, the lock's '+'; the head's liveness checked and
-- its deadline dropped, a watchdog-renewed grant capped at that deadline,
-- the token the last + 1, the new hold's lease, its '+' while others wait,
-- the lock key outliving the queue, the grant told on its client's
-- channel. With fairlock's arguments (as its
-- acquire and release), the waiter timeout read from the settings string
-- once and kept as fairlock keeps it; fairlock's replies.

local seen_settings, seen_timeout, seen_fixed = false, false, false
local seen_lease, seen_fence, seen_px = false, false, false

-- The queue's deadlines are scored 2^50 + the deadline (lua/lib/queue.lua).
local BASE, BASE_TEXT, BELOW_BASE = 1125899906842624, '1125899906842624', '(1125899906842624'

local function clock_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
end

redis.register_function('floor_arrive', function(keys, args)
  local lock, queue = keys[1], keys[2]
  local owner, call = args[3], args[4]
  if seen_settings ~= args[6] then
    seen_fixed, seen_timeout = string.match(args[6], '^([01]) (%d+) ')
    seen_timeout, seen_settings = seen_timeout + 0, args[6]
  end
  local stored = redis.call('GET', lock)
  local token, holder, plus, fence =
    string.match(stored or '', '^v@FORMAT@ (%d+) (%S+)#[%d,]+ (%+?)(%d+) ')
  local pttl = holder and holder ~= owner and redis.call('PTTL', lock)
  if not pttl or pttl <= fence + 0 then
    return redis.error_reply('ERR floor: an arrival behind a live hold of another owner only')
  end
  local now = clock_ms()
  local entry = owner .. ' ' .. call .. ' ' .. args[5] .. ' ' .. seen_fixed
  local deadline = string.format('%d', BASE + now + seen_timeout)
  local position = 0
  local life = string.format('%d', 2 * seen_timeout)
  if plus == '' then
    redis.call('ZADD', queue, '1', entry, deadline, '~' .. entry)
    redis.call('PEXPIRE', queue, life)
    -- The lock key outlives the queue key (its format word stands for
    -- the queue's): its fence grows when the queue's TTL is longer than
    -- its own.
    local at = string.find(stored, ' ', 5 + #token + #holder, true)
    local grow = 2 * seen_timeout - pttl
    if grow > 0 then
      redis.call('SET', lock, string.sub(stored, 1, at) .. '+' .. string.format('%d', fence + grow)
        .. string.sub(stored, at + 1 + #fence), 'PX', life)
    else
      redis.call('SET', lock, string.sub(stored, 1, at) .. '+' .. string.sub(stored, at + 1),
        'KEEPTTL')
    end
  else
    local last = redis.call('ZRANGE', queue, BELOW_BASE, '-inf', 'BYSCORE', 'REV', 'LIMIT', '0', '1',
      'WITHSCORES')[2]
    local number = (last or 0) + 1
    redis.call('ZADD', queue, 'NX', string.format('%d', number), entry, deadline, '~' .. entry)
    position = redis.call('ZRANK', queue, entry)
    local dead = number % 4 == 0 and redis.call('ZRANGEBYSCORE', queue, BASE_TEXT,
      '(' .. string.format('%d', BASE + now), 'LIMIT', '0', '16') or {}
    if #dead > 0 then
      local gone = {}
      for _, mark in ipairs(dead) do
        gone[#gone + 1] = mark
        gone[#gone + 1] = string.sub(mark, 2)
      end
      redis.call('ZREM', queue, unpack(gone))
    end
    if redis.call('PTTL', queue) < seen_timeout then
      redis.call('PEXPIRE', queue, life)
    end
  end
  return '0 ' .. (pttl - fence) .. ' ' .. position .. ' ' .. token
end)

redis.register_function('floor_hand_over', function(keys, args)
  local lock, queue = keys[1], keys[2]
  local call_key, token = args[3], args[4]
  local stored = redis.call('GET', lock)
  local held = 'v@FORMAT@ ' .. token .. ' ' .. call_key .. ' +'
  local fence = stored and string.find(stored, held, 1, true) == 1
    and string.match(stored, '^%d+', #held + 1)
  if not fence then
    return -1
  end
  local head = redis.call('ZPOPMIN', queue)[1]
  local now = clock_ms()
  local deadline = head and redis.call('ZSCORE', queue, '~' .. head)
  deadline = deadline and deadline - BASE
  if not deadline or deadline < now then
    return redis.error_reply('ERR floor: a handoff to a live head only')
  end
  redis.call('ZREM', queue, '~' .. head)
  local next_owner, next_call, lease, fixed = string.match(head, '^(%S+) (%d+) (%d+) ([01])$')
  if fixed == '0' and deadline - now < lease + 0 then
    lease = string.format('%d', deadline - now)
  end
  local next_token = string.format('%d', token + 1)
  -- The queue's PTTL: whether waiters are left, and how long the lock key
  -- must outlive it.
  local queue_ttl = redis.call('PTTL', queue)
  local plus = queue_ttl ~= -2 and ' +' or ' '
  if seen_lease ~= lease or seen_fence ~= args[2] then
    seen_lease, seen_fence, seen_px = lease, args[2], string.format('%d', lease + args[2])
  end
  local fence_s, px = args[2], seen_px
  if queue_ttl > px + 0 then
    fence_s, px = string.format('%d', queue_ttl - lease), string.format('%d', queue_ttl)
  end
  redis.call('SET', lock, 'v@FORMAT@ ' .. next_token .. ' ' .. next_owner .. '#' .. next_call
    .. plus .. fence_s .. ' ' .. call_key, 'PX', px)
  redis.call('PUBLISH', args[1] .. string.match(next_owner, '^([^:]+):'),
    'G ' .. next_call .. ' ' .. next_token .. ' ' .. lease)
  return next_owner .. ' ' .. next_call .. ' ' .. next_token .. ' ' .. lease
end)

-- The same cycle and handoff in a layout fairlock does not use, to show
-- what a layout buys: its queue is one zset whose entries carry their
-- liveness deadline ("<deadline ms> <owner> <call id> <lease ms> <fixed>",
-- scored by arrival number), so a handoff reads the head's deadline with
-- the head and there is no deadlines zset to write, prune, expire or
-- clean; and a hold's key lives exactly its lease ("e<format> <token>
-- <owner>#<call> <+|-> <mark>", PX the lease; free: "e<format> <token>
-- <+|-> <mark>", PX the fence), so a key that is there is a live hold
-- and no path reads a PTTL but the arrival's reply. Two keys (the lock,
-- the queue). Not a lock: its waiters could not renew their place (the
-- entry would change with its deadline, and a client that lost a
-- heartbeat's reply would no longer know its entry), and the floor has
-- no other path.

redis.register_function('floor_entries_take', function(keys, args)
  local stored = redis.call('GET', keys[1])
  local last, mark = string.match(stored or '', '^e@FORMAT@ (%d+) %- (.+)$')
  if not last then
    return redis.error_reply('ERR floor: a free lock nobody waits for only')
  end
  local token = last + 1
  redis.call('SET', keys[1], 'e@FORMAT@ ' .. string.format('%d', token) .. ' ' .. args[3] .. '#'
    .. args[4] .. ' - ' .. mark, 'PX', args[5])
  return token
end)

redis.register_function('floor_entries_release', function(keys, args)
  local call_key, token = args[3], args[4]
  local stored = redis.call('GET', keys[1])
  if not stored
      or string.find(stored, 'e@FORMAT@ ' .. token .. ' ' .. call_key .. ' - ', 1, true) ~= 1 then
    return -1
  end
  redis.call('SET', keys[1], 'e@FORMAT@ ' .. token .. ' - ' .. call_key, 'PX', args[2])
  return 0
end)

redis.register_function('floor_entries_arrive', function(keys, args)
  local lock, queue = keys[1], keys[2]
  local owner, call = args[3], args[4]
  if seen_settings ~= args[6] then
    seen_fixed, seen_timeout = string.match(args[6], '^([01]) (%d+) ')
    seen_timeout, seen_settings = seen_timeout + 0, args[6]
  end
  local stored = redis.call('GET', lock)
  local token, holder, calls, plus =
    string.match(stored or '', '^e@FORMAT@ (%d+) (%S+)#([%d,]+) ([-+]) ')
  if not holder or holder == owner then
    return redis.error_reply('ERR floor: an arrival behind a live hold of another owner only')
  end
  local left = redis.call('PTTL', lock)
  local now = clock_ms()
  local entry = string.format('%d', now + seen_timeout) .. ' ' .. owner .. ' ' .. call .. ' '
    .. args[5] .. ' ' .. seen_fixed
  local position = 0
  local life = string.format('%d', 2 * seen_timeout)
  if plus == '-' then
    redis.call('ZADD', queue, '1', entry)
    redis.call('PEXPIRE', queue, life)
    local at = 6 + #'@FORMAT@' + #token + #holder + #calls
    redis.call('SET', lock, string.sub(stored, 1, at - 1) .. '+' .. string.sub(stored, at + 1),
      'KEEPTTL')
  else
    local last = redis.call('ZRANGE', queue, '-1', '-1', 'WITHSCORES')[2]
    redis.call('ZADD', queue, 'NX', string.format('%d', (last or 0) + 1), entry)
    position = redis.call('ZCARD', queue) - 1
    if redis.call('PTTL', queue) < seen_timeout then
      redis.call('PEXPIRE', queue, life)
    end
  end
  return '0 ' .. left .. ' ' .. position .. ' ' .. token
end)

redis.register_function('floor_entries_hand_over', function(keys, args)
  local lock, queue = keys[1], keys[2]
  local call_key, token = args[3], args[4]
  local stored = redis.call('GET', lock)
  if not stored
      or string.find(stored, 'e@FORMAT@ ' .. token .. ' ' .. call_key .. ' + ', 1, true) ~= 1 then
    return -1
  end
  local head = redis.call('ZPOPMIN', queue)[1]
  local now = clock_ms()
  local deadline, next_owner, next_call, lease, fixed =
    string.match(head or '', '^(%d+) (%S+) (%d+) (%d+) ([01])$')
  if not deadline or deadline + 0 < now then
    return redis.error_reply('ERR floor: a handoff to a live head only')
  end
  if fixed == '0' and deadline - now < lease + 0 then
    lease = string.format('%d', deadline - now)
  end
  local next_token = string.format('%d', token + 1)
  local plus = redis.call('EXISTS', queue) == 1 and ' + ' or ' - '
  redis.call('SET', lock, 'e@FORMAT@ ' .. next_token .. ' ' .. next_owner .. '#' .. next_call
    .. plus .. call_key, 'PX', lease)
  redis.call('PUBLISH', args[1] .. string.match(next_owner, '^([^:]+):'),
    'G ' .. next_call .. ' ' .. next_token .. ' ' .. lease)
  return next_owner .. ' ' .. next_call .. ' ' .. next_token .. ' ' .. lease
end)

-- The same handoff on a third layout: the queue one zset whose members are
-- fairlock's entries as they are ("<owner> <call id> <lease ms> <fixed>",
-- fixed for the entry's life, so a waiter's client always knows its
-- entry) and whose SCORE carries both the arrival number and the liveness
-- deadline: arrival * 2^36 + (deadline mod 2^36). Arrival numbers stay
-- below 2^17, so a score stays below 2^53, an integer a double holds
-- exactly; the members sort by arrival (FIFO, ZPOPMIN the head) and a
-- renewal rewrites the score alone (ZADD XX), keeping its arrival part.
-- The deadline is read back from its residue and the server's clock: the
-- one value with that residue in (now + MAX_MS - 2^36, now + MAX_MS], so
-- every live deadline (at most MAX_MS ahead, a year) and every dead one
-- up to 2^36 - MAX_MS ms (430 days) past is read right. The lock key is
-- today's (the uncontended cycle is floor_take and floor_release), and a
-- handed-over hold keeps its '+' as fairlock's does (an arrival behind it
-- reads the queue's ZCARD). An arrival whose number would reach 2^17
-- renumbers the queue (not built here: the floor stops), dead entries are
-- dropped at the head by the release that pops them, and every fourth
-- arrival into a queue of others reads the scores of up to 16 entries at
-- an index that moves on by 16 each time (a sweep of the queue) and drops
-- the dead among them.

local SHIFT, ARRIVALS, MAX_MS = 68719476736, 131072, 31536000000
local SWEEP = 16

-- The deadline (server ms) whose residue `score` keeps, read at `now`.
local function deadline_in(score, now)
  local top = now + MAX_MS
  return top - (top - score % SHIFT) % SHIFT
end

redis.register_function('floor_scored_arrive', function(keys, args)
  local lock, queue = keys[1], keys[2]
  local owner, call = args[3], args[4]
  if seen_settings ~= args[6] then
    seen_fixed, seen_timeout = string.match(args[6], '^([01]) (%d+) ')
    seen_timeout, seen_settings = seen_timeout + 0, args[6]
  end
  local stored = redis.call('GET', lock)
  local token, holder, plus, fence =
    string.match(stored or '', '^v@FORMAT@ (%d+) (%S+)#[%d,]+ (%+?)(%d+) ')
  local pttl = holder and holder ~= owner and redis.call('PTTL', lock)
  if not pttl or pttl <= fence + 0 then
    return redis.error_reply('ERR floor: an arrival behind a live hold of another owner only')
  end
  local now = clock_ms()
  local entry = owner .. ' ' .. call .. ' ' .. args[5] .. ' ' .. seen_fixed
  local residue = (now + seen_timeout) % SHIFT
  local position = 0
  local life = string.format('%d', 2 * seen_timeout)
  -- Nobody queued: no '+' (the hold gets it), or the '+' of a
  -- handed-over hold and an empty queue (ZCARD 0, as join_queue's
  -- `empty`). The entry makes the queue, and the lock key outlives it (its
  -- fence grows when the queue's TTL is longer than its own).
  local k = plus == '+' and redis.call('ZCARD', queue)
  if not k or k == 0 then
    redis.call('ZADD', queue, string.format('%d', SHIFT + residue), entry)
    redis.call('PEXPIRE', queue, life)
    local at = string.find(stored, ' ', 5 + #token + #holder, true)
    local grow = 2 * seen_timeout - pttl
    if grow > 0 then
      redis.call('SET', lock, string.sub(stored, 1, at) .. '+' .. string.format('%d', fence + grow)
        .. string.sub(stored, at + 1 + #plus + #fence), 'PX', life)
    elseif not k then
      redis.call('SET', lock, string.sub(stored, 1, at) .. '+' .. string.sub(stored, at + 1),
        'KEEPTTL')
    end
  else
    local last = redis.call('ZRANGE', queue, '-1', '-1', 'WITHSCORES')[2]
    local number = (last - last % SHIFT) / SHIFT + 1
    if number >= ARRIVALS then
      return redis.error_reply('ERR floor: the renumbering is not built')
    end
    if redis.call('ZADD', queue, 'NX', string.format('%d', number * SHIFT + residue), entry) == 0 then
      return redis.error_reply('ERR floor: a new arrival only')
    end
    position = k
    if number % 4 == 0 then
      local from = k < SWEEP and 0 or (number / 4 * SWEEP) % k
      local read = redis.call('ZRANGE', queue, string.format('%d', from),
        string.format('%d', from + SWEEP - 1), 'WITHSCORES')
      local dead = {}
      for i = 2, #read, 2 do
        if deadline_in(read[i], now) < now then
          dead[#dead + 1] = read[i - 1]
        end
      end
      if #dead > 0 then
        redis.call('ZREM', queue, unpack(dead))
        position = position - #dead
      end
    end
    if redis.call('PTTL', queue) < seen_timeout then
      redis.call('PEXPIRE', queue, life)
      if pttl < 2 * seen_timeout then
        return redis.error_reply('ERR floor: a lock key that outlives the queue only')
      end
    end
  end
  return '0 ' .. (pttl - fence) .. ' ' .. position .. ' ' .. token
end)

redis.register_function('floor_scored_hand_over', function(keys, args)
  local lock, queue = keys[1], keys[2]
  local call_key, token = args[3], args[4]
  local stored = redis.call('GET', lock)
  local held = 'v@FORMAT@ ' .. token .. ' ' .. call_key .. ' +'
  local fence = stored and string.find(stored, held, 1, true) == 1
    and string.match(stored, '^%d+', #held + 1)
  if not fence then
    return -1
  end
  local popped = redis.call('ZPOPMIN', queue)
  local head = popped[1]
  local now = clock_ms()
  local deadline = head and deadline_in(popped[2], now)
  if not deadline or deadline < now then
    return redis.error_reply('ERR floor: a handoff to a live head only')
  end
  local next_owner, next_call, lease, fixed = string.match(head, '^(%S+) (%d+) (%d+) ([01])$')
  if fixed == '0' and deadline - now < lease + 0 then
    lease = string.format('%d', deadline - now)
  end
  local next_token = string.format('%d', token + 1)
  -- The queue's PTTL: how long the lock key must outlive it (the new hold
  -- keeps its '+' whether or not waiters are left, as fairlock's does).
  local queue_ttl = redis.call('PTTL', queue)
  if seen_lease ~= lease or seen_fence ~= args[2] then
    seen_lease, seen_fence, seen_px = lease, args[2], string.format('%d', lease + args[2])
  end
  local fence_s, px = args[2], seen_px
  if queue_ttl > px + 0 then
    fence_s, px = string.format('%d', queue_ttl - lease), string.format('%d', queue_ttl)
  end
  redis.call('SET', lock, 'v@FORMAT@ ' .. next_token .. ' ' .. next_owner .. '#' .. next_call
    .. ' +' .. fence_s .. ' ' .. call_key, 'PX', px)
  redis.call('PUBLISH', args[1] .. string.match(next_owner, '^([^:]+):'),
    'G ' .. next_call .. ' ' .. next_token .. ' ' .. lease)
  return next_owner .. ' ' .. next_call .. ' ' .. next_token .. ' ' .. lease
end)

-- The heartbeat of one queued waiter whose lock is held by another
-- (fairlock's arguments: ARGV wake prefix, fence ms, waiter timeout ms,
-- the entry; fairlock's reply {lease left, last token, 0, position}), on
-- today's layout and on the third: today's drops up to 16 dead entries
-- found by their deadlines and renews "~<entry>" (ZRANK, ZADD XX); the
-- third reads the entry's score (ZSCORE: its arrival part, and whether
-- it is queued), rewrites it (ZADD XX) and reads its place (ZRANK), and
-- drops the dead among the up to 16 entries ahead of it (their scores
-- read). Either way the lock's lease read and the queue's TTL pushed out
-- when it runs low.

local function beat_reply(lock, stored, position)
  local token, fence = string.match(stored or '', '^v@FORMAT@ (%d+) %S+#[%d,]+ %+?(%d+) ')
  local left = token and redis.call('PTTL', lock) - fence
  if not left or left <= 0 then
    return redis.error_reply('ERR floor: a heartbeat behind a live hold only')
  end
  return { left, tonumber(token), 0, position }
end

-- The queue's TTL pushed out to twice the waiter timeout when it runs
-- low; a refusal (to return) where the lock key would then not outlive
-- it (the floor does not grow it here).
local function keep_queue(lock, queue, timeout)
  if redis.call('PTTL', queue) < timeout then
    redis.call('PEXPIRE', queue, string.format('%d', 2 * timeout))
    if redis.call('PTTL', lock) < 2 * timeout then
      return redis.error_reply('ERR floor: a lock key that outlives the queue only')
    end
  end
end

redis.register_function('floor_heartbeat', function(keys, args)
  local queue, timeout, entry = keys[2], args[3] + 0, args[4]
  local now = clock_ms()
  local dead = redis.call('ZRANGEBYSCORE', queue, BASE_TEXT,
    '(' .. string.format('%d', BASE + now), 'LIMIT', '0', '16')
  if #dead > 0 then
    local gone = {}
    for _, mark in ipairs(dead) do
      gone[#gone + 1] = mark
      gone[#gone + 1] = string.sub(mark, 2)
    end
    redis.call('ZREM', queue, unpack(gone))
  end
  local stored = redis.call('GET', keys[1])
  local position = redis.call('ZRANK', queue, entry)
  if not position then
    return redis.error_reply('ERR floor: a queued waiter only')
  end
  redis.call('ZADD', queue, 'XX', string.format('%d', BASE + now + timeout), '~' .. entry)
  return keep_queue(keys[1], queue, timeout) or beat_reply(keys[1], stored, position)
end)

redis.register_function('floor_scored_heartbeat', function(keys, args)
  local queue, timeout, entry = keys[2], args[3] + 0, args[4]
  local now = clock_ms()
  local stored = redis.call('GET', keys[1])
  local score = redis.call('ZSCORE', queue, entry)
  if not score then
    return redis.error_reply('ERR floor: a queued waiter only')
  end
  redis.call('ZADD', queue, 'XX', string.format('%d', score - score % SHIFT
    + (now + timeout) % SHIFT), entry)
  local position = redis.call('ZRANK', queue, entry)
  if position > 0 then
    local from = position > SWEEP and position - SWEEP or 0
    local read = redis.call('ZRANGE', queue, string.format('%d', from),
      string.format('%d', position - 1), 'WITHSCORES')
    local dead = {}
    for i = 2, #read, 2 do
      if deadline_in(read[i], now) < now then
        dead[#dead + 1] = read[i - 1]
      end
    end
    if #dead > 0 then
      redis.call('ZREM', queue, unpack(dead))
      position = position - #dead
    end
  end
  return keep_queue(keys[1], queue, timeout) or beat_reply(keys[1], stored, position)
end)
