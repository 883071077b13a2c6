//! The client API of `FairRwLock` against a real redis-server: readers
//! overlap and a writer is alone (16 clients x 100 sections), FIFO phases
//! and arrival order across clients, no starvation either way under a
//! steady mix, re-entry and the refused upgrade, killed holders and waiters
//! (child processes, SIGKILL), lease loss, fencing order, timeouts and
//! cancellation leaving nothing, the ACL user of docs/security.md, the kinds of one
//! name apart, every key's TTL, and the keys' slot on a Redis Cluster.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::__test_support::LockKeys;
use fairlock::{Client, ErrorKind, FairRwLock, LeaseEnd, Wait, WaitCanceller};
use fairlock_test_support::cluster::RedisCluster;
use fairlock_test_support::*;
use redis::Commands;

/// The child process binary (tests/support/child/), built for these tests.
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

fn keys_without_ttl(conn: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
    keys.into_iter()
        .filter(|k| conn.pttl::<_, i64>(k).unwrap() == -1)
        .collect()
}

/// The rwlock `name`'s keys under the default prefix.
fn rw_keys(name: &str) -> LockKeys {
    LockKeys::of_kind("fairlock", name, fairlock::LockKind::RwLock).unwrap()
}

/// Waits (at most 5 s) until `rw` has `n` live waiters queued.
fn await_queue_len(rw: &FairRwLock, n: usize) {
    assert!(
        wait_until(Duration::from_secs(5), || rw.queue_len().unwrap() == n),
        "queue never reached {n} (now {})",
        rw.queue_len().unwrap()
    );
}

/// Read or write, for the threads below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Read,
    Write,
}

/// A thread of its own client that takes `want` of the rwlock `name`,
/// reports its token and when it got it, holds until `release` says so (at
/// once if `None`), and returns the token.
fn spawn_taker(
    server: &RedisServer,
    name: &str,
    want: Want,
    release: Option<mpsc::Receiver<()>>,
) -> (JoinHandle<u64>, mpsc::Receiver<(u64, Instant)>) {
    let client = server.client();
    let rw = client.fair_rwlock(name);
    let (got_tx, got) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _client = client;
        let hold = |token: u64| {
            got_tx.send((token, Instant::now())).unwrap();
            if let Some(release) = &release {
                let _ = release.recv();
            }
            token
        };
        match want {
            Want::Read => {
                let guard = rw.read().expect("read");
                let token = hold(guard.fencing_token());
                guard.unlock().expect("unlock the read");
                token
            }
            Want::Write => {
                let guard = rw.write().expect("write");
                let token = hold(guard.fencing_token());
                guard.unlock().expect("unlock the write");
                token
            }
        }
    });
    (handle, got)
}

#[test]
fn readers_overlap_and_a_writer_is_alone_in_16_clients_of_100_sections() {
    let _serial = serial();
    let server = RedisServer::start();
    let readers = Arc::new(AtomicUsize::new(0));
    let writers = Arc::new(AtomicUsize::new(0));
    let most_readers = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(Barrier::new(16));
    let workers: Vec<_> = (0..16)
        .map(|worker| {
            let client = server.client();
            let (readers, writers, most_readers, tokens, start) = (
                Arc::clone(&readers),
                Arc::clone(&writers),
                Arc::clone(&most_readers),
                Arc::clone(&tokens),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                let rw = client.fair_rwlock("sections");
                start.wait();
                for section in 0..100 {
                    // One section in four writes, spread over the workers.
                    if (worker + section) % 4 == 0 {
                        let guard = rw.write().expect("write");
                        let now = writers.fetch_add(1, Ordering::SeqCst) + 1;
                        let reading = readers.load(Ordering::SeqCst);
                        assert!(now == 1 && reading == 0, "{now} writers, {reading} readers");
                        thread::sleep(Duration::from_micros(500));
                        writers.fetch_sub(1, Ordering::SeqCst);
                        tokens.lock().unwrap().push(guard.fencing_token());
                        guard.unlock().expect("unlock the write");
                    } else {
                        let guard = rw.read().expect("read");
                        let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                        most_readers.fetch_max(now, Ordering::SeqCst);
                        let writing = writers.load(Ordering::SeqCst);
                        assert_eq!(writing, 0, "a writer beside {now} readers");
                        thread::sleep(Duration::from_millis(1));
                        readers.fetch_sub(1, Ordering::SeqCst);
                        tokens.lock().unwrap().push(guard.fencing_token());
                        guard.unlock().expect("unlock the read");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        join_within(worker, Duration::from_secs(120), "a worker");
    }
    let most = most_readers.load(Ordering::SeqCst);
    assert!(most >= 2, "readers never overlapped (at most {most})");
    let mut tokens = tokens.lock().unwrap().clone();
    let count = tokens.len();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), count, "a token was issued twice");
    assert_eq!(count, 1600);
    assert_eq!(keys_without_ttl(&mut server.conn()), Vec::<String>::new());
}

#[test]
fn waiters_of_separate_clients_are_granted_in_arrival_order_in_phases() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder = server.client();
    let rw = holder.fair_rwlock("phases");
    let write = rw.write().unwrap();
    // Arrival order: W0 R1 R2 R3 W4 R5 W6 R7 R8.
    let plan = [
        Want::Write,
        Want::Read,
        Want::Read,
        Want::Read,
        Want::Write,
        Want::Read,
        Want::Write,
        Want::Read,
        Want::Read,
    ];
    let mut releases = Vec::new();
    let mut takers = Vec::new();
    for (i, &want) in plan.iter().enumerate() {
        let (release_tx, release) = mpsc::channel();
        let (handle, got) = spawn_taker(&server, "phases", want, Some(release));
        // Each starts once the previous one is queued.
        await_queue_len(&rw, i + 1);
        releases.push(release_tx);
        takers.push((handle, got));
    }
    let granted = |i: usize, within: Duration| takers[i].1.recv_timeout(within).ok();
    let nothing_more = |range: std::ops::Range<usize>| {
        for i in range {
            assert!(
                granted(i, Duration::from_millis(150)).is_none(),
                "{i} ({:?}) entered out of its phase",
                plan[i]
            );
        }
    };
    write.unlock().unwrap();
    // W0 alone.
    let w0 = granted(0, Duration::from_secs(5)).expect("W0 gets it");
    nothing_more(1..2);
    releases[0].send(()).unwrap();
    // R1 R2 R3 together, W4 waits for them, R5 (behind W4) too.
    let run: Vec<u64> = (1..4)
        .map(|i| {
            granted(i, Duration::from_secs(5))
                .expect("a reader of the run")
                .0
        })
        .collect();
    nothing_more(4..6);
    for release in &releases[1..4] {
        release.send(()).unwrap();
    }
    let w4 = granted(4, Duration::from_secs(5)).expect("W4 after the run");
    nothing_more(5..6);
    releases[4].send(()).unwrap();
    let r5 = granted(5, Duration::from_secs(5)).expect("R5 after W4");
    nothing_more(6..7);
    releases[5].send(()).unwrap();
    let w6 = granted(6, Duration::from_secs(5)).expect("W6 after R5");
    nothing_more(7..8);
    releases[6].send(()).unwrap();
    let tail: Vec<u64> = (7..9)
        .map(|i| {
            granted(i, Duration::from_secs(5))
                .expect("the last readers")
                .0
        })
        .collect();
    for release in &releases[7..] {
        release.send(()).unwrap();
    }
    let tokens: Vec<u64> = [w0.0]
        .into_iter()
        .chain(run)
        .chain([w4.0, r5.0, w6.0])
        .chain(tail)
        .collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens follow arrival order: {tokens:?}"
    );
    for (handle, _) in takers {
        join_within(handle, Duration::from_secs(5), "a taker");
    }
}

#[test]
fn a_reader_behind_a_queued_writer_waits_and_try_never_passes_it() {
    let server = RedisServer::start();
    let a = server.client();
    let rw = a.fair_rwlock("no-barging");
    let read = rw.read().unwrap();
    let (release_writer, release) = mpsc::channel();
    let (writer, wrote) = spawn_taker(&server, "no-barging", Want::Write, Some(release));
    await_queue_len(&rw, 1);
    // Another client's readers would share with the holder, but a writer
    // is queued: they wait behind it.
    let b = server.client();
    let theirs = b.fair_rwlock("no-barging");
    assert!(
        theirs.try_read().unwrap().is_none(),
        "try_read passed a queued writer"
    );
    assert!(theirs
        .try_read_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_eq!(rw.queue_len().unwrap(), 1, "the timed-out reader left");
    read.unlock().unwrap();
    let (token, _) = wrote.recv_timeout(Duration::from_secs(5)).unwrap();
    release_writer.send(()).unwrap();
    join_within(writer, Duration::from_secs(5), "the writer");
    let after = theirs.try_read().unwrap().expect("free again");
    assert!(after.fencing_token() > token);
}

/// Steady traffic of `want` on `name` from `threads` threads (each its own
/// client), each holding for `hold` and asking again at once, until `stop`.
fn steady(
    server: &RedisServer,
    name: &str,
    want: Want,
    threads: usize,
    hold: Duration,
    stop: &Arc<AtomicBool>,
) -> Vec<JoinHandle<usize>> {
    (0..threads)
        .map(|_| {
            let client = server.client();
            let rw = client.fair_rwlock(name);
            let stop = Arc::clone(stop);
            thread::spawn(move || {
                let _client = client;
                let mut sections = 0;
                while !stop.load(Ordering::SeqCst) {
                    match want {
                        Want::Read => {
                            let guard = rw.read().expect("read");
                            thread::sleep(hold);
                            drop(guard);
                        }
                        Want::Write => {
                            let guard = rw.write().expect("write");
                            thread::sleep(hold);
                            drop(guard);
                        }
                    }
                    sections += 1;
                }
                sections
            })
        })
        .collect()
}

#[test]
fn nobody_starves_under_a_steady_mix() {
    let _serial = serial();
    let server = RedisServer::start();
    let stop = Arc::new(AtomicBool::new(false));
    // Overlapping readers: the lock is never free of readers for long.
    let mut load = steady(
        &server,
        "mix",
        Want::Read,
        4,
        Duration::from_millis(5),
        &stop,
    );
    let client = server.client();
    let rw = client.fair_rwlock("mix");
    thread::sleep(Duration::from_millis(200));
    let mut writer_waits = Vec::new();
    for _ in 0..5 {
        let asked = Instant::now();
        let guard = rw
            .try_write_for(Duration::from_secs(10))
            .unwrap()
            .expect("a writer starved behind readers");
        writer_waits.push(asked.elapsed());
        drop(guard);
        thread::sleep(Duration::from_millis(50));
    }
    // Now steady writers too: readers must still get in.
    load.extend(steady(
        &server,
        "mix",
        Want::Write,
        3,
        Duration::from_millis(5),
        &stop,
    ));
    thread::sleep(Duration::from_millis(200));
    let mut reader_waits = Vec::new();
    for _ in 0..5 {
        let asked = Instant::now();
        let guard = rw
            .try_read_for(Duration::from_secs(10))
            .unwrap()
            .expect("a reader starved behind writers");
        reader_waits.push(asked.elapsed());
        drop(guard);
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::SeqCst);
    let sections: usize = load
        .into_iter()
        .map(|t| join_within(t, Duration::from_secs(10), "a load thread"))
        .sum();
    assert!(sections > 50, "the load ran only {sections} sections");
    // Each waits at most for the phase ahead of it: a few holds of a few
    // ms, far below the 10 s limit; 2 s leaves room for a busy machine.
    eprintln!("writers waited {writer_waits:?} behind steady readers, readers {reader_waits:?} behind steady writers");
    for wait in writer_waits.iter().chain(&reader_waits) {
        assert!(*wait < Duration::from_secs(2), "waited {wait:?}");
    }
}

#[test]
fn a_thread_reenters_read_in_read_read_in_write_and_write_in_write() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("reentry");
    let read = rw.read().unwrap();
    // A writer of another client queues behind our read.
    let (writer, wrote) = spawn_taker(&server, "reentry", Want::Write, None);
    await_queue_len(&rw, 1);
    // Read in read: at once, past the queued writer (else we would wait
    // for a writer that waits for us).
    let again = rw.try_read().unwrap().expect("read in read, at once");
    assert!(again.fencing_token() > read.fencing_token());
    // Read -> write: refused, nothing queued.
    let refused = rw.try_write_for(Duration::from_secs(1)).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::UpgradeRefused, "{refused}");
    let refused = rw.write().unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::UpgradeRefused, "{refused}");
    assert_eq!(rw.queue_len().unwrap(), 1, "the refused write queued");
    drop(again);
    drop(read);
    wrote.recv_timeout(Duration::from_secs(5)).unwrap();
    join_within(writer, Duration::from_secs(5), "the writer");
    // Write, then read in write and write in write.
    let write = rw.write().unwrap();
    let read_in_write = rw.try_read().unwrap().expect("read in write");
    let write_in_write = rw.try_write().unwrap().expect("write in write");
    assert!(write.fencing_token() < read_in_write.fencing_token());
    assert!(read_in_write.fencing_token() < write_in_write.fencing_token());
    // Another thread of the same client is someone else.
    let other = {
        let rw = rw.clone();
        thread::spawn(move || rw.try_read().unwrap().is_none())
    };
    assert!(join_within(
        other,
        Duration::from_secs(5),
        "the other thread"
    ));
    let status = rw.status(10).unwrap();
    assert_eq!(status.holder_count, 3);
    drop((write, read_in_write, write_in_write));
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
}

#[test]
fn a_killed_writers_hold_goes_to_the_head_when_its_lease_runs_out() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut child = HolderChild::start(
        CHILD,
        &server.url(),
        "killed",
        Duration::from_millis(1000),
        Held::Write,
    );
    let child_token = child.token_within(Duration::from_secs(10));
    let client = server.client();
    let rw = client.fair_rwlock("killed");
    let (reader, got) = spawn_taker(&server, "killed", Want::Read, None);
    await_queue_len(&rw, 1);
    let killed = child.kill();
    let (token, at) = got
        .recv_timeout(Duration::from_secs(5))
        .expect("the head got the dead writer's lock");
    assert!(token > child_token);
    // The lease (1 s) runs out, then the head takes the lock: no later
    // than the lease and a poll's slack.
    let waited = at.duration_since(killed);
    eprintln!("the head got a killed writer's lock {waited:?} after the kill (lease 1 s)");
    assert!(waited < Duration::from_millis(2500), "{waited:?}");
    join_within(reader, Duration::from_secs(5), "the reader");
}

#[test]
fn a_killed_waiter_leaves_the_queue_and_blocks_nobody() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("dead-waiter");
    let read = rw.read().unwrap();
    // The child's writer queues behind our read; a reader of ours behind it.
    let mut child = HolderChild::start(
        CHILD,
        &server.url(),
        "dead-waiter",
        Duration::from_millis(1000),
        Held::Write,
    );
    await_queue_len(&rw, 1);
    let (reader, got) = spawn_taker(&server, "dead-waiter", Want::Read, None);
    await_queue_len(&rw, 2);
    let killed = child.kill();
    drop(read);
    // The dead writer's entry lapses within its waiter timeout (1 s); the
    // reader behind it then enters.
    let (_, at) = got
        .recv_timeout(Duration::from_secs(5))
        .expect("the reader behind a dead waiter got in");
    let waited = at.duration_since(killed);
    eprintln!(
        "the reader behind a killed waiter got in {waited:?} after the kill (waiter timeout 1 s)"
    );
    assert!(waited < Duration::from_millis(3000), "{waited:?}");
    assert!(!child.has_held(), "the killed waiter held the lock");
    join_within(reader, Duration::from_secs(5), "the reader");
    assert_eq!(rw.queue_len().unwrap(), 0);
}

#[test]
fn a_lost_hold_is_signalled_and_its_release_says_lease_lost() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server
        .builder()
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    let rw = client.fair_rwlock("lost");
    let guard = rw.write().unwrap();
    let signal = guard.lease_signal();
    // The hold vanishes from Redis (as after an expiry another client saw):
    // a lone hold lives in the meta.
    let keys = &rw_keys("lost").all;
    assert_eq!(remove_counted_holds(&mut server.conn(), keys), 1);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(signal.wait()).unwrap());
    // The watchdog renews every lease/3: its next renewal finds it gone.
    let end = rx
        .recv_timeout(Duration::from_secs(3))
        .expect("the signal fired");
    assert_eq!(end, LeaseEnd::Lost);
    assert!(guard.is_lease_lost());
    let err = guard.unlock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    // A read hold is signalled alike.
    let read = rw.read().unwrap();
    assert_eq!(remove_counted_holds(&mut server.conn(), keys), 1);
    assert!(wait_until(Duration::from_secs(3), || read.is_lease_lost()));
}

#[test]
fn fencing_tokens_increase_across_reads_and_writes_of_every_client() {
    let server = RedisServer::start();
    let clients = [server.client(), server.client()];
    let mut last = 0;
    for round in 0..20 {
        let rw = clients[round % 2].fair_rwlock("tokens");
        let token = if round % 3 == 0 {
            rw.write().unwrap().fencing_token()
        } else {
            rw.read().unwrap().fencing_token()
        };
        assert!(token > last, "round {round}: {token} after {last}");
        last = token;
    }
}

#[test]
fn timeouts_and_cancellation_leave_nothing_behind() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("leave");
    let read = rw.read().unwrap();
    let other = server.client();
    let theirs = other.fair_rwlock("leave");
    let mine = thread::spawn(move || {
        // A writer that times out must not keep readers out after it left.
        assert!(theirs
            .try_write_for(Duration::from_millis(200))
            .unwrap()
            .is_none());
        let cancel = WaitCanceller::new();
        let stopper = cancel.clone();
        let stop = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            stopper.cancel();
        });
        assert!(theirs
            .write_with(Wait::at_most(Duration::from_secs(10)).cancelled_by(&cancel))
            .unwrap()
            .is_none());
        stop.join().unwrap();
        // Readers enter again at once: no writer is queued any more.
        theirs
            .try_read()
            .unwrap()
            .expect("readers share again")
            .fencing_token()
    });
    let token = join_within(mine, Duration::from_secs(15), "the waiter");
    assert!(token > read.fencing_token());
    let keys = rw_keys("leave");
    let mut conn = server.conn();
    let queued: i64 = conn.zcard(&keys.all[1]).unwrap();
    assert_eq!(queued, 0, "entries or deadlines left behind");
    drop(read);
    let holders: i64 = conn.zcard(&keys.all[0]).unwrap();
    assert_eq!(holders, 0, "holds left behind");
    // Nor a lone hold in the meta ("v<format> <capacity> <used> <last>[
    // <mark>]" without one).
    let meta: Option<String> = conn.get(&keys.all[2]).unwrap();
    let fields = meta.as_deref().map_or(0, |m| m.split(' ').count());
    assert!(fields <= 5, "a hold left behind in the meta: {meta:?}");
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
}

#[test]
fn the_readme_acl_user_reads_writes_and_waits() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "rw-pw");
    let _: () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let url = server.url_as("fairlock", "rw-pw");
    let a = Client::open(&url).unwrap();
    let b = Client::open(&url).unwrap();
    let rw = a.fair_rwlock("acl");
    let write = rw.write().unwrap();
    let (tx, rx) = mpsc::channel();
    let theirs = b.fair_rwlock("acl");
    let reader = thread::spawn(move || {
        let guard = theirs.read().unwrap();
        tx.send(guard.fencing_token()).unwrap();
        theirs.status(10).unwrap();
        guard.unlock().unwrap();
    });
    await_queue_len(&rw, 1);
    write.unlock().unwrap();
    rx.recv_timeout(Duration::from_secs(5))
        .expect("handed over");
    join_within(reader, Duration::from_secs(5), "the reader");
    assert!(rw
        .try_write_for(Duration::from_millis(50))
        .unwrap()
        .is_some());
    assert_eq!(acl_denials(&mut admin), Vec::<redis::Value>::new());
}

#[test]
fn the_mutex_the_semaphore_and_the_rwlock_of_a_name_are_separate_locks() {
    let server = RedisServer::start();
    let client = server.client();
    let other = server.client();
    let write = client.fair_rwlock("one-name").write().unwrap();
    let guard = client.fair_mutex("one-name").lock().unwrap();
    let permit = client.fair_semaphore("one-name", 1).acquire().unwrap();
    // Each is held, each by its own kind only.
    assert!(other.fair_rwlock("one-name").try_read().unwrap().is_none());
    assert!(other.fair_mutex("one-name").try_lock().unwrap().is_none());
    assert!(other
        .fair_semaphore("one-name", 1)
        .try_acquire()
        .unwrap()
        .is_none());
    drop(write);
    assert!(other.fair_rwlock("one-name").try_read().unwrap().is_some());
    assert!(other.fair_mutex("one-name").try_lock().unwrap().is_none());
    drop((guard, permit));
    let keys: Vec<String> = server.conn().keys("fairlock:*").unwrap();
    let rw: Vec<&String> = keys.iter().filter(|k| k.contains(":rw")).collect();
    assert!(!rw.is_empty() && rw.len() < keys.len(), "{keys:?}");
}

#[test]
fn every_key_has_a_ttl_while_held_and_waited_for_and_after() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("ttl");
    let mut conn = server.conn();
    let write = rw.write().unwrap();
    let (reader, got) = spawn_taker(&server, "ttl", Want::Read, None);
    await_queue_len(&rw, 1);
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
    let write_in_write = rw.write().unwrap();
    drop(write_in_write);
    drop(write);
    got.recv_timeout(Duration::from_secs(5)).unwrap();
    join_within(reader, Duration::from_secs(5), "the reader");
    assert_eq!(keys_without_ttl(&mut conn), Vec::<String>::new());
    let status = rw.status(10).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
    assert!(status.last_fencing_token.is_some());
}

#[test]
fn on_a_cluster_the_keys_share_a_slot_and_the_rwlock_works_on_every_master() {
    let _serial = serial();
    let cluster = RedisCluster::start();
    let (a, b) = (cluster.client(), cluster.client());
    let names = cluster.one_name_per_master("rw");
    assert_eq!(names.len(), 3, "{names:?}");
    for (&master, name) in &names {
        let keys = rw_keys(name).all;
        let slot = cluster.slot_of_lock(&keys, master);
        let rw = a.fair_rwlock(name);
        let write = rw.write().unwrap();
        let theirs = b.fair_rwlock(name);
        assert!(theirs.try_read().unwrap().is_none());
        let (tx, rx) = mpsc::channel();
        let reader = thread::spawn(move || {
            let guard = theirs.read().expect("read on a cluster");
            tx.send(guard.fencing_token()).unwrap();
            guard.unlock().expect("unlock on a cluster");
        });
        await_queue_len(&rw, 1);
        // Held for writing and waited for: every key in use exists, on that
        // master alone (a lone write lives in the meta: the holders zset
        // comes in with a second hold).
        let in_use = [1, 2].map(|i| keys[i].clone());
        cluster.assert_keys_only_on(master, slot, &in_use);
        let token = write.fencing_token();
        write.unlock().unwrap();
        let read = rx
            .recv_timeout(Duration::from_secs(3))
            .expect("the reader got it");
        assert!(read > token);
        join_within(reader, Duration::from_secs(5), "the reader");
        let status = rw.status(10).unwrap();
        assert_eq!((status.holder_count, status.queue_len), (0, 0));
        assert_eq!(status.last_fencing_token, Some(read));
    }
}

#[test]
fn a_fixed_lease_write_runs_out_unrenewed_and_the_readers_behind_get_in() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("fixed");
    assert_eq!(
        rw.with_fixed_lease(Duration::from_millis(1))
            .write()
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidConfig
    );
    let taken = Instant::now();
    let write = rw
        .with_fixed_lease(Duration::from_millis(400))
        .write()
        .unwrap();
    let signal = write.lease_signal();
    let (first, first_got) = spawn_taker(&server, "fixed", Want::Read, None);
    let (second, second_got) = spawn_taker(&server, "fixed", Want::Read, None);
    let (_, at) = first_got.recv_timeout(Duration::from_secs(5)).unwrap();
    second_got.recv_timeout(Duration::from_secs(5)).unwrap();
    let after = at.duration_since(taken);
    eprintln!("a fixed 400 ms write let the readers in {after:?} after it was taken");
    assert!(
        after >= Duration::from_millis(380),
        "renewed or freed early: {after:?}"
    );
    assert_eq!(signal.wait(), LeaseEnd::Lost);
    assert!(write.unlock().unwrap_err().is_lease_lost());
    join_within(first, Duration::from_secs(5), "first reader");
    join_within(second, Duration::from_secs(5), "second reader");
}

#[test]
fn force_unlock_frees_every_read_and_write_and_admits_the_head() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("forced");
    assert!(!rw.is_locked().unwrap());
    assert!(!rw.force_unlock().unwrap(), "nothing to free");
    // A reader of another client and one of ours hold it; a writer waits.
    let (release_other, release) = mpsc::channel();
    let (other, other_got) = spawn_taker(&server, "forced", Want::Read, Some(release));
    other_got.recv_timeout(Duration::from_secs(5)).unwrap();
    let read = rw.read().unwrap();
    let signal = read.lease_signal();
    assert!(rw.is_locked().unwrap());
    let (writer, got) = spawn_taker(&server, "forced", Want::Write, None);
    await_queue_len(&rw, 1);
    assert!(rw.force_unlock().unwrap());
    let (token, _) = got.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(token > read.fencing_token());
    assert!(wait_until(Duration::from_secs(5), || signal.ended()
        == Some(LeaseEnd::Lost)));
    assert!(read.unlock().unwrap_err().is_lease_lost());
    join_within(writer, Duration::from_secs(5), "writer");
    assert!(!rw.is_locked().unwrap());
    // The other client's reader lost its hold too: its unlock says so
    // (the taker's `expect` on it panics).
    release_other.send(()).unwrap();
    let panicked = other.join().is_err();
    assert!(panicked, "the other reader's unlock reported its lost hold");
}

/// What a recorded hold was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Took {
    Read,
    Upgradable,
    Write,
}

/// Spans of holds seen by several threads, each with what it held.
type Spans = Arc<Mutex<Vec<(Span, Took)>>>;

/// Panics when a write's span overlaps any other hold's, or two
/// upgradable reads' overlap, naming both.
fn assert_exclusions(spans: &[(Span, Took)]) {
    let plain: Vec<Span> = spans.iter().map(|(span, _)| *span).collect();
    for (a, b) in overlapping(&plain) {
        let (x, y) = (spans[a].1, spans[b].1);
        assert!(
            x != Took::Write && y != Took::Write && (x, y) != (Took::Upgradable, Took::Upgradable),
            "overlap: {:?} and {:?}",
            spans[a],
            spans[b]
        );
    }
}

/// Records in `spans` a hold of `what` believed held from `from` to now.
fn record(spans: &Spans, what: Took, from: Instant, token: u64) {
    let span = Span {
        from,
        to: Instant::now(),
        token,
    };
    spans.lock().unwrap().push((span, what));
}

#[test]
fn an_upgrade_waits_only_for_the_reads_before_it_and_a_downgrade_admits_the_reads_behind() {
    let _serial = serial();
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    // Unbound: the upgrade waits on a thread of its own.
    let rw_a = a.fair_rwlock("upgrade").unbound();
    let rw_b = b.fair_rwlock("upgrade");
    // An upgradable read shares with reads, and excludes writers and
    // other upgradable reads.
    let upgradable = rw_a.upgradable_read().unwrap();
    let u_token = upgradable.fencing_token();
    assert_eq!(upgradable.access(), Some(fairlock::Access::UpgradableRead));
    let read = rw_b.try_read().unwrap().expect("a read beside it");
    assert!(read.fencing_token() > u_token);
    let c = server.client();
    let rw_c = c.fair_rwlock("upgrade");
    assert!(rw_c.try_upgradable_read().unwrap().is_none());
    assert!(rw_c.try_write().unwrap().is_none());
    let status = rw_b.status(10).unwrap();
    assert_eq!(status.holder_count, 2);
    assert!(status
        .holders
        .iter()
        .any(|h| h.access == Some(fairlock::Access::UpgradableRead)));

    // The upgrade claims the head of the queue: readers and a writer
    // arriving after it wait behind it.
    let upgrader = thread::spawn(move || {
        let write = upgradable.upgrade().expect("upgrade");
        (write, Instant::now())
    });
    await_queue_len(&rw_b, 1);
    let mut behind = Vec::new();
    for want in [Want::Read, Want::Read, Want::Write] {
        let (release_tx, release) = mpsc::channel();
        let (handle, got) = spawn_taker(&server, "upgrade", want, Some(release));
        behind.push((want, handle, got, release_tx));
        await_queue_len(&rw_b, behind.len() + 1);
    }
    assert_eq!(
        rw_b.status(10).unwrap().waiters[0].access,
        Some(fairlock::Access::Write),
        "the claim heads the queue"
    );
    thread::sleep(Duration::from_millis(100));
    assert!(!upgrader.is_finished(), "upgraded while a read was held");
    for (_, _, got, _) in &behind {
        assert!(got.try_recv().is_err(), "someone passed the upgrade");
    }
    let released = Instant::now();
    let r_token = read.fencing_token();
    read.unlock().unwrap();
    let (write, upgraded_at) = join_within(upgrader, Duration::from_secs(5), "the upgrade");
    assert!(
        upgraded_at.duration_since(released) < Duration::from_secs(1),
        "the last read's release hands over the write at once: {:?}",
        upgraded_at.duration_since(released)
    );
    assert_eq!(write.access(), Some(fairlock::Access::Write));
    let w_token = write.fencing_token();
    assert!(
        w_token > r_token,
        "a new token, above the reads': {w_token} {r_token}"
    );
    assert!(rw_a.status(10).unwrap().is_write_held());
    for (_, _, got, _) in &behind {
        assert!(got.try_recv().is_err(), "someone beside the write");
    }

    // The downgrade admits the two reads queued behind it in its own step
    // (their tokens follow its own), not the writer behind them.
    let read = write.downgrade().unwrap();
    let d_token = read.fencing_token();
    assert!(d_token > w_token);
    assert_eq!(read.access(), Some(fairlock::Access::Read));
    let mut read_tokens = Vec::new();
    for (want, _, got, _) in &behind[..2] {
        assert_eq!(*want, Want::Read);
        let (token, _) = got.recv_timeout(Duration::from_secs(2)).expect("admitted");
        read_tokens.push(token);
    }
    read_tokens.sort_unstable();
    assert_eq!(
        read_tokens,
        [d_token + 1, d_token + 2],
        "admitted in the same step"
    );
    thread::sleep(Duration::from_millis(50));
    assert!(
        behind[2].2.try_recv().is_err(),
        "the writer waits for the reads"
    );
    read.unlock().unwrap();
    for (_, handle, got, release) in behind {
        release.send(()).unwrap();
        let token = join_within(handle, Duration::from_secs(5), "a taker");
        assert!(token > d_token);
        drop(got);
    }
    assert_eq!(rw_a.status(10).unwrap().holder_count, 0);
    assert_eq!(rw_a.queue_len().unwrap(), 0);
}

#[test]
fn would_be_upgraders_serialize_among_readers_and_writers_without_deadlock_or_overlap() {
    let _serial = serial();
    let server = RedisServer::start();
    let spans: Spans = Arc::default();
    let hold = || thread::sleep(Duration::from_millis(2));
    let mut threads = Vec::new();
    // 6 would-be upgraders (bound, and unbound upgrading on another
    // thread), 3 readers, 2 writers (half their writes downgraded), 5
    // rounds each, each on a client of its own.
    for i in 0..11usize {
        let client = server.client();
        let spans = Arc::clone(&spans);
        threads.push(thread::spawn(move || {
            let rw = client.fair_rwlock("many");
            for round in 0..5 {
                let wait = Wait::at_most(Duration::from_secs(20));
                match i {
                    0..=2 => {
                        let u = rw.upgradable_read_with(wait).unwrap().expect("in time");
                        let from = Instant::now();
                        hold();
                        let token = u.fencing_token();
                        let w = u.upgrade().expect("upgrade");
                        record(&spans, Took::Upgradable, from, token);
                        let from = Instant::now();
                        hold();
                        record(&spans, Took::Write, from, w.fencing_token());
                    }
                    3..=5 => {
                        let rw = rw.unbound();
                        let u = rw.upgradable_read_with(wait).unwrap().expect("in time");
                        let from = Instant::now();
                        hold();
                        let token = u.fencing_token();
                        let w = thread::spawn(move || u.upgrade().expect("upgrade"))
                            .join()
                            .unwrap();
                        record(&spans, Took::Upgradable, from, token);
                        let from = Instant::now();
                        hold();
                        record(&spans, Took::Write, from, w.fencing_token());
                    }
                    6..=8 => {
                        let r = rw.read_with(wait).unwrap().expect("in time");
                        let from = Instant::now();
                        hold();
                        record(&spans, Took::Read, from, r.fencing_token());
                    }
                    _ => {
                        let w = rw.write_with(wait).unwrap().expect("in time");
                        let from = Instant::now();
                        hold();
                        record(&spans, Took::Write, from, w.fencing_token());
                        if round % 2 == 0 {
                            let r = w.downgrade().unwrap();
                            let from = Instant::now();
                            hold();
                            record(&spans, Took::Read, from, r.fencing_token());
                        }
                    }
                }
            }
            client
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for handle in threads {
        let left = deadline.saturating_duration_since(Instant::now());
        join_within(handle, left, "a contender (deadlock?)");
    }
    let spans = spans.lock().unwrap();
    assert_eq!(
        spans.len(),
        6 * 5 * 2 + 3 * 5 + 2 * 5 + 2 * 3,
        "every hold recorded"
    );
    assert_exclusions(&spans);
    let client = server.client();
    let rw = client.fair_rwlock("many");
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
    assert_eq!(rw.queue_len().unwrap(), 0);
}

#[test]
fn every_way_of_waiting_for_an_upgrade_ends_with_the_read_kept_and_nothing_left() {
    let _serial = serial();
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let rw_a = a.fair_rwlock("waits").unbound();
    let rw_b = b.fair_rwlock("waits");
    let upgradable = rw_a.upgradable_read().unwrap();
    let read = rw_b.read().unwrap();
    // try: never queues.
    let upgradable = upgradable
        .try_upgrade()
        .unwrap()
        .expect_err("a read is held");
    assert_eq!(rw_b.queue_len().unwrap(), 0);
    // A deadline: the claim is withdrawn, and a read that queued behind
    // it gets in then.
    let started = Instant::now();
    let waiter = thread::spawn(move || upgradable.try_upgrade_for(Duration::from_millis(400)));
    await_queue_len(&rw_b, 1);
    let (handle, got) = spawn_taker(&server, "waits", Want::Read, None);
    await_queue_len(&rw_b, 2);
    let upgradable = join_within(waiter, Duration::from_secs(5), "the timed upgrade")
        .unwrap()
        .expect_err("timed out");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    got.recv_timeout(Duration::from_secs(2))
        .expect("the read behind the withdrawn claim got in");
    join_within(handle, Duration::from_secs(5), "the reader");
    assert_eq!(rw_b.queue_len().unwrap(), 0);
    // A canceller: the same.
    let cancel = WaitCanceller::new();
    let stopper = cancel.clone();
    let waiter =
        thread::spawn(move || upgradable.upgrade_with(Wait::forever().cancelled_by(&cancel)));
    await_queue_len(&rw_b, 1);
    stopper.cancel();
    let upgradable = join_within(waiter, Duration::from_secs(5), "the cancelled upgrade")
        .unwrap()
        .expect_err("cancelled");
    assert_eq!(rw_b.queue_len().unwrap(), 0);
    assert_eq!(upgradable.access(), Some(fairlock::Access::UpgradableRead));
    // Still held: with the read gone, try_upgrade takes the write at once.
    read.unlock().unwrap();
    let write = upgradable.try_upgrade().unwrap().expect("alone");
    // Down to an upgradable read and up again, then down to a read.
    let upgradable = write.downgrade_to_upgradable().unwrap();
    assert!(rw_b.try_read().unwrap().is_some(), "reads share again");
    assert!(rw_b.try_upgradable_read().unwrap().is_none());
    let write = upgradable.upgrade().unwrap();
    let read = write.downgrade().unwrap();
    assert!(
        rw_b.try_upgradable_read().unwrap().is_some(),
        "the read is plain now"
    );
    read.unlock().unwrap();

    // Thread-bound: a thread holding a read beside its upgradable read
    // would wait for itself; refused at once, its upgradable read given
    // back (the guard consumed), the read kept.
    let bound = rw_a.bound();
    let upgradable = bound.upgradable_read().unwrap();
    let inner = bound.read().unwrap(); // re-entered: read in upgradable read
    let err = upgradable.upgrade().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    drop(inner);
    // A thread holding a read asking for an upgradable read is refused.
    let plain = bound.read().unwrap();
    let err = bound.upgradable_read().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    drop(plain);
    assert_eq!(rw_b.status(10).unwrap().holder_count, 0);
    assert_eq!(rw_b.queue_len().unwrap(), 0);
}

#[test]
fn the_lease_signal_max_hold_and_force_unlock_carry_across_each_change() {
    let _serial = serial();
    let server = RedisServer::start();
    let lease = Duration::from_millis(150);
    let client = server.builder().lease(lease).build().unwrap();
    let other = server.client();
    let rw = client.fair_rwlock("carry");
    let rw_other = other.fair_rwlock("carry");

    // The watchdog renews the hold under each of its tokens, and the lease
    // signal taken from the upgradable read fires only at the end: two
    // leases pass under each. A lease of 450 ms (renewed every 150 ms): a
    // 150 ms one lost its hold to a busy machine's scheduling once.
    let renewed = Duration::from_millis(450);
    let renewing = server.builder().lease(renewed).build().unwrap();
    let upgradable = renewing.fair_rwlock("carry").upgradable_read().unwrap();
    let signal = upgradable.lease_signal();
    let write = upgradable.upgrade().unwrap();
    thread::sleep(2 * renewed);
    assert!(!write.is_lease_lost());
    assert_eq!(signal.ended(), None);
    let status = rw_other.status(10).unwrap();
    assert_eq!(status.holders[0].fencing_token, write.fencing_token());
    assert_eq!(status.holders[0].access, Some(fairlock::Access::Write));
    let read = write.downgrade().unwrap();
    thread::sleep(2 * renewed);
    assert!(!read.is_lease_lost());
    assert_eq!(signal.ended(), None);
    assert_eq!(signal.fencing_token(), read.fencing_token());
    read.unlock().unwrap();
    assert_eq!(
        signal.wait_timeout(Duration::from_secs(1)),
        Some(LeaseEnd::Released)
    );

    // The maximum hold counts from the first grant, whatever came after:
    // it ends by 550 ms, where one counted again from the upgrade would
    // (the renewed 450 ms lease: a 150 ms one lost the write to a busy
    // machine's scheduling before the 400 ms were up).
    let capped = renewing
        .fair_rwlock("carry")
        .with_max_hold(Duration::from_millis(400));
    let granted = Instant::now();
    let upgradable = capped.upgradable_read().unwrap();
    let signal = upgradable.lease_signal();
    thread::sleep(Duration::from_millis(150));
    let write = upgradable.upgrade().unwrap();
    thread::sleep(Duration::from_millis(100));
    let read = write.downgrade_to_upgradable().unwrap();
    assert_eq!(
        signal.wait_timeout(Duration::from_secs(2)),
        Some(LeaseEnd::MaxHold)
    );
    let at = granted.elapsed();
    assert!(
        at >= Duration::from_millis(390) && at < Duration::from_millis(550),
        "max hold reached {at:?} after the grant"
    );
    assert!(
        wait_until(Duration::from_secs(2), || rw_other
            .try_write()
            .unwrap()
            .is_some()),
        "the lock passed on after the max hold"
    );
    assert!(read.is_lease_lost());
    drop(read);

    // A force unlock while an upgrade waits: the upgrade fails as lost.
    let upgradable = rw.unbound().upgradable_read().unwrap();
    let signal = upgradable.lease_signal();
    let reader = rw_other.read().unwrap();
    let upgrader = thread::spawn(move || upgradable.upgrade());
    await_queue_len(&rw_other, 1);
    assert!(rw_other.force_unlock().unwrap());
    let err = join_within(upgrader, Duration::from_secs(3), "the upgrade")
        .expect_err("lost while it waited");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert_eq!(
        signal.wait_timeout(Duration::from_secs(1)),
        Some(LeaseEnd::Lost)
    );
    drop(reader);
    assert_eq!(rw_other.queue_len().unwrap(), 0);
    // And after an upgrade: the write's lease signal hears it, and a
    // downgrade of it says lost.
    let write = rw.upgradable_read().unwrap().upgrade().unwrap();
    let signal = write.lease_signal();
    assert!(rw_other.force_unlock().unwrap());
    assert_eq!(
        signal.wait_timeout(Duration::from_secs(2)),
        Some(LeaseEnd::Lost)
    );
    let err = write.downgrade().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert!(rw_other.try_write().unwrap().is_some());
}

/// An upgrade's timed wait returns by its deadline (and the grace of its
/// withdrawal and of the release) when Redis holds writes back as it runs
/// out: the withdrawal cannot be answered, so the upgrade fails
/// (`Connection`) and its guard is released, within that grace, not a
/// command timeout (1 s here) later; what it left the watchdog gives back
/// once writes resume.
#[test]
fn an_upgrade_that_times_out_in_a_stall_returns_by_its_deadline() {
    let _serial = serial();
    let server = RedisServer::start();
    let other = server.client();
    let client = server.stall_client();
    let name = "upgrade-in-a-stall";
    let rw = other.fair_rwlock(name);
    let read = rw.read().unwrap();
    let upgradable = client
        .fair_rwlock(name)
        .unbound()
        .upgradable_read()
        .unwrap();
    let patience = Duration::from_millis(1000);
    let started = Instant::now();
    let waiter = thread::spawn(move || {
        let got = upgradable.try_upgrade_for(patience);
        (got.map(|got| got.is_ok()), Instant::now())
    });
    await_queue_len(&rw, 1);
    let pause = Duration::from_millis(2500);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    let (got, returned) = join_within(waiter, Duration::from_secs(10), "the upgrade");
    let took = returned - started;
    eprintln!(
        "rwlock: try_upgrade_for({patience:?}) in a stall: {got:?} after {:.0} ms",
        ms(took)
    );
    assert!(
        took <= patience + Duration::from_millis(300),
        "returned {took:?} after a wait of {patience:?}: {got:?}"
    );
    assert!(got.is_err_and(|err| err.is_connection()));
    // Once writes resume, nothing of the client's is left.
    let left = || {
        let status = rw.status(10).unwrap();
        let ours = status
            .holders
            .iter()
            .any(|h| h.who.client_id() == client.id());
        ours || status.queue_len > 0
    };
    assert!(
        wait_until(Duration::from_secs(10), || !left()),
        "{:?}",
        rw.status(10)
    );
    eprintln!(
        "rwlock: nothing of the upgrade left {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
    drop(read);
}

/// An upgrade whose wait ends (its deadline, its canceller) over a link
/// with a round trip past 50 ms (a relay adding 30 ms each way) withdraws
/// its claim and keeps the upgradable read (`Ok(Err(read))`), as on a
/// fast link. Before, the withdrawal had 50 ms past the deadline for its
/// reply, which such a link cannot bring back: it failed as out of time,
/// the upgrade said `Connection` and its read was released.
#[test]
fn an_upgrade_whose_wait_ends_over_a_slow_link_keeps_its_read() {
    let server = RedisServer::start();
    let other = server.client();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(30));
    let client = Client::builder(&relay.url()).build().unwrap();
    let name = "upgrade-over-a-slow-link";
    let rw = other.fair_rwlock(name);
    let read = rw.read().unwrap();
    let mut upgradable = client.fair_rwlock(name).upgradable_read().unwrap();
    let ours = |access| {
        let status = rw.status(10).unwrap();
        let held = status
            .holders
            .iter()
            .any(|h| h.who.client_id() == client.id() && h.access == Some(access));
        (held, status.queue_len)
    };
    let patience = Duration::from_millis(1500);
    let cancelled = Duration::from_secs(1);
    for (how, by_cancel) in [("a deadline of 1.5 s", false), ("a cancel after 1 s", true)] {
        let cancel = WaitCanceller::new();
        let (wait, ends) = match by_cancel {
            false => (Wait::at_most(patience), patience),
            true => (Wait::forever().cancelled_by(&cancel), cancelled),
        };
        let cancelling = thread::spawn(move || {
            thread::sleep(cancelled);
            cancel.cancel();
        });
        let started = Instant::now();
        let got = upgradable.upgrade_with(wait);
        let took = started.elapsed();
        join_within(cancelling, Duration::from_secs(5), "the cancel");
        let said = got.as_ref().map(|got| got.as_ref().map(drop).map_err(drop));
        eprintln!(
            "rwlock: an upgrade over a 60 ms round trip ended by {how}: {said:?} after {:.0} ms",
            ms(took)
        );
        upgradable = match got {
            Ok(Err(read)) => read,
            other => panic!("{how}: {:?}", other.map(|got| got.map(drop).map_err(drop))),
        };
        assert!(!upgradable.is_lease_lost(), "{how}: the read counted lost");
        assert_eq!(
            ours(fairlock::Access::UpgradableRead),
            (true, 0),
            "{how}: the read is not held, or the claim left"
        );
        assert!(
            took < ends + Duration::from_millis(600),
            "{how}: returned {took:?} after a wait of {ends:?}"
        );
    }
    upgradable.unlock().unwrap();
    drop(read);
    assert!(rw.try_write().unwrap().is_some());
}

/// A change of access is one request: while Redis holds writes back
/// (`CLIENT PAUSE WRITE`, longer than the command timeout), a downgrade of
/// a write to a read or to an upgradable read, and a `try_upgrade`, each
/// fail (`Connection`) within one command timeout (1 s here), not after
/// another one spent releasing the guard they consume; what they leave
/// the watchdog gives back once writes resume.
#[test]
fn a_change_of_access_in_a_stall_returns_within_a_command_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let other = server.client();
    let client = server.stall_client();
    let names = [
        "downgrade-stall",
        "downgrade-upgradable-stall",
        "try-upgrade-stall",
    ];
    let rw = |name: &str| client.fair_rwlock(name).unbound();
    let write = rw(names[0]).write().unwrap();
    let write_too = rw(names[1]).write().unwrap();
    let upgradable = rw(names[2]).upgradable_read().unwrap();
    let pause = Duration::from_millis(3000);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    type Change = Box<dyn FnOnce() -> fairlock::Result<()> + Send>;
    let changes: [(&str, Change); 3] = [
        ("downgrade", Box::new(move || write.downgrade().map(drop))),
        (
            "downgrade_to_upgradable",
            Box::new(move || write_too.downgrade_to_upgradable().map(drop)),
        ),
        (
            "try_upgrade",
            Box::new(move || upgradable.try_upgrade().map(drop)),
        ),
    ];
    let running: Vec<_> = (changes.into_iter())
        .map(|(what, change)| {
            let started = Instant::now();
            (what, thread::spawn(move || (change(), started.elapsed())))
        })
        .collect();
    let ended: Vec<_> = (running.into_iter())
        .map(|(what, change)| (what, join_within(change, Duration::from_secs(10), what)))
        .collect();
    for (what, (got, took)) in &ended {
        eprintln!(
            "rwlock: {what} in a stall: {got:?} after {:.0} ms",
            ms(*took)
        );
    }
    for (what, (got, took)) in ended {
        assert!(
            took <= Duration::from_millis(1300),
            "{what} took {took:?} with a 1 s command timeout: {got:?}"
        );
        assert!(got.is_err_and(|err| err.is_connection()), "{what}");
    }
    // Once writes resume, nothing of the client's is left.
    for name in names {
        let observer = other.fair_rwlock(name);
        assert!(
            wait_until(Duration::from_secs(10), || !observer.is_locked().unwrap()),
            "{name}: {:?}",
            observer.status(10)
        );
    }
    eprintln!(
        "rwlock: nothing of the changes left {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
}

/// A thread that holds an upgradable read and asks for another is refused
/// (`UpgradeRefused`, nothing written), as one that holds a read is: only
/// one upgradable read is held at a time. Two held at once take more units
/// than the lock has, so they read as a write: every reader of every
/// client was kept out, though upgradable reads share with reads.
#[test]
fn an_upgradable_read_asked_again_by_its_thread_is_refused_and_readers_still_share() {
    let server = RedisServer::start();
    let (client, other) = (server.client(), server.client());
    let rw = client.fair_rwlock("upgradable-twice");
    let reader = other.fair_rwlock("upgradable-twice");
    let upgradable = rw.upgradable_read().unwrap();
    // (Kept until the end, if granted.)
    let second = rw.try_upgradable_read();
    let status = rw.status(10).unwrap();
    let read = reader.try_read().unwrap();
    let again = second
        .as_ref()
        .map(Option::is_some)
        .map_err(|err| err.kind());
    eprintln!(
        "a second upgradable read of the thread: {again:?}; {} holders, write held: {}; \
         another client's try_read: {}",
        status.holder_count,
        status.is_write_held(),
        if read.is_some() { "in" } else { "kept out" }
    );
    assert_eq!(again, Err(ErrorKind::UpgradeRefused));
    assert_eq!((status.holder_count, status.is_write_held()), (1, false));
    assert!(
        read.is_some(),
        "a reader was kept out by an upgradable read"
    );
    drop((read, upgradable, second));
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
}

/// Only one upgradable read is held at a time, whatever the path to a
/// second: an upgradable read asked by a thread that holds the write (a
/// re-entry) is refused, and so is a write's downgrade to one beside
/// another write of its thread (write in write): at Redis, before anything
/// changes, its write released (the guard consumed), the other kept, which
/// then becomes the upgradable read. Either way the readers share again
/// once the writes are gone.
#[test]
fn a_second_upgradable_read_through_a_write_of_the_thread_is_refused() {
    let server = RedisServer::start();
    let (client, other) = (server.client(), server.client());
    let rw = client.fair_rwlock("upgradable-in-write");
    let reader = other.fair_rwlock("upgradable-in-write");
    let shown = |what: &str| {
        let status = rw.status(10).unwrap();
        let read = reader.try_read().unwrap();
        eprintln!(
            "{what}: {} holders, write held: {}; another client's try_read: {}",
            status.holder_count,
            status.is_write_held(),
            if read.is_some() { "in" } else { "kept out" }
        );
        (status.holder_count, status.is_write_held(), read.is_some())
    };
    // An upgradable read inside the write, the write then downgraded.
    let write = rw.write().unwrap();
    let inside = rw.try_upgradable_read();
    let inside_kind = inside.as_ref().map(Option::is_some).map_err(|e| e.kind());
    let down = write.downgrade_to_upgradable().unwrap();
    eprintln!("an upgradable read inside the write: {inside_kind:?}");
    let first = shown("then the write downgraded to upgradable");
    drop((inside, down));
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
    // Two writes of the thread, both downgraded to upgradable.
    let (one, two) = (rw.write().unwrap(), rw.write().unwrap());
    let second = two.downgrade_to_upgradable();
    let one = one.downgrade_to_upgradable().unwrap();
    let second_kind = second.as_ref().map(|_| ()).map_err(|e| e.kind());
    eprintln!(
        "the inner write downgraded to upgradable: {second_kind:?} {}",
        second
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    let then = shown("then the outer one");
    assert_eq!(inside_kind, Err(ErrorKind::UpgradeRefused));
    assert_eq!(first, (1, false, true));
    assert_eq!(second_kind, Err(ErrorKind::UpgradeRefused));
    assert_eq!(then, (1, false, true));
    let write = one
        .try_upgrade()
        .unwrap()
        .expect("the kept upgradable read upgrades");
    drop((second, write));
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
}

/// A change of access that fails because the hold is gone (force
/// unlocked) says `LeaseLost`, and its release of the hold, which finds it
/// freed already, logs nothing: it used to warn that the watchdog would
/// give back a hold nobody had.
#[test]
fn a_change_of_access_on_a_freed_hold_logs_no_give_back() {
    crate::semaphore::warnings("");
    let server = RedisServer::start();
    let (client, admin) = (server.client(), server.client());
    let rw = client.fair_rwlock("changed-when-freed");
    let write = rw.write().unwrap();
    let upgradable = client
        .fair_rwlock("changed-when-freed-2")
        .upgradable_read()
        .unwrap();
    assert!(admin
        .fair_rwlock("changed-when-freed")
        .force_unlock()
        .unwrap());
    assert!(admin
        .fair_rwlock("changed-when-freed-2")
        .force_unlock()
        .unwrap());
    let down = write.downgrade().map(|_| ()).map_err(|e| e.kind());
    let up = upgradable.try_upgrade().map(|_| ()).map_err(|e| e.kind());
    let mut said = crate::semaphore::warnings("changed-when-freed");
    said.retain(|line| line.contains("gives it back"));
    eprintln!("downgrade: {down:?}, upgrade: {up:?}; warnings: {said:?}");
    assert_eq!(
        (down, up),
        (Err(ErrorKind::LeaseLost), Err(ErrorKind::LeaseLost))
    );
    assert!(said.is_empty(), "{said:?}");
}

/// A thread whose write Redis lost with a restart (told `Lost`), that then
/// reads again (a hold of its own, as the lock is free) and asks to write,
/// holds a read only as far as Redis knows: it gets `UpgradeRefused` at
/// once with nothing queued, never waits for its own read. Before, the
/// write asked named the lost write to Redis, which did not find it and
/// queued the call behind the thread's own read: `try_write_for(2 s)` came
/// back empty after 2 s, and `write()` waited for ever.
#[test]
fn a_write_asked_beside_a_write_lost_with_a_restart_and_a_read_is_refused_at_once() {
    let _serial = serial();
    let mut server = RedisServer::start();
    let client = server.client();
    let rwlock = client.fair_rwlock("rewritten-after-restart");
    let write = rwlock.write().unwrap();
    server.restart_after(Duration::from_millis(300));
    let told = write.lease_signal().wait_timeout(Duration::from_secs(5));
    assert_eq!(
        told,
        Some(LeaseEnd::Lost),
        "the write lost with the restart"
    );
    let read = rwlock.read().unwrap();
    let started = Instant::now();
    let rewrite = rwlock.try_write_for(Duration::from_secs(2));
    let took = started.elapsed();
    let outcome = rewrite
        .as_ref()
        .map(Option::is_some)
        .map_err(|err| err.kind());
    eprintln!(
        "rwlock: a write asked beside a write lost with a restart and a read: {outcome:?} after \
         {:.0} ms",
        ms(took)
    );
    assert_eq!(outcome, Err(ErrorKind::UpgradeRefused));
    assert!(
        took < Duration::from_secs(1),
        "refused at once, not after {took:?}"
    );
    assert_eq!(rwlock.queue_len().unwrap(), 0, "nothing queued");
    drop(rewrite);
    read.unlock().unwrap();
    let unlocked = write.unlock().map_err(|err| err.kind());
    assert_eq!(unlocked, Err(ErrorKind::LeaseLost));
    let status = rwlock.status(5).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
}

/// A thread-bound upgrade refused because its thread holds other guards of
/// the lock consumes its guard and gives the upgradable read back (its
/// documented error path); its error said "nothing was changed" and named
/// no call, so a caller read it as the read still held. It names the call
/// and the lock, as every call's error does, and says the read was given
/// back and the other guards kept.
#[test]
fn a_refused_upgrade_says_its_upgradable_read_was_given_back() {
    let server = RedisServer::start();
    let (client, other) = (server.client(), server.client());
    let rw = client.fair_rwlock("refused-upgrade");
    let upgradable = rw.upgradable_read().unwrap();
    let inner = rw.read().unwrap(); // re-entered: read in upgradable read
    let err = upgradable.try_upgrade().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    let said = err.to_string();
    assert!(
        said.starts_with("upgrade of rwlock \"refused-upgrade\": "),
        "{said}"
    );
    assert!(!said.contains("nothing was changed"), "{said}");
    assert!(said.contains("upgradable read was given back"), "{said}");
    // So it is: another client takes an upgradable read beside the read
    // the thread kept.
    let status = rw.status(10).unwrap();
    assert_eq!(status.holder_count, 1);
    let theirs = other.fair_rwlock("refused-upgrade").try_upgradable_read();
    assert!(theirs.unwrap().is_some(), "the upgradable read was kept");
    drop(inner);
}

/// A thread that holds an upgradable read and a read re-entered in it, and
/// asks to write, is refused (it would wait for itself) with the advice
/// that fits: upgrade the upgradable read it has, its other guards
/// released first. It used to be told to take an upgradable read and
/// upgrade it, as if it held only reads: the client named the newer read
/// to Redis rather than the upgradable read.
#[test]
fn a_write_asked_beside_an_upgradable_read_and_a_read_says_to_upgrade_it() {
    let server = RedisServer::start();
    let client = server.client();
    let rw = client.fair_rwlock("write-beside-upgradable");
    let upgradable = rw.upgradable_read().unwrap();
    let read = rw.read().unwrap(); // re-entered, after it: a newer token
    let err = rw.try_write().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    let said = err.to_string();
    assert!(said.contains("holds an upgradable read"), "{said}");
    assert!(
        said.contains(&format!("token {}", upgradable.fencing_token())),
        "{said}"
    );
    // Still a read re-enters through either, and an upgradable read is
    // still refused.
    let again = rw.try_read().unwrap().expect("read in read");
    let err = rw.try_upgradable_read().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    drop((again, read, upgradable));
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
}

/// A server restarted while an upgradable read's upgrade waits for another
/// client's read, a writer and a reader queued behind its claim: from its
/// AOF (nothing lost) the upgrade still waits, gets the write once the read
/// goes, and the writer and reader follow, in order; restarted empty, the
/// upgrade fails as lost (the read it stood on is gone), the read's guard
/// is told, and the writer and reader (of separate clients: in the order
/// they ask again) get in. Every token after the restart is above every
/// token issued before it.
#[test]
fn an_upgrade_waiting_through_a_restart_keeps_or_loses_its_read_and_tokens_go_on_rising() {
    let _serial = serial();
    for aof in [true, false] {
        let mut server = if aof {
            RedisServer::start_with(&["--appendonly", "yes"])
        } else {
            RedisServer::start()
        };
        let name = format!("upgrade-through-a-restart-{aof}");
        let (a, b) = (server.client(), server.client());
        let rw_a = a.fair_rwlock(&name).unbound();
        let rw_b = b.fair_rwlock(&name);
        let upgradable = rw_a.upgradable_read().unwrap();
        let read = rw_b.read().unwrap();
        let before = upgradable.fencing_token().max(read.fencing_token());
        let read_signal = read.lease_signal();
        let upgrader = thread::spawn(move || upgradable.upgrade());
        await_queue_len(&rw_b, 1);
        let mut behind = Vec::new();
        for want in [Want::Write, Want::Read] {
            let (handle, got) = spawn_taker(&server, &name, want, None);
            behind.push((want, handle, got));
            await_queue_len(&rw_b, behind.len() + 1);
        }

        server.restart_after(Duration::from_millis(300));
        let back = Instant::now();
        let write_token = if aof {
            thread::sleep(Duration::from_millis(500));
            assert!(!upgrader.is_finished(), "aof: the upgrade still waits");
            assert!(!read.is_lease_lost(), "aof: the read kept");
            let r_token = read.fencing_token();
            read.unlock().expect("aof: the read's unlock");
            let write = join_within(upgrader, Duration::from_secs(5), "the upgrade")
                .expect("aof: the upgrade gets the write once the read goes");
            let token = write.fencing_token();
            assert!(token > r_token, "write {token} after read {r_token}");
            write.unlock().unwrap();
            Some(token)
        } else {
            let upgraded = join_within(upgrader, Duration::from_secs(5), "the upgrade");
            let err = upgraded.expect_err("empty: the upgradable read is gone");
            eprintln!("aof {aof}: the upgrade: {err}");
            assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
            assert_eq!(
                read_signal.wait_timeout(Duration::from_secs(3)),
                Some(LeaseEnd::Lost)
            );
            drop(read);
            None
        };
        let mut tokens = Vec::new();
        for (want, handle, got) in behind {
            let (token, _) = got
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("aof {aof}: the queued {want:?} never got in"));
            join_within(handle, Duration::from_secs(5), "a taker");
            tokens.push(token);
        }
        eprintln!(
            "aof {aof}: before {before}, upgrade's write {write_token:?}, then {tokens:?}, \
             {:?} after the server was back",
            back.elapsed()
        );
        let floor = write_token.unwrap_or(before);
        assert!(
            tokens.iter().all(|&t| t > floor),
            "{tokens:?} after {floor}"
        );
        // Their queue kept, they come in its order; lost, waiters of
        // separate clients join it again as each learns (docs/guarantees.md).
        assert!(!aof || tokens[1] > tokens[0], "{tokens:?}");
        assert!(wait_until(Duration::from_secs(3), || {
            rw_b.queue_len().unwrap() == 0 && rw_b.status(10).unwrap().holder_count == 0
        }));
    }
}

/// An upgrade waiting for a read whose holder process is SIGKILLed gets
/// the write once that read's lease runs out (its claim's own poll: no
/// script runs when a lease ends), a writer queued behind its claim after
/// it, with larger tokens.
#[test]
fn an_upgrade_waiting_for_a_killed_readers_read_gets_the_write_when_its_lease_runs_out() {
    let _serial = serial();
    let server = RedisServer::start();
    let name = "upgrade-behind-a-killed-reader";
    let client = server.client();
    let rw = client.fair_rwlock(name).unbound();
    let upgradable = rw.upgradable_read().unwrap();
    let mut child = HolderChild::start(
        CHILD,
        &server.url(),
        name,
        Duration::from_millis(1000),
        Held::Read,
    );
    let read_token = child.token_within(Duration::from_secs(10));
    let upgrader = thread::spawn(move || {
        let write = upgradable.upgrade().expect("upgrade");
        (write.fencing_token(), Instant::now(), write)
    });
    await_queue_len(&client.fair_rwlock(name), 1);
    let (writer, got) = spawn_taker(&server, name, Want::Write, None);
    await_queue_len(&client.fair_rwlock(name), 2);
    let killed = child.kill();
    let (token, at, write) = join_within(upgrader, Duration::from_secs(5), "the upgrade");
    let waited = at.duration_since(killed);
    eprintln!("the upgrade got the write {waited:?} after the reader's kill (lease 1 s)");
    assert!(token > read_token);
    assert!(waited < Duration::from_millis(2500), "{waited:?}");
    assert!(got.try_recv().is_err(), "the writer passed the upgrade");
    write.unlock().unwrap();
    let (w_token, _) = got
        .recv_timeout(Duration::from_secs(3))
        .expect("the writer");
    assert!(w_token > token);
    join_within(writer, Duration::from_secs(5), "the writer");
}

/// A revocation that comes while an upgrade waits for another client's
/// read asks the upgradable read and that read: the read lets go, the
/// claim is settled, and the write it became is still asked (it is the
/// hold the revocation asked: its guard says so at once and its renewals
/// keep saying so); a write taken after it is not asked.
#[test]
fn a_revocation_during_an_upgrade_still_asks_the_write_it_becomes() {
    let _serial = serial();
    let server = RedisServer::start();
    let name = "revoked-while-upgrading";
    let (a, b) = (server.client(), server.client());
    let upgradable = a.fair_rwlock(name).unbound().upgradable_read().unwrap();
    let read = b.fair_rwlock(name).read().unwrap();
    let upgrader = thread::spawn(move || upgradable.upgrade().expect("upgrade"));
    await_queue_len(&b.fair_rwlock(name), 1);
    assert_eq!(b.fair_rwlock(name).revoke().unwrap(), 2);
    assert!(
        wait_until(Duration::from_secs(2), || read.is_revoked()),
        "the read was not asked"
    );
    read.unlock().unwrap();
    let write = join_within(upgrader, Duration::from_secs(5), "the upgrade");
    assert!(write.is_revoked(), "the write the asked read became");
    // Past a renewal (lease 2 s, renewed every 333 ms).
    thread::sleep(Duration::from_millis(400));
    assert!(write.is_revoked() && !write.is_lease_lost());
    write.unlock().unwrap();
    let next = b.fair_rwlock(name).write().unwrap();
    thread::sleep(Duration::from_millis(400));
    assert!(!next.is_revoked(), "a write taken after the revocation");
    next.unlock().unwrap();
}

/// An upgrading client cut off (its link stalled) while its claim waits
/// for another client's read, a writer queued behind the claim: the read
/// released settles the claim at Redis into a write the cut-off client
/// never hears of; the writer gets the lock once that write's lease (the
/// upgradable read's) runs out, and only after the cut-off client counted
/// its hold lost; its upgrade fails `LeaseLost`.
#[test]
fn a_cut_off_upgrader_knows_its_hold_lost_before_the_writer_behind_its_claim_gets_it() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let lease = Duration::from_secs(1);
    let cut_off = Client::builder(&relay.url())
        .lease(lease)
        .waiter_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let name = "cut-off-upgrader";
    let direct = server.client();
    let rw = direct.fair_rwlock(name);
    let upgradable = cut_off
        .fair_rwlock(name)
        .unbound()
        .upgradable_read()
        .unwrap();
    let u_token = upgradable.fencing_token();
    let signal = upgradable.lease_signal();
    let read = rw.read().unwrap();
    let upgrader = thread::spawn(move || upgradable.upgrade().map(|w| w.fencing_token()));
    await_queue_len(&rw, 1);
    let (writer, got) = spawn_taker(&server, name, Want::Write, None);
    await_queue_len(&rw, 2);
    relay.stall();
    let stalled = Instant::now();
    read.unlock().unwrap();
    let (token, granted) = got
        .recv_timeout(lease + Duration::from_secs(4))
        .expect("the writer behind the claim");
    let fired = signal.ended();
    eprintln!(
        "cut-off upgrader: the writer held {:?} after the stall; the upgradable read's signal \
         {fired:?}",
        granted - stalled
    );
    assert_eq!(
        fired,
        Some(LeaseEnd::Lost),
        "not counted lost when the writer got it"
    );
    assert!(token > u_token);
    relay.resume();
    let upgraded = join_within(upgrader, Duration::from_secs(5), "the upgrade");
    eprintln!("cut-off upgrader: the upgrade: {upgraded:?}");
    assert_eq!(upgraded.map_err(|e| e.kind()), Err(ErrorKind::LeaseLost));
    join_within(writer, Duration::from_secs(5), "the writer");
    assert!(wait_until(Duration::from_secs(3), || {
        rw.queue_len().unwrap() == 0 && rw.status(10).unwrap().holder_count == 0
    }));
}

/// An upgrader that goes silent (its link stalled; lease 30 s, waiter
/// timeout 1 s) while its claim heads the queue, another client's read
/// held: its claim lapses with its liveness deadline, and a reader queued
/// behind the claim gets in beside the reads within about the waiter
/// timeout, not when the upgradable read's 30 s lease runs out.
#[test]
fn a_silent_upgraders_claim_lapses_and_the_readers_behind_it_get_in() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let silent = Client::builder(&relay.url())
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let name = "silent-upgrader";
    let direct = server.client();
    let rw = direct.fair_rwlock(name);
    let upgradable = silent
        .fair_rwlock(name)
        .unbound()
        .upgradable_read()
        .unwrap();
    let read = rw.read().unwrap();
    let upgrader = thread::spawn(move || upgradable.upgrade().map(drop));
    await_queue_len(&rw, 1);
    let (reader, got) = spawn_taker(&server, name, Want::Read, None);
    await_queue_len(&rw, 2);
    relay.stall();
    let stalled = Instant::now();
    let (_, at) = got
        .recv_timeout(Duration::from_secs(10))
        .expect("the reader behind the lapsed claim");
    eprintln!(
        "silent upgrader: the reader behind its claim got in {:?} after the stall",
        at - stalled
    );
    assert!(at - stalled < Duration::from_secs(3), "{:?}", at - stalled);
    join_within(reader, Duration::from_secs(5), "the reader");
    relay.resume();
    read.unlock().unwrap();
    let upgraded = join_within(upgrader, Duration::from_secs(10), "the upgrade");
    eprintln!("silent upgrader: the upgrade after the stall: {upgraded:?}");
}

/// An upgrade whose wait ends after its client counted the upgradable read
/// lost (a fixed lease of 1.5 s, counted out 475 ms before Redis frees it
/// by a drift allowance of 25% + 100 ms; the wait ends between the two)
/// says `LeaseLost`, as one that is settled then does: it used to hand the
/// read back as if it were still held (`Ok(Err(read))`, its
/// `is_lease_lost()` true).
#[test]
fn an_upgrade_whose_wait_ends_after_its_read_was_counted_lost_says_lease_lost() {
    let server = RedisServer::start();
    let client = Client::builder(&server.url())
        .clock_drift(0.25, Duration::from_millis(100))
        .build()
        .unwrap();
    let name = "upgrade-counted-lost";
    let upgradable = (client.fair_rwlock(name).unbound())
        .with_fixed_lease(Duration::from_millis(1500))
        .upgradable_read()
        .unwrap();
    let granted = Instant::now();
    let other = server.client();
    let read = other.fair_rwlock(name).read().unwrap();
    let wait = Duration::from_millis(1250).saturating_sub(granted.elapsed());
    let upgraded = upgradable.try_upgrade_for(wait);
    let at = granted.elapsed();
    let got = upgraded.map(|got| got.map_err(|read| read.is_lease_lost()));
    eprintln!("upgrade ended {at:?} after the grant: {got:?}");
    assert!(
        at < Duration::from_millis(1450),
        "{at:?}: Redis had freed it"
    );
    assert_eq!(got.map_err(|e| e.kind()).err(), Some(ErrorKind::LeaseLost));
    drop(read);
}

/// A thread's write downgraded beside its re-entered write (write in
/// write) lets nobody in: a reader of another client queued behind stays
/// queued until the other write goes too; then it gets in beside the read.
#[test]
fn a_downgrade_beside_a_reentered_write_lets_nobody_in_until_that_write_goes() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "downgrade-reentered";
    let rw = client.fair_rwlock(name);
    let (outer, inner) = (rw.write().unwrap(), rw.write().unwrap());
    let (reader, got) = spawn_taker(&server, name, Want::Read, None);
    await_queue_len(&rw, 1);
    let read = inner.downgrade().unwrap();
    assert!(read.fencing_token() > outer.fencing_token());
    assert!(
        got.recv_timeout(Duration::from_millis(300)).is_err(),
        "a read beside a write"
    );
    assert_eq!(rw.queue_len().unwrap(), 1);
    let outer = outer.downgrade().unwrap();
    got.recv_timeout(Duration::from_secs(2))
        .expect("the reader beside the two reads");
    join_within(reader, Duration::from_secs(5), "the reader");
    drop((outer, read));
    assert_eq!(rw.status(10).unwrap().holder_count, 0);
}
