//! The `metrics` feature against a real redis-server, with an in-memory
//! recorder installed: each metric moves when it should (an acquisition, a
//! wait that times out or is cancelled, a handoff, a hold, a lease lost to
//! a forced unlock, waiting threads and held locks, a script reload, a
//! subscriber reconnect), the labels name the primitive and, only when the
//! client opts in, the lock; and every guard says how long it waited.
#![cfg(feature = "metrics")]

use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Client, LeaseEnd, Wait, WaitCanceller};
use fairlock_test_support::*;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// The recorder, installed once for this test binary.
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// One metric's value, as the recorder saw it.
#[derive(Debug)]
struct Seen {
    name: String,
    labels: Vec<(String, String)>,
    value: DebugValue,
}

impl Seen {
    fn has(&self, key: &str, value: &str) -> bool {
        self.labels.iter().any(|(k, v)| k == key && v == value)
    }
}

/// Everything recorded (histograms: the samples since the last snapshot).
fn snapshot() -> Vec<Seen> {
    snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| Seen {
            name: key.key().name().to_owned(),
            labels: key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect(),
            value,
        })
        .collect()
}

/// The metrics of lock `name` (by its name label), from one snapshot.
struct Of {
    seen: Vec<Seen>,
}

impl Of {
    fn now(name: &str) -> Of {
        Of {
            seen: snapshot()
                .into_iter()
                .filter(|s| s.has("name", name))
                .collect(),
        }
    }

    fn find<'a>(
        &'a self,
        metric: &'a str,
        with: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Seen> {
        self.seen
            .iter()
            .filter(move |s| s.name == metric && with.iter().all(|(k, v)| s.has(k, v)))
    }

    fn counter(&self, metric: &str, with: &[(&str, &str)]) -> u64 {
        self.find(metric, with)
            .map(|s| match &s.value {
                DebugValue::Counter(n) => *n,
                other => panic!("{metric} is not a counter: {other:?}"),
            })
            .sum()
    }

    fn gauge(&self, metric: &str) -> f64 {
        self.find(metric, &[])
            .map(|s| match &s.value {
                DebugValue::Gauge(g) => g.0,
                other => panic!("{metric} is not a gauge: {other:?}"),
            })
            .sum()
    }

    fn samples(&self, metric: &str, with: &[(&str, &str)]) -> Vec<f64> {
        self.find(metric, with)
            .flat_map(|s| match &s.value {
                DebugValue::Histogram(values) => values.iter().map(|v| v.0).collect::<Vec<_>>(),
                other => panic!("{metric} is not a histogram: {other:?}"),
            })
            .collect()
    }
}

/// A client whose metrics carry lock names (the recorder is installed
/// first: what a client reports before that is lost).
fn named(server: &RedisServer) -> Client {
    snapshotter();
    server
        .builder()
        .metrics_lock_names(true)
        .lease(Duration::from_millis(600))
        .waiter_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

#[test]
fn an_acquisition_and_its_hold_are_counted_timed_and_gauged() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = named(&server);
    let mutex = client.fair_mutex("m-hold");
    let asked = Instant::now();
    let guard = mutex.lock().unwrap();
    let whole = asked.elapsed();
    assert!(guard.waited() <= whole, "{:?} > {whole:?}", guard.waited());
    assert!(guard.waited() > Duration::ZERO);
    let held = Of::now("m-hold");
    let acquired = [("primitive", "mutex"), ("outcome", "acquired")];
    assert_eq!(
        held.counter("fairlock_acquisitions_total", &[("primitive", "mutex")]),
        1
    );
    assert_eq!(held.samples("fairlock_wait_seconds", &acquired).len(), 1);
    assert_eq!(held.gauge("fairlock_held_locks"), 1.0);
    thread::sleep(Duration::from_millis(50));
    guard.unlock().unwrap();
    let after = Of::now("m-hold");
    let hold = after.samples("fairlock_hold_seconds", &[("primitive", "mutex")]);
    assert_eq!(hold.len(), 1);
    assert!(hold[0] >= 0.05 && hold[0] < 5.0, "{hold:?}");
    assert_eq!(after.gauge("fairlock_held_locks"), 0.0);
    assert_eq!(after.counter("fairlock_leases_lost_total", &[]), 0);
}

/// A re-entry joins its thread's hold: `fairlock_acquisitions_total`
/// counts holds taken, one here, as `fairlock_held_locks` and
/// `fairlock_hold_seconds` do; its call's wait is timed all the same.
#[test]
fn a_re_entry_is_no_acquisition() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = named(&server);
    let mutex = client.fair_mutex("m-reenter");
    let outer = mutex.lock().unwrap();
    let inner = mutex.lock().unwrap();
    let held = Of::now("m-reenter");
    let acquired = [("primitive", "mutex"), ("outcome", "acquired")];
    assert_eq!(held.samples("fairlock_wait_seconds", &acquired).len(), 2);
    assert_eq!(held.gauge("fairlock_held_locks"), 1.0);
    assert_eq!(
        held.counter("fairlock_acquisitions_total", &[("primitive", "mutex")]),
        1,
        "the re-entry counted as an acquisition"
    );
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    let after = Of::now("m-reenter");
    let hold = after.samples("fairlock_hold_seconds", &[("primitive", "mutex")]);
    assert_eq!(hold.len(), 1);
}

#[test]
fn a_wait_that_times_out_or_is_cancelled_counts_as_such_and_a_handoff_is_timed() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder = named(&server);
    let other = named(&server);
    let guard = holder.fair_mutex("m-wait").lock().unwrap();
    let theirs = other.fair_mutex("m-wait");
    assert!(theirs
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    // (Histograms drain on every snapshot: read each sample right away.)
    let seen = Of::now("m-wait");
    let timed_out = seen.samples("fairlock_wait_seconds", &[("outcome", "timed_out")]);
    assert_eq!(timed_out.len(), 1, "{timed_out:?}");
    assert!(timed_out[0] >= 0.2, "{timed_out:?}");
    let cancel = WaitCanceller::new();
    let stopper = cancel.clone();
    let waiting = {
        let theirs = theirs.clone();
        thread::spawn(move || {
            theirs
                .lock_with(Wait::forever().cancelled_by(&cancel))
                .unwrap()
                .is_none()
        })
    };
    assert!(wait_until(Duration::from_secs(5), || {
        Of::now("m-wait").gauge("fairlock_waiting_threads") == 1.0
    }));
    stopper.cancel();
    assert!(join_within(
        waiting,
        Duration::from_secs(5),
        "the cancelled wait"
    ));
    let seen = Of::now("m-wait");
    assert_eq!(
        seen.samples("fairlock_wait_seconds", &[("outcome", "cancelled")])
            .len(),
        1
    );
    assert_eq!(seen.gauge("fairlock_waiting_threads"), 0.0);
    // A handoff: the waiter's call returns after its client learns of it.
    let next = thread::spawn(move || {
        let guard = theirs.lock().unwrap();
        guard.waited()
    });
    assert!(wait_until(Duration::from_secs(5), || {
        Of::now("m-wait").gauge("fairlock_waiting_threads") == 1.0
    }));
    thread::sleep(Duration::from_millis(100));
    guard.unlock().unwrap();
    let waited = join_within(next, Duration::from_secs(5), "the waiter");
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    let seen = Of::now("m-wait");
    let handoff = seen.samples("fairlock_handoff_seconds", &[("primitive", "mutex")]);
    assert_eq!(handoff.len(), 1, "{handoff:?}");
    assert!(handoff[0] < 1.0, "{handoff:?}");
    assert_eq!(
        seen.samples("fairlock_wait_seconds", &[("outcome", "acquired")])
            .len(),
        1
    );
}

#[test]
fn a_forced_unlock_counts_a_lost_lease() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = named(&server);
    let guard = client.fair_mutex("m-lost").lock().unwrap();
    assert!(client.fair_mutex("m-lost").force_unlock().unwrap());
    // The watchdog renews every lease/3 (200 ms) and finds it gone.
    assert!(wait_until(Duration::from_secs(3), || guard.is_lease_lost()));
    assert!(wait_until(Duration::from_secs(1), || {
        Of::now("m-lost").counter("fairlock_leases_lost_total", &[("primitive", "mutex")]) == 1
    }));
    drop(guard);
    assert_eq!(
        Of::now("m-lost").counter("fairlock_leases_lost_total", &[]),
        1,
        "counted once"
    );
}

#[test]
fn the_semaphore_and_the_rwlock_are_labelled_by_primitive() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = named(&server);
    let permit = client.fair_semaphore("s-kind", 2).acquire().unwrap();
    let read = client.fair_rwlock("r-kind").read().unwrap();
    assert!(permit.waited() > Duration::ZERO && read.waited() > Duration::ZERO);
    let sem = Of::now("s-kind");
    assert_eq!(
        sem.counter("fairlock_acquisitions_total", &[("primitive", "semaphore")]),
        1
    );
    assert_eq!(sem.gauge("fairlock_held_locks"), 1.0);
    let rw = Of::now("r-kind");
    assert_eq!(
        rw.counter("fairlock_acquisitions_total", &[("primitive", "rwlock")]),
        1
    );
    drop((permit, read));
    assert_eq!(
        Of::now("s-kind")
            .samples("fairlock_hold_seconds", &[])
            .len(),
        1
    );
    assert_eq!(Of::now("r-kind").gauge("fairlock_held_locks"), 0.0);
}

/// An upgrade waiting for the reads beside it waits in the queue (its
/// claim at the head): a waiting thread, as an acquire call's wait is.
#[test]
fn an_upgrade_that_waits_counts_as_a_waiting_thread() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = named(&server);
    let rw = client.fair_rwlock("r-upgrade");
    let upgradable = rw.unbound().upgradable_read().unwrap();
    let read = named(&server).fair_rwlock("r-upgrade").read().unwrap();
    let upgrader = thread::spawn(move || upgradable.upgrade().unwrap());
    assert!(wait_until(Duration::from_secs(5), || {
        rw.status(1).unwrap().queue_len == 1
    }));
    let waiting = Of::now("r-upgrade").gauge("fairlock_waiting_threads");
    read.unlock().unwrap();
    let write = join_within(upgrader, Duration::from_secs(5), "the upgrade");
    assert_eq!(
        waiting, 1.0,
        "the upgrade's wait, while its claim was queued"
    );
    assert_eq!(Of::now("r-upgrade").gauge("fairlock_waiting_threads"), 0.0);
    drop(write);
}

#[test]
fn names_are_labels_only_when_the_client_opts_in() {
    let _serial = serial();
    let server = RedisServer::start();
    snapshotter();
    let client = server.client();
    let before: u64 = snapshot()
        .iter()
        .filter(|s| {
            s.name == "fairlock_acquisitions_total" && !s.labels.iter().any(|(k, _)| k == "name")
        })
        .map(|s| match s.value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum();
    drop(client.fair_mutex("unnamed-secret").lock().unwrap());
    let seen = snapshot();
    assert!(
        !seen.iter().any(|s| s.has("name", "unnamed-secret")),
        "a name label without opting in"
    );
    let after: u64 = seen
        .iter()
        .filter(|s| {
            s.name == "fairlock_acquisitions_total" && !s.labels.iter().any(|(k, _)| k == "name")
        })
        .map(|s| match s.value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum();
    assert_eq!(after, before + 1);
}

#[test]
fn script_reloads_and_subscriber_reconnects_are_counted() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = named(&server);
    let total = |metric: &str| -> u64 {
        snapshot()
            .iter()
            .filter(|s| s.name == metric)
            .map(|s| match s.value {
                DebugValue::Counter(n) => n,
                _ => 0,
            })
            .sum()
    };
    let reloads = total("fairlock_script_reloads_total");
    let mut conn = server.conn();
    lose_scripts(&mut conn);
    drop(client.fair_mutex("m-reload").lock().unwrap());
    assert!(total("fairlock_script_reloads_total") > reloads);
    let reconnects = total("fairlock_reconnects_total");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut conn)
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || total(
            "fairlock_reconnects_total"
        ) > reconnects),
        "no reconnect counted"
    );
    // A pooled connection the server closed: the call goes out again on
    // another, counted as the pool's.
    let pool = |snapshot: &[Seen]| -> u64 {
        (snapshot.iter())
            .filter(|s| s.name == "fairlock_reconnects_total" && s.has("connection", "pool"))
            .map(|s| match s.value {
                DebugValue::Counter(n) => n,
                _ => 0,
            })
            .sum()
    };
    let before = pool(&snapshot());
    let _: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal"])
        .query(&mut conn)
        .unwrap();
    drop(client.fair_mutex("m-reconnect").lock().unwrap());
    assert!(pool(&snapshot()) > before, "no pool reconnect counted");
}

/// A lease whose local count runs out while nobody looks at its guard (a
/// stalled link: no renewal confirms it) is counted as lost once, by the
/// watchdog that finds it so first, not only when the guard is asked.
#[test]
fn a_lease_lost_that_only_the_watchdog_sees_is_counted() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    snapshotter();
    let client = Client::builder(&relay.url())
        .metrics_lock_names(true)
        .lease(Duration::from_millis(600))
        .waiter_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let guard = client.fair_mutex("m-unseen").lock().unwrap();
    let signal = guard.lease_signal();
    relay.stall();
    // The local count ends within the 600 ms lease; the watchdog's next
    // round (every 200 ms) finds it over. Nothing asks the guard.
    let counted = wait_until(Duration::from_secs(3), || {
        Of::now("m-unseen").counter("fairlock_leases_lost_total", &[]) == 1
    });
    relay.resume();
    assert!(counted, "the loss the watchdog found was not counted");
    assert_eq!(signal.ended(), Some(LeaseEnd::Lost));
    drop(guard);
    assert_eq!(
        Of::now("m-unseen").counter("fairlock_leases_lost_total", &[]),
        1,
        "counted once"
    );
}

/// A shard listener's connection (a cluster of Redis 7.0 or later, sharded
/// pub/sub) that the server closed and that was made again counts as a
/// subscriber's reconnect, as the wake channel's does.
#[test]
fn a_shard_subscribers_reconnect_is_counted() {
    let _serial = serial();
    snapshotter();
    let cluster = fairlock_test_support::cluster::RedisCluster::start();
    let client = Client::builder(&cluster.url()).build().unwrap();
    // Its slot's channel subscribed at its master.
    drop(client.fair_mutex("m-shard").lock().unwrap());
    let reconnects = || {
        (snapshot().iter())
            .filter(|s| s.name == "fairlock_reconnects_total" && s.has("connection", "subscriber"))
            .map(|s| match s.value {
                DebugValue::Counter(n) => n,
                _ => 0,
            })
            .sum::<u64>()
    };
    let before = reconnects();
    let mut killed = 0;
    for master in cluster.masters() {
        killed += kill_subscribers(&mut cluster.conn(master));
    }
    assert!(killed >= 1, "no shard subscription to cut");
    assert!(
        wait_until(Duration::from_secs(5), || reconnects() > before),
        "no reconnect counted"
    );
}

/// A hold that Redis lost while its client still counted it (its key
/// deleted: a flush, an eviction, a restart without its data), found so
/// by its own unlock before the watchdog looked: the unlock says
/// `LeaseLost`, and the loss is counted, once.
#[test]
fn a_lease_lost_that_only_the_unlock_finds_is_counted() {
    let _serial = serial();
    let server = RedisServer::start();
    snapshotter();
    // A watchdog round every 10 s: the unlock is first to look.
    let client = (server.builder())
        .metrics_lock_names(true)
        .lease(Duration::from_secs(60))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let guard = client.fair_mutex("m-unlocked-gone").lock().unwrap();
    let () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();
    let err = guard.unlock().expect_err("gone");
    assert_eq!(err.kind(), fairlock::ErrorKind::LeaseLost, "{err}");
    let lost = Of::now("m-unlocked-gone").counter("fairlock_leases_lost_total", &[]);
    assert_eq!(lost, 1, "the loss the unlock found was not counted");
}
