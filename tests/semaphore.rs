//! The client API of `FairSemaphore` against a real redis-server: N never
//! exceeded, grants in arrival order, `try_acquire` never ahead of a queued
//! waiter, timeouts and cancellation leaving nothing, a killed holder's
//! permit going to the head, the watchdog renewing permits and keeping
//! waiters, fencing order, a permits mismatch, and every key's TTL.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::{Client, ErrorKind, FairSemaphore, WaitCanceller};
use fairlock_test_support::roles::holder::{LEASE_MS, LOCKED, NAME, PERMITS, URL};
use fairlock_test_support::{join_within, wait_until, RedisServer};
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
        permit.release().expect("release");
        token
    });
    (handle, got)
}

#[test]
fn n_is_never_exceeded_by_8_clients_of_25_sections() {
    const N: usize = 3;
    let server = RedisServer::start();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(8));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let client = server.client();
            let (inside, most, tokens, start) = (
                Arc::clone(&inside),
                Arc::clone(&most),
                Arc::clone(&tokens),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                let sem = client.fair_semaphore("bounded", N as u32);
                start.wait();
                for _ in 0..25 {
                    let permit = sem.acquire().expect("acquire");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= N, "{now} holders inside, N = {N}");
                    thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    tokens.lock().unwrap().push(permit.fencing_token());
                    permit.release().expect("release");
                }
            })
        })
        .collect();
    for worker in workers {
        join_within(worker, Duration::from_secs(60), "a worker");
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= N, "{most} holders at once");
    assert!(
        most >= 2,
        "permits were never shared (at most {most} inside)"
    );
    let mut tokens = tokens.lock().unwrap().clone();
    let count = tokens.len();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), count, "a token was issued twice");
    assert_eq!(count, 200);
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
                permit.release().expect("waiter releases");
            });
            // Each starts once the previous one is queued.
            await_queue_len(&sem, waiter + 1);
            handle
        })
        .collect();
    first.release().unwrap();
    second.release().unwrap();
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
    one.release().unwrap();
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
    assert!(sem.acquire_cancellable(None, &cancel).unwrap().is_none());
    stopper.join().unwrap();
    assert_eq!(sem.queue_len().unwrap(), 0);
    held.release().unwrap();
    assert_eq!(sem.available().unwrap(), 1);
}

/// The `{tag}` of a name's keys.
fn tag_of(name: &str) -> String {
    let digest = sha1_smol::Sha1::from(name).digest().to_string();
    format!("{{{}}}", &digest[..16])
}

/// A child process holding a permit; SIGKILLed and reaped on drop.
struct ChildHolder {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl ChildHolder {
    fn start(server: &RedisServer, name: &str, permits: u32, lease: Duration) -> ChildHolder {
        let mut child = Command::new(CHILD)
            .arg("holder")
            .env(URL, server.url())
            .env(NAME, name)
            .env(LEASE_MS, lease.as_millis().to_string())
            .env(PERMITS, permits.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child process");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ChildHolder { child, lines }
    }

    /// The child's token once it holds its permit.
    fn token(&self) -> u64 {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the child did not report its permit");
        let (_, token) = line.split_once(LOCKED).expect("the holder's line");
        token.trim().parse().unwrap()
    }

    fn kill(&mut self) -> Instant {
        let _ = self.child.kill();
        let _ = self.child.wait();
        Instant::now()
    }
}

impl Drop for ChildHolder {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn a_killed_holders_permit_goes_to_the_head_when_its_lease_runs_out() {
    let server = RedisServer::start();
    let mut child = ChildHolder::start(&server, "killed", 1, Duration::from_millis(1000));
    let child_token = child.token();
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
    permit.release().unwrap();
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
    permit.release().unwrap();
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
    let status = a.fair_semaphore("disagree", 3).status(10).unwrap();
    assert_eq!(status.permits, Some(3));
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
    permit.release().unwrap();
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
