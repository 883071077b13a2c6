//! Server work per lock cycle stays flat from 0 to 10 000 queued waiters;
//! a cycle and a handoff by the API cost the round trips and the commands
//! the docs give them.
//!
//! Waiters are enqueued through the library's own acquire script (the same
//! Lua the client runs), with owner ids nobody listens for and a long
//! liveness deadline, so thousands of live entries cost no threads.

use fairlock::Client;
use fairlock_test_support::fake_queue::{evalsha_usec, queue_of, ScriptedLock};
use fairlock_test_support::*;

/// Queue lengths measured, shortest first.
const SIZES: [u64; 5] = [0, 1, 100, 1000, 10_000];
/// Interleaved rounds; each measures every size once.
const ROUNDS: u64 = 9;
/// Lock cycles per size and round.
const BATCH: u64 = 250;

/// Server µs per lock cycle (see `ScriptedLock::cycle`) over the next
/// `BATCH` cycles; `done` counts the cycles run on this lock so far.
fn batch_cost(lock: &ScriptedLock, conn: &mut redis::Connection, waiters: u64, done: u64) -> f64 {
    let before = evalsha_usec(conn);
    for n in done..done + BATCH {
        lock.cycle(conn, waiters, n);
    }
    (evalsha_usec(conn) - before) / BATCH as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[test]
fn server_time_per_cycle_is_flat_in_the_queue_length() {
    let server = RedisServer::start();
    let mut queues: Vec<_> = SIZES
        .iter()
        .map(|&waiters| queue_of(&server, &format!("cost{waiters}"), waiters))
        .collect();
    // Rounds interleave the sizes (in a rotating order), so a burst of
    // other load on this shared machine lands on all of them alike rather
    // than on whichever size happened to run then; the median of the
    // rounds then drops the bursts.
    let mut samples = vec![Vec::new(); SIZES.len()];
    for round in 0..ROUNDS {
        for k in 0..SIZES.len() {
            let i = (k + round as usize) % SIZES.len();
            let (lock, conn) = &mut queues[i];
            samples[i].push(batch_cost(lock, conn, SIZES[i], round * BATCH));
        }
    }
    let costs: Vec<(u64, f64)> = SIZES
        .iter()
        .zip(samples)
        .map(|(&waiters, s)| (waiters, median(s)))
        .collect();
    for (waiters, cost) in &costs {
        eprintln!(
            "waiters {waiters:>6}: {cost:.1} µs of server time per cycle (median of {ROUNDS})"
        );
    }
    let at = |n: u64| costs.iter().find(|(w, _)| *w == n).unwrap().1;
    eprintln!(
        "10 000 vs 100 waiters: {:.2}x; vs 1 000: {:.2}x; vs 1: {:.2}x; vs none: {:.2}x",
        at(10_000) / at(100),
        at(10_000) / at(1_000),
        at(10_000) / at(1),
        at(10_000) / at(0)
    );
    // From 2 waiters up a cycle does the same steps: a release that grants
    // the head, plus one arrival. The O(log N) claim compares those: a
    // linear scan would make 10 000 cost ~100x what 100 costs. A margin of
    // 1.5x stays clear of this machine's noise (0.85-1.20x seen, the last
    // with a CPU hog on one core) and far below any linear term.
    assert!(
        at(10_000) / at(100) < 1.5,
        "cost grows with the queue: {costs:?}"
    );
    assert!(
        at(10_000) / at(1_000) < 1.5,
        "cost grows with the queue: {costs:?}"
    );
    // With 1 waiter the grant leaves an empty queue (0.91-1.18x seen): the
    // same steps on a shorter queue, bounded loosely. With none a cycle is
    // a take and a release without a handoff, other work than the queue's
    // (2.5x here, 4.0x once with a CPU hog on one core): printed above, not
    // asserted; what a handoff costs against it is a bench's figure
    // (`cargo bench --bench server_cost`, counted, not timed).
    assert!(at(10_000) / at(1) < 2.0, "{costs:?}");
}

/// `calls` of each command in `INFO commandstats` (the script calls too),
/// then the counts reset.
fn commands_run(conn: &mut redis::Connection) -> Vec<(String, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(conn).unwrap();
    let mut run: Vec<(String, u64)> = info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(":calls="))
        .map(|(name, rest)| {
            (
                name.to_owned(),
                rest.split(',').next().unwrap().parse().unwrap(),
            )
        })
        .filter(|(name, _)| !name.starts_with("config") && name != "info")
        .collect();
    run.sort();
    run
}

/// A lock cycle of every kind by the API: an uncontended take and release,
/// two round trips (one command each, read by a relay), whose scripts run
/// GET and SET each at the server; a handoff, whose release is one round
/// trip and whose waiter returns with the hold without one more, its
/// script running GET, ZPOPMIN, TIME, ZSCORE, ZREM, PTTL, SET and PUBLISH
/// (lua/mutex/release.lua's and lua/counted/release.lua's Cost). By FCALL
/// on Redis 7.0 and later, by EVALSHA on 6.2.
#[test]
fn a_cycle_and_a_handoff_cost_the_round_trips_and_commands_documented() {
    use fairlock::{Bound, Wait};
    use std::time::Duration;
    let server = RedisServer::start();
    let (relay_a, relay_b) = (
        Relay::recording(server.port()),
        Relay::recording(server.port()),
    );
    let client = |relay: &Relay| {
        Client::builder(&relay.url())
            .lease(Duration::from_secs(60))
            .waiter_timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    let (a, b) = (client(&relay_a), client(&relay_b));
    let mut admin = server.conn();
    let script = script_command();
    let counts = |names: &[(&str, u64)]| {
        let mut counts: Vec<(String, u64)> =
            names.iter().map(|&(n, c)| (n.to_owned(), c)).collect();
        counts.sort();
        counts
    };
    for kind in Kind::EXCLUSIVE {
        let name = format!("cycle-{kind:?}");
        let hold = |client: &Client| {
            take::<Bound>(client, kind, &name, LeasePolicy::Client, Wait::forever())
                .unwrap()
                .expect("taken")
        };
        // Connections opened, scripts loaded, subscriptions made.
        drop(hold(&a));
        drop(hold(&b));
        commands_run(&mut admin);
        let (taking, held) = relay_a.during(|| hold(&a));
        let (releasing, ()) = relay_a.during(|| held.unlock().unwrap());
        assert_eq!(
            (taking, releasing),
            (vec![script.to_owned()], vec![script.to_owned()]),
            "{kind:?}"
        );
        let want = counts(&[(&script.to_lowercase(), 2), ("get", 2), ("set", 2)]);
        assert_eq!(commands_run(&mut admin), want, "{kind:?}: the cycle");

        let held = hold(&a);
        let waiter = {
            let (b, name) = (b.clone(), name.clone());
            std::thread::spawn(move || {
                let wait = Wait::forever();
                let guard = take::<Bound>(&b, kind, &name, LeasePolicy::Client, wait);
                guard.unwrap().expect("handed over").unlock()
            })
        };
        assert!(wait_until(Duration::from_secs(5), || {
            a.status(kind.lock_kind(), &name, 1).unwrap().queue_len == 1
        }));
        commands_run(&mut admin);
        let before = relay_b.sent().len();
        let (releasing, ()) = relay_a.during(|| held.unlock().unwrap());
        assert_eq!(releasing, [script], "{kind:?}: the handoff's release");
        let waiting = join_within(waiter, Duration::from_secs(5), "the waiter");
        let after_grant = relay_b.sent()[before..].to_vec();
        waiting.unwrap();
        assert_eq!(
            after_grant,
            [script],
            "{kind:?}: only its release after the grant"
        );
        // The handoff's, and the waiter's release after it (nobody queued
        // since: GET, ZPOPMIN, SET).
        let want = counts(&[
            (&script.to_lowercase(), 2),
            ("get", 2),
            ("zpopmin", 2),
            ("time", 1),
            ("zscore", 1),
            ("zrem", 1),
            ("pttl", 1),
            ("set", 2),
            ("publish", 1),
        ]);
        assert_eq!(commands_run(&mut admin), want, "{kind:?}: the handoff");
    }
}
