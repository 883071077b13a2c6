-- lib/counted.lua: the counted engine, a semaphore's and a reader-writer
-- lock's.
-- Keys of one counted lock, a semaphore or a reader-writer lock (its own
-- keys, beside the mutex's of the same name; the queue in the same
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
--   KEYS[2] queue, as a lock's, but each entry carries
--                              the units it asks for as a fifth field
--                              (split_counted_entry)
--   KEYS[3] meta       string  "<capacity> <used> <last token> <mark or
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
--                              releases, up to 8, newest first, joined by
--                              ',' (remember; a force release's: "F<call
--                              key>/<holds>", which a renewal of a freed
--                              hold reads); it outlives every holder and
--                              waiter by the fence life. The '+' is set
--                              whenever a call joins the queue (a lone
--                              hold handed over keeps it) and dropped
--                              only where the queue is found empty, so a
--                              meta without it has nobody queued and its
--                              fast paths (a free lock taken, a lone hold
--                              released) read no queue key. While a hold
--                              is left, the mark may end in "^<token>"
--                              (be only that, with no mark): a revocation
--                              (revoke.lua) asks the holds up to that
--                              token to let go
--   KEYS[4] the revoke's record (common.lua: answer_revoke), given to
--           revoke.lua and force_release.lua alone
--   KEYS[5] the force release's record (common.lua: record_forced), given
--           to it alone
-- A call is admitted when it heads the queue (or nobody waits) and its
-- units fit beside the held ones: that admission test is the only place
-- where a semaphore and a reader-writer lock differ, and it is a number.

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

-- A counted queue entry's parts as written (strings): owner id, call id,
-- lease ms, fixed ('0' or '1'), units; nil for a member fairlock did not
-- write, a deadline's among them (queue.lua: split_entry; entry_arg checks
-- one given in ARGV). The mutex's 4-field entries are not counted entries
-- (nor the other way round).
local function split_counted_entry(entry)
  return string.match(entry, '^([^~%s]%S*) (%d+) (%d+) ([01]) (%d+)$')
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
-- (false: gone), `pttl` the meta's PTTL when the caller read it. Numbers
-- kept as the strings they were read as save
-- formatting them again (string.format costs about a third of a no-op
-- EVALSHA). A value fairlock did not write stops the script before any
-- write. The used units are live_used's unless `lazy` (a fast path that
-- learns whether the holders key is there from its own reads). A meta
-- gone keeps no last token: given `now_us` (the server clock in µs, by a
-- caller that may write the meta anew or tell the holds up to the last
-- token), the clock less one stands for it, so that a take then gets the
-- clock, as with no meta, a meta written anew without a take (a call
-- queued behind holds its deletion left) gives no later take a last + 1
-- below the tokens issued before, and the holds it left are told.
local function read_meta(now_ms, lazy, stored, pttl, now_us)
  if stored == nil then
    stored = redis.call('GET', META)
  end
  if not stored then
    -- The units the holds in the holders zset take, counted one by one:
    -- only when the meta is gone (deleted by hand) while holds are left.
    -- (Lease ends are scores from 0 up, tokens below 0.)
    local used = 0
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', HOLDERS, 0, '+inf')) do
      local _, _, units = parse_holder(member)
      if not units then
        fail('WRONGTYPE the holders key holds a member fairlock did not write')
      end
      used = used + units
    end
    -- (Whether anyone waits is not known: a queue key deleted by hand may
    -- outlive it.)
    return { used = used, last = now_us and fmt(now_us - 1) or '0', mark = '', waiters = true }
  end
  local capacity, token, owner, call, flag, fence, units, mark = string.match(stored,
    '^v@FORMAT@ (=?%d+) (%d+) (%S+)#(%d+) (%+?)(%d+) (%d+) (%S+)$')
  local used, last, lone
  if capacity then
    used, last = tonumber(units), token
    local fence_ms = tonumber(fence)
    pttl = pttl or redis.call('PTTL', META)
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

-- The meta's mark after a release (or an abandon) of call `call_key`: that
-- key before the last of `old` (the marks, newest first, joined by ','; ''
-- or '-' when none; a revocation's "^<token>" after them dropped), at most
-- 8 in all, so that a release delivered again after up to 7 releases of
-- others answers as released (release.lua).
local function remember(call_key, old)
  old = string.match(old, '^[^%^]*')
  if old == '' or old == '-' then
    return call_key
  end
  -- The first key, then up to 7 more, each after its ','.
  return string.match(call_key .. ',' .. old, '^[^,]*' .. string.rep(',?[^,]*', 7))
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
  local name = owner .. ' ' .. call .. ' '
  local names = units == 2147483648 and { '2147483648', '4294967295', '1' }
    or units == 4294967295 and { '4294967295', '2147483648', '1' } or { fmt(units) }
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
-- table: give_back_counted takes either). Reads only: in the holders zset the
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
local function give_back_counted(meta, member, units)
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
-- meta: keep_anchor_counted). Each hold is dropped once: O(log N) amortised.
-- Given `owners` (a list), with no lone hold left (force_release.lua takes
-- it itself), it drops every hold of the holders zset instead, live or
-- not, and adds their owners to the list. Only commands the ACL line of
-- docs/security.md grants (no ZREMRANGEBYSCORE).
local function drop_expired(meta, now_ms, owners)
  local lone = meta.lone
  if lone then
    if lone.ends < now_ms then
      give_back_counted(meta, lone, lone.units)
      return 1
    end
    return 0
  end
  if meta.used == 0 and not owners then
    return 0
  end
  local below = owners and '+inf' or '(' .. fmt(now_ms)
  local dropped = 0
  while true do
    local dead = emptied('ZRANGEBYSCORE', HOLDERS, 0, below, 'LIMIT', 0, 100) or {}
    if #dead == 0 then
      return dropped
    end
    dropped = dropped + #dead
    local members = {}
    for _, member in ipairs(dead) do
      local owner, _, units = parse_holder(member)
      meta.used = math.max(0, meta.used - (units or 0))
      members[#members + 1] = member
      members[#members + 1] = '#' .. member
      if owners then
        owners[#owners + 1] = owner or member
      end
    end
    redis.call('ZREM', HOLDERS, unpack(members))
  end
end

-- Gives call `call` of `owner` a hold of `units` for `ttl` ms; returns its
-- token (a string), max(last + 1, server clock in µs), as the mutex's take
-- does. The first hold is the meta's lone hold; a second one moves the
-- lone hold into the holders zset beside it. `units_s` is the units as
-- written. The caller writes the meta (keep_anchor_counted).
local function take_hold(meta, owner, call, units, ttl, now_us, now_ms, units_s)
  local number = math.max(tonumber(meta.last) + 1, now_us)
  local token = fmt(number)
  local ends = now_ms + ttl
  meta.last = token
  local lone = meta.lone
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
-- and downgrade (upgrade.lua, downgrade.lua, admit_waiters). Returns the
-- new token (a string) and the lease ms left. The caller writes the meta
-- (keep_anchor_counted).
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

-- The lease, in ms and as written, of a grant to a queue entry whose
-- lease is `lease` (as the entry wrote it): a watchdog-renewed one
-- (`fixed` '0') lasts no longer than the entry's liveness `deadline`
-- (server ms; `now_ms` now), as the mutex's hand_over bounds it.
local function grant_lease(lease, fixed, deadline, now_ms)
  local ttl, ttl_s = lease + 0, lease
  if fixed == '0' and deadline - now_ms < ttl then
    ttl = deadline > now_ms and deadline - now_ms or 1
    ttl_s = fmt(ttl)
  elseif string.byte(lease, 1) == 48 then
    ttl_s = fmt(ttl)
  end
  return ttl, ttl_s
end

-- Admits the live waiters at the head of the queue, in arrival order,
-- while each one's units fit beside the used ones: a head that does not
-- fit stops it, so no smaller call behind passes it. Stops at `stop` (an
-- entry that takes its own hold) if given. Each gets a token and "G <call
-- id> <token> <ttl>", its grant bounded by its liveness deadline as
-- hand_over's; a new head left waiting learns it from its client's next
-- heartbeat, as after hand_over, or hears "H" (as tell_head tells it) when
-- it heads the queue because a refused one left it. An upgrade's claim at
-- the head is settled in place. A head that asks for more than the
-- capacity (a semaphore whose number set_permits cut since it queued)
-- leaves the queue, told "H <call id> -2", and is counted in
-- `meta.refused`: O(log N) each, as it comes to the head, so nothing reads
-- the queue beyond its head.
-- `popped_head`, when the caller popped the head already (as pop_live_head
-- returns it, in a table) with no units held, stands for the first pop.
-- Returns the list of {owner, call id, token, ttl} admitted.
local function admit_waiters(meta, now_us, now_ms, stop, popped_head)
  local handed = {}
  while true do
    -- With no units held (and no entry to stop at) the head leaves the
    -- queue whatever it asks (admitted, or refused for more than there
    -- are): it is popped (pop_live_head), else read where it stands.
    local popped = meta.used == 0 and not stop
    local head, deadline, owner, call, lease, fixed, units_s, _
    if popped and popped_head then
      head, _, _, deadline, owner, call, lease, fixed, units_s = unpack(popped_head)
      popped_head = nil
    elseif popped then
      head, _, _, deadline, owner, call, lease, fixed, units_s =
        pop_live_head(now_us, now_ms, split_counted_entry)
    else
      head, deadline, owner, call, lease, fixed, units_s =
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
      -- head, told to poll ("H <call id> -2"), which answers the error;
      -- its deadline stays as the record of the refusal (acquire.lua).
      if popped then
        redis.call('ZADD', QUEUE, deadline_score(deadline), '~' .. head)
      else
        redis.call('ZREM', QUEUE, head)
      end
      wake(owner, 'H ' .. call .. ' -2')
      meta.refused = (meta.refused or 0) + 1
    elseif head == stop or meta.used + units > meta.capacity then
      if meta.refused then
        wake(owner, 'H ' .. call .. ' ' .. first_lease_left(meta, now_ms))
      end
      break
    else
      if not popped then
        forget(head)
      end
      if units == 2147483647 and string.match(META, '^[^{]*{%x+}:rwmeta:') then
        -- An upgrade's claim (its units no read or write asks for, in a
        -- reader-writer lock's queue: its meta key says which kind it is)
        -- asks for what a write takes beyond the upgradable read
        -- (2147483648 units) its call holds, so it fits once the reads
        -- granted before it are gone (upgrade.lua queues it ahead of
        -- everyone). It is settled in place of a new hold: the upgradable
        -- read becomes the write in place (change_hold), its owner hears
        -- "G <call id> <token> <lease ms left>"; a claim whose upgradable
        -- read is gone (its lease ran out, force unlocked) is dropped and
        -- its owner told "H <call id> 0", so that it asks at once and
        -- learns its hold is lost.
        local member = owner .. ' ' .. call .. ' 2147483648'
        if hold_of(meta, member, now_ms) then
          local token, left = change_hold(meta, member, 2147483648, 4294967295, now_us, now_ms)
          wake(owner, 'G ' .. call .. ' ' .. token .. ' ' .. fmt(left))
          handed[#handed + 1] = { owner, tonumber(call), tonumber(token), left }
        else
          wake(owner, 'H ' .. call .. ' 0')
        end
      else
        local ttl, ttl_s = grant_lease(lease, fixed, deadline, now_ms)
        local token, number = take_hold(meta, owner, call, units, ttl, now_us, now_ms, units_s)
        wake(owner, 'G ' .. call .. ' ' .. token .. ' ' .. ttl_s)
        handed[#handed + 1] = { owner, tonumber(call), number, ttl }
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
local function keep_anchor_counted(meta, now_ms)
  local life = 0
  local lone = meta.lone
  if lone then
    life = math.max(0, lone.ends - now_ms)
  elseif meta.used > 0 then
    local far = tonumber(redis.call('ZRANGE', HOLDERS, -1, -1, 'WITHSCORES')[2])
    if far and far >= now_ms then
      life = far - now_ms + 1
      redis.call('PEXPIRE', HOLDERS, fmt(life))
    else
      -- Only holds whose lease ran out are left (not dropped yet), under
      -- the TTL a hold given back since had set: the meta outlives it.
      life = math.max(0, redis.call('PTTL', HOLDERS))
    end
  end
  if meta.waiters then
    life = math.max(life, emptied('PTTL', QUEUE) or -2)
  end
  write_meta(meta, life + FENCE_LIFE, now_ms)
end

-- Gives back hold `member` of acquire call `call` of `owner` (`units`
-- units, live: hold_of found it) as an abandon of that call does, marked as
-- a release marks it, so that a release of the same call sent later
-- answers as released: its abandon, and a leave of a call handed a hold it
-- will not take (cancel.lua). True when that was all (nobody waits; the
-- meta is written); false when the caller still passes the units on
-- (pass_on) and writes the meta (keep_anchor_counted), in a statement of
-- its own, so that the common give-back builds none of the queue's steps.
local function give_back_call_counted(meta, member, owner, call, units, now_ms)
  give_back_counted(meta, member, units)
  meta.mark = remember(owner .. '#' .. call, meta.mark)
  if redis.call('EXISTS', QUEUE) == 1 then
    return false
  end
  if meta.capacity then
    keep_anchor_counted(meta, now_ms)
  end
  return true
end

-- Makes `key`, if it exists, live at least `ms` more; never shortens it.
local function outlive(key, ms)
  local ttl = redis.call('PTTL', key)
  if ttl ~= -2 and ttl < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- The longest the queue may live without the meta growing, for
-- keep_queue_for: the meta outlives the queue by a fence life, and a lone
-- hold's lives its lease and fence ms (at least a fence life: write_meta),
-- so its lease left and the fence ms past a fence life; nil beside other
-- holds, whose meta TTL is not read (nor for a meta without one).
local function queue_cap(meta, now_ms)
  local lone = meta.lone
  if lone and lone.pttl ~= -1 then
    return lone.ends - now_ms + (lone.fence or FENCE_LIFE) - FENCE_LIFE
  end
end

-- After a call joined the queue (or a claim was queued): the meta says
-- waiters may be queued, and when the queue's TTL was pushed out to
-- `queue_life` ms, outlives it by a fence life; a lone hold's lease stays
-- as it was (its fence ms grow). Writes the meta only when either changes,
-- or, whole with the keys' TTLs (keep_anchor_counted), when the caller
-- `changed` more of it (holds granted or dropped, a meta made anew). The
-- meta's capacity is known (its callers, acquire.lua and upgrade.lua, set
-- it when the meta is gone).
local function keep_queued(meta, queue_life, now_ms, changed)
  if meta.waiters and not queue_life and not changed then
    return
  end
  meta.waiters = true
  local lone = meta.lone
  if changed then
    keep_anchor_counted(meta, now_ms)
  elseif lone then
    local held = math.max(0, lone.ends - now_ms) + (lone.fence or FENCE_LIFE)
    write_meta(meta, math.max(held, queue_life and queue_life + FENCE_LIFE or 0), now_ms)
  elseif queue_life then
    write_meta(meta, math.max(redis.call('PTTL', META), queue_life + FENCE_LIFE), now_ms)
  else
    write_meta(meta, nil, now_ms)
  end
end

-- Keeps a hold handed to a waiting call alive until its owner's watchdog
-- renews it: a watchdog-renewed hold (`fixed` '0') of `member` with `left`
-- ms under its `lease` gets `lease` from now, and the meta and the keys'
-- TTLs are written (keep_anchor_counted) unless `deferred` (the caller
-- writes them itself); a fixed one is left alone, and so is every hold
-- while the meta is gone (its capacity unknown, the meta is not written).
-- Returns the lease left now and whether it changed.
local function extend_lease_counted(meta, member, lease, fixed, left, now_ms, deferred)
  if fixed == '0' and left < lease and meta.capacity then
    if meta.lone then
      meta.lone.ends = now_ms + lease
    else
      redis.call('ZADD', HOLDERS, 'XX', now_ms + lease, member)
    end
    if not deferred then
      keep_anchor_counted(meta, now_ms)
    end
    return lease, true
  end
  return left, false
end

-- Drops expired holds, then admits the live waiters at the head of the
-- queue that fit, as admit_waiters does (nobody when the meta is gone:
-- the capacity is unknown until a caller names it). Returns the grants
-- and the number of holds dropped; with any grant or drop, the caller
-- writes the meta (keep_anchor_counted). `popped_head` as admit_waiters's.
local function pass_on(meta, now_us, now_ms, popped_head)
  local dropped = drop_expired(meta, now_ms)
  if not meta.capacity then
    return {}, dropped
  end
  return admit_waiters(meta, now_us, now_ms, nil, popped_head), dropped
end

-- `out` (a reply being built) followed by each grant of `handed` (as
-- admit_waiters returns them), flattened: owner, call id, token, ttl.
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
    keep_anchor_counted(meta, now_ms)
  end
  if #handed == 0 and was_head then
    tell_head(now_ms, first_lease_left(meta, now_ms), split_counted_entry)
  end
end
