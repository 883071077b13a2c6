-- lib/mutex.lua: the mutex's engine (and an election's, the same engine on
-- keys of its own). Its keys:
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
--                              queue and on every hold a release hands
--                              over (the next arrival then writes no SET
--                              to put it back, for a ZCARD; the new
--                              holder's release with nobody queued takes
--                              the '+' path once), and dropped only where
--                              the queue is found empty, so a lock key
--                              without it has
--                              nobody queued and its fast paths (a free
--                              lock taken, a lone hold released) read no
--                              queue key. token: the
--                              last fencing token issued; calls: the ids,
--                              comma-separated, of the acquire calls counted
--                              in the hold (the first and each re-entry),
--                              after the last '#' (an owner id may hold
--                              one);
--                              mark ("-" when none): "<the call that last
--                              freed the lock>[ <detail>]" (a force
--                              release's: "F<call key> <holder>", which a
--                              renewal of the freed hold reads), so that
--                              the same release delivered again is known,
--                              and its
--                              last word "^<token>" when a revocation
--                              (revoke.lua) asks the holds up to that token
--                              to let go (the hold of the time; later ones
--                              have larger tokens), or that word alone
--   KEYS[2] queue (queue.lua)
--   then    the revoke's record (common.lua: answer_revoke), given to
--           revoke.lua and force_release.lua alone
--   last    the force release's record (common.lua: record_forced), given
--           to it alone
-- An election (the mutex's engine on keys of its own) also says on its
-- channel "<token> <value> <owner>" when it grants its lock (value: what
-- follows the first '@' in the owner id) and "resigned <token>" when a
-- hold ends with nobody to hand it to (ANNOUNCE), and keeps each of those
-- changes in a third key of its own:
--   KEYS[3] history    list    "<last term before it> <message>", newest
--                              first, the newest 16, kept a fence life
--                              after the last change

-- How an election tells of each change of its leader, ANNOUNCE(token,
-- owner, last): nil in the mutex's scripts, which announce nothing (and pay one
-- nil test where an election's announce). build.rs assembles the
-- election's scripts from the mutex's files with the `@election`
-- definition below in its place.
local ANNOUNCE = nil
-- @election
-- Says that `owner` leads with term `token` (a string), or that the hold of
-- `token` ended when `owner` is nil, on the election's channel "<key
-- prefix>:election:<name>" ("<token> <value> <owner>", the value what
-- follows the first '@' in the owner id, by protocol/owner.rs's grammar;
-- "resigned <token>"),
-- sharded "<key prefix>:{<tag>}:election:<name>" (from its lock key
-- "<key prefix>:{<tag>}:elect:<name>"; a key prefix holds no '{'; which,
-- read from ARGV[1] as wake reads it, so that the election's scripts need no
-- definition the mutex's lack) and keeps "<last> <message>" in its history
-- (KEYS[3], a list, newest first), `last` being the last term issued before the
-- change: the newest 16 changes (fairlock::ELECTION_HISTORY_LEN), kept a
-- fence life after the last one, so that a watcher that lost messages
-- reads what it missed, and from `last` knows whether it missed more.
-- O(1): LPUSH, an LTRIM that drops at most one entry, PEXPIRE. Each is a
-- pcall: one the caller's ACL user may not make (a channel it is not
-- granted, a list command an older ACL line lacks) fails alone and the
-- step it tells of stands (an LPUSH refused, for that or because the key
-- holds another program's value of another type, skips the trim and the
-- expiry: that value is left as it was); a message lost is read from the
-- history, and a change the history lacks makes a watcher say it missed
-- some.
local function ANNOUNCE(token, owner, last)
  local message = owner and (token .. ' ' .. (string.match(owner, '@(.*)$') or '') .. ' ' .. owner)
    or ('resigned ' .. token)
  local sharded = string.find(ARGV[1], '{', 1, true) -- as wake reads it
  local publish = sharded and 'spublish' or 'publish'
  redis.pcall(publish, (string.gsub(LOCK, '^([^{]*)({%x+}:)elect:',
    sharded and '%1%2election:' or '%1election:', 1)), message)
  if type(redis.pcall('LPUSH', KEYS[3], string.format('%d', last) .. ' ' .. message)) == 'number' then
    redis.pcall('LTRIM', KEYS[3], 0, 15)
    redis.pcall('PEXPIRE', KEYS[3], FENCE_LIFE)
  end
end

-- The parts of the lock key's value `stored` (what GET gave: callers read
-- it themselves, so a fast path that needs less reads it once): last token
-- (a string, '0' when the key is gone), owner and calls (nil when free or
-- when the lease ran out), the mark ('' when none), for a hold its fence
-- ms and lease ms left (-1: no expiry), from `pttl` when the caller read
-- the key's PTTL already, and whether waiters may be queued (the '+' of
-- the value; false when the key is gone: the queue never outlives it).
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
    return token, owner, calls, mark, fence_ms, -1, waiters, fence
  end
  if pttl <= fence_ms then
    return token, nil, nil, mark, nil, nil, waiters
  end
  return token, owner, calls, mark, fence_ms, pttl - fence_ms, waiters, fence
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
-- still known after later takes. `waiters` false: the caller knows nobody
-- is queued; true: the new hold gets its '+' (waiters may be queued: the
-- caller handed it over, or knows a live waiter is left), and the queue's
-- PTTL is read, which says how long the queue key lives: the fence grows
-- by as much as it would outlive the lock key (keep_anchor's rule), so
-- the lock key, whose format word stands for the queue's, outlives it.
-- An election announces its new leader (a repeat of the call that took
-- it takes nothing, so it is announced once). `now_text`, when the caller
-- has it: `now_us` as fmt writes it (pop_live_head).
local function take(owner, ttl, now_us, call, last, mark, waiters, px, now_text)
  local token = last + 1
  if now_us > token then
    token = now_us
  end
  local token_s = token == now_us and now_text or fmt(token)
  local fence, fence_s = FENCE_LIFE, fence_text()
  if waiters then
    local queue_ttl = redis.pcall('PTTL', QUEUE)
    -- (-2: the pop took the last waiter; then no type() to call.)
    if queue_ttl ~= -2 and type(queue_ttl) ~= 'number' then
      queue_ttl = emptied('PTTL', QUEUE) or -2
    end
    if queue_ttl > ttl + fence then
      fence = queue_ttl - ttl
      fence_s, px = fmt(fence), fmt(queue_ttl)
    end
  end
  write_hold(token_s, owner, call, mark, fence, ttl, waiters, px, fence_s)
  if ANNOUNCE then
    ANNOUNCE(token_s, owner, last)
  end
  return token, token_s
end

-- Whether acquire call `call` is counted in the hold's `calls`.
local function counts_call(calls, call)
  return string.find(',' .. calls .. ',', ',' .. call .. ',', 1, true) ~= nil
end

-- Hands the lock to the first live waiter and wakes it with the token.
-- `last` is the last token issued, `mark` the mark to keep. Returns
-- (owner, call id, token, ttl) of the new holder, or nil (and changes
-- nothing but dropping dead entries) when nobody live waits. A
-- watchdog-renewed grant lasts no longer than the waiter's own liveness
-- deadline, so a waiter that died while queued holds the lock no longer
-- than it would have held its place. Without a time given, TIME is read
-- only if someone waits. The new hold says waiters may be left (its '+',
-- whether or not any are: the next arrival finds the '+' in place, where
-- a hold without it cost that arrival a SET of the lock key), and
-- outlives them (take). The next waiter is not told
-- it now heads the queue: its client's next heartbeat says so (position 0
-- and the lease's end, within one watchdog period, a third of the lease at
-- most), which a handoff would otherwise pay for with a read of the queue,
-- a message and two thread wake-ups on every grant (cargo bench --bench
-- server_cost: 10% of a handoff's server work with 7 queued).
local function hand_over(now_us, now_ms, last, mark)
  local head, deadline, owner, call, lease_s, fixed, _, now_text
  head, now_us, now_ms, deadline, owner, call, lease_s, fixed, _, now_text =
    pop_live_head(now_us, now_ms, split_entry)
  if not head then
    return nil
  end
  local ttl, ttl_s, px = lease_s + 0, lease_s, nil
  if fixed == '0' and deadline - now_ms < ttl then
    ttl = deadline > now_ms and deadline - now_ms or 1
    ttl_s = fmt(ttl)
  else
    px = lease_px and lease_px(lease_s)
  end
  local token, token_s = take(owner, ttl, now_us, call, last, mark, true, px, now_text)
  wake(owner, 'G ' .. call .. ' ' .. token_s .. ' ' .. ttl_s)
  return owner, call, token, ttl, token_s, ttl_s
end

-- Keeps the mutex's lock key (the anchor, whose format word stands for
-- the queue's keys too) marked as having waiters (the '+' its fast paths
-- look for) and, when `ms` is given (keep_queue_for pushed the queue key
-- out to it, past what the caller knew the key covers), alive at least
-- `ms`: a free key's TTL pushed out; a hold's fence grown by as much as
-- its TTL, so its lease stays as it was.
-- `stored` is the lock key's value if the caller has it.
local function keep_anchor(ms, stored)
  stored = stored or redis.call('GET', LOCK)
  if not stored then
    return
  end
  -- (-1: no expiry.)
  local pttl = ms and redis.call('PTTL', LOCK)
  local grow = ms and pttl ~= -1 and pttl < ms
  -- A hold's '+' goes before its fence ms; a free lock's takes the place
  -- of its '-', and it has no fence to grow.
  local head, flag, fence, rest = string.match(stored, '^(v@FORMAT@ %d+ %S+ )(%+?)(%d+)( .*)$')
  if not fence then
    head, flag, rest = string.match(stored, '^(v@FORMAT@ %d+ )([-+])( .*)$')
  end
  if grow then
    fence = fence and fmt(fence + ms - pttl) or ''
    redis.call('SET', LOCK, head .. '+' .. fence .. rest, 'PX', fmt(ms))
  elseif flag ~= '+' then
    redis.call('SET', LOCK, head .. '+' .. (fence or '') .. rest, 'KEEPTTL')
  end
end

-- Frees the held lock (token `token`) for the next live waiter (the time
-- may be nil: see hand_over), or records it free when nobody waits (an
-- election then announces that the hold of `token` ended); either way
-- with `mark`, the call that freed it. Returns what hand_over returns.
local function free_lock(now_us, now_ms, token, mark)
  local owner, call, new_token, ttl, token_s, ttl_s = hand_over(now_us, now_ms, token, mark)
  if not owner then
    write_free(token, mark, false)
    if ANNOUNCE then
      ANNOUNCE(token, nil, token)
    end
  end
  return owner, call, new_token, ttl, token_s, ttl_s
end

-- Gives back the hold that acquire call `call` of `owner` counted, once.
-- `token`, `calls`, `mark`, `fence` and `waiters` are the hold as
-- read_lock returned it, after the caller checked that `owner` holds it.
-- Returns (true, holds left) when it counted one, (false, holds left) when
-- that call holds nothing (given back already, or never counted); at 0
-- left the lock went on as free_lock says, whose results follow.
local function give_back(owner, token, calls, mark, fence, call, waiters)
  -- Re-entries counted too: this call's count goes, the others keep it.
  if calls ~= call then
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
  end
  return true, 0, free_lock(nil, nil, token, owner .. '#' .. call)
end

-- Removes `entry` from the queue; the lock goes to the next live waiter
-- if it is free (`held` false; `last`, `mark` and the lease ms `left` as
-- read_lock gave them), and a new head learns of it. Reads the server's
-- time.
local function leave_queue(entry, held, last, mark, left)
  local now_us, now_ms = server_time()
  local was_head = redis.call('ZRANK', QUEUE, entry) == 0
  forget(entry)
  prune(now_ms)
  if not held then
    hand_over(now_us, now_ms, last, mark)
  elseif was_head then
    tell_head(now_ms, left, split_entry)
  end
end

-- Keeps a handed-over lease alive until the owner's watchdog renews it:
-- `left` ms (-1: no expiry) become at least `lease`, unless `fixed` is '1'
-- (a fixed lease, which no watchdog renews, is left alone); returns the
-- lease left now. `fence` as read_lock returned it.
local function extend_lease(lease, fence, left, fixed)
  if fixed ~= '1' and left ~= -1 and left < lease then
    redis.call('PEXPIRE', LOCK, fmt(lease + fence))
    return lease
  end
  return left
end
