//! Server work per lock cycle stays flat from 0 to 10 000 queued waiters.
//!
//! Waiters are enqueued through the library's own acquire script (the same
//! Lua the client runs), with owner ids nobody listens for and a long
//! liveness deadline, so thousands of live entries cost no threads.

#[path = "support/fake_queue.rs"]
mod fake_queue;
mod support;

use fake_queue::{evalsha_usec, queue_of};
use support::*;

/// Server µs per lock cycle (see `ScriptedLock::cycle`) with `waiters`
/// queued, over `cycles` cycles.
fn cycle_cost(server: &RedisServer, name: &str, waiters: u64, cycles: u64) -> f64 {
    let (lock, mut conn) = queue_of(server, name, waiters);
    let before = evalsha_usec(&mut conn);
    for n in 0..cycles {
        lock.cycle(&mut conn, waiters, n);
    }
    (evalsha_usec(&mut conn) - before) / cycles as f64
}

#[test]
fn server_time_per_cycle_is_flat_in_the_queue_length() {
    let server = RedisServer::start();
    let cycles = 2000;
    let mut costs = Vec::new();
    for (i, waiters) in [0u64, 1, 100, 1000, 10_000].into_iter().enumerate() {
        // The least of three runs: other load on the machine only adds time.
        let cost = (0..3)
            .map(|run| cycle_cost(&server, &format!("cost{i}-{run}"), waiters, cycles))
            .fold(f64::INFINITY, f64::min);
        eprintln!("waiters {waiters:>6}: {cost:.1} µs of server time per cycle");
        costs.push((waiters, cost));
    }
    let at = |n: u64| costs.iter().find(|(w, _)| *w == n).unwrap().1;
    // With a queue, each cycle is a release that hands over (grant, publish,
    // tell the next head) plus one arrival; with none it is take + release.
    // The O(log N) claim is about the queue length, so the bound compares
    // cycles that both hand over; the no-queue ratio is reported and bounded
    // loosely.
    let flat = at(10_000) / at(1);
    eprintln!(
        "10 000 vs 1 waiter: {flat:.2}x; 10 000 vs 100: {:.2}x; 10 000 vs none: {:.2}x",
        at(10_000) / at(100),
        at(10_000) / at(0)
    );
    assert!(flat < 1.5, "cost grows with the queue: {costs:?}");
    assert!(
        at(10_000) / at(100) < 1.5,
        "cost grows with the queue: {costs:?}"
    );
    assert!(at(10_000) / at(0) < 4.0, "{costs:?}");
}
