//! The reader-writer lock's scripts driven directly (the same Lua, keys and
//! arguments a client will send, from the library's protocol layer):
//! readers share, a writer waits for the readers ahead of it and then holds
//! alone, a reader behind a queued writer waits, consecutive readers at the
//! head enter together, re-entry (read in read, read in write, write in
//! write granted; read -> write refused, nothing written), increasing
//! fencing tokens, repeats that count once, renewals, heartbeats that keep
//! waiters and admit the head, cancels and abandons that leave nothing and
//! let in whom they unblock, status, bad input refused before any write,
//! the rwlock apart from the mutex and the semaphore of its name, the
//! README's ACL user, force release and fixed leases, and no key left
//! without a TTL after any step. The rwlock runs on the counted engine
//! (lua/counted/): a read takes 1 unit, a write all of RW_CAPACITY; after
//! every step the meta's used units are checked against the holds'.

use std::thread::sleep;
use std::time::Duration;

use fairlock::test_support::{
    Abandon, AbandonReply, Access, Acquire, AcquireReply, Ask, Cancel, CancelReply, CommonArgs,
    Engine, ForceRelease, HandedOver, Heartbeat, HeartbeatReply, LockKeys, LockKind, Mode, Op,
    Operation, QueueEntry, Release, ReleaseReply, Renew, Script, Status, StatusReply, WaiterStatus,
    RW_CAPACITY,
};
use fairlock_test_support::*;
use redis::{Commands, Value};

/// The library's default key prefix.
const PREFIX: &str = "fairlock";
/// A lease that outlives any test step.
const LONG: Duration = Duration::from_secs(60);
/// A lease a test waits out.
const SHORT: Duration = Duration::from_millis(150);

use Access::{Read, Write};

/// One rwlock's scripts on a fresh server.
struct Rw {
    server: RedisServer,
    keys: LockKeys,
    /// Runs the checks (an admin connection), and the scripts unless
    /// `runner` is set.
    conn: redis::Connection,
    /// Runs the scripts, when not `conn` (the README's ACL user).
    runner: Option<redis::Connection>,
    /// The liveness deadline of the waiters `attempt_with` queues, from now.
    waiter_timeout: Duration,
}

/// A hold: owner, call, token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hold {
    owner: String,
    call: u64,
    token: u64,
}

impl Rw {
    fn new(name: &str) -> Rw {
        let server = RedisServer::start();
        let conn = server.conn();
        Rw {
            keys: LockKeys::rwlock(PREFIX, name).unwrap(),
            server,
            conn,
            runner: None,
            waiter_timeout: LONG,
        }
    }

    fn eval(&mut self, script: Script, args: &[String]) -> redis::RedisResult<Value> {
        eval_on(
            self.runner.as_mut().unwrap_or(&mut self.conn),
            &self.keys,
            script,
            args,
        )
    }

    fn run<O: Operation>(&mut self, op: &O) -> fairlock::Result<O::Reply> {
        let keys = op.keys(&self.keys).to_vec();
        assert_eq!(
            keys, self.keys.all,
            "every rwlock script takes all five keys"
        );
        let script = op.script(&self.keys);
        assert_eq!(script, counted(O::OP), "the counted engine's script");
        let reply = match self.eval(script, &op.args()) {
            Ok(reply) => op.parse(reply),
            Err(e) => Err(e.into()),
        };
        self.assert_every_key_expires();
        reply
    }

    #[allow(clippy::too_many_arguments)]
    fn attempt_with(
        &mut self,
        owner: &str,
        call: u64,
        mode: Mode,
        access: Access,
        guard: u64,
        lease: Duration,
        fixed: bool,
    ) -> fairlock::Result<AcquireReply> {
        self.run(&Acquire {
            ask: Ask::RwLock(access),
            owner,
            lease,
            fixed,
            waiter_timeout: self.waiter_timeout,
            mode,
            wait_id: call,
            live_token: guard,
        })
    }

    fn attempt(&mut self, owner: &str, call: u64, mode: Mode, access: Access) -> AcquireReply {
        self.attempt_with(owner, call, mode, access, 0, LONG, false)
            .unwrap()
    }

    /// A hold taken at once (with the live guard `guard`, or 0), or a panic.
    fn take_with(&mut self, owner: &str, call: u64, access: Access, guard: u64) -> Hold {
        match self
            .attempt_with(owner, call, Mode::First, access, guard, LONG, false)
            .unwrap()
        {
            AcquireReply::Acquired { token, .. } => Hold {
                owner: owner.to_owned(),
                call,
                token,
            },
            other => panic!("{owner} did not get {access:?}: {other:?}"),
        }
    }

    fn take(&mut self, owner: &str, call: u64, access: Access) -> Hold {
        self.take_with(owner, call, access, 0)
    }

    /// Queues call `call` of `owner`; returns its position.
    fn queue(&mut self, owner: &str, call: u64, access: Access) -> u64 {
        match self.attempt(owner, call, Mode::First, access) {
            AcquireReply::Waiting {
                position: Some(p), ..
            } => p,
            other => panic!("{owner} did not queue: {other:?}"),
        }
    }

    fn release(&mut self, hold: &Hold) -> ReleaseReply {
        self.run(&Release {
            owner: &hold.owner,
            token: hold.token,
            call: hold.call,
        })
        .unwrap()
    }

    /// The holds a release handed over.
    fn handed(&mut self, hold: &Hold) -> Vec<Hold> {
        match self.release(hold) {
            ReleaseReply::HandedOver(grants) => grants.into_iter().map(to_hold).collect(),
            ReleaseReply::Released { left } => {
                assert_eq!(
                    left, 0,
                    "a counted lock's release leaves no hold of its own"
                );
                Vec::new()
            }
            ReleaseReply::NotHeld => panic!("{hold:?} was not held"),
        }
    }

    fn renew(&mut self, hold: &Hold, lease: Option<Duration>) -> bool {
        self.run(&Renew {
            owner: &hold.owner,
            token: hold.token,
            call: hold.call,
            lease,
        })
        .unwrap()
    }

    /// A heartbeat of `entries` with a waiter timeout of `timeout`.
    fn heartbeat(&mut self, timeout: Duration, entries: &[QueueEntry]) -> HeartbeatReply {
        self.run(&Heartbeat {
            waiter_timeout: timeout,
            waiters: entries.to_vec(),
        })
        .unwrap()
    }

    fn cancel(&mut self, entry: QueueEntry) -> CancelReply {
        self.run(&Cancel { entry }).unwrap()
    }

    fn abandon(&mut self, entry: QueueEntry) -> AbandonReply {
        self.run(&Abandon { entry }).unwrap()
    }

    /// The status, which changes nothing.
    fn status(&mut self, waiters: usize, holders: usize) -> StatusReply {
        let before = self.snapshot();
        let reply = self
            .run(&Status {
                kind: LockKind::RwLock,
                waiters,
                holders,
            })
            .unwrap();
        assert_eq!(self.snapshot(), before, "status changes nothing");
        reply
    }

    /// The lease end of hold `member` in the holders zset (`key` 0), server
    /// ms. (The writers zset, key 5 before the counted engine, is gone: a
    /// write hold is a holders member of all the units.)
    fn lease_end(&mut self, key: usize, member: &str) -> Option<i64> {
        assert_eq!(key, 0, "the holders zset is the only one with lease ends");
        self.conn.zscore(&self.keys.all[key], member).unwrap()
    }

    /// The token the tokens hash keeps for hold `member`.
    fn token_of(&mut self, member: &str) -> u64 {
        self.conn.hget(&self.keys.all[3], member).unwrap()
    }

    fn now_ms(&mut self) -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut self.conn).unwrap();
        s * 1000 + us / 1000
    }

    /// Live holds "<owner> <call> <units>" (a read 1, a write RW_CAPACITY),
    /// sorted.
    fn holders(&mut self) -> Vec<String> {
        let now = self.now_ms();
        let mut live: Vec<String> = self
            .conn
            .zrangebyscore(&self.keys.all[0], now, "+inf")
            .unwrap();
        live.sort();
        live
    }

    /// Live write holds (the holds of all the units), sorted.
    fn writers(&mut self) -> Vec<String> {
        let write = format!(" {RW_CAPACITY}");
        self.holders()
            .into_iter()
            .filter(|m| m.ends_with(&write))
            .collect()
    }

    /// The units the meta says the holds take.
    fn meta_used(&mut self) -> Option<u64> {
        let meta: Option<String> = self.conn.get(&self.keys.all[4]).unwrap();
        // (None for a meta fairlock did not write, as a test leaves one.)
        meta.and_then(|m| m.split(' ').nth(1)?.parse().ok())
    }

    fn queued(&mut self) -> Vec<String> {
        self.conn.zrange(&self.keys.all[1], 0, -1).unwrap()
    }

    fn pttl(&mut self, key: usize) -> i64 {
        self.conn.pttl(&self.keys.all[key]).unwrap()
    }

    /// Every key has a TTL, and the meta (the last token) outlives the
    /// holds, their tokens and the queue.
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
        // The meta's used units are the units of the holds in the holders
        // zset (what the writers zset was to the write holds before).
        let members: Vec<String> = self.conn.zrange(&self.keys.all[0], 0, -1).unwrap();
        let units: u64 = members
            .iter()
            .map(|m| m.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        // (A holders key that ran out by itself counts as none: the next
        // call reads its used units as 0.)
        if let (Some(used), false) = (self.meta_used(), members.is_empty()) {
            assert_eq!(used, units, "the meta counts the holds' units: {members:?}");
        }
    }

    /// Every key's dumped value, for "nothing written".
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

    /// A subscription to every wake channel.
    fn messages(&self) -> redis::Connection {
        self.server.conn()
    }
}

/// The counted engine's script of `op` (the rwlock's and the semaphore's).
fn counted(op: Op) -> Script {
    Script {
        engine: Engine::Counted,
        op,
    }
}

/// How the counted engine's members and entries name what a call takes.
trait UnitsWord {
    fn units_word(&self) -> String;
}

impl UnitsWord for Access {
    fn units_word(&self) -> String {
        Ask::RwLock(*self).units().to_string()
    }
}

/// Whether a write holds, as a status reply tells: a write takes every
/// unit, reads alone never reach that many.
fn writer_holds(reply: &StatusReply) -> bool {
    reply.used >= u64::from(RW_CAPACITY)
}

/// A hold's or waiter's access by its units (a write: all of them).
fn access_of(units: u64) -> Access {
    if units >= u64::from(RW_CAPACITY) {
        Write
    } else {
        Read
    }
}

/// A rwlock queue entry's access.
fn access_of_ask(ask: Ask) -> Access {
    match ask {
        Ask::RwLock(access) => access,
        other => panic!("not a rwlock's ask: {other:?}"),
    }
}

fn eval_on(
    conn: &mut redis::Connection,
    keys: &LockKeys,
    script: Script,
    args: &[String],
) -> redis::RedisResult<Value> {
    let script = redis::Script::new(script.source());
    let mut inv = script.prepare_invoke();
    for key in &keys.all {
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
    inv.invoke(conn)
}

fn to_hold(grant: HandedOver) -> Hold {
    Hold {
        owner: grant.owner,
        call: grant.wait_id,
        token: grant.token,
    }
}

/// The queue entry of call `call` of `owner` for `access` with `lease`
/// (fixed or not).
fn entry_with(
    owner: &str,
    call: u64,
    access: Access,
    lease: Duration,
    fixed: bool,
) -> QueueEntry<'_> {
    QueueEntry {
        owner,
        wait_id: call,
        lease,
        fixed,
        ask: Ask::RwLock(access),
    }
}

/// The queue entry `Rw::queue` makes: a 60 s watchdog lease.
fn entry(owner: &str, call: u64, access: Access) -> QueueEntry<'_> {
    entry_with(owner, call, access, LONG, false)
}

fn owners(holds: &[Hold]) -> Vec<&str> {
    holds.iter().map(|h| h.owner.as_str()).collect()
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

/// The next message on `pubsub`: channel and payload.
fn message(pubsub: &mut redis::PubSub) -> (String, String) {
    let m = pubsub.get_message().unwrap();
    (
        m.get_channel_name().to_owned(),
        m.get_payload::<String>().unwrap(),
    )
}

#[test]
fn readers_share() {
    let mut s = Rw::new("share");
    let a = s.take("a:1", 1, Read);
    let b = s.take("b:1", 2, Read);
    let c = s.take("c:1", 3, Read);
    assert!(a.token < b.token && b.token < c.token);
    assert_eq!(s.holders(), ["a:1 1 1", "b:1 2 1", "c:1 3 1"]);
    assert!(s.writers().is_empty());
    // A try reader enters too: no writer holds or waits.
    assert!(matches!(
        s.attempt("d:1", 4, Mode::Try, Read),
        AcquireReply::Acquired { .. }
    ));
    assert_eq!(s.holders().len(), 4);
}

#[test]
fn a_writer_waits_for_the_readers_ahead_then_excludes_all() {
    let mut s = Rw::new("writer");
    let a = s.take("a:1", 1, Read);
    let b = s.take("b:1", 2, Read);
    assert_eq!(s.queue("w:1", 3, Write), 0);
    // A try writer neither enters nor queues.
    assert!(matches!(
        s.attempt("t:1", 9, Mode::Try, Write),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert!(s.handed(&a).is_empty(), "a reader still holds");
    assert_eq!(s.holders(), ["b:1 2 1"]);
    let w = s.handed(&b);
    assert_eq!(owners(&w), ["w:1"]);
    assert!(w[0].token > b.token);
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    assert_eq!(s.writers(), ["w:1 3 4294967295"]);
    // While it holds, nobody else enters: readers and writers queue, a try
    // of either gets nothing.
    for (owner, call, access) in [("r:1", 4, Read), ("x:1", 5, Write)] {
        assert!(matches!(
            s.attempt(owner, call, Mode::Try, access),
            AcquireReply::Waiting { position: None, .. }
        ));
    }
    assert_eq!(s.queue("r:1", 4, Read), 0);
    assert_eq!(s.queue("x:1", 5, Write), 1);
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    // Its poll finds its hold.
    match s.attempt("w:1", 3, Mode::Poll, Write) {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, w[0].token),
        other => panic!("{other:?}"),
    }
    // Released: the reader enters, the writer behind it waits for it.
    let r = s.handed(&w[0]);
    assert_eq!(owners(&r), ["r:1"]);
    assert_eq!(s.holders(), ["r:1 4 1"]);
    let x = s.handed(&r[0]);
    assert_eq!(owners(&x), ["x:1"]);
    assert_eq!(s.holders(), ["x:1 5 4294967295"]);
    assert_eq!(s.release(&x[0]), ReleaseReply::Released { left: 0 });
    assert!(s.holders().is_empty() && s.queued().is_empty());
}

#[test]
fn a_reader_behind_a_queued_writer_waits() {
    let mut s = Rw::new("reader-behind");
    let a = s.take("a:1", 1, Read);
    assert_eq!(s.queue("w:1", 2, Write), 0);
    // Only readers hold, but a writer is queued: a new reader queues
    // behind it, and a try reader gets nothing.
    assert!(matches!(
        s.attempt("t:1", 8, Mode::Try, Read),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert_eq!(s.queue("r:1", 3, Read), 1);
    assert!(matches!(
        s.attempt("r:1", 3, Mode::Poll, Read),
        AcquireReply::Waiting {
            position: Some(1),
            ..
        }
    ));
    assert_eq!(s.holders(), ["a:1 1 1"]);
    let w = s.handed(&a);
    assert_eq!(owners(&w), ["w:1"]);
    let r = s.handed(&w[0]);
    assert_eq!(owners(&r), ["r:1"]);
}

#[test]
fn consecutive_readers_at_the_head_enter_together() {
    let mut s = Rw::new("reader-run");
    let w = s.take("w:1", 1, Write);
    for (i, (owner, access)) in [
        ("r1:1", Read),
        ("r2:1", Read),
        ("r3:1", Read),
        ("x:1", Write),
        ("r4:1", Read),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(s.queue(owner, 10 + i as u64, access), i as u64);
    }
    let mut sub = s.messages();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let run = s.handed(&w);
    assert_eq!(owners(&run), ["r1:1", "r2:1", "r3:1"]);
    assert!(run.windows(2).all(|p| p[0].token < p[1].token));
    assert!(run[0].token > w.token);
    assert_eq!(s.holders(), ["r1:1 10 1", "r2:1 11 1", "r3:1 12 1"]);
    // Each reader heard its grant, the writer now heading the queue that it
    // does.
    for (hold, channel) in run.iter().zip(["r1", "r2", "r3"]) {
        let (got, payload) = message(&mut pubsub);
        assert_eq!(got, format!("fairlock:wake:{channel}"));
        assert!(
            payload.starts_with(&format!("G {} {} ", hold.call, hold.token)),
            "{payload}"
        );
    }
    let (got, payload) = message(&mut pubsub);
    assert_eq!(got, "fairlock:wake:x");
    assert!(payload.starts_with("H 13 "), "{payload}");
    // r4 stays behind the writer; the writer enters once all three left.
    assert!(s.handed(&run[0]).is_empty());
    assert!(s.handed(&run[1]).is_empty());
    let x = s.handed(&run[2]);
    assert_eq!(owners(&x), ["x:1"]);
    let r4 = s.handed(&x[0]);
    assert_eq!(owners(&r4), ["r4:1"]);
}

#[test]
fn a_head_reader_that_polls_takes_the_readers_behind_it_along() {
    // A writer's lease runs out (a dead holder) while readers wait: the
    // head's poll admits it and the readers right behind it.
    let mut s = Rw::new("head-poll");
    let w = s
        .attempt_with("w:1", 1, Mode::First, Write, 0, SHORT, true)
        .unwrap();
    assert!(matches!(w, AcquireReply::Acquired { .. }));
    assert_eq!(s.queue("r1:1", 2, Read), 0);
    assert_eq!(s.queue("r2:1", 3, Read), 1);
    assert_eq!(s.queue("x:1", 4, Write), 2);
    sleep(SHORT * 2);
    // The head's poll takes its hold and the reader behind it enters too;
    // the writer behind them waits.
    assert!(matches!(
        s.attempt("r1:1", 2, Mode::Poll, Read),
        AcquireReply::Acquired { .. }
    ));
    assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
    assert_eq!(s.queued(), ["x:1 4 60000 0 4294967295"]);
}

#[test]
fn reentry_read_in_read_read_in_write_write_in_write_granted() {
    let mut s = Rw::new("reentry");
    // Read in read, even past a queued writer.
    let a = s.take("a:1", 1, Read);
    assert_eq!(s.queue("w:1", 2, Write), 0);
    let a2 = s.take_with("a:1", 3, Read, a.token);
    assert!(a2.token > a.token);
    assert_eq!(s.holders(), ["a:1 1 1", "a:1 3 1"]);
    // Another owner's guard token is no guard: that reader queues.
    assert_eq!(
        match s
            .attempt_with("b:1", 4, Mode::First, Read, a.token, LONG, false)
            .unwrap()
        {
            AcquireReply::Waiting { position, .. } => position,
            other => panic!("{other:?}"),
        },
        Some(1)
    );
    assert!(s.handed(&a).is_empty());
    let w = s.handed(&a2);
    assert_eq!(owners(&w), ["w:1"]);
    // Read in write and write in write, past the queued reader b.
    let w = w[0].clone();
    let r = s.take_with("w:1", 5, Read, w.token);
    let ww = s.take_with("w:1", 6, Write, w.token);
    assert!(w.token < r.token && r.token < ww.token);
    assert_eq!(
        s.holders(),
        ["w:1 2 4294967295", "w:1 5 1", "w:1 6 4294967295"]
    );
    assert_eq!(s.writers(), ["w:1 2 4294967295", "w:1 6 4294967295"]);
    // A repeat of the re-entry call answers with its hold.
    match s
        .attempt_with("w:1", 6, Mode::First, Write, w.token, LONG, false)
        .unwrap()
    {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, ww.token),
        other => panic!("{other:?}"),
    }
    // The reader b enters only once every write hold is gone.
    assert!(s.handed(&ww).is_empty());
    let b = s.handed(&w);
    assert_eq!(owners(&b), ["b:1"]);
    assert_eq!(s.holders(), ["b:1 4 1", "w:1 5 1"]);
}

#[test]
fn read_to_write_is_refused_and_writes_nothing() {
    let mut s = Rw::new("upgrade");
    let a = s.take("a:1", 1, Read);
    s.queue("w:1", 2, Write);
    let before = s.snapshot();
    let err = s
        .attempt_with("a:1", 3, Mode::First, Write, a.token, LONG, false)
        .unwrap_err();
    let text = chain(&err);
    assert!(text.contains("read -> write upgrade refused"), "{text}");
    assert!(text.contains("a:1"), "{text}");
    assert_eq!(s.snapshot(), before, "nothing written");
    // A try is refused the same way.
    assert!(s
        .attempt_with("a:1", 4, Mode::Try, Write, a.token, LONG, false)
        .is_err());
    assert_eq!(s.snapshot(), before, "nothing written");
    // Without the guard it is no re-entry: it queues behind the writer
    // (the client's rule is to send its guard).
    assert_eq!(s.queue("a:1", 5, Write), 1);
    assert_eq!(s.holders(), ["a:1 1 1"]);
}

#[test]
fn tokens_strictly_increase_across_takes_handoffs_and_reentries() {
    let mut s = Rw::new("tokens");
    let mut tokens = Vec::new();
    let a = s.take("a:1", 1, Read);
    tokens.push(a.token);
    let b = s.take("b:1", 2, Read);
    tokens.push(b.token);
    s.queue("w:1", 3, Write);
    s.queue("r:1", 4, Read);
    s.queue("q:1", 5, Read);
    tokens.push(s.take_with("a:1", 6, Read, a.token).token);
    s.handed(&a);
    s.release(&Hold {
        owner: "a:1".into(),
        call: 6,
        token: tokens[2],
    });
    let w = s.handed(&b);
    tokens.push(w[0].token);
    tokens.push(s.take_with("w:1", 7, Write, w[0].token).token);
    s.release(&Hold {
        owner: "w:1".into(),
        call: 7,
        token: tokens[4],
    });
    let run = s.handed(&w[0]);
    assert_eq!(run.len(), 2);
    tokens.extend(run.iter().map(|h| h.token));
    for h in &run {
        s.release(h);
    }
    tokens.push(s.take("z:1", 8, Write).token);
    assert!(
        tokens.windows(2).all(|p| p[0] < p[1]),
        "tokens in order of issue: {tokens:?}"
    );
    // The meta keeps the last one ("<capacity> <used> <last token>...").
    let meta: String = s.conn.get(&s.keys.all[4]).unwrap();
    assert_eq!(
        meta.split(' ').nth(2),
        Some(tokens.last().unwrap().to_string().as_str()),
        "{meta}"
    );
}

#[test]
fn repeats_count_once() {
    let mut s = Rw::new("repeats");
    let a = s.take("a:1", 1, Read);
    let b = s.take("b:1", 2, Read);
    s.queue("w:1", 3, Write);
    // A first call delivered twice takes one hold.
    match s.attempt("a:1", 1, Mode::First, Read) {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, a.token),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.holders(), ["a:1 1 1", "b:1 2 1"]);
    // A queued call delivered twice stays one entry.
    assert_eq!(s.queue("w:1", 3, Write), 0);
    assert_eq!(s.queued().len(), 1);
    // A release delivered twice counts once: the writer still waits for b.
    assert_eq!(s.release(&a), ReleaseReply::Released { left: 0 });
    assert_eq!(s.release(&a), ReleaseReply::Released { left: 0 });
    assert_eq!(s.holders(), ["b:1 2 1"]);
    assert_eq!(s.queued().len(), 1);
    let w = s.handed(&b);
    assert_eq!(owners(&w), ["w:1"]);
    // Once another release took the mark, a stale one is NotHeld and
    // changes nothing.
    let before = s.snapshot();
    assert_eq!(s.release(&a), ReleaseReply::NotHeld);
    let stale = Hold {
        token: w[0].token + 1,
        ..w[0].clone()
    };
    assert_eq!(s.release(&stale), ReleaseReply::NotHeld);
    assert_eq!(s.snapshot(), before);
}

#[test]
fn renewal_extends_only_a_live_hold_with_its_token() {
    let mut s = Rw::new("renew");
    let w = s.take("w:1", 1, Write);
    let end = |s: &mut Rw, key: usize| -> i64 {
        s.conn
            .zscore::<_, _, Option<i64>>(&s.keys.all[key], "w:1 1 4294967295")
            .unwrap()
            .unwrap()
    };
    let before = end(&mut s, 0);
    sleep(Duration::from_millis(20));
    assert!(s.renew(&w, Some(LONG)));
    let after = end(&mut s, 0);
    assert!(after > before);
    assert_eq!(
        s.writers(),
        ["w:1 1 4294967295"],
        "the renewed hold is still the write"
    );
    assert!(s.renew(&w, None));
    assert!(!s.renew(
        &Hold {
            token: w.token + 1,
            ..w.clone()
        },
        Some(LONG)
    ));
    assert!(!s.renew(
        &Hold {
            call: 2,
            ..w.clone()
        },
        Some(LONG)
    ));
    assert!(!s.renew(
        &Hold {
            owner: "v:1".into(),
            ..w.clone()
        },
        Some(LONG)
    ));
    assert_eq!(s.release(&w), ReleaseReply::Released { left: 0 });
    assert!(!s.renew(&w, Some(LONG)), "released");
}

#[test]
fn bad_arguments_are_refused_before_any_write() {
    let mut s = Rw::new("bad-input");
    s.take("a:1", 1, Read);
    let before = s.snapshot();
    // ARGV after the common two: owner, lease, fixed, waiter timeout, mode,
    // call, live guard token, capacity (the rwlock's RW_CAPACITY) and units
    // (a read 1, a write all of them; it was the access, "r" or "w").
    let args = |owner: &str,
                lease: &str,
                fixed: &str,
                mode: &str,
                call: &str,
                units: &str,
                guard: &str| {
        let capacity = RW_CAPACITY.to_string();
        [
            owner,
            lease,
            fixed,
            "60000",
            mode,
            call,
            guard,
            capacity.as_str(),
            units,
        ]
        .map(str::to_owned)
    };
    let (r, w) = ("1", "4294967295");
    for (bad, what) in [
        (args("n:1", "60000", "0", "first", "2", "x", "0"), "units"),
        (args("n:1", "60000", "0", "first", "2", "", "0"), "units"),
        (args("n:1", "60000", "0", "first", "2", "0", "0"), "units"),
        (
            args("n:1", "60000", "0", "first", "2", "4294967296", "0"),
            "units",
        ),
        (args("n:1", "60000", "0", "first", "2", r, "x"), "guard"),
        (args("n:1", "60000", "0", "first", "2", r, "-1"), "guard"),
        (args("n 1", "60000", "0", "first", "2", r, "0"), "owner"),
        (args("n:1", "60000", "0", "first", "x", w, "0"), "owner"),
        (args("n:1", "0", "0", "first", "2", r, "0"), "lease"),
        (args("n:1", "60000", "2", "first", "2", r, "0"), "fixed"),
        (args("n:1", "60000", "0", "wait", "2", w, "0"), "mode"),
    ] {
        let err = s.eval(counted(Op::Acquire), &bad).unwrap_err();
        assert_eq!(s.snapshot(), before, "{bad:?}");
        assert!(chain(&err).contains(what), "{bad:?}: {err}");
    }
    for bad in [["a 1", "5", "1"], ["a:1", "5", "x"]] {
        let bad = bad.map(str::to_owned);
        assert!(s.eval(counted(Op::Release), &bad).is_err(), "{bad:?}");
        assert_eq!(s.snapshot(), before, "{bad:?}");
    }
    for bad in [["a:1", "5", "1", "-3"], ["a 1", "5", "1", "100"]] {
        let bad = bad.map(str::to_owned);
        assert!(s.eval(counted(Op::Renew), &bad).is_err(), "{bad:?}");
        assert_eq!(s.snapshot(), before, "{bad:?}");
    }
    // A meta key fairlock did not write.
    s.conn.set::<_, _, ()>(&s.keys.all[4], "junk").unwrap();
    s.conn.pexpire::<_, ()>(&s.keys.all[4], 60_000).unwrap();
    let before_junk = s.snapshot();
    let err = s
        .attempt_with("n:1", 2, Mode::First, Read, 0, LONG, false)
        .unwrap_err();
    assert_eq!(err.kind(), fairlock::ErrorKind::KeyConflict, "{err}");
    assert_eq!(s.snapshot(), before_junk);
}

#[test]
fn a_lease_that_ran_out_frees_the_lock_for_the_head() {
    let mut s = Rw::new("lease-out");
    let r = s
        .attempt_with("a:1", 1, Mode::First, Read, 0, SHORT, true)
        .unwrap();
    assert!(matches!(r, AcquireReply::Acquired { .. }));
    assert_eq!(s.queue("w:1", 2, Write), 0);
    sleep(SHORT * 2);
    assert!(matches!(
        s.attempt("w:1", 2, Mode::Poll, Write),
        AcquireReply::Acquired { .. }
    ));
    assert_eq!(s.holders(), ["w:1 2 4294967295"]);
    // The expired reader's token is gone both ways from the tokens hash.
    let tokens: Vec<String> = s.conn.hkeys(&s.keys.all[3]).unwrap();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert!(
        tokens.contains(&"w:1 2 4294967295".to_owned()),
        "{tokens:?}"
    );
}

#[test]
fn keys_expire_a_fence_life_after_the_last_holder() {
    let mut s = Rw::new("ttl");
    let w = s.take("a:1", 1, Write);
    s.release(&w);
    for key in [0, 1, 2, 3] {
        assert_eq!(s.pttl(key), -2, "{}", s.keys.all[key]);
    }
    let fence = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
    let meta = s.pttl(4);
    assert!(meta > fence - 1000 && meta <= fence, "{meta}");
    // "<capacity> <used> <last token> <mark>": nothing held, the last
    // token and the release that freed it kept.
    let value: String = s.conn.get(&s.keys.all[4]).unwrap();
    assert_eq!(value, format!("{RW_CAPACITY} 0 {} a:1#1", w.token));
}

#[test]
fn the_rwlock_and_the_mutex_and_semaphore_of_one_name_are_separate() {
    let mut s = Rw::new("one-name");
    s.take("a:1", 1, Write);
    let mutex = LockKeys::new(PREFIX, "one-name").unwrap();
    let sem = LockKeys::semaphore(PREFIX, "one-name").unwrap();
    assert_eq!(mutex.slot, s.keys.slot);
    assert_eq!(sem.slot, s.keys.slot);
    let mutex_args = ["b:1", "60000", "0", "60000", "try", "1", "0"].map(str::to_owned);
    let reply = eval_on(
        &mut s.conn,
        &mutex,
        Script::of(LockKind::Mutex, Op::Acquire),
        &mutex_args,
    )
    .unwrap();
    assert!(
        matches!(reply, Value::Int(_)),
        "the mutex is free: {reply:?}"
    );
    let op = Acquire {
        ask: Ask::Permits { n: 1, of: 1 },
        owner: "c:1",
        lease: LONG,
        fixed: false,
        waiter_timeout: LONG,
        mode: Mode::Try,
        wait_id: 1,
        live_token: 0,
    };
    let reply = eval_on(
        &mut s.conn,
        &sem,
        Script::of(LockKind::Semaphore, Op::Acquire),
        &op.args(),
    )
    .unwrap();
    assert!(
        matches!(reply, Value::Int(_)),
        "the semaphore is free: {reply:?}"
    );
    assert_eq!(s.holders(), ["a:1 1 4294967295"]);
    // And the other kinds' holds do not stop the rwlock's readers, once its
    // writer is gone.
    let w = Hold {
        owner: "a:1".into(),
        call: 1,
        token: s.conn.hget(&s.keys.all[3], "a:1 1 4294967295").unwrap(),
    };
    s.release(&w);
    s.take("d:1", 2, Read);
    s.assert_every_key_expires();
}

/// A small deterministic generator (no dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The model's waiters the lock can take, admitted as the scripts admit
/// them (a writer alone when nobody holds, readers while no writer holds),
/// their tokens read back and checked to increase.
fn admit_model(
    s: &mut Rw,
    held: &mut Vec<(Hold, Access)>,
    queue: &mut Vec<(String, u64, Access)>,
    last_token: &mut u64,
) {
    while let Some((_, _, access)) = queue.first() {
        let writer = held.iter().any(|(_, a)| *a == Write);
        let admits = match access {
            Write => held.is_empty(),
            Read => !writer,
        };
        if !admits {
            break;
        }
        let (owner, call, access) = queue.remove(0);
        let token = s.token_of(&format!("{owner} {call} {}", access.units_word()));
        assert!(token > *last_token, "{token} after {last_token}");
        *last_token = token;
        held.push((Hold { owner, call, token }, access));
    }
}

#[test]
fn a_random_mix_keeps_readers_shared_writers_alone_and_fifo() {
    let mut s = Rw::new("mix");
    let mut rng = Lcg(14);
    let mut held: Vec<(Hold, Access)> = Vec::new();
    // The model's queue: (owner, call, access).
    let mut queue: Vec<(String, u64, Access)> = Vec::new();
    let mut last_token = 0;
    for step in 0..200u64 {
        let call = 100 + step;
        let owner = format!("o{}:1", step % 13);
        let op = rng.below(8);
        if op < 4 || held.is_empty() {
            let access = if rng.below(3) == 0 { Write } else { Read };
            if held.iter().any(|(h, _)| h.owner == owner) || queue.iter().any(|q| q.0 == owner) {
                continue; // one thing at a time per thread
            }
            match s.attempt(&owner, call, Mode::First, access) {
                AcquireReply::Acquired { token, .. } => {
                    assert!(queue.is_empty(), "step {step}: entered past a waiter");
                    assert!(token > last_token);
                    last_token = token;
                    held.push((Hold { owner, call, token }, access));
                }
                AcquireReply::Waiting { position, .. } => {
                    assert_eq!(position, Some(queue.len() as u64), "step {step}");
                    queue.push((owner, call, access));
                }
            }
        } else if op < 6 {
            let k = rng.below(held.len() as u64) as usize;
            let (hold, _) = held.remove(k);
            let handed = s.handed(&hold);
            for grant in handed {
                let (owner, call, access) = queue.remove(0);
                assert_eq!((grant.owner.as_str(), grant.call), (owner.as_str(), call));
                assert!(grant.token > last_token);
                last_token = grant.token;
                held.push((grant, access));
            }
        } else if op == 6 {
            // A heartbeat of every waiter and of one holder: each waiter
            // keeps its place, the holder learns it holds, nobody enters.
            let k = rng.below(held.len() as u64) as usize;
            let mut beaten: Vec<QueueEntry> =
                queue.iter().map(|(o, c, a)| entry(o, *c, *a)).collect();
            beaten.push(entry(&held[k].0.owner, held[k].0.call, held[k].1));
            let mut want: Vec<WaiterStatus> =
                (0..queue.len() as u64).map(WaiterStatus::Queued).collect();
            want.push(WaiterStatus::Owns(held[k].0.token));
            let beat = s.heartbeat(LONG, &beaten);
            assert_eq!(beat.statuses, want, "step {step}");
            assert_eq!(beat.last_token, last_token, "step {step}");
        } else if !queue.is_empty() && rng.below(2) == 0 {
            // A waiter cancels (or is given back): the waiters its leaving
            // unblocks enter.
            let k = rng.below(queue.len() as u64) as usize;
            let (owner, call, access) = queue.remove(k);
            if rng.below(2) == 0 {
                assert_eq!(
                    s.cancel(entry(&owner, call, access)),
                    CancelReply::Left,
                    "step {step}"
                );
            } else {
                assert_eq!(
                    s.abandon(entry(&owner, call, access)),
                    AbandonReply::LeftQueue,
                    "step {step}"
                );
            }
            admit_model(&mut s, &mut held, &mut queue, &mut last_token);
        } else {
            // A holder's cancel keeps its hold; its abandon gives it back,
            // once, and the release it could not send answers released.
            let k = rng.below(held.len() as u64) as usize;
            let (hold, access) = held[k].clone();
            let e = entry(&hold.owner, hold.call, access);
            match s.cancel(e) {
                CancelReply::Kept { token, .. } => assert_eq!(token, hold.token),
                other => panic!("step {step}: {other:?}"),
            }
            held.remove(k);
            assert_eq!(s.abandon(e), AbandonReply::HoldGivenBack, "step {step}");
            assert_eq!(s.abandon(e), AbandonReply::Nothing, "step {step}");
            assert_eq!(
                s.release(&hold),
                ReleaseReply::Released { left: 0 },
                "step {step}"
            );
            admit_model(&mut s, &mut held, &mut queue, &mut last_token);
        }
        // Readers share, a writer holds alone, and the head waits only
        // because the lock cannot admit it.
        let writers = held.iter().filter(|(_, a)| *a == Write).count();
        assert!(writers == 0 || held.len() == 1, "step {step}: {held:?}");
        if let Some((_, _, head)) = queue.first() {
            match head {
                Write => assert!(!held.is_empty(), "step {step}"),
                Read => assert!(writers > 0, "step {step}"),
            }
        }
        let mut model: Vec<String> = held
            .iter()
            .map(|(h, a)| format!("{} {} {}", h.owner, h.call, a.units_word()))
            .collect();
        model.sort();
        assert_eq!(s.holders(), model, "step {step}");
    }
}

#[test]
fn the_readme_acl_user_runs_every_rwlock_script() {
    let mut s = Rw::new("acl");
    create_acl_user(&mut s.conn, "rw-pw");
    let user = redis::Client::open(s.server.url_as("fairlock", "rw-pw"))
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
    // Every path that writes: takes, re-entries, a refusal, queueing, an
    // expired hold dropped, renewals, handoffs to a writer and to a run of
    // readers, a repeated release.
    let short = s
        .attempt_with("e:1", 1, Mode::First, Read, 0, SHORT, true)
        .unwrap();
    assert!(matches!(short, AcquireReply::Acquired { .. }));
    let a = s.take("a:1", 2, Read);
    s.take_with("a:1", 3, Read, a.token);
    assert!(s
        .attempt_with("a:1", 4, Mode::First, Write, a.token, LONG, false)
        .is_err());
    assert_eq!(s.queue("w:1", 5, Write), 0);
    assert_eq!(s.queue("r:1", 6, Read), 1);
    assert_eq!(s.queue("q:1", 7, Read), 2);
    sleep(SHORT * 2);
    assert!(s.renew(&a, Some(LONG)));
    assert!(s.renew(&a, None));
    assert!(s.handed(&a).is_empty());
    let a3: u64 = s.conn.hget(&s.keys.all[3], "a:1 3 1").unwrap();
    let w = s.handed(&Hold {
        owner: "a:1".into(),
        call: 3,
        token: a3,
    });
    assert_eq!(owners(&w), ["w:1"]);
    assert!(s.renew(&w[0], Some(LONG)));
    let run = s.handed(&w[0]);
    assert_eq!(owners(&run), ["r:1", "q:1"]);
    assert_eq!(s.release(&w[0]), ReleaseReply::Released { left: 0 });
    for h in &run {
        s.release(h);
    }
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

#[test]
fn heartbeats_keep_waiters_alive_and_push_every_ttl_while_the_unbeaten_are_dropped() {
    let mut s = Rw::new("heartbeat");
    let a = s.take("a:1", 1, Write);
    // Waiters that live 500 ms without a heartbeat.
    let timeout = Duration::from_millis(500);
    s.waiter_timeout = timeout;
    s.queue("w:1", 2, Read);
    s.queue("w:2", 3, Read);
    s.queue("x:1", 4, Write);
    let mine = [entry("w:1", 2, Read), entry("w:2", 3, Read)];
    // Beaten every 100 ms for 1.2 s: more than twice their timeout.
    for _ in 0..12 {
        sleep(Duration::from_millis(100));
        let beat = s.heartbeat(timeout, &mine);
        assert_eq!(
            beat.statuses,
            [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
        );
        assert_eq!(beat.last_token, a.token);
        assert!(beat.pttl_ms > 50_000, "a's lease: {}", beat.pttl_ms);
        // The queue keys live past every deadline in them, the meta past
        // them (checked after every step).
        let now = s.now_ms();
        let deadlines: Vec<(String, i64)> =
            s.conn.zrange_withscores(&s.keys.all[2], 0, -1).unwrap();
        for (_, deadline) in &deadlines {
            assert!(*deadline > now && *deadline <= now + 500, "{deadlines:?}");
            assert!(s.pttl(1) >= deadline - now && s.pttl(2) >= deadline - now);
        }
    }
    // x sent none: its entry is gone, w's two kept their places.
    assert_eq!(s.queued(), ["w:1 2 60000 0 1", "w:2 3 60000 0 1"]);
    assert_eq!(
        s.heartbeat(timeout, &[entry("x:1", 4, Write)]).statuses,
        [WaiterStatus::Gone]
    );
    // The release lets both readers in, and the next beat says so.
    let run = s.handed(&a);
    assert_eq!(owners(&run), ["w:1", "w:2"]);
    assert_eq!(
        s.heartbeat(timeout, &mine).statuses,
        [
            WaiterStatus::Owns(run[0].token),
            WaiterStatus::Owns(run[1].token)
        ]
    );
}

#[test]
fn a_heartbeat_admits_the_readers_run_an_expired_writer_left() {
    let mut s = Rw::new("heartbeat-expiry");
    let a = match s
        .attempt_with("a:1", 1, Mode::First, Write, 0, SHORT, true)
        .unwrap()
    {
        AcquireReply::Acquired { token, .. } => token,
        other => panic!("{other:?}"),
    };
    s.queue("r1:1", 2, Read);
    s.queue("r2:1", 3, Read);
    s.queue("x:1", 4, Write);
    s.queue("r3:1", 5, Read);
    let mut sub = s.messages();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    sleep(SHORT + Duration::from_millis(50));
    // x's heartbeat (not the head's) lets the two readers at the head in
    // together; x now heads the queue, r3 stays behind it.
    let beat = s.heartbeat(LONG, &[entry("x:1", 4, Write)]);
    assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
    assert!(beat.last_token > a, "new tokens: {beat:?}");
    assert!(
        beat.pttl_ms > 59_000,
        "the readers' leases: {}",
        beat.pttl_ms
    );
    assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
    assert!(s.writers().is_empty(), "the expired writer is dropped");
    assert_eq!(s.queued(), ["x:1 4 60000 0 4294967295", "r3:1 5 60000 0 1"]);
    // Its token is gone both ways.
    let fields: Vec<String> = s.conn.hkeys(&s.keys.all[3]).unwrap();
    assert!(
        !fields
            .iter()
            .any(|f| f == "a:1 1 4294967295" || *f == a.to_string()),
        "{fields:?}"
    );
    let r1 = s.token_of("r1:1 2 1");
    let r2 = s.token_of("r2:1 3 1");
    assert!(a < r1 && r1 < r2 && r2 == beat.last_token);
    for (channel, text) in [
        ("r1", format!("G 2 {r1} ")),
        ("r2", format!("G 3 {r2} ")),
        ("x", "H 4 ".to_owned()),
    ] {
        let (got, payload) = message(&mut pubsub);
        assert_eq!(got, format!("fairlock:wake:{channel}"));
        assert!(payload.starts_with(&text), "{payload}");
    }
    // r1's own heartbeat learns it holds, with that token.
    assert_eq!(
        s.heartbeat(LONG, &[entry("r1:1", 2, Read)]).statuses,
        [WaiterStatus::Owns(r1)]
    );
}

#[test]
fn a_heartbeat_keeps_a_handed_watchdog_lease_and_leaves_a_fixed_one() {
    let mut s = Rw::new("heartbeat-lease");
    let a = s.take("a:1", 1, Write);
    // Watchdog leases of 2 s, a fixed one of 400 ms.
    let lease = Duration::from_secs(2);
    let renewed = entry_with("w:1", 3, Read, lease, false);
    let fixed = entry_with("f:1", 4, Read, Duration::from_millis(400), true);
    let writer = entry_with("v:1", 5, Write, lease, false);
    for e in [renewed, fixed, writer] {
        assert!(matches!(
            s.attempt_with(
                e.owner,
                e.wait_id,
                Mode::First,
                access_of_ask(e.ask),
                0,
                e.lease,
                e.fixed
            )
            .unwrap(),
            AcquireReply::Waiting {
                position: Some(_),
                ..
            }
        ));
    }
    assert_eq!(owners(&s.handed(&a)), ["w:1", "f:1"]);
    let w_end = s.lease_end(0, "w:1 3 1").unwrap();
    let f_end = s.lease_end(0, "f:1 4 1").unwrap();
    sleep(Duration::from_millis(200));
    let beat = s.heartbeat(LONG, &[renewed, fixed, writer]);
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
    let now = s.now_ms();
    let w_new = s.lease_end(0, "w:1 3 1").unwrap();
    assert!(
        w_new > w_end && w_new >= now + 1990,
        "kept at its lease: {w_end} -> {w_new}, now {now}"
    );
    assert_eq!(
        s.lease_end(0, "f:1 4 1").unwrap(),
        f_end,
        "a fixed lease stays"
    );
    // Another call of the same owner is not extended by this one's beat.
    sleep(Duration::from_millis(250));
    assert_eq!(
        s.heartbeat(LONG, &[entry_with("f:1", 9, Read, LONG, false)])
            .statuses,
        [WaiterStatus::Gone]
    );
    assert_eq!(s.holders(), ["w:1 3 1"], "f's fixed lease ran out");
    // A handed write hold is kept the same way, the writers zset following.
    let w = Hold {
        owner: "w:1".into(),
        call: 3,
        token: s.token_of("w:1 3 1"),
    };
    assert_eq!(owners(&s.handed(&w)), ["v:1"]);
    let v_end = s.lease_end(0, "v:1 5 4294967295").unwrap();
    sleep(Duration::from_millis(200));
    assert!(matches!(
        s.heartbeat(LONG, &[writer]).statuses.as_slice(),
        [WaiterStatus::Owns(_)]
    ));
    let now = s.now_ms();
    let v_new = s.lease_end(0, "v:1 5 4294967295").unwrap();
    assert!(v_new > v_end && v_new >= now + 1990, "{v_end} -> {v_new}");
    // (The writers zset that repeated it is gone: the member of all the
    // units is the write, with that lease end.)
    assert!(s.writers().contains(&"v:1 5 4294967295".to_owned()));
}

#[test]
fn a_cancel_leaves_nothing_and_lets_in_the_readers_behind_a_writer() {
    let mut s = Rw::new("cancel");
    let a = s.take("a:1", 1, Read);
    let before = s.snapshot();
    s.queue("w:1", 2, Write);
    assert_eq!(s.cancel(entry("w:1", 2, Write)), CancelReply::Left);
    assert_eq!(s.snapshot(), before, "as before the wait");
    assert_eq!(s.cancel(entry("w:1", 2, Write)), CancelReply::Left, "again");
    assert_eq!(s.snapshot(), before, "as before the wait");
    // A writer at the head leaves while readers hold: the run of readers
    // behind it enters, up to the next writer, which learns it heads.
    s.queue("w:1", 3, Write);
    s.queue("r1:1", 4, Read);
    s.queue("r2:1", 5, Read);
    s.queue("x:1", 6, Write);
    s.queue("r3:1", 7, Read);
    let mut sub = s.messages();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(s.cancel(entry("w:1", 3, Write)), CancelReply::Left);
    assert_eq!(s.holders(), ["a:1 1 1", "r1:1 4 1", "r2:1 5 1"]);
    assert_eq!(s.queued(), ["x:1 6 60000 0 4294967295", "r3:1 7 60000 0 1"]);
    for channel in ["r1", "r2", "x"] {
        assert_eq!(message(&mut pubsub).0, format!("fairlock:wake:{channel}"));
    }
    // A waiter that does not head the queue leaves alone.
    assert_eq!(s.cancel(entry("r3:1", 7, Read)), CancelReply::Left);
    assert_eq!(s.queued(), ["x:1 6 60000 0 4294967295"]);
    assert_eq!(s.holders().len(), 3);
    // The writer enters once the readers are gone.
    for h in [
        a,
        Hold {
            owner: "r1:1".into(),
            call: 4,
            token: s.token_of("r1:1 4 1"),
        },
    ] {
        assert!(s.handed(&h).is_empty());
    }
    let r2 = Hold {
        owner: "r2:1".into(),
        call: 5,
        token: s.token_of("r2:1 5 1"),
    };
    assert_eq!(owners(&s.handed(&r2)), ["x:1"]);
}

#[test]
fn a_cancel_after_a_handoff_keeps_the_hold() {
    let mut s = Rw::new("cancel-kept");
    let a = s.take("a:1", 1, Write);
    s.queue("w:1", 2, Write);
    s.queue("x:1", 3, Read);
    let handed = s.handed(&a);
    assert_eq!(owners(&handed), ["w:1"]);
    for _ in 0..2 {
        match s.cancel(entry("w:1", 2, Write)) {
            CancelReply::Kept { token, pttl_ms } => {
                assert_eq!(token, handed[0].token);
                assert!(pttl_ms > 59_000, "{pttl_ms}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.holders(), ["w:1 2 4294967295"]);
    assert_eq!(s.writers(), ["w:1 2 4294967295"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0 1"]);
    // Another call of the same owner is not this one: its hold stays.
    s.queue("w:1", 7, Read);
    assert_eq!(s.cancel(entry("w:1", 7, Read)), CancelReply::Left);
    assert_eq!(s.holders(), ["w:1 2 4294967295"]);
    assert_eq!(s.queued(), ["x:1 3 60000 0 1"]);
    // It releases as any holder.
    assert_eq!(owners(&s.handed(&handed[0])), ["x:1"]);
}

#[test]
fn an_abandon_by_entry_gives_back_exactly_that_call_once() {
    let mut s = Rw::new("abandon");
    let a1 = s.take("a:1", 1, Read);
    let a2 = s.take("a:1", 2, Read);
    s.queue("w:1", 3, Write);
    s.queue("r:1", 4, Read);
    // The hold of call 1 only; a repeat changes nothing.
    assert_eq!(
        s.abandon(entry("a:1", 1, Read)),
        AbandonReply::HoldGivenBack
    );
    assert_eq!(s.holders(), ["a:1 2 1"]);
    let before = s.snapshot();
    assert_eq!(s.abandon(entry("a:1", 1, Read)), AbandonReply::Nothing);
    assert_eq!(s.snapshot(), before);
    // The release the client could not send answers as released.
    assert_eq!(s.release(&a1), ReleaseReply::Released { left: 0 });
    // A queued call: its entry, once.
    s.queue("y:1", 5, Read);
    assert_eq!(s.abandon(entry("y:1", 5, Read)), AbandonReply::LeftQueue);
    assert_eq!(s.abandon(entry("y:1", 5, Read)), AbandonReply::Nothing);
    assert_eq!(s.queued(), ["w:1 3 60000 0 4294967295", "r:1 4 60000 0 1"]);
    // A call never made, or named with another access, is nothing.
    assert_eq!(s.abandon(entry("q:1", 9, Read)), AbandonReply::Nothing);
    assert_eq!(s.abandon(entry("a:1", 2, Write)), AbandonReply::Nothing);
    assert_eq!(s.holders(), ["a:1 2 1"]);
    // Call 2's hold was the last read: the writer enters, the reader
    // behind it waits.
    assert_eq!(
        s.abandon(entry("a:1", 2, Read)),
        AbandonReply::HoldGivenBack
    );
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    assert_eq!(s.queued(), ["r:1 4 60000 0 1"]);
    assert_eq!(s.release(&a2), ReleaseReply::Released { left: 0 });
    // The writer's hold given back lets the reader in.
    assert_eq!(
        s.abandon(entry("w:1", 3, Write)),
        AbandonReply::HoldGivenBack
    );
    assert_eq!(s.holders(), ["r:1 4 1"]);
    assert!(s.queued().is_empty());
    assert_eq!(s.abandon(entry("w:1", 3, Write)), AbandonReply::Nothing);
    // With nobody waiting, a given-back hold leaves the keys as a release.
    assert_eq!(
        s.abandon(entry("r:1", 4, Read)),
        AbandonReply::HoldGivenBack
    );
    assert!(s.holders().is_empty());
    for key in [0, 1, 2, 3] {
        assert_eq!(s.pttl(key), -2, "{}", s.keys.all[key]);
    }
    let meta: String = s.conn.get(&s.keys.all[4]).unwrap();
    assert!(meta.ends_with(" r:1#4"), "{meta}");
}

#[test]
fn status_reports_holders_with_their_access_and_the_queue() {
    let mut s = Rw::new("status");
    let empty = s.status(10, 10);
    assert_eq!(
        (
            empty.live_holds,
            writer_holds(&empty),
            empty.live_waiters,
            empty.last_token
        ),
        (0, false, 0, 0)
    );
    let a = s.take("a:1", 1, Read);
    let b = s.take("b:1", 2, Read);
    s.queue("w:1", 3, Write);
    s.queue("r:1", 4, Read);
    let st = s.status(10, 10);
    assert_eq!(
        (
            st.live_holds,
            writer_holds(&st),
            st.live_waiters,
            st.last_token
        ),
        (2, false, 2, b.token)
    );
    let listed: Vec<(&str, u64, Access, u64)> = st
        .holders
        .iter()
        .map(|h| {
            (
                h.owner.as_str(),
                h.call.unwrap(),
                access_of(h.units),
                h.token,
            )
        })
        .collect();
    assert_eq!(
        listed,
        [("a:1", 1, Read, a.token), ("b:1", 2, Read, b.token)]
    );
    assert!(st
        .holders
        .iter()
        .all(|h| (59_000..=60_000).contains(&h.lease_left_ms.unwrap())));
    let waiters: Vec<(&str, Option<Access>)> = st
        .waiters
        .iter()
        .map(|w| (w.owner.as_str(), (w.units > 0).then(|| access_of(w.units))))
        .collect();
    assert_eq!(waiters, [("w:1", Some(Write)), ("r:1", Some(Read))]);
    assert!(st
        .waiters
        .iter()
        .all(|w| (59_000..=60_000).contains(&w.liveness_left_ms)));
    // The bounds.
    let few = s.status(1, 1);
    assert_eq!((few.holders.len(), few.waiters.len()), (1, 1));
    assert_eq!((few.live_holds, few.live_waiters), (2, 2));
    let none = s.status(0, 0);
    assert!(none.holders.is_empty() && none.waiters.is_empty());
    // The writer in: it holds alone, with the last token.
    s.release(&a);
    let w = s.handed(&b);
    let st = s.status(10, 10);
    assert_eq!(
        (
            st.live_holds,
            writer_holds(&st),
            st.live_waiters,
            st.last_token
        ),
        (1, true, 1, w[0].token)
    );
    assert_eq!(
        (st.holders[0].owner.as_str(), access_of(st.holders[0].units)),
        ("w:1", Write)
    );
    // An expired hold is no holder.
    let r = s.handed(&w[0]);
    s.release(&r[0]);
    s.attempt_with("d:1", 5, Mode::First, Write, 0, SHORT, true)
        .unwrap();
    assert!(writer_holds(&s.status(10, 10)));
    sleep(SHORT + Duration::from_millis(50));
    let expired = s.status(10, 10);
    assert_eq!((expired.live_holds, writer_holds(&expired)), (0, false));
    assert!(expired.holders.is_empty());
}

#[test]
fn bad_heartbeat_cancel_and_abandon_input_is_refused_before_any_write() {
    let mut s = Rw::new("bad-input-2");
    s.take("a:1", 1, Write);
    s.queue("w:1", 2, Read);
    let before = s.snapshot();
    let bad_entries = [
        "w:1 2 60000 0",
        "w:1 2 60000 0 x",
        "w:1 2 0 0 1",
        "w:1 2 60000 2 1",
        "w 1 2 60000 0 1",
        "w:1 x 60000 0 1",
        "",
    ];
    for bad in bad_entries {
        for (script, args) in [
            (counted(Op::Cancel), vec![bad.to_owned()]),
            (counted(Op::Abandon), vec![bad.to_owned()]),
            (
                counted(Op::Heartbeat),
                vec!["60000".into(), "w:1 2 60000 0 1".into(), bad.to_owned()],
            ),
        ] {
            let err = s.eval(script, &args).unwrap_err();
            assert_eq!(s.snapshot(), before, "{script:?} {args:?}");
            let text = chain(&err);
            assert!(
                text.contains("queue entry") || text.contains("lease"),
                "{script:?} {args:?}: {text}"
            );
        }
    }
    for timeout in ["0", "x", "-5"] {
        let args = [timeout, "w:1 2 60000 0 1"].map(str::to_owned);
        let err = s.eval(counted(Op::Heartbeat), &args).unwrap_err();
        assert!(chain(&err).contains("waiter timeout"), "{err}");
        assert_eq!(s.snapshot(), before, "{args:?}");
    }
}

#[test]
fn the_readme_acl_user_runs_the_heartbeat_cancel_abandon_and_status_scripts() {
    let mut s = Rw::new("acl-2");
    create_acl_user(&mut s.conn, "rw-pw");
    let user = redis::Client::open(s.server.url_as("fairlock", "rw-pw"))
        .unwrap()
        .get_connection()
        .unwrap();
    s.runner = Some(user);
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut s.conn)
        .unwrap();
    // Each path that writes: a heartbeat that admits a run of readers past
    // an expired writer (its token dropped) and keeps a queued one, one
    // that keeps a handed write lease, a cancel that keeps a hold and one
    // that leaves and lets readers in, abandons of a hold (with and without
    // waiters) and of a queue entry, a status listing both.
    let short = s
        .attempt_with("e:1", 1, Mode::First, Write, 0, SHORT, true)
        .unwrap();
    assert!(matches!(short, AcquireReply::Acquired { .. }));
    s.queue("r1:1", 2, Read);
    s.queue("r2:1", 3, Read);
    s.queue("w:1", 4, Write);
    s.queue("r3:1", 5, Read);
    sleep(SHORT * 2);
    let beat = s.heartbeat(LONG, &[entry("w:1", 4, Write), entry("r3:1", 5, Read)]);
    assert_eq!(
        beat.statuses,
        [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
    );
    assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
    let status = s.status(10, 10);
    assert_eq!((status.holders.len(), status.waiters.len()), (2, 2));
    assert_eq!(
        s.abandon(entry("r1:1", 2, Read)),
        AbandonReply::HoldGivenBack
    );
    assert_eq!(s.cancel(entry("r3:1", 5, Read)), CancelReply::Left);
    s.queue("r4:1", 6, Read);
    // The writer at the head leaves: r4 enters beside r2.
    assert_eq!(s.cancel(entry("w:1", 4, Write)), CancelReply::Left);
    assert_eq!(s.holders(), ["r2:1 3 1", "r4:1 6 1"]);
    s.queue("v:1", 7, Write);
    assert_eq!(
        s.abandon(entry("r2:1", 3, Read)),
        AbandonReply::HoldGivenBack
    );
    let r4 = Hold {
        owner: "r4:1".into(),
        call: 6,
        token: s.token_of("r4:1 6 1"),
    };
    assert_eq!(owners(&s.handed(&r4)), ["v:1"]);
    let kept = entry_with("v:1", 7, Write, LONG, false);
    // Shorten v's lease so the heartbeat and the cancel push it back.
    let now = s.now_ms();
    let _: () = s
        .conn
        .zadd(&s.keys.all[0], "v:1 7 4294967295", now + 5_000)
        .unwrap();
    assert!(matches!(
        s.heartbeat(LONG, &[kept]).statuses.as_slice(),
        [WaiterStatus::Owns(_)]
    ));
    let _: () = s
        .conn
        .zadd(&s.keys.all[0], "v:1 7 4294967295", now + 5_000)
        .unwrap();
    assert!(matches!(s.cancel(kept), CancelReply::Kept { .. }));
    s.queue("z:1", 8, Read);
    assert_eq!(s.abandon(entry("z:1", 8, Read)), AbandonReply::LeftQueue);
    assert_eq!(s.abandon(kept), AbandonReply::HoldGivenBack);
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

#[test]
fn a_force_release_frees_every_hold_once_and_admits_the_head() {
    let mut s = Rw::new("force");
    let a = s.take("a:1", 1, Read);
    let b = s.take("b:1", 2, Read);
    s.queue("w:1", 3, Write);
    s.queue("r1:1", 4, Read);
    s.queue("r2:1", 5, Read);
    let force = ForceRelease {
        call_key: "f#1".into(),
    };
    let freed = s.run(&force).unwrap();
    assert_eq!((freed.holds, freed.holder), (2, None));
    // The writer at the head is admitted in the same step, alone; the
    // readers behind it stay queued.
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    assert_eq!(s.queued(), ["r1:1 4 60000 0 1", "r2:1 5 60000 0 1"]);
    assert!(writer_holds(&s.status(10, 10)));
    // The same call again answers as the first and frees nothing more.
    let before = s.snapshot();
    assert_eq!(s.run(&force).unwrap().holds, 2);
    assert_eq!(s.snapshot(), before);
    // The old readers' holds are gone: renewals and releases say so.
    for old in [&a, &b] {
        assert!(!s.renew(old, Some(LONG)), "{old:?}");
        assert_eq!(s.release(old), ReleaseReply::NotHeld, "{old:?}");
    }
    // Nothing held: a forced release frees nothing.
    let w = Hold {
        owner: "w:1".into(),
        call: 3,
        token: s.token_of("w:1 3 4294967295"),
    };
    assert_eq!(owners(&s.handed(&w)), ["r1:1", "r2:1"]);
    let empty = ForceRelease {
        call_key: "f#2".into(),
    };
    assert_eq!(s.run(&empty).unwrap().holds, 2, "the two readers");
    assert_eq!(
        s.run(&ForceRelease {
            call_key: "f#3".into()
        })
        .unwrap()
        .holds,
        0
    );
}

#[test]
fn a_fixed_write_runs_out_by_itself_and_a_heartbeat_admits_the_readers() {
    let mut s = Rw::new("fixed");
    let w = s
        .attempt_with("w:1", 1, Mode::First, Write, 0, SHORT, true)
        .unwrap();
    assert!(matches!(w, AcquireReply::Acquired { .. }));
    s.queue("r1:1", 2, Read);
    s.queue("r2:1", 3, Read);
    // A heartbeat before the lease ends keeps them queued; no release is
    // ever sent for the write.
    let beat = s.heartbeat(LONG, &[entry("r1:1", 2, Read), entry("r2:1", 3, Read)]);
    assert_eq!(
        beat.statuses,
        [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
    );
    sleep(SHORT + Duration::from_millis(50));
    let beat = s.heartbeat(LONG, &[entry("r1:1", 2, Read), entry("r2:1", 3, Read)]);
    assert!(
        matches!(
            beat.statuses.as_slice(),
            [WaiterStatus::Owns(_), WaiterStatus::Owns(_)]
        ),
        "{beat:?}"
    );
    assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
    assert_eq!(s.meta_used(), Some(2));
}

#[test]
fn reads_take_one_unit_and_a_write_all_of_them() {
    let mut s = Rw::new("units");
    let a = s.take("a:1", 1, Read);
    assert_eq!(s.meta_used(), Some(1));
    let b = s.take("b:1", 2, Read);
    assert_eq!(s.meta_used(), Some(2));
    assert_eq!(s.holders(), ["a:1 1 1", "b:1 2 1"]);
    s.release(&a);
    assert_eq!(s.meta_used(), Some(1));
    s.release(&b);
    assert_eq!(s.meta_used(), Some(0));
    let w = s.take("w:1", 3, Write);
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    assert_eq!(s.meta_used(), Some(u64::from(RW_CAPACITY)));
    let tokens: Vec<String> = s.conn.hkeys(&s.keys.all[3]).unwrap();
    assert!(
        tokens.contains(&"w:1 3 4294967295".to_owned()) && tokens.contains(&w.token.to_string()),
        "the tokens hash maps both ways: {tokens:?}"
    );
    s.release(&w);
    assert_eq!(s.meta_used(), Some(0));
}
