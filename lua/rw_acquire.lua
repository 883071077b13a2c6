-- rw_acquire.lua: take a read or write hold of a reader-writer lock,
-- re-enter it, or join (and stay in) its queue. FIFO phases: a reader
-- enters while no writer holds and no live waiter is queued ahead of it; a
-- writer when nobody holds and it heads the queue; consecutive readers at
-- the head enter together when the lock is handed on.
--
-- KEYS: holders, queue, deadlines, tokens, meta, writers (see lib.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] owner id "<client id>:<thread number>"
-- ARGV[4] lease ms: the hold's lease when this call gets it (1 .. MAX_MS)
-- ARGV[5] fixed: "1" = fixed lease (no watchdog), "0" = watchdog renews it
-- ARGV[6] waiter timeout ms: liveness deadline of a queued entry (1 .. MAX_MS)
-- ARGV[7] mode: "try"   never queue (try_read / try_write);
--               "first" first attempt of a waiting call: take or queue;
--               "poll"  later attempt of a queued call
-- ARGV[8] wait id: this call's id inside its client, echoed in wake
--         messages; the hold is "<owner> <wait id> <r|w>", so a call
--         delivered twice or handed the lock while queued answers with its
--         hold instead of taking a second one
-- ARGV[9] access: "r" (shared) or "w" (exclusive)
-- ARGV[10] token of a live guard this owner's client has of this lock (its
--         write guard if it has one), or "0". With a live hold of this
--         owner behind it, a read is granted at once (read in read, read in
--         write: even past queued writers, or the thread would wait for
--         itself), a write too if that hold is a write (write in write);
--         a write over a read hold is refused with the error reply
--         "ERR fairlock: read -> write upgrade refused: ...", nothing
--         written. A token of no live hold of this owner is ignored.
-- Returns token (an integer) when this call took a hold with its lease
--         (every hold, read or write, first or re-entered, gets its own
--         token, max(last + 1, server clock in µs)), {1, token, lease ms
--         left} when this call holds one otherwise (handed over while
--         queued, or a repeat), or {0, ms until the first live lease runs
--         out (0: none live), queue position, last token issued} when it
--         does not (position -1 for "try": not queued).
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); a hold taken with nobody waiting: GET, TIME,
-- ZSCORE, ZRANGEBYSCORE, EXISTS, ZCOUNT, ZADD, two HSETs (a writer: one
-- more ZADD), ZRANGE, three PEXPIREs, PTTL and SET.

local owner, lease, fixed = ARGV[3], ms_arg(ARGV[4], 'lease'), ARGV[5]
local waiter_timeout, mode, wait_id = ms_arg(ARGV[6], 'waiter timeout'), ARGV[7], ARGV[8]
local rw, guard = ARGV[9], ARGV[10]
if fixed ~= '0' and fixed ~= '1' then
  fail('ERR fairlock: fixed must be 0 or 1')
end
if mode ~= 'try' and mode ~= 'first' and mode ~= 'poll' then
  fail('ERR fairlock: mode must be try, first or poll, got ' .. tostring(mode))
end
if rw ~= 'r' and rw ~= 'w' then
  fail('ERR fairlock: access must be r or w, got ' .. tostring(rw))
end
if not string.match(guard or '', '^%d+$') then
  fail('ERR fairlock: the live guard token must be a number or 0, got ' .. tostring(guard))
end
local member = holder_arg(owner, wait_id) .. ' ' .. rw
local last, mark = read_rw_meta()
local now_us, now_ms = server_time()

-- Re-entry, checked before anything is written.
local reenter = false
if guard ~= '0' then
  local _, held_rw = rw_hold_by_token(guard, owner, nil, now_ms)
  if held_rw == 'r' and rw == 'w' then
    fail('ERR fairlock: read -> write upgrade refused: ' .. owner
      .. ' holds this rwlock for reading (token ' .. guard
      .. ') and asks to write; release the read first (waiting would deadlock)')
  end
  reenter = held_rw ~= nil
end

local held, left = hold_of(member, now_ms)
if held then
  -- This very call holds: handed over while it waited, or delivered
  -- twice. A poll keeps a short handed-over lease alive until its watchdog
  -- renews it.
  if mode == 'poll' then
    local extended
    left, extended = extend_rw_hold(member, rw, lease, fixed, left, now_ms)
    if extended then
      keep_rwlock(now_ms, last, mark)
    end
  end
  return { 1, tonumber(held), left }
end

drop_expired_holds(now_ms)
if reenter or (redis.call('EXISTS', QUEUE) == 0 and rw_free_for(rw, now_ms)) then
  last = rw_take(member, rw, lease, now_us, now_ms, last)
  keep_rwlock(now_ms, last, mark)
  return tonumber(last)
end

-- @helpers

local entry = owner .. ' ' .. wait_id .. ' ' .. fmt(lease) .. ' ' .. fixed .. ' ' .. rw
local head = live_head(now_ms, parse_rw_entry)
local handed = {}
if head and head ~= entry then
  -- The waiters ahead of this call go first, as far as the lock lets them.
  last, handed = admit_waiters(now_us, now_ms, last, entry)
  head = live_head(now_ms, parse_rw_entry)
end
if (head == nil or head == entry) and rw_free_for(rw, now_ms) then
  if head then
    forget(entry)
  end
  last = rw_take(member, rw, lease, now_us, now_ms, last)
  local token = last
  -- Readers right behind this one enter with it.
  last = admit_waiters(now_us, now_ms, last, nil)
  if head then
    tell_head(now_ms, first_lease_left(now_ms), parse_rw_entry)
  end
  keep_rwlock(now_ms, last, mark)
  return tonumber(token)
end

if mode == 'try' then
  if #handed > 0 then
    keep_rwlock(now_ms, last, mark)
  end
  return { 0, first_lease_left(now_ms), -1, tonumber(last) }
end
local position = join_queue(entry, mode, now_ms, waiter_timeout)
keep_rwlock(now_ms, last, mark)
return { 0, first_lease_left(now_ms), position, tonumber(last) }
