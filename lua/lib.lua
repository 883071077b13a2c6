-- lib.lua: the steps fairlock's lock scripts share. build.rs puts in each
-- operation's script only the definitions below that it uses (and those
-- they use), each before the top-level statement that first needs it, so
-- each script stays one atomic EVALSHA and pays for no helper it does not
-- call (a fast path that returns early builds none that only later
-- statements need), while each step is written once.
--
-- Every lock has one anchor key, whose value names the data format of all
-- of its keys as its first word, "v<format>" (FORMAT below: build.rs puts
-- in the number, which the Rust side has as DATA_FORMAT), and which lives
-- as long as any other key of the lock: a mutex's (an election's) lock
-- key, a counted lock's meta. Every script reads the anchor before
-- anything else of the lock and stops, before any write, at another
-- format's ("FAIRLOCK_FORMAT <found> <mine> <key>", found "unversioned"
-- for the layout before formats: fail), so no build misreads another's
-- data or takes another's lock for free (docs/compatibility.md).
-- Keys of one lock (all share one cluster hash slot through a {tag}):
--   KEYS[1] lock       string  held: "v<format> <token> <owner>#<calls>
--                              <fence ms> <mark>",
--                              its PX the lease + fence ms, so the hold is
--                              over once PTTL <= fence ms and the last token
--                              outlives it; free: "v<format> <token> -
--                              <mark>", its PX the fence life, or at most
--                              two fence lives when a release kept the TTL
--                              it had (or gone). A "+" before the fence ms
--                              (free: "+" for "-") says waiters may be
--                              queued: it is set whenever a call joins the
--                              queue and dropped only where the queue is
--                              found empty, so a lock key without it has
--                              nobody queued and its fast paths (a free
--                              lock taken, a lone hold released) read no
--                              queue key. token: the
--                              last fencing token issued; calls: the ids,
--                              comma-separated, of the acquire calls counted
--                              in the hold (the first and each re-entry),
--                              after the last '#' (an owner id may hold
--                              one);
--                              mark ("-" when none): "<the call that last
--                              freed the lock>[ <detail>]", so that the
--                              same call delivered again is known, and its
--                              last word "^<token>" when a revocation
--                              (revoke.lua) asks the holds up to that token
--                              to let go (the hold of the time; later ones
--                              have larger tokens), or that word alone
--   KEYS[2] queue      zset    entry -> arrival sequence number
--   KEYS[3] deadlines  zset    entry -> liveness deadline, server milliseconds
-- Keys of one counted lock, a semaphore or a reader-writer lock (its own
-- keys, beside the mutex's of the same name; the queue keys in the same
-- places, so the queue steps below serve both engines). A hold is named
-- "<owner> <call> <units>"; a lone hold (the only one) lives in the meta,
-- like a mutex's holder in its lock key, and the holders zset comes into
-- play only when a second hold comes in beside it (both then move there,
-- until none is left):
--   KEYS[1] holders    zset    per hold two members: its name -> its lease
--                              end, server ms (a hold is live while its end
--                              >= now), and "#" and its name -> minus its
--                              fencing token (so a live guard's token
--                              names its hold for re-entry: ZRANGEBYSCORE
--                              -token -token); lease ends are the scores
--                              from 0 up, tokens the ones below 0
--   KEYS[2] queue, KEYS[3] deadlines, as a lock's, but each entry carries
--                              the units it asks for as a fifth field
--                              (parse_counted_entry)
--   KEYS[4] meta       string  "<capacity> <used> <last token> <mark or
--                              ->" (the anchor), after the format word
--                              "v<format>", and " +" after it when
--                              waiters may be queued; or with a lone hold
--                              "<capacity> <token> <owner>#<call>
--                              [+]<fence ms> <units> <mark or ->", its
--                              used units its units and its last token
--                              its token, its PX the lease + fence ms, so
--                              the hold is over once PTTL <= fence ms (as a
--                              mutex's lock key; a meta that must outlive
--                              the queue longer gets more fence ms, its
--                              lease unchanged), and its '+' (before the
--                              fence ms) saying waiters may be queued:
--                              the units there are (a semaphore's permits,
--                              written "=<permits>" once set_permits set
--                              them; a reader-writer lock's RW_CAPACITY,
--                              all of which a write takes and one a read),
--                              the units the holds take, the last token
--                              issued, the "<owner>#<call>" of the last
--                              release; it outlives every holder and
--                              waiter by the fence life. The '+' is set
--                              whenever a call joins the queue and dropped
--                              only where the queue is found empty, so a
--                              meta without it has nobody queued and its
--                              fast paths (a free lock taken, a lone hold
--                              released) read no queue key. While a hold
--                              is left, the mark may end in "^<token>"
--                              (be only that, with no mark): a revocation
--                              (revoke.lua) asks the holds up to that
--                              token to let go
-- A call is admitted when it heads the queue (or nobody waits) and its
-- units fit beside the held ones: that admission test is the only place
-- where a semaphore and a reader-writer lock differ, and it is a number.
-- A queue entry is "<owner> <wait id> <lease ms> <fixed 0|1>": the waiting
-- call and the grant it gets, so a handoff reads one member. An owner id is
-- "<client id>:<thread number, or u<call> when unbound>[@<identity>]"; its
-- client's channel is ARGV[1] .. client id.
-- ARGV[1] is always the wake channel prefix (with a hash tag of the lock's
-- slot when sharded: see wake), ARGV[2] the fence life in ms.
-- Messages: "G <wait id> <token> <ttl ms>" = the lock was handed to you;
--           "H <wait id> <pttl ms>" = you head the queue, lock expires in pttl
--           (-2: poll now; set_permits.lua says so to a call it took out
--           of the queue, whose poll then gets its error);
--           "R <token> <lock key>" = your holds of that lock (KEYS[1]) with
--           tokens up to that one are asked to let go (revoke.lua).
-- An election (the mutex's engine on keys of its own) also says on its
-- channel "<token> <value> <owner>" when it grants its lock (value: what
-- follows the first '@' in the owner id) and "resigned <token>" when a
-- hold ends with nobody to hand it to (ANNOUNCE), and keeps each of those
-- changes in a fourth key of its own:
--   KEYS[4] history    list    "<last term before it> <message>", newest
--                              first, the newest 16, kept a fence life
--                              after the last change
-- Time is read only from the server's TIME, and only where a token or a
-- deadline needs it; clients never send timestamps.

local LOCK = KEYS[1]
local QUEUE = KEYS[2]
local DEADLINES = KEYS[3]
local HOLDERS = KEYS[1]
local META = KEYS[4]
local WAKE_PREFIX = ARGV[1]

-- Integers as exact decimal strings (tostring would print 1.7e+15). '%d'
-- formats through a C long, 64 bits on every server fairlock runs on, so
-- it is exact up to 2^53 (every ms and µs count here), and costs half of
-- what '%.0f' does. The other way, a string of digits (a %d+ capture, a
-- token as fmt wrote it) is read as `s + 0`: Lua's arithmetic converts it
-- as tonumber does, without the call.
local function fmt(n)
  return string.format('%d', n)
end

-- Stops the script with the error reply `message` ("<CODE> <text>"). Redis
-- 7.0 and later (which define redis.REDIS_VERSION) and Valkey reply with it
-- as is. Redis 6.2's error handler fails on a table raised as an error (the
-- reply then says only "attempt to concatenate"), so there it is raised as
-- a string and Redis replies
-- "ERR Error running script (call to f_<sha>): @user_script:<line>: <message>".
-- Given `stored`, a lock's anchor value (of `key`) this build cannot read,
-- the reply is "FAIRLOCK_FORMAT <found> <mine> <key>" instead when the
-- value is another format's (found "unversioned" for the layout before
-- formats, which `before` matches): see the header. One function for both,
-- so that no fast path builds a closure for the refusal.
local function fail(message, stored, key, before)
  local found = stored and (string.match(stored, '^v(%d+) ')
    or (string.find(stored, before) and 'unversioned'))
  if found and found ~= '@FORMAT@' then
    message = 'FAIRLOCK_FORMAT ' .. found .. ' @FORMAT@ ' .. key
  end
  if redis.REDIS_VERSION then
    error({ err = message })
  end
  error(message, 0)
end

-- `value` (an ARGV string) as a whole number of ms from 1 to 365 days (the
-- client's MAX_LEASE); anything else stops the script before it writes, so
-- no failing PX can leave a key without a TTL behind a write.
local function ms_arg(value, what)
  local n = tonumber(value)
  if not n or n % 1 ~= 0 or n < 1 or n > 31536000000 then
    fail('ERR fairlock: ' .. what .. ' must be a whole number of ms from 1 to 31536000000, got '
      .. tostring(value))
  end
  return n
end

-- What the checks of a call's arguments found, under the ARGV strings
-- they read: a client sends the same fence life, lease and waiter timeout
-- on every call. Only the Functions library (FCALL) reads these: it
-- defines them once, when Redis loads the library, and keeps them from
-- call to call (build.rs: a value that reads neither KEYS nor ARGV), so
-- that its versions (`-- @library`) of the steps below check each such
-- string, and work out its numbers, once per change rather than on every
-- call. A script run by EVALSHA starts afresh each call, so its versions
-- work them out every time (keeping them would only cost it). They hold
-- only what a pure function of those strings gives, so a call reads the
-- same from them as it would work out. The fence life last read:
local checked_fence_in = false
-- as ms_arg read it:
local checked_fence = false
-- and as fmt writes that (fence_text; false until asked):
local checked_fence_s = false
-- The lease last read (lease_arg):
local checked_lease_in = false
-- as ms_arg read it:
local checked_lease = false
-- and as fmt writes that (lease_text; false until asked):
local checked_lease_s = false
-- with the fence life checked_px_fence, the PX of a hold of it:
local checked_px_fence = false
local checked_px = false
-- The mutex acquire's settings last read (settings_arg), and their parts:
local checked_settings_in = false
local checked_fixed = false
local checked_timeout = false
local checked_mode = false
local checked_live = false
-- The queue keys' life last pushed out to (keep_queue_for), and as written:
local checked_life_ms = false
local checked_life = false
-- The wake prefix last read (wake), and the command that publishes on it:
local checked_wake_in = false
local checked_publish = false

-- The fence life ARGV[2] in ms, as ms_arg reads it, once per value in a
-- row (checked_fence_in; the library's FENCE_LIFE).
local function fence_life(value)
  if checked_fence_in ~= value then
    checked_fence = ms_arg(value, 'fence life')
    checked_fence_in, checked_fence_s = value, false
  end
  return checked_fence
end

-- How long a lock's key (its last token and mark) outlives the hold that
-- wrote it, freed or run out (the client's fence_life).
local FENCE_LIFE = ms_arg(ARGV[2], 'fence life')
-- @library
local FENCE_LIFE = fence_life(ARGV[2])

-- How an election tells of each change of its leader, ANNOUNCE(message,
-- last): nil in the mutex's scripts, which announce nothing (and pay one
-- nil test where an election's announce). build.rs assembles the
-- election's scripts from the mutex's files with the `@election`
-- definition below in its place.
local ANNOUNCE = nil
-- @election
-- Says `message` on the election's channel "<key prefix>:election:<name>",
-- sharded "<key prefix>:{<tag>}:election:<name>" (from its lock key
-- "<key prefix>:{<tag>}:elect:<name>"; a key prefix holds no '{'; which,
-- read from ARGV[1] as wake reads it, so that the election's scripts need no
-- definition the mutex's lack) and keeps "<last> <message>" in its history
-- (KEYS[4], a list, newest first), `last` being the last term issued before the
-- change: the newest 16 changes (fairlock::ELECTION_HISTORY_LEN), kept a
-- fence life after the last one, so that a watcher that lost messages
-- reads what it missed, and from `last` knows whether it missed more.
-- O(1): LPUSH, an LTRIM that drops at most one entry, PEXPIRE. Each is a
-- pcall: one the caller's ACL user may not make (a channel it is not
-- granted, a list command an older ACL line lacks) fails alone and the
-- step it tells of stands; a message lost is read from the history, and a
-- change the history lacks makes a watcher say it missed some.
local function ANNOUNCE(message, last)
  local sharded = string.find(ARGV[1], '{', 1, true) -- as wake reads it
  local publish = sharded and 'spublish' or 'publish'
  redis.pcall(publish, (string.gsub(LOCK, '^([^{]*)({%x+}:)elect:',
    sharded and '%1%2election:' or '%1election:', 1)), message)
  redis.pcall('LPUSH', KEYS[4], string.format('%d', last) .. ' ' .. message)
  redis.pcall('LTRIM', KEYS[4], 0, 15)
  redis.pcall('PEXPIRE', KEYS[4], FENCE_LIFE)
end

-- The lease `value` (an ARGV string) as ms_arg reads it, and the PX of a
-- hold with that lease: lease + FENCE_LIFE, as a string for SET.
local function lease_arg(value)
  local lease = ms_arg(value, 'lease')
  return lease, fmt(lease + FENCE_LIFE)
end
-- @library
-- Worked out once per lease and fence life in a row (checked_lease_in).
local function lease_arg(value)
  if checked_lease_in ~= value or checked_px_fence ~= FENCE_LIFE then
    local lease = ms_arg(value, 'lease')
    checked_lease, checked_px = lease, fmt(lease + FENCE_LIFE)
    checked_lease_in, checked_px_fence, checked_lease_s = value, FENCE_LIFE, false
  end
  return checked_lease, checked_px
end

-- The PX lease_arg gave for a lease written `lease_s` (in a queue entry),
-- or nil: then the caller works it out.
local function lease_px(lease_s)
  return nil
end
-- @library
local function lease_px(lease_s)
  if checked_lease_in == lease_s and checked_px_fence == FENCE_LIFE then
    return checked_px
  end
end

-- The `lease` lease_arg read, as fmt writes it.
local function lease_text(lease)
  return fmt(lease)
end
-- @library
-- Once per lease (checked_lease_s).
local function lease_text(lease)
  if not checked_lease_s then
    checked_lease_s = fmt(lease)
  end
  return checked_lease_s
end

-- FENCE_LIFE as fmt writes it.
local function fence_text()
  return fmt(FENCE_LIFE)
end
-- @library
-- Once per fence life (checked_fence_s).
local function fence_text()
  if not checked_fence_s then
    checked_fence_s = fmt(FENCE_LIFE)
  end
  return checked_fence_s
end

-- The mutex acquire's settings `value` (its ARGV[6]: "<fixed 0|1> <waiter
-- timeout ms> <mode> <live token>"), as fixed, waiter timeout (ms, as
-- ms_arg reads it), mode and live token; anything else stops the script
-- before it writes.
local function read_settings(value)
  local fixed, waiter_timeout, mode, live_token =
    string.match(value or '', '^([01]) (%S*) (%S+) (%d+)$')
  if not fixed then
    fail('ERR fairlock: ARGV[6] must be "<fixed 0|1> <waiter timeout ms> <mode> <live token>",'
      .. ' got ' .. tostring(value))
  end
  waiter_timeout = ms_arg(waiter_timeout, 'waiter timeout')
  if mode ~= 'try' and mode ~= 'first' and mode ~= 'poll' then
    fail('ERR fairlock: mode must be try, first or poll, got ' .. mode)
  end
  return fixed, waiter_timeout, mode, live_token
end

-- read_settings(value).
local function settings_arg(value)
  return read_settings(value)
end
-- @library
-- Once per value in a row (checked_settings_in): a waiting call sends the
-- same settings on each attempt, and a client's calls mostly the same.
local function settings_arg(value)
  if checked_settings_in ~= value then
    checked_settings_in = false
    checked_fixed, checked_timeout, checked_mode, checked_live = read_settings(value)
    checked_settings_in = value
  end
  return checked_fixed, checked_timeout, checked_mode, checked_live
end

-- The life the queue keys are pushed out to, 2 * `ms`, as fmt writes it.
local function queue_life_text(ms)
  return fmt(2 * ms)
end
-- @library
-- Once per `ms` in a row (checked_life_ms).
local function queue_life_text(ms)
  if checked_life_ms ~= ms then
    checked_life = fmt(2 * ms)
    checked_life_ms = ms
  end
  return checked_life
end

-- The command that publishes on the wake prefix's channels (see wake).
local function publish_command()
  return string.find(WAKE_PREFIX, '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
end
-- @library
-- Once per wake prefix in a row (checked_wake_in).
local function publish_command()
  if checked_wake_in ~= WAKE_PREFIX then
    checked_publish = string.find(WAKE_PREFIX, '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
    checked_wake_in = WAKE_PREFIX
  end
  return checked_publish
end

-- The parts of the lock key's value `stored` (what GET gave: callers read
-- it themselves, so a fast path that needs less reads it once): last token
-- (a string, '0' when the key is gone), owner and calls (nil when free or
-- when the lease ran out), the mark ('' when none), for a hold its fence
-- ms and lease ms left (-1: no expiry), from `pttl` when the caller read
-- the key's PTTL already, and whether waiters may be queued (the '+' of
-- the value; false when the key is gone: the queue keys never outlive it).
-- A string of another format, or one fairlock did not write, stops the
-- script before any write (fail).
local function read_lock(stored, pttl)
  if not stored then
    return '0', nil, nil, '', nil, nil, false
  end
  -- A hold first (one match: the owner's %S+ gives back to the last '#'),
  -- then a free lock.
  local token, owner, calls, waiters, fence, mark =
    string.match(stored, '^v@FORMAT@ (%d+) (%S+)#([%d,]+) (%+?)(%d+) (.+)$')
  if not token then
    local word
    token, word, mark = string.match(stored, '^v@FORMAT@ (%d+) ([-+]) (.+)$')
    if not token then
      fail('WRONGTYPE the lock key holds a value fairlock did not write', stored, LOCK,
        '^%d+ %S+ %S+ %S+')
    end
    return token, nil, nil, mark ~= '-' and mark or '', nil, nil, word == '+'
  end
  local fence_ms = fence + 0
  waiters = waiters == '+'
  if mark == '-' then
    mark = ''
  end
  pttl = pttl or redis.call('PTTL', LOCK)
  if pttl == -1 then
    return token, owner, calls, mark, fence_ms, -1, waiters
  end
  if pttl <= fence_ms then
    return token, nil, nil, mark, nil, nil, waiters
  end
  return token, owner, calls, mark, fence_ms, pttl - fence_ms, waiters
end

-- Records the free lock: its last `token` and `mark` (the call that freed
-- it), kept for FENCE_LIFE, and whether `waiters` may be queued.
local function write_free(token, mark, waiters)
  redis.call('SET', LOCK, 'v@FORMAT@ ' .. token .. (waiters and ' + ' or ' - ')
    .. (mark ~= '' and mark or '-'), 'PX', fmt(FENCE_LIFE))
end

-- Records the hold: `calls` of `owner` with `token`, keeping `mark` and
-- the last token for `fence` ms after the lease, and whether `waiters`
-- may be queued; with a lease of `ttl` ms, or the lease it has when `ttl`
-- is nil. `px` and `fence_s`, when the caller has them, are the PX (ttl +
-- fence) and the fence as written.
local function write_hold(token, owner, calls, mark, fence, ttl, waiters, px, fence_s)
  local value = 'v@FORMAT@ ' .. token .. ' ' .. owner .. '#' .. calls .. (waiters and ' +' or ' ')
    .. (fence_s or fmt(fence)) .. ' ' .. (mark ~= '' and mark or '-')
  if ttl then
    redis.call('SET', LOCK, value, 'PX', px or fmt(ttl + fence))
  else
    redis.call('SET', LOCK, value, 'KEEPTTL')
  end
end

-- Server time as (microseconds, milliseconds). TIME's two strings are
-- numbers to Lua's arithmetic, without a call to convert them.
local function server_time()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, (us - us % 1000) / 1000
end

-- Takes the lock for acquire call `call` of `owner` with a lease of `ttl`
-- ms (`px`, when the caller has it: the PX, ttl + FENCE_LIFE, as a
-- string), whatever the lock key held; returns the token (a number and as
-- written), max(last + 1,
-- `now_us`): the server clock in µs, or 0 where the caller read no clock
-- (a free key that keeps the last token). The lock key keeps the last
-- token while held and for FENCE_LIFE after the hold ends; each token is
-- at most the clock when it was issued (last + 1 lags it, as a take never
-- comes within a µs of the one before), so the clock alone keeps tokens
-- increasing after the key is gone (or after Redis lost its data) unless
-- the server clock steps back further.
-- `mark` is kept, so that a repeat of the call that last freed the lock is
-- still known after later takes; `waiters` says whether the queue may hold
-- any (the caller knows).
-- An election announces its new leader (a repeat of the call that took
-- it takes nothing, so it is announced once).
local function take(owner, ttl, now_us, call, last, mark, waiters, px)
  local token = last + 1
  if now_us > token then
    token = now_us
  end
  local token_s = fmt(token)
  write_hold(token_s, owner, call, mark, FENCE_LIFE, ttl, waiters, px, fence_text())
  if ANNOUNCE then
    ANNOUNCE(token_s .. ' ' .. (string.match(owner, '@(.*)$') or '') .. ' ' .. owner, last)
  end
  return token, token_s
end

-- The mark and detail of a lock key's mark ('' each when none).
local function split_mark(mark)
  if string.find(mark, '^', 1, true) then
    -- Its revocation word (revoke.lua) is no part of it.
    mark = string.match(mark, '^(.*) %^%d+$') or (string.match(mark, '^%^%d+$') and '') or mark
  end
  local space = string.find(mark, ' ', 1, true)
  if not space then
    return mark, ''
  end
  return string.sub(mark, 1, space - 1), string.sub(mark, space + 1)
end

-- A lock key's `mark` with its revocation word asking the holds up to
-- `token` to let go (revoke.lua), in place of any earlier one.
local function with_revocation(mark, token)
  local seen, detail = split_mark(mark)
  if seen == '' then
    return '^' .. token
  elseif detail == '' then
    return seen .. ' ^' .. token
  end
  return seen .. ' ' .. detail .. ' ^' .. token
end

-- Whether acquire call `call` is counted in the hold's `calls`.
local function counts_call(calls, call)
  return string.find(',' .. calls .. ',', ',' .. call .. ',', 1, true) ~= nil
end

-- A queue entry's parts: owner id, wait id, lease ms (number), fixed ('0'
-- or '1'); nil for a member fairlock did not write.
local function parse_entry(entry)
  local owner, wait_id, lease, fixed = string.match(entry, '^(%S+) (%d+) (%d+) ([01])$')
  return owner, wait_id, tonumber(lease), fixed
end

-- A queue entry given in ARGV, as parse_entry reads it, its lease checked;
-- anything else stops the script before it writes.
local function entry_arg(value)
  local owner, wait_id, lease, fixed = parse_entry(value)
  if not owner then
    fail('ERR fairlock: a queue entry must be "<owner> <wait id> <lease ms> <fixed 0|1>", got '
      .. value)
  end
  return owner, wait_id, ms_arg(lease, 'lease'), fixed
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
      local owner, wait_id, lease, fixed, units = parse(head)
      if owner then
        return head, deadline, owner, wait_id, lease, fixed, units
      end
    end
    forget(head)
  end
end

-- Publishes `message` on the channel of `owner`'s client. How it travels
-- is as the client says in ARGV[1]: a wake prefix with a hash tag ("<key
-- prefix>:wake:{<tag>}:", the tag one of the lock's slot: a client on a
-- Redis Cluster of 7.0 or later) names shard channels, for SPUBLISH, which
-- keeps a message on the lock's shard; one without ("<key prefix>:wake:",
-- a key prefix holds no '{') classic ones, for PUBLISH, which a cluster
-- copies to every node. Decided here (publish_command), not per call:
-- only a call that wakes someone pays for it.
local function wake(owner, message)
  local client = string.match(owner, '^([^:]+):')
  if client then
    redis.call(publish_command(), WAKE_PREFIX .. client, message)
  end
end

-- Tells the holds of `owner`'s client on this lock (KEYS[1]: a lock key,
-- or a counted lock's holders) whose tokens are up to `token` what became
-- of them: `what` 'R' asks them to let go (a revocation), 'L' says they
-- were freed (a force release).
local function tell_holder(owner, what, token)
  wake(owner, what .. ' ' .. token .. ' ' .. KEYS[1])
end

-- tell_holder once to each client among `owners` (its holds of this lock
-- hear it together).
local function tell_holders(owners, what, token)
  local told = {}
  for _, owner in ipairs(owners) do
    local client = string.match(owner, '^([^:]+):') or owner
    if not told[client] then
      told[client] = true
      tell_holder(owner, what, token)
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
    local owner, wait_id = parse(head)
    wake(owner, 'H ' .. wait_id .. ' ' .. pttl)
  end
end

-- Hands the lock to the first live waiter and wakes it with the token; the
-- next waiter learns it now heads the queue. `last` is the last token
-- issued, `mark` the mark to keep. Returns (owner, wait id, token, ttl) of
-- the new holder, or nil (and changes nothing but dropping dead entries)
-- when nobody live waits. A watchdog-renewed grant lasts no longer than
-- the waiter's own liveness deadline, so a waiter that died while queued
-- holds the lock no longer than it would have held its place. Without a
-- time given, TIME is read only if someone waits. The new hold says
-- whether waiters are left (the next head, read before it is written).
local function hand_over(now_us, now_ms, last, mark)
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
    local owner, wait_id, lease_s, fixed = string.match(head, '^(%S+) (%d+) (%d+) ([01])$')
    if owner and deadline and deadline >= now_ms then
      local ttl = lease_s + 0
      local ttl_s, px = lease_s, nil
      if fixed == '0' and deadline - now_ms < ttl then
        ttl = math.max(1, deadline - now_ms)
        ttl_s = fmt(ttl)
      else
        px = lease_px(lease_s)
      end
      local next_head = live_head(now_ms)
      local token, token_s = take(owner, ttl, now_us, wait_id, last, mark, next_head ~= nil, px)
      wake(owner, 'G ' .. wait_id .. ' ' .. token_s .. ' ' .. ttl_s)
      tell_head(now_ms, ttl, nil, next_head or false)
      return owner, wait_id, token, ttl
    end
  end
end

-- Keeps the mutex's lock key (the anchor, whose format word stands for
-- the queue's keys too) marked as having waiters (the '+' its fast paths
-- look for) and, when `ms` is given (keep_queue_for pushed the queue keys
-- out to it), alive at least `ms`: a free key's TTL pushed out; a hold's
-- fence grown by as much as its TTL, so its lease stays as it was.
-- `stored` is the lock key's value if the caller has it, `pttl` its PTTL
-- if read (-1: no expiry).
local function keep_anchor(ms, stored, pttl)
  stored = stored or redis.call('GET', LOCK)
  if not stored then
    return
  end
  if ms and not pttl then
    pttl = redis.call('PTTL', LOCK)
  end
  local grow = ms and pttl ~= -1 and pttl < ms
  local head, flag, fence, rest = string.match(stored, '^(v@FORMAT@ %d+ %S+ )(%+?)(%d+)( .*)$')
  if fence then
    if grow then
      redis.call('SET', LOCK, head .. '+' .. fmt(fence + ms - pttl) .. rest, 'PX', fmt(ms))
    elseif flag == '' then
      redis.call('SET', LOCK, head .. '+' .. fence .. rest, 'KEEPTTL')
    end
    return
  end
  local token, word, mark = string.match(stored, '^v@FORMAT@ (%d+) ([-+]) (.*)$')
  if grow then
    redis.call('SET', LOCK, 'v@FORMAT@ ' .. token .. ' + ' .. mark, 'PX', fmt(ms))
  elseif word == '-' then
    redis.call('SET', LOCK, 'v@FORMAT@ ' .. token .. ' + ' .. mark, 'KEEPTTL')
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

-- Frees the held lock (token `token`) for the next live waiter (the time
-- may be nil: see hand_over), or records it free when nobody waits (an
-- election then announces that the hold of `token` ended); either way
-- with `mark`, the call that freed it. Returns what hand_over returns.
local function free_lock(now_us, now_ms, token, mark)
  local owner, wait_id, new_token, ttl = hand_over(now_us, now_ms, token, mark)
  if not owner then
    write_free(token, mark, false)
    if ANNOUNCE then
      ANNOUNCE('resigned ' .. token, token)
    end
  end
  return owner, wait_id, new_token, ttl
end

-- Gives back the hold that acquire call `call` of `owner` counted, once.
-- `token`, `calls`, `mark`, `fence` and `waiters` are the hold as
-- read_lock returned it, after the caller checked that `owner` holds it.
-- Returns (true, holds left) when it counted one, (false, holds left) when
-- that call holds nothing (given back already, or never counted); at 0
-- left the lock went on as free_lock says, whose results follow.
local function give_back(owner, token, calls, mark, fence, call, waiters)
  if calls == call then
    -- The one hold, the common case.
    return true, 0, free_lock(nil, nil, token, owner .. '#' .. call)
  end
  local kept, found = {}, false
  for id in string.gmatch(calls, '[^,]+') do
    if id == call and not found then
      found = true
    else
      kept[#kept + 1] = id
    end
  end
  if not found then
    return false, #kept
  end
  if #kept > 0 then
    write_hold(token, owner, table.concat(kept, ','), mark, fence, nil, waiters)
    return true, #kept
  end
  return true, 0, free_lock(nil, nil, token, owner .. '#' .. call)
end

-- Removes `entry` from the queue; the lock goes to the next live waiter
-- if it is free (`held` false; `last`, `mark` and the lease ms `left` as
-- read_lock gave them), and a new head learns of it.
local function leave_queue(entry, held, last, mark, left, now_us, now_ms)
  local was_head = redis.call('ZRANK', QUEUE, entry) == 0
  forget(entry)
  prune(now_ms)
  if not held then
    hand_over(now_us, now_ms, last, mark)
  elseif was_head then
    tell_head(now_ms, left)
  end
end

-- Keeps a handed-over lease alive until the owner's watchdog renews it:
-- `left` ms (-1: no expiry) become at least `lease`; returns the lease
-- left now. `fence` as read_lock returned it.
local function extend_lease(lease, fence, left)
  if left ~= -1 and left < lease then
    redis.call('PEXPIRE', LOCK, fmt(lease + fence))
    return lease
  end
  return left
end

-- The counted engine's steps (a semaphore, a reader-writer lock). Its
-- capacity, used units, last token and mark live in the meta key, and so
-- does a lone hold; two holds or more live in the holders zset, each as
-- two members: its lease end and its token. The steps pass the meta
-- around as one table (read_meta), which they change and write back
-- (write_meta, keep_counted).

-- `value` (an ARGV string) as a whole number of units from 1 to
-- 4294967295 (a capacity or what a call asks for); anything else stops the
-- script before it writes.
local function units_arg(value, what)
  local n = tonumber(value)
  if not n or n ~= math.floor(n) or n < 1 or n > 4294967295 then
    fail('ERR fairlock: ' .. what .. ' must be a whole number from 1 to 4294967295, got '
      .. tostring(value))
  end
  return n
end

-- Checks the owner and call (ARGV strings) that name a hold "<owner>
-- <call> <units>": an owner with a space or a call that is not a number
-- stops the script before it writes, since either would make the hold's
-- name ambiguous.
local function holder_arg(owner, call)
  if not string.match(owner or '', '^%S+$') or not string.match(call or '', '^%d+$') then
    fail('ERR fairlock: owner must be an id without spaces and call a number, got '
      .. tostring(owner) .. ' and ' .. tostring(call))
  end
end

-- A hold's parts: owner, call (a string), units (a number); nil for a
-- name fairlock did not write.
local function parse_holder(member)
  local owner, call, units = string.match(member, '^(%S+) (%d+) (%d+)$')
  return owner, call, tonumber(units)
end

-- A counted queue entry's parts as written (strings): owner id, wait id,
-- lease ms, fixed ('0' or '1'), units; nil for a member fairlock did not
-- write. The mutex's 4-field entries are not counted entries (nor the
-- other way round).
local function split_counted_entry(entry)
  return string.match(entry, '^(%S+) (%d+) (%d+) ([01]) (%d+)$')
end

-- A counted queue entry's parts, its lease ms and units as numbers.
local function parse_counted_entry(entry)
  local owner, wait_id, lease, fixed, units = split_counted_entry(entry)
  return owner, wait_id, tonumber(lease), fixed, tonumber(units)
end

-- A counted queue entry given in ARGV, as parse_counted_entry reads it,
-- its lease and units checked; anything else stops the script before it
-- writes.
local function counted_entry_arg(value)
  local owner, wait_id, lease, fixed, units = parse_counted_entry(value)
  if not owner then
    fail('ERR fairlock: a queue entry must be "<owner> <wait id> <lease ms> <fixed 0|1>'
      .. ' <units>", got ' .. value)
  end
  return owner, wait_id, ms_arg(lease, 'lease'), fixed, units_arg(units, 'units')
end

-- The units the holds in the holders zset take, counted one by one: only
-- when the meta is gone (deleted by hand) while holds are left. (Lease
-- ends are scores from 0 up, tokens below 0.)
local function count_used()
  local used = 0
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', HOLDERS, 0, '+inf')) do
    local _, _, units = parse_holder(member)
    used = used + (units or 0)
  end
  return used
end

-- The meta's used units made live: 0 when they count holds of the holders
-- zset and that key is gone (deleted by hand, evicted), since those are
-- holds nobody has, so the count follows the key and the lock stays
-- usable. A lone hold is in the meta itself.
local function live_used(meta)
  if meta.used > 0 and not meta.lone and redis.call('EXISTS', HOLDERS) == 0 then
    meta.used = 0
  end
end

-- The meta as a table: capacity (nil when the key is gone: a lock nobody
-- used for a fence life; capacity_s the same as written; set true when
-- set_permits set it, written with a leading '='), used units, last
-- token (a string, '0' when gone), mark ('' when none), revoked (the token,
-- a string, up to which a revocation asks holds to let go; nil when none),
-- waiters (whether the meta says waiters may be queued: its '+') and lone,
-- the one hold when there is exactly one ({owner, call, units, units_s,
-- token, ends, fence, pttl}: units_s its units as written, ends its lease
-- end, server ms, from the meta's PTTL less its fence ms, which with the
-- meta's PTTL `pttl` it keeps as read; nil otherwise, the holds then in the
-- holders zset). `now_ms` is the server's time (a lone hold's end is read
-- from the meta's PTTL), `stored` the meta's value when the caller read it
-- (false: gone). Numbers kept as the strings they were read as save
-- formatting them again (string.format costs about a third of a no-op
-- EVALSHA). A value fairlock did not write stops the script before any
-- write. The used units are live_used's unless `lazy` (a fast path that
-- learns whether the holders key is there from its own reads).
local function read_meta(now_ms, lazy, stored)
  if stored == nil then
    stored = redis.call('GET', META)
  end
  if not stored then
    -- (Whether anyone waits is not known: queue keys deleted by hand may
    -- outlive it.)
    return { used = count_used(), last = '0', mark = '', waiters = true }
  end
  local capacity, token, owner, call, flag, fence, units, mark = string.match(stored,
    '^v@FORMAT@ (=?%d+) (%d+) (%S+)#(%d+) (%+?)(%d+) (%d+) (%S+)$')
  local used, last, lone
  if capacity then
    used, last = tonumber(units), token
    local fence_ms = tonumber(fence)
    local pttl = redis.call('PTTL', META)
    -- (No TTL: the hold is read as running a year.)
    local ends = pttl < 0 and now_ms + 31536000000 or now_ms + pttl - fence_ms
    lone = { owner = owner, call = call, units = used, units_s = units,
      token = token, ends = ends, fence = fence_ms, pttl = pttl }
  else
    capacity, used, last, mark, flag = string.match(stored,
      '^v@FORMAT@ (=?%d+) (%d+) (%d+) (%S+)( ?%+?)$')
    if not capacity then
      fail('WRONGTYPE the meta key holds a value fairlock did not write', stored, META,
        '^=?%d+ %d+ %d+')
    end
  end
  local revoked = nil
  if string.find(mark, '^', 1, true) then
    -- A revocation's token (revoke.lua) ends the mark.
    local bare, at = string.match(mark, '^(.-)%^(%d+)$')
    if bare then
      mark, revoked = bare, at
    end
  end
  if mark == '-' then
    mark = ''
  end
  local set = string.byte(capacity) == 61
  local meta = { capacity = tonumber(set and string.sub(capacity, 2) or capacity),
    capacity_s = capacity, set = set, used = tonumber(used), last = last, mark = mark,
    revoked = revoked, lone = lone, waiters = flag ~= '' }
  if not lazy then
    live_used(meta)
  end
  return meta
end

-- Writes the meta: "v<format> <capacity> <used> <last> <mark or
-- ->[ +]", or with a lone hold "v<format> <capacity> <token> <owner>#<call>
-- [+]<fence ms> <units> <mark or ->" (its used units its units, its last
-- token its token), living `life` ms (nil: the TTL it has; a lone hold
-- written anew gets its lease and a fence life). A lone hold's lease is
-- the meta's PTTL less its fence ms, so its fence ms are what `life` adds
-- to the lease left (at least a fence life); `now_ms` the server's time.
-- The mark ends in "^<revoked>" while a revocation is recorded and a hold
-- is left; the '+' says waiters may be queued (meta.waiters).
local function write_meta(meta, life, now_ms)
  local lone, used = meta.lone, meta.used
  local mark = meta.mark
  if meta.revoked and used > 0 then
    mark = mark .. '^' .. meta.revoked
  end
  if mark == '' then
    mark = '-'
  end
  -- One concatenation each: one string made.
  local capacity_s = meta.capacity_s or fmt(meta.capacity)
  local value
  if lone then
    local fence = lone.fence
    local left = math.max(0, lone.ends - now_ms)
    if life or not fence then
      fence = math.max(FENCE_LIFE, (life or 0) - left)
      life = left + fence
    end
    -- (A fence of the fence life is written as the client sent it.)
    value = 'v@FORMAT@ ' .. capacity_s .. ' ' .. lone.token .. ' ' .. lone.owner .. '#'
      .. lone.call .. ' ' .. (meta.waiters and '+' or '')
      .. (fence == FENCE_LIFE and ARGV[2] or fmt(fence)) .. ' ' .. lone.units_s .. ' ' .. mark
  else
    local used_s = used == 0 and '0' or fmt(used)
    value = 'v@FORMAT@ ' .. capacity_s .. ' ' .. used_s .. ' ' .. meta.last .. ' ' .. mark
      .. (meta.waiters and ' +' or '')
  end
  if life then
    redis.call('SET', META, value, 'PX', fmt(life))
  else
    redis.call('SET', META, value, 'KEEPTTL')
  end
end

-- Stops the script, before it writes, when this call's `capacity` is not
-- the lock's (the `meta`'s, nil when not set): two clients that disagree
-- on a semaphore's permits get an error instead of admitting more holders
-- than either meant. Once set_permits set them, the meta's permits are
-- the semaphore's whatever the call says, and a call for more `units`
-- than they are is refused (it would never be admitted). Returns the
-- capacity to admit by.
local function check_capacity(capacity, meta, units)
  local stored = meta.capacity
  if meta.set then
    if units > stored then
      fail('FAIRLOCK_PERMITS_EXCEEDED ' .. fmt(units) .. ' ' .. fmt(stored))
    end
    return stored
  end
  if stored and stored ~= capacity then
    fail('FAIRLOCK_PERMITS_MISMATCH ' .. fmt(capacity) .. ' ' .. fmt(stored) .. ' '
      .. fmt(FENCE_LIFE))
  end
  return capacity
end

-- The name "<owner> <call> <units>" of the meta's lone hold.
local function lone_name(lone)
  return lone.owner .. ' ' .. lone.call .. ' ' .. lone.units_s
end

-- The token (a string) and ms of lease left of hold `member`, or nil when
-- it holds nothing live. In the holders zset a hold is two members: its
-- name, scored by its lease end, and "#" and its name, scored by minus its
-- token; a lone hold is the meta's.
local function hold_of(meta, member, now_ms)
  local lone = meta.lone
  if lone then
    if lone.ends >= now_ms and lone_name(lone) == member then
      return lone.token, lone.ends - now_ms
    end
    return nil
  end
  if meta.used == 0 then
    return nil
  end
  local ends = tonumber(redis.call('ZSCORE', HOLDERS, member))
  if not ends or ends < now_ms then
    return nil
  end
  return fmt(-tonumber(redis.call('ZSCORE', HOLDERS, '#' .. member) or '0')), ends - now_ms
end

-- The live hold of acquire call `call` of `owner`, asked with `units`, as
-- hold_of gives it, and its name: under the name of its own units, or, for
-- a reader-writer lock's upgradable read (2147483648 units) or write
-- (4294967295), under the name an upgrade or a downgrade gave it since,
-- so that a call delivered again after its hold changed answers with that
-- hold instead of taking a second one. nil when it holds nothing live.
local function hold_of_call(meta, owner, call, units, now_ms)
  local lone = meta.lone
  if lone then
    if lone.owner == owner and lone.call == call and lone.ends >= now_ms then
      return lone.token, lone.ends - now_ms, lone_name(lone)
    end
    return nil
  end
  local name = owner .. ' ' .. call .. ' '
  local names = { fmt(units) }
  if units == 2147483648 then
    names = { '2147483648', '4294967295', '1' }
  elseif units == 4294967295 then
    names = { '4294967295', '2147483648', '1' }
  end
  for _, as in ipairs(names) do
    local held, left = hold_of(meta, name .. as, now_ms)
    if held then
      return held, left, name .. as
    end
  end
  return nil
end

-- The live hold whose token is `token` if `owner` (and, when given, call
-- `call`) made it, with its units and lease ms left; nil otherwise. The
-- hold is its name in the holders zset, or the meta's lone hold itself (a
-- table: drop_hold takes either). Reads only: in the holders zset the
-- token is a score.
local function hold_by_token(meta, token, owner, call, now_ms)
  local lone = meta.lone
  if lone then
    if lone.token == token and lone.owner == owner and (not call or lone.call == call)
        and lone.ends >= now_ms then
      return lone, lone.units, lone.ends - now_ms
    end
    return nil
  end
  if meta.used == 0 or not string.match(token, '^%d+$') then
    return nil
  end
  local found = redis.call('ZRANGEBYSCORE', HOLDERS, '-' .. token, '-' .. token, 'LIMIT', 0, 1)[1]
  if not found then
    return nil
  end
  local member = string.sub(found, 2)
  local h_owner, h_call, units = parse_holder(member)
  if h_owner ~= owner or (call and h_call ~= call) then
    return nil
  end
  local ends = tonumber(redis.call('ZSCORE', HOLDERS, member))
  if not ends or ends < now_ms then
    return nil
  end
  return member, units, ends - now_ms
end

-- Gives back hold `member` of `units` (the lone hold, named or as
-- hold_by_token gives it, or both its members in the holders zset).
local function drop_hold(meta, member, units)
  local lone = meta.lone
  if lone and (member == lone or lone_name(lone) == member) then
    meta.lone = nil
  else
    redis.call('ZREM', HOLDERS, member, '#' .. member)
  end
  meta.used = math.max(0, meta.used - units)
end

-- Drops every hold whose lease ran out, so that the used units count live
-- holds only; returns how many it dropped (when any, the caller writes the
-- meta: keep_counted). Each hold is dropped once: O(log N) amortised.
-- Only commands the ACL line of docs/security.md grants (no
-- ZREMRANGEBYSCORE).
local function drop_expired(meta, now_ms)
  local lone = meta.lone
  if lone then
    if lone.ends < now_ms then
      meta.lone = nil
      meta.used = math.max(0, meta.used - lone.units)
      return 1
    end
    return 0
  end
  if meta.used == 0 then
    return 0
  end
  local dropped = 0
  while true do
    local dead = redis.call('ZRANGEBYSCORE', HOLDERS, 0, '(' .. fmt(now_ms), 'LIMIT', 0, 100)
    if #dead == 0 then
      return dropped
    end
    dropped = dropped + #dead
    local members = {}
    for _, member in ipairs(dead) do
      local _, _, units = parse_holder(member)
      meta.used = math.max(0, meta.used - (units or 0))
      members[#members + 1] = member
      members[#members + 1] = '#' .. member
    end
    redis.call('ZREM', HOLDERS, unpack(members))
  end
end

-- Gives call `call` of `owner` a hold of `units` for `ttl` ms; returns its
-- token (a string), max(last + 1, server clock in µs), as the mutex's take
-- does. The first hold is the meta's lone hold; a second one moves the
-- lone hold into the holders zset beside it. `units_s`, the units as
-- written, if the caller has them. The caller writes the meta
-- (keep_counted).
local function take_hold(meta, owner, call, units, ttl, now_us, now_ms, units_s)
  local number = math.max(tonumber(meta.last) + 1, now_us)
  local token = fmt(number)
  local ends = now_ms + ttl
  meta.last = token
  local lone = meta.lone
  units_s = units_s or fmt(units)
  if not lone and meta.used == 0 then
    meta.lone = { owner = owner, call = call, units = units, units_s = units_s, token = token,
      ends = ends }
  else
    local member = owner .. ' ' .. call .. ' ' .. units_s
    if lone then
      local name = lone_name(lone)
      redis.call('ZADD', HOLDERS, lone.ends, name, '-' .. lone.token, '#' .. name,
        ends, member, '-' .. token, '#' .. member)
      meta.lone = nil
    else
      redis.call('ZADD', HOLDERS, ends, member, '-' .. token, '#' .. member)
    end
  end
  meta.used = meta.used + units
  return token, number
end

-- Ms until the first live lease runs out (when the head of the queue can
-- claim units a dead holder never gave back), 0 when none is live.
local function first_lease_left(meta, now_ms)
  local lone = meta.lone
  if lone then
    return math.max(0, lone.ends - now_ms)
  end
  if meta.used == 0 then
    return 0
  end
  local first = redis.call('ZRANGEBYSCORE', HOLDERS, fmt(now_ms), '+inf', 'LIMIT', 0, 1,
    'WITHSCORES')[2]
  return first and tonumber(first) - now_ms or 0
end

-- Gives hold `member` (the lone hold, named or as hold_by_token gives it,
-- or its name in the holders zset) of `units` the units `to` instead, in
-- place, and a new token, max(last + 1, server clock in µs), as take_hold
-- does: its owner, call and lease end stay. A reader-writer lock's upgrade
-- and downgrade (upgrade.lua, downgrade.lua, settle_claim). Returns the
-- new token (a string) and the lease ms left. The caller writes the meta
-- (keep_counted).
local function change_hold(meta, member, units, to, now_us, now_ms)
  local token = fmt(math.max(tonumber(meta.last) + 1, now_us))
  meta.last = token
  meta.used = meta.used - units + to
  local to_s = fmt(to)
  local lone = meta.lone
  if lone and (member == lone or lone_name(lone) == member) then
    lone.units, lone.units_s, lone.token = to, to_s, token
    return token, lone.ends - now_ms
  end
  local ends = redis.call('ZSCORE', HOLDERS, member)
  local owner, call = parse_holder(member)
  local renamed = owner .. ' ' .. call .. ' ' .. to_s
  redis.call('ZREM', HOLDERS, member, '#' .. member)
  redis.call('ZADD', HOLDERS, ends, renamed, '-' .. token, '#' .. renamed)
  return token, tonumber(ends) - now_ms
end

-- Settles an upgrade's claim, which admit_waiters found at the head of the
-- queue with room for it: a reader-writer lock's queue entry of call
-- `wait_id` of `owner` asking for 2147483647 units, what a write takes
-- beyond the upgradable read (2147483648 units) that call holds, so it
-- fits once the reads granted before it are gone (upgrade.lua queues it
-- ahead of everyone). The upgradable read becomes the write in place
-- (change_hold), its owner hears "G <wait id> <token> <lease ms left>",
-- and the grant is added to `handed`; a claim whose upgradable read is
-- gone (its lease ran out, force unlocked) is dropped and its owner told
-- "H <wait id> 0", so that it asks at once and learns its hold is lost.
-- Returns false, touching nothing, when the entry is no claim (a call of
-- a semaphore's: the lock's meta key says which kind it is); the caller
-- forgot the entry already.
local function settle_claim(meta, owner, wait_id, now_us, now_ms, handed)
  if not string.match(META, '^[^{]*{%x+}:rwmeta:') then
    return false
  end
  local member = owner .. ' ' .. wait_id .. ' 2147483648'
  if not hold_of(meta, member, now_ms) then
    wake(owner, 'H ' .. wait_id .. ' 0')
    return true
  end
  local token, left = change_hold(meta, member, 2147483648, 4294967295, now_us, now_ms)
  wake(owner, 'G ' .. wait_id .. ' ' .. token .. ' ' .. fmt(left))
  handed[#handed + 1] = { owner, tonumber(wait_id), tonumber(token), left }
  return true
end

-- Takes the first live entry out of a counted lock's queue (ZPOPMIN, its
-- deadline dropped with it) and returns it, its liveness deadline and its
-- parts as split_counted_entry reads them, or nil when none is left. Dead
-- or foreign entries ahead of it are dropped, as live_head drops them.
-- For a caller that knows the head leaves the queue whatever it asks.
local function pop_live_head(now_ms)
  while true do
    local head = redis.call('ZPOPMIN', QUEUE)[1]
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('ZSCORE', DEADLINES, head))
    redis.call('ZREM', DEADLINES, head)
    if deadline and deadline >= now_ms then
      local owner, wait_id, lease, fixed, units = split_counted_entry(head)
      if owner then
        return head, deadline, owner, wait_id, lease, fixed, units
      end
    end
  end
end

-- Admits the live waiters at the head of the queue, in arrival order,
-- while each one's units fit beside the used ones: a head that does not
-- fit stops it, so no smaller call behind passes it. Stops at `stop` (an
-- entry that takes its own hold) if given. Each gets a token and "G <wait
-- id> <token> <ttl>", its grant bounded by its liveness deadline as
-- hand_over's; the new head, if any was admitted, hears "H", as tell_head
-- tells it. An upgrade's claim at the head is settled (settle_claim). A
-- head that asks for more than the capacity (a semaphore whose number
-- set_permits cut since it queued) leaves the queue, told "H <wait id>
-- -2", and is counted in `meta.refused`: O(log N) each, as it comes to the
-- head, so nothing reads the queue beyond its head.
-- Returns the list of {owner, wait id, token, ttl} admitted.
local function admit_waiters(meta, now_us, now_ms, stop)
  local handed = {}
  while true do
    -- With no units held (and no entry to stop at) the head leaves the
    -- queue whatever it asks (admitted, or refused for more than there
    -- are): it is popped (pop_live_head), else read where it stands.
    local popped = meta.used == 0 and not stop
    local head, deadline, owner, wait_id, lease, fixed, units_s
    if popped then
      head, deadline, owner, wait_id, lease, fixed, units_s = pop_live_head(now_ms)
    else
      head, deadline, owner, wait_id, lease, fixed, units_s =
        live_head(now_ms, split_counted_entry)
    end
    if not head then
      -- Nobody left in the queue: the meta may say so.
      meta.waiters = false
      break
    end
    local units = tonumber(units_s)
    if units > meta.capacity and head ~= stop then
      -- A call for more than a number set_permits set since it queued: it
      -- can never be admitted, so it leaves the queue as it reaches the
      -- head, told to poll ("H <wait id> -2"), which answers the error.
      if not popped then
        forget(head)
      end
      wake(owner, 'H ' .. wait_id .. ' -2')
      meta.refused = (meta.refused or 0) + 1
    elseif head == stop or meta.used + units > meta.capacity then
      if #handed > 0 or meta.refused then
        wake(owner, 'H ' .. wait_id .. ' ' .. first_lease_left(meta, now_ms))
      end
      break
    else
      if not popped then
        forget(head)
      end
      -- An upgrade's claim (its units no read or write asks for) is
      -- settled in place of a new hold.
      if units ~= 2147483647 or not settle_claim(meta, owner, wait_id, now_us, now_ms, handed) then
        local ttl, ttl_s = tonumber(lease), lease
        if string.byte(lease, 1) == 48 then
          ttl_s = fmt(ttl)
        end
        if fixed == '0' then
          local bound = math.max(1, math.min(ttl, deadline - now_ms))
          if bound ~= ttl then
            ttl, ttl_s = bound, fmt(bound)
          end
        end
        local token, number = take_hold(meta, owner, wait_id, units, ttl, now_us, now_ms, units_s)
        wake(owner, 'G ' .. wait_id .. ' ' .. token .. ' ' .. ttl_s)
        handed[#handed + 1] = { owner, tonumber(wait_id), number, ttl }
      end
    end
  end
  return handed
end

-- Writes the meta and the TTLs of a counted lock's keys after a write: the
-- holders zset lives until the farthest lease ends, the meta a fence life
-- past that and past the queue's TTL, so the capacity and the last token
-- outlive every holder and waiter (a later caller with other permits is
-- refused, and tokens keep increasing). A lone hold's lease is the
-- meta's TTL less its fence ms (write_meta). The queue's TTL is read only
-- when the meta says waiters may be queued.
local function keep_counted(meta, now_ms)
  local life = 0
  local lone = meta.lone
  if lone then
    life = math.max(0, lone.ends - now_ms)
  elseif meta.used > 0 then
    local far = tonumber(redis.call('ZRANGE', HOLDERS, -1, -1, 'WITHSCORES')[2])
    if far and far >= now_ms then
      life = far - now_ms + 1
      redis.call('PEXPIRE', HOLDERS, fmt(life))
    end
  end
  if meta.waiters then
    life = math.max(life, redis.call('PTTL', QUEUE))
  end
  write_meta(meta, life + FENCE_LIFE, now_ms)
end

-- Makes `key`, if it exists, live at least `ms` more; never shortens it.
local function outlive(key, ms)
  local ttl = redis.call('PTTL', key)
  if ttl ~= -2 and ttl < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- After a call joined the queue (or a claim was queued): the meta says
-- waiters may be queued, and when the queue's TTL was pushed out to
-- `queue_life` ms, outlives it by a fence life; a lone hold's lease stays
-- as it was (its fence ms grow). Writes the meta only when either changes.
local function keep_queued(meta, queue_life, now_ms)
  if meta.waiters and not queue_life then
    return
  end
  meta.waiters = true
  if not meta.capacity then
    return
  end
  local lone = meta.lone
  if lone then
    local left = math.max(0, lone.ends - now_ms)
    local life = left + (lone.fence or FENCE_LIFE)
    if queue_life and queue_life + FENCE_LIFE > life then
      life = queue_life + FENCE_LIFE
    end
    write_meta(meta, life, now_ms)
  elseif queue_life then
    write_meta(meta, math.max(redis.call('PTTL', META), queue_life + FENCE_LIFE), now_ms)
  else
    write_meta(meta, nil, now_ms)
  end
end

-- Keeps a hold handed to a waiting call alive until its owner's watchdog
-- renews it: a watchdog-renewed hold (`fixed` '0') of `member` with `left`
-- ms under its `lease` gets `lease` from now; a fixed one is left alone.
-- Returns the lease left now and whether it changed (the caller then
-- writes the meta and the keys' TTLs: keep_counted).
local function extend_hold(meta, member, lease, fixed, left, now_ms)
  if fixed == '0' and left < lease then
    if meta.lone then
      meta.lone.ends = now_ms + lease
    else
      redis.call('ZADD', HOLDERS, 'XX', now_ms + lease, member)
    end
    return lease, true
  end
  return left, false
end

-- Drops expired holds, then admits the live waiters at the head of the
-- queue that fit, as admit_waiters does (nobody when the meta is gone:
-- the capacity is unknown until a caller names it). Returns the grants
-- and the number of holds dropped; with any grant or drop, the caller
-- writes the meta (keep_counted).
local function pass_on(meta, now_us, now_ms)
  local dropped = drop_expired(meta, now_ms)
  if not meta.capacity then
    return {}, dropped
  end
  return admit_waiters(meta, now_us, now_ms, nil), dropped
end

-- `out` (a reply being built) followed by each grant of `handed` (as
-- admit_waiters returns them), flattened: owner, wait id, token, ttl.
local function with_grants(out, handed)
  for _, grant in ipairs(handed) do
    for _, part in ipairs(grant) do
      out[#out + 1] = part
    end
  end
  return out
end

-- Removes `entry` from the queue; the waiters its leaving unblocks (a
-- large head gone lets smaller ones behind it in; a hold run out lets the
-- head in) are admitted, and a new head learns of it.
local function leave_counted_queue(meta, entry, now_us, now_ms)
  local was_head = redis.call('ZRANK', QUEUE, entry) == 0
  forget(entry)
  prune(now_ms)
  local flagged = meta.waiters
  local handed, dropped = pass_on(meta, now_us, now_ms)
  -- (A queue left empty: the meta says so, and its fence ms shrink back.)
  if meta.capacity and (#handed > 0 or dropped > 0 or flagged ~= meta.waiters) then
    keep_counted(meta, now_ms)
  end
  if #handed == 0 and was_head then
    tell_head(now_ms, first_lease_left(meta, now_ms), parse_counted_entry)
  end
end
