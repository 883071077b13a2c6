//! The client API of `FairSemaphore` against a real redis-server: N never
//! exceeded (16 clients x 100 sections, tokens numbered in grant order),
//! grants in arrival order and tokens increasing along a handoff chain, `try_acquire` never ahead of a queued
//! waiter, timeouts and cancellation leaving nothing, a killed holder's
//! permit going to the head, the watchdog renewing permits and keeping
//! waiters, fencing order, a permits mismatch, every key's TTL, and the
//! permits changed with waiters queued (admitted in order as they fit,
//! holders kept on a shrink, a queued call for more refused at once).
//! Killed waiters, lost leases, cancellation under contention:
//! tests/faults/counted.rs; Redis Cluster: tests/cluster.rs; the ACL user:
//! tests/security.rs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::{Capacity, Client, ErrorKind, FairSemaphore, SemaphorePermit, Wait, WaitCanceller};
use fairlock_test_support::{
    info_field, join_within, ms, script_calls, serial, wait_until, Held, HolderChild, RedisServer,
    Relay,
};
use redis::Commands;

/// The child process binary (tests/support/child/), built for these tests.
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

fn keys_without_ttl(conn: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
    keys.into_iter()
        .filter(|k| conn.pttl::<_, i64>(k).unwrap() == -1)
        .collect()
}

/// A client with a short lease (renewed every 100 ms).
fn short_lease_client(server: &RedisServer) -> Client {
    server
        .builder()
        .lease(Duration::from_millis(300))
        .waiter_timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

/// Waits (at most 5 s) until `sem` has `n` live waiters queued.
fn await_queue_len(sem: &FairSemaphore, n: usize) {
    assert!(
        wait_until(Duration::from_secs(5), || sem.queue_len().unwrap() == n),
        "queue never reached {n} (now {})",
        sem.queue_len().unwrap()
    );
}

/// A thread that acquires a permit of `sem` and reports its token, then
/// holds it until `release` says so (or at once if `release` is `None`).
fn spawn_acquirer(
    sem: FairSemaphore,
    release: Option<mpsc::Receiver<()>>,
) -> (JoinHandle<u64>, mpsc::Receiver<u64>) {
    let (got_tx, got) = mpsc::channel();
    let handle = thread::spawn(move || {
        let permit = sem.acquire().expect("acquire");
        let token = permit.fencing_token();
        got_tx.send(token).unwrap();
        if let Some(release) = release {
            let _ = release.recv();
        }
        permit.unlock().expect("release");
        token
    });
    (handle, got)
}

/// One critical section of the N-holders test: when its acquire was
/// asked for and when its release had returned (on one shared counter),
/// its worker and its token.
#[derive(Debug, Clone, Copy)]
struct Section {
    asked: u64,
    released: u64,
    worker: usize,
    token: u64,
}

#[test]
fn n_is_never_exceeded_by_16_clients_of_100_sections() {
    const N: usize = 3;
    const CLIENTS: usize = 16;
    const SECTIONS: usize = 100;
    let _serial = serial();
    let server = RedisServer::start();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    // Orders the asks and releases of every worker against each other.
    let clock = Arc::new(AtomicU64::new(0));
    let sections = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(CLIENTS));
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|worker| {
            let client = server.client();
            let (inside, most, clock, sections, start) = (
                Arc::clone(&inside),
                Arc::clone(&most),
                Arc::clone(&clock),
                Arc::clone(&sections),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                let sem = client.fair_semaphore("bounded", N as u32);
                start.wait();
                for _ in 0..SECTIONS {
                    let asked = clock.fetch_add(1, Ordering::SeqCst);
                    let permit = sem.acquire().expect("acquire");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= N, "{now} holders inside, N = {N}");
                    thread::sleep(Duration::from_micros(500));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    let token = permit.fencing_token();
                    permit.unlock().expect("release");
                    let released = clock.fetch_add(1, Ordering::SeqCst);
                    sections.lock().unwrap().push(Section {
                        asked,
                        released,
                        worker,
                        token,
                    });
                }
            })
        })
        .collect();
    for worker in workers {
        join_within(worker, Duration::from_secs(120), "a worker");
    }
    let took = started.elapsed();
    let most = most.load(Ordering::SeqCst);
    eprintln!("{CLIENTS} clients x {SECTIONS} sections, N = {N}: {took:?}, at most {most} inside");
    assert!(most <= N, "{most} holders at once");
    assert_eq!(most, N, "the N permits were never all in use at once");
    let sections = sections.lock().unwrap().clone();
    assert_eq!(sections.len(), CLIENTS * SECTIONS);
    let mut tokens: Vec<u64> = sections.iter().map(|s| s.token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), sections.len(), "a token was issued twice");
    // Each worker's tokens increase (its sections were granted in turn) ...
    for worker in 0..CLIENTS {
        let mine: Vec<u64> = sections
            .iter()
            .filter(|s| s.worker == worker)
            .map(|s| s.token)
            .collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "worker {worker}'s tokens: {mine:?}"
        );
    }
    // ... and a section asked for after another was released has a larger
    // token: grants are numbered in the order they happen.
    let mut by_release = sections.clone();
    by_release.sort_unstable_by_key(|s| s.released);
    let mut by_ask = sections;
    by_ask.sort_unstable_by_key(|s| s.asked);
    let (mut next, mut largest_released) = (0, None::<Section>);
    for later in &by_ask {
        while next < by_release.len() && by_release[next].released < later.asked {
            if largest_released.is_none_or(|l| by_release[next].token > l.token) {
                largest_released = Some(by_release[next]);
            }
            next += 1;
        }
        if let Some(earlier) = largest_released {
            assert!(
                earlier.token < later.token,
                "{later:?} was asked for after {earlier:?} was released"
            );
        }
    }
}

#[test]
fn waiters_from_separate_clients_are_granted_in_arrival_order() {
    let server = RedisServer::start();
    let holder = server.client();
    let sem = holder.fair_semaphore("fifo", 2);
    let first = sem.acquire().unwrap();
    let second = sem.acquire().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    let waiters: Vec<_> = (0..8)
        .map(|waiter| {
            let client = server.client();
            let mine = client.fair_semaphore("fifo", 2);
            clients.push(client);
            let log = Arc::clone(&log);
            let handle = thread::spawn(move || {
                let permit = mine.acquire().expect("waiter acquires");
                log.lock().unwrap().push((permit.fencing_token(), waiter));
                thread::sleep(Duration::from_millis(20));
                permit.unlock().expect("waiter releases");
            });
            // Each starts once the previous one is queued.
            await_queue_len(&sem, waiter + 1);
            handle
        })
        .collect();
    first.unlock().unwrap();
    second.unlock().unwrap();
    for waiter in waiters {
        join_within(waiter, Duration::from_secs(30), "a waiter");
    }
    let mut grants = log.lock().unwrap().clone();
    // Tokens are issued in grant order (by the scripts, one at a time).
    grants.sort_unstable();
    let order: Vec<usize> = grants.iter().map(|&(_, waiter)| waiter).collect();
    assert_eq!(order, (0..8).collect::<Vec<_>>(), "grants: {grants:?}");
}

#[test]
fn try_acquire_never_goes_ahead_of_a_queued_waiter() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let c = server.client();
    let sem = a.fair_semaphore("no-barging", 2);
    let one = sem.acquire().unwrap();
    let two = sem.acquire().unwrap();
    let (release_tx, release_rx) = mpsc::channel();
    let (waiter, got) = spawn_acquirer(b.fair_semaphore("no-barging", 2), Some(release_rx));
    await_queue_len(&sem, 1);
    let other = c.fair_semaphore("no-barging", 2);
    assert!(other.try_acquire().unwrap().is_none());
    // The freed permit goes to the queued waiter, not to a try.
    one.unlock().unwrap();
    let token = got
        .recv_timeout(Duration::from_secs(5))
        .expect("handed over");
    assert!(token > two.fencing_token());
    assert!(other.try_acquire().unwrap().is_none(), "both permits held");
    assert_eq!(sem.available().unwrap(), 0);
    release_tx.send(()).unwrap();
    join_within(waiter, Duration::from_secs(5), "the waiter");
    let taken = other.try_acquire().unwrap().expect("a permit is free now");
    assert!(taken.fencing_token() > token);
    assert_eq!(sem.available().unwrap(), 0);
    drop(two);
    assert_eq!(sem.available().unwrap(), 1);
    drop(taken);
    assert_eq!(sem.available().unwrap(), 2);
}

#[test]
fn try_acquire_for_times_out_leaving_no_queue_entry() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let held = a.fair_semaphore("timeout", 1).acquire().unwrap();
    let sem = b.fair_semaphore("timeout", 1);
    let started = Instant::now();
    assert!(sem
        .try_acquire_for(Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    let status = sem.status(10).unwrap();
    assert_eq!(status.queue_len, 0);
    assert!(status.waiters.is_empty());
    let mut conn = server.conn();
    let entries: usize = conn
        .zcard(format!("fairlock:{}:semq:timeout", tag_of("timeout")))
        .unwrap();
    assert_eq!(entries, 0, "the queue entry was left behind");
    // Cancellation leaves nothing either.
    let cancel = WaitCanceller::new();
    let canceller = cancel.clone();
    let stopper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        canceller.cancel();
    });
    assert!(sem
        .acquire_with(Wait::forever().cancelled_by(&cancel))
        .unwrap()
        .is_none());
    stopper.join().unwrap();
    assert_eq!(sem.queue_len().unwrap(), 0);
    held.unlock().unwrap();
    assert_eq!(sem.available().unwrap(), 1);
}

/// The `{tag}` of a name's keys.
fn tag_of(name: &str) -> String {
    let digest = sha1_smol::Sha1::from(name).digest().to_string();
    format!("{{{}}}", &digest[..16])
}

#[test]
fn a_killed_holders_permit_goes_to_the_head_when_its_lease_runs_out() {
    let server = RedisServer::start();
    let mut child = HolderChild::start(
        CHILD,
        &server.url(),
        "killed",
        Duration::from_millis(1000),
        Held::Permit(1),
    );
    let child_token = child.token_within(Duration::from_secs(10));
    let client = server.client();
    let sem = client.fair_semaphore("killed", 1);
    let (waiter, got) = spawn_acquirer(sem.clone(), None);
    await_queue_len(&sem, 1);
    let killed = child.kill();
    let token = got
        .recv_timeout(Duration::from_secs(5))
        .expect("the head got the dead holder's permit");
    let waited = killed.elapsed();
    assert!(token > child_token);
    // The lease (1 s) runs out, then the head takes the permit: no later
    // than the lease and a poll's slack.
    assert!(waited < Duration::from_millis(2500), "{waited:?}");
    join_within(waiter, Duration::from_secs(5), "the waiter");
}

#[test]
fn the_watchdog_renews_permits_and_keeps_waiters_queued() {
    let server = RedisServer::start();
    let a = short_lease_client(&server);
    let b = short_lease_client(&server);
    let sem = a.fair_semaphore("renewed", 1);
    let permit = sem.acquire().unwrap();
    let (release_tx, release_rx) = mpsc::channel();
    let (waiter, got) = spawn_acquirer(b.fair_semaphore("renewed", 1), Some(release_rx));
    await_queue_len(&sem, 1);
    // Many leases and waiter timeouts long: renewals and heartbeats keep both.
    thread::sleep(Duration::from_millis(1500));
    assert!(!permit.is_lease_lost());
    let status = sem.status(10).unwrap();
    assert_eq!(status.holder_count, 1);
    assert_eq!(status.holders[0].fencing_token, permit.fencing_token());
    assert_eq!(status.queue_len, 1, "the waiter kept its place");
    assert!(got.try_recv().is_err(), "the waiter got a held permit");
    let signal = permit.lease_signal();
    let token = permit.fencing_token();
    permit.unlock().unwrap();
    assert_eq!(signal.ended(), Some(fairlock::LeaseEnd::Released));
    let next = got
        .recv_timeout(Duration::from_secs(2))
        .expect("handed over");
    assert!(next > token);
    // The granted waiter's permit is renewed too.
    thread::sleep(Duration::from_millis(900));
    assert_eq!(sem.status(10).unwrap().holders[0].fencing_token, next);
    release_tx.send(()).unwrap();
    join_within(waiter, Duration::from_secs(5), "the waiter");
}

#[test]
fn a_same_client_waiter_is_woken_by_the_release_reply() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.fair_semaphore("same-client", 1);
    let permit = sem.acquire().unwrap();
    let (waiter, got) = spawn_acquirer(sem.clone(), None);
    await_queue_len(&sem, 1);
    let released = Instant::now();
    permit.unlock().unwrap();
    got.recv_timeout(Duration::from_secs(2))
        .expect("handed over");
    assert!(released.elapsed() < Duration::from_millis(500));
    join_within(waiter, Duration::from_secs(5), "the waiter");
}

#[test]
fn fencing_tokens_increase_across_clients() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let mut last = 0;
    for i in 0..40 {
        let client = if i % 2 == 0 { &a } else { &b };
        let permit = client.fair_semaphore("fenced", 2).acquire().unwrap();
        assert!(permit.fencing_token() > last, "token went backwards");
        last = permit.fencing_token();
        if i % 3 == 0 {
            // Two permits at once: the second still gets a larger token.
            let more = client.fair_semaphore("fenced", 2).acquire().unwrap();
            assert!(more.fencing_token() > last);
            last = more.fencing_token();
        }
    }
}

/// A permit a test holds in the handoff chain below: one of its own, or
/// one a waiter thread holds until told to release.
enum ChainPermit {
    Own(SemaphorePermit),
    Waiter(usize),
}

#[test]
fn tokens_increase_in_grant_order_along_a_handoff_chain_of_three_permits() {
    const N: u32 = 3;
    const WAITERS: usize = 9;
    let server = RedisServer::start();
    let holder = server.client();
    let sem = holder.fair_semaphore("chain", N);
    let mut held: VecDeque<ChainPermit> = (0..N)
        .map(|_| ChainPermit::Own(sem.acquire().unwrap()))
        .collect();
    let mut last = match held.back() {
        Some(ChainPermit::Own(permit)) => permit.fencing_token(),
        _ => unreachable!(),
    };
    // Every third waiter shares the holder's client (woken by the release
    // reply); the others have clients of their own (woken by a message).
    let mut clients = Vec::new();
    let (granted_tx, granted) = mpsc::channel();
    let mut releases = Vec::new();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|waiter| {
            let mine = if waiter % 3 == 0 {
                sem.clone()
            } else {
                let client = server.client();
                let mine = client.fair_semaphore("chain", N);
                clients.push(client);
                mine
            };
            let granted = granted_tx.clone();
            let (release, told) = mpsc::channel::<()>();
            releases.push(release);
            let handle = thread::spawn(move || {
                let permit = mine.acquire().expect("waiter acquires");
                granted.send((waiter, permit.fencing_token())).unwrap();
                told.recv_timeout(Duration::from_secs(30))
                    .expect("waiter told to release");
                permit.unlock().expect("waiter releases");
            });
            await_queue_len(&sem, waiter + 1);
            handle
        })
        .collect();
    let free_oldest = |held: &mut VecDeque<ChainPermit>| match held.pop_front().unwrap() {
        ChainPermit::Own(permit) => permit.unlock().unwrap(),
        ChainPermit::Waiter(waiter) => releases[waiter].send(()).unwrap(),
    };
    let mut next = 0;
    while next < WAITERS {
        // One permit freed at a time, then (from the fourth on) two at
        // once: either way the head of the queue is granted first, with
        // the next token.
        let freed = if next < 3 || next + 1 == WAITERS {
            1
        } else {
            2
        };
        for _ in 0..freed {
            free_oldest(&mut held);
        }
        let mut grants: Vec<(usize, u64)> = (0..freed)
            .map(|_| {
                granted
                    .recv_timeout(Duration::from_secs(5))
                    .expect("a freed permit was handed over")
            })
            .collect();
        grants.sort_unstable_by_key(|&(_, token)| token);
        for (waiter, token) in grants {
            assert_eq!(waiter, next, "grant out of queue order (token {token})");
            assert!(token > last, "token {token} after {last}");
            last = token;
            held.push_back(ChainPermit::Waiter(waiter));
            next += 1;
        }
        let status = sem.status(0).unwrap();
        assert_eq!(status.holder_count, N as usize);
        assert_eq!(status.queue_len, WAITERS - next);
        assert_eq!(status.last_fencing_token, Some(last));
    }
    while !held.is_empty() {
        free_oldest(&mut held);
    }
    for waiter in waiters {
        join_within(waiter, Duration::from_secs(10), "a waiter");
    }
    assert_eq!(sem.available().unwrap(), N);
}

#[test]
fn handles_with_different_permits_get_a_permits_mismatch() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let held = a.fair_semaphore("disagree", 3).acquire().unwrap();
    let other = b.fair_semaphore("disagree", 4);
    let err = other.try_acquire().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermitsMismatch, "{err}");
    let err = other.acquire().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermitsMismatch, "{err}");
    let err = other
        .try_acquire_for(Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermitsMismatch, "{err}");
    // It names the semaphore once, how long its number lasts and how to
    // change it.
    let text = err.to_string();
    assert_eq!(text.matches("\"disagree\"").count(), 1, "{text}");
    assert!(
        text.starts_with("acquire of semaphore \"disagree\": "),
        "{text}"
    );
    assert!(
        text.contains("this call says 4, the semaphore has 3"),
        "{text}"
    );
    assert!(
        text.contains("for 600s (the fence life) after its last use"),
        "{text}"
    );
    assert!(
        text.contains("set_permits (`fairlock permits NAME N`)"),
        "{text}"
    );
    let status = a.fair_semaphore("disagree", 3).status(10).unwrap();
    assert_eq!(status.capacity, Capacity::Permits(3));
    assert_eq!(status.holder_count, 1);
    assert_eq!(status.queue_len, 0, "a refused call queued");
    drop(held);
    // Bad handles are refused before any I/O.
    for permits in [0, fairlock::MAX_PERMITS + 1] {
        let err = a.fair_semaphore("bad", permits).acquire().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
    }
    let err = a.fair_semaphore("", 2).try_acquire().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidName, "{err}");
}

/// The library's warnings in this test process that name `needle` (a
/// logger of the process, installed by the first call).
pub(crate) fn warnings(needle: &str) -> Vec<String> {
    struct Capture(Mutex<Vec<String>>);
    impl log::Log for Capture {
        fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
            metadata.level() <= log::Level::Warn
        }
        fn log(&self, record: &log::Record<'_>) {
            self.0.lock().unwrap().push(record.args().to_string());
        }
        fn flush(&self) {}
    }
    static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));
    if log::set_logger(&CAPTURE).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let lines = CAPTURE.0.lock().unwrap();
    lines
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

#[test]
fn a_handle_reads_the_number_set_by_set_permits_from_its_acquire_replies_at_no_cost() {
    warnings("");
    let server = RedisServer::start();
    let (admin, a, b) = (server.client(), server.client(), server.client());
    admin
        .fair_semaphore("exports-36", 5)
        .set_permits(5)
        .unwrap();
    let exports = a.fair_semaphore("exports-36", 3);
    assert_eq!(
        exports.permits_in_force(),
        3,
        "no call has seen the semaphore yet"
    );
    // A hold's reply says 5 are in force, and 5 holds are admitted at once
    // through a handle of 3 (as on main, where nothing said so).
    let mut held: Vec<SemaphorePermit> = (0..5).map(|_| exports.acquire().unwrap()).collect();
    assert_eq!(exports.permits_in_force(), 5);
    assert_eq!(exports.permits(), 3, "the handle's own number is kept");
    // Its client said so in the log once, not once per call.
    let said = warnings("semaphore \"exports-36\"");
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("5 permits in force (set with set_permits), this handle says 3")
            && said[0].contains("600s (the fence life)"),
        "{said:?}"
    );
    // A refusal's reply says so too, to another client's handle.
    let other = b.fair_semaphore("exports-36", 3);
    assert!(other.try_acquire().unwrap().is_none(), "5 held of 5");
    assert_eq!(other.permits_in_force(), 5);
    // So does a queued call's first reply.
    let queued = other.try_acquire_for(Duration::from_millis(100)).unwrap();
    assert!(queued.is_none());
    assert_eq!(other.permits_in_force(), 5);
    assert_eq!(
        warnings("\"exports-36\"").len(),
        2,
        "once more, by the other client"
    );
    // Any handle of the client reads the number its calls found.
    assert_eq!(b.fair_semaphore("exports-36", 5).permits_in_force(), 5);
    // Another semaphore of the client is not concerned.
    assert_eq!(a.fair_semaphore("imports", 3).permits_in_force(), 3);
    held.clear();

    // The number rides in the replies at no cost: a cycle is two script
    // calls (round trips) running the same commands inside, whether the
    // call's number is in force or another is.
    let mut conn = server.conn();
    let client = server
        .builder()
        .lease(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut cost = |sem: &FairSemaphore| {
        let calls = script_calls(&mut conn);
        let commands = info_field(&mut conn, "stats", "total_commands_processed");
        for _ in 0..20 {
            sem.acquire().unwrap().unlock().unwrap();
        }
        let commands = info_field(&mut conn, "stats", "total_commands_processed") - commands;
        (script_calls(&mut conn) - calls, commands)
    };
    let (own, set) = (
        client.fair_semaphore("exports-36", 5),
        client.fair_semaphore("exports-36", 3),
    );
    // The least of three windows: the watchdog's round may renew a hold
    // in one (two commands more), on a loaded machine once in a while.
    let mut least = |sem: &FairSemaphore| (0..3).map(|_| cost(sem)).min().unwrap();
    let (own, set) = (least(&own), least(&set));
    eprintln!(
        "20 cycles: (script calls, commands) {own:?} with the call's number, {set:?} with another"
    );
    assert_eq!(own.0, 40, "two round trips a cycle");
    assert_eq!(set, own, "the number in force is another");
    assert_eq!(
        warnings("\"exports-36\"").len(),
        3,
        "once by the third client"
    );
    assert_eq!(client.fair_semaphore("exports-36", 3).permits_in_force(), 5);
}

#[test]
fn the_number_in_force_a_handle_reads_lapses_with_the_number_set() {
    let server = RedisServer::start();
    let short = || {
        let builder = server.builder().fence_life(fairlock::MIN_FENCE_LIFE);
        builder.build().unwrap()
    };
    let (admin, client) = (short(), short());
    admin.fair_semaphore("lapse-36", 5).set_permits(5).unwrap();
    let sem = client.fair_semaphore("lapse-36", 3);
    sem.acquire().unwrap().unlock().unwrap();
    assert_eq!(sem.permits_in_force(), 5);
    // Unused for a fence life, the semaphore starts again with its next
    // caller's number, and its reply says nothing more.
    let gone = || sem.status(0).unwrap().capacity == Capacity::Unknown;
    assert!(
        wait_until(Duration::from_secs(10), gone),
        "the meta outlived its fence life"
    );
    sem.acquire().unwrap().unlock().unwrap();
    assert_eq!(sem.permits_in_force(), 3);
    assert_eq!(sem.status(0).unwrap().capacity, Capacity::Permits(3));
}

#[test]
fn the_semaphore_and_the_mutex_of_a_name_are_separate_locks() {
    let server = RedisServer::start();
    let client = server.client();
    let guard = client.fair_mutex("shared-name").lock().unwrap();
    let permit = client
        .fair_semaphore("shared-name", 1)
        .try_acquire()
        .unwrap()
        .expect("the mutex does not hold the semaphore");
    drop(permit);
    drop(guard);
}

#[test]
fn every_key_has_a_ttl_once_all_are_released() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let mut conn = server.conn();
    let sem = a.fair_semaphore("expiring", 1);
    let permit = sem.acquire().unwrap();
    let (waiter, got) = spawn_acquirer(b.fair_semaphore("expiring", 1), None);
    await_queue_len(&sem, 1);
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
    permit.unlock().unwrap();
    got.recv_timeout(Duration::from_secs(5)).unwrap();
    join_within(waiter, Duration::from_secs(5), "the waiter");
    let timed_out = sem.try_acquire_for(Duration::from_millis(50)).unwrap();
    drop(timed_out);
    let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
    assert!(
        !keys.is_empty(),
        "the meta (permits, last token) stays a while"
    );
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
}

#[test]
fn a_large_request_at_the_head_is_never_passed_and_those_behind_that_fit_enter_with_it() {
    let server = RedisServer::start();
    let (holder, big, small) = (server.client(), server.client(), server.client());
    let sem = holder.fair_semaphore("weighted", 4);
    let three = sem.acquire_many(3).unwrap();
    assert_eq!(three.num_permits(), 3);
    assert_eq!(sem.available().unwrap(), 1);
    // Two permits do not fit: the call queues at the head.
    let big_sem = big.fair_semaphore("weighted", 4);
    let (big_tx, big_got) = mpsc::channel();
    let big_thread = thread::spawn(move || {
        let permit = big_sem.acquire_many(2).unwrap();
        big_tx.send(permit.fencing_token()).unwrap();
        permit
    });
    await_queue_len(&sem, 1);
    // One permit would fit beside the three held, but not ahead of the head.
    let small_sem = small.fair_semaphore("weighted", 4);
    assert!(
        small_sem.try_acquire().unwrap().is_none(),
        "try passed the head"
    );
    assert!(small_sem
        .try_acquire_many_for(1, Duration::from_millis(200))
        .unwrap()
        .is_none());
    let (small_tx, small_got) = mpsc::channel();
    let small_thread = thread::spawn(move || {
        let permit = small_sem.acquire_many(1).unwrap();
        small_tx.send(permit.fencing_token()).unwrap();
        permit
    });
    await_queue_len(&sem, 2);
    assert!(big_got.try_recv().is_err() && small_got.try_recv().is_err());
    // One release admits the head and the call behind it (2 + 1 <= 4).
    three.unlock().unwrap();
    let big_token = big_got.recv_timeout(Duration::from_secs(5)).unwrap();
    let small_token = small_got.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(big_token < small_token, "{big_token} then {small_token}");
    let (big_permit, small_permit) = (
        join_within(big_thread, Duration::from_secs(5), "big"),
        join_within(small_thread, Duration::from_secs(5), "small"),
    );
    assert_eq!(
        (big_permit.num_permits(), small_permit.num_permits()),
        (2, 1)
    );
    let status = sem.status(10).unwrap();
    assert_eq!(
        (status.holder_count, status.available(), status.queue_len),
        (2, Some(1), 0)
    );
    let mut held: Vec<u32> = status.holders.iter().map(|h| h.permits).collect();
    held.sort_unstable();
    assert_eq!(held, [1, 2]);
}

#[test]
fn weighted_calls_never_hold_more_than_n_and_large_ones_are_not_starved() {
    const N: u32 = 5;
    let server = RedisServer::start();
    let inside = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..8u32)
        .map(|w| {
            let client = server.client();
            let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
            thread::spawn(move || {
                let sem = client.fair_semaphore("weights", N);
                let mut longest = Duration::ZERO;
                for i in 0..25u32 {
                    // Worker 0 always asks for all five: it must get them
                    // among the others' small calls.
                    let n = if w == 0 { N } else { 1 + (w + i) % 3 };
                    let asked = Instant::now();
                    let permit = sem.acquire_many(n).unwrap();
                    longest = longest.max(asked.elapsed());
                    let now = inside.fetch_add(u64::from(n), Ordering::SeqCst) + u64::from(n);
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(u64::from(n), Ordering::SeqCst);
                    permit.unlock().unwrap();
                }
                longest
            })
        })
        .collect();
    let waits: Vec<Duration> = workers
        .into_iter()
        .map(|w| join_within(w, Duration::from_secs(120), "worker"))
        .collect();
    let most = most.load(Ordering::SeqCst);
    eprintln!(
        "weighted: 8 workers x 25 calls in {:?}, most units inside {most} of {N}, longest wait of the 5-permit worker {:?}",
        started.elapsed(),
        waits[0]
    );
    assert!(most <= u64::from(N), "{most} units inside, more than {N}");
    assert!(most >= 3, "calls never overlapped: {most}");
    assert!(waits[0] < Duration::from_secs(10), "{:?}", waits[0]);
}

#[test]
fn asking_for_no_permit_or_more_than_there_are_is_an_error_before_any_io() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.fair_semaphore("bounds", 3);
    for n in [0, 4, u32::MAX] {
        let err = sem.acquire_many(n).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{n}: {err}");
        assert!(err.to_string().contains("asked for"), "{err}");
        let err = sem.try_acquire_many(n).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig);
        let err = sem
            .try_acquire_many_for(n, Duration::from_millis(10))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    }
    let keys: Vec<String> = server.conn().keys("fairlock:*").unwrap();
    assert!(keys.is_empty(), "nothing written: {keys:?}");
    assert_eq!(sem.acquire_many(3).unwrap().num_permits(), 3);
    // A semaphore of 1 and one of MAX_PERMITS are served.
    for permits in [1, fairlock::MAX_PERMITS] {
        let sem = client.fair_semaphore(&format!("bounds-{permits}"), permits);
        assert!(sem.try_acquire().unwrap().is_some(), "{permits}");
    }
}

#[test]
fn a_fixed_lease_permit_runs_out_unrenewed_and_the_next_waiter_gets_it() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.fair_semaphore("fixed", 1);
    let fixed = sem.with_fixed_lease(Duration::from_millis(400));
    assert_eq!(
        sem.with_fixed_lease(Duration::from_millis(1))
            .acquire()
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidConfig
    );
    let taken = Instant::now();
    let permit = fixed.acquire().unwrap();
    let signal = permit.lease_signal();
    let (waiter, got) = spawn_acquirer(server.client().fair_semaphore("fixed", 1), None);
    let token = got.recv_timeout(Duration::from_secs(5)).unwrap();
    let after = taken.elapsed();
    eprintln!("a fixed 400 ms permit went to the next waiter {after:?} after it was taken");
    assert!(
        after >= Duration::from_millis(380),
        "renewed or freed early: {after:?}"
    );
    assert!(token > permit.fencing_token());
    assert_eq!(signal.wait(), fairlock::LeaseEnd::Lost);
    assert!(permit.unlock().unwrap_err().is_lease_lost());
    join_within(waiter, Duration::from_secs(5), "waiter");
}

#[test]
fn force_unlock_frees_every_permit_and_admits_the_waiters_that_fit() {
    let server = RedisServer::start();
    let (stuck, waiting) = (server.client(), server.client());
    let sem = stuck.fair_semaphore("forced", 3);
    assert!(!sem.is_locked().unwrap());
    assert!(!sem.force_unlock().unwrap(), "nothing to free");
    let (a, b) = (sem.acquire_many(2).unwrap(), sem.acquire().unwrap());
    assert!(sem.is_locked().unwrap());
    let signals = [a.lease_signal(), b.lease_signal()];
    let (waiter, got) = spawn_acquirer(waiting.fair_semaphore("forced", 3), None);
    await_queue_len(&sem, 1);
    assert!(sem.force_unlock().unwrap());
    // The waiter got its permit in the same step (its release follows).
    got.recv_timeout(Duration::from_secs(5)).unwrap();
    for signal in signals {
        assert!(
            wait_until(Duration::from_secs(5), || signal.ended()
                == Some(fairlock::LeaseEnd::Lost)),
            "the old holders learn they lost"
        );
    }
    assert!(a.unlock().unwrap_err().is_lease_lost());
    assert!(b.unlock().unwrap_err().is_lease_lost());
    join_within(waiter, Duration::from_secs(5), "waiter");
    assert!(!sem.is_locked().unwrap());
}

/// What an asker got (its token, or the error's kind), and when.
type Answer = (Result<u64, ErrorKind>, Instant);

/// A thread of its own client that asks for `n` permits of `sem` and
/// reports what it got, then holds the permits until `release` says so.
fn spawn_asker(
    sem: FairSemaphore,
    n: u32,
    release: mpsc::Receiver<()>,
) -> (JoinHandle<()>, mpsc::Receiver<Answer>) {
    let (got_tx, got) = mpsc::channel();
    let handle = thread::spawn(move || match sem.acquire_many(n) {
        Ok(permit) => {
            got_tx
                .send((Ok(permit.fencing_token()), Instant::now()))
                .unwrap();
            let _ = release.recv();
            permit.unlock().expect("release");
        }
        Err(err) => got_tx.send((Err(err.kind()), Instant::now())).unwrap(),
    });
    (handle, got)
}

/// `set_permits` with waiters queued, each in a client of its own: a grow
/// admits at once, in FIFO order, the waiters that now fit and no more (a
/// head that does not fit stops the ones behind it); a shrink leaves the
/// holders their permits and admits nobody until the holds fit under the
/// new number, then admits in order again. Every change is seen in the
/// same step by `status`.
#[test]
fn set_permits_admits_the_waiters_that_now_fit_in_order_and_shrinks_without_taking() {
    let server = RedisServer::start();
    let admin = server.client();
    let sem = admin.fair_semaphore("resized", 2);
    let full = sem.acquire_many(2).unwrap();
    let mut askers = Vec::new();
    for (i, n) in [1, 2, 1].into_iter().enumerate() {
        let (release_tx, release) = mpsc::channel();
        let (thread, got) = spawn_asker(server.client().fair_semaphore("resized", 2), n, release);
        await_queue_len(&sem, i + 1);
        askers.push((thread, got, release_tx));
    }
    let got = |i: usize| {
        askers[i]
            .1
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("asker {i} was not answered"))
            .0
            .unwrap()
    };
    // 4: the first (1) fits beside the 2 held; the second (2) does not,
    // and the third (1, which would) waits behind it.
    let change = sem.set_permits(4).unwrap();
    assert_eq!(
        (change.previous, change.permits, change.in_use),
        (Some(2), 4, 3)
    );
    assert_eq!((change.admitted, change.refused), (1, 0));
    let first = got(0);
    let status = sem.status(10).unwrap();
    assert_eq!(status.capacity, Capacity::Permits(4));
    assert_eq!((status.holder_count, status.queue_len), (2, 2));
    // 5: the second enters; the third (1 more) would make 6.
    let change = sem.set_permits(5).unwrap();
    assert_eq!((change.admitted, change.in_use), (1, 5));
    let second = got(1);
    assert!(first < second, "{first} then {second}");
    assert_eq!(sem.queue_len().unwrap(), 1);
    // 1: nobody loses a permit; the third waits while 5 are held, and
    // still while 3 are, until the holds fit under 1.
    let change = sem.set_permits(1).unwrap();
    assert_eq!(
        (
            change.previous,
            change.in_use,
            change.admitted,
            change.refused
        ),
        (Some(5), 5, 0, 0)
    );
    let status = sem.status(10).unwrap();
    assert_eq!((status.holder_count, status.available()), (3, Some(0)));
    full.unlock().unwrap();
    askers[0].2.send(()).unwrap();
    let status = sem.status(10).unwrap();
    assert_eq!(status.queue_len, 1, "admitted past the new number");
    assert!(askers[2].1.try_recv().is_err());
    askers[1].2.send(()).unwrap();
    let third = got(2);
    assert!(second < third, "{second} then {third}");
    askers[2].2.send(()).unwrap();
    for (i, (thread, _, _)) in askers.into_iter().enumerate() {
        join_within(thread, Duration::from_secs(5), &format!("asker {i}"));
    }
    let status = sem.status(10).unwrap();
    assert_eq!(
        (status.capacity, status.holder_count, status.queue_len),
        (Capacity::Permits(1), 0, 0)
    );
}

/// A call already queued in another client for more permits than a shrink
/// leaves is woken and returns `ErrorKind::PermitsExceeded` at once (well
/// inside the 10 s its own poll or its client's heartbeat would take),
/// leaving the queue to the call behind it; every later call for more is
/// refused at once, while handles that say another number than the one set
/// are served with it (no mismatch). A number set on an unused semaphore is
/// its own; 0 and more than `MAX_PERMITS` are refused before any I/O.
#[test]
fn a_queued_call_for_more_than_a_shrink_leaves_gets_permits_exceeded_at_once() {
    let server = RedisServer::start();
    // Long leases and waiter timeouts: the head would poll when the
    // holder's lease ran out, and a heartbeat would find the refused call
    // gone, only after 10 s; only the wake message is faster.
    let slow = || {
        server
            .builder()
            .lease(Duration::from_secs(30))
            .waiter_timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    };
    let (admin, waiters) = (slow(), slow());
    let sem = admin.fair_semaphore("shrunk", 4);
    let fresh = admin.fair_semaphore("unused", 9).set_permits(3).unwrap();
    assert_eq!((fresh.previous, fresh.in_use), (None, 0));
    let other = admin.fair_semaphore("unused", 5);
    let three = other.try_acquire_many(3).unwrap().expect("3 of the 3 set");
    assert_eq!(other.available().unwrap(), 0);
    drop(three);

    let all = sem.acquire_many(4).unwrap();
    let (big_release, release) = mpsc::channel();
    let (big, big_got) = spawn_asker(waiters.fair_semaphore("shrunk", 4), 3, release);
    await_queue_len(&sem, 1);
    let (small_release, release) = mpsc::channel();
    let (small, small_got) = spawn_asker(waiters.fair_semaphore("shrunk", 4), 1, release);
    await_queue_len(&sem, 2);
    let changed = Instant::now();
    let change = sem.set_permits(2).unwrap();
    assert_eq!((change.in_use, change.admitted, change.refused), (4, 0, 1));
    let (answer, at) = big_got.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(answer, Err(ErrorKind::PermitsExceeded));
    assert!(
        at.duration_since(changed) < Duration::from_secs(2),
        "woken after {:?}",
        at.duration_since(changed)
    );
    join_within(big, Duration::from_secs(5), "the refused call");
    drop(big_release);
    assert_eq!(sem.queue_len().unwrap(), 1);
    // Later calls for more than 2 are refused; a handle that says 7 is
    // served with the 2 set.
    let err = sem.try_acquire_many(3).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermitsExceeded, "{err}");
    assert!(err.to_string().contains("has 2 now"), "{err}");
    let err = sem.acquire_many(3).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermitsExceeded, "{err}");
    let seven = admin.fair_semaphore("shrunk", 7);
    assert!(
        seven.try_acquire().unwrap().is_none(),
        "not ahead of the queue"
    );
    // The 4 back: the small call enters (1 of 2), and so does a call of
    // the handle that says 7.
    all.unlock().unwrap();
    let (small_answer, _) = small_got.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(small_answer.is_ok(), "{small_answer:?}");
    let one = seven
        .try_acquire()
        .unwrap()
        .expect("1 of the 2 set is free");
    assert!(seven.try_acquire().unwrap().is_none(), "2 held of 2");
    drop(one);
    small_release.send(()).unwrap();
    join_within(small, Duration::from_secs(5), "the small call");
    // Bad numbers, before any I/O.
    for permits in [0, fairlock::MAX_PERMITS + 1] {
        let err = sem.set_permits(permits).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
    }
    let err = admin.fair_semaphore("", 2).set_permits(2).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidName, "{err}");
    let mut conn = server.conn();
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
}

/// A queued call refused by a shrink (it asks for more than the number
/// set) whose poll comes only after a second `set_permits` raised the
/// number again is told it was refused (`PermitsExceeded`): it used to be
/// queued again at the back, behind the calls that had queued after it,
/// and so got neither the error nor its place. Its client's link is slowed
/// (300 ms each way, a relay), so its poll lands after the raise.
#[test]
fn a_call_refused_by_a_shrink_and_polling_after_a_raise_is_told_not_queued_at_the_back() {
    let server = RedisServer::start();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(300));
    let slow_link = Client::builder(&relay.url())
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (admin, others) = (server.client(), server.client());
    let sem = admin.fair_semaphore("shrunk-then-raised", 4);
    sem.set_permits(4).unwrap();
    let all = sem.acquire_many(4).unwrap();
    let (big_release, release) = mpsc::channel();
    let (big, big_got) = spawn_asker(
        slow_link.fair_semaphore("shrunk-then-raised", 4),
        4,
        release,
    );
    await_queue_len(&sem, 1);
    let (small_release, release) = mpsc::channel();
    let (small, small_got) =
        spawn_asker(others.fair_semaphore("shrunk-then-raised", 4), 1, release);
    await_queue_len(&sem, 2);
    let shrunk = sem.set_permits(3).unwrap();
    // The refused call no longer waits, before its poll too (its record,
    // its deadline, was counted as a waiter until it polled).
    let waiting = sem.queue_len().unwrap();
    let raised = sem.set_permits(4).unwrap();
    assert_eq!((shrunk.refused, raised.admitted), (1, 0));
    assert_eq!(waiting, 1, "the refused call counted as queued");
    // The refused call's poll (600 ms round trip) comes after the raise.
    let big_answer = big_got.recv_timeout(Duration::from_secs(3));
    let queued = sem.queue_len().unwrap();
    all.unlock().unwrap();
    let small_answer = small_got.recv_timeout(Duration::from_secs(5)).unwrap();
    let big_answer = big_answer
        .or_else(|_| big_got.recv_timeout(Duration::from_millis(500)))
        .map(|(answer, _)| answer);
    eprintln!(
        "refused by the shrink, polled after the raise: {:?}; queued then: {queued}; \
         after the 4 came back, the call behind it: {:?}",
        big_answer, small_answer.0
    );
    drop((big_release, small_release));
    join_within(small, Duration::from_secs(5), "the small call");
    assert_eq!(big_answer, Ok(Err(ErrorKind::PermitsExceeded)));
    assert_eq!(queued, 1, "only the call behind it waits");
    join_within(big, Duration::from_secs(5), "the refused call");
    assert_eq!(sem.status(10).unwrap().queue_len, 0);
}

/// A permit's release in a child process stopped (`SIGSTOP`) after its
/// request left and before it read the reply, another holder releasing
/// meanwhile; then continued (`SIGCONT`), so the request goes out again:
/// the repeat is answered as the first was, and `unlock()` says `Ok`, not
/// `LeaseLost` for a release that worked.
#[test]
fn a_permit_release_sent_again_after_a_stop_and_another_release_says_ok() {
    use fairlock_test_support::{roles::lease_holder, send_signal, Children};
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let holders = server.client();
    let mut children = Children::new(CHILD);
    // A fixed lease: the child sends nothing through the relay but its release.
    let child = children.spawn(
        "lease_holder",
        &lease_holder::vars(&relay.url(), 30_000, true),
    );
    let patience = Duration::from_secs(10);
    children.expect_text(child, "ready", patience);
    children.send(child, "permit again 2");
    children.expect_prefix(child, "locked ", patience);
    let semaphore = holders.fair_semaphore("again", 2);
    let other = semaphore.acquire().unwrap();

    relay.stall();
    children.send(child, "unlock");
    assert!(
        wait_until(patience, || relay.held_bytes() > 0),
        "the release never went out"
    );
    let pid = children.pid(child);
    let stopped = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    };
    send_signal(pid, "STOP");
    assert!(wait_until(patience, stopped), "the child never stopped");
    relay.resume();
    assert!(
        wait_until(patience, || semaphore.available().unwrap() == 1),
        "the first delivery never released"
    );
    other.unlock().unwrap();
    send_signal(pid, "CONT");
    let said = children.expect_prefix(child, "unlocked ", patience);
    assert_eq!(said.text, "unlocked ok");
}

/// A number of permits refused before any I/O (0, more than the
/// semaphore's, a semaphore of 0) names the call and the semaphore, as
/// every message does, and a multi-lock's did already; it named neither
/// before.
#[test]
fn refused_permits_name_the_call_and_the_semaphore() {
    let server = RedisServer::start();
    let client = server.client();
    let gpus = client.fair_semaphore("gpus", 2);
    let refused = [
        ("acquire", gpus.try_acquire_many(0).map(drop)),
        ("acquire", gpus.try_acquire_many(3).map(drop)),
        (
            "acquire",
            client.fair_semaphore("gpus", 0).try_acquire().map(drop),
        ),
        ("set permits", gpus.set_permits(0).map(drop)),
    ];
    for (call, result) in refused {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        let said = err.to_string();
        assert!(
            said.starts_with(&format!("{call} of semaphore \"gpus\": ")),
            "{said}"
        );
    }
}

/// The number `set_permits` set lives in the semaphore's keys, so a server
/// that loses them loses it: restarted empty while the number set (1)
/// holds back two waiters of handles of 3, the semaphore serves the
/// handles' own number again, both waiters in at once (the holder told
/// `Lost`); restarted from its AOF, the number set is kept and still holds
/// them back. Nothing said so: the docs said the number lasts while the
/// semaphore is in use.
#[test]
fn a_number_set_is_lost_with_the_servers_data_and_kept_by_its_aof() {
    let _serial = serial();
    for aof in [false, true] {
        let mut server = match aof {
            true => RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]),
            false => RedisServer::start(),
        };
        let (holders, waiters) = (server.client(), server.client());
        let semaphore = holders.fair_semaphore("set-then-restarted", 3);
        semaphore.set_permits(1).unwrap();
        let held = semaphore.acquire().unwrap();
        let (granted_tx, granted) = mpsc::channel();
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (waiting, granted_tx) = (
                    waiters.fair_semaphore("set-then-restarted", 3),
                    granted_tx.clone(),
                );
                let thread = thread::spawn(move || {
                    let permit = waiting.acquire().unwrap();
                    granted_tx.send(i).unwrap();
                    permit
                });
                let queued = || semaphore.queue_len().unwrap() == i + 1;
                assert!(
                    wait_until(Duration::from_secs(5), queued),
                    "waiter {i} queued"
                );
                thread
            })
            .collect();
        server.restart_after(Duration::from_millis(300));
        let in_after_restart: Vec<_> = granted
            .recv_timeout(Duration::from_secs(3))
            .into_iter()
            .chain(granted.recv_timeout(Duration::from_millis(500)))
            .collect();
        let status = fairlock_test_support::retry_while_unreachable(|| semaphore.status(10));
        eprintln!(
            "semaphore: set to 1 of 3, restarted (aof: {aof}): {:?} in, {:?} now, {} held",
            in_after_restart, status.capacity, status.holder_count
        );
        if aof {
            assert!(!held.is_lease_lost(), "the hold survived in the AOF");
            assert_eq!(status.capacity, Capacity::Permits(1), "the number set kept");
            assert!(
                in_after_restart.is_empty(),
                "nobody let in beside the holder"
            );
            held.unlock().unwrap();
            let first = granted.recv_timeout(Duration::from_secs(3)).unwrap();
            assert!(
                granted.recv_timeout(Duration::from_millis(300)).is_err(),
                "one at a time"
            );
            let mut threads = threads;
            drop(join_within(
                threads.remove(first),
                Duration::from_secs(3),
                "the first waiter",
            ));
            assert!(
                granted.recv_timeout(Duration::from_secs(3)).is_ok(),
                "then the other"
            );
            threads
                .into_iter()
                .for_each(|t| drop(join_within(t, Duration::from_secs(3), "waiter")));
        } else {
            let lost = held.lease_signal().wait_timeout(Duration::from_secs(5));
            assert_eq!(lost, Some(fairlock::LeaseEnd::Lost), "the holder is told");
            assert_eq!(
                status.capacity,
                Capacity::Permits(3),
                "the handles' own number again"
            );
            assert_eq!(in_after_restart.len(), 2, "both waiters in at once");
            threads
                .into_iter()
                .for_each(|t| drop(join_within(t, Duration::from_secs(3), "waiter")));
        }
    }
}

/// A raise with waiters of other clients queued wakes the ones that now
/// fit at once (by their grant messages: their clients' heartbeats are
/// 10 s apart), in arrival order.
#[test]
fn a_raise_wakes_the_waiters_that_fit_at_once_in_order() {
    let server = RedisServer::start();
    let quiet = || {
        (server.builder().lease(Duration::from_secs(30)))
            .waiter_timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    };
    let admin = quiet();
    let sem = admin.fair_semaphore("raised", 1);
    let full = sem.acquire().unwrap();
    let mut askers = Vec::new();
    for i in 0..4 {
        let (release_tx, release) = mpsc::channel();
        let (thread, got) = spawn_asker(quiet().fair_semaphore("raised", 1), 1, release);
        await_queue_len(&sem, i + 1);
        askers.push((thread, got, release_tx));
    }
    let sent = Instant::now();
    let change = sem.set_permits(4).unwrap();
    assert_eq!(change.admitted, 3);
    let answers: Vec<(u64, f64)> = askers[..3]
        .iter()
        .map(|(_, got, _)| {
            let (token, at) = got.recv_timeout(Duration::from_secs(15)).unwrap();
            (token.unwrap(), ms(at.saturating_duration_since(sent)))
        })
        .collect();
    eprintln!("set_permits raise → each admitted waiter's return (token, ms): {answers:?}");
    assert!(answers.windows(2).all(|w| w[0].0 < w[1].0), "{answers:?}");
    assert!(answers.iter().all(|&(_, at)| at < 1000.0), "{answers:?}");
    assert!(askers[3].1.try_recv().is_err());
    full.unlock().unwrap();
    let last = askers[3].1.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(last.0.unwrap() > answers[2].0);
    for (thread, _, release) in askers {
        drop(release);
        join_within(thread, Duration::from_secs(5), "an asker");
    }
}
