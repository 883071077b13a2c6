-- counted/set_permits.lua: set the number of permits of a semaphore
-- (administrative: FairSemaphore::set_permits, `fairlock permits`). In the
-- same atomic step the live waiters at the head of the queue that now fit
-- are admitted, in arrival order, with their "G" messages, as a release
-- that frees units admits them (admit_waiters: a head that does not fit
-- stops admission); holders keep what they hold, so after a shrink nobody
-- is admitted until the holds fit under the new number; a queued call that
-- asks for more than the new number is taken out of the queue as it
-- reaches the head (at once when it heads it: admit_waiters) and told
-- "H <call id> -2" (poll now), and its poll gets the error reply
-- "FAIRLOCK_PERMITS_EXCEEDED ..." (acquire.lua), as does every
-- later call asking for more; it holds nobody back meanwhile. Its
-- deadline stays in the queue as the record of the refusal, so a poll
-- that comes after a later raise gets "FAIRLOCK_PERMITS_REFUSED <units>"
-- (acquire.lua) instead of a new place at the back. The meta records the number as set
-- ("=<permits>"): from then on it is the semaphore's number whatever a
-- call's own permits say, while the meta lives (a fence life past the last
-- holder and waiter); after that the next call's permits start it again.
--
-- KEYS: holders, queue, meta (see lib/counted.lua)
-- ARGV[1] wake channel prefix
-- ARGV[2] fence life ms
-- ARGV[3] permits: the new number, 1 .. 4294967295 (the client allows up
--         to MAX_PERMITS)
-- Returns {previous permits (0: none recorded, the semaphore not in use),
--          permits the live holds take now, queued calls refused now
--          (those that headed the queue),
--          owner1, call id1, token1, lease ms1, owner2, ...} with the
--          waiters admitted, in grant order (each also sent "G"; a client may
--          act on this reply first).
-- Cost: O(log N) per waiter admitted, refused or dropped (dead) and per
-- hold expired, in waiters and holders; it reads no more of the queue
-- than the heads it admits or refuses.

local permits = whole_arg(ARGV[3], 'permits', 'units')
local now_us, now_ms = server_time()
-- The meta first: another format's lock stops the script before the prune
-- writes its queue (docs/compatibility.md).
local meta = read_meta(now_ms, false, nil, nil, now_us)
prune(now_ms)
local previous = meta.capacity or 0
meta.capacity, meta.capacity_s, meta.set = permits, '=' .. fmt(permits), true

local handed = pass_on(meta, now_us, now_ms)
keep_anchor_counted(meta, now_ms)
return with_grants({ previous, meta.used, meta.refused or 0 }, handed)
