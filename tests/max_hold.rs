//! A hold that cannot outlive its purpose (`with_max_hold`), for the
//! mutex, the semaphore and the reader-writer lock, against a real server:
//! at the maximum hold the lease signal fires with `LeaseEnd::MaxHold`,
//! the watchdog renews no further than it, and the lock passes on to the
//! next waiter then (never before it, and within a renewal period of it:
//! not a lease later, as a last renewal asking for the whole lease would
//! have it), while the old guard learns that its lease is gone, for a read
//! as for the exclusive holds; a hold released in time ends as released; a
//! maximum hold out of bounds is refused before any I/O.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{AnyGuard, Client, ErrorKind, LeaseEnd, Unbound, MAX_LEASE, MIN_LEASE};
use fairlock_test_support::*;

/// What a waiter asks for to be kept out by a hold of `kind`: a write
/// behind a read, the same kind otherwise.
fn excluded_by(kind: Kind) -> Kind {
    match kind {
        Kind::Read => Kind::Write,
        other => other,
    }
}

/// An acquisition of `kind` on `name` with `max_hold` (`None`: none),
/// waiting up to `timeout`; unbound, so one guard type serves every kind
/// (the support's one dispatch).
fn take(
    client: &Client,
    kind: Kind,
    name: &str,
    max_hold: Option<Duration>,
    timeout: Duration,
) -> fairlock::Result<Option<AnyGuard<Unbound>>> {
    let lease = LeasePolicy::MaxHold(max_hold.unwrap_or(MAX_LEASE));
    fairlock_test_support::take::<Unbound>(client, kind, name, lease, timeout)
}

#[test]
fn past_its_max_hold_a_hold_is_signalled_no_longer_renewed_and_passed_on() {
    let server = RedisServer::start();
    // The watchdog renews every min(lease, waiter_timeout)/3 = 100 ms, each
    // renewal asking only for what is left of the maximum hold (plus the
    // clock-drift allowance, a few ms), less than the lease. The last one
    // comes within a period before the maximum hold: had it asked for the
    // whole lease, the hold would run to between max_hold - period + lease
    // (2 800 ms) and max_hold + lease (2 900 ms). The lease is that long so
    // that a busy machine's lateness (a signal heard 450 ms late, with a
    // 600 ms lease whose bug began at 1 400 ms) stays far below it.
    let lease = Duration::from_secs(2);
    let waiter_timeout = Duration::from_millis(300);
    let period = lease.min(waiter_timeout) / 3;
    let max_hold = Duration::from_millis(900);
    // Past the maximum hold by a renewal period and a generous margin for a
    // busy machine, and still below what a lease-long last renewal gives.
    let late = Duration::from_millis(800);
    let passed_on_by = max_hold + period + late;
    assert!(passed_on_by + period < max_hold - period + lease);
    let holder = server
        .builder()
        .lease(lease)
        .waiter_timeout(waiter_timeout)
        .build()
        .unwrap();
    let waiter = server.client();
    for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
        let name = format!("max-hold-{kind:?}");
        let asked = Instant::now();
        let guard = take(&holder, kind, &name, Some(max_hold), Duration::from_secs(5))
            .unwrap()
            .expect("free");
        // When the call returned with its grant: not when this thread,
        // maybe kept off the CPU meanwhile, goes on.
        let granted = asked + guard.waited();
        let signal = guard.lease_signal();
        let (tx, rx) = mpsc::channel();
        let (waiter_client, waiter_name) = (waiter.clone(), name.clone());
        let queued = thread::spawn(move || {
            let got = take(
                &waiter_client,
                excluded_by(kind),
                &waiter_name,
                None,
                Duration::from_secs(20),
            );
            tx.send(Instant::now()).unwrap();
            got.unwrap().expect("the waiter gets it").unlock().unwrap();
        });

        let end = signal.wait_timeout(Duration::from_secs(5));
        let signalled = granted.elapsed();
        assert_eq!(end, Some(LeaseEnd::MaxHold), "{kind:?}");
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("passed on");
        let passed_on = got.saturating_duration_since(granted);
        eprintln!(
            "max_hold: {kind:?}: max hold {:.0} ms, lease {:.0} ms: signalled at {:.0} ms, \
             the waiter had the lock at {:.0} ms (bound {:.0} ms)",
            ms(max_hold),
            ms(lease),
            ms(signalled),
            ms(passed_on),
            ms(passed_on_by)
        );
        assert!(
            signalled + Duration::from_millis(20) >= max_hold && signalled <= max_hold + late,
            "{kind:?}: signalled at {signalled:?}"
        );
        // Never before the maximum hold; at it give or take the watchdog's
        // timing, not a whole lease after it.
        assert!(
            passed_on + Duration::from_millis(50) >= max_hold,
            "{kind:?}: passed on at {passed_on:?}, before the max hold"
        );
        assert!(
            passed_on < max_hold + lease,
            "{kind:?}: passed on at {passed_on:?}: the last renewal went past the max hold"
        );
        assert!(
            passed_on < passed_on_by,
            "{kind:?}: passed on at {passed_on:?}, not by {passed_on_by:?}: the last \
             renewal asked for more than was left of the max hold"
        );
        assert!(
            wait_until(Duration::from_secs(1), || guard.is_lease_lost()),
            "{kind:?}: the old guard never learned its lease is gone"
        );
        assert_eq!(signal.wait_timeout(Duration::ZERO), Some(LeaseEnd::Lost));
        let err = guard.unlock().expect_err("the hold is gone");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{kind:?}: {err}");
        // It says why: the maximum hold its owner set, not a fault of the
        // server or of the process.
        let words = err.to_string();
        assert!(
            words.contains("maximum hold") && !words.contains("stalled"),
            "{kind:?}: {words}"
        );
        join_within(queued, Duration::from_secs(10), "the waiter");
    }
}

#[test]
fn a_hold_released_before_its_max_hold_ends_released_and_a_bound_guard_is_signalled_too() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let guard = take(
        &client,
        Kind::Mutex,
        "in-time",
        Some(Duration::from_secs(2)),
        Duration::from_secs(5),
    )
    .unwrap()
    .unwrap();
    let signal = guard.lease_signal();
    thread::sleep(Duration::from_millis(700));
    assert_eq!(signal.wait_timeout(Duration::ZERO), None, "held, renewed");
    guard.unlock().unwrap();
    assert_eq!(
        signal.wait_timeout(Duration::ZERO),
        Some(LeaseEnd::Released)
    );

    // The thread-bound guards take it the same way.
    let max_hold = Duration::from_millis(500);
    let mutex = client.fair_mutex("bound").with_max_hold(max_hold);
    let guard = mutex.lock().unwrap();
    let granted = Instant::now();
    assert_eq!(
        guard.lease_signal().wait_timeout(Duration::from_secs(5)),
        Some(LeaseEnd::MaxHold)
    );
    assert!(granted.elapsed() + Duration::from_millis(20) >= max_hold);
    let permit = client
        .fair_semaphore("bound", 2)
        .with_max_hold(max_hold)
        .acquire_many(2)
        .unwrap();
    let granted = Instant::now();
    assert_eq!(
        permit.lease_signal().wait_timeout(Duration::from_secs(5)),
        Some(LeaseEnd::MaxHold)
    );
    let signalled = granted.elapsed();
    assert!(
        signalled + Duration::from_millis(20) >= max_hold,
        "the permits' max hold signalled at {signalled:?}"
    );
    let read = client
        .fair_rwlock("bound")
        .with_max_hold(max_hold)
        .read()
        .unwrap();
    let granted = Instant::now();
    assert_eq!(
        read.lease_signal().wait_timeout(Duration::from_secs(5)),
        Some(LeaseEnd::MaxHold)
    );
    let signalled = granted.elapsed();
    assert!(
        signalled + Duration::from_millis(20) >= max_hold,
        "the read's max hold signalled at {signalled:?}"
    );
}

/// A hold lost before its maximum hold (a force unlock) is told lost, not
/// as its maximum hold, to a watcher blocked before either.
#[test]
fn a_hold_lost_before_its_max_hold_is_signalled_lost() {
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client
        .fair_mutex("lost-first")
        .with_max_hold(Duration::from_secs(2));
    let guard = mutex.lock().unwrap();
    let signal = guard.lease_signal();
    let watcher = thread::spawn(move || signal.wait());
    thread::sleep(Duration::from_millis(20));
    assert!(server
        .client()
        .fair_mutex("lost-first")
        .force_unlock()
        .unwrap());
    assert_eq!(watcher.join().unwrap(), LeaseEnd::Lost);
    assert!(guard.unlock().unwrap_err().is_lease_lost());
}

/// The renewal that asks for what is left of a maximum hold counts its
/// lease from when it asked, however late it goes out: a watchdog that
/// opens its connection first (here across a 40 ms link, whose `SELECT`
/// takes 80 ms) still counts the hold up to the maximum hold, so a lease
/// signal waited on from before it (as `fairlock run --max-hold` waits)
/// hears `MaxHold`, then `Lost` when the lease runs out. Counted from
/// before the connection, the hold was counted out 80 ms before its
/// maximum hold and heard as `Lost`: the command ran on (a hang).
///
/// The test's thread must start waiting before the maximum hold: one
/// that starts after it hears the end as of then, `Lost`. With a 250 ms
/// maximum hold, a thread kept off a busy machine's CPU that long after
/// its grant failed so ("Read at 54ms": `Lost`); at 900 ms the bug it
/// names still ends the count 80 ms early, and is still heard as `Lost`.
#[test]
fn a_renewal_capped_by_the_max_hold_counts_to_it_however_late_it_goes_out() {
    let server = RedisServer::start();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(40));
    // Renewals every 1 s: the grant's lease (the 900 ms maximum hold and
    // a period) is shorter than two periods, so the watchdog renews it at
    // once, on a connection of its own it opens then, and not again.
    let max_hold = Duration::from_millis(900);
    for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
        // A client each: its watchdog has no connection yet.
        let client = Client::builder(&format!("{}/1", relay.url()))
            .lease(Duration::from_secs(3))
            .waiter_timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        let name = format!("late-capped-{kind:?}");
        let asked = Instant::now();
        let guard = take(&client, kind, &name, Some(max_hold), Duration::from_secs(5))
            .unwrap()
            .expect("free");
        // When the call returned with its grant: not when this thread,
        // maybe kept off the CPU meanwhile, goes on.
        let granted = asked + guard.waited();
        let end = guard.lease_signal().wait_timeout(Duration::from_secs(5));
        let at = granted.elapsed();
        assert_eq!(end, Some(LeaseEnd::MaxHold), "{kind:?} at {at:?}");
        assert!(
            at + Duration::from_millis(20) >= max_hold,
            "{kind:?}: {at:?}"
        );
        assert!(
            wait_until(Duration::from_secs(1), || guard.is_lease_lost()),
            "{kind:?}: never counted lost"
        );
        let err = guard.unlock().expect_err("the hold is gone");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{kind:?}: {err}");
    }
}

/// A thread's re-entry of its mutex joins the hold it re-enters, and so
/// does not stretch that hold's lease at Redis: a hold past its maximum
/// hold, or with a fixed lease, re-entered before it runs out is passed on
/// when its own lease ends, not a whole new lease after the re-entry.
#[test]
fn a_re_entry_does_not_stretch_a_max_hold_or_a_fixed_lease() {
    let server = RedisServer::start();
    // Renewals every 100 ms; a grant's or a re-entry's lease 600 ms.
    let holder = server
        .builder()
        .lease(Duration::from_millis(600))
        .waiter_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let waiter = server.client();
    let end = Duration::from_millis(900);
    let bound = end + Duration::from_millis(300);
    for fixed in [false, true] {
        let name = format!("re-entered-{fixed}");
        let mutex = match fixed {
            false => holder.fair_mutex(&name).with_max_hold(end),
            true => holder.fair_mutex(&name).with_fixed_lease(end),
        };
        let guard = mutex.lock().unwrap();
        let granted = Instant::now();
        let (tx, rx) = mpsc::channel();
        let (waiter_client, waiter_name) = (waiter.clone(), name.clone());
        let queued = thread::spawn(move || {
            let got = waiter_client.fair_mutex(&waiter_name).unbound().lock();
            tx.send(Instant::now()).unwrap();
            got.unwrap().unlock().unwrap();
        });
        // Past the maximum hold (no renewal any more), or well before the
        // fixed lease's end: the re-entry.
        if fixed {
            thread::sleep(Duration::from_millis(500));
        } else {
            let signal = guard.lease_signal();
            let ended = signal.wait_timeout(Duration::from_secs(5));
            assert_eq!(ended, Some(LeaseEnd::MaxHold));
        }
        let again = mutex.lock().unwrap();
        let reentered = granted.elapsed();
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("passed on");
        let passed_on = got.saturating_duration_since(granted);
        eprintln!(
            "max_hold: re-entered at {:.0} ms (fixed lease: {fixed}), the waiter had the lock \
             at {:.0} ms (its end {:.0} ms)",
            ms(reentered),
            ms(passed_on),
            ms(end)
        );
        assert!(
            passed_on < bound,
            "fixed lease {fixed}: passed on at {passed_on:?}: the re-entry at {reentered:?} \
             stretched the hold past its end"
        );
        drop((again, guard));
        join_within(queued, Duration::from_secs(10), "the waiter");
    }
}

#[test]
fn a_max_hold_out_of_bounds_is_refused_before_any_io() {
    let server = RedisServer::start();
    let client = server.client();
    for bad in [
        Duration::ZERO,
        MIN_LEASE - Duration::from_millis(1),
        MAX_LEASE + Duration::from_millis(1),
    ] {
        for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
            let err = take(&client, kind, "bad-max", Some(bad), Duration::from_secs(1))
                .expect_err("refused");
            assert_eq!(
                err.kind(),
                ErrorKind::InvalidConfig,
                "{kind:?} {bad:?}: {err}"
            );
            assert!(err.to_string().contains("maximum hold"), "{err}");
        }
        let err = client
            .fair_mutex("bad-max")
            .with_max_hold(bad)
            .lock()
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidConfig);
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*bad-max*")
        .query(&mut server.conn())
        .unwrap();
    assert!(keys.is_empty(), "a refused call wrote {keys:?}");
}

/// A thread's re-entry through a handle with a maximum hold joins the
/// hold it re-enters, which has none: the cap is not applied (the docs of
/// `with_max_hold` say so), the hold is renewed past it.
#[test]
fn a_re_entry_with_a_max_hold_joins_an_outer_hold_without_one() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .lease(Duration::from_millis(600))
        .waiter_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let outer = client.fair_mutex("capped-inside").lock().unwrap();
    let capped = client.fair_mutex("capped-inside");
    let inner = capped
        .with_max_hold(Duration::from_millis(300))
        .lock()
        .unwrap();
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    let signal = inner.lease_signal();
    assert_eq!(signal.wait_timeout(Duration::from_millis(1500)), None);
    let status = client
        .status(fairlock::LockKind::Mutex, "capped-inside", 1)
        .unwrap();
    assert_eq!(status.holder_count, 1, "renewed past the inner cap");
    drop(inner);
    outer.unlock().unwrap();
}

/// An upgrade granted while it waited (a read before it released), with
/// `sync_replicas`, confirms the grant by a renewal before it returns: that
/// renewal must leave the write's lease where the hold's was (an upgrade
/// keeps the hold's lease end, which the watchdog's renewals every 667 ms
/// cap at the maximum hold), not set it to a whole lease from then. Before,
/// it asked for the call's whole lease (2 s, granted 1 s into a maximum
/// hold of 1.5 s): the write stayed at Redis 1.5 s past the maximum hold,
/// past even the grant's own bound (the maximum hold and a watchdog
/// period), while its guard heard `Lost` at the maximum hold.
#[test]
fn an_upgrade_confirmed_for_sync_replicas_keeps_the_max_hold() {
    let (server, _replica, _) = crate::deadlines::server_with_replica();
    let (max_hold, period) = (Duration::from_millis(1500), Duration::from_millis(667));
    let client = (server.builder())
        .lease(Duration::from_secs(2))
        .sync_replicas(1, Duration::from_secs(1))
        .build()
        .unwrap();
    let other = server.client();
    let read = other.fair_rwlock("upgrade-capped").read().unwrap();
    let rw = client.fair_rwlock("upgrade-capped").with_max_hold(max_hold);
    let upgradable = rw.unbound().upgradable_read().unwrap();
    let max_end = Instant::now() + max_hold;
    let upgrading = thread::spawn(move || upgradable.upgrade());
    let queued = || other.fair_rwlock("upgrade-capped").queue_len().unwrap() == 1;
    assert!(
        wait_until(Duration::from_secs(5), queued),
        "the claim waits"
    );
    // A renewal or more capped the lease at the maximum hold by then.
    thread::sleep((max_end - Duration::from_millis(500)).saturating_duration_since(Instant::now()));
    // The release settles the claim; the upgrade hears it by its message.
    read.unlock().unwrap();
    let write = join_within(upgrading, Duration::from_secs(5), "the upgrade").unwrap();
    let left = rw.status(1).unwrap().holders[0].remaining_lease.unwrap();
    let to_max_end = max_end.saturating_duration_since(Instant::now());
    eprintln!("upgraded: lease left {left:?}, maximum hold in {to_max_end:?}");
    assert!(
        left <= to_max_end + period,
        "{left:?} > {to_max_end:?} + {period:?}"
    );
    drop(write);
}
