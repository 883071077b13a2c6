//! Signals never fail a call: a process whose every thread gets a
//! `SIGUSR1` every 200 µs, from a handler installed without `SA_RESTART`
//! (Linux never restarts a socket read that has a timeout, so each one
//! that lands in a read or a write interrupts it with `EINTR`), opens
//! clients and takes and releases every kind of lock for 3 s, with the
//! watchdog renewing short leases and a second thread contending for one
//! mutex, and not one call fails, on one server and on a Redis Cluster
//! (the library blocks those signals on a thread while it waits for a
//! reply: `connections::steady`).

use std::time::Duration;

use fairlock_test_support::roles::signals::{DURATION_MS, PERIOD_US, URL};
use fairlock_test_support::*;

const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

#[test]
fn no_call_fails_in_a_storm_of_signals() {
    let server = RedisServer::start();
    storm(&server.url());
}

/// The same on a Redis Cluster: the cluster client's node connections,
/// the watchdog's own per master and the shard subscribers.
#[test]
fn no_call_fails_in_a_storm_of_signals_on_a_cluster() {
    let cluster = RedisCluster::start();
    storm(&cluster.url());
}

/// Runs the "signal_storm" child against `url`; asserts that no call failed.
fn storm(url: &str) {
    let mut children = Children::new(CHILD);
    let child = children.spawn(
        "signal_storm",
        &[
            (URL, url.to_owned()),
            (DURATION_MS, "3000".to_owned()),
            (PERIOD_US, "200".to_owned()),
        ],
    );
    let done = children.expect_prefix(child, "done ", Duration::from_secs(60));
    let errors: Vec<String> = children
        .take_ready(|event| event.text.starts_with("error "))
        .into_iter()
        .map(|event| event.text)
        .collect();
    let words = done.words();
    let [calls, failed, delivered] = [1, 2, 3].map(|at| words[at].parse::<u64>().expect("a count"));
    // Enough of a storm to have cut reads short many times over: a few
    // thousand signals at the least, on a busy machine.
    assert!(delivered >= 2_000, "only {delivered} signals delivered");
    assert!(calls >= 200, "only {calls} calls in 3 s");
    assert_eq!(
        failed, 0,
        "{failed} of {calls} calls failed under {delivered} signals: {errors:#?}"
    );
}
