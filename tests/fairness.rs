//! Fairness and mutual exclusion against a real redis-server: grants follow
//! arrival order, long holds evict nobody, `try_lock` never barges, and no
//! two holders ever overlap, from 16 to 500 contending threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock_test_support::{
    assert_exclusive, create_acl_user, join_within, ms, serial, server_version, wait_until,
    HoldLog, RedisServer, Relay, Span,
};

/// Joins `handle` if it finishes by `deadline`; panics otherwise (never hangs).
fn join_by<T>(handle: JoinHandle<T>, deadline: Instant, what: &str) -> T {
    join_within(
        handle,
        deadline.saturating_duration_since(Instant::now()),
        what,
    )
}

/// Pairs (i, j), i < j, granted in the opposite order of their arrival.
fn inversions(order: &[usize]) -> usize {
    let mut count = 0;
    for i in 0..order.len() {
        for j in i + 1..order.len() {
            if order[i] > order[j] {
                count += 1;
            }
        }
    }
    count
}

/// One grant as seen inside the critical section.
#[derive(Debug, Clone, Copy)]
struct Grant {
    waiter: usize,
    token: u64,
    acquired: Instant,
    released: Instant,
}

/// Spawns a waiter thread that locks `mutex`, logs its grant (under the
/// lock), holds for `hold`, and unlocks.
fn spawn_logging_waiter(
    waiter: usize,
    mutex: fairlock::FairMutex,
    log: Arc<Mutex<Vec<Grant>>>,
    hold: Duration,
) -> JoinHandle<()> {
    thread::spawn(move || {
        let guard = mutex.lock().expect("waiter locks");
        let acquired = Instant::now();
        thread::sleep(hold);
        assert!(!guard.is_lease_lost(), "waiter {waiter} lost its lease");
        let mut grants = log.lock().unwrap();
        let released = Instant::now();
        grants.push(Grant {
            waiter,
            token: guard.fencing_token(),
            acquired,
            released,
        });
        drop(grants);
        guard.unlock().expect("waiter unlocks");
    })
}

/// Starts `count` logging waiters on `mutex`'s lock, each with a client of
/// its own from `client`, one at a time: each only once the previous one is
/// queued, so that arrival order is waiter order.
fn queue_logging_waiters(
    mutex: &fairlock::FairMutex,
    count: usize,
    client: impl Fn() -> fairlock::Client,
    log: &Arc<Mutex<Vec<Grant>>>,
) -> Vec<JoinHandle<()>> {
    (0..count)
        .map(|waiter| {
            let handle = spawn_logging_waiter(
                waiter,
                client().fair_mutex(mutex.name()),
                Arc::clone(log),
                Duration::from_millis(2),
            );
            assert!(
                wait_until(Duration::from_secs(5), || mutex.queue_len().unwrap()
                    == waiter + 1),
                "waiter {waiter} did not queue"
            );
            handle
        })
        .collect()
}

/// Checks grant order == arrival order, no overlap (the holder's hold
/// ending at its release included) and strictly increasing tokens; prints
/// the handoff latencies (previous release -> next acquisition).
fn check_fifo(grants: &[Grant], waiters: usize, holder_token: u64, holder_released: Instant) {
    let order: Vec<usize> = grants.iter().map(|g| g.waiter).collect();
    assert_eq!(
        order,
        (0..waiters).collect::<Vec<_>>(),
        "grant order differs from arrival order ({} inversions)",
        inversions(&order)
    );
    let holder = Span {
        from: holder_released,
        to: holder_released,
        token: holder_token,
    };
    let spans: Vec<Span> = std::iter::once(holder)
        .chain(grants.iter().map(|grant| Span {
            from: grant.acquired,
            to: grant.released,
            token: grant.token,
        }))
        .collect();
    assert_exclusive("the holder and its waiters", &spans);
    let mut previous_release = holder_released;
    let mut latencies = Vec::new();
    for grant in grants {
        latencies.push(grant.acquired - previous_release);
        previous_release = grant.released;
    }
    let mut sorted = latencies.clone();
    sorted.sort();
    eprintln!(
        "handoff latencies (ms): {:?}; min {:.2} median {:.2} max {:.2}",
        latencies
            .iter()
            .map(|d| (ms(*d) * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        ms(sorted[0]),
        ms(sorted[sorted.len() / 2]),
        ms(sorted[sorted.len() - 1]),
    );
}

#[test]
fn grants_follow_arrival_order_across_clients() {
    const WAITERS: usize = 10;
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = server.client();
    let mutex = holder_client.fair_mutex("fifo");
    let holder = mutex.lock().unwrap();
    let holder_token = holder.fencing_token();

    let log = Arc::new(Mutex::new(Vec::new()));
    // One client per waiter: arrival order is across clients.
    let handles = queue_logging_waiters(&mutex, WAITERS, || server.client(), &log);
    assert!(
        log.lock().unwrap().is_empty(),
        "a waiter got the lock while it was held"
    );
    assert_eq!(mutex.hold_count().unwrap(), 1);

    let released = Instant::now();
    holder.unlock().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, handle) in handles.into_iter().enumerate() {
        join_by(handle, deadline, &format!("waiter {i}"));
    }
    let grants = log.lock().unwrap().clone();
    assert_eq!(grants.len(), WAITERS);
    check_fifo(&grants, WAITERS, holder_token, released);
    assert!(!mutex.is_locked().unwrap());
    assert_eq!(mutex.queue_len().unwrap(), 0);
}

#[test]
fn a_long_hold_evicts_no_live_waiter() {
    const WAITERS: usize = 5;
    let _serial = serial();
    let server = RedisServer::start();
    let waiter_timeout = Duration::from_secs(1);
    // Lease 1 s: the holder's lease must be renewed ~15 times during the hold,
    // and every waiter heartbeated as often.
    let builder = || {
        server
            .builder()
            .lease(Duration::from_secs(1))
            .waiter_timeout(waiter_timeout)
    };
    let holder_client = builder().build().unwrap();
    let mutex = holder_client.fair_mutex("long-hold");
    let holder = mutex.lock().unwrap();
    let holder_token = holder.fencing_token();

    let log = Arc::new(Mutex::new(Vec::new()));
    // One client per waiter: arrival order is across clients.
    let handles = queue_logging_waiters(&mutex, WAITERS, || builder().build().unwrap(), &log);

    // Hold for 5 x waiter_timeout, sampling the queue all along.
    let hold_until = Instant::now() + 5 * waiter_timeout;
    let mut samples = Vec::new();
    let mut min_lease = Duration::MAX;
    while Instant::now() < hold_until {
        samples.push(mutex.queue_len().unwrap());
        let lease = mutex
            .remaining_lease()
            .unwrap()
            .expect("the holder's lock expired during the hold");
        min_lease = min_lease.min(lease);
        assert_eq!(mutex.hold_count().unwrap(), 1, "the holder lost the lock");
        assert!(
            !holder.is_lease_lost(),
            "holder's lease lost during the hold"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let evicted: Vec<_> = samples.iter().filter(|&&n| n != WAITERS).collect();
    eprintln!(
        "long hold: {} queue samples, {} != {WAITERS}; lowest remaining lease seen {:.0} ms",
        samples.len(),
        evicted.len(),
        ms(min_lease)
    );
    assert!(samples.len() > 20, "too few samples: {}", samples.len());
    assert!(
        evicted.is_empty(),
        "queue_len samples other than {WAITERS}: {evicted:?}"
    );
    assert!(
        log.lock().unwrap().is_empty(),
        "a waiter got the lock while it was held"
    );

    assert!(!holder.is_lease_lost());
    let released = Instant::now();
    holder.unlock().expect("the holder still holds after 5 s");
    let deadline = Instant::now() + Duration::from_secs(20);
    for (i, handle) in handles.into_iter().enumerate() {
        join_by(handle, deadline, &format!("waiter {i}"));
    }
    let grants = log.lock().unwrap().clone();
    assert_eq!(grants.len(), WAITERS);
    check_fifo(&grants, WAITERS, holder_token, released);
}

#[test]
fn sixteen_clients_never_overlap_on_a_read_modify_write() {
    const THREADS: usize = 16;
    const ROUNDS: usize = 100;
    let _serial = serial();
    let server = RedisServer::start();
    // Every critical section, with its token.
    let holds = HoldLog::new();
    let start = Arc::new(Barrier::new(THREADS));

    let began = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..THREADS {
        let mutex = server.client().fair_mutex("rmw");
        let mut conn = server.conn();
        let (holds, start) = (holds.clone(), Arc::clone(&start));
        handles.push(thread::spawn(move || {
            start.wait();
            for _ in 0..ROUNDS {
                let guard = mutex.lock().expect("lock");
                let from = Instant::now();
                // Deliberately not atomic: only the lock keeps this correct.
                let value: Option<u64> = redis::cmd("GET").arg("counter").query(&mut conn).unwrap();
                let () = redis::cmd("SET")
                    .arg("counter")
                    .arg(value.unwrap_or(0) + 1)
                    .query(&mut conn)
                    .unwrap();
                let to = Instant::now();
                let token = guard.fencing_token();
                guard.unlock().expect("unlock");
                holds.record("rmw", Span { from, to, token });
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, handle) in handles.into_iter().enumerate() {
        join_by(handle, deadline, &format!("thread {i}"));
    }
    let elapsed = began.elapsed();
    let counter: u64 = redis::cmd("GET")
        .arg("counter")
        .query(&mut server.conn())
        .unwrap();
    eprintln!(
        "mutual exclusion: {} locked increments in {:.2} s ({:.2} ms per handoff)",
        THREADS * ROUNDS,
        elapsed.as_secs_f64(),
        ms(elapsed) / (THREADS * ROUNDS) as f64
    );
    assert_eq!(holds.len(), THREADS * ROUNDS);
    // No two threads inside at once, fencing tokens never going backwards.
    holds.assert_exclusive();
    assert_eq!(counter, (THREADS * ROUNDS) as u64, "lost updates");
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}

/// Starts a waiter on `mutex`'s lock from a client of its own, waits until it
/// is queued, and returns its thread, a channel telling when it was granted
/// (with its token), and a sender that lets it unlock.
fn park_a_waiter(
    server: &RedisServer,
    mutex: &fairlock::FairMutex,
) -> (
    JoinHandle<()>,
    mpsc::Receiver<(Instant, u64)>,
    mpsc::Sender<()>,
) {
    let (granted_tx, granted_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let queued_before = mutex.queue_len().unwrap();
    let waiter_mutex = server.client().fair_mutex(mutex.name());
    let waiter = thread::spawn(move || {
        let guard = waiter_mutex.lock().expect("waiter locks");
        granted_tx
            .send((Instant::now(), guard.fencing_token()))
            .unwrap();
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("told to unlock");
        guard.unlock().expect("waiter unlocks");
    });
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == queued_before + 1));
    (waiter, granted_rx, done_tx)
}

#[test]
fn try_lock_never_takes_the_lock_from_a_queued_waiter() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = server.client();
    let mutex = holder_client.fair_mutex("barge");
    let barger_client = server.client();
    let barger = barger_client.fair_mutex("barge");

    // 1. Release: the lock goes straight to the queued waiter.
    let holder = mutex.lock().unwrap();
    let holder_token = holder.fencing_token();
    let (waiter, granted_rx, done_tx) = park_a_waiter(&server, &mutex);
    assert!(
        barger.try_lock().unwrap().is_none(),
        "try_lock took a held lock"
    );
    holder.unlock().unwrap();
    let barged = barger.try_lock().unwrap();
    assert!(
        barged.is_none(),
        "try_lock barged ahead of the queued waiter"
    );
    let (_, token) = granted_rx
        .recv_timeout(Duration::from_secs(3))
        .expect("waiter granted");
    assert!(token > holder_token);
    assert!(
        barger.try_lock().unwrap().is_none(),
        "try_lock took the waiter's lock"
    );
    done_tx.send(()).unwrap();
    join_by(waiter, Instant::now() + Duration::from_secs(5), "waiter");

    // 2. The lock frees without a release (its key vanishes, as on expiry):
    //    try_lock must still not take it while a live waiter is queued, and
    //    must hand it to that waiter.
    let holder = mutex.lock().unwrap();
    let (waiter, granted_rx, done_tx) = park_a_waiter(&server, &mutex);
    let mut conn = server.conn();
    let lock_keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*:lock:barge")
        .query(&mut conn)
        .unwrap();
    assert_eq!(lock_keys.len(), 1, "{lock_keys:?}");
    let deleted_at = Instant::now();
    let () = redis::cmd("DEL")
        .arg(&lock_keys[0])
        .query(&mut conn)
        .unwrap();
    assert!(
        barger.try_lock().unwrap().is_none(),
        "try_lock barged onto a free lock"
    );
    let (granted_at, token) = granted_rx
        .recv_timeout(Duration::from_secs(3))
        .expect("waiter granted");
    eprintln!(
        "lock key deleted -> waiter granted by the barger's try_lock: {:.2} ms",
        ms(granted_at - deleted_at)
    );
    assert!(token > holder.fencing_token());
    assert!(holder.unlock().unwrap_err().is_lease_lost());
    done_tx.send(()).unwrap();
    join_by(waiter, Instant::now() + Duration::from_secs(5), "waiter");

    // 3. A fixed lease running out while a third client hammers try_lock.
    let holder = mutex
        .with_fixed_lease(Duration::from_millis(300))
        .lock()
        .unwrap();
    let (waiter, granted_rx, done_tx) = park_a_waiter(&server, &mutex);
    let mut attempts = 0;
    let token = loop {
        attempts += 1;
        assert!(
            barger.try_lock().unwrap().is_none(),
            "try_lock barged at lease expiry"
        );
        if let Ok((_, token)) = granted_rx.try_recv() {
            break token;
        }
        assert!(attempts < 5000, "the waiter never got the expired lock");
        thread::sleep(Duration::from_millis(1));
    };
    eprintln!("try_lock attempts around the lease expiry, all refused: {attempts}");
    assert!(token > holder.fencing_token());
    assert!(holder.unlock().unwrap_err().is_lease_lost());
    done_tx.send(()).unwrap();
    join_by(waiter, Instant::now() + Duration::from_secs(5), "waiter");

    // With nobody queued, try_lock takes the free lock.
    assert!(wait_until(Duration::from_secs(2), || !mutex
        .is_locked()
        .unwrap()));
    let guard = barger
        .try_lock()
        .unwrap()
        .expect("try_lock takes a free lock");
    guard.unlock().unwrap();
}

#[test]
fn five_hundred_threads_on_two_locks() {
    const THREADS: usize = 500;
    const CLIENTS: usize = 10;
    let _serial = serial();
    let server = RedisServer::start();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            server
                .builder()
                .lease(Duration::from_secs(10))
                .waiter_timeout(Duration::from_secs(3))
                // 50 threads share each client's 16 connections at the start.
                .connect_timeout(Duration::from_secs(10))
                .build()
                .unwrap()
        })
        .collect();
    let counters: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    // Every critical section of each lock, with its token.
    let holds = HoldLog::new();
    let start = Arc::new(Barrier::new(THREADS + 1));

    let mut handles = Vec::new();
    for i in 0..THREADS {
        let lock = i % 2;
        let mutex = clients[(i / 2) % CLIENTS].fair_mutex(&format!("crowd-{lock}"));
        let (counters, holds, start) = (Arc::clone(&counters), holds.clone(), Arc::clone(&start));
        handles.push(thread::spawn(move || {
            start.wait();
            let guard = mutex.lock().expect("lock");
            let from = Instant::now();
            // A torn increment: only the lock keeps it exact.
            let value = counters[lock].load(Ordering::SeqCst);
            // Long enough that the others pile up in the queue.
            thread::sleep(Duration::from_millis(1));
            counters[lock].store(value + 1, Ordering::SeqCst);
            let to = Instant::now();
            let token = guard.fencing_token();
            guard.unlock().expect("unlock");
            holds.record(mutex.name(), Span { from, to, token });
        }));
    }
    start.wait();
    let began = Instant::now();
    let deadline = began + Duration::from_secs(120);
    // Watch the queues while the crowd goes through.
    let watched = [
        clients[0].fair_mutex("crowd-0"),
        clients[0].fair_mutex("crowd-1"),
    ];
    let mut longest_queue = 0;
    while !handles.iter().all(|h| h.is_finished()) && Instant::now() < deadline {
        for mutex in &watched {
            longest_queue = longest_queue.max(mutex.queue_len().unwrap());
        }
        thread::sleep(Duration::from_millis(10));
    }
    for (i, handle) in handles.into_iter().enumerate() {
        join_by(handle, deadline, &format!("thread {i}"));
    }
    let elapsed = began.elapsed();
    eprintln!(
        "500 threads on two locks done in {:.2} s; longest queue seen {longest_queue}",
        elapsed.as_secs_f64()
    );
    assert!(
        longest_queue >= 10,
        "the threads hardly contended ({longest_queue} queued at most)"
    );
    assert_eq!(holds.len(), THREADS);
    // No two threads inside one lock at once (nor its tokens going back).
    holds.assert_exclusive();
    assert_eq!(counters[0].load(Ordering::SeqCst), THREADS / 2);
    assert_eq!(counters[1].load(Ordering::SeqCst), THREADS / 2);
    for lock in 0..2 {
        let mutex = clients[0].fair_mutex(&format!("crowd-{lock}"));
        assert!(!mutex.is_locked().unwrap());
        assert_eq!(mutex.queue_len().unwrap(), 0);
    }
}

/// A restart that loses the server's data loses its queues too: the
/// waiters of one client join the queue again in the order they had (the
/// client has them poll one after another once it hears the server is
/// back), so they still get the lock in their arrival order.
#[test]
fn waiters_rejoin_a_queue_lost_with_a_restart_in_their_order() {
    rejoin_after_a_restart(false);
}

/// The same with a server that comes back from an RDB snapshot taken
/// before they queued, which it loads for about 1 s, answering `LOADING`
/// meanwhile: a waiter whose poll could not reach Redis asks again in
/// order too, none before the ones that joined ahead of it were answered
/// (before: 1, 3, 2, 0, 4 and the like, each asking again on its own
/// timer once the server had loaded its data).
#[test]
fn waiters_rejoin_a_queue_lost_with_a_restart_in_their_order_once_its_data_is_loaded() {
    rejoin_after_a_restart(true);
}

/// Five waiters of one client queued behind another client's hold, the
/// server killed and started again (after loading a snapshot taken before
/// they queued, `loading`): they get the lock in their arrival order.
fn rejoin_after_a_restart(loading: bool) {
    const WAITERS: usize = 5;
    let _serial = serial();
    let mut server = RedisServer::start_to_restart(loading);
    let holders = server.client();
    let held = holders.fair_mutex("rejoin").lock().unwrap();
    // Their patience through the outage 10 s (waiter_timeout 1 s + connect
    // timeout 9 s; was 3 s, then 5 s): the load is 10,000 sleeps of 100 µs
    // each, which a busy machine stretches (2.04 s once, and over 4 s in a
    // CI run beside the other jobs, where every waiter gave up after 5 s
    // with Redis still `LOADING`).
    let waiters = (server.builder())
        .connect_timeout(Duration::from_secs(9))
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for arrival in 0..WAITERS {
        let (mutex, order) = (waiters.fair_mutex("rejoin"), Arc::clone(&order));
        threads.push(thread::spawn(move || {
            let guard = mutex.lock().expect("the lock, after the restart");
            order.lock().unwrap().push(arrival);
            thread::sleep(Duration::from_millis(20));
            let _ = guard.unlock();
        }));
        let queued = || holders.fair_mutex("rejoin").queue_len().unwrap() == arrival + 1;
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "waiter {arrival} queued"
        );
    }
    server.restart_after(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(20);
    for thread in threads {
        join_by(thread, deadline, "a waiter");
    }
    drop(held);
    let order = order.lock().unwrap().clone();
    eprintln!("after the restart, the lock went to the waiters in the order {order:?}");
    assert_eq!(
        order,
        (0..WAITERS).collect::<Vec<_>>(),
        "the order they arrived in"
    );
}

/// Redis's count of the calls it refused with `OOM` (`INFO errorstats`).
fn refused_for_memory(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("errorstats").query(conn).unwrap();
    (info.lines())
        .find_map(|line| line.strip_prefix("errorstat_OOM:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Two waiters queued behind a hold of a 1 s fixed lease, the server over
/// its `maxmemory` (`noeviction`) when the lease runs out: the head's poll
/// is refused `OOM` before it runs (nothing changed; retryable, as an
/// outage). The waiters must ride it out as they ride out an outage, their
/// places kept, asking again 100 ms apart (as through an outage), and get
/// the lock in their order once memory allows (the limit lifted here), not
/// fail at once and give their places up.
#[test]
fn queued_waiters_ride_out_a_server_refusing_writes_for_memory() {
    if server_version().0 < 7 {
        // Redis 6.2 checks a script's memory at its first write only, and
        // the poll's first (a ZREM, not refused for memory) lets it run.
        eprintln!("skipped: redis 6.2 does not refuse this poll for memory");
        return;
    }
    let _serial = serial();
    let server = RedisServer::start();
    let holders = server.client();
    let fixed = Duration::from_secs(1);
    let held = (holders.fair_mutex("oom-queue").with_fixed_lease(fixed))
        .lock()
        .unwrap();
    // Queue entries that outlive the refusal (their heartbeats are refused too).
    let waiters = (server.builder())
        .waiter_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for arrival in 0..2 {
        let (mutex, order) = (waiters.fair_mutex("oom-queue"), Arc::clone(&order));
        threads.push(thread::spawn(move || {
            let guard = mutex.lock().map_err(|err| format!("{err}"))?;
            order.lock().unwrap().push((arrival, Instant::now()));
            thread::sleep(Duration::from_millis(20));
            guard.unlock().map_err(|err| format!("{err}"))
        }));
        let queued = || holders.fair_mutex("oom-queue").queue_len().unwrap() == arrival + 1;
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "waiter {arrival} queued"
        );
    }
    let mut conn = server.conn();
    let set = |conn: &mut redis::Connection, name: &str, value: &str| {
        let () = (redis::cmd("CONFIG").arg("SET").arg(name).arg(value))
            .query(conn)
            .unwrap();
    };
    set(&mut conn, "maxmemory-policy", "noeviction");
    set(&mut conn, "maxmemory", "1");
    let probe = redis::cmd("SET")
        .arg("oom-probe")
        .arg(1)
        .query::<()>(&mut conn);
    assert!(
        probe.is_err_and(|err| err.code() == Some("OOM")),
        "over maxmemory"
    );
    // The hold's lease runs out, and the head of the queue asks Redis for
    // the lock: refused. Then a few more refusals (its asks again, 100 ms
    // apart, once this is fixed) before memory allows.
    let before = refused_for_memory(&mut conn);
    let refused = || refused_for_memory(&mut server.conn()) > before;
    assert!(
        wait_until(Duration::from_secs(5), refused),
        "the head's poll refused"
    );
    let first = refused_for_memory(&mut conn);
    let _ = wait_until(Duration::from_secs(2), || {
        refused_for_memory(&mut server.conn()) >= first + 3
    });
    let refusals = refused_for_memory(&mut conn) - before;
    set(&mut conn, "maxmemory", "0");
    let lifted = Instant::now();
    let deadline = lifted + Duration::from_secs(10);
    let results: Vec<_> = (threads.into_iter())
        .map(|thread| join_by(thread, deadline, "a waiter"))
        .collect();
    drop(held);
    let order = order.lock().unwrap().clone();
    eprintln!(
        "{refusals} refused for memory; then {:?}, the lock went to {:?}, {:.0} ms after the limit was lifted",
        results,
        order.iter().map(|(arrival, _)| arrival).collect::<Vec<_>>(),
        order.first().map_or(f64::NAN, |(_, at)| ms(at.duration_since(lifted))),
    );
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        order
            .iter()
            .map(|(arrival, _)| *arrival)
            .collect::<Vec<_>>(),
        [0, 1],
        "the order they arrived in"
    );
}

/// The same refusal lasting: the queued call gives up after its outage
/// patience (waiter_timeout + connect_timeout: 3 s here), `Server`,
/// retryable, saying so, and leaves nothing in the queue or held once
/// memory allows again.
#[test]
fn a_queued_call_refused_for_memory_gives_up_after_its_patience_and_leaves_the_queue() {
    if server_version().0 < 7 {
        // Redis 6.2 checks a script's memory at its first write only, and
        // the poll's first (a ZREM, not refused for memory) lets it run.
        eprintln!("skipped: redis 6.2 does not refuse this poll for memory");
        return;
    }
    let _serial = serial();
    let server = RedisServer::start();
    let holders = server.client();
    let fixed = Duration::from_secs(1);
    let held = (holders.fair_mutex("oom-patience").with_fixed_lease(fixed))
        .lock()
        .unwrap();
    // The waiter's link stalls before the patience ends: its last poll is
    // cut short by the patience's end (as a slow reply on a busy machine
    // is), and the error still names the refusal, not "no reply".
    let relay = Relay::start(server.port());
    let waiters = (fairlock::Client::builder(&relay.url()))
        .waiter_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let mutex = waiters.fair_mutex("oom-patience");
    let started = Instant::now();
    let waiter = thread::spawn(move || mutex.lock().map(drop));
    let queued = || holders.fair_mutex("oom-patience").queue_len().unwrap() == 1;
    assert!(wait_until(Duration::from_secs(5), queued), "queued");
    let mut conn = server.conn();
    for (name, value) in [("maxmemory-policy", "noeviction"), ("maxmemory", "1")] {
        let () = (redis::cmd("CONFIG").arg("SET").arg(name).arg(value))
            .query(&mut conn)
            .unwrap();
    }
    // Its heartbeats refused from now on, its polls from the lease's end
    // (1 s) on; patience ends 3 s after its first refused heartbeat (a
    // watchdog period, 333 ms, at most); a poll sent into the stall at
    // 2.8 s waits past it (command timeout 1.5 s).
    thread::sleep(Duration::from_millis(2800).saturating_sub(started.elapsed()));
    relay.stall();
    let err = join_within(waiter, Duration::from_secs(10), "the waiter").unwrap_err();
    let took = started.elapsed();
    relay.resume();
    let () = (redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0"))
        .query(&mut conn)
        .unwrap();
    eprintln!("gave up after {:.0} ms: {err}", ms(took));
    assert_eq!(err.kind(), fairlock::ErrorKind::Server, "{err}");
    let said = err.to_string();
    assert!(
        err.is_retryable()
            && said.contains("gave up after 3s")
            && said.contains("its last request had no reply by then")
            && said.contains("OOM"),
        "{err}"
    );
    // The patience's 3 s, from its first refused heartbeat (a watchdog
    // period into the refusal) or, at the latest, its first refused poll
    // (the lease's end, 1 s).
    assert!(
        took > Duration::from_millis(3000) && took < Duration::from_secs(6),
        "{took:?}"
    );
    drop(held);
    let gone = || {
        let status = holders.fair_mutex("oom-patience").status(10).unwrap();
        status.queue_len == 0 && status.holder().is_none()
    };
    assert!(
        wait_until(Duration::from_secs(5), gone),
        "nothing left queued or held"
    );
}

/// Two lock calls of `waiters` on `name`, each seen queued in Redis
/// (behind `holders`' hold) before the next starts.
fn two_queued(
    waiters: &fairlock::Client,
    holders: &fairlock::Client,
    name: &str,
) -> Vec<JoinHandle<fairlock::Result<()>>> {
    (1..=2)
        .map(|queued| {
            let mutex = waiters.fair_mutex(name);
            let call = thread::spawn(move || mutex.lock().map(drop));
            let seen = || holders.fair_mutex(name).queue_len().unwrap() == queued;
            assert!(wait_until(Duration::from_secs(5), seen), "queued");
            call
        })
        .collect()
}

/// Has Redis refuse the waiters' requests (`refuse`) while `calls` wait,
/// waits 10 s at most for them all to end, lifts the refusal (`lift`), and
/// returns whether they had ended, how long into the refusal, and each
/// call's outcome.
fn end_in_refusal(
    calls: Vec<JoinHandle<fairlock::Result<()>>>,
    refuse: impl FnOnce(),
    lift: impl FnOnce(),
) -> (bool, Duration, Vec<fairlock::Result<()>>) {
    refuse();
    let refused = Instant::now();
    let ended = wait_until(Duration::from_secs(10), || {
        calls.iter().all(|call| call.is_finished())
    });
    let took = refused.elapsed();
    lift();
    let outcomes: Vec<_> = (calls.into_iter())
        .map(|call| join_within(call, Duration::from_secs(10), "a queued call"))
        .collect();
    for (place, outcome) in outcomes.iter().enumerate() {
        let said = outcome.as_ref().map_err(ToString::to_string);
        eprintln!("queued {place}: {said:?}");
    }
    (ended, took, outcomes)
}

/// The same refusal lasting, with a second call queued behind the first:
/// not the head, it asks only when told, and the heartbeats that keep its
/// place are refused too (`OOM`, each reply of the watchdog's pipeline).
/// Its patience counts from its first refused heartbeat, as from a
/// heartbeat that cannot reach Redis: it gives up as the head does (both
/// within about 3 s, the patience, of the refusals' start), rather than
/// wait for as long as the refusal lasts (before: it still waited 10 s
/// in, and would have for good), and nothing is left once memory allows.
/// Their link is slow (60 ms each way) from the refusal on, so the last
/// request of the call behind, sent once its patience is over, is cut
/// short (as a reply on a busy machine is): its error still names what
/// Redis said to its heartbeats (before: "nothing it sent had a reply",
/// a timeout, while every heartbeat had been answered `OOM`).
#[test]
fn a_call_queued_behind_the_head_gives_up_after_its_patience_when_its_heartbeats_are_refused() {
    if server_version().0 < 7 {
        eprintln!("skipped: redis 6.2 does not refuse this poll for memory");
        return;
    }
    let _serial = serial();
    let server = RedisServer::start();
    let holders = server.client();
    let fixed = Duration::from_secs(1);
    let held = (holders.fair_mutex("oom-behind").with_fixed_lease(fixed))
        .lock()
        .unwrap();
    // Heartbeats every 333 ms (min(lease 2 s, waiter timeout 1 s) / 3);
    // patience 3 s.
    let relay = Relay::start(server.port());
    let waiters = (fairlock::Client::builder(&relay.url()))
        .waiter_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let calls = two_queued(&waiters, &holders, "oom-behind");
    let config = |name: &str, value: &str| {
        let () = (redis::cmd("CONFIG").arg("SET").arg(name).arg(value))
            .query(&mut server.conn())
            .unwrap();
    };
    let refuse = || {
        config("maxmemory-policy", "noeviction");
        config("maxmemory", "1");
        relay.set_delay(Duration::from_millis(60));
    };
    let (ended, took, outcomes) = end_in_refusal(calls, refuse, || config("maxmemory", "0"));
    assert!(
        ended,
        "a queued call still waited {took:?} into the refusal: {outcomes:?}"
    );
    eprintln!("both gave up {:.0} ms after the refusals began", ms(took));
    for outcome in outcomes {
        let err = outcome.expect_err("refused throughout");
        assert_eq!(err.kind(), fairlock::ErrorKind::Server, "{err}");
        let said = err.to_string();
        assert!(
            err.is_retryable() && said.contains("gave up after 3s") && said.contains("OOM"),
            "{err}"
        );
    }
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(held);
    let gone = || {
        let status = holders.fair_mutex("oom-behind").status(10).unwrap();
        status.queue_len == 0 && status.holder().is_none()
    };
    assert!(
        wait_until(Duration::from_secs(5), gone),
        "nothing left queued or held"
    );
}

/// Two calls queued when Redis starts refusing this client's calls for
/// good (an ACL change takes the lock's keys from its user): the head's
/// poll fails with what Redis said (`Permission`); the call behind it asks
/// only when told, and its heartbeats are refused the same way (a reply of
/// the watchdog's pipeline). It must not wait for as long as the refusal
/// lasts: its client has it ask, and it fails as the head did (before, it
/// still waited 10 s in, and would have for good).
#[test]
fn a_call_queued_behind_the_head_whose_heartbeats_are_refused_for_good_ends_saying_why() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "refused-for-good");
    let holders = server.client();
    let fixed = Duration::from_secs(1);
    let held = (holders.fair_mutex("refused-behind").with_fixed_lease(fixed))
        .lock()
        .unwrap();
    let waiters = fairlock::Client::builder(&server.url_as("fairlock", "refused-for-good"))
        .waiter_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let calls = two_queued(&waiters, &holders, "refused-behind");
    let keys = |rule: &str| {
        let () = (redis::cmd("ACL").arg("SETUSER").arg("fairlock").arg(rule))
            .query(&mut server.conn())
            .unwrap();
    };
    let (ended, took, outcomes) =
        end_in_refusal(calls, || keys("resetkeys"), || keys("~fairlock:*"));
    assert!(
        ended,
        "a queued call still waited {took:?} into the refusal: {outcomes:?}"
    );
    eprintln!("both ended {:.0} ms after the refusals began", ms(took));
    for outcome in outcomes {
        let err = outcome.expect_err("refused throughout");
        assert_eq!(err.kind(), fairlock::ErrorKind::Permission, "{err}");
    }
    drop(held);
    let next = holders.fair_mutex("refused-behind");
    let taken = next.try_lock_for(Duration::from_secs(5)).unwrap();
    assert!(
        taken.is_some(),
        "the lock is taken again once its waiters are gone"
    );
}

/// What one waiter of [`counted_rejoin_after_a_restart`] asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Counted {
    Permit,
    Read,
    Write,
}

/// The same as `waiters_rejoin_a_queue_lost_with_a_restart_in_their_order`
/// for the counted engine's kinds: a semaphore of 2 (both permits held by
/// another client) and a rwlock (its write held), with waiters of one
/// client that hold a little each; after the restart they are let in in
/// their arrival order (by token), never more than the permits at once nor
/// a write beside anything, and the lost holds are told.
#[test]
fn counted_waiters_rejoin_a_queue_lost_with_a_restart_in_their_order() {
    use Counted::*;
    for loading in [false, true] {
        counted_rejoin_after_a_restart(loading, &[Permit; 5]);
        counted_rejoin_after_a_restart(loading, &[Write, Read, Read, Write, Read, Write]);
    }
}

fn counted_rejoin_after_a_restart(loading: bool, asks: &[Counted]) {
    let _serial = serial();
    let mut server = RedisServer::start_to_restart(loading);
    let semaphore = asks[0] == Counted::Permit;
    let name = "counted-rejoin";
    let holders = server.client();
    let held: Vec<fairlock::AnyGuard> = match semaphore {
        true => (0..2)
            .map(|_| {
                holders
                    .fair_semaphore(name, 2)
                    .acquire()
                    .unwrap()
                    .into_any()
            })
            .collect(),
        false => vec![holders.fair_rwlock(name).write().unwrap().into_any()],
    };
    let queue_len = || match semaphore {
        true => holders.fair_semaphore(name, 2).queue_len().unwrap(),
        false => holders.fair_rwlock(name).queue_len().unwrap(),
    };
    let waiters = (server.builder())
        .connect_timeout(Duration::from_secs(9))
        .build()
        .unwrap();
    // Units inside: a permit or a read 1, a write 1000.
    let inside = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for (arrival, &ask) in asks.iter().enumerate() {
        let (client, grants, inside) = (waiters.clone(), Arc::clone(&grants), Arc::clone(&inside));
        threads.push(thread::spawn(move || {
            let guard = match ask {
                Counted::Permit => client
                    .fair_semaphore(name, 2)
                    .acquire()
                    .map(|g| g.into_any()),
                Counted::Read => client.fair_rwlock(name).read().map(|g| g.into_any()),
                Counted::Write => client.fair_rwlock(name).write().map(|g| g.into_any()),
            }
            .expect("held after the restart");
            let units = if ask == Counted::Write { 1000 } else { 1 };
            let with = inside.fetch_add(units, Ordering::SeqCst) + units;
            grants
                .lock()
                .unwrap()
                .push((guard.fencing_token(), arrival, with));
            thread::sleep(Duration::from_millis(30));
            inside.fetch_sub(units, Ordering::SeqCst);
            let lost = guard.is_lease_lost();
            (lost, guard.unlock().map_err(|err| err.kind()))
        }));
        let queued = || queue_len() == arrival + 1;
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "waiter {arrival} queued"
        );
    }
    server.restart_after(Duration::from_secs(1));
    for guard in &held {
        let end = guard.lease_signal().wait_timeout(Duration::from_secs(10));
        assert_eq!(
            end,
            Some(fairlock::LeaseEnd::Lost),
            "a hold lost with the restart"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for thread in threads {
        let (lost, unlocked) = join_by(thread, deadline, "a waiter");
        assert!(
            !lost && unlocked.is_ok(),
            "a waiter's hold: lost {lost}, {unlocked:?}"
        );
    }
    drop(held);
    let mut grants = grants.lock().unwrap().clone();
    grants.sort();
    eprintln!("after the restart (loading: {loading}), {asks:?} let in as (token, arrival, units inside) {grants:?}");
    let most = if semaphore { 2 } else { 1000 };
    assert!(
        grants.iter().all(|&(_, _, with)| with <= most),
        "too many inside at once: {grants:?}"
    );
    let order: Vec<usize> = grants.iter().map(|&(_, arrival, _)| arrival).collect();
    assert_eq!(
        order,
        (0..asks.len()).collect::<Vec<_>>(),
        "the order they arrived in"
    );
}
