//! The lease-lost signal: another thread learns the moment a guard's lease
//! is gone, or that the guard was released first, and how long after the
//! loss it hears of it.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder, ErrorKind, LeaseEnd, LeaseSignal, LockKind};
use fairlock_test_support::*;

/// A thread blocked on `signal`: reports how it ended and when.
fn watch(signal: LeaseSignal) -> mpsc::Receiver<(LeaseEnd, Instant)> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let end = signal.wait();
        let _ = tx.send((end, Instant::now()));
    });
    rx
}

fn client(server: &RedisServer, lease: Duration) -> Client {
    server.builder().lease(lease).build().unwrap()
}

#[test]
fn the_signal_is_send_sync_and_clone_and_outlives_its_guard() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<LeaseSignal>();

    let server = RedisServer::start();
    let client = client(&server, Duration::from_secs(30));
    let guard = client.fair_mutex("outlives").lock().unwrap();
    let signal = guard.lease_signal();
    assert_eq!(signal.fencing_token(), guard.fencing_token());
    assert_eq!(signal.ended(), None);
    assert_eq!(
        signal.wait_timeout(Duration::ZERO),
        None,
        "held: only looks"
    );
    let started = Instant::now();
    assert_eq!(signal.wait_timeout(Duration::from_millis(50)), None);
    assert!(started.elapsed() >= Duration::from_millis(50));
    drop(guard);
    assert_eq!(signal.ended(), Some(LeaseEnd::Released));
    assert_eq!(signal.clone().wait(), LeaseEnd::Released);
}

#[test]
fn released_wakes_the_watcher_only_when_the_last_reentrant_guard_goes() {
    let server = RedisServer::start();
    let client = client(&server, Duration::from_secs(30));
    let mutex = client.fair_mutex("reentrant-signal");
    let outer = mutex.lock().unwrap();
    let inner = mutex.lock().unwrap();
    let watcher = watch(inner.lease_signal());
    inner.unlock().unwrap();
    assert!(
        watcher.recv_timeout(Duration::from_millis(200)).is_err(),
        "the outer guard still holds"
    );
    outer.unlock().unwrap();
    let (end, _) = watcher.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(end, LeaseEnd::Released);
}

#[test]
fn a_force_unlock_is_signalled_within_one_watchdog_period() {
    // Told by the force unlock's message (tests/revoke.rs times it for
    // every kind); the bound here is the watchdog's, the fallback.
    let server = RedisServer::start();
    // Watchdog period: a third of min(lease, waiter timeout) = 100 ms.
    let lease = Duration::from_millis(300);
    let holder = client(&server, lease);
    let operator = client(&server, lease);
    let mut delays = Vec::new();
    for round in 0..5 {
        let name = format!("forced-{round}");
        let guard = holder.fair_mutex(&name).lock().unwrap();
        let watcher = watch(guard.lease_signal());
        thread::sleep(Duration::from_millis(150));
        assert!(operator.fair_mutex(&name).force_unlock().unwrap());
        let forced = Instant::now();
        let (end, at) = watcher
            .recv_timeout(Duration::from_secs(5))
            .expect("the signal fires");
        assert_eq!(end, LeaseEnd::Lost);
        assert!(guard.is_lease_lost());
        delays.push(ms(at.saturating_duration_since(forced)));
        let signal = guard.lease_signal();
        assert!(guard.unlock().unwrap_err().is_lease_lost());
        assert_eq!(signal.ended(), Some(LeaseEnd::Lost), "the first end stays");
    }
    delays.sort_by(f64::total_cmp);
    eprintln!("force_unlock → signal (ms), watchdog period 100 ms: {delays:.1?}");
    // One period, plus a renewal's round trip, plus slack for a busy machine.
    assert!(delays[4] <= 100.0 + 400.0, "{delays:?}");
}

#[test]
fn a_fixed_lease_is_signalled_at_its_local_end() {
    let server = RedisServer::start();
    let client = client(&server, Duration::from_secs(30));
    let lease = Duration::from_millis(200);
    let mut fired_after = Vec::new();
    for round in 0..5 {
        let mutex = client
            .fair_mutex(&format!("fixed-{round}"))
            .with_fixed_lease(lease);
        let started = Instant::now();
        let guard = mutex.lock().unwrap();
        let watcher = watch(guard.lease_signal());
        let (end, at) = watcher.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(end, LeaseEnd::Lost);
        let after = at.duration_since(started);
        // 200 ms less the allowance (1% + 2 ms = 4 ms), counted from the
        // send of the request, which came after `started`.
        assert!(after >= Duration::from_millis(196), "{after:?}");
        fired_after.push(ms(after));
        drop(guard);
    }
    fired_after.sort_by(f64::total_cmp);
    eprintln!("fixed lease of 200 ms: signal after {fired_after:.1?} ms");
    assert!(fired_after[4] <= 200.0 + 300.0, "{fired_after:?}");
}

/// A server restarted empty loses every hold: each holder of every kind
/// hears `Lost` as soon as the server is back (its subscriber reconnects
/// within 100 ms and has the watchdog check every hold at once), not at
/// its next watchdog round, 10 s apart here (before: a holder heard 2-3 s
/// after the restart, one renewal period of the defaults).
#[test]
fn holds_lost_with_a_restart_are_told_as_soon_as_the_server_is_back() {
    lost_with_a_restart(LeasePolicy::Client, false);
}

/// The same with a server that comes back from an RDB snapshot taken
/// before the holds, loading it for about 1 s (a key-load delay), and
/// answering `LOADING` meanwhile, as a server with a real dataset does
/// while it loads: the subscriber is back before the data, and the check
/// it asks for, refused while loading, is made again 100 ms later, not at
/// the next watchdog round (before: told 8.9 s after the server was back).
#[test]
fn holds_lost_with_a_restart_are_told_once_the_server_has_loaded_its_data() {
    lost_with_a_restart(LeasePolicy::Client, true);
}

/// The same for holds with a fixed lease (a minute), which the watchdog
/// does not renew: after the gap it checks them as well (a renewal that
/// leaves the lease as it is), where before a holder believed it held
/// until its fixed lease ran out, another client holding meanwhile.
#[test]
fn fixed_lease_holds_lost_with_a_restart_are_told_as_soon_as_the_server_is_back() {
    lost_with_a_restart(LeasePolicy::Fixed(Duration::from_secs(60)), false);
}

/// Holds of every kind taken under `lease`, the server restarted empty
/// (or, `loading`, from a snapshot of 10 MiB of other keys taken before
/// the holds, which it loads for about 1 s): each is told `Lost` within
/// 600 ms of the server's return (the end of its loading).
fn lost_with_a_restart(lease: LeasePolicy, loading: bool) {
    let _serial = serial();
    let mut server = RedisServer::start_to_restart(loading);
    let client = watchdog_every_10s(&server).build().unwrap();
    let mut holds = Vec::new();
    for kind in Kind::EXCLUSIVE {
        let name = format!("restarted-{kind:?}");
        let guard = take::<fairlock::Bound>(&client, kind, &name, lease, Duration::ZERO)
            .unwrap()
            .expect("free");
        holds.push((kind, watch(guard.lease_signal()), guard));
    }
    server.restart_after(Duration::from_secs(1));
    let back = Instant::now();
    for (kind, ended, guard) in &holds {
        let (end, at) = ended
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{kind:?}: not told within 5 s of the restart"));
        let after = at.saturating_duration_since(back);
        eprintln!(
            "{kind:?}: {end:?} {:.0} ms after the server was back",
            ms(after)
        );
        assert_eq!(end, LeaseEnd::Lost, "{kind:?}");
        assert!(guard.is_lease_lost(), "{kind:?}");
        assert!(
            after <= Duration::from_millis(600),
            "{kind:?}: told {after:?} after"
        );
    }
    // The unlock says why: the server lost it (before: "was no longer held").
    for (kind, _, guard) in holds {
        let err = guard.unlock().expect_err("lost with the restart");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{kind:?}: {err}");
        assert!(err.to_string().contains("redis lost it"), "{kind:?}: {err}");
    }
}

/// Holds of every kind unlocked at once after the server restarted empty,
/// before anything else told their client (its subscriber's reconnection,
/// the watchdog's check that follows it): each unlock finds the lock's key
/// gone, and says that redis lost the hold, not that its lease ran out
/// there or a force release freed it (neither leaves the key gone while
/// this client still counts the lease), as its lease lost's warning does.
#[test]
fn an_unlock_right_after_an_empty_restart_says_redis_lost_the_hold() {
    let _serial = serial();
    crate::semaphore::warnings("");
    let mut server = RedisServer::start();
    let client = watchdog_every_10s(&server).build().unwrap();
    let mut holds = Vec::new();
    for kind in Kind::EXCLUSIVE {
        let name = format!("unlocked-after-restart-{kind:?}");
        let guard =
            take::<fairlock::Bound>(&client, kind, &name, LeasePolicy::Client, Duration::ZERO)
                .unwrap()
                .expect("free");
        holds.push((kind, guard));
    }
    server.restart();
    for (kind, guard) in holds {
        let err = guard.unlock().expect_err("lost with the restart");
        eprintln!("{kind:?}: {err}");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{kind:?}: {err}");
        assert!(err.to_string().contains("redis lost it"), "{kind:?}: {err}");
        let said = crate::semaphore::warnings(&format!("unlocked-after-restart-{kind:?}\""));
        assert_eq!(said.len(), 1, "{kind:?}: {said:?}");
        assert!(
            said[0].contains("lease lost") && said[0].contains("redis lost it"),
            "{said:?}"
        );
    }
}

/// Holds of every kind force-released while their client's link to Redis
/// is cut (the release's message never reaches it): once the link heals,
/// each holder hears `Lost` and its unlock says a force release freed it,
/// as the lock's mark records (before: "redis lost it", the reason for a
/// server that lost its data, since the loss was found after a gap).
#[test]
fn a_force_release_during_a_gap_is_told_as_one_once_the_link_heals() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    // A watchdog round every 10 s: the heal's check is what finds them.
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(30))
        .build()
        .unwrap();
    let operator = server.client();
    let mut holds = Vec::new();
    for kind in Kind::EXCLUSIVE {
        let name = format!("forced-in-gap-{kind:?}");
        let guard =
            take::<fairlock::Bound>(&client, kind, &name, LeasePolicy::Client, Duration::ZERO)
                .unwrap()
                .expect("free");
        holds.push((kind, name, watch(guard.lease_signal()), guard));
    }
    relay.cut();
    for (kind, name, _, _) in &holds {
        assert!(
            operator.force_unlock(kind.lock_kind(), name).unwrap(),
            "{kind:?}"
        );
    }
    thread::sleep(Duration::from_millis(300));
    relay.heal();
    let healed = Instant::now();
    for (kind, _, ended, guard) in holds {
        let (end, at) = ended
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{kind:?}: not told within 5 s of the heal"));
        let after = ms(at.saturating_duration_since(healed));
        eprintln!("{kind:?}: {end:?} {after:.0} ms after the heal");
        assert_eq!(end, LeaseEnd::Lost, "{kind:?}");
        let text = guard.unlock().expect_err("force-released").to_string();
        assert!(
            text.contains("a force release (Client::force_unlock"),
            "{kind:?}: {text}"
        );
    }
}

/// A fixed lease this client counted out, and a lock force-unlocked after
/// a revocation: the unlock's error says which, as the client knows it.
#[test]
fn a_lost_holds_unlock_says_why_the_client_knows_it_was_lost() {
    let server = RedisServer::start();
    let client = client(&server, Duration::from_secs(30));
    let short = client
        .fair_mutex("ran-out")
        .with_fixed_lease(Duration::from_millis(100));
    let guard = short.lock().unwrap();
    assert_eq!(
        guard.lease_signal().wait_timeout(Duration::from_secs(5)),
        Some(LeaseEnd::Lost)
    );
    // Past Redis's end of the lease too, so the release finds it gone.
    thread::sleep(Duration::from_millis(300));
    let err = guard.unlock().expect_err("ran out");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    let text = err.to_string();
    assert!(text.contains("mutex \"ran-out\""), "{text}");
    assert!(text.contains("its lease ran out"), "{text}");

    let operator = server.client();
    let guard = client.fair_rwlock("revoked").write().unwrap();
    assert_eq!(operator.fair_rwlock("revoked").revoke().unwrap(), 1);
    let asked = guard
        .revocation_signal()
        .wait_timeout(Duration::from_secs(5));
    assert!(asked.is_some(), "not asked");
    assert!(operator.fair_rwlock("revoked").force_unlock().unwrap());
    let told = guard.lease_signal().wait_timeout(Duration::from_secs(5));
    assert_eq!(told, Some(LeaseEnd::Lost));
    let text = guard.unlock().expect_err("force-unlocked").to_string();
    assert!(text.contains("force release"), "{text}");
    assert!(text.contains("revoked"), "{text}");
}

/// A hold this client counted lost stays lost at its unlock, also when
/// Redis still had it (this client's count of a lease ends before Redis's,
/// by the drift allowance: here 1 s of a fixed 3 s lease, as a pause of
/// the process or a partition that ended in that window would leave it):
/// the unlock frees it and says `LeaseLost`, as `is_lease_lost()` and the
/// signal did.
#[test]
fn a_hold_counted_lost_unlocks_as_lost_though_redis_still_had_it() {
    let server = RedisServer::start();
    let (lease, margin) = (Duration::from_secs(3), Duration::from_secs(1));
    let client = server
        .builder()
        .lease(lease)
        .clock_drift(0.0, margin)
        .build()
        .unwrap();
    let mutex = client.fair_mutex("counted-out").with_fixed_lease(lease);
    let guard = mutex.lock().unwrap();
    let signal = guard.lease_signal();
    let taken = Instant::now();
    assert_eq!(
        signal.wait_timeout(Duration::from_secs(5)),
        Some(LeaseEnd::Lost)
    );
    let counted = taken.elapsed();
    let left = mutex.remaining_lease().unwrap();
    let unlocked = guard.unlock().map_err(|err| err.kind());
    eprintln!(
        "counted lost {:.0} ms after the grant, Redis's lease {left:?} left; unlock {unlocked:?}",
        ms(counted)
    );
    assert!(
        left.is_some(),
        "Redis's lease ran out too: not the case in question"
    );
    assert_eq!(unlocked, Err(ErrorKind::LeaseLost));
    assert!(
        !mutex.is_locked().unwrap(),
        "the unlock left the hold in Redis"
    );
    assert_eq!(signal.ended(), Some(LeaseEnd::Lost));
}

/// A hold of a fixed lease (never renewed) held past it: its unlock says
/// `LeaseLost` and why, its fixed lease ran out, not that no renewal
/// confirmed it in time (before: "its lease ran out before a renewal
/// confirmed it (... a stalled or unreachable redis, or a paused
/// process)", for a lease that no renewal was ever sent for, and a Redis
/// that answered all along).
#[test]
fn a_fixed_lease_held_past_its_end_is_lost_saying_it_ran_out() {
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client
        .fair_mutex("fixed-held-past")
        .with_fixed_lease(Duration::from_millis(300));
    let guard = mutex.lock().unwrap();
    let lost = wait_until(Duration::from_secs(5), || guard.is_lease_lost());
    assert!(lost, "counted lost");
    let err = guard.unlock().expect_err("held past its fixed lease");
    eprintln!("unlock of a fixed lease held past its end: {err}");
    let said = err.to_string();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert!(
        said.contains("its lease ran out: a fixed lease, never renewed")
            && !said.contains("renewal confirmed"),
        "{err}"
    );
}

/// A fixed lease taken over a slow link (400 ms each way) counts from the
/// acquire request's send, not from its late reply: Redis's lease starts
/// when the script runs, so the guard is counted lost before Redis frees
/// the lock (counted from the reply, it was still held here once another
/// could take the lock).
#[test]
fn a_fixed_lease_answered_late_is_counted_lost_before_redis_frees_it() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::open(&relay.url()).unwrap();
    let observer = server.client();
    let mutex = client
        .fair_mutex("fixed-answered-late")
        .with_fixed_lease(Duration::from_secs(1));
    relay.set_delay(Duration::from_millis(400));
    let guard = mutex.lock().unwrap();
    let free = || {
        let status = observer.status(LockKind::Mutex, "fixed-answered-late", 1);
        status.unwrap().holder().is_none()
    };
    assert!(wait_until(Duration::from_secs(5), free), "never freed");
    assert!(
        guard.is_lease_lost(),
        "still counted held once redis freed it"
    );
    relay.set_delay(Duration::ZERO);
}

/// A reader-writer hold this client counted lost while Redis still had it
/// (as above: 1 s of a fixed 3 s lease) stays lost through a change of its
/// access: an upgrade and a downgrade say `LeaseLost`, as its unlock
/// would, and free it, rather than make a write or a read of it that is
/// lost from the start.
#[test]
fn a_hold_counted_lost_is_not_upgraded_or_downgraded() {
    let server = RedisServer::start();
    let (lease, margin) = (Duration::from_secs(3), Duration::from_secs(1));
    let client = server
        .builder()
        .lease(lease)
        .clock_drift(0.0, margin)
        .build()
        .unwrap();
    let up = client.fair_rwlock("counted-out-up").with_fixed_lease(lease);
    let down = client
        .fair_rwlock("counted-out-down")
        .with_fixed_lease(lease);
    let upgradable = up.upgradable_read().unwrap();
    let write = down.write().unwrap();
    for signal in [upgradable.lease_signal(), write.lease_signal()] {
        assert_eq!(
            signal.wait_timeout(Duration::from_secs(5)),
            Some(LeaseEnd::Lost)
        );
    }
    assert!(
        up.is_locked().unwrap() && down.is_locked().unwrap(),
        "not the case in question"
    );
    let upgraded = upgradable
        .try_upgrade()
        .map(|got| got.is_ok())
        .map_err(|err| err.kind());
    let downgraded = write.downgrade().map(drop).map_err(|err| err.kind());
    eprintln!(
        "counted lost with Redis's lease left: upgrade {upgraded:?}, downgrade {downgraded:?}"
    );
    assert_eq!(upgraded, Err(ErrorKind::LeaseLost));
    assert_eq!(downgraded, Err(ErrorKind::LeaseLost));
    assert!(
        !up.is_locked().unwrap() && !down.is_locked().unwrap(),
        "a hold was left in Redis"
    );

    // Counted lost while its upgrade waits for another client's read: the
    // read released then (with 1 s of the upgradable read's lease left at
    // Redis) hands it the write, which the upgrade does not keep.
    let waited = (client
        .fair_rwlock("counted-out-waiting")
        .with_fixed_lease(lease))
    .unbound();
    let upgradable = waited.upgradable_read().unwrap();
    let other = server.client();
    let read = other.fair_rwlock("counted-out-waiting").read().unwrap();
    let signal = upgradable.lease_signal();
    let upgrading = thread::spawn(move || {
        let got = upgradable.upgrade_with(fairlock::Wait::at_most(Duration::from_secs(5)));
        got.map(|got| got.is_ok()).map_err(|err| err.kind())
    });
    assert_eq!(
        signal.wait_timeout(Duration::from_secs(5)),
        Some(LeaseEnd::Lost)
    );
    assert_eq!(waited.queue_len().unwrap(), 1, "the upgrade's claim waits");
    read.unlock().unwrap();
    let upgraded = upgrading.join().unwrap();
    eprintln!("counted lost while its upgrade waited: {upgraded:?}");
    assert_eq!(upgraded, Err(ErrorKind::LeaseLost));
    assert!(!waited.is_locked().unwrap(), "the write was left in Redis");
}

/// A change of access answered after its client counted the hold lost (a
/// slow link: 1.5 s each way, sent as soon as the hold was taken, a fixed
/// 3 s lease counted lost after 2 s by an allowance of 1 s) ran at Redis
/// while Redis still had the hold, so Redis changed it; the hold stays
/// lost all the same, as one counted lost before the call: each change
/// (a write's downgrade to a read and to an upgradable read, an
/// upgradable read's downgrade and its upgrade) says `LeaseLost` and
/// frees what Redis has, rather than return a guard lost from the start.
#[test]
fn a_change_of_access_answered_after_the_hold_was_counted_lost_says_lease_lost() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let (lease, margin) = (Duration::from_secs(3), Duration::from_secs(1));
    let one_way = Duration::from_millis(1500);
    let client = Client::builder(&relay.url())
        .lease(lease)
        .clock_drift(0.0, margin)
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // What a change returned, and when (before its guard is dropped).
    type Change = Box<dyn FnOnce() -> (fairlock::Result<()>, Instant) + Send>;
    let rwlock = |name: &str| client.fair_rwlock(name).with_fixed_lease(lease).unbound();
    let mut changes: Vec<(&str, LeaseSignal, Change)> = Vec::new();
    let write = rwlock("late-write-to-read").write().unwrap();
    let signal = write.lease_signal();
    let change: Change = Box::new(move || returned(write.downgrade()));
    changes.push(("late-write-to-read", signal, change));
    let write = rwlock("late-write-to-upgradable").write().unwrap();
    let signal = write.lease_signal();
    let change: Change = Box::new(move || returned(write.downgrade_to_upgradable()));
    changes.push(("late-write-to-upgradable", signal, change));
    let upgradable = rwlock("late-upgradable-to-read").upgradable_read().unwrap();
    let signal = upgradable.lease_signal();
    let change: Change = Box::new(move || returned(upgradable.downgrade()));
    changes.push(("late-upgradable-to-read", signal, change));
    let upgradable = rwlock("late-upgrade").upgradable_read().unwrap();
    let signal = upgradable.lease_signal();
    let change: Change = Box::new(move || {
        let upgraded = upgradable.try_upgrade();
        let upgraded =
            upgraded.map(|got| got.expect("nobody else reads: the upgrade needs no wait"));
        returned(upgraded)
    });
    changes.push(("late-upgrade", signal, change));

    relay.set_delay(one_way);
    let running: Vec<_> = (changes.into_iter())
        .map(|(name, signal, change)| {
            let ended = watch(signal);
            let changing = thread::spawn(change);
            (name, ended, changing)
        })
        .collect();
    let observer = server.client();
    let mut outcomes = Vec::new();
    for (name, ended, changing) in running {
        let (changed, returned) = join_within(changing, Duration::from_secs(15), name);
        let (end, lost_at) = ended.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(end, LeaseEnd::Lost, "{name}");
        let status = observer.status(LockKind::RwLock, name, 10).unwrap();
        eprintln!(
            "{name}: {:?}, returned {:.0} ms after the hold was counted lost; left in Redis: {:?}",
            changed.as_ref().map_err(|err| err.kind()),
            ms(returned.saturating_duration_since(lost_at)),
            (status.holders.iter())
                .map(|h| h.access)
                .collect::<Vec<_>>()
        );
        assert!(lost_at < returned, "{name}: not the case in question");
        outcomes.push((
            name,
            changed.map_err(|err| err.kind()),
            status.holders.len(),
        ));
    }
    for (name, changed, left) in outcomes {
        assert_eq!(
            changed,
            Err(ErrorKind::LeaseLost),
            "{name}: returned a lost guard"
        );
        assert_eq!(left, 0, "{name}: a hold was left in Redis");
    }
}

/// What a call returned (its guard dropped) and when it returned.
fn returned<T>(got: fairlock::Result<T>) -> (fairlock::Result<()>, Instant) {
    let at = Instant::now();
    (got.map(drop), at)
}

/// A call with a fixed lease of 300 ms that waited in the queue behind
/// another holder for longer than its lease (here 1 s) gets a hold it can
/// use: its client's count of the handed-over lease does not start from
/// its first request (the watchdog's heartbeats of a client of the
/// defaults are 3.3 s apart; here 10 s), so the guard is not lost on
/// arrival, its lease signal fires at the end of its lease, and the next
/// waiter holds then.
#[test]
fn a_short_fixed_lease_handed_over_after_a_long_wait_is_not_lost_on_arrival() {
    let server = RedisServer::start();
    let client = || watchdog_every_10s(&server).build().unwrap();
    let (holder, waiter) = (client(), client());
    let held = holder.fair_mutex("short").lock().unwrap();
    const FIXED: Duration = Duration::from_millis(300);
    let waiting = thread::spawn(move || {
        let guard = waiter
            .fair_mutex("short")
            .unbound()
            .with_fixed_lease(FIXED)
            .lock()
            .unwrap();
        (guard.is_lease_lost(), Instant::now(), guard)
    });
    assert!(wait_until(Duration::from_secs(5), || holder
        .fair_mutex("short")
        .queue_len()
        .unwrap()
        == 1));
    thread::sleep(Duration::from_secs(1));
    let handed = Instant::now();
    held.unlock().unwrap();
    let (lost_on_arrival, got, guard) = join_within(waiting, Duration::from_secs(5), "the waiter");
    let ended = watch(guard.lease_signal());
    let (end, at) = ended.recv_timeout(Duration::from_secs(5)).unwrap();
    eprintln!(
        "fixed lease {FIXED:?} after a 1 s wait: got {:.1} ms after the handoff, lost on arrival: \
         {lost_on_arrival}, {end:?} {:.0} ms after the handoff",
        ms(got - handed),
        ms(at - handed)
    );
    assert!(!lost_on_arrival, "lost on arrival");
    assert_eq!(end, LeaseEnd::Lost);
    // The lease counts from the last poll that saw the call queued, one
    // every third of it (100 ms) when on time; a busy machine's late poll
    // starts it earlier (128 ms after the handoff once), never at the first
    // request a second before (lost on arrival).
    assert!(at - handed >= FIXED / 4, "{:?}", at - handed);
}

/// A call with a fixed lease of 600 ms, shorter than its client's
/// heartbeats see to, asks about its place every third of it (200 ms): a
/// handoff 500 ms into its wait counts from the last of those, so the
/// guard keeps most of its lease (counted from the first request, it was
/// lost some 90 ms after it got the lock, though Redis gave it 600).
#[test]
fn a_fixed_lease_handed_over_mid_wait_counts_from_a_recent_poll() {
    let server = RedisServer::start();
    let client = || watchdog_every_10s(&server).build().unwrap();
    let (holder, waiter) = (client(), client());
    let held = holder.fair_mutex("fixed-mid-wait").lock().unwrap();
    const FIXED: Duration = Duration::from_millis(600);
    let waiting = thread::spawn(move || {
        let mutex = waiter.fair_mutex("fixed-mid-wait").unbound();
        mutex.with_fixed_lease(FIXED).lock().unwrap()
    });
    let queued = || holder.fair_mutex("fixed-mid-wait").queue_len().unwrap() == 1;
    assert!(wait_until(Duration::from_secs(5), queued));
    thread::sleep(Duration::from_millis(500));
    let handed = Instant::now();
    held.unlock().unwrap();
    let guard = join_within(waiting, Duration::from_secs(5), "the waiter");
    let (end, at) = (watch(guard.lease_signal()).recv_timeout(Duration::from_secs(5))).unwrap();
    assert_eq!(end, LeaseEnd::Lost);
    let kept = at - handed;
    eprintln!("fixed lease {FIXED:?} handed over 500 ms into the wait: lost {kept:?} after");
    assert!(
        kept >= Duration::from_millis(250),
        "lost {kept:?} after the handoff"
    );
}

/// Holds of every kind whose keys a `FLUSHALL` deleted (no connection
/// dropped: nothing tells the client of a gap): the watchdog's next
/// renewal finds each key gone and the hold is told lost as one redis lost,
/// not as a lease run out there or a force release, in its unlock's error.
#[test]
fn a_hold_whose_keys_were_flushed_is_told_lost_as_one_redis_lost() {
    let server = RedisServer::start();
    // A watchdog round every 100 ms.
    let client = client(&server, Duration::from_millis(300));
    let mut holds = Vec::new();
    for kind in Kind::EXCLUSIVE {
        let name = format!("flushed-{kind:?}");
        let guard =
            take::<fairlock::Bound>(&client, kind, &name, LeasePolicy::Client, Duration::ZERO)
                .unwrap()
                .expect("free");
        holds.push((kind, watch(guard.lease_signal()), guard));
    }
    let () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();
    for (kind, ended, guard) in holds {
        let (end, _) = ended.recv_timeout(Duration::from_secs(5)).expect("told");
        assert_eq!(end, LeaseEnd::Lost, "{kind:?}");
        let err = guard.unlock().expect_err("lost with the flush");
        eprintln!("{kind:?}: {err}");
        assert!(err.to_string().contains("redis lost it"), "{kind:?}: {err}");
    }
}

/// Holds of every kind whose keys the server evicted (a memory limit with
/// `allkeys-random`, reached by a write; no connection dropped): the
/// watchdog's next renewal finds each key gone, and the error names an
/// eviction among the causes, not only a restart, a failover or a flush.
#[test]
fn a_hold_whose_keys_were_evicted_is_told_lost_naming_an_eviction() {
    let server = RedisServer::start();
    // A watchdog round every 100 ms.
    let client = client(&server, Duration::from_millis(300));
    let mut holds = Vec::new();
    for kind in Kind::EXCLUSIVE {
        let name = format!("evicted-{kind:?}");
        let guard =
            take::<fairlock::Bound>(&client, kind, &name, LeasePolicy::Client, Duration::ZERO)
                .unwrap()
                .expect("free");
        holds.push((kind, watch(guard.lease_signal()), guard));
    }
    let mut conn = server.conn();
    // One setting a CONFIG SET, as Redis 6.2 takes them.
    let set = |key: &str, value: &str| {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(key)
            .arg(value)
            .query(&mut server.conn())
            .unwrap();
    };
    set("maxmemory-policy", "allkeys-random");
    set("maxmemory", "1");
    // The write evicts every key, then is refused (OOM): nothing fits.
    let _ = redis::cmd("SET")
        .arg("filler")
        .arg("x")
        .query::<()>(&mut conn);
    let evicted = Instant::now();
    set("maxmemory", "0");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*")
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys, Vec::<String>::new(), "not all evicted");
    for (kind, ended, guard) in holds {
        let (end, at) = ended.recv_timeout(Duration::from_secs(5)).expect("told");
        assert_eq!(end, LeaseEnd::Lost, "{kind:?}");
        let err = guard.unlock().expect_err("lost with the eviction");
        eprintln!("{kind:?}: told {:.1} ms after: {err}", ms(at - evicted));
        assert!(err.to_string().contains("an eviction"), "{kind:?}: {err}");
    }
}

/// A semaphore's two permits whose holders key alone was evicted (a
/// `volatile-ttl` server evicts the key nearest its expiry first: this one,
/// whose TTL is the leases', not the meta's fence life), the meta kept:
/// the script cannot tell that from a lease run out at Redis, and each
/// unlock's error must still name an eviction among its causes (before:
/// "its lease ran out there, or a force release freed it", neither true).
#[test]
fn permits_whose_holders_key_alone_was_evicted_name_an_eviction() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.fair_semaphore("holders-evicted", 2);
    let permits = [semaphore.acquire().unwrap(), semaphore.acquire().unwrap()];
    let mut conn = server.conn();
    let keys: Vec<String> = (redis::cmd("KEYS").arg("fairlock:*:sem:holders-evicted"))
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys.len(), 1, "the holders key: {keys:?}");
    // An eviction is a deletion the server makes.
    let () = redis::cmd("DEL").arg(&keys).query(&mut conn).unwrap();
    for permit in permits {
        let err = permit.unlock().expect_err("evicted");
        eprintln!("holders key evicted: {err}");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
        assert!(err.to_string().contains("eviction"), "{err}");
    }
}

/// A reader-writer lock's holds whose keys Redis lost (a restart without
/// its data; a `FLUSHALL`), changed at once, before the watchdog (10 s
/// apart) finds them gone: a write's downgrade to a read and to an
/// upgradable read, an upgradable read's downgrade and its `try_upgrade`,
/// and an upgrade that waits for another client's read across the restart.
/// Each says `LeaseLost` naming redis as what lost the hold, as the unlock
/// of such a hold does, not that its lease ran out there or a force release
/// freed it (neither leaves the lock's keys gone while this client still
/// counts its lease).
#[test]
fn a_change_of_access_of_a_hold_redis_lost_says_redis_lost_it() {
    let _serial = serial();
    let mut server = RedisServer::start();
    let client = (watchdog_every_10s(&server))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let other = server.client();
    type Change = Box<dyn FnOnce() -> fairlock::Result<()> + Send>;
    // A change, and its hold's lease signal.
    fn change<G>(
        guard: G,
        signal: LeaseSignal,
        change: fn(G) -> fairlock::Result<()>,
    ) -> (LeaseSignal, Change)
    where
        G: Send + 'static,
    {
        (signal, Box::new(move || change(guard)))
    }
    for lost_with in ["a restart", "a flush"] {
        let rwlock = |name: &str| client.fair_rwlock(name).unbound();
        let write = |name| {
            let write = rwlock(name).write().unwrap();
            (write.lease_signal(), write)
        };
        let upgradable = |name| {
            let upgradable = rwlock(name).upgradable_read().unwrap();
            (upgradable.lease_signal(), upgradable)
        };
        let changes: Vec<(&str, (LeaseSignal, Change))> = vec![
            ("downgrade", {
                let (signal, guard) = write("lost-downgrade");
                change(guard, signal, |write| write.downgrade().map(drop))
            }),
            ("downgrade_to_upgradable", {
                let (signal, guard) = write("lost-to-upgradable");
                change(guard, signal, |write| {
                    write.downgrade_to_upgradable().map(drop)
                })
            }),
            ("an upgradable read's downgrade", {
                let (signal, guard) = upgradable("lost-upgradable-down");
                change(guard, signal, |read| read.downgrade().map(drop))
            }),
            ("try_upgrade", {
                let (signal, guard) = upgradable("lost-try-upgrade");
                change(guard, signal, |read| {
                    read.try_upgrade().map(|got| assert!(got.is_ok()))
                })
            }),
        ];
        // An upgrade waiting for another client's read when Redis loses both.
        let read = other.fair_rwlock("lost-waiting").read().unwrap();
        let (waiting_signal, upgradable) = upgradable("lost-waiting");
        let waiting = thread::spawn(move || {
            let got = upgradable.upgrade_with(fairlock::Wait::at_most(Duration::from_secs(20)));
            got.map(|got| assert!(got.is_err(), "upgraded"))
        });
        let queued = || other.fair_rwlock("lost-waiting").queue_len().unwrap() == 1;
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "the claim waits"
        );
        match lost_with {
            "a restart" => server.restart(),
            _ => redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap(),
        }
        let mut said = Vec::new();
        for (what, (signal, change)) in changes {
            said.push((
                what,
                change().expect_err("its hold is gone"),
                signal.ended(),
            ));
        }
        let waited = join_within(waiting, Duration::from_secs(25), "the waiting upgrade");
        let err = waited.expect_err("its hold is gone");
        said.push(("a waiting upgrade", err, waiting_signal.ended()));
        for (what, err, ended) in &said {
            eprintln!("{what} after {lost_with}: {err} (its lease signal: {ended:?})");
        }
        for (what, err, ended) in said {
            // Redis said it was gone before it was released.
            assert_eq!(ended, Some(LeaseEnd::Lost), "{what}, {lost_with}");
            assert_eq!(
                err.kind(),
                ErrorKind::LeaseLost,
                "{what}, {lost_with}: {err}"
            );
            assert!(
                err.to_string().contains("redis lost it"),
                "{what}, {lost_with}: {err}"
            );
        }
        drop(read);
    }
}

/// An upgrade waiting for another client's read when the lock's keys are
/// deleted (a `FLUSHALL`, an eviction of every key; no connection dropped),
/// its client's watchdog renewing every 100 ms: the upgrade fails
/// `LeaseLost` within a second (94-97 ms), naming redis as what lost the
/// read (its keys gone), as an unlock of it would, not the generic "no
/// longer this hold's". (Only the holders key evicted, the meta kept, the
/// renewal cannot tell that from a lease run out there: the generic reason,
/// which names an eviction among its causes.)
#[test]
fn an_upgrade_waiting_while_its_read_is_deleted_says_redis_lost_it() {
    let server = RedisServer::start();
    // A watchdog round every 100 ms.
    let client = client(&server, Duration::from_millis(300));
    let other = server.client();
    for lost_with in ["a flush", "an eviction"] {
        let name = format!("upgrade-deleted-{}", lost_with.len());
        let read = other.fair_rwlock(&name).read().unwrap();
        let upgradable = client
            .fair_rwlock(&name)
            .unbound()
            .upgradable_read()
            .unwrap();
        let signal = upgradable.lease_signal();
        let waiting = thread::spawn(move || {
            let got = upgradable.upgrade_with(fairlock::Wait::at_most(Duration::from_secs(20)));
            (got.map(|got| got.is_ok()), Instant::now())
        });
        let queued = || other.fair_rwlock(&name).queue_len().unwrap() == 1;
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "the claim waits"
        );
        // Heartbeats of the claim and renewals of the read go on meanwhile.
        thread::sleep(Duration::from_millis(300));
        let set = |key: &str, value: &str| {
            let () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(key)
                .arg(value)
                .query(&mut server.conn())
                .unwrap();
        };
        let deleted = Instant::now();
        match lost_with {
            "a flush" => redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap(),
            _ => {
                set("maxmemory-policy", "allkeys-random");
                set("maxmemory", "1");
                let _ = redis::cmd("SET")
                    .arg("filler")
                    .arg("x")
                    .query::<()>(&mut server.conn());
                set("maxmemory", "0");
            }
        }
        let (got, at) = join_within(waiting, Duration::from_secs(25), "the waiting upgrade");
        let err = got.expect_err("its read is gone");
        eprintln!(
            "upgrade waiting through {lost_with}: {:.0} ms after: {err} ({:?})",
            ms(at - deleted),
            signal.ended()
        );
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{lost_with}: {err}");
        assert!(
            err.to_string().contains("redis lost it"),
            "{lost_with}: {err}"
        );
        assert!(at - deleted < Duration::from_secs(1), "{:?}", at - deleted);
        assert_eq!(signal.ended(), Some(LeaseEnd::Lost), "{lost_with}");
        drop(read);
    }
}

/// A client of `server` whose watchdog comes every 10 s (min(lease, waiter
/// timeout) / 3: lease 60 s, waiter timeout 30 s), so that a call, not the
/// watchdog, is first to find what became of a hold.
fn watchdog_every_10s(server: &RedisServer) -> ClientBuilder {
    (server.builder())
        .lease(Duration::from_secs(60))
        .waiter_timeout(Duration::from_secs(30))
}

/// An upgrade waiting for another client's read when the holders key and
/// the meta are evicted (`allkeys-lru`, `allkeys-random`), the queue kept
/// (its claim in it, heartbeated), the other client keeping its guard:
/// with no meta, a heartbeat admits nobody, so no admission drops the
/// claim; only the read's renewals (every 100 ms) find its keys gone. The
/// upgradable read's lease signal must say `Lost` within a watchdog period
/// or so, and the upgrade must end `LeaseLost` then, not wait out its 10 s.
#[test]
fn an_upgrade_waiting_while_its_reads_keys_but_the_queue_are_evicted_is_told_lost() {
    let name = "upgrade-keys-evicted";
    let server = RedisServer::start();
    // A watchdog round every 100 ms.
    let client = client(&server, Duration::from_millis(300));
    let other = server.client();
    let read = other.fair_rwlock(name).read().unwrap();
    let upgradable = (client.fair_rwlock(name).unbound())
        .upgradable_read()
        .unwrap();
    let ended = watch(upgradable.lease_signal());
    let waiting = thread::spawn(move || {
        let got = upgradable.upgrade_with(fairlock::Wait::at_most(Duration::from_secs(10)));
        (got.map(|got| got.is_ok()), Instant::now())
    });
    let queued = || other.fair_rwlock(name).queue_len().unwrap() == 1;
    assert!(
        wait_until(Duration::from_secs(5), queued),
        "the claim waits"
    );
    let mut conn = server.conn();
    let keys: Vec<String> = (redis::cmd("KEYS").arg(format!("fairlock:*:rw*:{name}")))
        .query(&mut conn)
        .unwrap();
    let evict: Vec<&String> = keys.iter().filter(|key| !key.contains(":rwq")).collect();
    assert_eq!(evict.len(), 2, "the holders key and the meta of {keys:?}");
    let evicted = Instant::now();
    let () = redis::cmd("DEL").arg(&evict).query(&mut conn).unwrap();
    let told = ended.recv_timeout(Duration::from_secs(15));
    let (got, at) = join_within(waiting, Duration::from_secs(15), "the waiting upgrade");
    eprintln!(
        "told {:?}, upgrade {got:?} {:.0} ms after the eviction",
        told.map(|(end, at)| (end, at - evicted)),
        ms(at - evicted)
    );
    let (end, told_at) = told.expect("told");
    assert_eq!(end, LeaseEnd::Lost);
    assert!(
        told_at - evicted < Duration::from_secs(1),
        "{:?}",
        told_at - evicted
    );
    assert_eq!(got.map_err(|err| err.kind()), Err(ErrorKind::LeaseLost));
    assert!(at - evicted < Duration::from_secs(1), "{:?}", at - evicted);
    drop(read);
}
