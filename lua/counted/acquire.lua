-- counted/acquire.lua: take units of a counted lock (a semaphore's permits,
-- a reader-writer lock's read or write), re-enter it, or join (and stay
-- in) its queue. Strict FIFO: a call is admitted when its units fit beside
-- the held ones and no live waiter is queued ahead of it; a head that does
-- not fit is never passed by a smaller call behind it; when a head is
-- admitted, the calls right behind it that fit enter in the same step.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id "<client id>:<thread number or u<call>>[@<identity>]"
-- ARGV[4] call id: this call's id inside its client, echoed in wake
--         messages; the hold is "<owner> <call id> <units>", so a call
--         delivered twice (a retry after a lost reply) or handed the hold
--         while queued answers with its hold instead of taking a second one
-- ARGV[5] lease ms: the hold's lease when this call gets it (1 .. 365 days
--         in ms: lib/common.lua's whole_arg)
-- ARGV[6] capacity: the units there are (a semaphore's permits N; a
--         reader-writer lock's RW_CAPACITY), 1 .. 4294967295; a call whose
--         capacity is not the one the lock has (its meta key, kept a fence
--         life past the last holder and waiter) gets the error reply
--         "FAIRLOCK_PERMITS_MISMATCH <this call's> <the lock's> <fence life
--         ms>", nothing written;
--         once set_permits.lua set a semaphore's permits they are the
--         count whatever this says, and a call for more units than they
--         are gets "FAIRLOCK_PERMITS_EXCEEDED <asked> <set>", nothing written
--         but its queue entry, if any (unless this call holds them already:
--         it answers with its hold); a poll of a call refused so while it
--         was queued (its entry gone, its deadline left and not passed)
--         gets "FAIRLOCK_PERMITS_REFUSED <asked>", its deadline removed
-- ARGV[7] units: what this call asks for, 1 .. capacity (a read 1, a
--         write the capacity)
-- ARGV[8] what only a lock that is held, or that someone waits for, needs,
--         as one string (so that the common take carries fewer arguments):
--         "<fixed> <waiter timeout ms> <mode> <live token>":
--         fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it;
--         waiter timeout: liveness deadline of a queued entry (1 .. 365
--         days in ms);
--         mode: "try"   never queue (try_acquire, try_read, try_write);
--               "first" first attempt of a waiting call: take or queue;
--               "poll"  later attempt of a queued call;
--         live token: the token of a live guard this owner's client has of
--         this lock (the one with the most units first), or "0". With a
--         live hold of this owner behind it of at least this call's units,
--         the call is granted at once (a reader-writer lock's read in
--         read, read in write, write in write: even past queued waiters,
--         or the thread would wait for itself); asking for more units than
--         that hold has (or for an upgradable read beside any hold) is
--         refused with the error reply "FAIRLOCK_UPGRADE_REFUSED <owner>
--         <its hold's token> <asked: write | upgradable> <held: read |
--         upgradable | write>", nothing written. A token of
--         no live hold of this owner is ignored. A semaphore sends "0".
-- Returns token (an integer) when this call took a hold with its lease
--         (every hold, first or re-entered, gets its own token, max(last +
--         1, server clock in µs)), {1, token, lease ms left} when this call
--         holds one otherwise (handed over while queued, or a repeat), or
--         {0, ms until the first live lease runs out (0: none live), queue
--         position, last token issued} when it does not (position -1 for
--         "try": not queued; those four as one string when it queues
--         behind a lone hold: lib/common.lua's waiting_reply). A handoff
--         message for this call carrying a token up to that last one is
--         stale. When set_permits set another
--         number than ARGV[10], each reply is a list ending in it: {1,
--         token, lease ms left, permits} for a hold (the token's too), {0,
--         ..., last token issued, permits} otherwise; an equal number costs
--         nothing, the replies above.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); a call for one unit or all of them (a
-- semaphore's permit, a read, a write) with nobody holding and nobody
-- waiting, as the mutex's take of a free lock: GET and one SET (TIME,
-- ZRANGEBYSCORE and EXISTS too when the meta is gone); beside a lone hold
-- (the meta's PTTL is its lease), which moves into the holders zset with
-- it, GET, PTTL, TIME, ZADD, PEXPIRE and SET; beside two or more, GET,
-- TIME, PTTL, ZADD, PEXPIRE (only when the holders' TTL must grow) and
-- SET (and EXISTS of the queue, each, when the meta says waiters may be
-- queued); a call that finds no room beside a lone hold, which only
-- queues: GET, PTTL, TIME and join_queue's five (ZCARD, ZRANGE, ZADD, the
-- queue's PTTL, and PEXPIRE when it must grow; behind a hold handed over,
-- into the queue it emptied: ZCARD, ZADD, PEXPIRE), or when the meta says
-- nobody waits ZADD, PEXPIRE and a SET of the meta; one that fits behind
-- a queued head that does not (a read behind a queued write): GET, PTTL,
-- TIME, EXISTS, ZRANGE, ZSCORE and join_queue's five. Beside two or more
-- holds, each reads the holders too: EXISTS, ZSCORE and two
-- ZRANGEBYSCOREs more (two ZSCOREs more again for a write's or an
-- upgradable read's call, whose hold may have any of three sizes), and
-- the one behind a queued head no PTTL of the meta.

local owner, call = ARGV[3], ARGV[4]
local lease, px = lease_arg(ARGV[5])
local stored = redis.call('GET', META)
-- The common case first: nobody holds and nobody waits ("v<format>
-- <capacity> 0 <last> <mark>", no '+'), the capacity this call's and not
-- one set_permits set, the call for one unit or all of them: whatever the
-- mode and live token (no hold is left for either to name), the call's
-- hold is the meta's lone hold, read with one match and no PTTL. A meta
-- that keeps the last token gives last + 1 without a TIME: tokens then lag
-- the clock, so the clock alone still exceeds them once the meta is gone
-- (take). The owner and call are checked as holder_arg does, in one find
-- ("<owner> <call>" is one word and a number).
local name = owner .. ' ' .. call
if stored then
  local capacity_s, last, mark = string.match(stored, '^v@FORMAT@ (%d+) 0 (%d+) (%S+)$')
  local units_s = ARGV[7]
  if capacity_s == ARGV[6] and (units_s == '1' or units_s == capacity_s)
      and string.find(name, '^%S+ %d+$') then
    local token = last + 1
    redis.call('SET', META, 'v@FORMAT@ ' .. capacity_s .. ' ' .. fmt(token) .. ' ' .. owner .. '#'
      .. call .. ' ' .. ARGV[2] .. ' ' .. units_s .. ' ' .. mark, 'PX', px)
    return token
  end
end

local fixed, waiter_timeout, mode, guard = settings_arg(ARGV[8])

-- Next most common: a live lone hold of another owner leaves no room for
-- this call (the hold or the call takes every unit), the capacity this
-- call's and not one set_permits set, no live token: queue (or poll)
-- behind it as the slow path below would, the meta read with one match
-- and no table built. The meta gets its '+', and a fence grown by as much
-- as the queue's new TTL needs (keep_queued).
if stored and guard == '0' and (ARGV[7] == '1' or ARGV[7] == ARGV[6])
    and string.find(name, '^%S+ %d+$') then
  local capacity_s, last, holder, at, flag, fence, rest, units_s = string.match(stored,
    '^v@FORMAT@ (%d+) (%d+) (%S+)#%d+ ()(%+?)(%d+)() (%d+) %S+$')
  if capacity_s == ARGV[6] and holder ~= owner
      and (units_s == capacity_s or ARGV[7] == capacity_s) then
    local pttl = redis.call('PTTL', META)
    local left = pttl - fence
    if left > 0 then
      if mode == 'try' then
        return { 0, left, -1, tonumber(last) }
      end
      local _, now_ms = server_time()
      local entry = name .. ' ' .. lease_text(lease) .. ' ' .. fixed .. ' ' .. ARGV[7]
      -- (The meta outlives the queue by a fence life: its TTL less that
      -- caps the queue's, as queue_cap says.)
      local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout, flag == '',
        pttl - FENCE_LIFE)
      if flag == '' or queue_life then
        local life = pttl
        if queue_life and queue_life + FENCE_LIFE > life then
          life = queue_life + FENCE_LIFE
        end
        local grown = life - left > FENCE_LIFE and life - left or FENCE_LIFE
        redis.call('SET', META, string.sub(stored, 1, at - 1) .. '+'
          .. (grown == FENCE_LIFE and ARGV[2] or fmt(grown)) .. string.sub(stored, rest),
          'PX', fmt(left + grown))
      end
      return waiting_reply(left, position, last)
    end
  end
end
local now_us, now_ms = server_time()
local meta = read_meta(now_ms, true, stored or false, nil, now_us)
-- (A capacity as the meta writes it is the meta's number, one unit 1.)
local capacity = ARGV[6] == meta.capacity_s and not meta.set and meta.capacity
  or whole_arg(ARGV[6], 'capacity', 'units')
local units = ARGV[7] == '1' and 1 or ARGV[7] == ARGV[6] and capacity
  or whole_arg(ARGV[7], 'units', 'units')
if units > capacity then
  fail('ERR fairlock: a call asks for ' .. fmt(units) .. ' units of ' .. fmt(capacity))
end
if not string.find(name, '^%S+ %d+$') then
  holder_arg(owner, call)
end
-- The units and capacity as the meta writes them (formatted only when not
-- written so already).
local units_s = (ARGV[7] == '1' or ARGV[7] == meta.capacity_s) and ARGV[7]
  or string.match(ARGV[7], '^[1-9]%d*$') or fmt(units)
local asked = capacity
if meta.set then
  -- Once set_permits set them, the meta's permits are the semaphore's
  -- whatever the call says, and a call for more units than they are is
  -- refused (it would never be admitted): its place and its refusal's
  -- record (below) go. Unless this call holds already (delivered again,
  -- or handed its hold while it waited): it answers with its hold below.
  if units > meta.capacity and not hold_of_call(meta, owner, call, units, now_ms) then
    forget(name .. ' ' .. lease .. ' ' .. fixed .. ' ' .. units_s)
    fail('FAIRLOCK_PERMITS_EXCEEDED ' .. fmt(units) .. ' ' .. fmt(meta.capacity))
  end
  capacity = meta.capacity
elseif meta.capacity and meta.capacity ~= capacity then
  -- This call's capacity is not the lock's: two clients that disagree on a
  -- semaphore's permits get an error, before any write, instead of
  -- admitting more holders than either meant.
  fail('FAIRLOCK_PERMITS_MISMATCH ' .. fmt(capacity) .. ' ' .. fmt(meta.capacity) .. ' '
    .. fmt(FENCE_LIFE))
end
-- The number in force when it is not this call's (set_permits set it), or
-- nil: put at the end of every reply, where a nil ends a table as if absent.
local in_force = capacity ~= asked and capacity or nil
local fresh = not meta.capacity
if fresh then
  meta.capacity = capacity
  meta.capacity_s = string.match(ARGV[6], '^[1-9]%d*$') or fmt(capacity)
end

-- The common case first: a new call (no live guard of this owner, not a
-- poll) whose units fit, nobody waiting. A lone hold whose lease ran out
-- is replaced; holds in the holders zset whose lease ran out stay counted
-- until a call that does not fit drops them. The holders key's PTTL tells
-- whether the counted holds are still there (-2: the key is gone, so none
-- are) and whether its TTL must grow to cover this lease; ZADD NX finds
-- this call holding already (a repeat), which the slow path answers, as it
-- does a lone hold of this call and an upgradable read's call whose hold
-- a downgrade made a read (hold_of_call).
-- Whether the queue key exists, once read (nothing below changes it before
-- the slow path reads it again).
local queued = nil
if guard == '0' and mode ~= 'poll' then
  local lone, used = meta.lone, meta.used
  if lone and lone.ends < now_ms then
    lone, used = nil, math.max(0, used - lone.units)
  end
  if used + units <= capacity
      and not (lone and lone.call == call and lone.owner == owner) then
    -- (Only when the meta says waiters may be queued.)
    queued = meta.waiters and redis.call('EXISTS', QUEUE) == 1
    meta.waiters = queued
  end
  if queued == false then
    local life = -2
    if used > 0 and not lone then
      life = redis.call('PTTL', HOLDERS)
      if life == -2 then
        used = 0
      end
    end
    local number = math.max(tonumber(meta.last) + 1, now_us)
    local token = fmt(number)
    local ends = now_ms + lease
    local added = 2
    meta.lone = nil
    if used == 0 then
      -- Nobody holds: the hold is the meta's lone hold.
      life = lease
      meta.lone = { owner = owner, call = call, units = units, units_s = units_s,
        token = token, ends = ends }
    elseif lone then
      -- Beside a lone hold: both go into the holders zset.
      local held, member = lone_name(lone), name .. ' ' .. units_s
      redis.call('ZADD', HOLDERS, lone.ends, held, '-' .. lone.token, '#' .. held,
        ends, member, '-' .. token, '#' .. member)
      life = math.max(lone.ends - now_ms, lease) + 1
      redis.call('PEXPIRE', HOLDERS, fmt(life))
    elseif units == 2147483648 and redis.call('ZSCORE', HOLDERS, owner .. ' ' .. call .. ' 1') then
      -- An upgradable read's call that holds a read: downgraded, and
      -- delivered again; the slow path answers with that hold.
      added = 0
    else
      local member = name .. ' ' .. units_s
      added = redis.call('ZADD', HOLDERS, 'NX', ends, member, '-' .. token, '#' .. member)
      if added == 2 and life < lease + 1 then
        life = lease + 1
        redis.call('PEXPIRE', HOLDERS, fmt(life))
      end
    end
    if added == 2 then
      meta.used, meta.last = used + units, token
      write_meta(meta, life + FENCE_LIFE, now_ms)
      return in_force and { 1, number, lease, in_force } or number
    end
  end
end

live_used(meta)

-- Re-entry, checked before anything is written.
local reenter = false
if guard ~= '0' then
  local _, held_units = hold_by_token(meta, guard, owner, nil, now_ms)
  -- (An upgradable read beside any hold of its thread too: one at a time,
  -- and a write downgraded beside it would make two.)
  if held_units and (held_units < units or units == 2147483648) then
    fail('FAIRLOCK_UPGRADE_REFUSED ' .. owner .. ' ' .. guard .. ' '
      .. (units == capacity and 'write ' or 'upgradable ')
      .. (held_units == 1 and 'read' or held_units == capacity and 'write' or 'upgradable'))
  end
  reenter = held_units ~= nil
end

local held, left, held_as = hold_of_call(meta, owner, call, units, now_ms)
if held then
  -- This very call holds: handed over while it waited, or delivered
  -- twice. A poll keeps a short handed-over lease alive until its watchdog
  -- renews it.
  if mode == 'poll' then
    left = extend_lease_counted(meta, held_as, lease, fixed, left, now_ms)
  end
  return { 1, tonumber(held), left, in_force }
end
if mode == 'poll' then
  -- Refused while queued (admit_waiters: set_permits cut the number below
  -- its units), its deadline left as the record: told so, even after a
  -- raise, rather than queued again at the back.
  local entry = name .. ' ' .. lease .. ' ' .. fixed .. ' ' .. units_s
  -- (Two ZSCOREs, the second only for a call no longer queued: ZMSCORE
  -- would need a command the documented ACL line lacks.)
  local refused = not redis.call('ZSCORE', QUEUE, entry) and redis.call('ZSCORE', QUEUE, '~' .. entry)
  if refused and tonumber(refused) >= tonumber(deadline_score(now_ms)) then
    forget(entry)
    fail('FAIRLOCK_PERMITS_REFUSED ' .. units_s)
  end
end

local dropped = drop_expired(meta, now_ms)
-- Room once the run-out holds are gone, nobody waiting (or a re-entry).
if not reenter and meta.used + units <= capacity and queued == nil then
  queued = meta.waiters and redis.call('EXISTS', QUEUE) == 1
  meta.waiters = queued
end
if reenter or (meta.used + units <= capacity and not queued) then
  local _, token = take_hold(meta, owner, call, units, lease, now_us, now_ms, units_s)
  keep_anchor_counted(meta, now_ms)
  return in_force and { 1, token, lease, in_force } or token
end

-- (A whole number of ms below 10^14 is concatenated as its digits.)
local entry = name .. ' ' .. lease .. ' ' .. fixed .. ' ' .. units_s
-- Next most common: no room for this call, and none freed since the last
-- call that admitted waiters (only run-out holds free room between calls,
-- and none were dropped), so no waiter ahead can enter either: this call
-- queues (or, a try, answers) as the mutex's does behind a holder.
if meta.used + units > capacity and dropped == 0 then
  if mode == 'try' then
    return { 0, first_lease_left(meta, now_ms), -1, tonumber(meta.last), in_force }
  end
  local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout,
    not meta.waiters and not fresh, queue_cap(meta, now_ms))
  -- (A meta made anew is written whole, as on every path that queues.)
  keep_queued(meta, queue_life, now_ms, fresh)
  return { 0, first_lease_left(meta, now_ms), position, tonumber(meta.last), in_force }
end

local head, _, _, _, _, _, head_units = live_head(now_ms, split_counted_entry)
local handed = {}
-- The waiters ahead of this call go first, as far as they fit (a head that
-- does not fit lets nobody in: a read behind a queued write).
if head and head ~= entry and meta.used + head_units <= capacity then
  handed = admit_waiters(meta, now_us, now_ms, entry)
  head = live_head(now_ms, split_counted_entry)
end
if (head == nil or head == entry) and meta.used + units <= capacity then
  if head then
    forget(entry)
  end
  local _, token = take_hold(meta, owner, call, units, lease, now_us, now_ms, units_s)
  -- The calls right behind this one that fit enter with it.
  local behind = admit_waiters(meta, now_us, now_ms, nil)
  if head and #behind == 0 then
    tell_head(now_ms, first_lease_left(meta, now_ms), split_counted_entry)
  end
  keep_anchor_counted(meta, now_ms)
  return in_force and { 1, token, lease, in_force } or token
end

if mode == 'try' then
  if #handed > 0 or dropped > 0 then
    keep_anchor_counted(meta, now_ms)
  end
  return { 0, first_lease_left(meta, now_ms), -1, tonumber(meta.last), in_force }
end
local position, queue_life = join_queue(entry, mode, now_ms, waiter_timeout,
  not meta.waiters and not fresh, queue_cap(meta, now_ms))
keep_queued(meta, queue_life, now_ms, #handed > 0 or dropped > 0 or fresh)
return { 0, first_lease_left(meta, now_ms), position, tonumber(meta.last), in_force }
