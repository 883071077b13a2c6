//! The faults of the counted engine's kinds, each test run on a semaphore
//! and on a rwlock's writes (`<test>::semaphore`, `<test>::rwlock`):
//! SIGKILLed waiter processes leave the queue within the waiter timeout and
//! block nobody behind them; a hold whose lease is lost (its link gone
//! dark, or removed from Redis) says so and goes to the head; timeouts and
//! cancellations under contention leave nothing behind. A semaphore's
//! holds are permits of two (two hold at once; of one where a test wants
//! one hold), a rwlock's are writes (one holds at a time).
//!
//! The waiter processes are the test support's `fairlock-test-child` in its
//! "holder" role with `FAIRLOCK_CHILD_PERMITS` or `FAIRLOCK_CHILD_ACCESS`
//! set (a permit of the semaphore, a write of the rwlock: queued behind
//! others, it is a waiter).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use fairlock::__test_support::LockKeys;
use fairlock::{
    AnyGuard, Client, ErrorKind, FairRwLock, FairSemaphore, Guard, LeaseEnd, LeaseSignal, LockKind,
    Status, Wait, WaitCanceller,
};
use fairlock_test_support::roles::Rng;
use fairlock_test_support::*;
use redis::Commands;

/// The child process binary (tests/support/child/), built for these tests.
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

/// The waiter timeout of the test support's clients and of the child.
const WAITER_TIMEOUT: Duration = Duration::from_secs(1);

/// A counted lock a test takes holds of: a semaphore of this many permits
/// (a hold is one), or a rwlock (a hold is its write).
#[derive(Debug, Clone, Copy)]
enum Counted {
    Semaphore(u32),
    RwLock,
}

impl Counted {
    /// How many of its holds fit at once.
    fn slots(self) -> usize {
        match self {
            Counted::Semaphore(permits) => permits as usize,
            Counted::RwLock => 1,
        }
    }

    /// The same kind with room for one hold.
    fn of_one(self) -> Counted {
        match self {
            Counted::Semaphore(_) => Counted::Semaphore(1),
            Counted::RwLock => Counted::RwLock,
        }
    }

    /// What a child holds of it.
    fn held(self) -> Held {
        match self {
            Counted::Semaphore(permits) => Held::Permit(permits),
            Counted::RwLock => Held::Write,
        }
    }

    fn lock_kind(self) -> LockKind {
        match self {
            Counted::Semaphore(_) => LockKind::Semaphore,
            Counted::RwLock => LockKind::RwLock,
        }
    }

    /// The three keys of lock `name` under the default prefix (holders,
    /// queue, meta; see src/protocol/keys.rs).
    fn keys(self, name: &str) -> Vec<String> {
        LockKeys::of_kind("fairlock", name, self.lock_kind())
            .unwrap()
            .all
            .to_vec()
    }

    /// `client`'s handle of lock `name`.
    fn handle(self, client: &Client, name: &str) -> Handle {
        match self {
            Counted::Semaphore(permits) => Handle::Semaphore(client.fair_semaphore(name, permits)),
            Counted::RwLock => Handle::RwLock(client.fair_rwlock(name)),
        }
    }
}

/// A handle of a [`Counted`] lock: its holds taken as one guard type.
#[derive(Clone)]
enum Handle {
    Semaphore(FairSemaphore),
    RwLock(FairRwLock),
}

impl Handle {
    fn take_with(&self, wait: impl Into<Wait>) -> fairlock::Result<Option<AnyGuard>> {
        Ok(match self {
            Handle::Semaphore(sem) => sem.acquire_with(wait)?.map(Guard::into_any),
            Handle::RwLock(rw) => rw.write_with(wait)?.map(Guard::into_any),
        })
    }

    fn take(&self) -> AnyGuard {
        self.take_with(Wait::forever())
            .unwrap()
            .expect("a wait without end ends held")
    }

    /// A thread that takes a hold and keeps it until told to release it.
    fn thread(&self) -> LockThread {
        let handle = self.clone();
        LockThread::take(move || {
            handle
                .take_with(Wait::forever())
                .map(|held| held.expect("a wait without end ends held"))
        })
    }

    fn status(&self, max: usize) -> Status {
        match self {
            Handle::Semaphore(sem) => sem.status(max),
            Handle::RwLock(rw) => rw.status(max),
        }
        .unwrap()
    }

    fn queue_len(&self) -> usize {
        self.status(0).queue_len
    }

    /// Nobody holds it and nobody waits.
    fn assert_free(&self, what: &str) {
        let status = self.status(10);
        assert_eq!((status.holder_count, status.queue_len), (0, 0), "{what}");
    }
}

/// Waits (at most `timeout`) until `lock` has `n` live waiters queued.
fn await_queue_len(lock: &Handle, n: usize, timeout: Duration) {
    assert!(
        wait_until(timeout, || lock.queue_len() == n),
        "queue never reached {n} within {timeout:?} (now {})",
        lock.queue_len()
    );
}

/// Raw entries of the lock's queue key, and their liveness deadlines
/// beside them (0 when gone; lua/lib/queue.lua).
fn raw_queue_entries(conn: &mut redis::Connection, k: Counted, name: &str) -> (usize, usize) {
    let keys = k.keys(name);
    let members: usize = conn.zcard(&keys[1]).unwrap();
    let entries = fairlock_test_support::fake_queue::queued_entries(conn, &keys[1]) as usize;
    (entries, members - entries)
}

/// Every hold of the lock taken by the test, then waiter A (a thread), a
/// child process and waiter B (a thread) queued in that order, each of its
/// own client.
struct KilledWaiterScene {
    lock: Handle,
    held: Vec<AnyGuard>,
    a: LockThread,
    child: HolderChild,
    b: LockThread,
    _clients: Vec<Client>,
}

fn holders_a_child_b(server: &RedisServer, k: Counted, name: &str) -> KilledWaiterScene {
    let holder = server.client();
    let lock = k.handle(&holder, name);
    let held = (0..k.slots()).map(|_| lock.take()).collect();
    let (a_client, b_client) = (server.client(), server.client());
    let a = k.handle(&a_client, name).thread();
    await_queue_len(&lock, 1, Duration::from_secs(5));
    let child = HolderChild::start(CHILD, &server.url(), name, Duration::from_secs(2), k.held());
    // A process start and a connection: generous under load.
    await_queue_len(&lock, 2, Duration::from_secs(20));
    let b = k.handle(&b_client, name).thread();
    await_queue_len(&lock, 3, Duration::from_secs(5));
    KilledWaiterScene {
        lock,
        held,
        a,
        child,
        b,
        _clients: vec![holder, a_client, b_client],
    }
}

/// For each scenario `fn name(k: Counted)`, a module `name` with a test on
/// a semaphore of two permits and one on a rwlock's writes.
macro_rules! counted {
    ($($(#[$attr:meta])* fn $name:ident($k:ident: Counted $(,)?) $body:block)*) => {$(
        $(#[$attr])*
        fn $name($k: Counted) $body

        mod $name {
            #[test]
            fn semaphore() {
                super::$name(super::Counted::Semaphore(2))
            }

            #[test]
            fn rwlock() {
                super::$name(super::Counted::RwLock)
            }
        }
    )*};
}

/// A thread blocked on `signal`: reports how it ended and when.
fn watch(signal: LeaseSignal) -> mpsc::Receiver<(LeaseEnd, Instant)> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let end = signal.wait();
        let _ = tx.send((end, Instant::now()));
    });
    rx
}

/// Members of the lock's holders (a hold, or the token beside it:
/// "#<hold>") and queue (an entry, or its deadline: "~<entry>") keys, and
/// the meta's lone hold, that belong to `client`.
fn entries_of(
    conn: &mut redis::Connection,
    k: Counted,
    name: &str,
    client: &Client,
) -> Vec<String> {
    let keys = k.keys(name);
    let mine = |member: &String| {
        member
            .trim_start_matches(['#', '~'])
            .starts_with(&format!("{}:", client.id()))
    };
    let mut found = Vec::new();
    for key in &keys[..2] {
        let members: Vec<String> = conn.zrange(key, 0, -1).unwrap();
        found.extend(
            members
                .into_iter()
                .filter(mine)
                .map(|m| format!("{key}: {m}")),
        );
    }
    // "v<format> <capacity> <token> <owner>#<call> <fence ms> <units>
    // <mark>" with a lone hold.
    let stored: Option<String> = conn.get(&keys[2]).unwrap();
    if let Some(lone) = stored.as_deref().and_then(|m| m.split(' ').nth(3)) {
        if mine(&lone.to_owned()) {
            found.push(format!("{}: {}", keys[2], stored.as_deref().unwrap()));
        }
    }
    found
}

counted! {
    fn a_waiter_process_killed_mid_queue_leaves_it_within_the_waiter_timeout(k: Counted) {
        let _serial = serial();
        let server = RedisServer::start();
        let name = "killed-waiter";
        let KilledWaiterScene {
            lock,
            mut held,
            a,
            mut child,
            b,
            _clients,
        } = holders_a_child_b(&server, k, name);
        let killed = child.kill();
        await_queue_len(&lock, 2, WAITER_TIMEOUT + Duration::from_secs(2));
        eprintln!(
            "{k:?}: a killed waiter left queue_len after {:.0} ms",
            ms(killed.elapsed())
        );
        // The live waiters' heartbeats drop the dead entry from the raw keys.
        let mut conn = server.conn();
        assert!(
            wait_until(Duration::from_secs(3), || raw_queue_entries(&mut conn, k, name)
                == (2, 2)),
            "dead entry left in the raw queue: {:?}",
            raw_queue_entries(&mut conn, k, name)
        );
        let first = held.pop().unwrap();
        let held_token = first.fencing_token();
        first.unlock().unwrap();
        let (_, a_token) = a.granted_within(Duration::from_secs(3), "A");
        assert!(a_token > held_token);
        assert!(
            !b.is_granted_within(Duration::from_millis(100)),
            "B was granted while every hold was taken"
        );
        // The hold ahead of B: the test's other permit, or A's write.
        let (released, a) = match held.pop() {
            Some(next) => {
                let at = Instant::now();
                next.unlock().unwrap();
                (at, Some(a))
            }
            None => (a.release("A"), None),
        };
        // Nothing of the dead child is ahead of B: a release away.
        let (b_granted, b_token) = b.granted_within(Duration::from_secs(2), "B");
        eprintln!(
            "{k:?}: dead entry pruned: release -> B granted in {:.1} ms",
            ms(b_granted - released)
        );
        assert!(b_token > a_token);
        assert!(!child.has_held(), "the killed child reported a hold");
        if let Some(a) = a {
            a.release("A");
        }
        b.release("B");
        lock.assert_free("after A and B");
    }

    fn a_waiter_process_killed_just_before_its_turn_delays_the_next_by_at_most_the_waiter_timeout(
        k: Counted,
    ) {
        let _serial = serial();
        let server = RedisServer::start();
        let name = "killed-next";
        let KilledWaiterScene {
            lock,
            held,
            a,
            mut child,
            b,
            _clients,
        } = holders_a_child_b(&server, k, name);
        // Every hold comes free at once (A's too, once it has it): the dead
        // child's entry is still within its deadline, so the next hold may
        // be handed to it; that grant lasts no longer than the child's
        // deadline, then goes to B.
        child.kill();
        let mut released = Instant::now();
        for guard in held {
            guard.unlock().unwrap();
        }
        let (_, a_token) = a.granted_within(Duration::from_secs(3), "A");
        let mut a = Some(a);
        if k.slots() == 1 {
            released = a.take().unwrap().release("A");
        }
        let (b_granted, b_token) = b.granted_within(WAITER_TIMEOUT + Duration::from_secs(2), "B");
        let waited = b_granted - released;
        eprintln!(
            "{k:?}: dead waiter within its deadline: release -> B granted in {:.0} ms",
            ms(waited)
        );
        assert!(b_token > a_token, "B's token {b_token}, A's {a_token}");
        assert!(
            waited < WAITER_TIMEOUT + Duration::from_secs(1),
            "B waited {waited:?}"
        );
        assert!(!child.has_held(), "the killed child reported a hold");
        assert_eq!(lock.queue_len(), 0, "the dead entry is still queued");
        if let Some(a) = a {
            a.release("A");
        }
        b.release("B");
        let mut conn = server.conn();
        assert_eq!(raw_queue_entries(&mut conn, k, name), (0, 0));
        lock.assert_free("after A and B");
    }

    fn a_cut_off_hold_knows_it_is_lost_before_the_head_gets_it(k: Counted) {
        let k = k.of_one();
        let _serial = serial();
        let server = RedisServer::start();
        let relay = Relay::start(server.port());
        let lease = Duration::from_secs(1);
        let cut_off = Client::builder(&relay.url())
            .lease(lease)
            .waiter_timeout(WAITER_TIMEOUT)
            .connect_timeout(Duration::from_secs(1))
            .command_timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let direct = server.client();
        let lock = k.handle(&direct, "cut-off");
        let mut margins = Vec::new();
        for round in 0..3 {
            let hold = k.handle(&cut_off, "cut-off").take();
            let watcher = watch(hold.lease_signal());
            let head = lock.thread();
            await_queue_len(&lock, 1, Duration::from_secs(5));
            relay.stall();
            let stalled = Instant::now();
            // Causal, as for the mutex (tests/partitions.rs): once the head's
            // acquire has returned, the cut-off holder knows its hold is gone.
            let (granted, token) = head.granted_within(lease + Duration::from_secs(3), "the head");
            assert!(
                hold.is_lease_lost(),
                "round {round}: the holder still believed it held after the head's acquire \
                 returned"
            );
            assert!(token > hold.fencing_token());
            assert!(
                granted - stalled < lease + Duration::from_secs(2),
                "the head waited {:?} after the link went dark",
                granted - stalled
            );
            let (end, fired) = watcher
                .recv_timeout(Duration::from_secs(5))
                .expect("the signal fires");
            assert_eq!(end, LeaseEnd::Lost);
            // Negative: the signal's thread ran after the head's return (which
            // says nothing about the lease itself).
            margins.push(match granted.checked_duration_since(fired) {
                Some(ahead) => ms(ahead),
                None => -ms(fired - granted),
            });
            relay.resume();
            // The lost hold's release touches nothing of the head's.
            drop(hold);
            thread::sleep(Duration::from_millis(300));
            let status = lock.status(10);
            assert_eq!(status.holder_count, 1);
            assert_eq!(status.holders[0].fencing_token, token);
            head.release("the head");
            lock.assert_free("after the head");
        }
        eprintln!("{k:?}: link dark, lease signal ahead of the head's grant by {margins:.1?} ms");
    }

    fn a_hold_removed_from_redis_is_signalled_within_a_watchdog_period_and_goes_to_the_head(
        k: Counted,
    ) {
        let k = k.of_one();
        let _serial = serial();
        let server = RedisServer::start();
        // Watchdog period: a third of min(lease, waiter timeout) = 100 ms.
        let holder = server
            .builder()
            .lease(Duration::from_millis(300))
            .waiter_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let waiter = server.client();
        let mut conn = server.conn();
        let mut delays = Vec::new();
        for round in 0..5 {
            let name = format!("removed-{round}");
            let hold = k.handle(&holder, &name).take();
            let watcher = watch(hold.lease_signal());
            let lock = k.handle(&waiter, &name);
            let head = lock.thread();
            await_queue_len(&lock, 1, Duration::from_secs(5));
            // An operator removes the hold by hand: a lone hold lives in the
            // meta (the holders zset comes in with a second hold).
            let keys = k.keys(&name);
            let members: Vec<String> = conn.zrange(&keys[0], 0, -1).unwrap();
            assert_eq!(members, Vec::<String>::new(), "a lone hold");
            assert_eq!(remove_counted_holds(&mut conn, &keys), 1);
            let removed = Instant::now();
            let (end, at) = watcher
                .recv_timeout(Duration::from_secs(5))
                .expect("the signal fires");
            assert_eq!(end, LeaseEnd::Lost);
            assert!(hold.is_lease_lost());
            delays.push(ms(at - removed));
            // The head's heartbeat (every 333 ms) hands it the free hold.
            let (granted, token) = head.granted_within(Duration::from_secs(3), "the head");
            assert!(token > hold.fencing_token());
            assert!(
                granted - removed < WAITER_TIMEOUT + Duration::from_secs(1),
                "the head waited {:?}",
                granted - removed
            );
            let err = hold.unlock().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
            let status = lock.status(10);
            assert_eq!(status.holder_count, 1, "the lost hold's release freed it");
            assert_eq!(status.holders[0].fencing_token, token);
            head.release("the head");
        }
        delays.sort_by(f64::total_cmp);
        eprintln!("{k:?}: hold removed -> signal (ms), watchdog period 100 ms: {delays:.1?}");
        // One period, plus a renewal's round trip, plus slack for a busy machine.
        assert!(delays[4] <= 100.0 + 400.0, "{delays:?}");
    }

    fn timeouts_and_cancellations_under_contention_leave_nothing_behind(k: Counted) {
        const CALLS: usize = 20;
        let _serial = serial();
        let server = RedisServer::start();
        let name = "leftovers";
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        eprintln!("{k:?}: leftovers seed {seed}");
        // Contention: three threads of another client take and give back
        // holds without pause, with short holds.
        let busy = server.client();
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..3)
            .map(|_| {
                let (lock, stop) = (k.handle(&busy, name), Arc::clone(&stop));
                thread::spawn(move || {
                    let mut sections = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let hold = lock.take();
                        thread::sleep(Duration::from_millis(3));
                        hold.unlock().expect("churn releases");
                        sections += 1;
                    }
                    sections
                })
            })
            .collect();
        // The impatient client: timed waits and cancelled ones, many of which
        // end without a hold (some in the instant one is handed over).
        let impatient = server.client();
        let callers: Vec<_> = (0..4)
            .map(|caller| {
                let lock = k.handle(&impatient, name);
                let mut rng = Rng::new(seed + caller);
                thread::spawn(move || {
                    let (mut got, mut without) = (0, 0);
                    for call in 0..CALLS {
                        let outcome = if call % 2 == 0 {
                            lock.take_with(rng.millis(1, 30))
                        } else {
                            let cancel = WaitCanceller::new();
                            let canceller = cancel.clone();
                            let after = rng.millis(1, 30);
                            let stopper = thread::spawn(move || {
                                thread::sleep(after);
                                canceller.cancel();
                            });
                            let outcome = lock.take_with(Wait::forever().cancelled_by(&cancel));
                            stopper.join().unwrap();
                            outcome
                        };
                        match outcome {
                            Ok(Some(hold)) => {
                                got += 1;
                                hold.unlock().expect("release");
                            }
                            Ok(None) => without += 1,
                            // A deadline of a few ms that passed while the
                            // pool opened a connection (a busy machine): the
                            // call sent nothing, so it leaves nothing either.
                            Err(err)
                                if err.is_connection()
                                    && err.to_string().contains("no redis connection could be had") =>
                            {
                                without += 1
                            }
                            Err(err) => panic!("a timed or cancelled wait: {err:?}"),
                        }
                    }
                    (got, without)
                })
            })
            .collect();
        let (mut got, mut without) = (0, 0);
        for caller in callers {
            let (g, w) = join_within(caller, Duration::from_secs(60), "an impatient caller");
            got += g;
            without += w;
        }
        eprintln!("{k:?}: impatient calls under contention: {got} holds, {without} without");
        assert!(
            without >= 10,
            "too little contention: {without} of {} calls ended without a hold",
            4 * CALLS
        );
        // Still under contention: nothing of the impatient client is left.
        let mut conn = server.conn();
        assert_eq!(
            entries_of(&mut conn, k, name, &impatient),
            Vec::<String>::new()
        );
        assert_eq!(keys_without_ttl(&mut conn, "fairlock:*"), Vec::<String>::new());
        let status = k.handle(&impatient, name).status(100);
        let ours = status
            .waiters
            .iter()
            .map(|w| &w.who)
            .chain(status.holders.iter().map(|h| &h.who))
            .filter(|who| who.client_id() == impatient.id())
            .count();
        assert_eq!(ours, 0, "{status:?}");
        stop.store(true, Ordering::SeqCst);
        let sections: usize = churn
            .into_iter()
            .map(|t| join_within(t, Duration::from_secs(10), "a churn thread"))
            .sum();
        eprintln!("{k:?}: {sections} churn sections meanwhile");
        let lock = k.handle(&busy, name);
        lock.assert_free("after the churn");
        assert_eq!(keys_without_ttl(&mut conn, "fairlock:*"), Vec::<String>::new());
        let keys = k.keys(name);
        for key in &keys[..2] {
            let exists: bool = conn.exists(key).unwrap();
            assert!(!exists, "{key} outlived every holder and waiter");
        }
    }
}
