//! fairlock on a Sentinel-managed master (one master, one replica, three
//! sentinels): the client follows the master across a failover, and a thread
//! waiting when the master dies still gets the lock.

use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder, ErrorKind};
use fairlock_test_support::sentinel::SentinelSet;
use fairlock_test_support::*;

fn builder(set: &SentinelSet) -> ClientBuilder {
    Client::builder(&set.url())
        // Long enough to outlast the failover (about 2 to 5 s here): the
        // hold and the queue entry survive it on the promoted replica.
        .lease(Duration::from_secs(15))
        .waiter_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
}

#[test]
fn a_thread_waiting_through_a_sentinel_failover_still_gets_the_lock() {
    let _serial = serial();
    let mut set = SentinelSet::start();
    let holder_client = builder(&set)
        .sync_replicas(1, Duration::from_millis(500))
        .build()
        .unwrap();
    let mutex = holder_client.fair_mutex("sentinel-failover");
    let holder = mutex.lock().unwrap();
    let held_token = holder.fencing_token();
    let waiter = LockThread::lock(
        builder(&set)
            .build()
            .unwrap()
            .fair_mutex("sentinel-failover"),
    );
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));

    let (old_master, killed) = set.kill_master();
    let failover = set.wait_for_failover(old_master, Duration::from_secs(30));
    eprintln!(
        "sentinel: master {old_master} killed; failover done {:.0} ms later",
        ms(killed.elapsed())
    );
    let _ = failover;

    // The acquisition was acknowledged by the replica before lock()
    // returned, so the promoted replica still shows this hold.
    let status = retry_while_unreachable(|| mutex.status(5));
    let holder_seen = status.holder.expect("the hold survived the failover");
    assert_eq!(holder_seen.fencing_token, held_token);
    assert_eq!(status.queue_len, 1, "the waiter kept its place");
    assert!(!holder.is_lease_lost());

    // The promoted replica has no replica of its own: the release happens
    // on the new master, and its shortfall is reported.
    let released = Instant::now();
    assert_eq!(
        holder.unlock().map_err(|e| e.kind()),
        Err(ErrorKind::NotReplicated)
    );
    let (granted, token) =
        waiter.granted_within(Duration::from_secs(10), "the waiter across the failover");
    eprintln!(
        "sentinel: waiter granted {:.1} ms after the unlock on the new master ({:.0} ms after \
         the kill); token {token} > {held_token}",
        ms(granted.saturating_duration_since(released)),
        ms(granted - killed)
    );
    assert!(token > held_token);
    waiter.release("the waiter across the failover");

    // New clients find the new master through the sentinels.
    let fresh = builder(&set).build().unwrap();
    let guard = fresh.fair_mutex("sentinel-failover").lock().unwrap();
    assert!(guard.fencing_token() > token);
    guard.unlock().unwrap();
}

#[test]
fn a_sentinel_url_naming_an_unknown_master_is_a_clear_error() {
    let _serial = serial();
    let set = SentinelSet::start();
    let url = set
        .url()
        .replace(SentinelSet::master_name(), "no-such-master");
    let started = Instant::now();
    let err = Client::builder(&url)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap_err();
    eprintln!(
        "sentinel: unknown master: {err} ({:.0} ms)",
        ms(started.elapsed())
    );
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
