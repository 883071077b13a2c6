//! Two builds on one lock: this build (`fairlock`) and a copy of
//! it whose layout differs by one planted change, with its data format
//! raised by one (`fairlock_next`, tests/next/: the same src/lib.rs, its
//! Lua assembled by the same build.rs with the change), linked into this
//! one process and run on one server. For every kind (mutex, semaphore,
//! rwlock read and write, election, multi-lock parts) and every call a
//! client can send, in both directions and whichever build takes the lock
//! first, the other build's call is refused with `FormatMismatch` naming
//! both formats, held or free, and changes nothing: never two holders at
//! once, never a lock of the other build taken for free. The first
//! build's own calls (re-entry, revoke, upgrade, downgrade, status, force
//! unlock) work on throughout. A guard whose lock went to the other build
//! (its fixed lease ran out and the key with it, or its key was removed)
//! gets `FormatMismatch` from its unlock, upgrade and downgrade, and its
//! renewals are refused, so it learns the lease is lost. Data from before
//! data formats ("unversioned") is refused too, never taken for free. A
//! mutex's lock key and a counted lock's meta, the anchors whose format
//! word stands for the queue's keys, outlive them, their leases unchanged.
//!
//! A third build (`fairlock_renumbered`, tests/renumbered/) differs from
//! this one by its format number alone, so that a fast path that read a
//! value's fields without its format word would take the other's data for
//! its own (`format_number_alone`): the take of a free lock, a call beside
//! the counted engine's lone hold and the release of a hold are each
//! refused, both ways.

use std::time::{Duration, Instant};

use fairlock_test_support::{lock_key, RedisServer};

/// A fixed lease that runs out within a test.
const SHORT: Duration = Duration::from_millis(200);

/// The shortest fence life: a freed or run-out lock's key is gone a second
/// after, so a test can hand a lock from one build to the other.
const FENCE: Duration = Duration::from_secs(1);

/// Polls `f` until it gives `Some`, for at most `within`.
fn until<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(found) = f() {
            return found;
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The tests of one direction: `first` takes the lock first, `other` is
/// the other build.
macro_rules! two_builds {
    ($module:ident, $first:ident, $other:ident) => {
        mod $module {
            use std::time::{Duration, Instant};

            use fairlock_test_support::RedisServer;

            use super::{lock_key, until, FENCE, SHORT};

            fn clients(server: &RedisServer) -> ($first::Client, $other::Client) {
                let first = $first::Client::builder(&server.url())
                    .lease(Duration::from_secs(2))
                    .waiter_timeout(Duration::from_secs(1))
                    .fence_life(FENCE)
                    .build()
                    .unwrap();
                let other = $other::Client::builder(&server.url())
                    .lease(Duration::from_secs(2))
                    .waiter_timeout(Duration::from_secs(1))
                    .fence_life(FENCE)
                    .build()
                    .unwrap();
                (first, other)
            }

            /// `result`, a call of the other build, is the refusal that
            /// names both formats and the lock.
            fn refused<T>(what: &str, result: $other::Result<T>) {
                let err = match result {
                    Ok(_) => panic!("{what}: the other build's call was accepted"),
                    Err(err) => err,
                };
                assert_eq!(
                    err.kind(),
                    $other::ErrorKind::FormatMismatch,
                    "{what}: {err:?}"
                );
                let text = err.to_string();
                for format in [$first::DATA_FORMAT, $other::DATA_FORMAT] {
                    assert!(
                        text.contains(&format!("data format {format}")),
                        "{what}: {text}"
                    );
                }
                assert!(text.contains("{"), "{what}: names the lock's key: {text}");
            }

            /// A waiting call of the other build is refused at once, not
            /// after its wait.
            fn refused_at_once<T>(what: &str, call: impl FnOnce() -> $other::Result<T>) {
                let start = Instant::now();
                refused(what, call());
                assert!(
                    start.elapsed() < Duration::from_millis(900),
                    "{what}: waited"
                );
            }

            #[test]
            fn a_mutex_of_one_build_is_refused_to_the_other_held_or_free() {
                let server = RedisServer::start();
                let (first, other) = clients(&server);
                let a = first.fair_mutex("m");
                let b = other.fair_mutex("m");
                let mut held = Some(a.lock().unwrap());
                for round in ["held", "free"] {
                    refused(round, b.try_lock());
                    refused_at_once(round, || b.try_lock_for(Duration::from_secs(1)));
                    refused_at_once(round, || b.lock_with(Duration::from_secs(1)));
                    refused(round, b.status(10));
                    refused(round, b.is_locked());
                    refused(round, b.queue_len());
                    refused(round, b.hold_count());
                    refused(round, b.remaining_lease());
                    refused(round, b.is_held_by_current_thread());
                    refused(round, b.force_unlock());
                    refused(round, b.force_unlock_holder());
                    refused(round, b.revoke());
                    refused(round, b.unbound().try_lock());
                    if let Some(held) = held.take() {
                        // The first build's own calls work on: a re-entry,
                        // its status, a revocation; the hold is its alone.
                        let again = a.lock().unwrap();
                        assert_eq!(a.hold_count().unwrap(), 2);
                        again.unlock().unwrap();
                        assert_eq!(a.status(10).unwrap().holder_count, 1);
                        assert_eq!(a.revoke().unwrap(), 1);
                        assert!(!held.is_lease_lost());
                        assert!(a.is_locked().unwrap());
                        held.unlock().unwrap();
                        assert!(!a.is_locked().unwrap());
                    }
                }
                let again = a
                    .try_lock()
                    .unwrap()
                    .expect("the first build takes it again");
                again.unlock().unwrap();
                assert!(a.force_unlock().is_ok());
            }

            #[test]
            fn a_semaphore_of_one_build_is_refused_to_the_other_held_or_free() {
                let server = RedisServer::start();
                let (first, other) = clients(&server);
                let a = first.fair_semaphore("s", 2);
                let b = other.fair_semaphore("s", 2);
                let mut permit = Some(a.acquire().unwrap());
                for round in ["held", "free"] {
                    refused(round, b.try_acquire());
                    refused(round, b.try_acquire_many(2));
                    refused_at_once(round, || b.try_acquire_for(Duration::from_secs(1)));
                    refused_at_once(round, || b.try_acquire_many_for(1, Duration::from_secs(1)));
                    refused(round, b.available());
                    refused(round, b.set_permits(3));
                    refused(round, b.status(10));
                    refused(round, b.is_locked());
                    refused(round, b.force_unlock());
                    refused(round, b.revoke());
                    if let Some(permit) = permit.take() {
                        let second = a.try_acquire().unwrap().expect("room for a second");
                        assert_eq!(a.available().unwrap(), 0);
                        assert_eq!(a.revoke().unwrap(), 2);
                        second.unlock().unwrap();
                        assert!(!permit.is_lease_lost());
                        permit.unlock().unwrap();
                    }
                }
                assert_eq!(a.set_permits(3).unwrap().previous, Some(2));
                refused("permits set", b.try_acquire());
                assert_eq!(a.available().unwrap(), 3);
            }

            #[test]
            fn a_rwlock_of_one_build_is_refused_to_the_other_read_written_or_free() {
                let server = RedisServer::start();
                let (first, other) = clients(&server);
                let a = first.fair_rwlock("rw");
                let b = other.fair_rwlock("rw");
                for round in ["read", "upgradable", "write", "free"] {
                    let guard = match round {
                        "read" => Some(a.read().unwrap().into_any()),
                        "upgradable" => Some(a.upgradable_read().unwrap().into_any()),
                        "write" => Some(a.write().unwrap().into_any()),
                        _ => None,
                    };
                    refused(round, b.try_read());
                    refused(round, b.try_write());
                    refused(round, b.try_upgradable_read());
                    refused_at_once(round, || b.try_read_for(Duration::from_secs(1)));
                    refused_at_once(round, || b.try_write_for(Duration::from_secs(1)));
                    refused_at_once(round, || b.try_upgradable_read_for(Duration::from_secs(1)));
                    refused(round, b.status(10));
                    refused(round, b.force_unlock());
                    refused(round, b.revoke());
                    if let Some(guard) = guard {
                        assert!(!guard.is_lease_lost(), "{round}");
                        guard.unlock().unwrap();
                    }
                }
                // The first build's upgrade and downgrade work on.
                let up = a.upgradable_read().unwrap();
                let write = up.upgrade().unwrap();
                let read = write.downgrade().unwrap();
                refused("downgraded", b.try_write());
                read.unlock().unwrap();
            }

            #[test]
            fn an_election_of_one_build_is_refused_to_the_other_led_or_vacant() {
                let server = RedisServer::start();
                let (first, other) = clients(&server);
                let a = first.election("e").with_value("first");
                let b = other.election("e").with_value("other");
                let mut leading = Some(a.campaign().unwrap());
                for round in ["led", "vacant"] {
                    refused(round, b.try_campaign());
                    refused_at_once(round, || b.try_campaign_for(Duration::from_secs(1)));
                    refused(round, b.leader());
                    refused(round, b.status(10));
                    refused(round, b.force_unlock());
                    refused(round, b.revoke());
                    if let Some(leading) = leading.take() {
                        assert_eq!(a.leader().unwrap().unwrap().value, "first");
                        assert!(!leading.is_lease_lost());
                        leading.unlock().unwrap();
                    }
                }
                assert!(a.leader().unwrap().is_none());
            }

            #[test]
            fn a_multi_lock_of_the_other_build_is_refused_at_any_part_and_leaves_nothing() {
                let server = RedisServer::start();
                let (first, other) = clients(&server);
                // Parts of every kind the first build holds or used.
                let mutex = first.fair_mutex("p-mutex").lock().unwrap();
                let read = first.fair_rwlock("p-read").read().unwrap();
                let permit = first.fair_semaphore("p-sem", 2).acquire().unwrap();
                let parts: [(&str, fn($other::FairMultiLock) -> $other::FairMultiLock); 3] = [
                    ("mutex", |m| m.and_mutex("p-mutex")),
                    ("write", |m| m.and_write("p-read")),
                    ("permits", |m| m.and_permits("p-sem", 2, 1)),
                ];
                for (part, add) in parts {
                    // A part of the other build's own first, free: the
                    // multi-lock takes it, then meets the foreign part.
                    let multi = add(other.fair_multi_lock(["q-own"]));
                    refused(part, multi.try_lock());
                    refused_at_once(part, || multi.try_lock_for(Duration::from_secs(1)));
                    let own = other.fair_mutex("q-own");
                    assert!(!own.is_locked().unwrap(), "{part}: a part left held");
                }
                mutex.unlock().unwrap();
                read.unlock().unwrap();
                permit.unlock().unwrap();
                let multi = other.fair_multi_lock(["p-mutex"]);
                refused("free", multi.try_lock());
                // The first build's own multi-lock over them works on.
                let all = first
                    .fair_multi_lock(["p-mutex"])
                    .and_read("p-read")
                    .and_permits("p-sem", 2, 2)
                    .lock()
                    .unwrap();
                all.unlock().unwrap();
            }

            #[test]
            fn a_guard_whose_lock_went_to_the_other_build_gets_a_clear_error_never_a_second_hold() {
                let server = RedisServer::start();
                let (first, other) = clients(&server);
                // A fixed lease runs out, its key a fence life later; then
                // the other build may take the name, and the old guard's
                // calls meet its format.
                let lost = |what: &str, err: $first::Error| {
                    assert_eq!(
                        err.kind(),
                        $first::ErrorKind::FormatMismatch,
                        "{what}: {err:?}"
                    );
                };
                let old = first
                    .fair_mutex("g-mutex")
                    .with_fixed_lease(SHORT)
                    .lock()
                    .unwrap();
                let b = other.fair_mutex("g-mutex");
                let new = until(Duration::from_secs(5), "the other build takes it", || {
                    b.try_lock().ok().flatten()
                });
                assert!(old.is_lease_lost());
                lost("unlock", old.unlock().unwrap_err());
                assert!(b.is_locked().unwrap() && !new.is_lease_lost());
                new.unlock().unwrap();

                let up = first
                    .fair_rwlock("g-up")
                    .with_fixed_lease(SHORT)
                    .upgradable_read()
                    .unwrap();
                let b = other.fair_rwlock("g-up");
                let write = until(Duration::from_secs(5), "the other build writes", || {
                    b.try_write().ok().flatten()
                });
                lost("upgrade", up.upgrade().unwrap_err());
                assert!(!write.is_lease_lost());
                write.unlock().unwrap();

                let old = first
                    .fair_rwlock("g-down")
                    .with_fixed_lease(SHORT)
                    .write()
                    .unwrap();
                let b = other.fair_rwlock("g-down");
                let write = until(Duration::from_secs(5), "the other build writes", || {
                    b.try_write().ok().flatten()
                });
                lost("downgrade", old.downgrade().unwrap_err());
                assert!(!write.is_lease_lost());
                write.unlock().unwrap();

                // A watchdog-renewed hold whose key is removed by hand: the
                // other build takes the name, and the old hold's renewals
                // are refused, so it is lost by its lease's end.
                let renewed = first.fair_mutex("g-renew").lock().unwrap();
                let mut conn = server.conn();
                let () = redis::cmd("DEL")
                    .arg(lock_key("g-renew"))
                    .query(&mut conn)
                    .unwrap();
                let b = other.fair_mutex("g-renew");
                let new = b.try_lock().unwrap().expect("the key is gone");
                until(
                    Duration::from_secs(4),
                    "the old hold learns it is lost",
                    || renewed.is_lease_lost().then_some(()),
                );
                assert!(!new.is_lease_lost());
                lost("unlock", renewed.unlock().unwrap_err());
                new.unlock().unwrap();
            }
        }
    };
}

two_builds!(this_build_first, fairlock, fairlock_next);
two_builds!(next_build_first, fairlock_next, fairlock);

/// The two builds differ in their data format by one, and in the layout
/// of a free mutex's key (the planted change).
#[test]
fn the_two_builds_differ_by_one_format() {
    assert_eq!(fairlock_next::DATA_FORMAT, fairlock::DATA_FORMAT + 1);
    let server = RedisServer::start();
    let mut conn = server.conn();
    for (name, free) in [("this", " - "), ("next", " = ")] {
        match name {
            "this" => server
                .client()
                .fair_mutex(name)
                .lock()
                .unwrap()
                .unlock()
                .unwrap(),
            _ => fairlock_next::Client::open(&server.url())
                .unwrap()
                .fair_mutex(name)
                .lock()
                .unwrap()
                .unlock()
                .unwrap(),
        }
        let stored: String = redis::cmd("GET")
            .arg(lock_key(name))
            .query(&mut conn)
            .unwrap();
        assert!(stored.contains(free), "{name}: {stored}");
    }
}

/// A lock key or a meta of the layout before data formats (what fairlock
/// wrote before them) is refused as "unversioned", held or free: never
/// read as this build's, never taken for free.
#[test]
fn data_from_before_formats_is_refused_never_taken_for_free() {
    let server = RedisServer::start();
    let client = server.client();
    let mut conn = server.conn();
    let meta = lock_key("old-sem").replacen(":lock:", ":semmeta:", 1);
    for (key, value) in [
        (lock_key("old-free"), "1700000000000000 - - -"),
        (lock_key("old-held"), "1700000000000000 c:1 5 600000"),
        (meta, "2 0 1700000000000000"),
    ] {
        let () = redis::cmd("SET")
            .arg(&key)
            .arg(value)
            .arg("PX")
            .arg(60_000)
            .query(&mut conn)
            .unwrap();
    }
    for name in ["old-free", "old-held"] {
        let mutex = client.fair_mutex(name);
        for result in [
            mutex.try_lock().map(|_| ()),
            mutex.force_unlock().map(|_| ()),
        ] {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), fairlock::ErrorKind::FormatMismatch, "{err:?}");
            assert!(err.to_string().contains("before data formats"), "{err}");
        }
    }
    let err = client
        .fair_semaphore("old-sem", 2)
        .try_acquire()
        .unwrap_err();
    assert_eq!(err.kind(), fairlock::ErrorKind::FormatMismatch, "{err:?}");
    let untouched: String = redis::cmd("GET")
        .arg(lock_key("old-free"))
        .query(&mut conn)
        .unwrap();
    assert_eq!(untouched, "1700000000000000 - - -");
}

/// A revoke's or a force release's record of another build, written
/// alone on a lock that had no anchor (each kept a fence life), is not a
/// match and is overwritten (docs/compatibility.md): this build then takes
/// the lock, and its own revoke and force release of its own hold work,
/// for every kind, rather than being refused as another format's lock.
#[test]
fn another_builds_record_left_alone_does_not_refuse_this_builds_revoke_or_force_release() {
    use fairlock::LockKind;
    let server = RedisServer::start();
    let this = server.client();
    let next = fairlock_next::Client::open(&server.url()).unwrap();
    for (kind, next_kind) in [
        (LockKind::Mutex, fairlock_next::LockKind::Mutex),
        (LockKind::Semaphore, fairlock_next::LockKind::Semaphore),
        (LockKind::RwLock, fairlock_next::LockKind::RwLock),
        (LockKind::Election, fairlock_next::LockKind::Election),
    ] {
        // The other build's calls on a lock nobody used: each leaves its
        // record alone.
        assert_eq!(next.revoke(next_kind, "r").unwrap(), 0, "{kind:?}");
        assert!(!next.force_unlock(next_kind, "f").unwrap(), "{kind:?}");
        let hold = |name: &str| -> Box<dyn std::any::Any> {
            match kind {
                LockKind::Mutex => Box::new(this.fair_mutex(name).lock().unwrap()),
                LockKind::Semaphore => Box::new(this.fair_semaphore(name, 2).acquire().unwrap()),
                LockKind::RwLock => Box::new(this.fair_rwlock(name).read().unwrap()),
                _ => Box::new(this.election(name).campaign().unwrap()),
            }
        };
        let revoked = hold("r");
        match this.revoke(kind, "r") {
            Ok(asked) => assert_eq!(asked, 1, "{kind:?}"),
            Err(err) => panic!("{kind:?}: this build's revoke of its own hold: {err}"),
        }
        drop(revoked);
        let forced = hold("f");
        match this.force_unlock(kind, "f") {
            Ok(freed) => assert!(freed, "{kind:?}"),
            Err(err) => panic!("{kind:?}: this build's force release of its own hold: {err}"),
        }
        drop(forced);
        // Next kind: fresh names.
        let () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();
    }
}

/// The anchor outlives every other key of its lock, so its format word
/// stands for them: a mutex's queue kept longer than its lock key (a
/// waiter timeout past the lease and the fence life) pushes the lock key
/// out with it, the hold's lease unchanged (its fence grows instead), when
/// the first waiter queues and again when the hold is handed to it with a
/// second still queued (the new hold's lease what it asked for).
#[test]
fn a_mutex_lock_key_outlives_its_queue_and_the_lease_stays() {
    let server = RedisServer::start();
    let client = |waiter_timeout| {
        fairlock::Client::builder(&server.url())
            .lease(Duration::from_secs(2))
            .waiter_timeout(waiter_timeout)
            .fence_life(FENCE)
            .build()
            .unwrap()
    };
    let (a, b, c) = (
        client(Duration::from_secs(1)),
        client(Duration::from_secs(5)),
        client(Duration::from_secs(5)),
    );
    let held = a.fair_mutex("anchor").lock().unwrap();
    let lease = a.fair_mutex("anchor").remaining_lease().unwrap().unwrap();
    let (granted_tx, granted) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let waiter = std::thread::spawn(move || {
        let guard = b.fair_mutex("anchor").lock().unwrap();
        granted_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        guard.unlock().unwrap();
    });
    let mut conn = server.conn();
    let queue = lock_key("anchor").replacen(":lock:", ":queue:", 1);
    until(Duration::from_secs(3), "the waiter queues", || {
        (fairlock_test_support::fake_queue::queued_entries(&mut conn, &queue) == 1).then_some(())
    });
    // The lock key's TTL, checked to be at least the queue's, which lives
    // past the lease and the fence life.
    let outlives = |when: &str, conn: &mut redis::Connection| -> i64 {
        let pttl = |key: &str, conn: &mut redis::Connection| -> i64 {
            redis::cmd("PTTL").arg(key).query(conn).unwrap()
        };
        let (lock_ttl, queue_ttl) = (pttl(&lock_key("anchor"), conn), pttl(&queue, conn));
        assert!(
            queue_ttl > 3_000,
            "{when}: the queue lives past lease and fence: {queue_ttl} ms"
        );
        assert!(
            lock_ttl >= queue_ttl,
            "{when}: lock key {lock_ttl} ms, queue {queue_ttl} ms"
        );
        lock_ttl
    };
    outlives("the first waiter queued", &mut conn);
    let left = a.fair_mutex("anchor").remaining_lease().unwrap().unwrap();
    assert!(left <= lease, "the lease grew from {lease:?} to {left:?}");
    // A second waiter behind the first, then the hold handed to the first.
    let second = std::thread::spawn(move || {
        let guard = c.fair_mutex("anchor").lock().unwrap();
        guard.unlock().unwrap();
    });
    until(Duration::from_secs(3), "the second waiter queues", || {
        (fairlock_test_support::fake_queue::queued_entries(&mut conn, &queue) == 2).then_some(())
    });
    held.unlock().unwrap();
    granted.recv_timeout(Duration::from_secs(3)).unwrap();
    let lock_ttl = outlives("after the handoff", &mut conn);
    let value: String = redis::cmd("GET")
        .arg(lock_key("anchor"))
        .query(&mut conn)
        .unwrap();
    let fence: i64 = value
        .split(' ')
        .nth(3)
        .unwrap()
        .trim_start_matches('+')
        .parse()
        .unwrap();
    let left = lock_ttl - fence;
    assert!(
        (1_000..=2_000).contains(&left),
        "the new hold's lease is the 2 s it asked for, less the time since: {left} ms ({value})"
    );
    release.send(()).unwrap();
    waiter.join().unwrap();
    second.join().unwrap();
}

/// The same for a counted lock, whose meta is its anchor: a semaphore of
/// one permit and a rwlock's write, each held, then queued for by two
/// calls that keep their entries longer than the lease and the fence life.
/// The meta outlives the queue when the first waiter queues behind the
/// lone hold (its lease unchanged), and again when that hold is handed
/// to it with the second still queued (its lease what it asked for).
#[test]
fn a_counted_meta_outlives_its_queue_through_an_arrival_and_a_handoff() {
    use fairlock::__test_support::{LockKeys, LockKind};
    use fairlock::{AnyGuard, Client, Guard};

    let server = RedisServer::start();
    let client = |waiter_timeout| {
        Client::builder(&server.url())
            .lease(Duration::from_secs(2))
            .waiter_timeout(waiter_timeout)
            .fence_life(FENCE)
            .build()
            .unwrap()
    };
    let take = |client: &Client, kind: LockKind| -> AnyGuard {
        let guard = match kind {
            LockKind::Semaphore => client
                .fair_semaphore("anchor-c", 1)
                .acquire()
                .map(Guard::into_any),
            _ => client.fair_rwlock("anchor-c").write().map(Guard::into_any),
        };
        guard.unwrap()
    };
    let mut conn = server.conn();
    for kind in [LockKind::Semaphore, LockKind::RwLock] {
        let keys = LockKeys::of_kind("fairlock", "anchor-c", kind).unwrap().all;
        let (queue, meta) = (keys[1].clone(), keys[2].clone());
        let pttl = |key: &str, conn: &mut redis::Connection| -> i64 {
            redis::cmd("PTTL").arg(key).query(conn).unwrap()
        };
        // The lone hold's lease left: the meta's PTTL less its fence ms.
        let lease_left = |pttl: i64, conn: &mut redis::Connection| -> i64 {
            let value: String = redis::cmd("GET").arg(&meta).query(conn).unwrap();
            let fence = value.split(' ').nth(4).unwrap().trim_start_matches('+');
            pttl - fence.parse::<i64>().unwrap()
        };
        let queued = |conn: &mut redis::Connection| -> u64 {
            fairlock_test_support::fake_queue::queued_entries(conn, &queue)
        };
        let (a, b, c) = (
            client(Duration::from_secs(1)),
            client(Duration::from_secs(5)),
            client(Duration::from_secs(5)),
        );
        let held = take(&a, kind);
        let lease = lease_left(pttl(&meta, &mut conn), &mut conn);
        let (granted_tx, granted) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let first = std::thread::spawn(move || {
            let guard = take(&b, kind);
            granted_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            guard.unlock().unwrap();
        });
        until(Duration::from_secs(3), "the first waiter queues", || {
            (queued(&mut conn) == 1).then_some(())
        });
        let (meta_ttl, queue_ttl) = (pttl(&meta, &mut conn), pttl(&queue, &mut conn));
        assert!(
            queue_ttl > 3_000,
            "{kind:?}: the queue lives {queue_ttl} ms"
        );
        assert!(
            meta_ttl > queue_ttl,
            "{kind:?}: meta {meta_ttl} ms, queue {queue_ttl} ms"
        );
        let left = lease_left(meta_ttl, &mut conn);
        assert!(
            left <= lease,
            "{kind:?}: the lease grew from {lease} to {left} ms"
        );
        let second = std::thread::spawn(move || take(&c, kind).unlock().unwrap());
        until(Duration::from_secs(3), "the second waiter queues", || {
            (queued(&mut conn) == 2).then_some(())
        });
        held.unlock().unwrap();
        granted.recv_timeout(Duration::from_secs(3)).unwrap();
        assert_eq!(queued(&mut conn), 1, "{kind:?}: the second still waits");
        let (meta_ttl, queue_ttl) = (pttl(&meta, &mut conn), pttl(&queue, &mut conn));
        assert!(
            meta_ttl > queue_ttl,
            "{kind:?}: meta {meta_ttl} ms, queue {queue_ttl} ms after the handoff"
        );
        let left = lease_left(meta_ttl, &mut conn);
        assert!(
            (1..=2_000).contains(&left),
            "{kind:?}: the handed lease is {left} ms"
        );
        release.send(()).unwrap();
        first.join().unwrap();
        second.join().unwrap();
    }
}

/// Two builds that differ by their data format alone (this one and
/// tests/renumbered/, `fairlock_renumbered`): every value one writes is
/// the other's but for its first word, so a fast path that matched a
/// value's fields and not its format word would read the other build's
/// data as its own (the build of tests/next/ differs in a free mutex's
/// layout too, which such a fast path would fail to match, so it would
/// not show). Each fast path, both ways: the take of a free lock (a
/// mutex's, an election's, a semaphore's and a rwlock's, for one unit and
/// for all of them), a call that fits beside the counted engine's lone
/// hold and one that would queue behind it, and the release of a hold (a
/// mutex's, an election's, a counted lone hold's: a permit, a read, a
/// write, and a permit with a waiter queued) whose key the other build
/// wrote for that very hold: each refused with `FormatMismatch`, the key
/// left as it was.
mod format_number_alone {
    use fairlock::__test_support::{LockKeys, LockKind};
    use fairlock_test_support::RedisServer;

    /// The key whose first word is the format of lock `name` of `kind`:
    /// a mutex's (an election's) lock key, a counted lock's meta.
    fn anchor(kind: LockKind, name: &str) -> String {
        let keys = LockKeys::of_kind("fairlock", name, kind).unwrap();
        match kind {
            LockKind::Mutex | LockKind::Election => keys.all[0].clone(),
            _ => keys.all[2].clone(),
        }
    }

    fn get(conn: &mut redis::Connection, key: &str) -> Option<String> {
        redis::cmd("GET").arg(key).query(conn).unwrap()
    }

    /// Runs `calls` (each expected to be refused) and checks the anchor
    /// of `name` is left as it was.
    fn untouched(conn: &mut redis::Connection, kind: LockKind, name: &str, calls: impl FnOnce()) {
        let key = anchor(kind, name);
        let before = get(conn, &key).unwrap_or_else(|| panic!("{name}: no key"));
        calls();
        assert_eq!(get(conn, &key), Some(before), "{name}: the key changed");
    }

    /// The hold of lock `name` in the other build's format: its anchor's
    /// first word `v<from>` made `v<to>`, the rest (the hold) as it is,
    /// which is what the other build writes for the same hold.
    fn written_by_the_other(
        conn: &mut redis::Connection,
        kind: LockKind,
        name: &str,
        from: u32,
        to: u32,
    ) {
        let key = anchor(kind, name);
        let value = get(conn, &key).unwrap();
        let rest = value
            .strip_prefix(&format!("v{from} "))
            .unwrap_or_else(|| panic!("{name}: {value}"));
        let () = redis::cmd("SET")
            .arg(&key)
            .arg(format!("v{to} {rest}"))
            .arg("KEEPTTL")
            .query(conn)
            .unwrap();
    }

    /// The shape of a value: every run of letters and digits as `w`
    /// (tokens, ids and numbers differ from hold to hold; the layout, its
    /// words and the marks between them, does not).
    fn shape(value: &str) -> String {
        let mut shape = String::new();
        for c in value.chars() {
            if !c.is_ascii_alphanumeric() {
                shape.push(c);
            } else if !shape.ends_with('w') {
                shape.push('w');
            }
        }
        shape
    }

    /// The two builds write the same values but for the format word: a
    /// free mutex's key, a held one, a counted lock's lone hold and free
    /// meta.
    #[test]
    fn the_two_builds_differ_by_the_format_number_alone() {
        assert_eq!(fairlock_renumbered::DATA_FORMAT, fairlock::DATA_FORMAT + 1);
        let server = RedisServer::start();
        let mut conn = server.conn();
        let this = server.client();
        let renumbered = fairlock_renumbered::Client::open(&server.url()).unwrap();
        let mut values = [Vec::new(), Vec::new()];
        for (build, name) in [(0, "this"), (1, "renumbered")] {
            let (mutex, meta) = (
                anchor(LockKind::Mutex, name),
                anchor(LockKind::Semaphore, name),
            );
            let mut read = |conn: &mut redis::Connection, key: &str| {
                let value = get(conn, key).unwrap();
                let format = [fairlock::DATA_FORMAT, fairlock_renumbered::DATA_FORMAT][build];
                let rest = value.strip_prefix(&format!("v{format} ")).unwrap();
                values[build].push(shape(rest));
            };
            if build == 0 {
                let held = this.fair_mutex(name).lock().unwrap();
                let permit = this.fair_semaphore(name, 2).acquire().unwrap();
                read(&mut conn, &mutex);
                read(&mut conn, &meta);
                held.unlock().unwrap();
                permit.unlock().unwrap();
            } else {
                let held = renumbered.fair_mutex(name).lock().unwrap();
                let permit = renumbered.fair_semaphore(name, 2).acquire().unwrap();
                read(&mut conn, &mutex);
                read(&mut conn, &meta);
                held.unlock().unwrap();
                permit.unlock().unwrap();
            }
            read(&mut conn, &mutex);
            read(&mut conn, &meta);
        }
        assert_eq!(values[0], values[1]);
    }

    macro_rules! fast_paths {
        ($module:ident, $first:ident, $other:ident) => {
            mod $module {
                use std::time::Duration;

                use fairlock::__test_support::LockKind;
                use fairlock_test_support::RedisServer;

                use super::{untouched, written_by_the_other};

                /// `result`, a call of the other build, is its refusal.
                fn refused<T>(what: &str, result: $other::Result<T>) {
                    match result {
                        Ok(_) => panic!("{what}: the other build's call was accepted"),
                        Err(err) => assert_eq!(
                            err.kind(),
                            $other::ErrorKind::FormatMismatch,
                            "{what}: {err:?}"
                        ),
                    }
                }

                #[test]
                fn every_fast_path_refuses_the_other_builds_keys() {
                    let server = RedisServer::start();
                    let first = $first::Client::open(&server.url()).unwrap();
                    let other = $other::Client::open(&server.url()).unwrap();
                    let conn = &mut server.conn();
                    let wait = Duration::from_millis(500);

                    // The take of a free lock.
                    first.fair_mutex("free").lock().unwrap().unlock().unwrap();
                    let m = other.fair_mutex("free");
                    untouched(conn, LockKind::Mutex, "free", || {
                        refused("a free mutex", m.try_lock());
                        refused("a free mutex", m.lock_with(wait));
                    });
                    first.election("free").campaign().unwrap().unlock().unwrap();
                    let e = other.election("free");
                    untouched(conn, LockKind::Election, "free", || {
                        refused("a vacant election", e.try_campaign());
                        refused("a vacant election", e.try_campaign_for(wait));
                    });
                    first
                        .fair_semaphore("free", 2)
                        .acquire()
                        .unwrap()
                        .unlock()
                        .unwrap();
                    let s = other.fair_semaphore("free", 2);
                    untouched(conn, LockKind::Semaphore, "free", || {
                        refused("a permit of a free semaphore", s.try_acquire());
                        refused("all of a free semaphore", s.try_acquire_many(2));
                        refused("a free semaphore", s.try_acquire_for(wait));
                    });
                    first.fair_rwlock("free").write().unwrap().unlock().unwrap();
                    let rw = other.fair_rwlock("free");
                    untouched(conn, LockKind::RwLock, "free", || {
                        refused("a read of a free rwlock", rw.try_read());
                        refused("a write of a free rwlock", rw.try_write());
                        refused(
                            "an upgradable read of a free rwlock",
                            rw.try_upgradable_read(),
                        );
                        refused("a free rwlock", rw.try_write_for(wait));
                    });

                    // A call that fits beside the counted engine's lone hold.
                    let permit = first.fair_semaphore("lone", 2).acquire().unwrap();
                    let s = other.fair_semaphore("lone", 2);
                    untouched(conn, LockKind::Semaphore, "lone", || {
                        refused("a permit beside a lone permit", s.try_acquire());
                        refused("a permit beside a lone permit", s.try_acquire_for(wait));
                    });
                    permit.unlock().unwrap();
                    let read = first.fair_rwlock("lone").read().unwrap();
                    let rw = other.fair_rwlock("lone");
                    untouched(conn, LockKind::RwLock, "lone", || {
                        refused("a read beside a lone read", rw.try_read());
                        refused(
                            "an upgradable read beside a lone read",
                            rw.try_upgradable_read(),
                        );
                        refused("a read beside a lone read", rw.try_read_for(wait));
                    });
                    read.unlock().unwrap();

                    // A call that finds no room beside that lone hold and
                    // would queue behind it.
                    let permit = first.fair_semaphore("full", 1).acquire().unwrap();
                    let s = other.fair_semaphore("full", 1);
                    untouched(conn, LockKind::Semaphore, "full", || {
                        refused("a permit behind a lone permit", s.try_acquire_for(wait));
                    });
                    permit.unlock().unwrap();
                    let write = first.fair_rwlock("full").write().unwrap();
                    let rw = other.fair_rwlock("full");
                    untouched(conn, LockKind::RwLock, "full", || {
                        refused("a read behind a lone write", rw.try_read_for(wait));
                        refused("a write behind a lone write", rw.try_write_for(wait));
                    });
                    write.unlock().unwrap();

                    // The release of a hold whose key the first build wrote
                    // (the other build's own hold, its format word the
                    // first's).
                    let (from, to) = ($other::DATA_FORMAT, $first::DATA_FORMAT);
                    let held = other.fair_mutex("release").lock().unwrap();
                    written_by_the_other(conn, LockKind::Mutex, "release", from, to);
                    untouched(conn, LockKind::Mutex, "release", || {
                        refused("a mutex's release", held.unlock());
                    });
                    let leading = other.election("release").campaign().unwrap();
                    written_by_the_other(conn, LockKind::Election, "release", from, to);
                    untouched(conn, LockKind::Election, "release", || {
                        refused("an election's resignation", leading.unlock());
                    });
                    let permit = other.fair_semaphore("release", 2).acquire().unwrap();
                    written_by_the_other(conn, LockKind::Semaphore, "release", from, to);
                    untouched(conn, LockKind::Semaphore, "release", || {
                        refused("a lone permit's release", permit.unlock());
                    });
                    let read = other.fair_rwlock("release-read").read().unwrap();
                    written_by_the_other(conn, LockKind::RwLock, "release-read", from, to);
                    untouched(conn, LockKind::RwLock, "release-read", || {
                        refused("a lone read's release", read.unlock());
                    });
                    let write = other.fair_rwlock("release-write").write().unwrap();
                    written_by_the_other(conn, LockKind::RwLock, "release-write", from, to);
                    untouched(conn, LockKind::RwLock, "release-write", || {
                        refused("a write's release", write.unlock());
                    });
                    // And with a waiter queued (the meta's '+'), whom the
                    // release would hand the lone hold.
                    let permit = other.fair_semaphore("handoff", 1).acquire().unwrap();
                    let waiter = {
                        let s = other.fair_semaphore("handoff", 1);
                        std::thread::spawn(move || {
                            s.try_acquire_for(Duration::from_secs(3)).map(|_| ())
                        })
                    };
                    let queue = fairlock::__test_support::LockKeys::of_kind(
                        "fairlock",
                        "handoff",
                        LockKind::Semaphore,
                    )
                    .unwrap()
                    .all[1]
                        .clone();
                    let mut queued = false;
                    for _ in 0..150 {
                        queued =
                            fairlock_test_support::fake_queue::queued_entries(conn, &queue) == 1;
                        if queued {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    assert!(queued, "the waiter did not queue");
                    written_by_the_other(conn, LockKind::Semaphore, "handoff", from, to);
                    untouched(conn, LockKind::Semaphore, "handoff", || {
                        refused("a lone permit's release to a waiter", permit.unlock());
                    });
                    // (The waiter's next poll is refused too.)
                    let _ = waiter.join().unwrap();
                }
            }
        };
    }

    fast_paths!(this_build_first, fairlock, fairlock_renumbered);
    fast_paths!(renumbered_build_first, fairlock_renumbered, fairlock);
}
