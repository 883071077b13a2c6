//! The roles of tests/faults.rs: "worker" children lock and unlock on
//! command, "churn" children contend for 8 s, a "leak" child creates and
//! drops 50 clients, a "paused_waiter" child waits once with a fixed lease
//! and reports its grant.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::{Client, FairMutex};
use redis::Commands;

use crate::roles::faults::{
    counter_key, fast, log_key, DURATION_MS, FIXED_LEASE_MS, NAME, PAUSED_WAITER_LEASE, SEED,
    THREADS, URL, WAITER_TIMEOUT, WAITER_TIMEOUT_MS,
};
use crate::roles::{thread_count, wall_clock_ms, Rng};
use crate::timing::wait_until;
use crate::{child_arg, child_commands, say};

fn child_client() -> Client {
    fast(&child_arg::<String>(URL))
        .build()
        .expect("child: client connects")
}

/// Threads 0..FAULTS_THREADS of one client, each locking and unlocking
/// FAULTS_NAME on command: `<i> lock`, `<i> try <ms>`, `<i> unlock`,
/// `<i> lost`. Replies `<i> locked <token>`, `<i> none`, `<i> error <kind>`,
/// `<i> unlocked ok|<kind>`, `<i> lost true|false`. Says `ready <client id>
/// <wall clock ms>` first.
pub fn worker() {
    let threads: usize = child_arg(THREADS);
    let commands = child_commands();
    let client = child_client();
    let mutex = client.fair_mutex(&child_arg::<String>(NAME));
    let senders: Vec<mpsc::Sender<String>> = (0..threads)
        .map(|i| {
            let (tx, rx) = mpsc::channel();
            let mutex = mutex.clone();
            thread::spawn(move || worker_thread(i, &mutex, &rx));
            tx
        })
        .collect();
    say(format!("ready {} {}", client.id(), wall_clock_ms()));
    for line in commands {
        let (thread, command) = line.split_once(' ').expect("child: `<thread> <command>`");
        let thread: usize = thread.parse().expect("child: thread number");
        senders[thread].send(command.to_owned()).unwrap();
    }
}

fn worker_thread(i: usize, mutex: &FairMutex, commands: &mpsc::Receiver<String>) {
    let mut guard: Option<fairlock::FairMutexGuard> = None;
    for command in commands {
        let words: Vec<&str> = command.split(' ').collect();
        let acquired = match words.as_slice() {
            ["lock"] => Some(mutex.lock().map(Some)),
            ["try", ms] => Some(mutex.try_lock_for(Duration::from_millis(ms.parse().unwrap()))),
            ["unlock"] => {
                let result = guard
                    .take()
                    .expect("child: unlock without a guard")
                    .unlock();
                match result {
                    Ok(()) => say(format!("{i} unlocked ok")),
                    Err(err) => say(format!("{i} unlocked {:?}", err.kind())),
                }
                None
            }
            ["lost"] => {
                let lost = guard.as_ref().is_some_and(|g| g.is_lease_lost());
                say(format!("{i} lost {lost}"));
                None
            }
            other => panic!("child: unknown command {other:?}"),
        };
        match acquired {
            Some(Ok(Some(g))) => {
                say(format!("{i} locked {}", g.fencing_token()));
                guard = Some(g);
            }
            Some(Ok(None)) => say(format!("{i} none")),
            Some(Err(err)) => say(format!("{i} error {:?}", err.kind())),
            None => {}
        }
    }
}

/// FAULTS_THREADS threads contend for FAULTS_NAME for FAULTS_DURATION_MS
/// after the parent says `go`: random `try_lock_for` timeouts, and inside the
/// critical section a non-atomic read-modify-write of a counter (GET, pause,
/// SET) whose SET goes in one MULTI with an RPUSH of the token to a log, so
/// the log's length counts exactly the sections that wrote. Says
/// `cs <thread> <token>` after each section's write, `lost ...` if a guard
/// found its lease lost, `error ...` for any error, and `done <sections>
/// <timeouts> <errors>` at the end.
pub fn churn() {
    let threads: u64 = child_arg(THREADS);
    let duration = Duration::from_millis(child_arg(DURATION_MS));
    let seed: u64 = child_arg(SEED);
    let name: String = child_arg(NAME);
    let url: String = child_arg(URL);
    let commands = child_commands();
    let client = child_client();
    let raw = redis::Client::open(url.as_str()).unwrap();
    say(format!("ready {}", client.id()));
    assert_eq!(commands.recv().unwrap(), "go");
    // `linger <ms>`: the next critical section holds that long after its write.
    let linger = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let linger = std::sync::Arc::clone(&linger);
        thread::spawn(move || {
            for line in commands {
                if let Some(ms) = line.strip_prefix("linger ") {
                    linger.store(ms.parse().unwrap(), std::sync::atomic::Ordering::SeqCst);
                }
            }
        });
    }
    let start = Instant::now();
    let handles: Vec<JoinHandle<(u64, u64, u64)>> = (0..threads)
        .map(|i| {
            let mutex = client.fair_mutex(&name);
            let mut conn = raw.get_connection().expect("child: raw connection");
            let (counter, log) = (counter_key(&name), log_key(&name));
            let mut rng = Rng::new(seed * 64 + i);
            let linger = std::sync::Arc::clone(&linger);
            thread::spawn(move || {
                let (mut sections, mut timeouts, mut errors) = (0, 0, 0);
                while start.elapsed() < duration {
                    let (patience, asked) = (rng.millis(20, 400), Instant::now());
                    match mutex.try_lock_for(patience) {
                        Ok(Some(guard)) => {
                            let value: Option<u64> = conn.get(&counter).unwrap();
                            thread::sleep(rng.millis(0, 3));
                            let token = guard.fencing_token();
                            let () = redis::pipe()
                                .atomic()
                                .set(&counter, value.unwrap_or(0) + 1)
                                .ignore()
                                .rpush(&log, token)
                                .ignore()
                                .query(&mut conn)
                                .unwrap();
                            if guard.is_lease_lost() {
                                say(format!("lost {i} {token}"));
                            }
                            let lingering = linger.swap(0, std::sync::atomic::Ordering::SeqCst);
                            if lingering > 0 {
                                say(format!("cs {i} {token} lingering"));
                                thread::sleep(Duration::from_millis(lingering));
                            } else {
                                say(format!("cs {i} {token}"));
                            }
                            sections += 1;
                            thread::sleep(rng.millis(0, 5));
                            let released = if rng.below(4) == 0 {
                                drop(guard);
                                Ok(())
                            } else {
                                guard.unlock()
                            };
                            if let Err(err) = released {
                                errors += 1;
                                say(format!("error {i} unlock {:?} {err}", err.kind()));
                            }
                        }
                        Ok(None) => timeouts += 1,
                        // The deadline passed before the first request was
                        // answered (its reply late on a loaded machine):
                        // `Connection` at the deadline, as docs/failures.md
                        // says; what it sent is abandoned, and leaves
                        // nothing.
                        Err(err) if err.is_connection() && asked.elapsed() >= patience => {
                            timeouts += 1
                        }
                        Err(err) => {
                            errors += 1;
                            say(format!("error {i} lock {:?} {err}", err.kind()));
                        }
                    }
                    thread::sleep(rng.millis(0, 5));
                }
                (sections, timeouts, errors)
            })
        })
        .collect();
    let (mut sections, mut timeouts, mut errors) = (0, 0, 0);
    for handle in handles {
        let (s, t, e) = handle.join().unwrap();
        sections += s;
        timeouts += t;
        errors += e;
    }
    say(format!("done {sections} {timeouts} {errors}"));
}

/// Creates and drops 50 clients, each of which held a lock, queued a waiter
/// that timed out and was dropped while holding; says `before <threads>`,
/// then `after <threads>` once the thread count is back (or 10 s passed),
/// then waits to be told to exit.
pub fn leak() {
    let commands = child_commands();
    let name: String = child_arg(NAME);
    let before = thread_count();
    say(format!("before {before}"));
    for _ in 0..50 {
        let client = child_client();
        let mutex = client.fair_mutex(&name);
        let guard = mutex.lock().unwrap();
        let waiter = {
            let mutex = mutex.clone();
            thread::spawn(move || {
                mutex
                    .try_lock_for(Duration::from_millis(30))
                    .map(|g| g.is_some())
            })
        };
        assert!(
            !waiter.join().unwrap().unwrap(),
            "child: the waiter got a held lock"
        );
        guard.unlock().unwrap();
        let guard = mutex.lock().unwrap();
        drop(client);
        drop(mutex);
        drop(guard); // the last handle: releases, then stops the client
    }
    wait_until(Duration::from_secs(10), || thread_count() == before);
    say(format!("after {}", thread_count()));
    for line in commands {
        if line == "exit" {
            return;
        }
    }
}

/// Says `ready <client id>`, then one thread calls `lock()` on FAULTS_NAME
/// with a fixed lease of [`PAUSED_WAITER_LEASE`]. As soon as it returns it
/// says `granted <token> lost=<is_lease_lost>` (measured first thing), then
/// `unlocked ok|<kind>` for its `unlock()`; or `lock error <kind>`. Then it
/// waits for stdin to close.
pub fn paused_waiter() {
    let commands = child_commands();
    let ms_or = |name: &str, default: Duration| {
        std::env::var(name).map_or(default, |_| Duration::from_millis(child_arg(name)))
    };
    let client = fast(&child_arg::<String>(URL))
        .waiter_timeout(ms_or(WAITER_TIMEOUT_MS, WAITER_TIMEOUT))
        .build()
        .expect("child: client connects");
    let mutex = client
        .fair_mutex(&child_arg::<String>(NAME))
        .with_fixed_lease(ms_or(FIXED_LEASE_MS, PAUSED_WAITER_LEASE));
    say(format!("ready {}", client.id()));
    let waiting = thread::spawn(move || match mutex.lock() {
        Ok(guard) => {
            let lost = guard.is_lease_lost();
            say(format!("granted {} lost={lost}", guard.fencing_token()));
            match guard.unlock() {
                Ok(()) => say("unlocked ok"),
                Err(err) => say(format!("unlocked {:?}", err.kind())),
            }
        }
        Err(err) => say(format!("lock error {:?}", err.kind())),
    });
    waiting.join().expect("child: the waiting thread panicked");
    for _ in commands {}
}
