//! Cooperative revocation (`FairLock::revoke`, `Client::revoke` by kind
//! and name): every current holder of a name, of every kind, bound or
//! unbound, is asked to let go and keeps its hold until it does; the push
//! message reaches it within a round trip (also in another process), a
//! lost message is made up for by the next renewal's reply, and a hold
//! taken after the request is never asked. A force unlock's holders hear
//! of it by a message too, as a lost lease. The client's admin by kind
//! (`Client::force_unlock` and `Client::revoke`) reaches the lock of that
//! kind only, and refuses a bad name.

use redis::Commands;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{
    AnyGuard, Client, ErrorKind, LeaseSignal, LockKind, Revocation, RevocationSignal, Unbound,
};
use fairlock_test_support::roles::lease_holder;
use fairlock_test_support::*;

/// A watchdog period of 10 s (a third of min(lease, waiter timeout)): no
/// renewal comes within a test, so what is heard came by the message.
fn quiet_client(server: &RedisServer) -> Client {
    Client::builder(&server.url())
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A watchdog period of 100 ms: renewals every 100 ms, a lease that
/// survives a renewal 200 ms late (150 ms, renewed every 50 ms, ran out on
/// a CI run's busiest minute beside another suite).
const SHORT_LEASE: Duration = Duration::from_millis(300);

/// A thread blocked on `signal`: how the wait ended, and when.
fn watch(signal: RevocationSignal) -> mpsc::Receiver<(Revocation, Instant)> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let outcome = signal.wait();
        let _ = tx.send((outcome, Instant::now()));
    });
    rx
}

#[test]
fn every_kind_of_hold_is_asked_by_its_message_within_a_round_trip_and_keeps_its_hold() {
    let server = RedisServer::start();
    let holder = quiet_client(&server);
    let operator = quiet_client(&server);
    let wait = Duration::from_secs(5);

    // Every kind, each bound and unbound; an election's leader; the parts
    // of a multi-lock (a mutex and a read).
    let mut guards: Vec<(String, fairlock::LockKind, AnyGuard<Unbound>)> = Vec::new();
    let mut bound: Vec<(String, fairlock::LockKind, AnyGuard)> = Vec::new();
    for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
        let name = format!("unbound-{kind:?}");
        let guard = take::<Unbound>(&holder, kind, &name, LeasePolicy::Client, wait)
            .unwrap()
            .unwrap();
        guards.push((name, kind.lock_kind(), guard));
        let name = format!("bound-{kind:?}");
        let guard = take::<fairlock::Bound>(&holder, kind, &name, LeasePolicy::Client, wait)
            .unwrap()
            .unwrap();
        bound.push((name, kind.lock_kind(), guard));
    }
    let leadership = holder.election("leader").campaign().unwrap();
    let multi = holder
        .fair_multi_lock(["multi-a"])
        .and_read("multi-b")
        .lock()
        .unwrap();

    let mut signals: Vec<(String, fairlock::LockKind, RevocationSignal)> = Vec::new();
    for (name, kind, guard) in &guards {
        signals.push((name.clone(), *kind, guard.revocation_signal()));
    }
    for (name, kind, guard) in &bound {
        signals.push((name.clone(), *kind, guard.revocation_signal()));
    }
    signals.push((
        "leader".into(),
        fairlock::LockKind::Election,
        leadership.revocation_signal(),
    ));
    for part in multi.parts() {
        let kind = if part.access().is_some() {
            fairlock::LockKind::RwLock
        } else {
            fairlock::LockKind::Mutex
        };
        signals.push((part.name().to_owned(), kind, part.revocation_signal()));
    }
    assert!(!multi.is_revoked());

    let mut delays = Vec::new();
    for (name, kind, signal) in &signals {
        assert!(!signal.is_revoked(), "{name}");
        assert_eq!(signal.wait_timeout(Duration::ZERO), None, "{name}");
        let watcher = watch(signal.clone());
        let sent = Instant::now();
        let asked = revoke(&operator, *kind, name);
        assert_eq!(asked, 1, "{name}: one hold asked");
        let (outcome, at) = watcher
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{name}: the revocation signal did not fire"));
        assert_eq!(outcome, Revocation::Requested, "{name}");
        assert!(signal.is_revoked(), "{name}");
        delays.push(ms(at.saturating_duration_since(sent)));
        // Asked, not taken: the holder still holds, and nobody else can.
        let status = operator.status(*kind, name, 10).unwrap();
        assert_eq!(status.holder_count, 1, "{name}: still held");
        assert_eq!(
            status.holders[0].fencing_token,
            signal.fencing_token(),
            "{name}"
        );
    }
    delays.sort_by(f64::total_cmp);
    eprintln!(
        "revoke() sent → revocation signal (ms), {} holds, no renewal in the window: {delays:.2?}",
        delays.len()
    );
    // The message's path: the fallback (a renewal) is 10 s away.
    assert!(*delays.last().unwrap() < 1000.0, "{delays:?}");

    assert!(multi.is_revoked());
    assert!(leadership.is_revoked());
    for (name, _, guard) in guards {
        assert!(guard.is_revoked() && !guard.is_lease_lost(), "{name}");
        // Released by another thread: an unbound hold, still its own.
        thread::spawn(move || guard.unlock())
            .join()
            .unwrap()
            .unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    for (name, _, guard) in bound {
        assert!(guard.is_revoked() && !guard.is_lease_lost(), "{name}");
        guard.unlock().unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    leadership.unlock().unwrap();
    multi.unlock().unwrap();
    // The signals outlive their guards, and say what came first.
    for (name, _, signal) in &signals {
        assert_eq!(signal.wait(), Revocation::Requested, "{name}");
    }
    // Nobody holds them now: nothing to ask.
    assert_eq!(operator.fair_mutex("bound-Mutex").revoke().unwrap(), 0);
    assert_eq!(operator.fair_rwlock("bound-Read").revoke().unwrap(), 0);
}

/// A force unlock's holders hear of it by push, as a
/// revocation's do: before, only their next renewal told them (3.3 s with
/// the defaults; 10 s with these clients), so a holder believed it held a
/// lock that was someone else's.
#[test]
fn every_kind_of_hold_hears_of_a_force_unlock_by_its_message_at_once() {
    let server = RedisServer::start();
    let holder = quiet_client(&server);
    let other_holder = quiet_client(&server);
    let operator = quiet_client(&server);
    let wait = Duration::from_secs(5);

    // Every kind, bound and unbound (a semaphore's permits from two
    // clients, each told), an election's leader and a multi-lock's parts.
    let mut held: Vec<(String, LockKind, Vec<LeaseSignal>)> = Vec::new();
    let mut guards: Vec<AnyGuard<Unbound>> = Vec::new();
    let mut bound: Vec<AnyGuard> = Vec::new();
    for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
        let name = format!("unbound-{kind:?}");
        let guard = take::<Unbound>(&holder, kind, &name, LeasePolicy::Client, wait);
        let mut signals = vec![guard.unwrap().unwrap()];
        if kind == Kind::Read {
            let second = take::<Unbound>(&other_holder, kind, &name, LeasePolicy::Client, wait);
            signals.push(second.unwrap().expect("a second permit or read"));
        }
        held.push((
            name,
            kind.lock_kind(),
            signals.iter().map(|g| g.lease_signal()).collect(),
        ));
        guards.extend(signals);
        let name = format!("bound-{kind:?}");
        let guard = take::<fairlock::Bound>(&holder, kind, &name, LeasePolicy::Client, wait);
        let guard = guard.unwrap().unwrap();
        held.push((name, kind.lock_kind(), vec![guard.lease_signal()]));
        bound.push(guard);
    }
    let permits = [&holder, &other_holder].map(|client| {
        let permit = client.fair_semaphore("permits", 3).unbound().acquire();
        permit.unwrap().into_any()
    });
    held.push((
        "permits".into(),
        LockKind::Semaphore,
        permits.iter().map(|g| g.lease_signal()).collect(),
    ));
    guards.extend(permits);
    let leadership = holder.election("leader").campaign().unwrap();
    held.push((
        "leader".into(),
        LockKind::Election,
        vec![leadership.lease_signal()],
    ));
    let multi = holder
        .fair_multi_lock(["multi-a"])
        .and_read("multi-b")
        .lock()
        .unwrap();
    for part in multi.parts() {
        let kind = match part.access() {
            Some(_) => LockKind::RwLock,
            None => LockKind::Mutex,
        };
        held.push((part.name().to_owned(), kind, vec![part.lease_signal()]));
    }

    let mut delays = Vec::new();
    for (name, kind, signals) in &held {
        let watchers: Vec<_> = signals
            .iter()
            .map(|signal| {
                assert_eq!(signal.ended(), None, "{name}");
                let (tx, rx) = mpsc::channel();
                let signal = signal.clone();
                thread::spawn(move || {
                    let end = signal.wait();
                    let _ = tx.send((end, Instant::now()));
                });
                rx
            })
            .collect();
        let sent = Instant::now();
        assert!(operator.force_unlock(*kind, name).unwrap(), "{name}");
        for watcher in watchers {
            let (end, at) = watcher
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("{name}: the holder was not told"));
            assert_eq!(end, fairlock::LeaseEnd::Lost, "{name}");
            delays.push(ms(at.saturating_duration_since(sent)));
        }
    }
    delays.sort_by(f64::total_cmp);
    eprintln!(
        "force_unlock() sent → lease signal (ms), {} holds, no renewal in the window: {delays:.2?}",
        delays.len()
    );
    // The message's path: the fallback (a renewal) is 10 s away. A push
    // message takes well under 100 ms on loopback, the median's bound; the
    // worst's leaves room for a busy machine.
    assert!(delays[delays.len() / 2] < 100.0, "{delays:?}");
    assert!(*delays.last().unwrap() < 1000.0, "{delays:?}");

    assert!(multi.is_lease_lost() && leadership.is_lease_lost());
    let lost = guards.iter().map(|g| (g.name(), g.is_lease_lost()));
    for (name, lost) in lost.chain(bound.iter().map(|g| (g.name(), g.is_lease_lost()))) {
        assert!(lost, "{name}");
    }
    // What a lost hold's unlock says: that a force release freed it (it
    // said "was no longer held" and no more before); it frees nothing of
    // the new holders'.
    let taken = operator.fair_mutex("bound-Mutex").try_lock().unwrap();
    let unbound = guards
        .into_iter()
        .map(|guard| (guard.name().to_owned(), guard.unlock()));
    for (name, unlocked) in
        unbound.chain(bound.into_iter().map(|g| (g.name().to_owned(), g.unlock())))
    {
        let err = unlocked.expect_err(&name);
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{name}: {err}");
        assert!(!err.is_retryable(), "{name}");
        let text = err.to_string();
        for said in [
            format!("{name:?}"),
            "no longer held".into(),
            "force release".into(),
        ] {
            assert!(text.contains(&said), "{name}: no {said:?} in {text:?}");
        }
    }
    assert!(taken.expect("free after the force unlock").unlock().is_ok());
}

/// `client`'s revocation of the `kind` of lock `name`: the holds it asked.
fn revoke(client: &Client, kind: fairlock::LockKind, name: &str) -> usize {
    client.revoke(kind, name).unwrap()
}

/// A hold of the `kind` of lock `name` (a rwlock's: a write), unbound.
fn hold(client: &Client, kind: LockKind, name: &str) -> AnyGuard<Unbound> {
    let wait = Duration::from_secs(5);
    let held = match kind {
        LockKind::Mutex => take::<Unbound>(client, Kind::Mutex, name, LeasePolicy::Client, wait),
        LockKind::Semaphore => take(client, Kind::Semaphore, name, LeasePolicy::Client, wait),
        LockKind::RwLock => take(client, Kind::Write, name, LeasePolicy::Client, wait),
        _ => Ok(Some(client.election(name).campaign().unwrap().into_any())),
    };
    held.unwrap()
        .unwrap_or_else(|| panic!("{kind:?} {name}: not free"))
}

#[test]
fn the_client_revokes_and_force_unlocks_each_kind_by_name_and_no_other_kind() {
    let server = RedisServer::start();
    let holder = quiet_client(&server);
    let operator = quiet_client(&server);
    let kinds = [
        LockKind::Mutex,
        LockKind::Semaphore,
        LockKind::RwLock,
        LockKind::Election,
    ];
    for kind in kinds {
        let name = format!("admin-{}", kind.label());
        let guard = hold(&holder, kind, &name);
        let signal = guard.revocation_signal();
        let held = |why: &str| {
            let status = operator.status(kind, &name, 10).unwrap();
            assert_eq!(status.holder_count, 1, "{kind:?}: {why}");
            assert_eq!(status.holders[0].fencing_token, signal.fencing_token());
        };
        // The other kinds of the name are locks of their own: asking or
        // freeing them leaves this one held, and unasked.
        for other in kinds.into_iter().filter(|other| *other != kind) {
            assert!(!operator.force_unlock(other, &name).unwrap(), "{other:?}");
            assert_eq!(operator.revoke(other, &name).unwrap(), 0, "{other:?}");
            held(&format!("after the {other:?} of the name was freed"));
        }
        assert!(!signal.is_revoked(), "{kind:?}: asked by another kind");

        let watcher = watch(signal.clone());
        assert_eq!(operator.revoke(kind, &name).unwrap(), 1, "{kind:?}");
        let (outcome, _) = watcher
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{kind:?}: the revocation signal did not fire"));
        assert_eq!(outcome, Revocation::Requested, "{kind:?}");
        assert!(guard.is_revoked(), "{kind:?}");
        held("asked, not freed");

        assert!(operator.force_unlock(kind, &name).unwrap(), "{kind:?}");
        let status = operator.status(kind, &name, 10).unwrap();
        assert_eq!(status.holder_count, 0, "{kind:?}: still held");
        assert!(status.holder().is_none(), "{kind:?}");
        assert!(!operator.force_unlock(kind, &name).unwrap(), "{kind:?}");
        assert_eq!(operator.revoke(kind, &name).unwrap(), 0, "{kind:?}");
        // Free for the next taker at once.
        drop(hold(&operator, kind, &name));
        drop(guard);
    }
}

#[test]
fn the_client_refuses_a_bad_name_of_every_kind_before_any_io() {
    let server = RedisServer::start();
    let operator = quiet_client(&server);
    let long = "n".repeat(fairlock::MAX_NAME_LEN + 1);
    for kind in [
        LockKind::Mutex,
        LockKind::Semaphore,
        LockKind::RwLock,
        LockKind::Election,
    ] {
        for name in ["", long.as_str()] {
            let freed = operator.force_unlock(kind, name).unwrap_err();
            assert_eq!(freed.kind(), ErrorKind::InvalidName, "{kind:?}: {freed}");
            let asked = operator.revoke(kind, name).unwrap_err();
            assert_eq!(asked.kind(), ErrorKind::InvalidName, "{kind:?}: {asked}");
        }
    }
}

#[test]
fn a_hold_taken_after_the_revocation_is_never_asked() {
    let server = RedisServer::start();
    let renewed = || {
        Client::builder(&server.url())
            .lease(SHORT_LEASE)
            .waiter_timeout(SHORT_LEASE)
            .build()
            .unwrap()
    };
    let (first, second) = (renewed(), renewed());
    let operator = quiet_client(&server);

    // A reader-writer lock read by two clients: both asked.
    let read_1 = first.fair_rwlock("rw").read().unwrap();
    let read_2 = second.fair_rwlock("rw").unbound().read().unwrap();
    assert_eq!(operator.fair_rwlock("rw").revoke().unwrap(), 2);
    // A semaphore of 2 permits: the permit held is asked.
    let permit_1 = first.fair_semaphore("sem", 2).acquire().unwrap();
    assert_eq!(operator.fair_semaphore("sem", 2).revoke().unwrap(), 1);
    // A mutex: its holder is asked, and releases.
    let mutex_1 = first.fair_mutex("m").lock().unwrap();
    assert_eq!(operator.fair_mutex("m").revoke().unwrap(), 1);
    // A mutex held with a fixed lease: asked, and left to run out (the
    // lock key keeps the request, which must not ask the next holder).
    let fixed_1 = first
        .fair_mutex("f")
        .with_fixed_lease(Duration::from_millis(100))
        .lock()
        .unwrap();
    assert_eq!(operator.fair_mutex("f").revoke().unwrap(), 1);
    let asked = [
        read_1.revocation_signal(),
        read_2.revocation_signal(),
        permit_1.revocation_signal(),
        mutex_1.revocation_signal(),
        fixed_1.revocation_signal(),
    ];
    for signal in &asked {
        assert_eq!(
            signal.wait_timeout(Duration::from_secs(5)),
            Some(Revocation::Requested)
        );
    }

    // Holds taken after the requests, beside the asked ones or after them.
    let read_3 = second.fair_rwlock("rw").read().unwrap();
    let permit_2 = second.fair_semaphore("sem", 2).acquire().unwrap();
    let next = {
        let second = second.clone();
        thread::spawn(move || {
            let guard = second.fair_mutex("m").unbound().lock().unwrap();
            let after_fixed = second.fair_mutex("f").unbound().lock().unwrap();
            (guard, after_fixed)
        })
    };
    assert!(wait_until(Duration::from_secs(5), || operator
        .fair_mutex("m")
        .queue_len()
        .unwrap()
        == 1));
    mutex_1.unlock().unwrap();
    let (mutex_2, after_fixed) = join_within(next, Duration::from_secs(5), "the next holders");
    assert!(fixed_1.is_lease_lost(), "its fixed lease ran out");
    assert!(after_fixed.fencing_token() > fixed_1.fencing_token());

    // Each later hold is renewed many times (lease 300 ms, renewed every
    // 100 ms: held 900 ms, it would be lost without them), and never asked.
    let later = [
        read_3.revocation_signal(),
        permit_2.revocation_signal(),
        mutex_2.revocation_signal(),
        after_fixed.revocation_signal(),
    ];
    assert_eq!(later[0].wait_timeout(3 * SHORT_LEASE), None);
    for (signal, lost) in later.iter().zip([
        read_3.is_lease_lost(),
        permit_2.is_lease_lost(),
        mutex_2.is_lease_lost(),
        after_fixed.is_lease_lost(),
    ]) {
        assert!(!lost, "renewed meanwhile");
        assert!(!signal.is_revoked(), "token {}", signal.fencing_token());
    }
    // The asked ones still hold (a revocation takes nothing away).
    assert!(!read_1.is_lease_lost() && !read_2.is_lease_lost() && !permit_1.is_lease_lost());
    for guard in [read_1, read_3] {
        guard.unlock().unwrap();
    }
    read_2.unlock().unwrap();
    permit_1.unlock().unwrap();
    permit_2.unlock().unwrap();
    mutex_2.unlock().unwrap();
    after_fixed.unlock().unwrap();
    drop(fixed_1);
}

#[test]
fn a_holder_whose_message_is_lost_hears_of_it_at_its_next_renewal() {
    let server = RedisServer::start();
    // A user allowed every command, key and channel, whose channels are
    // taken away once its client subscribed: the server closes the
    // subscription and refuses it again, so no message reaches the client.
    let mut admin = server.conn();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "deaf", "on", ">deaf", "~*", "&*", "+@all"][..])
        .query(&mut admin)
        .unwrap();
    let holder = Client::builder(&server.url_as("deaf", "deaf"))
        .lease(SHORT_LEASE)
        .waiter_timeout(SHORT_LEASE)
        .build()
        .unwrap();
    let operator = quiet_client(&server);
    let wait = Duration::from_secs(5);

    let mut held: Vec<(String, fairlock::LockKind, AnyGuard<Unbound>)> = Vec::new();
    for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
        let name = format!("deaf-{kind:?}");
        let guard = take::<Unbound>(&holder, kind, &name, LeasePolicy::Client, wait)
            .unwrap()
            .unwrap();
        held.push((name, kind.lock_kind(), guard));
    }
    let bound = holder.fair_mutex("deaf-bound").lock().unwrap();
    let leadership = holder.election("deaf-leader").campaign().unwrap();
    let multi = holder
        .fair_multi_lock(["deaf-multi-a"])
        .and_write("deaf-multi-b")
        .lock()
        .unwrap();
    let mut signals: Vec<(String, fairlock::LockKind, RevocationSignal)> = held
        .iter()
        .map(|(name, kind, guard)| (name.clone(), *kind, guard.revocation_signal()))
        .collect();
    signals.push((
        "deaf-bound".into(),
        fairlock::LockKind::Mutex,
        bound.revocation_signal(),
    ));
    signals.push((
        "deaf-leader".into(),
        fairlock::LockKind::Election,
        leadership.revocation_signal(),
    ));
    signals.push((
        "deaf-multi-a".into(),
        fairlock::LockKind::Mutex,
        multi.parts()[0].revocation_signal(),
    ));
    signals.push((
        "deaf-multi-b".into(),
        fairlock::LockKind::RwLock,
        multi.parts()[1].revocation_signal(),
    ));

    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "deaf", "resetchannels"][..])
        .query(&mut admin)
        .unwrap();
    let channel = format!("fairlock:wake:{}", holder.id());
    let listeners = |admin: &mut redis::Connection| -> i64 {
        let numsub: (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(admin)
            .unwrap();
        numsub.1
    };
    assert!(
        wait_until(wait, || listeners(&mut admin) == 0),
        "the holder's subscription is closed"
    );

    let mut delays = Vec::new();
    for (name, kind, signal) in &signals {
        let watcher = watch(signal.clone());
        let sent = Instant::now();
        assert_eq!(revoke(&operator, *kind, name), 1, "{name}");
        let (outcome, at) = watcher
            .recv_timeout(wait)
            .unwrap_or_else(|_| panic!("{name}: not heard by the next renewal"));
        assert_eq!(outcome, Revocation::Requested, "{name}");
        delays.push(ms(at.saturating_duration_since(sent)));
    }
    assert_eq!(
        listeners(&mut admin),
        0,
        "no message could reach the holder"
    );
    delays.sort_by(f64::total_cmp);
    eprintln!(
        "revoke() sent → revocation signal by the renewal (ms), renewed every 100 ms: {delays:.1?}"
    );
    // The next renewal: at most one period (100 ms) and its round trip away.
    assert!(*delays.last().unwrap() < 100.0 + 400.0, "{delays:?}");
    for (name, _, guard) in held {
        assert!(!guard.is_lease_lost(), "{name}");
        guard.unlock().unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    bound.unlock().unwrap();
    leadership.unlock().unwrap();
    multi.unlock().unwrap();
}

#[test]
fn a_holder_in_another_process_is_asked_within_a_round_trip() {
    let server = RedisServer::start();
    let operator = quiet_client(&server);
    let mut children = Children::new(env!("CARGO_BIN_EXE_fairlock-test-child"));
    // Renewed every 10 s: what the child hears within the test came by the
    // message.
    let child = children.spawn(
        "lease_holder",
        &lease_holder::vars(&server.url(), 30_000, false),
    );
    let patience = Duration::from_secs(10);
    children.expect_text(child, "ready", patience);
    let mut delays = Vec::new();
    for round in 0..3 {
        let name = format!("remote-{round}");
        children.send(child, &format!("lock {name}"));
        let token: u64 = children.expect_prefix(child, "locked ", patience).words()[1]
            .parse()
            .unwrap();
        let sent = Instant::now();
        assert_eq!(operator.fair_mutex(&name).revoke().unwrap(), 1);
        let heard = children.expect_text(child, &format!("revoked {token}"), patience);
        delays.push(ms(heard.at.saturating_duration_since(sent)));
        children.send(child, "lost?");
        children.expect_text(child, "lost false", patience);
        children.send(child, "unlock");
        children.expect_text(child, "unlocked ok", patience);
    }
    delays.sort_by(f64::total_cmp);
    eprintln!("revoke() sent → the holder process says it heard (ms): {delays:.2?}");
    // The message's path: the child's renewals are 10 s apart.
    assert!(*delays.last().unwrap() < 1000.0, "{delays:?}");
}

/// A reader-writer lock's hold asked to let go keeps being asked through a
/// change of its access (a downgrade, an upgrade) that gives it a new,
/// larger token, also when the request's message never reached its client:
/// the hold was present when the request reached Redis, so its next
/// renewal says so. Renewals every second (a 3 s lease): each change comes
/// a few ms after its `revoke()`, before any renewal, and the signal is
/// waited for over three renewals.
#[test]
fn a_hold_asked_to_let_go_is_still_asked_after_a_change_of_its_access() {
    let server = RedisServer::start();
    // As in the lost-message test above: the holder's subscription is
    // closed and refused, so only its renewals can tell it.
    let mut admin = server.conn();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "deaf", "on", ">deaf", "~*", "&*", "+@all"][..])
        .query(&mut admin)
        .unwrap();
    let holder = Client::builder(&server.url_as("deaf", "deaf"))
        .lease(Duration::from_secs(3))
        .waiter_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let operator = quiet_client(&server);
    let write = holder.fair_rwlock("changed-down").write().unwrap();
    let upgradable = holder.fair_rwlock("changed-up").upgradable_read().unwrap();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "deaf", "resetchannels"][..])
        .query(&mut admin)
        .unwrap();
    let channel = format!("fairlock:wake:{}", holder.id());
    assert!(
        wait_until(Duration::from_secs(5), || {
            let numsub: (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query(&mut admin)
                .unwrap();
            numsub.1 == 0
        }),
        "the holder's subscription is closed"
    );

    let asked = |name: &str| operator.revoke(LockKind::RwLock, name).unwrap();
    let heard = |signal: RevocationSignal, what: &str, sent: Instant| {
        let (outcome, at) = watch(signal)
            .recv_timeout(Duration::from_secs(4))
            .unwrap_or_else(|_| panic!("{what}: not asked {:?} after revoke()", sent.elapsed()));
        assert_eq!(outcome, Revocation::Requested, "{what}");
        eprintln!("{what}: asked {:?} after revoke()", at.duration_since(sent));
    };

    let sent = Instant::now();
    assert_eq!(asked("changed-down"), 1);
    let read = write.downgrade().unwrap();
    heard(
        read.revocation_signal(),
        "a write downgraded to a read",
        sent,
    );

    let sent = Instant::now();
    assert_eq!(asked("changed-up"), 1);
    let Ok(upgraded) = upgradable.try_upgrade().unwrap() else {
        panic!("no read beside it")
    };
    heard(
        upgraded.revocation_signal(),
        "an upgradable read upgraded",
        sent,
    );
    read.unlock().unwrap();
    upgraded.unlock().unwrap();
}

/// A revoke that a stop and continue cut short goes out again (the same
/// request on the same connection, `connections/steady.rs`), after its
/// first delivery asked the holder of then: the repeat must not ask the
/// holder of now. A child's `revoke()` goes out through a relay that holds
/// it; the child is stopped, the relay lets the request through (the holder
/// a is asked, the reply waits in the stopped child's socket), a releases
/// and b takes; the child is continued.
#[test]
fn a_revoke_sent_again_after_a_stop_does_not_ask_the_next_holder() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let holders = quiet_client(&server);
    let mut children = Children::new(env!("CARGO_BIN_EXE_fairlock-test-child"));
    // A fixed lease: the child sends nothing through the relay but its revoke.
    let child = children.spawn(
        "lease_holder",
        &lease_holder::vars(&relay.url(), 30_000, true),
    );
    let patience = Duration::from_secs(10);
    children.expect_text(child, "ready", patience);
    let a = holders.fair_mutex("again").lock().unwrap();

    relay.stall();
    children.send(child, "revoke again");
    assert!(
        wait_until(patience, || relay.held_bytes() > 0),
        "the revoke never went out"
    );
    let pid = children.pid(child);
    let stopped = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    };
    send_signal(pid, "STOP");
    assert!(wait_until(patience, stopped), "the child never stopped");
    relay.resume();
    assert_eq!(
        a.revocation_signal().wait_timeout(patience),
        Some(Revocation::Requested),
        "the revoke's first delivery asks a"
    );
    a.unlock().unwrap();
    let b = holders.fair_mutex("again").lock().unwrap();
    send_signal(pid, "CONT");
    let asked = children.expect_prefix(child, "asked ", patience);
    let lock_key =
        fairlock::__test_support::LockKeys::of_kind("fairlock", "again", LockKind::Mutex).unwrap();
    let mark: String = server.conn().get(lock_key.lock()).unwrap();
    eprintln!(
        "revoke: stopped and continued after the lock moved on: {}, b's lock key {mark:?}",
        asked.text
    );
    assert_eq!(asked.text, "asked 1", "it asked a");
    assert!(
        !mark.contains('^'),
        "the repeat asked b (token {}): {mark:?}",
        b.fencing_token()
    );
    assert_eq!(
        b.revocation_signal()
            .wait_timeout(Duration::from_millis(500)),
        None
    );
    b.unlock().unwrap();
}

/// With `sync_replicas`, a waiter handed the lock confirms the grant by a
/// renewal before it returns; a `revoke()` that reached Redis after the
/// handoff and before that renewal is said by its reply, which was
/// ignored: the message had come before the hold was the client's, so a
/// hold nobody renews (a fixed lease) never heard of it. The waiter's link
/// is slowed (300 ms each way, a relay) so the revocation lands between
/// the two, its message is handled while the renewal is on its way.
#[test]
fn a_grant_confirmed_for_sync_replicas_hears_a_revocation_its_renewal_reports() {
    let _serial = serial();
    let (server, _replica, _) = crate::deadlines::server_with_replica();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(300));
    let waiting_client = Client::builder(&relay.url())
        .command_timeout(Duration::from_secs(5))
        .sync_replicas(1, Duration::from_millis(2000))
        .build()
        .unwrap();
    let (holder, operator) = (server.client(), server.client());
    let name = "confirmed-then-revoked";
    let held = holder.fair_mutex(name).lock().unwrap();
    let waiting = waiting_client
        .fair_mutex(name)
        .with_fixed_lease(Duration::from_secs(30));
    let ((tx, rx), (done, finish)) = (mpsc::channel(), mpsc::channel::<()>());
    let waiter = thread::spawn(move || {
        let guard = waiting.lock().unwrap();
        let _ = tx.send(guard.revocation_signal());
        let _ = finish.recv_timeout(Duration::from_secs(20));
        guard.unlock().unwrap();
    });
    let mutex = holder.fair_mutex(name);
    assert!(
        wait_until(Duration::from_secs(10), || mutex.queue_len().unwrap() == 1),
        "the waiter never queued"
    );
    held.unlock().unwrap();
    // Handed over at Redis; the confirming renewal is 300 ms away at least.
    assert_eq!(operator.fair_mutex(name).revoke().unwrap(), 1);
    let signal = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let returned = Instant::now();
    let heard = signal.wait_timeout(Duration::from_secs(3));
    eprintln!(
        "revoked between the handoff and its confirmation: {heard:?} {:.0} ms after lock() returned",
        ms(returned.elapsed())
    );
    let _ = done.send(());
    waiter.join().unwrap();
    assert_eq!(heard, Some(Revocation::Requested));
}

/// A waiter handed the lock while its link is stalled, whose hold an
/// operator force-unlocks before the link is back (another client then
/// takes the lock), reads the handoff and the force unlock's message one
/// right after the other: its lock call must not return a guard that
/// believes it holds (a fixed lease: no renewal would tell it later). It
/// queues again (the message came before it took the grant) or returns a
/// guard that says it was lost (after). Which one is a race: 8 rounds.
/// (Before, a message read before the grant's hold was registered was
/// lost, and the guard held on beside the other client: 3 rounds of 8.)
#[test]
fn a_force_unlock_read_with_the_handoff_it_undid_is_not_lost() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    force_unlock_racing_a_handoff(&server, &relay, Client::builder(&relay.url()), "");
}

/// The same with `sync_replicas`, whose confirmation of the grant finds it
/// freed: the lock call, which waits as long as it takes, asks Redis and
/// queues again rather than failing. (Before: `LeaseLost` from `lock()`,
/// "gone by the time the call confirmed it", in 4–7 rounds of 8.)
#[test]
fn a_grant_confirmed_for_sync_replicas_and_found_force_unlocked_queues_again() {
    let (server, _replica, _) = crate::deadlines::server_with_replica();
    let relay = Relay::start(server.port());
    let builder = Client::builder(&relay.url()).sync_replicas(1, Duration::from_secs(1));
    force_unlock_racing_a_handoff(&server, &relay, builder, "-sync");
}

/// 8 rounds of the force unlock racing a handoff to a waiter of a client
/// from `builder`, which connects through `relay`.
fn force_unlock_racing_a_handoff(
    server: &RedisServer,
    relay: &Relay,
    builder: fairlock::ClientBuilder,
    tag: &str,
) {
    let waiting = (builder.lease(Duration::from_secs(30)))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (holder, operator) = (quiet_client(server), quiet_client(server));
    let mut outcomes = Vec::new();
    for round in 0..8 {
        let name = format!("force-unlock-racing-a-handoff{tag}-{round}");
        let first = holder.fair_mutex(&name).lock().unwrap();
        let mutex = (waiting.fair_mutex(&name).unbound()).with_fixed_lease(Duration::from_secs(10));
        let waiter = thread::spawn(move || mutex.lock());
        let watched = operator.fair_mutex(&name);
        let queued = || watched.queue_len().unwrap() == 1;
        assert!(wait_until(Duration::from_secs(5), queued));
        relay.stall();
        first.unlock().unwrap();
        let handed = watched.status(1).unwrap().holder().cloned();
        let handed = handed.expect("handed over");
        assert_eq!(handed.who.client_id(), waiting.id());
        assert!(watched.force_unlock().unwrap());
        let next = watched
            .try_lock()
            .unwrap()
            .expect("free after the force unlock");
        relay.resume();
        // It returns, or queues again behind the other client, which then
        // lets go.
        let over = wait_until(Duration::from_secs(5), || waiter.is_finished() || queued());
        assert!(over, "the waiter neither returned nor queued again");
        let (next_token, returned) = (next.fencing_token(), waiter.is_finished());
        if !returned {
            next.unlock().unwrap();
        }
        let how = if returned { "returned" } else { "queued again" };
        match join_within(waiter, Duration::from_secs(10), "the waiter") {
            Ok(guard) => {
                // The force unlock's message may be read just after.
                let lost = wait_until(Duration::from_secs(1), || guard.is_lease_lost());
                let ok = lost || guard.fencing_token() > next_token;
                outcomes.push(format!("{how}, lost={lost}, ok={ok}"));
            }
            Err(err) => outcomes.push(format!("{how}, {:?}, ok=false", err.kind())),
        }
    }
    eprintln!("{outcomes:#?}");
    assert!(
        outcomes.iter().all(|o| o.ends_with("ok=true")),
        "a lock call failed, or its guard believed it held beside another client"
    );
}

/// As the force unlock above, a revocation that asks a hold handed to a
/// waiter while its link is stalled, read together with the handoff: the
/// waiter's guard hears it (a fixed lease: no renewal would tell it
/// later), whether the message came before its hold was registered or
/// after. 8 rounds. (Before, one read before was lost: 3 rounds of 8.)
#[test]
fn a_revocation_read_with_the_handoff_it_asks_is_heard() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let waiting = Client::builder(&relay.url())
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (holder, operator) = (quiet_client(&server), quiet_client(&server));
    let mut heard = Vec::new();
    for round in 0..8 {
        let name = format!("revoke-racing-a-handoff-{round}");
        let first = holder.fair_mutex(&name).lock().unwrap();
        let mutex = (waiting.fair_mutex(&name).unbound()).with_fixed_lease(Duration::from_secs(10));
        let waiter = thread::spawn(move || mutex.lock().unwrap());
        let watched = operator.fair_mutex(&name);
        assert!(wait_until(Duration::from_secs(5), || watched
            .queue_len()
            .unwrap()
            == 1));
        relay.stall();
        first.unlock().unwrap();
        let handed = watched.status(1).unwrap().holder().cloned();
        assert_eq!(handed.expect("handed over").who.client_id(), waiting.id());
        assert_eq!(watched.revoke().unwrap(), 1);
        relay.resume();
        let guard = join_within(waiter, Duration::from_secs(10), "the waiter");
        heard.push(wait_until(Duration::from_secs(1), || guard.is_revoked()));
        guard.unlock().unwrap();
    }
    eprintln!("revocation heard: {heard:?}");
    assert!(heard.iter().all(|&h| h), "a revocation was never heard");
}

/// A revocation signal's wait ends when the hold is asked to let go, and
/// stays ended so after the hold is released; the hold goes on meanwhile
/// (asked, not taken). Unasked, the hold's end ends the wait
/// (`HoldEnded`). (That a maximum hold does not end it is a unit test of
/// machinery/holds: here the lease, capped at the maximum hold, runs out
/// moments after it.)
#[test]
fn a_revocation_signal_ends_when_asked_or_when_the_hold_ends() {
    let server = RedisServer::start();
    let client = quiet_client(&server);
    let mutex = client.fair_mutex("signal-ends");
    let guard = mutex.lock().unwrap();
    let (signal, lease) = (guard.revocation_signal(), guard.lease_signal());
    let watcher = watch(guard.revocation_signal());
    thread::sleep(Duration::from_millis(20));
    assert!(!signal.is_revoked());
    assert_eq!(mutex.revoke().unwrap(), 1);
    let (outcome, _) = watcher.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(outcome, Revocation::Requested);
    assert!(signal.is_revoked());
    assert_eq!(lease.ended(), None, "asked, not taken");
    guard.unlock().unwrap();
    assert_eq!(
        signal.wait_timeout(Duration::ZERO),
        Some(Revocation::Requested)
    );

    let unasked = client.fair_mutex("signal-unasked").lock().unwrap();
    let watcher = watch(unasked.revocation_signal());
    thread::sleep(Duration::from_millis(20));
    unasked.unlock().unwrap();
    let (outcome, _) = watcher.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(outcome, Revocation::HoldEnded);
}

/// A force unlock hands the lock on in the same step (`force_unlock`'s
/// doc), also when the holder's lease ran out just before it: the head
/// of the queue, which came to head it by a grant to the waiter before it
/// and so does not know when that lease ends, gets it at once, not at its
/// client's next heartbeat (10 s apart here). A mutex and an election.
/// (Before, the lock was only marked free: the head took it 4–10 s later.)
#[test]
fn a_force_unlock_of_a_lease_run_out_hands_the_lock_to_the_head_at_once() {
    let server = RedisServer::start();
    let (first, second, head, operator) = (
        quiet_client(&server),
        quiet_client(&server),
        quiet_client(&server),
        quiet_client(&server),
    );
    let fixed = Duration::from_millis(300);
    let mut delays = Vec::new();
    for kind in [LockKind::Mutex, LockKind::Election] {
        let name = format!("ran-out-{kind:?}");
        let held = hold(&first, kind, &name);
        let (queued, taken) = (second.clone(), head.clone());
        let (short, next) = (name.clone(), name.clone());
        let queued_len = |n: usize| {
            let status = || operator.status(kind, &name, 0).unwrap().queue_len == n;
            assert!(wait_until(Duration::from_secs(5), status), "{kind:?}");
        };
        // The second holds with a fixed lease it lets run out.
        let second_hold = thread::spawn(move || match kind {
            LockKind::Mutex => (queued.fair_mutex(&short).unbound().with_fixed_lease(fixed))
                .lock()
                .map(|g| g.into_any()),
            _ => (queued.election(&short).with_fixed_lease(fixed))
                .campaign()
                .map(|g| g.into_any()),
        });
        queued_len(1);
        let head_hold = thread::spawn(move || {
            let guard = match kind {
                LockKind::Mutex => taken
                    .fair_mutex(&next)
                    .unbound()
                    .lock()
                    .map(|g| g.into_any()),
                _ => taken.election(&next).campaign().map(|g| g.into_any()),
            };
            (guard, Instant::now())
        });
        queued_len(2);
        held.unlock().unwrap();
        let ran_out = join_within(second_hold, Duration::from_secs(5), "the second").unwrap();
        let free = || operator.status(kind, &name, 1).unwrap().holder_count == 0;
        assert!(wait_until(Duration::from_secs(5), free), "{kind:?}");
        assert!(
            !head_hold.is_finished(),
            "{kind:?}: the head took it by itself"
        );
        let sent = Instant::now();
        operator.force_unlock(kind, &name).unwrap();
        let (guard, at) = join_within(head_hold, Duration::from_secs(15), "the head");
        let guard = guard.unwrap();
        delays.push(ms(at.saturating_duration_since(sent)));
        assert!(!guard.is_lease_lost(), "{kind:?}");
        drop(ran_out);
        guard.unlock().unwrap();
    }
    eprintln!("force_unlock() of a lease run out → the head's lock() returned (ms): {delays:.2?}");
    assert!(delays.iter().all(|&d| d < 1000.0), "{delays:?}");
}

/// Under `sync_replicas` with no replica to acknowledge, a revocation and
/// a force unlock are made on the master all the same (the holder is
/// asked, then freed, and the waiter gets the lock): their
/// `NotReplicated` is not retryable, as a force unlock sent again would
/// free the hold it handed to the waiter. (Before, both said retryable.)
#[test]
fn an_admin_write_too_few_replicas_saw_is_not_retryable() {
    let server = RedisServer::start();
    let operator = (server.builder())
        .sync_replicas(1, Duration::from_millis(100))
        .build()
        .unwrap();
    admin_writes_made_all_the_same(&server, ErrorKind::NotReplicated, |admin| admin(&operator));
}

/// A revocation and a force unlock whose replies never come (the link
/// stalls after the request went out) may have been made: their
/// `Connection` error is not retryable, as the call sent again would act
/// on whoever holds the lock then (a force unlock would free the hold it
/// handed to the waiter). (Before, both said retryable, though the
/// holder was asked, then freed, and the waiter had the lock.)
#[test]
fn an_admin_write_whose_reply_never_came_is_not_retryable() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let operator = Client::builder(&relay.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    admin_writes_made_all_the_same(&server, ErrorKind::Connection, |admin| {
        relay.stall_replies();
        let result = admin(&operator);
        relay.resume();
        result
    });
}

/// A revocation, then a force unlock, of a mutex held by one client and
/// waited for by another, each sent by `send` (given the call on an
/// operator client): each fails with `kind`, not retryable, though it was
/// made (the holder asked, then freed; the waiter has the lock).
fn admin_writes_made_all_the_same(
    server: &RedisServer,
    kind: ErrorKind,
    send: impl Fn(&dyn Fn(&Client) -> fairlock::Result<()>) -> fairlock::Result<()>,
) {
    let (holder, waiting) = (quiet_client(server), quiet_client(server));
    let name = "admin-made-all-the-same";
    let guard = holder.fair_mutex(name).unbound().lock().unwrap();
    let mutex = waiting.fair_mutex(name).unbound();
    let waiter = thread::spawn(move || mutex.lock());
    let queued = || holder.fair_mutex(name).queue_len().unwrap() == 1;
    assert!(wait_until(Duration::from_secs(5), queued));
    for admin in ["revoke", "force_unlock"] {
        let err = send(&|operator: &Client| match admin {
            "revoke" => operator.revoke(LockKind::Mutex, name).map(drop),
            _ => operator.force_unlock(LockKind::Mutex, name).map(drop),
        })
        .expect_err(admin);
        assert_eq!(err.kind(), kind, "{admin}: {err}");
        let made = match admin {
            "revoke" => wait_until(Duration::from_secs(2), || guard.is_revoked()),
            _ => wait_until(Duration::from_secs(2), || guard.is_lease_lost()),
        };
        assert!(made, "{admin}: made all the same");
        assert!(!err.is_retryable(), "{admin}: {err}");
    }
    let next = join_within(waiter, Duration::from_secs(5), "the waiter").unwrap();
    assert!(!next.is_lease_lost());
    drop(guard);
}

/// A mutex's re-entries share their hold's token and are asked with it:
/// one taken before the request and one taken after it (the same hold)
/// both say so.
#[test]
fn a_reentry_of_an_asked_hold_is_asked() {
    let server = RedisServer::start();
    let (holder, operator) = (quiet_client(&server), quiet_client(&server));
    let mutex = holder.fair_mutex("reentered");
    let first = mutex.lock().unwrap();
    let before = mutex.lock().unwrap();
    assert_eq!(operator.revoke(LockKind::Mutex, "reentered").unwrap(), 1);
    let asked = wait_until(Duration::from_secs(2), || first.is_revoked());
    assert!(asked && before.is_revoked());
    let after = mutex.lock().unwrap();
    assert_eq!(after.fencing_token(), first.fencing_token());
    assert!(after.is_revoked(), "a re-entry of the asked hold");
    drop((after, before, first));
}
