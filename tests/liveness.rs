//! Liveness against a real redis-server: dead waiters and dead holders
//! (real processes, SIGKILLed) do not block the queue, lost leases are
//! reported and harmless, force_unlock hands over, and a timed-out
//! try_lock_for leaves nothing behind.
//!
//! Some tests run a second process: the test support's
//! `fairlock-test-child` binary in its "holder" role, with the
//! `FAIRLOCK_CHILD_*` variables set (see tests/support/child/holder.rs).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::__test_support::{Op, Script};
use fairlock::{Client, ErrorKind, FairMutex, LockKind};
use fairlock_test_support::fake_queue::{ScriptedLock, DEADLINE_BASE};
use fairlock_test_support::roles::holder::{
    LEASE_MS as CHILD_LEASE_MS, LOCKED as CHILD_LOCKED, NAME as CHILD_NAME, URL as CHILD_URL,
};
use fairlock_test_support::{
    holder_of, in_forked_child, join_within, ms, script_calls, serial, wait_until, RedisServer,
};

/// The child process binary (tests/support/child/), built for these tests.
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

/// Signed milliseconds from `from` to `to`.
fn signed_ms(from: Instant, to: Instant) -> f64 {
    if to >= from {
        ms(to - from)
    } else {
        -ms(from - to)
    }
}

/// A child process taking part in a test; SIGKILLed and reaped on drop.
struct ChildProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    reader: Option<JoinHandle<()>>,
}

impl ChildProcess {
    /// Starts a child that locks `name` on `server` and holds it once it has it.
    fn lock(server: &RedisServer, name: &str, lease: Duration) -> ChildProcess {
        let mut child = Command::new(CHILD)
            .arg("holder")
            .env(CHILD_URL, server.url())
            .env(CHILD_NAME, name)
            .env(CHILD_LEASE_MS, lease.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child process");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, lines) = mpsc::channel();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ChildProcess {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits for the child to report that it holds the lock; returns its token.
    fn wait_locked(&self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("the child did not report holding the lock in time");
            // The line with CHILD_LOCKED carries the token.
            if let Some((_, token)) = line.split_once(CHILD_LOCKED) {
                return token.trim().parse().expect("child token");
            }
        }
    }

    /// True if the child reported holding the lock (without waiting).
    fn has_locked(&self) -> bool {
        self.lines
            .try_iter()
            .any(|line| line.contains(CHILD_LOCKED))
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let status = self.child.wait().expect("reap the child");
        assert!(!status.success(), "the child exited by itself: {status}");
        if let Some(reader) = self.reader.take() {
            join_within(reader, Duration::from_secs(5), "child stdout reader");
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawns a thread that locks `mutex`, reports `(acquired at, token)`, waits
/// for a word on the returned sender (bounded), then unlocks and reports
/// when it released.
struct Waiter {
    granted: mpsc::Receiver<(Instant, u64)>,
    release: mpsc::Sender<()>,
    released: mpsc::Receiver<Instant>,
    handle: JoinHandle<()>,
}

impl Waiter {
    fn spawn(mutex: FairMutex) -> Waiter {
        let (granted_tx, granted) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let (released_tx, released) = mpsc::channel();
        let handle = thread::spawn(move || {
            let guard = mutex.lock().expect("waiter locks");
            granted_tx
                .send((Instant::now(), guard.fencing_token()))
                .unwrap();
            release_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("waiter told to release");
            assert!(!guard.is_lease_lost(), "waiter lost its lease");
            let at = Instant::now();
            guard.unlock().expect("waiter unlocks");
            released_tx.send(at).unwrap();
        });
        Waiter {
            granted,
            release,
            released,
            handle,
        }
    }

    fn granted_within(&self, timeout: Duration, what: &str) -> (Instant, u64) {
        self.granted
            .recv_timeout(timeout)
            .unwrap_or_else(|_| panic!("{what} was not granted within {timeout:?}"))
    }

    fn not_granted_for(&self, duration: Duration, what: &str) {
        if let Ok((_, token)) = self.granted.recv_timeout(duration) {
            panic!("{what} was granted the lock (token {token}) too early");
        }
    }

    /// Lets the waiter unlock; returns when it started releasing.
    fn release(self, what: &str) -> Instant {
        self.release.send(()).unwrap();
        let at = self
            .released
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{what} did not release"));
        join_within(self.handle, Duration::from_secs(5), what);
        at
    }
}

fn queue_len_reaches(mutex: &FairMutex, n: usize, timeout: Duration) -> bool {
    wait_until(timeout, || mutex.queue_len().unwrap() == n)
}

/// Entries left in the lock's queue key (absent = none), each checked to
/// have its liveness deadline beside it (`~<entry>`, lua/lib/queue.lua).
fn raw_queue_entries(server: &RedisServer, name: &str) -> Vec<(String, usize)> {
    let mut conn = server.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("fairlock:*:queue:{name}"))
        .query(&mut conn)
        .unwrap();
    keys.into_iter()
        .map(|key| {
            // Both counts in one atomic step: a heartbeat may prune between
            // two reads.
            let below = format!("({}", fairlock_test_support::fake_queue::DEADLINE_BASE);
            let (members, entries): (usize, usize) = redis::pipe()
                .atomic()
                .cmd("ZCARD")
                .arg(&key)
                .cmd("ZCOUNT")
                .arg(&key)
                .arg("-inf")
                .arg(below)
                .query(&mut conn)
                .unwrap();
            assert_eq!(members, 2 * entries, "{key}: an entry without its deadline");
            (key, entries)
        })
        .collect()
}

/// Owner id and token of the current holder, read straight from Redis.
fn raw_holder(server: &RedisServer, name: &str) -> Option<(String, u64)> {
    let mut conn = server.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("fairlock:*:lock:{name}"))
        .query(&mut conn)
        .unwrap();
    let (owner, token, _) = holder_of(&mut conn, keys.first()?)?;
    Some((owner, token.parse().ok()?))
}

/// Holder, waiter A (thread), a child process, waiter B (thread), queued in
/// that order. Returns (holder's client, holder's guard, A, child, B).
fn holder_a_child_b(
    server: &RedisServer,
    name: &str,
) -> (
    Client,
    fairlock::FairMutexGuard,
    Waiter,
    ChildProcess,
    Waiter,
) {
    let holder_client = server.client();
    let mutex = holder_client.fair_mutex(name);
    let holder = mutex.lock().unwrap();
    let a = Waiter::spawn(server.client().fair_mutex(name));
    assert!(
        queue_len_reaches(&mutex, 1, Duration::from_secs(5)),
        "A queued"
    );
    let child = ChildProcess::lock(server, name, Duration::from_secs(2));
    assert!(
        queue_len_reaches(&mutex, 2, Duration::from_secs(20)),
        "child queued"
    );
    let b = Waiter::spawn(server.client().fair_mutex(name));
    assert!(
        queue_len_reaches(&mutex, 3, Duration::from_secs(5)),
        "B queued"
    );
    (holder_client, holder, a, child, b)
}

#[test]
fn a_waiter_killed_mid_queue_loses_its_place() {
    let _serial = serial();
    let server = RedisServer::start();
    let waiter_timeout = Duration::from_secs(1);
    let (holder_client, holder, a, mut child, b) = holder_a_child_b(&server, "killed-waiter");
    let mutex = holder_client.fair_mutex("killed-waiter");

    let killed = Instant::now();
    child.kill();
    assert!(
        queue_len_reaches(&mutex, 2, waiter_timeout + Duration::from_secs(2)),
        "the dead waiter still counts: queue_len {}",
        mutex.queue_len().unwrap()
    );
    eprintln!(
        "killed waiter dropped from queue_len after {:.0} ms",
        ms(killed.elapsed())
    );
    // The live waiters' heartbeats prune the dead entry from the raw queue too.
    assert!(
        wait_until(Duration::from_secs(3), || {
            raw_queue_entries(&server, "killed-waiter")
                .iter()
                .all(|(_, n)| *n == 2)
        }),
        "dead entry left in the raw queue: {:?}",
        raw_queue_entries(&server, "killed-waiter")
    );

    let holder_token = holder.fencing_token();
    holder.unlock().unwrap();
    let (_, a_token) = a.granted_within(Duration::from_secs(3), "A");
    assert!(a_token > holder_token);
    b.not_granted_for(Duration::from_millis(100), "B (before A released)");
    let a_released = a.release("A");
    let (b_granted, b_token) = b.granted_within(waiter_timeout + Duration::from_secs(1), "B");
    eprintln!(
        "dead entry already pruned: A released -> B granted in {:.2} ms",
        signed_ms(a_released, b_granted)
    );
    assert!(b_token > a_token);
    assert!(b_granted - a_released < waiter_timeout + Duration::from_secs(1));
    assert!(
        !child.has_locked(),
        "the killed child reported holding the lock"
    );
    b.release("B");
    assert!(!mutex.is_locked().unwrap());
    assert_eq!(mutex.queue_len().unwrap(), 0);
}

#[test]
fn a_waiter_killed_just_before_its_turn_delays_the_next_by_at_most_waiter_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let waiter_timeout = Duration::from_secs(1);
    let (holder_client, holder, a, mut child, b) = holder_a_child_b(&server, "killed-next");
    let mutex = holder_client.fair_mutex("killed-next");

    // Release at once: the dead child's entry is still within its deadline
    // when A hands over, so the lock may be handed to the dead child first.
    child.kill();
    let holder_token = holder.fencing_token();
    holder.unlock().unwrap();
    let (_, a_token) = a.granted_within(Duration::from_secs(3), "A");
    assert!(a_token > holder_token);
    let a_released = a.release("A");
    let (b_granted, b_token) = b.granted_within(waiter_timeout + Duration::from_secs(2), "B");
    let waited = b_granted - a_released;
    eprintln!(
        "dead entry still within its deadline: A released -> B granted in {:.0} ms",
        ms(waited)
    );
    assert!(
        b_token > a_token,
        "B's token {b_token} is not above A's {a_token}"
    );
    assert!(
        waited < waiter_timeout + Duration::from_secs(1),
        "B waited {waited:?} after A released"
    );
    assert_eq!(
        mutex.queue_len().unwrap(),
        0,
        "the dead entry is still queued"
    );
    b.release("B");
    assert!(
        raw_queue_entries(&server, "killed-next").is_empty(),
        "{:?}",
        raw_queue_entries(&server, "killed-next")
    );
}

#[test]
fn a_killed_holder_frees_the_lock_when_its_lease_runs_out() {
    let _serial = serial();
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let mut child = ChildProcess::lock(&server, "killed-holder", lease);
    let child_token = child.wait_locked(Duration::from_secs(20));
    let client = server.client();
    let mutex = client.fair_mutex("killed-holder");
    let waiter = Waiter::spawn(client.fair_mutex("killed-holder"));
    assert!(queue_len_reaches(&mutex, 1, Duration::from_secs(5)));
    // The child's watchdog keeps its 1 s lease alive meanwhile.
    waiter.not_granted_for(2 * lease, "the waiter (while the child lived)");
    assert!(mutex.is_locked().unwrap());

    let asked = Instant::now();
    let remaining = mutex.remaining_lease().unwrap().expect("the child holds");
    let killed = Instant::now();
    child.kill();
    let (granted, token) = waiter.granted_within(lease + Duration::from_secs(2), "the waiter");
    let takeover = granted - killed;
    eprintln!(
        "holder SIGKILLed (lease {lease:?}, {:.0} ms left) -> waiter granted in {:.0} ms, \
         {:.1} ms after the lease ran out",
        ms(remaining),
        ms(takeover),
        signed_ms(asked + remaining, granted)
    );
    assert!(token > child_token);
    assert!(
        takeover < lease + Duration::from_secs(1),
        "takeover took {takeover:?}"
    );
    waiter.release("the waiter");
    assert!(!mutex.is_locked().unwrap());
}

#[test]
fn the_head_takes_an_expired_fixed_lease_promptly() {
    let _serial = serial();
    let server = RedisServer::start();
    let lease = Duration::from_millis(500);
    let holder_mutex = server.client().fair_mutex("expired-lease");
    let (acquired_tx, acquired_rx) = mpsc::channel();
    let (finish_tx, finish_rx) = mpsc::channel::<()>();
    // The holder never releases while the waiter waits: its guard (which is
    // !Send) stays on this thread until the test is over.
    let holder = thread::spawn(move || {
        let guard = holder_mutex
            .with_fixed_lease(lease)
            .lock()
            .expect("holder locks");
        acquired_tx
            .send((Instant::now(), guard.fencing_token()))
            .unwrap();
        finish_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("told to finish");
        let lost = guard.is_lease_lost();
        (lost, guard.unlock().map_err(|err| err.kind()))
    });
    let (holder_acquired, holder_token) = acquired_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("holder locked");

    let observer = server.client().fair_mutex("expired-lease");
    let waiter = Waiter::spawn(server.client().fair_mutex("expired-lease"));
    assert!(queue_len_reaches(&observer, 1, Duration::from_secs(2)));
    let asked = Instant::now();
    let remaining = observer
        .remaining_lease()
        .unwrap()
        .expect("the waiter queued after the lease ran out; machine too slow");
    let lease_end = asked + remaining;
    let (granted, token) = waiter.granted_within(Duration::from_secs(3), "the waiter");
    let from_remaining = signed_ms(lease_end, granted);
    let from_acquired = signed_ms(holder_acquired + lease, granted);
    eprintln!(
        "fixed lease {lease:?} ran out -> head granted after {from_remaining:.1} ms \
         (from remaining_lease) / {from_acquired:.1} ms (from holder's acquisition + lease)"
    );
    assert!(token > holder_token);
    assert!(
        from_remaining < 300.0 && from_acquired < 300.0,
        "takeover after expiry took {from_remaining:.1} / {from_acquired:.1} ms"
    );
    // Never before the lease ran out (the server's clock started it before
    // the holder saw its reply, hence a little slack).
    assert!(
        from_acquired > -50.0,
        "granted {from_acquired:.1} ms before the lease ended"
    );

    finish_tx.send(()).unwrap();
    let (lost, unlocked) = join_within(holder, Duration::from_secs(5), "holder");
    assert!(lost, "an expired fixed lease is not reported lost");
    assert_eq!(unlocked, Err(ErrorKind::LeaseLost));
    assert!(
        observer.is_locked().unwrap(),
        "the stale unlock freed the waiter's lock"
    );
    waiter.release("the waiter");
}

#[test]
fn force_unlocked_guard_reports_lease_lost_and_its_unlock_touches_nothing() {
    let _serial = serial();
    let server = RedisServer::start();
    let a_client = server.client();
    let a = a_client.fair_mutex("forced");
    let guard = a.lock().unwrap();
    let old_token = guard.fencing_token();
    assert!(!guard.is_lease_lost());

    let operator = server.client().fair_mutex("forced");
    assert!(operator.force_unlock().unwrap());
    let forced = Instant::now();
    // Watchdog period: min(2 s lease, 1 s waiter timeout) / 3.
    assert!(
        wait_until(Duration::from_secs(3), || guard.is_lease_lost()),
        "force-unlocked guard never reported its lease lost"
    );
    eprintln!(
        "force_unlock -> is_lease_lost after {:.0} ms",
        ms(forced.elapsed())
    );

    let b_client = server.client();
    let b = b_client.fair_mutex("forced");
    let b_guard = b.try_lock().unwrap().expect("the forced lock is free");
    assert!(b_guard.fencing_token() > old_token);
    let err = guard.unlock().expect_err("a lost guard's unlock must fail");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err:?}");
    assert!(err.is_lease_lost());

    // The new holder's lock is untouched.
    assert!(b.is_locked().unwrap());
    assert_eq!(b.hold_count().unwrap(), 1);
    let (owner, token) = raw_holder(&server, "forced").expect("still held");
    assert!(owner.starts_with(b_client.id()), "held by {owner}");
    assert_eq!(token, b_guard.fencing_token());
    assert!(!b_guard.is_lease_lost());
    b_guard.unlock().expect("the new holder unlocks");
    assert!(!b.is_locked().unwrap());
}

/// A lost lease is warned of once: the guard dropped after it releases
/// nothing (nothing was left to release) and says no "release failed".
#[test]
fn a_guard_dropped_after_its_lease_was_lost_warns_nothing_more() {
    crate::semaphore::warnings("");
    let server = RedisServer::start();
    let client = server.client();
    let guard = client.fair_mutex("forced-then-dropped").lock().unwrap();
    let operator = server.client().fair_mutex("forced-then-dropped");
    assert!(operator.force_unlock().unwrap());
    assert!(wait_until(Duration::from_secs(5), || guard.is_lease_lost()));
    drop(guard);
    assert!(!operator.is_locked().unwrap());
    let said = crate::semaphore::warnings("forced-then-dropped");
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("lease lost on"), "{said:?}");
    // A multi-lock's part likewise.
    let multi = client
        .fair_multi_lock(["multi-forced-then-dropped"])
        .lock()
        .unwrap();
    let operator = server.client().fair_mutex("multi-forced-then-dropped");
    assert!(operator.force_unlock().unwrap());
    assert!(wait_until(Duration::from_secs(5), || multi.is_lease_lost()));
    drop(multi);
    let said = crate::semaphore::warnings("multi-forced-then-dropped");
    assert_eq!(said.len(), 1, "{said:#?}");
}

#[test]
fn an_expired_fixed_lease_reports_lease_lost_and_its_unlock_touches_nothing() {
    let _serial = serial();
    let server = RedisServer::start();
    let lease = Duration::from_millis(400);
    let a_client = server.client();
    let a = a_client.fair_mutex("expiring");

    // Nobody else: the lock simply frees.
    let guard = a.with_fixed_lease(lease).lock().unwrap();
    assert!(!guard.is_lease_lost());
    assert!(wait_until(lease + Duration::from_secs(1), || guard.is_lease_lost()));
    assert!(wait_until(Duration::from_secs(1), || !a
        .is_locked()
        .unwrap()));
    assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
    assert!(!a.is_locked().unwrap());

    // Another client takes it meanwhile and keeps it through the stale unlock.
    let guard = a.with_fixed_lease(lease).lock().unwrap();
    let b_client = server.client();
    let b = Waiter::spawn(b_client.fair_mutex("expiring"));
    assert!(queue_len_reaches(&a, 1, Duration::from_secs(2)));
    let (_, b_token) = b.granted_within(lease + Duration::from_secs(2), "B");
    assert!(b_token > guard.fencing_token());
    assert!(
        guard.is_lease_lost(),
        "lease ran out and the lock was taken, yet not lost"
    );
    let err = guard.unlock().expect_err("a lost guard's unlock must fail");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err:?}");
    let (owner, token) = raw_holder(&server, "expiring").expect("B still holds");
    assert!(owner.starts_with(b_client.id()), "held by {owner}");
    assert_eq!(token, b_token);
    b.release("B");
    assert!(!a.is_locked().unwrap());
}

#[test]
fn force_unlock_reports_whether_held_and_hands_over() {
    let _serial = serial();
    let server = RedisServer::start();
    let operator = server.client().fair_mutex("operator");
    assert!(
        !operator.force_unlock().unwrap(),
        "force_unlock of a free lock"
    );

    let holder_client = server.client();
    let mutex = holder_client.fair_mutex("operator");
    let guard = mutex.lock().unwrap();
    let waiter = Waiter::spawn(server.client().fair_mutex("operator"));
    assert!(queue_len_reaches(&mutex, 1, Duration::from_secs(2)));
    waiter.not_granted_for(Duration::from_millis(200), "the waiter (while held)");

    let forced = Instant::now();
    assert!(
        operator.force_unlock().unwrap(),
        "force_unlock of a held lock"
    );
    let (granted, token) = waiter.granted_within(Duration::from_secs(2), "the waiter");
    eprintln!(
        "force_unlock -> queued waiter granted in {:.2} ms",
        ms(granted - forced)
    );
    assert!(token > guard.fencing_token());
    assert_eq!(mutex.queue_len().unwrap(), 0);
    assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
    assert!(
        mutex.is_locked().unwrap(),
        "the stale unlock freed the waiter's lock"
    );

    waiter.release("the waiter");
    assert!(!mutex.is_locked().unwrap());
    assert!(
        !operator.force_unlock().unwrap(),
        "force_unlock after release"
    );
}

/// A live waiter's place never lapses: its client's heartbeats come every
/// third of the shorter of its lease and its waiter timeout, so with a
/// waiter timeout (450 ms) far below the lease (4.5 s) the liveness
/// deadline Redis keeps for the entry stays ahead of Redis's clock (a
/// heartbeat a third of the lease apart let it lapse for most of each
/// round: the waiter dropped as dead and queued again at the back).
#[test]
fn a_waiter_timeout_below_the_lease_keeps_the_waiter_live() {
    let server = RedisServer::start();
    let holder_client = server.client();
    let mutex = holder_client.fair_mutex("short-waiter-timeout");
    let held = mutex.lock().unwrap();
    let client = (server.builder().lease(Duration::from_millis(4500)))
        .waiter_timeout(Duration::from_millis(450))
        .build()
        .unwrap();
    let waiter = thread::spawn(move || {
        let mutex = client.fair_mutex("short-waiter-timeout");
        mutex
            .try_lock_for(Duration::from_secs(10))
            .unwrap()
            .is_some()
    });
    assert!(
        queue_len_reaches(&mutex, 1, Duration::from_secs(5)),
        "queued"
    );
    let mut conn = server.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*:queue:short-waiter-timeout")
        .query(&mut conn)
        .unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1600) {
        let ((secs, micros), deadlines): ((i64, i64), Vec<(String, i64)>) = redis::pipe()
            .atomic()
            .cmd("TIME")
            .cmd("ZRANGEBYSCORE")
            .arg(&keys[0])
            .arg(DEADLINE_BASE)
            .arg("+inf")
            .arg("WITHSCORES")
            .query(&mut conn)
            .unwrap();
        let now_ms = secs * 1000 + micros / 1000;
        assert_eq!(deadlines.len(), 1, "one waiter's deadline");
        let ahead = deadlines[0].1 - DEADLINE_BASE - now_ms;
        assert!(ahead > 0, "the waiter's place lapsed {} ms ago", -ahead);
        thread::sleep(Duration::from_millis(20));
    }
    held.unlock().unwrap();
    assert!(join_within(waiter, Duration::from_secs(5), "the waiter"));
}

#[test]
fn a_timed_out_try_lock_for_leaves_nothing_behind() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = server.client();
    let mutex = holder_client.fair_mutex("patience");
    let holder = mutex.lock().unwrap();

    let impatient = server.client().fair_mutex("patience");
    let started = Instant::now();
    let got = impatient.try_lock_for(Duration::from_millis(300)).unwrap();
    let took = started.elapsed();
    eprintln!(
        "try_lock_for(300 ms) on a held lock returned None after {:.1} ms",
        ms(took)
    );
    assert!(got.is_none());
    assert!(
        took >= Duration::from_millis(300),
        "returned early: {took:?}"
    );
    assert!(
        took < Duration::from_millis(1300),
        "returned late: {took:?}"
    );
    assert_eq!(mutex.queue_len().unwrap(), 0);
    let left = raw_queue_entries(&server, "patience");
    assert!(left.is_empty(), "queue keys left behind: {left:?}");

    // A waiter queued behind one that times out is next when the holder releases.
    let timed_out = thread::spawn(move || {
        let started = Instant::now();
        let got = impatient.try_lock_for(Duration::from_millis(1500)).unwrap();
        (got.is_none(), started.elapsed())
    });
    assert!(queue_len_reaches(&mutex, 1, Duration::from_secs(1)));
    let behind = Waiter::spawn(server.client().fair_mutex("patience"));
    assert!(queue_len_reaches(&mutex, 2, Duration::from_secs(1)));
    let (none, took) = join_within(timed_out, Duration::from_secs(4), "the timed-out waiter");
    assert!(none, "try_lock_for got a held lock");
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert_eq!(mutex.queue_len().unwrap(), 1);
    let left = raw_queue_entries(&server, "patience");
    assert!(left.iter().all(|(_, n)| *n == 1), "{left:?}");

    let released = Instant::now();
    holder.unlock().unwrap();
    let (granted, _) = behind.granted_within(Duration::from_secs(2), "the waiter behind");
    let handoff = granted - released;
    eprintln!(
        "holder released -> waiter behind a timed-out one granted in {:.2} ms",
        ms(handoff)
    );
    assert!(
        handoff < Duration::from_millis(200),
        "handoff took {handoff:?}"
    );
    behind.release("the waiter behind");
    assert!(raw_queue_entries(&server, "patience").is_empty());
}

/// A release on the defaults vouches for the lease its client counts live,
/// so its script reads no PTTL: after a take, and after a handoff, whose
/// grant's lease is cut to the waiter's liveness deadline (at most the
/// waiter timeout, 10 s, against the command timeout's 5 s that the client
/// keeps in hand). Seen at Redis: with the lock key's TTL cut below its
/// fence (what a lease that ran out there looks like to a release that
/// checks), a vouched release still frees the hold. A client whose command
/// timeout is longer than that lease does not vouch, and its release finds
/// the lease lost.
#[test]
fn a_release_on_the_defaults_vouches_for_its_lease_after_a_take_and_after_a_handoff() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let key = fairlock_test_support::lock_key("vouched");
    let fence_ms = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
    let mut cut = || {
        let () = redis::cmd("PEXPIRE")
            .arg(&key)
            .arg(fence_ms - 1_000)
            .query(&mut conn)
            .unwrap();
    };
    let handed = |holder: &Client, waiter: &Client| {
        let guard = holder.fair_mutex("vouched").lock().unwrap();
        let mutex = waiter.fair_mutex("vouched");
        let queued = mutex.unbound();
        let waiting = thread::spawn(move || queued.lock().unwrap());
        assert!(queue_len_reaches(&mutex, 1, Duration::from_secs(5)));
        guard.unlock().unwrap();
        join_within(waiting, Duration::from_secs(5), "the waiter")
    };
    // The library's defaults (the test clients' short leases leave the
    // command timeout nothing to vouch with).
    let defaults = || Client::open(&server.url()).unwrap();
    let (a, b) = (defaults(), defaults());

    let taken = a.fair_mutex("vouched").lock().unwrap();
    cut();
    taken.unlock().expect("a vouched release after a take");
    let granted = handed(&a, &b);
    cut();
    granted.unlock().expect("a vouched release after a handoff");

    let wary = Client::builder(&server.url())
        .command_timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let granted = handed(&a, &wary);
    cut();
    let err = granted.unlock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
}

/// `calls` of `cmdstat_<command>` in `INFO commandstats` (0: none yet).
fn command_calls(conn: &mut redis::Connection, command: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    let calls = info.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
    calls.map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// The client of a parent that forks: its watchdog runs 20 s apart, so
/// nothing of the parent's is renewed while the child runs.
fn parent_client(server: &RedisServer) -> Client {
    let long = Duration::from_secs(60);
    let builder = server.builder().lease(long).waiter_timeout(long);
    builder.build().unwrap()
}

/// A process forked while it holds a lock (a pre-fork server, a test
/// runner): the child's copies of the guard and the client are the
/// parent's, and dropping them there (the child returning, unwinding)
/// frees nothing and sends nothing on the sockets it shares with the
/// parent; the parent keeps its hold, another client still waits for it,
/// and the parent's unlock releases it.
#[test]
fn a_forked_childs_drop_of_a_guard_and_client_frees_nothing_of_the_parents() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = parent_client(&server);
    let mutex = client.fair_mutex("forked");
    let guard = mutex.lock().unwrap();
    let token = guard.fencing_token();
    let (scripts, publishes) = (script_calls(&mut conn), command_calls(&mut conn, "publish"));

    // The child drops its copies of all three: the guard, then the client's
    // last handles (so the client itself, its threads being the parent's).
    let mut copies = Some((guard, mutex, client));
    let parents = &mut copies;
    let forked = Instant::now();
    let exited = in_forked_child(Duration::from_secs(5), || {
        let (guard, mutex, client) = parents.take().unwrap();
        drop(guard);
        drop((mutex, client));
        0
    });
    let sent = script_calls(&mut conn) - scripts;
    let published = command_calls(&mut conn, "publish") - publishes;
    let (guard, mutex, client) = copies.unwrap();
    let holder = raw_holder(&server, "forked");
    let other = server.client();
    let taken = other.fair_mutex("forked").try_lock().unwrap();
    let lost = guard.is_lease_lost();
    let unlocked = guard.unlock().map_err(|err| err.kind());
    eprintln!(
        "the child exited {exited:?} after {:.1} ms, sent {sent} scripts and {published} \
         publishes; then the lock's holder {holder:?}, another client took it: {}, the \
         parent's guard lost: {lost}, its unlock {unlocked:?}",
        ms(forked.elapsed()),
        taken.is_some(),
    );
    assert_eq!(
        exited,
        Some(0),
        "the child's drops panicked (101) or hung (None)"
    );
    assert_eq!(
        (sent, published),
        (0, 0),
        "the child's drops sent scripts, publishes"
    );
    let (owner, held) = holder.expect("the parent's hold was freed");
    assert!(owner.starts_with(client.id()), "held by {owner}");
    assert_eq!(held, token);
    assert!(taken.is_none(), "another client took the parent's lock");
    assert!(!lost);
    assert_eq!(unlocked, Ok(()), "the parent's unlock");
    assert!(!mutex.is_locked().unwrap());
}

/// A child forked while the parent holds a lock that calls the client it
/// inherited (a lock, a status, an unlock of the parent's guard) is
/// refused (`InvalidConfig`, the error saying to build a client of its
/// own) and sends nothing: a request on the parent's pooled sockets would
/// mix with the parent's requests and replies. The parent goes on as if
/// nothing happened.
#[test]
fn a_forked_child_that_calls_its_parents_client_is_refused_and_sends_nothing() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = parent_client(&server);
    let mutex = client.fair_mutex("forked-calls");
    let guard = mutex.lock().unwrap();
    let scripts = script_calls(&mut conn);
    let mut copies = Some(guard);
    let parents = &mut copies;
    let exited = in_forked_child(Duration::from_secs(5), || {
        let refused = |err: fairlock::Error| {
            err.kind() == ErrorKind::InvalidConfig && err.to_string().contains("forked")
        };
        let other = client.fair_mutex("forked-other");
        let calls = [
            other.try_lock().map(drop).map_err(refused),
            mutex.status(1).map(drop).map_err(refused),
            parents.take().unwrap().unlock().map_err(refused),
        ];
        if calls.iter().all(|call| *call == Err(true)) {
            0
        } else {
            eprintln!("the child's calls: {calls:?}");
            1
        }
    });
    let sent = script_calls(&mut conn) - scripts;
    assert_eq!(
        exited,
        Some(0),
        "a child's call was not refused, or it hung"
    );
    assert_eq!(sent, 0, "the child's calls sent scripts");
    let guard = copies.unwrap();
    assert!(!guard.is_lease_lost());
    assert!(mutex.is_locked().unwrap());
    guard.unlock().unwrap();
    assert!(client
        .fair_mutex("forked-other")
        .try_lock()
        .unwrap()
        .is_some());
}

/// A child forked while the parent watches an election: the child's copy
/// of the watch reads on the parent's subscribed socket, so its `next` is
/// refused (`InvalidConfig`, as every other call of the copy) rather than
/// taking the parent's messages, and a watch it asks of the inherited
/// client is refused too and subscribes nothing. (Before, the copy's
/// `next` read the parent's socket for its whole timeout, `Ok(None)`, and
/// the new watch opened a connection and subscribed.)
#[test]
fn a_forked_childs_copy_of_a_leader_watch_is_refused_and_reads_nothing() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = parent_client(&server);
    let election = client.election("forked-watch");
    let mut watch = election.watch().unwrap();
    assert!(watch.next(Duration::from_secs(2)).unwrap().is_some());
    let subscribes = command_calls(&mut conn, "subscribe");
    let exited = in_forked_child(Duration::from_secs(5), || {
        let refused = |err: fairlock::Error| {
            err.kind() == ErrorKind::InvalidConfig && err.to_string().contains("forked")
        };
        let started = Instant::now();
        let next = watch.next(Duration::from_millis(300)).map_err(refused);
        let took = started.elapsed();
        let new = election.watch().map(drop).map_err(refused);
        if next == Err(true) && new == Err(true) && took < Duration::from_millis(100) {
            0
        } else {
            eprintln!("the child's next: {next:?} after {took:?}; its new watch: {new:?}");
            1
        }
    });
    let subscribed = command_calls(&mut conn, "subscribe") - subscribes;
    assert_eq!(exited, Some(0), "the child's copy was not refused, or hung");
    assert_eq!(subscribed, 0, "the child subscribed");
    // The parent's watch still hears the next leader.
    let _leader = server.client().election("forked-watch").campaign().unwrap();
    let event = watch.next(Duration::from_secs(2)).unwrap();
    assert!(
        matches!(event, Some(fairlock::LeaderEvent::Leads(_))),
        "{event:?}"
    );
}

/// A crashed client's waiters lose their place (docs/guarantees.md, "dead
/// waiters": within the waiter timeout) however many it had: a live
/// waiter queued behind 200 dead entries (written by the acquire script,
/// their liveness deadlines long past, as a client killed with 200 waiting
/// threads leaves them) heads the queue, and takes an expired fixed lease
/// as promptly as a head with nobody dead ahead of it (the test above).
/// Its client's watchdog period is 1 s (lease and waiter timeout 3 s), its
/// rounds about 1 s and 2 s after the hold began (the client is built
/// then), so the lease ends between two of them. Before, a heartbeat
/// dropped 16 dead entries, so the waiter never heard position 0, and held
/// only at the round after the lease ended: 512-519 ms late in three runs.
#[test]
fn a_waiter_behind_many_dead_ones_takes_an_expired_fixed_lease_promptly() {
    let _serial = serial();
    let server = RedisServer::start();
    let name = "behind-the-dead";
    let lease = Duration::from_millis(1500);
    let holder_mutex = server.client().fair_mutex(name);
    let holder = holder_mutex.with_fixed_lease(lease).lock().unwrap();
    let holder_acquired = Instant::now();
    let scripted = ScriptedLock::new(&server, name);
    let mut conn = server.conn();
    // (enqueue pipelines EVALSHA: the script loaded first.)
    let acquire = Script::of(LockKind::Mutex, Op::Acquire).source();
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(acquire)
        .query::<String>(&mut conn)
        .unwrap();
    scripted.enqueue(&mut conn, 200);
    let queue = &scripted.keys[1];
    let deadlines: Vec<String> = redis::cmd("ZRANGEBYSCORE")
        .arg(queue)
        .arg(DEADLINE_BASE)
        .arg("+inf")
        .query(&mut conn)
        .unwrap();
    let mut dead = redis::cmd("ZADD");
    dead.arg(queue).arg("XX");
    for deadline in &deadlines {
        dead.arg(DEADLINE_BASE + 1).arg(deadline);
    }
    dead.query::<()>(&mut conn).unwrap();
    let waiter_client = server
        .builder()
        .lease(Duration::from_secs(3))
        .waiter_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let waiter = Waiter::spawn(waiter_client.fair_mutex(name));
    assert!(queue_len_reaches(&holder_mutex, 1, Duration::from_secs(2)));
    let (granted, token) = waiter.granted_within(Duration::from_secs(5), "the waiter");
    let late = signed_ms(holder_acquired + lease, granted);
    eprintln!(
        "fixed lease {lease:?} ran out -> the waiter behind 200 dead ones held after {late:.1} ms"
    );
    assert!(token > holder.fencing_token());
    assert!(
        (-50.0..300.0).contains(&late),
        "takeover after expiry took {late:.1} ms"
    );
    assert_eq!(
        holder.unlock().map_err(|e| e.kind()),
        Err(ErrorKind::LeaseLost)
    );
    waiter.release("the waiter");
}
