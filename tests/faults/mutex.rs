//! The mutex's faults, one test each, against real redis-servers and real processes:
//! killed holders and waiters, long holds, skewed client clocks, a Redis
//! restart that loses its data, a killed subscription, a stalled server, an
//! unreachable server, mutual exclusion under churn with a killed process,
//! and no leaks, and a waiter that reads its handoff only after the lease
//! it was handed ran out (its bytes held back by a relay, or the process
//! stopped by SIGSTOP), or only seems to have (f12b). Every wait is bounded; each test prints what it
//! measured.
//!
//! Child processes are the test support's `fairlock-test-child` binary run
//! with a role and the `FAULTS_*` variables (see `Children` and `roles` in
//! tests/support, and tests/support/child/faults.rs): "worker" children lock
//! and unlock on command, "churn" children contend for 8 s, a "leak" child
//! creates and drops 50 clients, a "paused_waiter" child waits once with a
//! fixed lease and reports its grant.

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock::{Client, ErrorKind, FairMutex};
use fairlock_test_support::roles::faults::{
    counter_key, fast, log_key, DURATION_MS, FIXED_LEASE_MS, LEASE, NAME, PAUSED_WAITER_LEASE,
    SEED, THREADS, URL, WAITER_TIMEOUT, WAITER_TIMEOUT_MS,
};
use fairlock_test_support::roles::Rng;
use fairlock_test_support::*;
use redis::Commands;

/// How long a child may take to start and connect, on a loaded machine.
const STARTUP: Duration = Duration::from_secs(20);
/// The child process binary (tests/support/child/), built for these tests.
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

// ---------------------------------------------------------------------------
// Parent-side helpers.

/// Starts a "worker" child with `threads` threads on `name`; waits until it
/// is connected. Returns its index and the `ready` event.
fn spawn_worker(
    children: &mut Children,
    server: &RedisServer,
    name: &str,
    threads: usize,
    env: &[(&str, String)],
) -> (usize, Event) {
    let mut vars = vec![
        (URL, server.url()),
        (NAME, name.to_owned()),
        (THREADS, threads.to_string()),
    ];
    vars.extend(env.iter().cloned());
    let child = children.spawn("worker", &vars);
    let ready = children.expect_prefix(child, "ready", STARTUP);
    (child, ready)
}

fn token_of(event: &Event) -> u64 {
    event.words()[2].parse().expect("a token")
}

/// Sends `<thread> lock` to a worker and waits until the lock's queue has
/// `queued` live waiters (so arrival order is the order of these calls).
fn queue_worker(
    children: &mut Children,
    observer: &FairMutex,
    (child, thread): (usize, usize),
    queued: usize,
) {
    children.send(child, &format!("{thread} lock"));
    assert!(
        wait_until(Duration::from_secs(10), || observer.queue_len().unwrap()
            == queued),
        "child {child} thread {thread} did not queue (queue_len {})",
        observer.queue_len().unwrap()
    );
}

/// Waits for `who` to report the lock; panics if someone else reports it first.
fn expect_grant(
    children: &mut Children,
    (child, thread): (usize, usize),
    timeout: Duration,
) -> Event {
    let event = children.expect(
        timeout,
        &format!("a grant (child {child} thread {thread} is next)"),
        |e| e.words().get(1) == Some(&"locked"),
    );
    assert_eq!(
        (event.child, event.words()[0]),
        (child, thread.to_string().as_str()),
        "granted out of order: {event:?}"
    );
    event
}

/// Tells a worker thread to unlock and waits for `ok`; returns when it was told.
fn unlock_worker(children: &mut Children, (child, thread): (usize, usize)) -> Instant {
    let at = Instant::now();
    children.send(child, &format!("{thread} unlock"));
    children.expect_text(
        child,
        &format!("{thread} unlocked ok"),
        Duration::from_secs(5),
    );
    at
}

fn no_grant_reported(children: &mut Children) -> Vec<Event> {
    children.take_ready(|e| e.words().get(1) == Some(&"locked"))
}

/// Owner id and token of the holder of `name`, read straight from Redis.
fn raw_holder(server: &RedisServer, name: &str) -> Option<(String, u64)> {
    let mut conn = server.conn();
    let keys: Vec<String> = conn.keys(format!("fairlock:*:lock:{name}")).unwrap();
    let (owner, token, _) = holder_of(&mut conn, keys.first()?)?;
    Some((owner, token.parse().ok()?))
}

/// The lock is free, nobody is queued, and every key has a TTL.
fn assert_clean(server: &RedisServer, mutex: &FairMutex) {
    assert!(
        wait_until(WAITER_TIMEOUT + Duration::from_secs(2), || {
            !mutex.is_locked().unwrap() && mutex.queue_len().unwrap() == 0
        }),
        "locked {:?}, queue_len {:?}",
        mutex.is_locked(),
        mutex.queue_len()
    );
    let mut conn = server.conn();
    assert_eq!(
        keys_without_ttl(&mut conn, "fairlock:*"),
        Vec::<String>::new()
    );
}

// ---------------------------------------------------------------------------
// 1-4: processes killed, long holds, skewed clocks.

#[test]
fn f1_a_killed_holder_process_frees_the_lock_within_lease_plus_1s() {
    let _serial = serial();
    let server = RedisServer::start();
    let observer_client = fast(&server.url()).build().unwrap();
    let observer = observer_client.fair_mutex("f1");
    let mut children = Children::new(CHILD);
    let (holder, _) = spawn_worker(&mut children, &server, "f1", 1, &[]);
    children.send(holder, "0 lock");
    let holder_token = token_of(&children.expect_prefix(holder, "0 locked", STARTUP));
    let (waiter, _) = spawn_worker(&mut children, &server, "f1", 1, &[]);
    queue_worker(&mut children, &observer, (waiter, 0), 1);

    // Two leases: the holder's watchdog keeps the lock while it lives.
    thread::sleep(2 * LEASE);
    assert_eq!(
        no_grant_reported(&mut children).len(),
        0,
        "granted while the holder lived"
    );
    let remaining = observer
        .remaining_lease()
        .unwrap()
        .expect("the child holds");
    let killed = children.kill(holder);
    let granted = expect_grant(&mut children, (waiter, 0), LEASE + Duration::from_secs(3));
    let took = granted.at - killed;
    eprintln!(
        "f1: holder SIGKILLed with {:.0} ms of its {LEASE:?} lease left -> waiter in another \
         process holds after {:.0} ms (bound: lease + 1 s)",
        ms(remaining),
        ms(took)
    );
    assert!(token_of(&granted) > holder_token);
    assert!(took < LEASE + Duration::from_secs(1), "took {took:?}");
    unlock_worker(&mut children, (waiter, 0));
    assert_clean(&server, &observer);
}

#[test]
fn f2_a_killed_head_waiter_delays_the_next_live_one_by_at_most_waiter_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = fast(&server.url()).build().unwrap();
    let mutex = holder_client.fair_mutex("f2");
    let holder = mutex.lock().unwrap();
    let mut children = Children::new(CHILD);
    let (dead, _) = spawn_worker(&mut children, &server, "f2", 1, &[]);
    let (a, _) = spawn_worker(&mut children, &server, "f2", 2, &[]);
    let (b, _) = spawn_worker(&mut children, &server, "f2", 1, &[]);
    // Queue: dead (head), a0, b0, a1 — survivors in two processes.
    let survivors = [(a, 0), (b, 0), (a, 1)];
    queue_worker(&mut children, &mutex, (dead, 0), 1);
    for (i, who) in survivors.iter().enumerate() {
        queue_worker(&mut children, &mutex, *who, i + 2);
    }

    // The harsh case: release at once, while the dead head's entry is still
    // within its deadline, so the lock may be handed to the dead process.
    children.kill(dead);
    let mut previous_token = holder.fencing_token();
    let mut released = Instant::now();
    holder.unlock().unwrap();
    for (i, who) in survivors.iter().enumerate() {
        let bound = if i == 0 {
            WAITER_TIMEOUT + Duration::from_secs(1)
        } else {
            Duration::from_secs(1)
        };
        let granted = expect_grant(&mut children, *who, bound + Duration::from_secs(2));
        let waited = granted.at - released;
        eprintln!(
            "f2: survivor {i} (child {} thread {}) holds {:.1} ms after the previous release \
             (bound {bound:?})",
            who.0,
            who.1,
            ms(waited)
        );
        assert!(waited < bound, "survivor {i} waited {waited:?}");
        assert!(token_of(&granted) > previous_token);
        previous_token = token_of(&granted);
        thread::sleep(Duration::from_millis(50));
        assert_eq!(no_grant_reported(&mut children).len(), 0, "two holders");
        released = unlock_worker(&mut children, *who);
    }
    assert_clean(&server, &mutex);
}

#[test]
fn f3_a_hold_of_ten_leases_evicts_none_of_five_waiters_in_three_processes() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = fast(&server.url()).build().unwrap();
    let mutex = holder_client.fair_mutex("f3");
    let holder = mutex.lock().unwrap();
    let mut children = Children::new(CHILD);
    let (a, _) = spawn_worker(&mut children, &server, "f3", 2, &[]);
    let (b, _) = spawn_worker(&mut children, &server, "f3", 2, &[]);
    let (c, _) = spawn_worker(&mut children, &server, "f3", 1, &[]);
    let order = [(a, 0), (b, 0), (c, 0), (a, 1), (b, 1)];
    for (i, who) in order.iter().enumerate() {
        queue_worker(&mut children, &mutex, *who, i + 1);
    }

    let started = Instant::now();
    let mut samples = 0;
    let mut least_lease = LEASE;
    while started.elapsed() < 10 * LEASE {
        assert_eq!(mutex.queue_len().unwrap(), 5, "a live waiter was evicted");
        assert!(!holder.is_lease_lost(), "the holder lost its lease");
        let left = mutex.remaining_lease().unwrap().expect("still held");
        least_lease = least_lease.min(left);
        samples += 1;
        thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        no_grant_reported(&mut children).len(),
        0,
        "granted during the hold"
    );
    eprintln!(
        "f3: held {:.1} s = {} leases; {samples} samples: 5 waiters queued throughout, \
         lease never below {:.0} ms",
        started.elapsed().as_secs_f64(),
        started.elapsed().as_millis() / LEASE.as_millis(),
        ms(least_lease)
    );
    let mut previous_token = holder.fencing_token();
    let mut released = Instant::now();
    holder.unlock().unwrap();
    let mut handoffs = Vec::new();
    for who in order {
        let granted = expect_grant(&mut children, who, Duration::from_secs(3));
        handoffs.push(ms(granted.at - released));
        assert!(token_of(&granted) > previous_token);
        previous_token = token_of(&granted);
        released = unlock_worker(&mut children, who);
    }
    eprintln!("f3: grants in arrival order; handoffs (ms): {handoffs:.1?}");
    assert!(handoffs.iter().all(|&h| h < 1000.0), "{handoffs:?}");
    assert_clean(&server, &mutex);
}

#[test]
fn f4_waiters_with_clocks_five_minutes_off_neither_evict_nor_are_evicted() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = fast(&server.url()).build().unwrap();
    let mutex = holder_client.fair_mutex("f4");
    let holder = mutex.lock().unwrap();
    let lib = libfaketime();
    let mut children = Children::new(CHILD);
    // +5 min: wall clock and monotonic clock both shifted (libfaketime's
    // default). -5 min: wall clock only (DONT_FAKE_MONOTONIC=1); a monotonic
    // clock 5 min back could go below zero on a freshly booted machine.
    let ahead = [("LD_PRELOAD", lib.clone()), ("FAKETIME", "+5m".to_owned())];
    let behind = [
        ("LD_PRELOAD", lib),
        ("FAKETIME", "-5m".to_owned()),
        ("DONT_FAKE_MONOTONIC", "1".to_owned()),
    ];
    let mut skews = Vec::new();
    let mut spawn = |env: &[(&str, String)]| {
        let (child, ready) = spawn_worker(&mut children, &server, "f4", 1, env);
        let their_clock: i64 = ready.words()[2].parse().unwrap();
        skews.push(their_clock - wall_clock_ms());
        child
    };
    let fast_clock = spawn(&ahead);
    let slow_clock = spawn(&behind);
    let true_clock = spawn(&[]);
    eprintln!("f4: child clock skews (ms): {skews:?}");
    assert!(
        (skews[0] - 300_000).abs() < 10_000,
        "faketime +5m not in effect: {skews:?}"
    );
    assert!(
        (skews[1] + 300_000).abs() < 10_000,
        "faketime -5m not in effect: {skews:?}"
    );
    assert!(skews[2].abs() < 10_000, "{skews:?}");
    let order = [(fast_clock, 0), (slow_clock, 0), (true_clock, 0)];
    for (i, who) in order.iter().enumerate() {
        queue_worker(&mut children, &mutex, *who, i + 1);
    }

    // Three waiter timeouts: a client clock in any deadline would evict.
    let started = Instant::now();
    while started.elapsed() < 3 * WAITER_TIMEOUT {
        assert_eq!(
            mutex.queue_len().unwrap(),
            3,
            "a skewed waiter evicted or was evicted"
        );
        thread::sleep(Duration::from_millis(100));
    }
    let mut previous_token = holder.fencing_token();
    let mut released = Instant::now();
    holder.unlock().unwrap();
    for (i, who) in order.iter().enumerate() {
        let granted = expect_grant(&mut children, *who, Duration::from_secs(3));
        eprintln!(
            "f4: waiter {i} (skew {} ms) holds {:.1} ms after the previous release",
            skews[i],
            ms(granted.at - released)
        );
        assert!(token_of(&granted) > previous_token);
        previous_token = token_of(&granted);
        // Each holds for two leases: its renewals keep it, and the waiters
        // behind stay queued.
        let held = Instant::now();
        while held.elapsed() < 2 * LEASE {
            assert_eq!(
                mutex.queue_len().unwrap(),
                2 - i,
                "evicted behind waiter {i}"
            );
            assert!(mutex.is_locked().unwrap(), "waiter {i} lost the lock");
            thread::sleep(Duration::from_millis(100));
        }
        children.send(who.0, "0 lost");
        children.expect_text(who.0, "0 lost false", Duration::from_secs(5));
        released = unlock_worker(&mut children, *who);
    }
    assert_clean(&server, &mutex);
}

// ---------------------------------------------------------------------------
// 5-8: the server restarts, drops a subscription, stalls, or is gone.

#[test]
fn f5_a_redis_restart_that_loses_the_data_returns_every_call_and_keeps_tokens_increasing() {
    let _serial = serial();
    let mut server = RedisServer::start();
    let url = server.url();
    const PATIENCE: Duration = Duration::from_secs(5);
    let builder = || {
        fast(&url)
            .connect_timeout(Duration::from_secs(1))
            .command_timeout(Duration::from_secs(1))
    };
    let holder_client = builder().build().unwrap();
    let mutex = holder_client.fair_mutex("f5");
    let holder = mutex.lock().unwrap();
    let holder_token = holder.fencing_token();

    type Outcome = std::result::Result<Option<u64>, ErrorKind>;
    let waiters: Vec<JoinHandle<(Duration, Outcome)>> = (0..3)
        .map(|i| {
            let m = builder().build().unwrap().fair_mutex("f5");
            let handle = thread::spawn(move || {
                let started = Instant::now();
                let result = m.try_lock_for(PATIENCE);
                let took = started.elapsed();
                let outcome = match result {
                    Ok(Some(guard)) => {
                        let token = guard.fencing_token();
                        thread::sleep(Duration::from_millis(100));
                        let _ = guard.unlock();
                        Ok(Some(token))
                    }
                    Ok(None) => Ok(None),
                    Err(err) => Err(err.kind()),
                };
                (took, outcome)
            });
            assert!(wait_until(Duration::from_secs(5), || mutex
                .queue_len()
                .unwrap()
                == i + 1));
            handle
        })
        .collect();

    // Killed, down for 300 ms, back empty on the same port.
    server.restart_after(Duration::from_millis(300));
    let restarted = Instant::now();
    assert!(
        wait_until(LEASE + Duration::from_secs(2), || holder.is_lease_lost()),
        "the holder's guard never reported its lease lost"
    );
    let lost_after = restarted.elapsed();
    let started = Instant::now();
    let unlocked = holder.unlock();
    let unlock_took = started.elapsed();
    eprintln!(
        "f5: holder's guard lease-lost {:.0} ms after the restart; its unlock returned {:?} in \
         {:.0} ms",
        ms(lost_after),
        unlocked.as_ref().map_err(|e| e.kind()),
        ms(unlock_took)
    );
    assert!(matches!(
        unlocked.as_ref().map_err(|e| e.kind()),
        Err(ErrorKind::LeaseLost | ErrorKind::Connection)
    ));
    assert!(unlock_took < Duration::from_secs(2), "{unlock_took:?}");

    let mut tokens = vec![holder_token];
    for (i, handle) in waiters.into_iter().enumerate() {
        let (took, outcome) = join_within(handle, PATIENCE + Duration::from_secs(4), "waiter");
        eprintln!(
            "f5: waiter {i}: try_lock_for({PATIENCE:?}) returned {outcome:?} after {:.0} ms",
            ms(took)
        );
        assert!(
            took < PATIENCE + Duration::from_secs(2),
            "waiter {i} took {took:?}"
        );
        match outcome {
            Ok(Some(token)) => tokens.push(token),
            Ok(None) | Err(ErrorKind::Connection) => {}
            Err(kind) => panic!("waiter {i} failed with {kind:?}"),
        }
    }

    // The lock works again; tokens stay above every earlier one.
    let mut after = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            match mutex.try_lock_for(Duration::from_secs(2)) {
                Ok(Some(guard)) => {
                    after = Some(guard);
                    true
                }
                Ok(None) => false,
                Err(err) => {
                    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
                    false
                }
            }
        }),
        "the lock never worked again"
    );
    let after = after.unwrap();
    assert!(
        tokens.iter().all(|&t| after.fencing_token() > t),
        "token {} after the restart, earlier ones {tokens:?}",
        after.fencing_token()
    );
    // A queued waiter is handed the lock by a push message again.
    let next = LockThread::lock(builder().build().unwrap().fair_mutex("f5"));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    let last = after.fencing_token();
    let released = Instant::now();
    after.unlock().unwrap();
    let (granted, token) =
        next.granted_within(Duration::from_secs(3), "the waiter after the restart");
    eprintln!(
        "f5: after the restart, handoff in {:.1} ms",
        ms(granted - released)
    );
    assert!(token > last);
    next.release("the waiter after the restart");
    assert_clean(&server, &mutex);
}

#[test]
fn f6_killed_subscriptions_delay_no_waiter_past_1s_and_reconnect() {
    let _serial = serial();
    let server = RedisServer::start();
    // A 10 s watchdog period: what saves a waiter whose message was lost is
    // the re-poll after the subscriber reconnects, not the heartbeat.
    let builder = || {
        server
            .builder()
            .lease(Duration::from_secs(30))
            .waiter_timeout(Duration::from_secs(30))
    };
    let holder_client = builder().build().unwrap();
    let mutex = holder_client.fair_mutex("f6");
    let holder = mutex.lock().unwrap();
    let clients = [builder().build().unwrap(), builder().build().unwrap()];
    let mut waiters: Vec<Option<LockThread>> = (0..4)
        .map(|i| {
            let waiter = LockThread::lock(clients[i % 2].fair_mutex("f6"));
            assert!(wait_until(Duration::from_secs(5), || mutex
                .queue_len()
                .unwrap()
                == i + 1));
            Some(waiter)
        })
        .collect();
    let mut admin = server.conn();
    assert_eq!(pubsub_clients(&mut admin), 3);

    let killed = kill_subscribers(&mut admin);
    assert_eq!(killed, 3);
    let mut released = Instant::now();
    holder.unlock().unwrap();
    let mut lateness = Vec::new();
    for i in 0..4 {
        let waiter = waiters[i].take().unwrap();
        let (granted, _) = waiter.granted_within(Duration::from_secs(5), "a waiter");
        let late = granted - released;
        lateness.push(ms(late));
        assert!(
            late < Duration::from_secs(1),
            "waiter {i} got the lock {late:?} after its turn"
        );
        for later in waiters.iter().flatten() {
            assert!(
                !later.is_granted_within(Duration::ZERO),
                "granted out of order"
            );
        }
        thread::sleep(Duration::from_millis(100));
        if i == 1 {
            // Again, once the subscribers are back, just before handing
            // over to the third waiter: its message is lost too.
            assert!(wait_until(Duration::from_secs(5), || pubsub_clients(
                &mut admin
            ) == 3));
            let killed = kill_subscribers(&mut admin);
            eprintln!("f6: killed {killed} subscriptions again");
        }
        released = waiter.release("a waiter");
    }
    eprintln!("f6: turns to grants with subscriptions killed (ms): {lateness:.1?}");
    // The second loss is made up for as soon as the first: the backoff of
    // a subscription that worked starts over.
    assert!(lateness[2] < lateness[0] + 30.0, "{lateness:.1?}");
    let back = Instant::now();
    assert!(
        wait_until(Duration::from_secs(5), || pubsub_clients(&mut admin) == 3),
        "subscribers did not reconnect: {}",
        pubsub_clients(&mut admin)
    );
    eprintln!(
        "f6: all 3 subscriptions back within {:.0} ms of the last check",
        ms(back.elapsed())
    );
    assert_clean(&server, &mutex);
}

#[test]
fn f7_a_stalled_server_delays_try_lock_for_by_at_most_a_read_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = server
        .builder()
        .lease(Duration::from_secs(10))
        .build()
        .unwrap();
    let mutex = holder_client.fair_mutex("f7");
    let holder = mutex.lock().unwrap();
    let command_timeout = Duration::from_secs(1);
    let client = server
        .builder()
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(command_timeout)
        .build()
        .unwrap();
    let impatient = client.fair_mutex("f7");
    let observer = {
        let m = client.fair_mutex("f7");
        move || {
            let started = Instant::now();
            let result = m.is_locked().map_err(|e| e.kind());
            (started.elapsed(), result)
        }
    };
    let paused = pause_clients(&mut server.conn(), "ALL", Duration::from_millis(3000));
    let inspecting = thread::spawn(observer);
    let patience = Duration::from_secs(1);
    let started = Instant::now();
    let result = impatient.try_lock_for(patience);
    let took = started.elapsed();
    let (inspect_took, inspected) = join_within(inspecting, Duration::from_secs(5), "is_locked");
    eprintln!(
        "f7: CLIENT PAUSE 3000 ALL: try_lock_for({patience:?}) returned {:?} after {:.0} ms \
         (bound {:?}); is_locked returned {inspected:?} after {:.0} ms",
        result.as_ref().map(Option::is_some).map_err(|e| e.kind()),
        ms(took),
        patience + Duration::from_millis(500),
        ms(inspect_took)
    );
    match &result {
        Ok(None) => {}
        Err(err) => assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}"),
        Ok(Some(_)) => panic!("got a lock someone holds"),
    }
    drop(result);
    assert!(
        took < patience + Duration::from_millis(500),
        "took {took:?}"
    );
    assert!(
        inspect_took < command_timeout + Duration::from_millis(500),
        "{inspect_took:?}"
    );

    // Nothing deadlocked: once the pause is over, everything works.
    thread::sleep((paused + Duration::from_millis(3100)).saturating_duration_since(Instant::now()));
    let waiter = LockThread::lock(client.fair_mutex("f7"));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    assert!(!holder.is_lease_lost());
    let released = Instant::now();
    holder.unlock().unwrap();
    let (granted, _) = waiter.granted_within(Duration::from_secs(3), "the waiter after the pause");
    eprintln!(
        "f7: after the pause, handoff in {:.1} ms",
        ms(granted - released)
    );
    waiter.release("the waiter after the pause");
    let started = Instant::now();
    drop(client);
    drop(holder_client);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "dropping the clients took {:?}",
        started.elapsed()
    );
    assert!(!server.client().fair_mutex("f7").is_locked().unwrap());
}

#[test]
fn f8_an_unreachable_server_is_a_connection_error_within_connect_timeout_plus_1s() {
    let _serial = serial();
    let connect_timeout = Duration::from_millis(1500);
    let bound = connect_timeout + Duration::from_secs(1);
    let builder = |url: &str| {
        Client::builder(url)
            .lease(LEASE)
            .waiter_timeout(WAITER_TIMEOUT)
            .connect_timeout(connect_timeout)
            .command_timeout(Duration::from_secs(1))
    };
    // Nothing listening at all.
    let refused = RefusedPort::new();
    let nowhere = refused.url();
    let started = Instant::now();
    let err = builder(&nowhere).build().unwrap_err();
    let took = started.elapsed();
    eprintln!(
        "f8: Client::build with nothing listening: {:?} after {:.0} ms",
        err.kind(),
        ms(took)
    );
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    assert!(took < bound, "{took:?}");

    // A client, with a held lock, whose server goes away.
    let mut server = RedisServer::start();
    let client = builder(&server.url()).build().unwrap();
    let m = client.fair_mutex("f8");
    let guard = m.lock().unwrap();
    server.kill();
    type Call<'a> = (&'a str, Box<dyn Fn() -> fairlock::Result<()> + 'a>);
    let calls: Vec<Call> = vec![
        ("lock", Box::new(|| m.lock().map(drop))),
        ("try_lock", Box::new(|| m.try_lock().map(drop))),
        (
            "try_lock_for(5 s)",
            Box::new(|| m.try_lock_for(Duration::from_secs(5)).map(drop)),
        ),
        (
            "with_fixed_lease.lock",
            Box::new(|| m.with_fixed_lease(LEASE).lock().map(drop)),
        ),
        ("is_locked", Box::new(|| m.is_locked().map(drop))),
        (
            "is_held_by_current_thread",
            Box::new(|| m.is_held_by_current_thread().map(drop)),
        ),
        ("hold_count", Box::new(|| m.hold_count().map(drop))),
        (
            "remaining_lease",
            Box::new(|| m.remaining_lease().map(drop)),
        ),
        ("queue_len", Box::new(|| m.queue_len().map(drop))),
        ("status", Box::new(|| m.status(10).map(drop))),
        ("force_unlock", Box::new(|| m.force_unlock().map(drop))),
    ];
    // Every call is measured before anything is asserted, so a failure
    // shows the whole picture.
    let mut report = Vec::new();
    let mut too_slow = Vec::new();
    let mut measure = |what: String, took: Duration, result: fairlock::Result<()>, kind| {
        let err = result.expect_err(&what);
        assert_eq!(err.kind(), kind, "{what}: {err:?}");
        report.push(format!("{what} {:.0} ms", ms(took)));
        if took >= bound {
            too_slow.push(format!("{what} {:.0} ms", ms(took)));
        }
    };
    // The first call finds the pool's idle connection broken at once; the
    // others wait for a new one, so `lock` runs again with an empty pool.
    for (what, call) in calls.iter().chain(&calls[..1]) {
        let started = Instant::now();
        let result = call();
        let kind = ErrorKind::Connection;
        measure(what.to_string(), started.elapsed(), result, kind);
    }
    // The calls above outlast the lease: a hold its client counted lost by
    // then says so, whatever its release met.
    let kind = if guard.is_lease_lost() {
        ErrorKind::LeaseLost
    } else {
        ErrorKind::Connection
    };
    let started = Instant::now();
    let result = guard.unlock();
    measure("guard.unlock".to_owned(), started.elapsed(), result, kind);
    drop(calls);
    let started = Instant::now();
    drop(m);
    drop(client);
    let dropped = started.elapsed();
    eprintln!(
        "f8: each call on a client whose server is gone (bound {bound:?}): {}; dropping the \
         client {:.0} ms",
        report.join(", "),
        ms(dropped)
    );
    assert!(dropped < bound, "dropping the client took {dropped:?}");
    assert!(
        too_slow.is_empty(),
        "calls slower than connect timeout + 1 s = {bound:?}: {too_slow:?}"
    );
}

// ---------------------------------------------------------------------------
// 9-10: mutual exclusion under churn, and leaks.

#[test]
fn f9_four_processes_of_eight_threads_with_one_killed_never_overlap() {
    let _serial = serial();
    let server = RedisServer::start();
    let run_for = Duration::from_secs(8);
    let seed = wall_clock_ms() as u64 % 1_000_000;
    let mut rng = Rng::new(seed);
    let mut children = Children::new(CHILD);
    let procs: Vec<usize> = (0..4u64)
        .map(|p| {
            let vars = [
                (URL, server.url()),
                (NAME, "f9".to_owned()),
                (THREADS, "8".to_owned()),
                (DURATION_MS, run_for.as_millis().to_string()),
                (SEED, (seed * 4 + p).to_string()),
            ];
            children.spawn("churn", &vars)
        })
        .collect();
    let ids: Vec<String> = procs
        .iter()
        .map(|&p| children.expect_prefix(p, "ready", STARTUP).words()[1].to_owned())
        .collect();
    for &p in &procs {
        children.send(p, "go");
    }
    let started = Instant::now();
    let victim = procs[rng.below(4) as usize];
    let kill_after = rng.millis(1000, 6000);
    thread::sleep(kill_after);
    // Killed inside its critical section, after its write: the others wait
    // for its lease to run out, and its queued threads are evicted.
    children.send(victim, "linger 3000");
    let last_of_victim = children.expect(Duration::from_secs(10), "the victim lingering", |e| {
        e.child == victim && e.text.ends_with(" lingering")
    });
    let killed = children.kill(victim);
    let (holder, _) = raw_holder(&server, "f9").expect("the lock is held");
    assert!(
        holder.starts_with(&ids[victim]),
        "killed child {victim}, but {holder} holds"
    );
    eprintln!("f9: seed {seed}: killed child {victim} holding the lock after {kill_after:?}");
    let resumed = children.expect(
        LEASE + Duration::from_secs(3),
        "a section after the kill",
        |e| e.child != victim && e.at > killed && e.text.starts_with("cs "),
    );
    let recovery = resumed.at - killed;
    eprintln!(
        "f9: next critical section {:.0} ms after the holder was killed",
        ms(recovery)
    );
    assert!(recovery < LEASE + Duration::from_secs(1), "{recovery:?}");

    for &p in procs.iter().filter(|&&p| p != victim) {
        let status = children.wait_exit(p, run_for + Duration::from_secs(20), false);
        assert!(status.success(), "child {p} failed: {status}");
    }
    let elapsed = started.elapsed();
    let mut events = children.take_ready(|_| true);
    events.extend([last_of_victim, resumed]);
    let printed = events.iter().filter(|e| e.text.starts_with("cs ")).count();
    assert!(
        events.iter().all(|e| e.child != victim || e.at <= killed),
        "the killed child spoke after the kill"
    );
    let problems: Vec<&Event> = events
        .iter()
        .filter(|e| e.text.starts_with("error") || e.text.starts_with("lost"))
        .collect();
    let done: Vec<Vec<u64>> = events
        .iter()
        .filter(|e| e.text.starts_with("done "))
        .map(|e| e.words()[1..].iter().map(|w| w.parse().unwrap()).collect())
        .collect();
    assert_eq!(done.len(), 3, "survivors' summaries: {done:?}");
    let mut conn = server.conn();
    let counter: u64 = conn.get(counter_key("f9")).unwrap();
    let log: Vec<u64> = conn.lrange(log_key("f9"), 0, -1).unwrap();
    let timeouts: u64 = done.iter().map(|d| d[1]).sum();
    eprintln!(
        "f9: {elapsed:.1?}: counter {counter}, {} sections logged, {printed} reported, {timeouts} \
         try_lock_for timeouts (survivors), problems {problems:?}",
        log.len()
    );
    assert!(problems.is_empty(), "{problems:?}");
    // A lost update (two holders between GET and SET) would leave the
    // counter below the number of sections that wrote.
    assert_eq!(counter, log.len() as u64, "overlapping critical sections");
    // The killed process may have written one section it did not live to report.
    assert!(
        log.len() - printed <= 1,
        "{} logged, {printed} reported",
        log.len()
    );
    assert!(
        log.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens out of order in the log"
    );
    assert!(log.len() >= 50, "too little progress: {}", log.len());
    let observer = fast(&server.url()).build().unwrap();
    let mutex = observer.fair_mutex("f9");
    assert_clean(&server, &mutex);
}

#[test]
fn f10_fifty_clients_created_and_dropped_leak_no_thread_connection_or_key() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let connections_before = connected_clients(&mut conn);
    let mut children = Children::new(CHILD);
    let vars = [(URL, server.url()), (NAME, "f10".to_owned())];
    let child = children.spawn("leak", &vars);
    let before: usize = children.expect_prefix(child, "before", STARTUP).words()[1]
        .parse()
        .unwrap();
    let started = Instant::now();
    let after: usize = children
        .expect_prefix(child, "after", Duration::from_secs(60))
        .words()[1]
        .parse()
        .unwrap();
    let took = started.elapsed();
    let closed = wait_until(Duration::from_secs(10), || {
        connected_clients(&mut conn) == connections_before
    });
    let connections_after = connected_clients(&mut conn);
    eprintln!(
        "f10: 50 clients in {:.1} s: threads {before} -> {after}; server connections \
         {connections_before} -> {connections_after} (child still running)",
        took.as_secs_f64()
    );
    assert_eq!(after, before, "threads leaked");
    assert!(
        closed,
        "connections leaked: {connections_before} -> {connections_after}"
    );
    children.send(child, "exit");
    assert!(children
        .wait_exit(child, Duration::from_secs(10), false)
        .success());
    let observer = fast(&server.url()).build().unwrap();
    assert_clean(&server, &observer.fair_mutex("f10"));
    let keys: Vec<String> = conn.keys("*").unwrap();
    eprintln!("f10: keys left (all with a TTL): {keys:?}");
}

// ---------------------------------------------------------------------------
// 11: a waiter whose handoff message is read after its lease ran out.

/// A waiter whose handoff message is read only after the handed-over lease
/// ran out is not handed a hold already lost: it asks Redis, finds the
/// grant over, queues again, and gets the lock, live, after the client
/// that took it meanwhile. The child queues behind client P (lock call
/// with a fixed 600 ms lease, so no watchdog renewal hides anything) and
/// connects through a relay; right after a heartbeat of the child, the
/// relay stalls every byte to and from the child for 1.5 s, as a GC pause,
/// swapping or a stalled network would, and P unlocks: the release hands
/// the lock to the child (inside its liveness deadline) and publishes
/// `G <call id> <token> 600`, which waits in the relay. The lease runs out
/// on the server and client Q takes the lock. When the bytes flow again
/// the child reads its grant 1.5 s late. Counting the grant from when the
/// message is read (as fairlock once did) made the child believe it held
/// for 600 ms more, beside Q; counted from the send time of the last
/// request that saw the waiter still queued, it is over on arrival, and
/// the lock call must not return it (it once did, as a guard already lost,
/// which a caller that does not look runs its critical section with). Q's
/// hold is left alone. f12 does the same with a real SIGSTOP of the child.
#[test]
fn f11_a_waiter_paused_past_its_grant_queues_again_and_gets_a_live_hold() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let mut scene = LateGrantScene::start(&server, relay.url(), "f11");

    relay.stall();
    let stalled_at = Instant::now();
    let handover = scene.hand_over();
    thread::sleep(
        (stalled_at + Duration::from_millis(1500)).saturating_duration_since(Instant::now()),
    );
    relay.resume();
    let resumed_at = Instant::now();

    scene.finish(handover, |handover, requeued_at| {
        eprintln!(
            "f11: child stalled with {:.0} ms of liveness left and handed the lock (token \
             {}, fixed lease {PAUSED_WAITER_LEASE:?}) {:.1} ms into the stall; another \
             client got the lock {:.0} ms after the handoff; stall {:.0} ms ({} bytes held); \
             the child was queued again {:.1} ms after the stall",
            ms(handover.liveness_left),
            handover.token,
            ms(handover.at - stalled_at),
            ms(handover.next_took),
            ms(resumed_at - stalled_at),
            relay.held_bytes(),
            ms(requeued_at - resumed_at),
        )
    });
}

/// The setting of f11, f12 and f12b: client P holds the lock (a long
/// lease); a "paused_waiter" child, connecting to `child_url`, is queued
/// and was just heartbeated; client Q will take the lock once the child's
/// grant lapses.
struct LateGrantScene {
    _first_client: Client,
    first: FairMutex,
    first_guard: Option<fairlock::FairMutexGuard>,
    next_client: Client,
    next: FairMutex,
    children: Children,
    child: usize,
    child_id: String,
    /// The child's liveness left just before it fell silent: the handoff
    /// falls well inside it.
    liveness_left: Duration,
}

/// P's unlock handed the lock to the silent child; Q took it afterwards.
struct Handover {
    at: Instant,
    token: u64,
    liveness_left: Duration,
    next_guard: fairlock::FairMutexGuard,
    next_took: Duration,
}

impl LateGrantScene {
    fn start(server: &RedisServer, child_url: String, name: &str) -> LateGrantScene {
        LateGrantScene::start_with(server, child_url, name, &[])
    }

    /// The same, the child's environment with `more` too.
    fn start_with(
        server: &RedisServer,
        child_url: String,
        name: &str,
        more: &[(&str, String)],
    ) -> LateGrantScene {
        let first_client = fast(&server.url())
            .lease(Duration::from_secs(30))
            .build()
            .unwrap();
        let first = first_client.fair_mutex(name);
        let first_guard = first.lock().unwrap();
        let next_client = fast(&server.url()).build().unwrap();
        let next = next_client.fair_mutex(name);
        let mut children = Children::new(CHILD);
        let mut vars = vec![(URL, child_url), (NAME, name.to_owned())];
        vars.extend(more.iter().cloned());
        let child = children.spawn("paused_waiter", &vars);
        let child_id = children.expect_prefix(child, "ready", STARTUP).words()[1].to_owned();
        let liveness_left = await_fresh_head(&first, &child_id);
        LateGrantScene {
            _first_client: first_client,
            first,
            first_guard: Some(first_guard),
            next_client,
            next,
            children,
            child,
            child_id,
            liveness_left,
        }
    }

    /// With the child silent: P unlocks, which hands the lock to the child;
    /// the grant lapses on the server and Q takes the lock.
    fn hand_over(&mut self) -> Handover {
        self.first_guard.take().expect("P holds").unlock().unwrap();
        let at = Instant::now();
        let token = handed_token_of(&self.first, &self.child_id, PAUSED_WAITER_LEASE);
        let next_guard = self
            .next
            .try_lock_for(Duration::from_secs(3))
            .unwrap()
            .expect("another client gets the lock once the silent child's grant ran out");
        Handover {
            at,
            token,
            liveness_left: self.liveness_left,
            next_guard,
            next_took: at.elapsed(),
        }
    }

    /// Once the child hears again: it must not return from its lock call
    /// with the grant that ran out (its caller would run beside Q) but ask
    /// Redis, find it lost and queue again (`report` is told when it was
    /// seen queued); then it waits its turn behind Q, and its fresh grant
    /// is valid.
    fn finish(mut self, handover: Handover, report: impl FnOnce(&Handover, Instant)) {
        let requeued_at =
            await_requeued(&mut self.children, self.child, &self.child_id, &self.next);
        report(&handover, requeued_at);
        assert_the_late_child_waits_its_turn(
            &mut self.children,
            self.child,
            &self.next_client,
            &self.next,
            handover,
        );
    }
}

/// Waits (10 s at most) until the child `child_id` is the only waiter on
/// `first` and was just heartbeated; returns the liveness it has left, so a
/// handoff now falls well inside its deadline even if it stops answering.
fn await_fresh_head(first: &FairMutex, child_id: &str) -> Duration {
    let mut seen = None;
    let fresh = wait_until(Duration::from_secs(10), || {
        let status = first.status(10).unwrap();
        let fresh = status.queue_len == 1
            && status.waiters.first().is_some_and(|w| {
                w.who.client_id() == child_id
                    && w.liveness_left
                        .is_some_and(|left| left >= Duration::from_millis(800))
            });
        seen = Some(status);
        fresh
    });
    assert!(
        fresh,
        "the child did not queue with a fresh heartbeat: {seen:?}"
    );
    seen.unwrap().waiters[0].liveness_left.unwrap()
}

/// The token of the hold `first`'s unlock just handed to the child
/// `child_id`, which cannot answer (stalled or stopped).
fn handed_token_of(first: &FairMutex, child_id: &str, lease: Duration) -> u64 {
    let handed = first.status(10).unwrap();
    let holder = handed
        .holder()
        .cloned()
        .unwrap_or_else(|| panic!("the lock was not handed to the child: {handed:?}"));
    assert_eq!(
        holder.who.client_id(),
        child_id,
        "handed to someone else: {handed:?}"
    );
    assert!(
        holder.remaining_lease.is_some_and(|left| left <= lease),
        "{handed:?}"
    );
    holder.fencing_token
}

/// Waits up to 10 s for the child, whose grant lapsed while it heard
/// nothing, to show up queued again behind the real holder; fails if its
/// lock call returns first (a hold already lost, or an error).
fn await_requeued(
    children: &mut Children,
    child: usize,
    child_id: &str,
    next: &FairMutex,
) -> Instant {
    let mut returned = Vec::new();
    let queued = wait_until(Duration::from_secs(10), || {
        returned = children.take_ready(|e| {
            e.child == child && (e.text.starts_with("granted ") || e.text.starts_with("lock error"))
        });
        returned.is_empty()
            && next
                .status(10)
                .is_ok_and(|s| s.waiters.iter().any(|w| w.who.client_id() == child_id))
    });
    assert!(
        returned.is_empty(),
        "the child's lock call returned while another client held the lock: {returned:?}"
    );
    assert!(queued, "the child did not queue again within 10 s");
    Instant::now()
}

/// The end of f11 and f12: Q keeps the lock, untouched by the late child;
/// once Q unlocks, the child gets a fresh grant (a larger token), valid,
/// and its unlock is `Ok`.
fn assert_the_late_child_waits_its_turn(
    children: &mut Children,
    child: usize,
    next_client: &Client,
    next: &FairMutex,
    handover: Handover,
) {
    let Handover {
        token: handed_token,
        next_guard,
        ..
    } = handover;
    let status = next.status(10).unwrap();
    let holder = status.holder().cloned().expect("still held");
    assert_eq!(holder.who.client_id(), next_client.id(), "{status:?}");
    assert_eq!(holder.fencing_token, next_guard.fencing_token());
    assert!(next_guard.fencing_token() > handed_token);
    assert!(!next_guard.is_lease_lost());
    let next_token = next_guard.fencing_token();
    next_guard.unlock().unwrap();
    let granted = children.expect_prefix(child, "granted ", Duration::from_secs(10));
    let words = granted.words();
    assert!(words[1].parse::<u64>().unwrap() > next_token, "{granted:?}");
    assert_eq!(words[2], "lost=false", "{granted:?}");
    children.expect_text(child, "unlocked ok", Duration::from_secs(10));
    assert!(children
        .wait_exit(child, Duration::from_secs(10), true)
        .success());
}

// ---------------------------------------------------------------------------
// 12: a waiter stopped by SIGSTOP while its grant runs out.

/// Sends `signal` (e.g. "STOP") to the process `pid` with kill(1) and waits
/// until /proc shows it stopped (`T`) or not, as the signal implies.
fn signal_and_await_state(pid: u32, signal: &str) -> Instant {
    let at = Instant::now();
    send_signal(pid, signal);
    let want_stopped = signal == "STOP";
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // "<pid> (<comm>) <state> ...": the state follows the last ')'.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
            .unwrap_or_default()
    };
    assert!(
        wait_until(Duration::from_secs(10), || (state() == "T") == want_stopped),
        "process {pid} is in state {:?} after kill -{signal}",
        state()
    );
    at
}

/// A waiter process stopped by SIGSTOP with its handoff message unread, and
/// continued after the handed-over lease ran out, queues again as in f11.
/// The "paused_waiter" child queues behind client P (lock call with a
/// fixed 600 ms lease, so no watchdog renewal hides anything); right after
/// a heartbeat of the child it is stopped with SIGSTOP and P unlocks: the
/// release hands the lock to the child (inside its liveness deadline) and
/// publishes `G <call id> <token> 600`, which lands unread in the stopped
/// child's socket. The lease runs out on the server and client Q takes the
/// lock; 1.5 s after the stop the child gets SIGCONT. Its subscriber's
/// timed read, cut short by the stop (EINTR), must read on rather than drop
/// the subscription with the message in it, and the grant must count from
/// the send time of the last request that saw the child queued, not from
/// when the message is read: otherwise the child believes it holds for
/// 600 ms more, beside Q. Counted out, the grant is not returned: the
/// child asks Redis, queues again and gets the lock after Q.
#[test]
fn f12_a_waiter_stopped_by_sigstop_past_its_grant_queues_again_and_gets_a_live_hold() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut scene = LateGrantScene::start(&server, server.url(), "f12");
    let child_pid = scene.children.pid(scene.child);

    let stopped_at = signal_and_await_state(child_pid, "STOP");
    let handover = scene.hand_over();
    let child = scene.child;
    assert!(
        scene
            .children
            .take_ready(|e| e.child == child && e.text != "ready")
            .is_empty(),
        "the child spoke while stopped"
    );
    thread::sleep(
        (stopped_at + Duration::from_millis(1500)).saturating_duration_since(Instant::now()),
    );
    let continued_at = signal_and_await_state(child_pid, "CONT");

    scene.finish(handover, |handover, requeued_at| {
        eprintln!(
            "f12: child stopped with {:.0} ms of liveness left and handed the lock (token \
             {}, fixed lease {PAUSED_WAITER_LEASE:?}) {:.1} ms after SIGSTOP; another \
             client got the lock {:.0} ms after the handoff; stopped {:.0} ms; the child \
             was queued again {:.1} ms after SIGCONT",
            ms(handover.liveness_left),
            handover.token,
            ms(handover.at - stopped_at),
            ms(handover.next_took),
            ms(continued_at - stopped_at),
            ms(requeued_at - continued_at),
        )
    });
}

/// A waiter stopped by SIGSTOP for longer than its fixed lease, and handed
/// the lock just before SIGCONT, holds it. Its grant counts from the last
/// request that saw it queued (a heartbeat before the stop: a fixed lease
/// of 1 s, a third of it no shorter than the heartbeats' 333 ms, polls on
/// no schedule of its own), so the message, read on SIGCONT, looks run
/// out, yet Redis gave the lease a moment ago. The waiter asks Redis
/// instead of returning a hold counted lost: its caller gets the lock with
/// the lease Redis has, and its unlock is `Ok`. (Before, the lock call
/// returned a guard already lost and its unlock said `LeaseLost`, while
/// the lock was the child's at Redis for most of a second.)
#[test]
fn f12b_a_waiter_stopped_past_its_lease_and_handed_the_lock_as_it_resumes_holds_it() {
    let _serial = serial();
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let more = [
        (FIXED_LEASE_MS, lease.as_millis().to_string()),
        // Its queue entry outlives the stop.
        (WAITER_TIMEOUT_MS, "10000".to_owned()),
    ];
    let mut scene = LateGrantScene::start_with(&server, server.url(), "f12b", &more);
    let child_pid = scene.children.pid(scene.child);

    let stopped_at = signal_and_await_state(child_pid, "STOP");
    thread::sleep(
        (stopped_at + lease + Duration::from_millis(100)).saturating_duration_since(Instant::now()),
    );
    scene.first_guard.take().expect("P holds").unlock().unwrap();
    let handed_at = Instant::now();
    let token = handed_token_of(&scene.first, &scene.child_id, lease);
    let continued_at = signal_and_await_state(child_pid, "CONT");
    let child = scene.child;
    let granted = (scene.children).expect_prefix(child, "granted ", Duration::from_secs(10));
    let unlocked = (scene.children).expect_prefix(child, "unlocked", Duration::from_secs(10));
    eprintln!(
        "f12b: handed the lock {:.0} ms after SIGSTOP, SIGCONT {:.1} ms later; the child \
         said {:?} {:.1} ms after SIGCONT, then {:?}",
        ms(handed_at - stopped_at),
        ms(continued_at - handed_at),
        granted.text,
        ms(granted.at - continued_at),
        unlocked.text
    );
    assert_eq!(granted.text, format!("granted {token} lost=false"));
    assert_eq!(unlocked.text, "unlocked ok");
    assert!(scene
        .children
        .wait_exit(child, Duration::from_secs(10), true)
        .success());
}
