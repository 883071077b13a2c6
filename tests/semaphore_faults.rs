//! `FairSemaphore` under faults and in the deployments the mutex is tested
//! in, against real servers: SIGKILLed waiter processes leave the queue
//! within the waiter timeout and block nobody behind them; a permit whose
//! lease is lost (its link gone dark, or removed from Redis) says so and
//! goes to the head; timeouts and cancellations under contention leave
//! nothing behind; on a Redis Cluster a semaphore's four keys share one
//! slot; the least-privilege ACL user of docs/security.md runs every semaphore
//! operation.
//!
//! The waiter processes are the test support's `fairlock-test-child` in its
//! "holder" role with `FAIRLOCK_CHILD_PERMITS` set (a permit of the
//! semaphore: queued behind others, it is a waiter).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::{Client, ErrorKind, FairSemaphore, LeaseEnd, LeaseSignal, Wait, WaitCanceller};
use fairlock_test_support::cluster::{lock_key, RedisCluster};
use fairlock_test_support::roles::Rng;
use fairlock_test_support::*;
use redis::Commands;

/// The child process binary (tests/support/child/), built for these tests.
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

/// The waiter timeout of the test support's clients and of the child.
const WAITER_TIMEOUT: Duration = Duration::from_secs(1);

/// The four keys of the semaphore `name` under the default prefix
/// (holders, queue, deadlines, meta; see src/protocol/keys.rs).
fn semaphore_keys(name: &str) -> [String; 4] {
    let lock = lock_key(name);
    ["sem", "semq", "semd", "semmeta"].map(|kind| lock.replacen(":lock:", &format!(":{kind}:"), 1))
}

/// Waits (at most `timeout`) until `sem` has `n` live waiters queued.
fn await_queue_len(sem: &FairSemaphore, n: usize, timeout: Duration) {
    assert!(
        wait_until(timeout, || sem.queue_len().unwrap() == n),
        "queue never reached {n} within {timeout:?} (now {})",
        sem.queue_len().unwrap()
    );
}

/// A thread that acquires a permit of a semaphore, reports when it got it
/// and its token, and releases it when told to (bounded).
struct PermitThread {
    granted: mpsc::Receiver<(Instant, u64)>,
    release: mpsc::Sender<()>,
    handle: JoinHandle<()>,
}

impl PermitThread {
    fn acquire(sem: FairSemaphore) -> PermitThread {
        let (granted_tx, granted) = mpsc::channel();
        let (release, told) = mpsc::channel();
        let handle = thread::spawn(move || {
            let permit = sem.acquire().expect("acquire");
            granted_tx
                .send((Instant::now(), permit.fencing_token()))
                .unwrap();
            told.recv_timeout(Duration::from_secs(30))
                .expect("told to release");
            assert!(!permit.is_lease_lost(), "the waiter lost its permit");
            permit.unlock().expect("release");
        });
        PermitThread {
            granted,
            release,
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
            panic!("{what} was granted a permit (token {token}) too early");
        }
    }

    fn release(self, what: &str) {
        self.release.send(()).unwrap();
        join_within(self.handle, Duration::from_secs(10), what);
    }
}

/// Raw entries of the semaphore's queue and deadlines keys (0 when gone).
fn raw_queue_entries(conn: &mut redis::Connection, name: &str) -> (usize, usize) {
    let keys = semaphore_keys(name);
    (conn.zcard(&keys[1]).unwrap(), conn.zcard(&keys[2]).unwrap())
}

/// Two permits held by the test, then waiter A (a thread), a child process
/// and waiter B (a thread) queued in that order, each of its own client.
struct KilledWaiterScene {
    sem: FairSemaphore,
    held: Vec<fairlock::SemaphorePermit>,
    a: PermitThread,
    child: HolderChild,
    b: PermitThread,
    _clients: Vec<Client>,
}

fn holders_a_child_b(server: &RedisServer, name: &str) -> KilledWaiterScene {
    let holder = server.client();
    let sem = holder.fair_semaphore(name, 2);
    let held = vec![sem.acquire().unwrap(), sem.acquire().unwrap()];
    let (a_client, b_client) = (server.client(), server.client());
    let a = PermitThread::acquire(a_client.fair_semaphore(name, 2));
    await_queue_len(&sem, 1, Duration::from_secs(5));
    let child = HolderChild::start(
        CHILD,
        &server.url(),
        name,
        Duration::from_secs(2),
        Held::Permit(2),
    );
    // A process start and a connection: generous under load.
    await_queue_len(&sem, 2, Duration::from_secs(20));
    let b = PermitThread::acquire(b_client.fair_semaphore(name, 2));
    await_queue_len(&sem, 3, Duration::from_secs(5));
    KilledWaiterScene {
        sem,
        held,
        a,
        child,
        b,
        _clients: vec![holder, a_client, b_client],
    }
}

#[test]
fn a_waiter_process_killed_mid_queue_leaves_it_within_the_waiter_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let KilledWaiterScene {
        sem,
        mut held,
        a,
        mut child,
        b,
        _clients,
    } = holders_a_child_b(&server, "killed-waiter");
    let killed = child.kill();
    await_queue_len(&sem, 2, WAITER_TIMEOUT + Duration::from_secs(2));
    eprintln!(
        "semaphore: a killed waiter left queue_len after {:.0} ms",
        ms(killed.elapsed())
    );
    // The live waiters' heartbeats drop the dead entry from the raw keys.
    let mut conn = server.conn();
    assert!(
        wait_until(Duration::from_secs(3), || raw_queue_entries(
            &mut conn,
            "killed-waiter"
        ) == (2, 2)),
        "dead entry left in the raw queue: {:?}",
        raw_queue_entries(&mut conn, "killed-waiter")
    );
    let held_token = held[1].fencing_token();
    held.pop().unwrap().unlock().unwrap();
    let (_, a_token) = a.granted_within(Duration::from_secs(3), "A");
    assert!(a_token > held_token);
    b.not_granted_for(Duration::from_millis(100), "B (both permits held)");
    let released = Instant::now();
    held.pop().unwrap().unlock().unwrap();
    // Nothing of the dead child is ahead of B: a release away.
    let (b_granted, b_token) = b.granted_within(Duration::from_secs(2), "B");
    eprintln!(
        "semaphore: dead entry pruned: release -> B granted in {:.1} ms",
        ms(b_granted - released)
    );
    assert!(b_token > a_token);
    assert!(!child.has_held(), "the killed child reported a permit");
    a.release("A");
    b.release("B");
    let status = sem.status(10).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
    assert_eq!(sem.available().unwrap(), 2);
}

#[test]
fn a_waiter_process_killed_just_before_its_turn_delays_the_next_by_at_most_the_waiter_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let KilledWaiterScene {
        sem,
        held,
        a,
        mut child,
        b,
        _clients,
    } = holders_a_child_b(&server, "killed-next");
    // Both permits come free at once: the dead child's entry is still within
    // its deadline, so the second may be handed to it; that grant lasts no
    // longer than the child's deadline, then goes to B.
    child.kill();
    let released = Instant::now();
    for permit in held {
        permit.unlock().unwrap();
    }
    let (_, a_token) = a.granted_within(Duration::from_secs(3), "A");
    let (b_granted, b_token) = b.granted_within(WAITER_TIMEOUT + Duration::from_secs(2), "B");
    let waited = b_granted - released;
    eprintln!(
        "semaphore: dead waiter within its deadline: release -> B granted in {:.0} ms",
        ms(waited)
    );
    assert!(b_token > a_token, "B's token {b_token}, A's {a_token}");
    assert!(
        waited < WAITER_TIMEOUT + Duration::from_secs(1),
        "B waited {waited:?}"
    );
    assert!(!child.has_held(), "the killed child reported a permit");
    assert_eq!(
        sem.queue_len().unwrap(),
        0,
        "the dead entry is still queued"
    );
    a.release("A");
    b.release("B");
    let mut conn = server.conn();
    assert_eq!(raw_queue_entries(&mut conn, "killed-next"), (0, 0));
    assert_eq!(sem.available().unwrap(), 2);
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

#[test]
fn a_cut_off_permit_knows_it_is_lost_before_the_head_gets_it() {
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
    let sem = direct.fair_semaphore("cut-off", 1);
    let mut margins = Vec::new();
    for round in 0..3 {
        let permit = cut_off.fair_semaphore("cut-off", 1).acquire().unwrap();
        let watcher = watch(permit.lease_signal());
        let head = PermitThread::acquire(sem.clone());
        await_queue_len(&sem, 1, Duration::from_secs(5));
        relay.stall();
        let stalled = Instant::now();
        // Causal, as for the mutex (tests/partitions.rs): once the head's
        // acquire has returned, the cut-off holder knows its permit is gone.
        let (granted, token) = head.granted_within(lease + Duration::from_secs(3), "the head");
        assert!(
            permit.is_lease_lost(),
            "round {round}: the holder still believed it held its permit after the head's \
             acquire returned"
        );
        assert!(token > permit.fencing_token());
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
        // The lost permit's release touches nothing of the head's.
        drop(permit);
        thread::sleep(Duration::from_millis(300));
        let status = sem.status(10).unwrap();
        assert_eq!(status.holder_count, 1);
        assert_eq!(status.holders[0].fencing_token, token);
        head.release("the head");
        assert_eq!(sem.available().unwrap(), 1);
    }
    eprintln!("semaphore: link dark, lease signal ahead of the head's grant by {margins:.1?} ms");
}

#[test]
fn a_permit_removed_from_redis_is_signalled_within_a_watchdog_period_and_goes_to_the_head() {
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
        let permit = holder.fair_semaphore(&name, 1).acquire().unwrap();
        let watcher = watch(permit.lease_signal());
        let sem = waiter.fair_semaphore(&name, 1);
        let head = PermitThread::acquire(sem.clone());
        await_queue_len(&sem, 1, Duration::from_secs(5));
        // An operator removes the permit by hand: a lone hold lives in the
        // meta (the holders zset comes in with a second hold).
        let keys = semaphore_keys(&name);
        let members: Vec<String> = conn.zrange(&keys[0], 0, -1).unwrap();
        assert_eq!(members, Vec::<String>::new(), "a lone hold");
        assert_eq!(remove_counted_holds(&mut conn, &keys), 1);
        let removed = Instant::now();
        let (end, at) = watcher
            .recv_timeout(Duration::from_secs(5))
            .expect("the signal fires");
        assert_eq!(end, LeaseEnd::Lost);
        assert!(permit.is_lease_lost());
        delays.push(ms(at - removed));
        // The head's heartbeat (every 333 ms) hands it the free permit.
        let (granted, token) = head.granted_within(Duration::from_secs(3), "the head");
        assert!(token > permit.fencing_token());
        assert!(
            granted - removed < WAITER_TIMEOUT + Duration::from_secs(1),
            "the head waited {:?}",
            granted - removed
        );
        let err = permit.unlock().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
        let status = sem.status(10).unwrap();
        assert_eq!(status.holder_count, 1, "the lost permit's release freed it");
        assert_eq!(status.holders[0].fencing_token, token);
        head.release("the head");
    }
    delays.sort_by(f64::total_cmp);
    eprintln!("semaphore: permit removed -> signal (ms), watchdog period 100 ms: {delays:.1?}");
    // One period, plus a renewal's round trip, plus slack for a busy machine.
    assert!(delays[4] <= 100.0 + 400.0, "{delays:?}");
}

/// Members of the semaphore's holders (a hold, or the token beside it:
/// "#<hold>"), queue and deadlines keys, and the meta's lone hold, that
/// belong to `client`.
fn entries_of(conn: &mut redis::Connection, name: &str, client: &Client) -> Vec<String> {
    let [holders, queue, deadlines, meta] = semaphore_keys(name);
    let mine = |member: &String| {
        member
            .trim_start_matches('#')
            .starts_with(&format!("{}:", client.id()))
    };
    let mut found = Vec::new();
    for key in [holders, queue, deadlines] {
        let members: Vec<String> = conn.zrange(&key, 0, -1).unwrap();
        found.extend(
            members
                .into_iter()
                .filter(mine)
                .map(|m| format!("{key}: {m}")),
        );
    }
    // "v<format> <capacity> <used> <last> <mark or -> <token> <lease end>
    // <owner> <call> <units>" with a lone hold.
    let stored: Option<String> = conn.get(&meta).unwrap();
    if let Some(lone) = stored.as_deref().and_then(|m| m.split(' ').nth(7)) {
        if mine(&lone.to_owned()) {
            found.push(format!("{meta}: {}", stored.as_deref().unwrap()));
        }
    }
    found
}

fn keys_without_ttl(conn: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
    keys.into_iter()
        .filter(|k| conn.pttl::<_, i64>(k).unwrap() == -1)
        .collect()
}

#[test]
fn timeouts_and_cancellations_under_contention_leave_nothing_behind() {
    const N: u32 = 2;
    const CALLS: usize = 20;
    let _serial = serial();
    let server = RedisServer::start();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("semaphore: leftovers seed {seed}");
    // Contention: three threads of another client take and give back
    // permits without pause, with short holds.
    let busy = server.client();
    let stop = Arc::new(AtomicBool::new(false));
    let churn: Vec<_> = (0..3)
        .map(|_| {
            let (sem, stop) = (busy.fair_semaphore("leftovers", N), Arc::clone(&stop));
            thread::spawn(move || {
                let mut sections = 0;
                while !stop.load(Ordering::SeqCst) {
                    let permit = sem.acquire().expect("churn acquires");
                    thread::sleep(Duration::from_millis(3));
                    permit.unlock().expect("churn releases");
                    sections += 1;
                }
                sections
            })
        })
        .collect();
    // The impatient client: timed waits and cancelled ones, many of which
    // end without a permit (some in the instant one is handed over).
    let impatient = server.client();
    let callers: Vec<_> = (0..4)
        .map(|caller| {
            let sem = impatient.fair_semaphore("leftovers", N);
            let mut rng = Rng::new(seed + caller);
            thread::spawn(move || {
                let (mut got, mut without) = (0, 0);
                for call in 0..CALLS {
                    let outcome = if call % 2 == 0 {
                        sem.try_acquire_for(rng.millis(1, 30))
                    } else {
                        let cancel = WaitCanceller::new();
                        let canceller = cancel.clone();
                        let after = rng.millis(1, 30);
                        let stopper = thread::spawn(move || {
                            thread::sleep(after);
                            canceller.cancel();
                        });
                        let outcome = sem.acquire_with(Wait::forever().cancelled_by(&cancel));
                        stopper.join().unwrap();
                        outcome
                    };
                    match outcome.expect("a timed or cancelled wait") {
                        Some(permit) => {
                            got += 1;
                            permit.unlock().expect("release");
                        }
                        None => without += 1,
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
    eprintln!("semaphore: impatient calls under contention: {got} permits, {without} without");
    assert!(
        without >= 10,
        "too little contention: {without} of {} calls ended without a permit",
        4 * CALLS
    );
    // Still under contention: nothing of the impatient client is left.
    let mut conn = server.conn();
    assert_eq!(
        entries_of(&mut conn, "leftovers", &impatient),
        Vec::<String>::new()
    );
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
    let status = impatient
        .fair_semaphore("leftovers", N)
        .status(100)
        .unwrap();
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
    eprintln!("semaphore: {sections} churn sections meanwhile");
    let status = busy.fair_semaphore("leftovers", N).status(10).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
    assert_eq!(status.available(), Some(N));
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
    let [holders, queue, deadlines, _] = semaphore_keys("leftovers");
    for key in [holders, queue, deadlines] {
        let exists: bool = conn.exists(&key).unwrap();
        assert!(!exists, "{key} outlived every holder and waiter");
    }
}

#[test]
fn on_a_cluster_the_four_keys_share_a_slot_and_permits_work_on_every_master() {
    let _serial = serial();
    let cluster = RedisCluster::start();
    let (a, b) = (cluster.client(), cluster.client());
    let names = cluster.one_name_per_master("sem");
    assert_eq!(names.len(), 3, "{names:?}");
    for (&master, name) in &names {
        let keys = semaphore_keys(name);
        let slot = cluster.slot_of_lock(&keys, master);

        let sem = a.fair_semaphore(name, 2);
        let first = sem.acquire().unwrap();
        let second = b.fair_semaphore(name, 2).acquire().unwrap();
        assert!(second.fencing_token() > first.fencing_token());
        assert!(b.fair_semaphore(name, 2).try_acquire().unwrap().is_none());
        let waiter = PermitThread::acquire(b.fair_semaphore(name, 2));
        await_queue_len(&sem, 1, Duration::from_secs(5));
        // Held twice and waited for: every key exists, on that master alone.
        cluster.assert_keys_only_on(master, slot, &keys);
        let released = Instant::now();
        first.unlock().unwrap();
        let (granted, token) = waiter.granted_within(Duration::from_secs(3), "the waiter");
        assert!(token > second.fencing_token());
        eprintln!(
            "semaphore on a cluster (master {master}): handoff in {:.1} ms",
            ms(granted - released)
        );
        let status = sem.status(10).unwrap();
        assert_eq!(status.holder_count, 2);
        assert_eq!(status.last_fencing_token, Some(token));
        waiter.release("the waiter");
        second.unlock().unwrap();
        assert_eq!(sem.available().unwrap(), 2);
    }
}

#[test]
fn the_readme_acl_user_runs_every_semaphore_operation_with_nothing_denied() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "s3cret-sem");
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let url = server.url_as("fairlock", "s3cret-sem");
    let lease = Duration::from_secs(1);
    let builder = || Client::builder(&url).lease(lease).waiter_timeout(lease);
    let a = builder().build().expect("the ACL user connects");
    let b = builder().build().unwrap();

    // Take both permits, look, queue a waiter, hold past two watchdog
    // rounds (renewals and heartbeats), hand over by push message.
    let sem = a.fair_semaphore("acl-sem", 2);
    let first = sem.acquire().unwrap();
    let second = sem.try_acquire().unwrap().expect("a permit is free");
    let other = b.fair_semaphore("acl-sem", 2);
    assert!(other.try_acquire().unwrap().is_none());
    assert_eq!(other.available().unwrap(), 0);
    let waiter = PermitThread::acquire(b.fair_semaphore("acl-sem", 2));
    await_queue_len(&sem, 1, Duration::from_secs(5));
    let status = other.status(10).unwrap();
    assert_eq!((status.holder_count, status.waiters.len()), (2, 1));
    thread::sleep(lease + lease / 2);
    assert!(!first.is_lease_lost(), "renewals denied?");
    assert_eq!(sem.queue_len().unwrap(), 1, "heartbeats denied?");
    let released = Instant::now();
    first.unlock().unwrap();
    let (granted, _) = waiter.granted_within(Duration::from_secs(2), "the waiter");
    assert!(
        granted - released < Duration::from_millis(500),
        "no push message?"
    );

    // A timed-out wait and a cancelled one (each leaves the queue).
    assert!(other
        .try_acquire_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    let cancel = WaitCanceller::new();
    let canceller = cancel.clone();
    let stopper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        canceller.cancel();
    });
    assert!(other
        .acquire_with(Wait::forever().cancelled_by(&cancel))
        .unwrap()
        .is_none());
    stopper.join().unwrap();
    assert_eq!(sem.queue_len().unwrap(), 0);

    // The server forgets its scripts: loaded again, as this user, by a
    // call and by the watchdog.
    lose_scripts(&mut admin);
    thread::sleep(lease);
    assert!(!second.is_lease_lost());
    lose_scripts(&mut admin);
    waiter.release("the waiter");
    second.unlock().unwrap();
    assert_eq!(other.available().unwrap(), 2);
    drop(a);
    drop(b);
    let denials = acl_denials(&mut admin);
    assert!(denials.is_empty(), "the library was denied: {denials:?}");
}
