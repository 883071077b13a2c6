//! The semaphore's scripts driven directly (the same Lua, keys and
//! arguments the client will send, from the library's protocol layer):
//! at most N holders, strict FIFO handoff, `try` never ahead of a queued
//! waiter, leases that run out free their permit for the head, a permits
//! mismatch refused before any write (as `ErrorKind::PermitsMismatch`),
//! increasing fencing tokens, repeats that count once, heartbeats that keep
//! waiters and hand on permits, cancels and abandons that leave nothing,
//! status, the README's ACL user, and no key left without a TTL after any
//! step.

use std::thread::sleep;
use std::time::Duration;

use fairlock::test_support::{
    AbandonReply, AcquireReply, CancelReply, CommonArgs, HandedOver, HeartbeatReply, LockKeys,
    Mode, Operation, QueueEntry, Script, SemAbandon, SemAcquire, SemCancel, SemHeartbeat,
    SemRelease, SemReleaseReply, SemRenew, SemStatus, SemStatusReply, WaiterStatus,
};
use fairlock_test_support::*;
use redis::{Commands, Value};

/// The library's default key prefix.
const PREFIX: &str = "fairlock";
/// A lease that outlives any test step.
const LONG: Duration = Duration::from_secs(60);
/// A lease a test waits out.
const SHORT: Duration = Duration::from_millis(150);

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

/// A permit held: owner, call, token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Permit {
    owner: String,
    call: u64,
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

    fn run<O: Operation>(&mut self, op: &O) -> fairlock::Result<O::Reply> {
        let keys = op.keys(&self.keys).to_vec();
        assert_eq!(
            keys, self.keys.all,
            "every semaphore script takes all five keys"
        );
        match self.eval(O::SCRIPT, &op.args()) {
            Ok(reply) => op.parse(reply),
            Err(e) => Err(e.into()),
        }
    }

    /// One attempt of call `call` of `owner` (a watchdog lease of 60 s, a
    /// 60 s waiter timeout).
    fn attempt(&mut self, owner: &str, call: u64, mode: Mode, permits: u32) -> AcquireReply {
        self.attempt_with(owner, call, mode, permits, LONG, false)
            .unwrap()
    }

    fn attempt_with(
        &mut self,
        owner: &str,
        call: u64,
        mode: Mode,
        permits: u32,
        lease: Duration,
        fixed: bool,
    ) -> fairlock::Result<AcquireReply> {
        let op = SemAcquire {
            owner,
            lease,
            fixed,
            waiter_timeout: self.waiter_timeout,
            mode,
            wait_id: call,
            permits,
        };
        let reply = self.run(&op);
        self.assert_every_key_expires();
        reply
    }

    /// A permit taken at once, or a panic.
    fn take(&mut self, owner: &str, call: u64, permits: u32) -> Permit {
        match self.attempt(owner, call, Mode::First, permits) {
            AcquireReply::Acquired { token, .. } => Permit {
                owner: owner.to_owned(),
                call,
                token,
            },
            other => panic!("{owner} did not get a permit: {other:?}"),
        }
    }

    /// Queues call `call` of `owner`; returns its position.
    fn queue(&mut self, owner: &str, call: u64, permits: u32) -> u64 {
        match self.attempt(owner, call, Mode::First, permits) {
            AcquireReply::Waiting {
                position: Some(p), ..
            } => p,
            other => panic!("{owner} did not queue: {other:?}"),
        }
    }

    fn release(&mut self, permit: &Permit) -> SemReleaseReply {
        let reply = self
            .run(&SemRelease {
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
            SemReleaseReply::HandedOver(grants) => grants.into_iter().map(to_permit).collect(),
            SemReleaseReply::Released => Vec::new(),
            SemReleaseReply::NotHeld => panic!("{permit:?} was not held"),
        }
    }

    fn renew(&mut self, permit: &Permit, lease: Option<Duration>) -> bool {
        let reply = self
            .run(&SemRenew {
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
            .run(&SemHeartbeat {
                waiter_timeout: timeout,
                waiters: entries.to_vec(),
            })
            .unwrap();
        self.assert_every_key_expires();
        reply
    }

    fn cancel(&mut self, entry: QueueEntry) -> CancelReply {
        let reply = self.run(&SemCancel { entry }).unwrap();
        self.assert_every_key_expires();
        reply
    }

    fn abandon(&mut self, entry: QueueEntry) -> AbandonReply {
        let reply = self.run(&SemAbandon { entry }).unwrap();
        self.assert_every_key_expires();
        reply
    }

    fn status(&mut self, waiters: usize, holders: usize) -> SemStatusReply {
        let before = self.snapshot();
        let reply = self.run(&SemStatus { waiters, holders }).unwrap();
        assert_eq!(self.snapshot(), before, "status changes nothing");
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

    /// Live holders "<owner> <call>" (lease end not passed), by lease end.
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

    fn pttl(&mut self, key: usize) -> i64 {
        self.conn.pttl(&self.keys.all[key]).unwrap()
    }

    /// Every key has a TTL, and the meta (permits, last token) outlives the
    /// holders, their tokens and the queue.
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

fn to_permit(grant: HandedOver) -> Permit {
    Permit {
        owner: grant.owner,
        call: grant.wait_id,
        token: grant.token,
    }
}

/// The token the tokens hash keeps for `member`.
fn handed_token(s: &mut Sem, member: &str) -> u64 {
    s.conn.hget(&s.keys.all[3], member).unwrap()
}

fn member(permit: &Permit) -> String {
    format!("{} {}", permit.owner, permit.call)
}

/// The queue entry of call `call` of `owner` with `lease` (fixed or not).
fn entry_with(owner: &str, call: u64, lease: Duration, fixed: bool) -> QueueEntry<'_> {
    QueueEntry {
        owner,
        wait_id: call,
        lease,
        fixed,
        access: None,
    }
}

/// The queue entry `Sem::queue` makes: a 60 s watchdog lease.
fn entry(owner: &str, call: u64) -> QueueEntry<'_> {
    entry_with(owner, call, LONG, false)
}

/// A permit handed to a waiter, as its heartbeat or cancel reports it.
fn permit_of(owner: &str, call: u64, token: u64) -> Permit {
    Permit {
        owner: owner.to_owned(),
        call,
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
    assert_eq!(s.holders(), ["w:1 2"]);
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
    assert_eq!(s.holders(), ["w:1 2"]);
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
    assert_eq!(holders, ["b:1 2", "w:1 3"]);
    // a lost its lease: its release and renewal say so and change nothing.
    assert!(!s.renew(&a, Some(LONG)));
    assert_eq!(s.release(&a), SemReleaseReply::NotHeld);
    assert_eq!(s.queued(), ["x:1 4 60000 0"]);
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
    let args = |owner: &str, lease: &str, fixed: &str, mode: &str, call: &str, permits: &str| {
        [owner, lease, fixed, "60000", mode, call, permits].map(str::to_owned)
    };
    for (bad, what) in [
        (args("n:1", "60000", "0", "first", "2", "0"), "permits"),
        (args("n:1", "60000", "0", "first", "2", "x"), "permits"),
        (
            args("n:1", "60000", "0", "first", "2", "4294967296"),
            "permits",
        ),
        (args("n 1", "60000", "0", "first", "2", "2"), "owner"),
        (args("n:1", "60000", "0", "first", "x", "2"), "owner"),
        (args("n:1", "0", "0", "first", "2", "2"), "lease"),
        (args("n:1", "60000", "2", "first", "2", "2"), "fixed"),
        (args("n:1", "60000", "0", "wait", "2", "2"), "mode"),
    ] {
        let err = s.eval(Script::SemAcquire, &bad).unwrap_err();
        assert_eq!(s.snapshot(), before, "{bad:?}");
        assert!(err.to_string().contains(what), "{bad:?}: {err}");
    }
    for bad in [["a 1", "5", "1"], ["a:1", "5", "x"]] {
        let bad = bad.map(str::to_owned);
        assert!(s.eval(Script::SemRelease, &bad).is_err(), "{bad:?}");
    }
    let bad = ["a:1", "5", "1", "-3"].map(str::to_owned);
    assert!(s.eval(Script::SemRenew, &bad).is_err());
    // Heartbeat, cancel and abandon: a waiter timeout or a queue entry that
    // is not one is refused before any write (a good entry beside a bad
    // one too).
    let good = "a:1 1 60000 0";
    for (script, bad) in [
        (Script::SemHeartbeat, vec!["0", good]),
        (Script::SemHeartbeat, vec!["60000", good, "a:1 x 60000 0"]),
        (Script::SemHeartbeat, vec!["60000", good, "a:1 2 0 0"]),
        (Script::SemCancel, vec!["a:1 1 60000 2"]),
        (Script::SemCancel, vec!["a 1 1 60000 0"]),
        (Script::SemAbandon, vec!["a:1 1"]),
        (Script::SemAbandon, vec!["a:1 1 99999999999999 0"]),
    ] {
        let args: Vec<String> = bad.iter().map(|a| a.to_string()).collect();
        let err = s.eval(script, &args).unwrap_err();
        assert_eq!(s.snapshot(), before, "{script:?} {bad:?}");
        let text = err.to_string();
        assert!(
            text.contains("queue entry") || text.contains("must be"),
            "{script:?} {bad:?}: {text}"
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
    // The meta keeps the last one.
    let meta = s.meta().unwrap();
    assert_eq!(
        meta.split(' ').nth(1).unwrap(),
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
    assert_eq!(s.release(&a), SemReleaseReply::Released);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["b:1 2", "w:1 3"]);
    assert_eq!(s.queued(), ["x:1 4 60000 0"]);
    // x got b's permit; the repeat of b's release changes nothing.
    let handed = s.handed(&b);
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "x:1");
    assert_eq!(s.release(&b), SemReleaseReply::Released);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["w:1 3", "x:1 4"]);
    // Without a queue: freed once, the repeat changes nothing.
    let w = Permit {
        owner: "w:1".into(),
        call: 3,
        token: handed_token(&mut s, "w:1 3"),
    };
    assert_eq!(s.release(&w), SemReleaseReply::Released);
    let d = s.take("d:1", 5, 2);
    assert_eq!(s.release(&w), SemReleaseReply::Released);
    assert_eq!(s.holders().len(), 2, "x and d");
    assert_eq!(s.queue("e:1", 6, 2), 0);
    // Never held, or another call of the same owner: the lease is lost.
    let never = Permit {
        owner: "z:1".into(),
        call: 9,
        token: d.token,
    };
    assert_eq!(s.release(&never), SemReleaseReply::NotHeld);
    let other_call = Permit {
        call: 8,
        ..d.clone()
    };
    assert_eq!(s.release(&other_call), SemReleaseReply::NotHeld);
}

#[test]
fn a_call_delivered_twice_takes_one_permit() {
    let mut s = Sem::new("acquire-twice");
    let a = s.take("a:1", 1, 2);
    match s.attempt("a:1", 1, Mode::First, 2) {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, a.token),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.holders(), ["a:1 1"]);
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
            token,
        },
        other => panic!("{other:?}"),
    };
    assert!(s.renew(&a, Some(LONG)));
    assert!(s.pttl(0) > 50_000, "the holders key outlives the new lease");
    assert!(s.pttl(4) > 50_000 + fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64);
    sleep(SHORT + Duration::from_millis(50));
    assert_eq!(s.holders(), ["a:1 1"], "renewed past its first lease");
    assert!(s.renew(&a, None), "a rewrite for WAIT");
    let stale = Permit {
        token: a.token - 1,
        ..a.clone()
    };
    assert!(!s.renew(&stale, Some(LONG)));
    assert_eq!(s.release(&a), SemReleaseReply::Released);
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
    assert_eq!(s.meta().unwrap(), format!("2 {} a:1#1", a.token));
}

#[test]
fn the_mutex_and_the_semaphore_of_one_name_are_separate() {
    let mut s = Sem::new("shared-name");
    s.take("a:1", 1, 1);
    let mutex = LockKeys::new(PREFIX, "shared-name").unwrap();
    assert_eq!(mutex.slot, s.keys.slot);
    let acquire = redis::Script::new(Script::Acquire.source());
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
    assert_eq!(s.holders(), ["a:1 1"]);
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
    assert_eq!(s.release(&a), SemReleaseReply::Released);
    assert!(s.attempt_with("b:1", 3, Mode::Try, 2, LONG, false).is_err());
    // The heartbeat, cancel, abandon and status scripts, each path that
    // writes: a heartbeat that hands a permit on and keeps a queued one, a
    // cancel that keeps a handed permit and one that leaves, an abandon of
    // a hold and of a queue entry, a status listing both.
    let w = permit_of("w:1", 2, handed_token(&mut s, "w:1 2"));
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
    assert_eq!(s.release(&w), SemReleaseReply::Released);
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

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
    let mut queued: Vec<(String, u64)> = Vec::new();
    let mut arrivals: Vec<String> = Vec::new();
    let mut grants: Vec<String> = Vec::new();
    let mut tokens: Vec<u64> = Vec::new();
    let mut call = 0;
    for _ in 0..400 {
        match next(4) {
            // A newcomer: first attempt, or a try.
            0 | 1 => {
                call += 1;
                let owner = format!("c{}:1", next(12));
                let mode = if next(3) == 0 { Mode::Try } else { Mode::First };
                match s.attempt(&owner, call, mode, PERMITS) {
                    AcquireReply::Acquired { token, .. } => {
                        assert!(queued.is_empty(), "{owner} took a permit past {queued:?}");
                        tokens.push(token);
                        holding.push(Permit { owner, call, token });
                    }
                    AcquireReply::Waiting { position, .. } => {
                        assert_eq!(holding.len(), PERMITS as usize, "a permit was free");
                        match position {
                            Some(p) => {
                                assert_eq!(p as usize, queued.len());
                                arrivals.push(format!("{owner} {call}"));
                                queued.push((owner, call));
                            }
                            None => assert_eq!(mode, Mode::Try),
                        }
                    }
                }
            }
            // A holder releases (its repeat now and then).
            2 if !holding.is_empty() => {
                let gone = holding.remove(next(holding.len() as u64) as usize);
                let handed = s.handed(&gone);
                assert!(handed.len() <= 1, "{handed:?}");
                for p in handed {
                    let (owner, call) = queued.remove(0);
                    assert_eq!((p.owner.as_str(), p.call), (owner.as_str(), call));
                    grants.push(format!("{owner} {call}"));
                    tokens.push(p.token);
                    holding.push(p);
                }
                if next(4) == 0 {
                    assert_eq!(s.release(&gone), SemReleaseReply::Released);
                }
            }
            // A queued waiter polls: it stays where it is.
            3 if !queued.is_empty() => {
                let i = next(queued.len() as u64) as usize;
                let (owner, call) = queued[i].clone();
                match s.attempt(&owner, call, Mode::Poll, PERMITS) {
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
        assert!(live.len() <= PERMITS as usize);
        let in_queue: Vec<String> = s.queued();
        assert_eq!(in_queue.len(), queued.len());
    }
    assert!(grants.len() > 10, "the mix handed over {}", grants.len());
    assert_eq!(grants, arrivals[..grants.len()]);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
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
    assert_eq!(s.queued(), ["w:1 2 60000 0", "w:2 3 60000 0"]);
    assert_eq!(
        s.heartbeat(timeout, &[entry("x:1", 4)]).statuses,
        [WaiterStatus::Gone]
    );
    // The release goes to the first of them, and the next beat says so.
    let handed = s.handed(&a);
    assert_eq!(handed.len(), 1);
    assert_eq!(member(&handed[0]), "w:1 2");
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
    assert_eq!(s.holders(), ["w:1 2"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0"]);
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
    let w_end = s.lease_end("w:1 3").unwrap();
    let f_end = s.lease_end("f:1 4").unwrap();
    sleep(Duration::from_millis(200));
    let beat = s.heartbeat(LONG, &[renewed, fixed]);
    assert!(matches!(
        beat.statuses.as_slice(),
        [WaiterStatus::Owns(_), WaiterStatus::Owns(_)]
    ));
    let now = s.now_ms();
    let w_new = s.lease_end("w:1 3").unwrap();
    assert!(
        w_new > w_end && w_new >= now + 390,
        "kept at its lease: {w_end} -> {w_new}, now {now}"
    );
    assert_eq!(s.lease_end("f:1 4").unwrap(), f_end, "a fixed lease stays");
    // Another call of the same owner is not extended by this one's beat.
    sleep(Duration::from_millis(250));
    assert_eq!(
        s.heartbeat(LONG, &[entry_with("f:1", 9, lease, false)])
            .statuses,
        [WaiterStatus::Gone]
    );
    assert_eq!(s.holders(), ["w:1 3"], "f's fixed lease ran out");
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
    assert_eq!(s.holders(), ["x:1 4"], "the permit b left went to x");
    assert_eq!(s.queued(), ["z:1 6 60000 0"]);
    // Another call of the same owner that holds: its hold stays.
    s.queue("x:1", 7, 1);
    assert_eq!(s.cancel(entry("x:1", 7)), CancelReply::Left);
    assert_eq!(s.holders(), ["x:1 4"]);
    assert_eq!(s.queued(), ["z:1 6 60000 0"]);
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
    assert_eq!(s.holders(), ["w:1 2"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0"]);
    // It releases as any holder.
    let w = permit_of("w:1", 2, handed[0].token);
    assert_eq!(s.handed(&w).len(), 1);
    assert_eq!(s.holders(), ["x:1 3"]);
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
    assert_eq!(holders, ["a:1 2", "w:1 3"]);
    assert_eq!(s.abandon(entry("a:1", 1)), AbandonReply::Nothing);
    assert_eq!(s.holders().len(), 2);
    assert_eq!(s.queued(), ["x:1 4 60000 0"]);
    // The release the client could not send answers as released.
    assert_eq!(s.release(&a1), SemReleaseReply::Released);
    // A queued call: its entry, once.
    s.queue("y:1", 5, 2);
    assert_eq!(s.abandon(entry("y:1", 5)), AbandonReply::LeftQueue);
    assert_eq!(s.abandon(entry("y:1", 5)), AbandonReply::Nothing);
    assert_eq!(s.queued(), ["x:1 4 60000 0"]);
    // A call never made.
    assert_eq!(s.abandon(entry("q:1", 9)), AbandonReply::Nothing);
    // Call 2's hold goes to x.
    assert_eq!(s.abandon(entry("a:1", 2)), AbandonReply::HoldGivenBack);
    let mut holders = s.holders();
    holders.sort();
    assert_eq!(holders, ["w:1 3", "x:1 4"]);
    assert_eq!(s.release(&a2), SemReleaseReply::Released);
    assert!(s.queued().is_empty());
}

#[test]
fn status_reports_permits_holders_available_and_the_queue() {
    let mut s = Sem::new("status");
    let empty = s.status(10, 10);
    assert_eq!(
        (empty.permits, empty.live_holders, empty.live_waiters),
        (None, 0, 0)
    );
    let a = s.take("a:1", 1, 3);
    let b = s.take("b:1", 2, 3);
    let one = s.status(10, 10);
    assert_eq!(one.permits, Some(3));
    assert_eq!((one.live_holders, one.available), (2, 1));
    assert_eq!(one.last_token, b.token);
    let c = s.take("c:1", 3, 3);
    s.queue("w:1", 4, 3);
    s.queue("x:1", 5, 3);
    let full = s.status(10, 10);
    assert_eq!(
        (full.live_holders, full.available, full.live_waiters),
        (3, 0, 2)
    );
    let listed: Vec<(String, u64, u64)> = full
        .holders
        .iter()
        .map(|h| (h.owner.clone(), h.call, h.token))
        .collect();
    assert_eq!(
        listed,
        [
            ("a:1".to_owned(), 1, a.token),
            ("b:1".to_owned(), 2, b.token),
            ("c:1".to_owned(), 3, c.token)
        ]
    );
    assert!(full
        .holders
        .iter()
        .all(|h| (59_000..=60_000).contains(&h.lease_left_ms)));
    let waiters: Vec<&str> = full.waiters.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(waiters, ["w:1", "x:1"]);
    assert!(full
        .waiters
        .iter()
        .all(|w| (59_000..=60_000).contains(&w.1)));
    // The bounds.
    let few = s.status(1, 2);
    assert_eq!((few.holders.len(), few.waiters.len()), (2, 1));
    assert_eq!(few.live_holders, 3);
    let none = s.status(0, 0);
    assert!(none.holders.is_empty() && none.waiters.is_empty());
    // After a handoff: w holds with the last token.
    let handed = s.handed(&a);
    let after = s.status(10, 10);
    assert_eq!(after.last_token, handed[0].token);
    assert_eq!(
        (after.live_holders, after.available, after.live_waiters),
        (3, 0, 1)
    );
    assert!(after
        .holders
        .iter()
        .any(|h| h.owner == "w:1" && h.call == 4));
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
    assert_eq!((expired.live_holders, expired.available), (0, 3));
    assert!(expired.holders.is_empty());
}

/// The permit a release handed to call `call` of `owner`.
fn handed_permit(s: &mut Sem, owner: &str, call: u64) -> Permit {
    let token = handed_token(s, &format!("{owner} {call}"));
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
        assert!(status.live_holders <= u64::from(PERMITS));
        assert!(
            status.live_waiters == 0 || status.available == 0,
            "{status:?}"
        );
    }
}
