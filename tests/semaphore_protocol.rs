//! The semaphore's scripts driven directly (the counted engine's Lua, keys
//! and arguments the client will send, from the library's protocol layer):
//! the units held never above N, strict FIFO handoff, weighted FIFO (a head
//! that does not fit is never passed by a smaller call behind it, not even
//! by one that would fit, nor starved by them; when a head is admitted, the
//! calls right behind it that fit enter in the same step: on a release, a
//! cancel or an abandon of a head, the head's own poll, a force release),
//! `try` never ahead of a queued waiter, leases (fixed ones too) that run out free their units
//! for the head, a permits mismatch refused before any write (as
//! `ErrorKind::PermitsMismatch`), units of 0 or above N refused before any
//! write, increasing fencing tokens, repeats that count once, heartbeats
//! that keep waiters and admit the head, cancels and abandons that leave
//! nothing, a force release that frees every hold once, status, the
//! README's ACL user, and no key left without a TTL after any step.

use std::thread::sleep;
use std::time::Duration;

use fairlock::test_support::{
    Abandon, AbandonReply, Acquire, AcquireReply, Ask, Cancel, CancelReply, CommonArgs, Engine,
    ForceRelease, Freed, HandedOver, Heartbeat, HeartbeatReply, LockKeys, LockKind, Mode, Op,
    Operation, QueueEntry, Release, ReleaseReply, Renew, Script, Status, StatusReply, WaiterStatus,
};
use fairlock_test_support::*;
use redis::{Commands, Value};

/// The library's default key prefix.
const PREFIX: &str = "fairlock";
/// A lease that outlives any test step.
const LONG: Duration = Duration::from_secs(60);
/// A lease a test waits out.
const SHORT: Duration = Duration::from_millis(150);
/// What a release of a counted lock answers when it admits nobody: it
/// counts no re-entries, so no holds are left of the call.
const RELEASED: ReleaseReply = ReleaseReply::Released { left: 0 };

/// The counted engine's script of `op`, the one a semaphore runs.
fn counted(op: Op) -> Script {
    Script::of(LockKind::Semaphore, op)
}

/// One semaphore's scripts on a fresh server.
struct Sem {
    _server: RedisServer,
    keys: LockKeys,
    /// Runs the checks (an admin connection), and the scripts unless
    /// `runner` is set.
    conn: redis::Connection,
    /// Runs the scripts, when not `conn` (the README's ACL user).
    runner: Option<redis::Connection>,
    /// The waiter timeout attempts send (60 s unless a test sets it).
    waiter_timeout: Duration,
}

/// A hold of some permits: owner, call, the permits (units) it took, token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Permit {
    owner: String,
    call: u64,
    units: u32,
    token: u64,
}

impl Sem {
    fn new(name: &str) -> Sem {
        let server = RedisServer::start();
        let conn = server.conn();
        Sem {
            keys: LockKeys::semaphore(PREFIX, name).unwrap(),
            _server: server,
            conn,
            runner: None,
            waiter_timeout: LONG,
        }
    }

    /// Runs `script` with the semaphore's keys, the common arguments of a
    /// client with the default settings, then `args`.
    fn eval(&mut self, script: Script, args: &[String]) -> redis::RedisResult<Value> {
        let script = redis::Script::new(script.source());
        let mut inv = script.prepare_invoke();
        for key in &self.keys.all {
            inv.key(key);
        }
        let common = CommonArgs {
            wake_prefix: format!("{PREFIX}:wake:"),
            fence_life: fairlock::DEFAULT_FENCE_LIFE,
        };
        inv.arg(&common.args());
        for arg in args {
            inv.arg(arg);
        }
        inv.invoke(self.runner.as_mut().unwrap_or(&mut self.conn))
    }

    /// Runs `op` as the client does: the script its operation has on a
    /// semaphore's keys (the counted engine's), its keys and arguments.
    fn run<O: Operation>(&mut self, op: &O) -> fairlock::Result<O::Reply> {
        let keys = op.keys(&self.keys).to_vec();
        assert_eq!(
            keys, self.keys.all,
            "every semaphore script takes all five keys"
        );
        let script = op.script(&self.keys);
        assert_eq!(
            script,
            Script {
                engine: Engine::Counted,
                op: O::OP
            },
            "a semaphore runs the counted engine"
        );
        match self.eval(script, &op.args()) {
            Ok(reply) => op.parse(reply),
            Err(e) => Err(e.into()),
        }
    }

    /// One attempt of call `call` of `owner` for one of `of` permits (a
    /// watchdog lease of 60 s, a 60 s waiter timeout).
    fn attempt(&mut self, owner: &str, call: u64, mode: Mode, of: u32) -> AcquireReply {
        self.attempt_n(owner, call, mode, 1, of)
    }

    /// One attempt of call `call` of `owner` for `n` of `of` permits at
    /// once (a watchdog lease of 60 s, a 60 s waiter timeout).
    fn attempt_n(&mut self, owner: &str, call: u64, mode: Mode, n: u32, of: u32) -> AcquireReply {
        self.attempt_ask(owner, call, mode, Ask::Permits { n, of }, LONG, false)
            .unwrap()
    }

    /// One attempt for one of `of` permits with `lease` (fixed or not).
    fn attempt_with(
        &mut self,
        owner: &str,
        call: u64,
        mode: Mode,
        of: u32,
        lease: Duration,
        fixed: bool,
    ) -> fairlock::Result<AcquireReply> {
        self.attempt_ask(owner, call, mode, Ask::Permits { n: 1, of }, lease, fixed)
    }

    /// One attempt asking for `ask` with `lease` (fixed or not).
    fn attempt_ask(
        &mut self,
        owner: &str,
        call: u64,
        mode: Mode,
        ask: Ask,
        lease: Duration,
        fixed: bool,
    ) -> fairlock::Result<AcquireReply> {
        let op = Acquire {
            ask,
            owner,
            lease,
            fixed,
            waiter_timeout: self.waiter_timeout,
            mode,
            wait_id: call,
            live_token: 0,
        };
        let reply = self.run(&op);
        self.assert_every_key_expires();
        reply
    }

    /// A permit taken at once, or a panic.
    fn take(&mut self, owner: &str, call: u64, of: u32) -> Permit {
        self.take_n(owner, call, 1, of)
    }

    /// `n` permits taken at once, or a panic.
    fn take_n(&mut self, owner: &str, call: u64, n: u32, of: u32) -> Permit {
        match self.attempt_n(owner, call, Mode::First, n, of) {
            AcquireReply::Acquired { token, .. } => Permit {
                owner: owner.to_owned(),
                call,
                units: n,
                token,
            },
            other => panic!("{owner} did not get {n} permits: {other:?}"),
        }
    }

    /// Queues call `call` of `owner` for one permit; returns its position.
    fn queue(&mut self, owner: &str, call: u64, of: u32) -> u64 {
        self.queue_n(owner, call, 1, of)
    }

    /// Queues call `call` of `owner` for `n` permits; returns its position.
    fn queue_n(&mut self, owner: &str, call: u64, n: u32, of: u32) -> u64 {
        match self.attempt_n(owner, call, Mode::First, n, of) {
            AcquireReply::Waiting {
                position: Some(p), ..
            } => p,
            other => panic!("{owner} did not queue: {other:?}"),
        }
    }

    fn release(&mut self, permit: &Permit) -> ReleaseReply {
        let reply = self
            .run(&Release {
                owner: &permit.owner,
                token: permit.token,
                call: permit.call,
            })
            .unwrap();
        self.assert_every_key_expires();
        reply
    }

    /// The permits a release handed over, as permits.
    fn handed(&mut self, permit: &Permit) -> Vec<Permit> {
        match self.release(permit) {
            ReleaseReply::HandedOver(grants) => {
                grants.into_iter().map(|g| self.granted(g)).collect()
            }
            ReleaseReply::Released { left } => {
                assert_eq!(left, 0, "a counted hold is one call: none left");
                Vec::new()
            }
            ReleaseReply::NotHeld => panic!("{permit:?} was not held"),
        }
    }

    /// The permit `grant` made: the grant names no units, so they are read
    /// from the hold its token names in the tokens hash (token -> member),
    /// which must be the grant's call and name the token back (member ->
    /// token).
    fn granted(&mut self, grant: HandedOver) -> Permit {
        let member: Option<String> = self.conn.hget(&self.keys.all[3], grant.token).unwrap();
        let member = member.unwrap_or_else(|| panic!("no hold has the token of {grant:?}"));
        let parts: Vec<&str> = member.split(' ').collect();
        assert_eq!(
            parts[..2],
            [grant.owner.as_str(), grant.wait_id.to_string().as_str()],
            "{member}: {grant:?}"
        );
        assert_eq!(handed_token(self, &member), grant.token, "{member}");
        Permit {
            units: parts[2].parse().unwrap(),
            owner: grant.owner,
            call: grant.wait_id,
            token: grant.token,
        }
    }

    fn renew(&mut self, permit: &Permit, lease: Option<Duration>) -> bool {
        let reply = self
            .run(&Renew {
                owner: &permit.owner,
                token: permit.token,
                call: permit.call,
                lease,
            })
            .unwrap();
        self.assert_every_key_expires();
        reply
    }

    /// A heartbeat of `entries` with a waiter timeout of `timeout`.
    fn heartbeat(&mut self, timeout: Duration, entries: &[QueueEntry]) -> HeartbeatReply {
        let reply = self
            .run(&Heartbeat {
                waiter_timeout: timeout,
                waiters: entries.to_vec(),
            })
            .unwrap();
        self.assert_every_key_expires();
        reply
    }

    fn cancel(&mut self, entry: QueueEntry) -> CancelReply {
        let reply = self.run(&Cancel { entry }).unwrap();
        self.assert_every_key_expires();
        reply
    }

    fn abandon(&mut self, entry: QueueEntry) -> AbandonReply {
        let reply = self.run(&Abandon { entry }).unwrap();
        self.assert_every_key_expires();
        reply
    }

    /// A force release sent as call `call_key` ("<client id>#<call id>").
    fn force_release(&mut self, call_key: &str) -> Freed {
        let reply = self
            .run(&ForceRelease {
                call_key: call_key.to_owned(),
            })
            .unwrap();
        self.assert_every_key_expires();
        reply
    }

    /// The status, listing at most `waiters` and `holders`; it must change
    /// nothing, and when it lists every live hold their units must be the
    /// units it says are used.
    fn status(&mut self, waiters: usize, holders: usize) -> StatusReply {
        let before = self.snapshot();
        let reply = self
            .run(&Status {
                kind: LockKind::Semaphore,
                waiters,
                holders,
            })
            .unwrap();
        assert_eq!(self.snapshot(), before, "status changes nothing");
        if reply.holders.len() as u64 == reply.live_holds {
            let units: u64 = reply.holders.iter().map(|h| h.units).sum();
            assert_eq!(units, reply.used, "{reply:?}");
        }
        reply
    }

    /// The lease end of `member`'s hold, server ms.
    fn lease_end(&mut self, member: &str) -> Option<i64> {
        self.conn.zscore(&self.keys.all[0], member).unwrap()
    }

    fn now_ms(&mut self) -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut self.conn).unwrap();
        s * 1000 + us / 1000
    }

    /// Live holds "<owner> <call> <units>" (lease end not passed), by lease
    /// end.
    fn holders(&mut self) -> Vec<String> {
        let now = self.now_ms();
        self.conn
            .zrangebyscore(&self.keys.all[0], now, "+inf")
            .unwrap()
    }

    fn queued(&mut self) -> Vec<String> {
        self.conn.zrange(&self.keys.all[1], 0, -1).unwrap()
    }

    fn meta(&mut self) -> Option<String> {
        self.conn.get(&self.keys.all[4]).unwrap()
    }

    /// The units the meta counts as used (0 without a meta).
    fn meta_used(&mut self) -> u32 {
        self.meta()
            .map_or(0, |m| m.split(' ').nth(1).unwrap().parse().unwrap())
    }

    fn pttl(&mut self, key: usize) -> i64 {
        self.conn.pttl(&self.keys.all[key]).unwrap()
    }

    /// Every key has a TTL, and the meta (capacity, used, last token)
    /// outlives the holders, their tokens and the queue.
    fn assert_every_key_expires(&mut self) {
        let left = keys_without_ttl(&mut self.conn, "fairlock:*");
        assert!(left.is_empty(), "keys without a TTL: {left:?}");
        let meta = self.pttl(4);
        for key in [0, 1, 2, 3] {
            let ttl = self.pttl(key);
            assert!(
                ttl == -2 || ttl < meta,
                "{} lives {ttl} ms, the meta {meta} ms",
                self.keys.all[key]
            );
        }
    }

    /// Every key's dumped value and whether it has a TTL, for "nothing written".
    fn snapshot(&mut self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut keys: Vec<String> = self.conn.keys("fairlock:*").unwrap();
        keys.sort();
        keys.into_iter()
            .map(|k| {
                let dump: Option<Vec<u8>> =
                    redis::cmd("DUMP").arg(&k).query(&mut self.conn).unwrap();
                (k, dump)
            })
            .collect()
    }
}

/// An error with its sources, as one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text = format!("{text}: {inner}");
        source = inner.source();
    }
    text
}

/// The permits a status says are free: its capacity less the units used
/// (what the semaphore's former status called "available").
fn available(status: &StatusReply) -> u64 {
    status
        .capacity
        .unwrap_or(0)
        .checked_sub(status.used)
        .unwrap_or_else(|| panic!("more units used than there are: {status:?}"))
}

/// The token the tokens hash keeps for `member`.
fn handed_token(s: &mut Sem, member: &str) -> u64 {
    s.conn.hget(&s.keys.all[3], member).unwrap()
}

/// The holders member of `permit`: "<owner> <call> <units>".
fn member(permit: &Permit) -> String {
    format!("{} {} {}", permit.owner, permit.call, permit.units)
}

/// The units of a holders member "<owner> <call> <units>".
fn units_of(member: &str) -> u32 {
    member.rsplit(' ').next().unwrap().parse().unwrap()
}

/// The queue entry of call `call` of `owner` asking for `n` permits with
/// `lease` (fixed or not). An entry names the units it asks for, never the
/// semaphore's permits (the scripts it goes to read those from the meta),
/// so the `of` of its ask is not sent.
fn entry_n(owner: &str, call: u64, n: u32, lease: Duration, fixed: bool) -> QueueEntry<'_> {
    QueueEntry {
        owner,
        wait_id: call,
        lease,
        fixed,
        ask: Ask::Permits { n, of: n },
    }
}

/// The queue entry of call `call` of `owner` for one permit with `lease`
/// (fixed or not).
fn entry_with(owner: &str, call: u64, lease: Duration, fixed: bool) -> QueueEntry<'_> {
    entry_n(owner, call, 1, lease, fixed)
}

/// The queue entry `Sem::queue` makes: one permit, a 60 s watchdog lease.
fn entry(owner: &str, call: u64) -> QueueEntry<'_> {
    entry_with(owner, call, LONG, false)
}

/// The queue entry `Sem::queue_n` makes: `n` permits, a 60 s watchdog lease.
fn entry_of(owner: &str, call: u64, n: u32) -> QueueEntry<'_> {
    entry_n(owner, call, n, LONG, false)
}

/// A permit handed to a waiter, as its heartbeat or cancel reports it.
fn permit_of(owner: &str, call: u64, token: u64) -> Permit {
    Permit {
        owner: owner.to_owned(),
        call,
        units: 1,
        token,
    }
}
#[test]
fn never_more_holders_than_permits_with_more_callers() {
    let mut s = Sem::new("never-more");
    let mut held: Vec<Permit> = (1..=3).map(|i| s.take(&format!("h{i}:1"), i, 3)).collect();
    for i in 4..=10 {
        assert_eq!(s.queue(&format!("w{i}:1"), i, 3), i - 4);
    }
    // A try while all are held gets nothing and queues nothing.
    assert!(matches!(
        s.attempt("t:1", 99, Mode::Try, 3),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert_eq!(s.queued().len(), 7);
    // Release the oldest holder again and again: each release hands its
    // permit on, never more than three hold, until the queue is empty.
    while !held.is_empty() {
        let gone = held.remove(0);
        held.extend(s.handed(&gone));
        let holders = s.holders();
        assert!(holders.len() <= 3, "{holders:?}");
        assert_eq!(holders.len(), held.len().min(3));
        let mut expected: Vec<String> = held.iter().map(member).collect();
        let mut got = holders.clone();
        expected.sort();
        got.sort();
        assert_eq!(got, expected);
    }
    assert!(s.queued().is_empty());
    // Free again: three new callers take at once, the fourth queues.
    for i in 20..23 {
        s.take(&format!("n{i}:1"), i, 3);
    }
    assert_eq!(s.queue("n23:1", 23, 3), 0);
}

#[test]
fn waiters_get_permits_in_arrival_order() {
    let mut s = Sem::new("fifo");
    let a = s.take("a:1", 1, 2);
    let b = s.take("b:1", 2, 2);
    let arrivals: Vec<String> = (1..=8).map(|i| format!("w{i}:1")).collect();
    for (i, owner) in arrivals.iter().enumerate() {
        assert_eq!(s.queue(owner, 10 + i as u64, 2), i as u64);
    }
    let mut granted = Vec::new();
    let mut holding = vec![a, b];
    while !holding.is_empty() {
        let next = s.handed(&holding.remove(0));
        assert!(next.len() <= 1, "one release frees one permit: {next:?}");
        granted.extend(next.iter().map(|p| p.owner.clone()));
        holding.extend(next);
    }
    assert_eq!(granted, arrivals);
}

#[test]
fn a_permit_handed_over_reaches_its_waiter_by_message_and_by_poll() {
    let mut s = Sem::new("handoff");
    let a = s.take("a:1", 1, 1);
    s.queue("w:1", 2, 1);
    s.queue("x:1", 3, 1);
    let mut sub = s._server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let handed = s.handed(&a);
    assert_eq!(handed.len(), 1);
    let w = handed[0].clone();
    let message = |pubsub: &mut redis::PubSub| {
        let m = pubsub.get_message().unwrap();
        (
            m.get_channel_name().to_owned(),
            m.get_payload::<String>().unwrap(),
        )
    };
    let (channel, payload) = message(&mut pubsub);
    assert_eq!(channel, "fairlock:wake:w");
    // The grant's lease: the waiter's 60 s, bounded by its liveness deadline.
    let ttl: u64 = payload
        .strip_prefix(&format!("G 2 {} ", w.token))
        .unwrap_or_else(|| panic!("{payload}"))
        .parse()
        .unwrap();
    assert!((59_000..=60_000).contains(&ttl), "{payload}");
    // The new head hears when the first lease would run out.
    let (channel, payload) = message(&mut pubsub);
    assert_eq!(channel, "fairlock:wake:x");
    assert!(payload.starts_with("H 3 "), "{payload}");
    // The waiter's next poll (or a repeat of its first call) finds its hold.
    for mode in [Mode::Poll, Mode::First] {
        match s.attempt("w:1", 2, mode, 1) {
            AcquireReply::Acquired { token, .. } => assert_eq!(token, w.token),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.holders(), ["w:1 2 1"]);
}

#[test]
fn try_never_passes_a_queued_waiter_even_with_a_permit_free() {
    let mut s = Sem::new("try-fifo");
    // The holder's fixed lease runs out while a waiter is queued: a permit
    // is free, but the waiter came first.
    s.attempt_with("a:1", 1, Mode::First, 1, SHORT, true)
        .unwrap();
    assert_eq!(s.queue("w:1", 2, 1), 0);
    sleep(SHORT + Duration::from_millis(50));
    assert!(s.holders().is_empty(), "the lease ran out");
    match s.attempt("t:1", 3, Mode::Try, 1) {
        AcquireReply::Waiting { position, .. } => assert_eq!(position, None),
        other => panic!("try passed the queued waiter: {other:?}"),
    }
    // The try handed the free permit to the waiter instead.
    assert_eq!(s.holders(), ["w:1 2 1"]);
    assert!(s.queued().is_empty());
    // A newcomer's first attempt queues behind, as the try did not.
    assert_eq!(s.queue("n:1", 4, 1), 0);
}

#[test]
fn a_lease_that_ran_out_frees_its_permit_for_the_head() {
    let mut s = Sem::new("expiry");
    let a = s
        .attempt_with("a:1", 1, Mode::First, 2, SHORT, true)
        .unwrap();
    let AcquireReply::Acquired { token, .. } = a else {
        panic!("{a:?}")
    };
    let a = Permit {
        owner: "a:1".into(),
        call: 1,
        units: 1,
        token,
    };
    let b = s.take("b:1", 2, 2);
    assert_eq!(s.queue("w:1", 3, 2), 0);
    assert_eq!(s.queue("x:1", 4, 2), 1);
    sleep(SHORT + Duration::from_millis(50));
    // The head's poll takes the permit a's lease left; x still waits.
    assert!(matches!(
        s.attempt("w:1", 3, Mode::Poll, 2),
        AcquireReply::Acquired { .. }
    ));
    assert!(matches!(
        s.attempt("x:1", 4, Mode::Poll, 2),
        AcquireReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["b:1 2 1", "w:1 3 1"]);
    // a lost its lease: its release and renewal say so and change nothing.
    assert!(!s.renew(&a, Some(LONG)));
    assert_eq!(s.release(&a), ReleaseReply::NotHeld);
    assert_eq!(s.queued(), ["x:1 4 60000 0 1"]);
    // b's release goes to x.
    let handed = s.handed(&b);
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "x:1");
}

#[test]
fn a_permits_mismatch_is_an_error_naming_both_and_writes_nothing() {
    let mut s = Sem::new("mismatch");
    s.take("a:1", 1, 3);
    s.take("b:1", 2, 3);
    s.take("c:1", 3, 3);
    s.queue("w:1", 4, 3);
    let before = s.snapshot();
    for mode in [Mode::Try, Mode::First, Mode::Poll] {
        for (owner, call) in [("n:1", 9), ("w:1", 4), ("a:1", 1)] {
            let err = s
                .attempt_with(owner, call, mode, 4, LONG, false)
                .unwrap_err();
            assert_eq!(err.kind(), fairlock::ErrorKind::PermitsMismatch, "{err}");
            assert!(
                err.to_string()
                    .contains("this call says 4, the semaphore has 3"),
                "{err}"
            );
            let text = chain(&err);
            assert!(
                text.contains("permits mismatch") && text.contains(" 4 ") && text.contains(" 3 "),
                "{text}"
            );
        }
    }
    assert_eq!(s.snapshot(), before);
}

#[test]
fn bad_arguments_are_refused_before_any_write() {
    let mut s = Sem::new("bad-input");
    s.take("a:1", 1, 2);
    let before = s.snapshot();
    // Acquire's ARGV after the common ones: owner, lease, fixed, waiter
    // timeout, mode, call, live guard token, capacity (the semaphore's
    // permits, what the former script called "permits") and units (what
    // this call takes); each bad in turn, the others good.
    let good = ["n:1", "60000", "0", "60000", "first", "2", "0", "2", "1"];
    for (at, value, what) in [
        (7, "0", "capacity"),
        (7, "x", "capacity"),
        (7, "4294967296", "capacity"),
        (8, "0", "units"),
        (8, "x", "units"),
        (8, "4294967296", "units"),
        (0, "n 1", "owner"),
        (5, "x", "owner"),
        (1, "0", "lease"),
        (2, "2", "fixed"),
        (4, "wait", "mode"),
        (3, "0", "waiter timeout"),
        (6, "x", "live guard token"),
    ] {
        let mut bad = good.map(str::to_owned);
        bad[at] = value.to_owned();
        let err = s.eval(counted(Op::Acquire), &bad).unwrap_err();
        assert_eq!(s.snapshot(), before, "{bad:?}");
        assert!(err.to_string().contains(what), "{bad:?}: {err}");
    }
    for bad in [["a 1", "5", "1"], ["a:1", "5", "x"]] {
        let bad = bad.map(str::to_owned);
        assert!(s.eval(counted(Op::Release), &bad).is_err(), "{bad:?}");
        assert_eq!(s.snapshot(), before, "{bad:?}");
    }
    let bad = ["a:1", "5", "1", "-3"].map(str::to_owned);
    assert!(s.eval(counted(Op::Renew), &bad).is_err());
    assert_eq!(s.snapshot(), before);
    // Heartbeat, cancel and abandon: a waiter timeout or a queue entry that
    // is not one is refused before any write (a good entry beside a bad
    // one too). A counted entry has five fields, the last its units: the
    // mutex's four-field entry (the semaphore's former one) is not one.
    let good = "a:1 1 60000 0 1";
    for (op, bad) in [
        (Op::Heartbeat, vec!["0", good]),
        (Op::Heartbeat, vec!["60000", good, "a:1 x 60000 0 1"]),
        (Op::Heartbeat, vec!["60000", good, "a:1 2 0 0 1"]),
        (Op::Heartbeat, vec!["60000", good, "a:1 2 60000 0"]),
        (Op::Heartbeat, vec!["60000", good, "a:1 2 60000 0 0"]),
        (Op::Cancel, vec!["a:1 1 60000 2 1"]),
        (Op::Cancel, vec!["a 1 1 60000 0 1"]),
        (Op::Cancel, vec!["a:1 1 60000 0"]),
        (Op::Abandon, vec!["a:1 1"]),
        (Op::Abandon, vec!["a:1 1 1"]),
        (Op::Abandon, vec!["a:1 1 99999999999999 0 1"]),
        (Op::Abandon, vec!["a:1 1 60000 0 4294967296"]),
    ] {
        let args: Vec<String> = bad.iter().map(|a| a.to_string()).collect();
        let err = s.eval(counted(op), &args).unwrap_err();
        assert_eq!(s.snapshot(), before, "{op:?} {bad:?}");
        let text = err.to_string();
        assert!(
            text.contains("queue entry") || text.contains("must be"),
            "{op:?} {bad:?}: {text}"
        );
    }
    // A meta key fairlock did not write.
    s.conn.set::<_, _, ()>(&s.keys.all[4], "junk").unwrap();
    s.conn.pexpire::<_, ()>(&s.keys.all[4], 60_000).unwrap();
    let before_junk = s.snapshot();
    let err = s
        .attempt_with("n:1", 2, Mode::First, 2, LONG, false)
        .unwrap_err();
    assert_eq!(err.kind(), fairlock::ErrorKind::KeyConflict, "{err}");
    assert_eq!(s.snapshot(), before_junk);
    assert_ne!(before, before_junk);
}

#[test]
fn tokens_strictly_increase_across_takes_handoffs_and_renewals() {
    let mut s = Sem::new("tokens");
    let mut tokens = Vec::new();
    let mut held: Vec<Permit> = (0..3).map(|i| s.take(&format!("h{i}:1"), i, 3)).collect();
    tokens.extend(held.iter().map(|p| p.token));
    for i in 10..20 {
        s.queue(&format!("w{i}:1"), i, 3);
    }
    while !held.is_empty() {
        let gone = held.remove(0);
        assert!(s.renew(&gone, Some(LONG)));
        let next = s.handed(&gone);
        tokens.extend(next.iter().map(|p| p.token));
        held.extend(next);
    }
    for i in 30..35 {
        let p = s.take(&format!("n{i}:1"), i, 3);
        tokens.push(p.token);
        s.release(&p);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    // The meta keeps the last one (after the capacity and the units used,
    // none now).
    let meta = s.meta().unwrap();
    assert_eq!(meta.split(' ').nth(1).unwrap(), "0", "{meta}");
    assert_eq!(
        meta.split(' ').nth(2).unwrap(),
        tokens.last().unwrap().to_string()
    );
}

#[test]
fn a_release_delivered_twice_counts_once() {
    let mut s = Sem::new("release-twice");
    let a = s.take("a:1", 1, 2);
    let b = s.take("b:1", 2, 2);
    s.queue("w:1", 3, 2);
    let handed = s.handed(&a);
    assert_eq!(handed.len(), 1);
    s.queue("x:1", 4, 2);
    // The repeat answers as released, hands nothing and frees nothing.
    assert_eq!(s.release(&a), RELEASED);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["b:1 2 1", "w:1 3 1"]);
    assert_eq!(s.queued(), ["x:1 4 60000 0 1"]);
    // x got b's permit; the repeat of b's release changes nothing.
    let handed = s.handed(&b);
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "x:1");
    assert_eq!(s.release(&b), RELEASED);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["w:1 3 1", "x:1 4 1"]);
    // Without a queue: freed once, the repeat changes nothing.
    let w = Permit {
        owner: "w:1".into(),
        call: 3,
        units: 1,
        token: handed_token(&mut s, "w:1 3 1"),
    };
    assert_eq!(s.release(&w), RELEASED);
    let d = s.take("d:1", 5, 2);
    assert_eq!(s.release(&w), RELEASED);
    assert_eq!(s.holders().len(), 2, "x and d");
    assert_eq!(s.queue("e:1", 6, 2), 0);
    // Never held, or another call of the same owner: the lease is lost.
    let never = Permit {
        owner: "z:1".into(),
        call: 9,
        units: 1,
        token: d.token,
    };
    assert_eq!(s.release(&never), ReleaseReply::NotHeld);
    let other_call = Permit {
        call: 8,
        ..d.clone()
    };
    assert_eq!(s.release(&other_call), ReleaseReply::NotHeld);
}

#[test]
fn a_call_delivered_twice_takes_one_permit() {
    let mut s = Sem::new("acquire-twice");
    let a = s.take("a:1", 1, 2);
    match s.attempt("a:1", 1, Mode::First, 2) {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, a.token),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.holders(), ["a:1 1 1"]);
    // The same owner's other call is another permit.
    let a2 = s.take("a:1", 2, 2);
    assert_ne!(a2.token, a.token);
    // A queued call delivered twice keeps its place.
    assert_eq!(s.queue("w:1", 3, 2), 0);
    assert_eq!(s.queue("x:1", 4, 2), 1);
    assert_eq!(s.queue("w:1", 3, 2), 0);
    assert_eq!(s.queued().len(), 2);
}

#[test]
fn renewal_extends_only_a_live_hold_with_its_token() {
    let mut s = Sem::new("renew");
    let a = match s
        .attempt_with("a:1", 1, Mode::First, 1, SHORT, true)
        .unwrap()
    {
        AcquireReply::Acquired { token, .. } => Permit {
            owner: "a:1".into(),
            call: 1,
            units: 1,
            token,
        },
        other => panic!("{other:?}"),
    };
    assert!(s.renew(&a, Some(LONG)));
    assert!(s.pttl(0) > 50_000, "the holders key outlives the new lease");
    assert!(s.pttl(4) > 50_000 + fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64);
    sleep(SHORT + Duration::from_millis(50));
    assert_eq!(s.holders(), ["a:1 1 1"], "renewed past its first lease");
    assert!(s.renew(&a, None), "a rewrite for WAIT");
    let stale = Permit {
        token: a.token - 1,
        ..a.clone()
    };
    assert!(!s.renew(&stale, Some(LONG)));
    assert_eq!(s.release(&a), RELEASED);
    assert!(!s.renew(&a, Some(LONG)), "released");
}

#[test]
fn keys_expire_a_fence_life_after_the_last_holder() {
    let mut s = Sem::new("ttl");
    let a = s.take("a:1", 1, 2);
    s.release(&a);
    assert_eq!(s.pttl(0), -2, "no holders, no holders key");
    assert_eq!(s.pttl(3), -2, "no tokens, no tokens key");
    let fence = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
    let meta = s.pttl(4);
    assert!(meta > fence - 1000 && meta <= fence, "{meta}");
    // Its capacity, no units used, the last token, the last release.
    assert_eq!(s.meta().unwrap(), format!("2 0 {} a:1#1", a.token));
}

#[test]
fn the_mutex_and_the_semaphore_of_one_name_are_separate() {
    let mut s = Sem::new("shared-name");
    s.take("a:1", 1, 1);
    let mutex = LockKeys::new(PREFIX, "shared-name").unwrap();
    assert_eq!(mutex.slot, s.keys.slot);
    let script = Script::of(LockKind::Mutex, Op::Acquire);
    assert_eq!(
        script.engine,
        Engine::Mutex,
        "the mutex keeps its own engine"
    );
    let acquire = redis::Script::new(script.source());
    let mut inv = acquire.prepare_invoke();
    for key in &mutex.all {
        inv.key(key);
    }
    let reply: Value = inv
        .arg(format!("{PREFIX}:wake:"))
        .arg("60000")
        .arg(vec!["b:1", "60000", "0", "60000", "try", "1", "0"])
        .invoke(&mut s.conn)
        .unwrap();
    assert!(
        matches!(reply, Value::Int(_)),
        "the mutex is free: {reply:?}"
    );
    assert_eq!(s.holders(), ["a:1 1 1"]);
}

#[test]
fn the_readme_acl_user_runs_every_semaphore_script() {
    let mut s = Sem::new("acl");
    create_acl_user(&mut s.conn, "sem-pw");
    let user = redis::Client::open(s._server.url_as("fairlock", "sem-pw"))
        .unwrap()
        .get_connection()
        .unwrap();
    s.runner = Some(user);
    // Denials of the redis crate's CLIENT SETINFO at connect are not the scripts'.
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut s.conn)
        .unwrap();
    let a = s.take("a:1", 1, 1);
    s.queue("w:1", 2, 1);
    let stale = Permit {
        token: 1,
        ..a.clone()
    };
    assert!(!s.renew(&stale, Some(LONG)));
    assert!(s.renew(&a, Some(LONG)));
    assert!(s.renew(&a, None));
    assert_eq!(s.handed(&a).len(), 1);
    assert_eq!(s.release(&a), RELEASED);
    assert!(s.attempt_with("b:1", 3, Mode::Try, 2, LONG, false).is_err());
    // The heartbeat, cancel, abandon and status scripts, each path that
    // writes: a heartbeat that hands a permit on and keeps a queued one, a
    // cancel that keeps a handed permit and one that leaves, an abandon of
    // a hold and of a queue entry, a status listing both; then the force
    // release script, freeing a hold and admitting a waiter.
    let w = permit_of("w:1", 2, handed_token(&mut s, "w:1 2 1"));
    s.queue("x:1", 4, 1);
    s.queue("y:1", 5, 1);
    assert_eq!(
        s.heartbeat(LONG, &[entry("x:1", 4), entry("y:1", 5)])
            .statuses,
        [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
    );
    let status = s.status(10, 10);
    assert_eq!((status.holders.len(), status.waiters.len()), (1, 2));
    assert_eq!(s.abandon(entry("w:1", 2)), AbandonReply::HoldGivenBack);
    assert!(matches!(
        s.cancel(entry("x:1", 4)),
        CancelReply::Kept { .. }
    ));
    assert_eq!(s.cancel(entry("y:1", 5)), CancelReply::Left);
    s.queue("z:1", 6, 1);
    assert_eq!(s.abandon(entry("z:1", 6)), AbandonReply::LeftQueue);
    assert_eq!(s.release(&w), RELEASED);
    s.queue("v:1", 7, 1);
    assert_eq!(
        s.force_release("op:1#1"),
        Freed {
            holds: 1,
            holder: None
        }
    );
    assert_eq!(s.holders(), ["v:1 7 1"]);
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

/// Newcomers (first attempts and tries) of 1 to N permits, releases (and
/// their repeats) and polls, against a model of weighted FIFO: a newcomer
/// takes its permits only if nobody waits and they fit; a release admits
/// the head of the queue and those right behind it while each fits; so
/// live holds are always the model's, their units never above N, grants go
/// in arrival order, no call passes a queued head (a smaller one that
/// would fit included), and tokens increase.
#[test]
fn a_long_random_mix_keeps_every_invariant() {
    let mut s = Sem::new("mix");
    const PERMITS: u32 = 3;
    // A fixed pseudo-random sequence (an LCG), so a failure repeats.
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut holding: Vec<Permit> = Vec::new();
    // Queued calls in arrival order: owner, call, permits asked for.
    let mut queued: Vec<(String, u64, u32)> = Vec::new();
    let mut arrivals: Vec<String> = Vec::new();
    let mut grants: Vec<String> = Vec::new();
    let mut tokens: Vec<u64> = Vec::new();
    // Holds made of more than one permit, and steps that ended with a head
    // waiting beside free permits: the weighted cases the mix must reach.
    let mut weighted = 0;
    let mut blocked_with_free = 0;
    // Newcomers whose permits were free but who came after a queued call.
    let mut held_back = 0;
    let mut call = 0;
    for _ in 0..400 {
        let used: u32 = holding.iter().map(|p| p.units).sum();
        match next(4) {
            // A newcomer for 1 to N permits: first attempt, or a try.
            0 | 1 => {
                call += 1;
                let owner = format!("c{}:1", next(12));
                let n = 1 + next(u64::from(PERMITS)) as u32;
                let mode = if next(3) == 0 { Mode::Try } else { Mode::First };
                match s.attempt_n(&owner, call, mode, n, PERMITS) {
                    AcquireReply::Acquired { token, .. } => {
                        assert!(
                            queued.is_empty(),
                            "{owner} took {n} permits past {queued:?}"
                        );
                        assert!(used + n <= PERMITS, "{owner} took {n} with {used} held");
                        tokens.push(token);
                        weighted += usize::from(n > 1);
                        holding.push(Permit {
                            owner,
                            call,
                            units: n,
                            token,
                        });
                    }
                    AcquireReply::Waiting { position, .. } => {
                        // Its permits were not free, or a call came first.
                        assert!(
                            !queued.is_empty() || used + n > PERMITS,
                            "{n} permits were free and nobody waited"
                        );
                        held_back += usize::from(used + n <= PERMITS);
                        match position {
                            Some(p) => {
                                assert_eq!(p as usize, queued.len());
                                arrivals.push(format!("{owner} {call}"));
                                queued.push((owner, call, n));
                            }
                            None => assert_eq!(mode, Mode::Try),
                        }
                    }
                }
            }
            // A holder releases (its repeat now and then): exactly the
            // head and those right behind it that fit are admitted.
            2 if !holding.is_empty() => {
                let gone = holding.remove(next(holding.len() as u64) as usize);
                let handed = s.handed(&gone);
                let mut free = PERMITS - holding.iter().map(|p| p.units).sum::<u32>();
                let mut admitted = Vec::new();
                while let Some(&(_, _, n)) = queued.first() {
                    if n > free {
                        break;
                    }
                    free -= n;
                    admitted.push(queued.remove(0));
                }
                let got: Vec<(String, u64, u32)> = handed
                    .iter()
                    .map(|p| (p.owner.clone(), p.call, p.units))
                    .collect();
                assert_eq!(got, admitted, "{gone:?} released");
                for p in handed {
                    grants.push(format!("{} {}", p.owner, p.call));
                    tokens.push(p.token);
                    weighted += usize::from(p.units > 1);
                    holding.push(p);
                }
                if next(4) == 0 {
                    assert_eq!(s.release(&gone), RELEASED);
                }
            }
            // A queued waiter polls: it stays where it is.
            3 if !queued.is_empty() => {
                let i = next(queued.len() as u64) as usize;
                let (owner, call, n) = queued[i].clone();
                match s.attempt_n(&owner, call, Mode::Poll, n, PERMITS) {
                    AcquireReply::Waiting {
                        position: Some(p), ..
                    } => assert_eq!(p as usize, i),
                    other => panic!("{owner} {call} polled: {other:?}"),
                }
            }
            _ => {}
        }
        let mut live = s.holders();
        let mut expected: Vec<String> = holding.iter().map(member).collect();
        live.sort();
        expected.sort();
        assert_eq!(live, expected);
        let held: u32 = live.iter().map(|m| units_of(m)).sum();
        assert!(held <= PERMITS, "{held} permits held: {live:?}");
        assert!(live.len() <= PERMITS as usize);
        assert_eq!(s.meta_used(), held, "the meta counts the units held");
        let in_queue: Vec<String> = s.queued();
        let model: Vec<String> = queued
            .iter()
            .map(|(owner, call, n)| format!("{owner} {call} 60000 0 {n}"))
            .collect();
        assert_eq!(in_queue, model);
        // A head that fit would have been admitted.
        if let Some((owner, call, n)) = queued.first() {
            assert!(
                held + n > PERMITS,
                "{owner} {call} waits for {n}, {held} held"
            );
            if held < PERMITS {
                blocked_with_free += 1;
            }
        }
    }
    assert!(grants.len() > 10, "the mix handed over {}", grants.len());
    assert_eq!(grants, arrivals[..grants.len()]);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(weighted > 10, "{weighted} holds of more than one permit");
    assert!(
        blocked_with_free > 10,
        "a head blocked {blocked_with_free} times"
    );
    assert!(held_back > 10, "{held_back} calls that fit held back");
}

#[test]
fn heartbeats_keep_waiters_alive_and_push_every_ttl_while_the_unbeaten_are_dropped() {
    let mut s = Sem::new("heartbeat");
    let a = s.take("a:1", 1, 1);
    // Waiters that live 300 ms without a heartbeat.
    let timeout = Duration::from_millis(300);
    s.waiter_timeout = timeout;
    s.queue("w:1", 2, 1);
    s.queue("w:2", 3, 1);
    s.queue("x:1", 4, 1);
    let mine = [entry("w:1", 2), entry("w:2", 3)];
    // Beaten every 100 ms for 1.2 s: four times their timeout.
    for _ in 0..12 {
        sleep(Duration::from_millis(100));
        let beat = s.heartbeat(timeout, &mine);
        assert_eq!(
            beat.statuses,
            [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
        );
        assert_eq!(beat.last_token, a.token);
        assert!(beat.pttl_ms > 50_000, "a's lease: {}", beat.pttl_ms);
        // The queue keys live past every deadline in them, the meta past them.
        let now = s.now_ms();
        let deadlines: Vec<(String, i64)> =
            s.conn.zrange_withscores(&s.keys.all[2], 0, -1).unwrap();
        for (_, deadline) in &deadlines {
            assert!(*deadline > now && *deadline <= now + 300, "{deadlines:?}");
            assert!(s.pttl(1) >= deadline - now && s.pttl(2) >= deadline - now);
        }
    }
    // x sent none: its entry is gone, w's two kept their places.
    assert_eq!(s.queued(), ["w:1 2 60000 0 1", "w:2 3 60000 0 1"]);
    assert_eq!(
        s.heartbeat(timeout, &[entry("x:1", 4)]).statuses,
        [WaiterStatus::Gone]
    );
    // The release goes to the first of them, and the next beat says so.
    let handed = s.handed(&a);
    assert_eq!(handed.len(), 1);
    assert_eq!(member(&handed[0]), "w:1 2 1");
    assert_eq!(
        s.heartbeat(timeout, &mine).statuses,
        [WaiterStatus::Owns(handed[0].token), WaiterStatus::Queued(0)]
    );
}

#[test]
fn a_heartbeat_hands_a_permit_an_expired_holder_left_to_the_head() {
    let mut s = Sem::new("heartbeat-expiry");
    let a = match s
        .attempt_with("a:1", 1, Mode::First, 1, SHORT, true)
        .unwrap()
    {
        AcquireReply::Acquired { token, .. } => token,
        other => panic!("{other:?}"),
    };
    s.queue("w:1", 2, 1);
    s.queue("x:1", 3, 1);
    let mut sub = s._server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    sleep(SHORT + Duration::from_millis(50));
    // x's heartbeat (not the head's) hands a's permit to w, the head.
    let beat = s.heartbeat(LONG, &[entry("x:1", 3)]);
    assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
    assert!(beat.last_token > a, "a new token: {beat:?}");
    assert!(beat.pttl_ms > 59_000, "w's lease: {}", beat.pttl_ms);
    assert_eq!(s.holders(), ["w:1 2 1"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0 1"]);
    let m = pubsub.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "fairlock:wake:w");
    let payload: String = m.get_payload().unwrap();
    assert!(
        payload.starts_with(&format!("G 2 {} ", beat.last_token)),
        "{payload}"
    );
    let m = pubsub.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "fairlock:wake:x");
    // w's own heartbeat learns it holds, with that token.
    assert_eq!(
        s.heartbeat(LONG, &[entry("w:1", 2)]).statuses,
        [WaiterStatus::Owns(beat.last_token)]
    );
}

#[test]
fn a_heartbeat_keeps_a_handed_watchdog_lease_and_leaves_a_fixed_one() {
    let mut s = Sem::new("heartbeat-lease");
    let a = s.take("a:1", 1, 2);
    let b = s.take("b:1", 2, 2);
    let lease = Duration::from_millis(400);
    let renewed = entry_with("w:1", 3, lease, false);
    let fixed = entry_with("f:1", 4, lease, true);
    for e in [renewed, fixed] {
        assert!(matches!(
            s.attempt_with(e.owner, e.wait_id, Mode::First, 2, lease, e.fixed)
                .unwrap(),
            AcquireReply::Waiting {
                position: Some(_),
                ..
            }
        ));
    }
    assert_eq!(s.handed(&a).len(), 1);
    assert_eq!(s.handed(&b).len(), 1);
    let w_end = s.lease_end("w:1 3 1").unwrap();
    let f_end = s.lease_end("f:1 4 1").unwrap();
    sleep(Duration::from_millis(200));
    let beat = s.heartbeat(LONG, &[renewed, fixed]);
    assert!(matches!(
        beat.statuses.as_slice(),
        [WaiterStatus::Owns(_), WaiterStatus::Owns(_)]
    ));
    let now = s.now_ms();
    let w_new = s.lease_end("w:1 3 1").unwrap();
    assert!(
        w_new > w_end && w_new >= now + 390,
        "kept at its lease: {w_end} -> {w_new}, now {now}"
    );
    assert_eq!(
        s.lease_end("f:1 4 1").unwrap(),
        f_end,
        "a fixed lease stays"
    );
    // Another call of the same owner is not extended by this one's beat.
    sleep(Duration::from_millis(250));
    assert_eq!(
        s.heartbeat(LONG, &[entry_with("f:1", 9, lease, false)])
            .statuses,
        [WaiterStatus::Gone]
    );
    assert_eq!(s.holders(), ["w:1 3 1"], "f's fixed lease ran out");
}

#[test]
fn a_cancel_leaves_nothing_and_hands_free_permits_to_the_next_waiters() {
    let mut s = Sem::new("cancel");
    let a = s.take("a:1", 1, 1);
    let keys_before: Vec<String> = {
        let mut k: Vec<String> = s.conn.keys("fairlock:*").unwrap();
        k.sort();
        k
    };
    s.queue("w:1", 2, 1);
    assert_eq!(s.cancel(entry("w:1", 2)), CancelReply::Left);
    let mut keys_after: Vec<String> = s.conn.keys("fairlock:*").unwrap();
    keys_after.sort();
    assert_eq!(keys_after, keys_before, "no queue keys left");
    assert_eq!(s.cancel(entry("w:1", 2)), CancelReply::Left, "again");
    // The head leaves while a permit is free (its holder's lease ran out):
    // the permit goes to the next live waiter.
    s.release(&a);
    s.attempt_with("b:1", 3, Mode::First, 1, SHORT, true)
        .unwrap();
    s.queue("x:1", 4, 1);
    s.queue("y:1", 5, 1);
    s.queue("z:1", 6, 1);
    sleep(SHORT + Duration::from_millis(50));
    assert_eq!(s.cancel(entry("y:1", 5)), CancelReply::Left);
    assert_eq!(s.holders(), ["x:1 4 1"], "the permit b left went to x");
    assert_eq!(s.queued(), ["z:1 6 60000 0 1"]);
    // Another call of the same owner that holds: its hold stays.
    s.queue("x:1", 7, 1);
    assert_eq!(s.cancel(entry("x:1", 7)), CancelReply::Left);
    assert_eq!(s.holders(), ["x:1 4 1"]);
    assert_eq!(s.queued(), ["z:1 6 60000 0 1"]);
}

#[test]
fn a_cancel_after_a_handoff_keeps_the_permit() {
    let mut s = Sem::new("cancel-kept");
    let a = s.take("a:1", 1, 1);
    s.queue("w:1", 2, 1);
    s.queue("x:1", 3, 1);
    let handed = s.handed(&a);
    for _ in 0..2 {
        match s.cancel(entry("w:1", 2)) {
            CancelReply::Kept { token, pttl_ms } => {
                assert_eq!(token, handed[0].token);
                assert!(pttl_ms > 59_000, "{pttl_ms}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.holders(), ["w:1 2 1"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0 1"]);
    // It releases as any holder.
    let w = permit_of("w:1", 2, handed[0].token);
    assert_eq!(s.handed(&w).len(), 1);
    assert_eq!(s.holders(), ["x:1 3 1"]);
}

#[test]
fn an_abandon_by_entry_gives_back_exactly_that_call_once() {
    let mut s = Sem::new("abandon");
    let a1 = s.take("a:1", 1, 2);
    let a2 = s.take("a:1", 2, 2);
    s.queue("w:1", 3, 2);
    s.queue("x:1", 4, 2);
    // The hold of call 1 only, handed on to w; a repeat changes nothing.
    assert_eq!(s.abandon(entry("a:1", 1)), AbandonReply::HoldGivenBack);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["a:1 2 1", "w:1 3 1"]);
    assert_eq!(s.abandon(entry("a:1", 1)), AbandonReply::Nothing);
    assert_eq!(s.holders().len(), 2);
    assert_eq!(s.queued(), ["x:1 4 60000 0 1"]);
    // The release the client could not send answers as released.
    assert_eq!(s.release(&a1), RELEASED);
    // A queued call: its entry, once.
    s.queue("y:1", 5, 2);
    assert_eq!(s.abandon(entry("y:1", 5)), AbandonReply::LeftQueue);
    assert_eq!(s.abandon(entry("y:1", 5)), AbandonReply::Nothing);
    assert_eq!(s.queued(), ["x:1 4 60000 0 1"]);
    // A call never made.
    assert_eq!(s.abandon(entry("q:1", 9)), AbandonReply::Nothing);
    // Call 2's hold goes to x.
    assert_eq!(s.abandon(entry("a:1", 2)), AbandonReply::HoldGivenBack);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["w:1 3 1", "x:1 4 1"]);
    assert_eq!(s.release(&a2), RELEASED);
    assert!(s.queued().is_empty());
}

#[test]
fn status_reports_permits_holders_available_and_the_queue() {
    let mut s = Sem::new("status");
    let empty = s.status(10, 10);
    assert_eq!(
        (empty.capacity, empty.live_holds, empty.live_waiters),
        (None, 0, 0)
    );
    assert_eq!(empty.used, 0);
    let a = s.take("a:1", 1, 3);
    let b = s.take("b:1", 2, 3);
    let one = s.status(10, 10);
    assert_eq!(one.capacity, Some(3));
    assert_eq!((one.live_holds, available(&one)), (2, 1));
    assert_eq!(one.last_token, b.token);
    let c = s.take("c:1", 3, 3);
    s.queue("w:1", 4, 3);
    s.queue("x:1", 5, 3);
    let full = s.status(10, 10);
    assert_eq!(
        (full.live_holds, available(&full), full.live_waiters),
        (3, 0, 2)
    );
    let listed: Vec<(String, Option<u64>, u64, u64)> = full
        .holders
        .iter()
        .map(|h| (h.owner.clone(), h.call, h.units, h.token))
        .collect();
    assert_eq!(
        listed,
        [
            ("a:1".to_owned(), Some(1), 1, a.token),
            ("b:1".to_owned(), Some(2), 1, b.token),
            ("c:1".to_owned(), Some(3), 1, c.token)
        ]
    );
    assert!(full.holders.iter().all(|h| h
        .lease_left_ms
        .is_some_and(|left| (59_000..=60_000).contains(&left))));
    let waiters: Vec<(&str, u64)> = full
        .waiters
        .iter()
        .map(|w| (w.owner.as_str(), w.units))
        .collect();
    assert_eq!(waiters, [("w:1", 1), ("x:1", 1)]);
    assert!(full
        .waiters
        .iter()
        .all(|w| (59_000..=60_000).contains(&w.liveness_left_ms)));
    // The bounds.
    let few = s.status(1, 2);
    assert_eq!((few.holders.len(), few.waiters.len()), (2, 1));
    assert_eq!(few.live_holds, 3);
    let none = s.status(0, 0);
    assert!(none.holders.is_empty() && none.waiters.is_empty());
    // After a handoff: w holds with the last token.
    let handed = s.handed(&a);
    let after = s.status(10, 10);
    assert_eq!(after.last_token, handed[0].token);
    assert_eq!(
        (after.live_holds, available(&after), after.live_waiters),
        (3, 0, 1)
    );
    assert!(after
        .holders
        .iter()
        .any(|h| h.owner == "w:1" && h.call == Some(4)));
    // An expired hold is no holder, and its permit counts as available.
    s.release(&b);
    s.release(&c);
    let w = permit_of("w:1", 4, handed[0].token);
    s.release(&w);
    let x = handed_permit(&mut s, "x:1", 5);
    s.release(&x);
    s.attempt_with("d:1", 6, Mode::First, 3, SHORT, true)
        .unwrap();
    sleep(SHORT + Duration::from_millis(50));
    let expired = s.status(10, 10);
    assert_eq!((expired.live_holds, available(&expired)), (0, 3));
    assert!(expired.holders.is_empty());
    // Weighted: a hold of two is one hold of two units, a waiter of three
    // is listed with its three.
    let e = s.take_n("e:1", 7, 2, 3);
    s.queue_n("y:1", 8, 3, 3);
    let weighted = s.status(10, 10);
    assert_eq!(
        (weighted.live_holds, weighted.used, available(&weighted)),
        (1, 2, 1)
    );
    assert_eq!(
        (weighted.holders[0].call, weighted.holders[0].units),
        (Some(7), 2)
    );
    assert_eq!(weighted.holders[0].token, e.token);
    assert_eq!(
        (
            weighted.waiters[0].owner.as_str(),
            weighted.waiters[0].units
        ),
        ("y:1", 3)
    );
}

/// The permit (one) a release handed to call `call` of `owner`.
fn handed_permit(s: &mut Sem, owner: &str, call: u64) -> Permit {
    let token = handed_token(s, &format!("{owner} {call} 1"));
    permit_of(owner, call, token)
}

#[test]
fn every_key_keeps_a_ttl_through_heartbeats_cancels_and_abandons_in_a_mix() {
    let mut s = Sem::new("ttl-mix");
    const PERMITS: u32 = 2;
    let mut seed: u64 = 0xbeef;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let owners: Vec<String> = (0..6).map(|i| format!("c{i}:1")).collect();
    let mut calls: Vec<(usize, u64)> = Vec::new();
    for call in 1..=200u64 {
        let who = next(owners.len() as u64) as usize;
        match next(5) {
            0 | 1 => {
                s.attempt(&owners[who], call, Mode::First, PERMITS);
                calls.push((who, call));
            }
            2 if !calls.is_empty() => {
                let (w, c) = calls[next(calls.len() as u64) as usize];
                s.heartbeat(LONG, &[entry(&owners[w], c)]);
            }
            3 if !calls.is_empty() => {
                let (w, c) = calls.remove(next(calls.len() as u64) as usize);
                s.cancel(entry(&owners[w], c));
                s.abandon(entry(&owners[w], c));
            }
            _ if !calls.is_empty() => {
                let (w, c) = calls.remove(next(calls.len() as u64) as usize);
                s.abandon(entry(&owners[w], c));
            }
            _ => {}
        }
        // Never more than N, and no permit free while a live waiter waits.
        let status = s.status(100, 100);
        assert!(status.live_holds <= u64::from(PERMITS));
        assert!(
            status.live_waiters == 0 || available(&status) == 0,
            "{status:?}"
        );
    }
}

/// Weighted FIFO, as tokio's batch semaphore: a head that does not fit
/// stops admission (a smaller call behind it that would fit queues
/// behind it, a try gets nothing), and when it is admitted the calls right
/// behind it that fit enter in the same step, each told by its own grant,
/// tokens in queue order; the first that does not fit waits, and hears it
/// now heads the queue.
#[test]
fn a_release_admits_a_large_head_and_the_calls_behind_it_that_fit_in_one_step() {
    let mut s = Sem::new("weighted-fifo");
    const N: u32 = 5;
    let a = s.take_n("a:1", 1, 3, N);
    assert_eq!(s.queue_n("b:1", 2, 4, N), 0);
    // C's one permit fits beside A's three, but B came first.
    assert_eq!(s.queue("c:1", 3, N), 1);
    assert_eq!(s.queue("d:1", 4, N), 2);
    assert!(matches!(
        s.attempt("t:1", 5, Mode::Try, N),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert!(matches!(
        s.attempt("c:1", 3, Mode::Poll, N),
        AcquireReply::Waiting {
            position: Some(1),
            ..
        }
    ));
    assert_eq!(s.holders(), ["a:1 1 3"]);
    assert_eq!(
        s.queued(),
        ["b:1 2 60000 0 4", "c:1 3 60000 0 1", "d:1 4 60000 0 1"]
    );
    let mut sub = s._server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let grants = match s.release(&a) {
        ReleaseReply::HandedOver(grants) => grants,
        other => panic!("{other:?}"),
    };
    let admitted: Vec<(&str, u64)> = grants
        .iter()
        .map(|g| (g.owner.as_str(), g.wait_id))
        .collect();
    assert_eq!(admitted, [("b:1", 2), ("c:1", 3)], "B, then C: 4 + 1 <= 5");
    assert!(
        a.token < grants[0].token && grants[0].token < grants[1].token,
        "{grants:?}"
    );
    assert!(
        grants.iter().all(|g| (59_000..=60_000).contains(&g.ttl_ms)),
        "{grants:?}"
    );
    let (b_token, c_token) = (grants[0].token, grants[1].token);
    for (channel, prefix) in [
        ("fairlock:wake:b", format!("G 2 {b_token} ")),
        ("fairlock:wake:c", format!("G 3 {c_token} ")),
        ("fairlock:wake:d", "H 4 ".to_owned()),
    ] {
        let m = pubsub.get_message().unwrap();
        let payload: String = m.get_payload().unwrap();
        assert_eq!(m.get_channel_name(), channel, "{payload}");
        assert!(payload.starts_with(&prefix), "{payload}");
    }
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["b:1 2 4", "c:1 3 1"]);
    assert_eq!(s.queued(), ["d:1 4 60000 0 1"]);
    let status = s.status(10, 10);
    assert_eq!(
        (status.used, status.live_holds, status.live_waiters),
        (5, 2, 1)
    );
    let waiting: Vec<(&str, u64)> = status
        .waiters
        .iter()
        .map(|w| (w.owner.as_str(), w.units))
        .collect();
    assert_eq!(waiting, [("d:1", 1)]);
    assert_eq!(s.meta().unwrap(), format!("5 5 {c_token} a:1#1"));
    // D enters with the first permit that comes back, not before.
    assert!(matches!(
        s.attempt("d:1", 4, Mode::Poll, N),
        AcquireReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    let c = permit_of("c:1", 3, c_token);
    let handed: Vec<String> = s.handed(&c).iter().map(member).collect();
    assert_eq!(handed, ["d:1 4 1"]);
}

/// A head asking for every permit while single permits are held: each one
/// that comes back stays free for it, whoever arrives (a try, a first
/// attempt, a poll or a heartbeat of those behind), until it has them all;
/// the calls that queued behind it enter when it releases.
#[test]
fn a_large_head_is_never_starved_by_smaller_calls() {
    let mut s = Sem::new("large-head");
    const N: u32 = 4;
    let mut held: Vec<Permit> = (1..=3).map(|i| s.take(&format!("h{i}:1"), i, N)).collect();
    assert_eq!(s.queue_n("big:1", 10, N, N), 0);
    let mut behind: Vec<(String, u64)> = Vec::new();
    while !held.is_empty() {
        let free = N - held.len() as u32;
        let call = 20 + behind.len() as u64;
        let owner = format!("n{call}:1");
        assert!(
            matches!(
                s.attempt(&owner, call, Mode::Try, N),
                AcquireReply::Waiting { position: None, .. }
            ),
            "a try passed the head with {free} free"
        );
        assert_eq!(s.queue(&owner, call, N), behind.len() as u64 + 1);
        behind.push((owner, call));
        for (i, (owner, call)) in behind.iter().enumerate() {
            assert!(
                matches!(
                    s.attempt(owner, *call, Mode::Poll, N),
                    AcquireReply::Waiting { position: Some(p), .. } if p == i as u64 + 1
                ),
                "{owner} polled past the head with {free} free"
            );
        }
        let entries: Vec<QueueEntry> = behind.iter().map(|(o, c)| entry(o, *c)).collect();
        let beat = s.heartbeat(LONG, &entries);
        let expected: Vec<WaiterStatus> = (1..=behind.len() as u64)
            .map(WaiterStatus::Queued)
            .collect();
        assert_eq!(beat.statuses, expected);
        assert!(matches!(
            s.attempt_n("big:1", 10, Mode::Poll, N, N),
            AcquireReply::Waiting {
                position: Some(0),
                ..
            }
        ));
        let status = s.status(10, 10);
        assert_eq!(
            (status.used, status.live_holds),
            (held.len() as u64, held.len() as u64)
        );
        // A holder leaves: its permit waits for the head.
        let gone = held.remove(0);
        let handed: Vec<String> = s.handed(&gone).iter().map(member).collect();
        if held.is_empty() {
            assert_eq!(handed, ["big:1 10 4"], "the last permit back");
        } else {
            assert!(handed.is_empty(), "{handed:?}");
        }
    }
    // The head holds them all; those behind it enter when it releases.
    assert!(matches!(
        s.attempt("late:1", 30, Mode::Try, N),
        AcquireReply::Waiting { position: None, .. }
    ));
    let big = handed_permit_of(&mut s, "big:1", 10, N);
    let handed: Vec<String> = s.handed(&big).iter().map(member).collect();
    let expected: Vec<String> = behind.iter().map(|(o, c)| format!("{o} {c} 1")).collect();
    assert_eq!(handed, expected);
    assert!(s.queued().is_empty());
}

/// A large head that leaves (cancelled, abandoned) or dies (no heartbeat
/// within its waiter timeout) no longer blocks the smaller calls behind
/// it: those that fit enter in the step that removes it.
#[test]
fn a_large_head_that_leaves_or_dies_lets_the_calls_behind_it_in() {
    let mut s = Sem::new("large-head-leaves");
    const N: u32 = 4;
    let a = s.take_n("a:1", 1, 2, N);
    s.queue_n("big:1", 2, 4, N);
    s.queue("c:1", 3, N);
    s.queue("d:1", 4, N);
    s.queue("e:1", 5, N);
    // Cancelled: C and D fit beside A's two, E does not.
    assert_eq!(s.cancel(entry_of("big:1", 2, 4)), CancelReply::Left);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["a:1 1 2", "c:1 3 1", "d:1 4 1"]);
    assert_eq!(s.queued(), ["e:1 5 60000 0 1"]);
    let beat = s.heartbeat(LONG, &[entry("c:1", 3), entry("d:1", 4), entry("e:1", 5)]);
    assert!(
        matches!(
            beat.statuses.as_slice(),
            [
                WaiterStatus::Owns(_),
                WaiterStatus::Owns(_),
                WaiterStatus::Queued(0)
            ]
        ),
        "{beat:?}"
    );
    let handed: Vec<String> = s.handed(&a).iter().map(member).collect();
    assert_eq!(handed, ["e:1 5 1"]);
    // Abandoned (its client never learned how its call ended): three held,
    // a head of three waits, F's one (which would fit) behind it.
    let c = handed_permit(&mut s, "c:1", 3);
    assert_eq!(s.queue_n("big:2", 6, 3, N), 0);
    assert_eq!(s.queue("f:1", 7, N), 1);
    assert_eq!(s.abandon(entry_of("big:2", 6, 3)), AbandonReply::LeftQueue);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["c:1 3 1", "d:1 4 1", "e:1 5 1", "f:1 7 1"]);
    assert!(s.queued().is_empty());
    // Dead: a head of two that stops beating, G's one behind it.
    assert_eq!(s.release(&c), RELEASED);
    s.waiter_timeout = Duration::from_millis(300);
    assert_eq!(s.queue_n("big:3", 8, 2, N), 0);
    s.waiter_timeout = LONG;
    assert_eq!(s.queue("g:1", 9, N), 1);
    sleep(Duration::from_millis(400));
    assert_eq!(
        s.heartbeat(LONG, &[entry("g:1", 9)]).statuses,
        [WaiterStatus::Owns(handed_token(&mut s, "g:1 9 1"))]
    );
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["d:1 4 1", "e:1 5 1", "f:1 7 1", "g:1 9 1"]);
    assert!(s.queued().is_empty());
    let status = s.status(10, 10);
    assert_eq!((status.used, status.live_waiters), (4, 0));
}

/// A call for no permit or for more than the semaphore has could never be
/// admitted (or would be a hold of nothing): the script refuses it with an
/// error naming what is wrong before it writes anything, on a semaphore
/// nobody used and on one in use, for a newcomer and for a repeat of a
/// holder's or a waiter's call.
#[test]
fn units_of_zero_or_above_the_permits_are_refused_before_any_write() {
    let mut s = Sem::new("units-bounds");
    let refusals = [
        (
            0,
            "units must be a whole number from 1 to 4294967295, got 0",
        ),
        (4, "a call asks for 4 units of 3"),
    ];
    let refuse = |s: &mut Sem, owner: &str, call: u64| {
        for (n, what) in refusals {
            for mode in [Mode::Try, Mode::First, Mode::Poll] {
                let err = s
                    .attempt_ask(owner, call, mode, Ask::Permits { n, of: 3 }, LONG, false)
                    .unwrap_err();
                assert_eq!(err.kind(), fairlock::ErrorKind::Server, "{err}");
                assert!(chain(&err).contains(what), "{n}: {}", chain(&err));
            }
        }
    };
    refuse(&mut s, "n:1", 1);
    assert!(s.snapshot().is_empty(), "nothing written");
    s.take_n("a:1", 1, 2, 3);
    s.queue_n("w:1", 2, 2, 3);
    let before = s.snapshot();
    for (owner, call) in [("n:1", 9), ("w:1", 2), ("a:1", 1)] {
        refuse(&mut s, owner, call);
        assert_eq!(s.snapshot(), before, "{owner} {call}");
    }
    // The same as raw ARGV: units after the capacity 3.
    for units in ["0", "4", "-1", "1.5", "", "4294967296"] {
        let args = ["n:1", "60000", "0", "60000", "first", "9", "0", "3", units].map(str::to_owned);
        let err = s.eval(counted(Op::Acquire), &args).unwrap_err();
        assert!(err.to_string().contains("units"), "{units:?}: {err}");
        assert_eq!(s.snapshot(), before, "{units:?}");
    }
    assert_eq!(s.holders(), ["a:1 1 2"]);
    assert_eq!(s.queued(), ["w:1 2 60000 0 2"]);
}

/// A force release frees every live hold, whoever holds it, and admits the
/// waiters that fit in the same step; the same call delivered again
/// answers as the first did and frees nobody (not the holds just
/// admitted); the holders it freed learn they lost their leases.
#[test]
fn a_force_release_frees_every_hold_once_and_admits_the_waiters_that_fit() {
    let mut s = Sem::new("force");
    const N: u32 = 4;
    let freed = |holds| Freed {
        holds,
        holder: None,
    };
    // Nothing held, nothing used: nothing freed, nothing written.
    assert_eq!(s.force_release("op:1#1"), freed(0));
    assert!(s.snapshot().is_empty());
    let a = s.take("a:1", 1, N);
    let b = s.take_n("b:1", 2, 2, N);
    let c = s.take("c:1", 3, N);
    s.queue_n("w:1", 4, 3, N);
    s.queue("x:1", 5, N);
    s.queue_n("y:1", 6, 2, N);
    assert_eq!(s.force_release("op:1#2"), freed(3));
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["w:1 4 3", "x:1 5 1"], "W and X fit, Y does not");
    assert_eq!(s.queued(), ["y:1 6 60000 0 2"]);
    let status = s.status(10, 10);
    assert_eq!(
        (status.used, status.live_holds, status.live_waiters),
        (4, 2, 1)
    );
    assert!(status.holders.iter().all(|h| h.token > c.token));
    let before = s.snapshot();
    assert_eq!(s.force_release("op:1#2"), freed(3), "the repeat");
    assert_eq!(s.snapshot(), before, "the repeat changes nothing");
    for old in [&a, &b, &c] {
        assert!(!s.renew(old, Some(LONG)), "{old:?}");
        assert_eq!(s.release(old), ReleaseReply::NotHeld, "{old:?}");
    }
    assert_eq!(s.snapshot(), before, "the old holders change nothing");
    // Another call is another force release: W and X go, Y enters.
    assert_eq!(s.force_release("op:1#3"), freed(2));
    assert_eq!(s.holders(), ["y:1 6 2"]);
    assert!(s.queued().is_empty());
}

/// A fixed lease (no watchdog) ends by itself, the holders key with it:
/// nobody has to call for its units to be free, and the next heartbeat of
/// any waiter admits the head (and not a call behind it that does not
/// fit); or the head's own poll takes its permits, and lets in the calls
/// behind it that fit in the same step.
#[test]
fn a_fixed_lease_runs_out_by_itself_and_a_heartbeat_admits_the_head() {
    let mut s = Sem::new("fixed-lease");
    const N: u32 = 2;
    let token = match s
        .attempt_ask(
            "a:1",
            1,
            Mode::First,
            Ask::Permits { n: N, of: N },
            SHORT,
            true,
        )
        .unwrap()
    {
        AcquireReply::Acquired { token, .. } => token,
        other => panic!("{other:?}"),
    };
    let a = Permit {
        owner: "a:1".into(),
        call: 1,
        units: N,
        token,
    };
    assert_eq!(s.queue_n("w:1", 2, N, N), 0);
    assert_eq!(s.queue("x:1", 3, N), 1);
    sleep(SHORT + Duration::from_millis(50));
    assert!(s.holders().is_empty(), "the lease ran out");
    assert_eq!(s.pttl(0), -2, "the holders key ran out with it");
    let status = s.status(10, 10);
    assert_eq!(
        (status.live_holds, status.used, status.live_waiters),
        (0, 0, 2)
    );
    // X's heartbeat (not the head's): W's two admitted, X's one waits.
    let beat = s.heartbeat(LONG, &[entry("x:1", 3)]);
    assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
    assert!(beat.last_token > a.token, "{beat:?}");
    assert!(beat.pttl_ms > 59_000, "W's lease: {}", beat.pttl_ms);
    assert_eq!(s.holders(), ["w:1 2 2"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0 1"]);
    assert_eq!(
        s.heartbeat(LONG, &[entry_of("w:1", 2, N)]).statuses,
        [WaiterStatus::Owns(beat.last_token)]
    );
    assert!(!s.renew(&a, Some(LONG)));
    assert_eq!(s.release(&a), ReleaseReply::NotHeld);
    // Again, with the head polling: Y's one and Z's one behind it.
    let w = handed_permit_of(&mut s, "w:1", 2, N);
    let handed: Vec<String> = s.handed(&w).iter().map(member).collect();
    assert_eq!(handed, ["x:1 3 1"]);
    let x = handed_permit(&mut s, "x:1", 3);
    assert_eq!(s.release(&x), RELEASED);
    s.attempt_ask(
        "b:1",
        4,
        Mode::First,
        Ask::Permits { n: N, of: N },
        SHORT,
        true,
    )
    .unwrap();
    assert_eq!(s.queue("y:1", 5, N), 0);
    assert_eq!(s.queue("z:1", 6, N), 1);
    sleep(SHORT + Duration::from_millis(50));
    let y = match s.attempt("y:1", 5, Mode::Poll, N) {
        AcquireReply::Acquired { token, .. } => token,
        other => panic!("{other:?}"),
    };
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["y:1 5 1", "z:1 6 1"], "Z entered with Y");
    assert!(s.queued().is_empty());
    match s.attempt("z:1", 6, Mode::Poll, N) {
        AcquireReply::Acquired { token, .. } => assert!(token > y, "{token} after {y}"),
        other => panic!("{other:?}"),
    }
}

/// The hold of `n` permits a release handed to call `call` of `owner`.
fn handed_permit_of(s: &mut Sem, owner: &str, call: u64, n: u32) -> Permit {
    Permit {
        units: n,
        ..permit_of(owner, call, handed_token(s, &format!("{owner} {call} {n}")))
    }
}
