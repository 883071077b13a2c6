-- counted/release.lua: give back one hold of a counted lock; the units it
-- frees go to the live waiters at the head of the queue, in arrival order,
-- as far as they fit.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] call key "<owner id>#<call id>" of the acquisition this release
--         gives back, as the meta names a lone hold (one argument: the
--         fast paths find it as given), so that a release delivered twice
--         (a retry after a lost reply) counts once, and is answered as the
--         first was while the meta still names it among its last releases:
--         up to 7 releases of others may come in between, while a hold is
--         left beside the other holds (a lone hold's fast paths name their
--         own release alone, as the mutex's, at no cost: so after a lone
--         hold taken since was released, the repeat is told as not held)
-- ARGV[4] fencing token of the hold
-- ARGV[5] "check", or nothing, as for the mutex's release (mutex/release.lua):
--         without it the client vouches for the lease of a lone hold found,
--         which is freed with no PTTL
-- Returns 0 when released (or released already by this call) and nobody
--         was admitted, {owner1, call id1, token1, lease ms1, owner2, ...}
--         for the waiters admitted (each also sent "G" as always; a client
--         may act on this reply first; one admitted to a lone hold's place
--         as one string, lib/common.lua's granted_reply), or -1 when this
--         call holds no live hold with that token (the lease was lost), -2
--         when the meta is gone too (the server lost it, as the mutex's
--         -2); then nothing is changed, but for a head that a release vouched
--         for (no ARGV[5]) took out of the queue before it found the lone
--         hold run out: that head is let in as the units allow.
-- Cost: O(log N) in waiters and holders (amortised over dropped dead
-- waiters and expired holds); of a lone hold with nobody waiting GET and
-- one SET, as the mutex's; of a lone hold handed to a waiter that asks for
-- every unit GET, ZPOPMIN, TIME, ZSCORE, ZREM, the queue's PTTL, SET and
-- PUBLISH, as the mutex's handoff (the new hold always with its '+'; each
-- with the meta's PTTL first when checked); with the '+' and nobody queued
-- (the first release after a handoff nobody joined since) GET, ZPOPMIN and
-- SET, as the mutex's; of one of two or more holds GET, TIME,
-- ZRANGEBYSCORE, ZSCORE, ZREM and SET (the queue read only when the meta
-- says waiters may be queued).

local call_key, token, check = ARGV[3], ARGV[4], ARGV[5]
if check then
  lease_check_arg(check)
end
local stored = redis.call('GET', META)
-- The common case first: the lone hold of this call, its value "v<format>
-- <capacity> <token> <owner>#<call> <fence ms> <units> <mark>" with this
-- client's fence life and no '+' (nobody waits), its lease not run out
-- (vouched for, or PTTL above the fence): one plain find (the words before and after tell
-- it from any other place in a value fairlock writes: "<owner>#<call>" is
-- the only word with a '#' followed by a number and a space). The freed
-- meta keeps the TTL it has (the fence life and the lease left) while that
-- is at most two fence lives: a SET without PX costs the server less.
local pttl = nil
if stored then
  local at = string.find(stored, ' ' .. token .. ' ' .. call_key .. ' ' .. ARGV[2] .. ' ', 1, true)
  if at and string.find(stored, 'v@FORMAT@ ', 1, true) == 1 then
    pttl = check and redis.call('PTTL', META)
    if not pttl or pttl > FENCE_LIFE then
      local free = string.sub(stored, 1, at) .. '0 ' .. token .. ' ' .. call_key
      if not pttl or pttl <= 2 * FENCE_LIFE then
        redis.call('SET', META, free, 'KEEPTTL')
      else
        redis.call('SET', META, free, 'PX', ARGV[2])
      end
      return 0
    end
  end
end

-- Next most common: the lone hold of this call with '+' (waiters may be
-- queued), its lease not run out, its capacity not one set_permits set,
-- no revocation recorded: the next live waiter gets it when it asks for
-- every unit (a semaphore's one permit, a write), as the slow path below
-- would admit it, with the meta read by one find and one match and no
-- table built; the new hold keeps the '+', and the queue's PTTL says how
-- long the meta must outlive it. Any other head goes on below, already
-- popped (`popped_head`, as admit_waiters names it).
local popped_head = nil
if stored and not pttl then
  local at = string.find(stored, ' ' .. token .. ' ' .. call_key .. ' +', 1, true)
  local _, space, capacity_s = string.find(stored, '^v@FORMAT@ (%d+) ')
  local fence, mark
  if at and at == space then
    fence, mark = string.match(stored, '^(%d+) %d+ (%S+)$', at + #token + #call_key + 4)
  end
  if mark and not string.find(mark, '^', 1, true) then
    pttl = check and redis.call('PTTL', META)
    if not pttl or pttl > fence + 0 then
      local head, now_us, now_ms, deadline, next_owner, next_call, lease, fixed, units, now_text =
        pop_live_head(nil, nil, split_counted_entry)
      if not head then
        redis.call('SET', META, 'v@FORMAT@ ' .. capacity_s .. ' 0 ' .. token .. ' ' .. call_key,
          'PX', fence_text())
        return 0
      end
      if units == capacity_s then
        local ttl, ttl_s = grant_lease(lease, fixed, deadline, now_ms)
        -- (The clock's digits past the token's, as many: read as text.)
        local token_s = now_text and #now_text == #token and now_text > token and now_text
          or fmt(now_us > token + 1 and now_us or token + 1)
        local queue_ttl = redis.pcall('PTTL', QUEUE)
        if queue_ttl == -2 then
          -- The pop took the last waiter (then no type() to call). The new
          -- hold keeps its '+', as a mutex's handed-over hold does, and the
          -- meta outlives by a fence life the queue that an arrival with
          -- the head's waiter timeout (its liveness left at least) makes
          -- during the new lease (keep_queue_for: twice that timeout), so
          -- that arrival writes no meta.
          queue_ttl = ttl + 2 * (deadline - now_ms)
        elseif type(queue_ttl) ~= 'number' then
          queue_ttl = emptied('PTTL', QUEUE) or -2
        end
        local grown = queue_ttl > ttl and FENCE_LIFE + queue_ttl - ttl or FENCE_LIFE
        redis.call('SET', META, 'v@FORMAT@ ' .. capacity_s .. ' ' .. token_s .. ' ' .. next_owner
          .. '#' .. next_call .. ' +'
          .. (grown == FENCE_LIFE and ARGV[2] or fmt(grown)) .. ' ' .. units .. ' ' .. call_key,
          'PX', fmt(ttl + grown))
        wake(next_owner, 'G ' .. next_call .. ' ' .. token_s .. ' ' .. ttl_s)
        return granted_reply(next_owner, next_call, token_s, ttl_s)
      end
      popped_head = { head, now_us, now_ms, deadline, next_owner, next_call, lease, fixed, units }
    end
  end
end

local now_us, now_ms
if popped_head then
  now_us, now_ms = popped_head[2], popped_head[3]
else
  now_us, now_ms = server_time()
end
local meta = read_meta(now_ms, true, stored or false, pttl)
local owner, call = call_key_arg(call_key)
local member, units = hold_by_token(meta, token, owner, call, now_ms)
if not member and not popped_head then
  local marks = ',' .. meta.mark .. ','
  return string.find(marks, ',' .. call_key .. ',', 1, true) and 0 or (stored and -1 or -2)
end
-- (With no hold found after the fast path took the head out of the
-- queue: the lone hold ran out at Redis after its client vouched for it,
-- the release held up on its way. Not this release's (-1), but the head
-- is let in below as the units allow.)
if member then
  give_back_counted(meta, member, units)
  if not meta.capacity then
    -- The meta is gone (deleted by hand): the capacity is unknown, so
    -- nobody is admitted here; waiters take theirs when they poll.
    return 0
  end
  meta.mark = remember(call_key, meta.mark)
  -- The common case first: nobody waiting (the meta says so). The meta
  -- already outlives the holds left by a fence life; with none left, it
  -- keeps a fence life. Otherwise the queue's head is read (an empty queue
  -- drops the meta's '+').
  if not meta.waiters then
    write_meta(meta, meta.used == 0 and FENCE_LIFE or nil, now_ms)
    return 0
  end
end

local handed = pass_on(meta, now_us, now_ms, popped_head)
keep_anchor_counted(meta, now_ms)
if not member then
  return -1
end
return #handed > 0 and with_grants({}, handed) or 0
