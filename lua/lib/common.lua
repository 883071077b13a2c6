-- lib/common.lua: what every script may use: its keys and arguments, the
-- checks of the arguments (kept from call to call by the Functions library:
-- the checked_ values), numbers as text, the refusal (fail), the server's
-- time, and the lock key's mark. The files of lua/lib/ are one library of
-- the steps fairlock's lock scripts share, in this order: common.lua,
-- messages.lua, queue.lua, mutex.lua, counted.lua (each may use those
-- before it). build.rs puts in each operation's script only the
-- definitions of lua/lib/ that it uses (and those they use), each before the
-- top-level statement that first needs it, so each script stays one atomic
-- EVALSHA and pays for no helper it does not call (a fast path that returns
-- early builds none that only later statements need), while each step is
-- written once.
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
-- Keys of one lock all share one cluster hash slot through a {tag}: a
-- mutex's (an election's) in mutex.lua, a counted lock's in counted.lua,
-- the queue's, the same places in both, in queue.lua.
-- An owner id is "<client id>:<thread number, or u<call> when
-- unbound>[@<identity>]" (src/protocol/ builds it by the same grammar);
-- its client's channel is ARGV[1] .. client id (messages.lua).
-- ARGV[1] is always the wake channel prefix (with a hash tag of the lock's
-- slot when sharded: see wake), ARGV[2] the fence life in ms.
-- Time is read only from the server's TIME, and only where a token or a
-- deadline needs it; clients never send timestamps.

local LOCK = KEYS[1]
local QUEUE = KEYS[2]
local HOLDERS = KEYS[1]
local META = KEYS[3]
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

-- The reply of an acquire call that waits behind a hold: "0 <lease ms
-- left> <queue position> <last token>", one string of words
-- (protocol::operation::words), which Redis answers with for less work
-- than a list. `last` is the token's digits as read (a number that large
-- would print as 1.7e+15). The head's place, the most common, is written
-- as a constant: a number Lua turns into text costs a sprintf (2k).
local function waiting_reply(left, position, last)
  return '0 ' .. left .. ' ' .. (position == 0 and '0' or position) .. ' ' .. last
end

-- The reply of a release that handed the lock over: "<owner> <call id>
-- <token> <lease ms>" of the new holder, one string of words as
-- waiting_reply's (`token` and `ttl` as strings).
local function granted_reply(owner, call, token, ttl)
  return owner .. ' ' .. call .. ' ' .. token .. ' ' .. ttl
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
  error(redis.REDIS_VERSION and { err = message } or message, 0)
end

-- `value` (an ARGV string of decimal digits: not an exponent, hex or spaces,
-- which tonumber would take) as a whole number of ms from 1 to 365 days
-- (the client's MAX_LEASE), or given `units` ('units'), of units from 1 to
-- 4294967295 (a capacity or what a call asks for); anything else stops the
-- script before it writes, so no failing PX can leave a key without a TTL
-- behind a write. The units' bound is tested first: ms below it (most
-- leases, fence lives and timeouts) cost one test, as with a bound of
-- their own.
local function whole_arg(value, what, units)
  local n = string.find(value or '', '^%d+$') and tonumber(value)
  if not n or n < 1 or n > 4294967295 and (units or n > 31536000000) then
    local range = units and 'number from 1 to 4294967295' or 'number of ms from 1 to 31536000000'
    fail('ERR fairlock: ' .. what .. ' must be a whole ' .. range .. ', got ' .. tostring(value))
  end
  return n
end

-- The key of the acquire call a release gives back (ARGV: "<owner
-- id>#<call id>", as a lock's value names its hold and its mark the call
-- that freed it) as owner id and call id; anything else stops the script
-- before it writes. The release's fast paths find the key as given and
-- need no parts.
local function call_key_arg(value)
  local owner, call = string.match(value or '', '^(%S+)#(%d+)$')
  if not owner then
    fail('ERR fairlock: a call key must be "<owner>#<call id>", got ' .. tostring(value))
  end
  return owner, call
end

-- A release's lease check (its ARGV[5], when given): "check", sent when
-- the client does not vouch for the hold's lease, so the script reads its
-- PTTL; anything else stops the script before it writes. (A release whose
-- client vouches sends none, and calls nothing here.)
local function lease_check_arg(value)
  if value ~= 'check' then
    fail('ERR fairlock: a release\'s lease check must be "check" or none, got ' .. value)
  end
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
-- as whole_arg read it:
local checked_fence = false
-- and as fmt writes that (fence_text; false until asked):
local checked_fence_s = false
-- The lease last read (lease_arg):
local checked_lease_in = false
-- as whole_arg read it:
local checked_lease = false
-- and as fmt writes that (lease_text; false until asked):
local checked_lease_s = false
-- with the fence life checked_px_fence, the PX of a hold of it:
local checked_px_fence = false
local checked_px = false
-- The acquire settings last read (settings_arg), and their parts:
local checked_settings_in = false
local checked_fixed = false
local checked_timeout = false
local checked_mode = false
local checked_live = false
-- The queue key's life last pushed out to (keep_queue_for), and as written:
local checked_life_ms = false
local checked_life = false
-- The wake prefix last read (wake), and whether it names shard channels:
local checked_wake_in = false
local checked_sharded = false

-- The fence life ARGV[2] in ms, as whole_arg reads it, once per value in a
-- row (checked_fence_in; the library's FENCE_LIFE).
local function fence_life(value)
  checked_fence = whole_arg(value, 'fence life')
  checked_fence_in, checked_fence_s = value, false
  return checked_fence
end

-- How long a lock's key (its last token and mark) outlives the hold that
-- wrote it, freed or run out (the client's fence_life).
local FENCE_LIFE = whole_arg(ARGV[2], 'fence life')
-- @library
local FENCE_LIFE = checked_fence_in == ARGV[2] and checked_fence or fence_life(ARGV[2])

-- The lease `value` (an ARGV string) as whole_arg reads it, and the PX of a
-- hold with that lease: lease + FENCE_LIFE, as a string for SET.
local function lease_arg(value)
  local lease = whole_arg(value, 'lease')
  return lease, fmt(lease + FENCE_LIFE)
end
-- @library
-- Worked out once per lease and fence life in a row (checked_lease_in).
local function lease_arg(value)
  if checked_lease_in ~= value or checked_px_fence ~= FENCE_LIFE then
    local lease = whole_arg(value, 'lease')
    checked_lease, checked_px = lease, fmt(lease + FENCE_LIFE)
    checked_lease_in, checked_px_fence, checked_lease_s = value, FENCE_LIFE, false
  end
  return checked_lease, checked_px
end

-- The PX lease_arg gave for a lease written `lease_s` (in a queue entry),
-- or nil: then the caller works it out. A script run by EVALSHA keeps
-- none (nil: no closure built, and none called).
local lease_px = nil
-- @library
local function lease_px(lease_s)
  if checked_lease_in == lease_s and checked_px_fence == FENCE_LIFE then
    return checked_px
  end
end

-- The `lease` lease_arg read, as fmt writes it.
local lease_text = fmt
-- @library
-- Once per lease (checked_lease_s).
local function lease_text(lease)
  checked_lease_s = checked_lease_s or fmt(lease)
  return checked_lease_s
end

-- FENCE_LIFE as fmt writes it.
local function fence_text()
  return fmt(FENCE_LIFE)
end
-- @library
-- Once per fence life (checked_fence_s).
local function fence_text()
  checked_fence_s = checked_fence_s or fmt(FENCE_LIFE)
  return checked_fence_s
end

-- An acquire call's settings `value` (the mutex's ARGV[6], the counted
-- engine's ARGV[8]: "<fixed 0|1> <waiter timeout ms> <mode> <live guard
-- token>"), as fixed, waiter timeout (ms, as whole_arg reads it), mode and
-- live guard token (digits); anything else stops the script before it
-- writes.
local function read_settings(value)
  local fixed, waiter_timeout, mode, live_token =
    string.match(value or '', '^([01]) (%S*) (%S+) (%d+)$')
  if not fixed then
    fail('ERR fairlock: the acquire settings must be "<fixed 0|1> <waiter timeout ms> <mode>'
      .. ' <live guard token>", got ' .. tostring(value))
  end
  waiter_timeout = whole_arg(waiter_timeout, 'waiter timeout')
  if mode ~= 'try' and mode ~= 'first' and mode ~= 'poll' then
    fail('ERR fairlock: mode must be try, first or poll, got ' .. mode)
  end
  return fixed, waiter_timeout, mode, live_token
end

-- read_settings(value).
local settings_arg = read_settings
-- @library
-- Once per value in a row (checked_settings_in): a waiting call sends the
-- same settings on each attempt, and a client's calls mostly the same.
local function settings_arg(value)
  if checked_settings_in ~= value then
    checked_fixed, checked_timeout, checked_mode, checked_live = read_settings(value)
    checked_settings_in = value
  end
  return checked_fixed, checked_timeout, checked_mode, checked_live
end

-- The life the queue key is pushed out to, 2 * `ms`, as fmt writes it.
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

-- Redis command `...` on a key this script may have emptied (the queue,
-- a counted lock's holders). On a cluster slot being moved away its old
-- master refuses a script's command on a key it does not have, one the
-- script deleted too ("... non local key ..."), and that refusal would stop
-- the script half-way, what it wrote kept: it reads as the key gone (nil).
-- Any other error is raised as redis.call raises it. The handoff's own
-- reads (pop_live_head's ZPOPMIN, the PTTL of the queue a grant reads) make
-- the pcall themselves and come here only on an error: a call through here
-- cost each handoff 1.3-1.5k instructions more (server_cost).
local function emptied(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, 'non local key', 1, true) then
      return nil
    end
    return redis.call(...)
  end
  return reply
end

-- Server time as (microseconds, milliseconds), and given `text`, the
-- microseconds as fmt writes them when TIME's second has six digits of
-- them (else false): a grant's token, which is that time mostly, then
-- costs no sprintf. TIME's two strings are numbers to Lua's arithmetic,
-- without a call to convert them.
local function server_time(text)
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, (us - us % 1000) / 1000, text and #t[2] == 6 and t[1] .. t[2]
end

-- What the force release or the revoke of call key ARGV[3] answered, if
-- it ran already (the same call delivered again after its reply was lost,
-- or sent again after a stop: connections/steady.rs), as its record keeps
-- it (record_forced); nil when not. A repeat answers with it and frees or
-- asks nothing, whoever took the lock since: the lock key's (the meta's)
-- mark, which the next release overwrites, cannot tell it. The record is
-- KEYS' last, given to that script only (the force release's and the
-- revoke's are two keys: neither overwrites the other's), and read here
-- rather than named once for every call (build.rs's library sets those up
-- on each). A value no fairlock wrote stops the script before any write.
local function forced_before()
  local record = 'v@FORMAT@ ' .. ARGV[3] .. ' '
  local seen = redis.call('GET', KEYS[#KEYS])
  if seen and string.find(seen, record, 1, true) == 1 then
    return string.sub(seen, #record + 1)
  end
  -- Another program's value is left as it is, as under any key of the lock.
  -- Another format's record (one written alone, with no anchor, outlives
  -- it) is no match and is overwritten: the anchor, read by the caller,
  -- says whose lock it is (docs/compatibility.md).
  if seen and not string.find(seen, '^v%d+ ') then
    fail('WRONGTYPE the record key holds a value fairlock did not write')
  end
end

-- Records that the call of key ARGV[3] answered `answer`: "v<format>
-- <call key> <answer>", kept `px` ms, else a fence life, which the
-- anchor the force release then writes outlives (every write of it keeps
-- it at least a fence life; with no anchor the record stands alone).
-- Written before the anchor, so it never outlives it.
local function record_forced(answer, px)
  redis.call('SET', KEYS[#KEYS], 'v@FORMAT@ ' .. ARGV[3] .. ' ' .. answer, 'PX', px or fence_text())
end

-- A revoke's reply, {holds asked, up to token}, recorded (record_forced)
-- for no longer than `anchor` lives (the lock key, the meta; a fence life
-- without one): its repeat answers the same and asks nobody
-- (revoked_before).
local function answer_revoke(anchor, holds, up_to)
  local pttl = redis.call('PTTL', anchor)
  record_forced(holds .. ' ' .. up_to, pttl > 0 and pttl < FENCE_LIFE and fmt(pttl) or nil)
  return { holds, tonumber(up_to) }
end

-- The reply of the revoke of call key ARGV[3] if it ran already, else nil.
local function revoked_before()
  local holds, up_to = string.match(forced_before() or '', '^(%d+) (%d+)$')
  return holds and { tonumber(holds), tonumber(up_to) }
end

-- The mark and detail of a lock key's mark ('' each when none), and the
-- two as one, the mark without its revocation word.
local function split_mark(mark)
  if string.find(mark, '^', 1, true) then
    -- Its revocation word (revoke.lua) is no part of it.
    mark = string.match(mark, '^(.*) %^%d+$') or (string.match(mark, '^%^%d+$') and '') or mark
  end
  -- Split at its first space.
  local seen, detail = string.match(mark, '^([^ ]*) (.*)$')
  return seen or mark, detail or '', mark
end
