//! Acquisitions not bound to a thread (`unbound()`), for the mutex, the
//! semaphore and the reader-writer lock, against a real server: the guard
//! moves to another thread and is released there, and the next waiter gets
//! the lock at once (by the push message: its fallbacks are seconds away);
//! a thread that holds one and asks again waits for itself until its
//! timeout, leaving no queue entry; the watchdog renews
//! the hold while another thread has the guard; a lost lease reaches the
//! guard on whatever thread has it; status names the hold by its call, not
//! a thread.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Access, AnyGuard, Bound, Client, ErrorKind, LeaseEnd, Participant, Unbound, Wait};
use fairlock_test_support::*;

/// An unbound acquisition of `kind` on `name`, waiting up to `timeout`
/// (the support's one dispatch).
fn take(client: &Client, kind: Kind, name: &str, timeout: Duration) -> Option<AnyGuard<Unbound>> {
    fairlock_test_support::take::<Unbound>(client, kind, name, LeasePolicy::Client, timeout)
        .unwrap()
}

/// One attempt that never queues.
fn try_take(client: &Client, kind: Kind, name: &str) -> Option<AnyGuard<Unbound>> {
    let wait = Wait::not_at_all();
    fairlock_test_support::take::<Unbound>(client, kind, name, LeasePolicy::Client, wait).unwrap()
}

/// The lock's holders and its queue length, whatever its kind.
fn holders_and_queue(client: &Client, kind: Kind, name: &str) -> (Vec<Participant>, usize) {
    let status = client.status(kind.lock_kind(), name, 10).unwrap();
    let holders = status.holders.into_iter().map(|h| h.who).collect();
    (holders, status.queue_len)
}

#[test]
fn a_guard_moved_to_another_thread_is_released_there_and_the_next_waiter_gets_it_at_once() {
    let server = RedisServer::start();
    // Slow fallbacks, so that only the push message hands the waiter the
    // lock within the bound: the waiter's client first heartbeats (which
    // would find the lock handed over) min(lease, waiter timeout)/3 = 5 s
    // after it was built, and it polls when the holder's 15 s lease would
    // run out.
    let slow = Duration::from_secs(15);
    let first_heartbeat = slow / 3;
    let bound = Duration::from_secs(1);
    let slow_client = || {
        server
            .builder()
            .lease(slow)
            .waiter_timeout(slow)
            .build()
            .unwrap()
    };
    let holder = slow_client();
    for kind in Kind::EXCLUSIVE {
        let waiter_built = Instant::now();
        let waiter = slow_client();
        let name = format!("moved-{kind:?}");
        let guard = take(&holder, kind, &name, Duration::from_secs(5)).expect("free");
        assert!(guard.fencing_token() > 0);
        assert_eq!(guard.name(), name);
        assert_eq!(
            guard.access(),
            (kind == Kind::Write).then_some(Access::Write)
        );
        assert_eq!(guard.num_permits(), 1);
        // Status names the hold by its call: no thread owns it.
        let (owners, _) = holders_and_queue(&holder, kind, &name);
        assert_eq!(owners.len(), 1, "{kind:?}: {owners:?}");
        assert!(
            owners[0].owner().starts_with(&format!("{}:u", holder.id())),
            "{kind:?}: an unbound hold's owner is its call: {owners:?}"
        );
        assert_eq!(owners[0].client_id(), holder.id());
        assert_eq!(owners[0].thread(), None, "{kind:?}: no thread owns it");

        let (got_tx, got_rx) = mpsc::channel();
        let (waiter_client, waiter_name) = (waiter.clone(), name.clone());
        let queued = thread::spawn(move || {
            let got = take(&waiter_client, kind, &waiter_name, Duration::from_secs(20));
            got_tx.send(Instant::now()).unwrap();
            got.expect("the waiter gets the lock").unlock().unwrap();
        });
        assert!(
            wait_until(Duration::from_secs(5), || {
                holders_and_queue(&holder, kind, &name).1 == 1
            }),
            "{kind:?}: the waiter never queued"
        );

        let (guard_tx, guard_rx) = mpsc::channel::<AnyGuard<Unbound>>();
        let releaser = thread::spawn(move || {
            let guard = guard_rx.recv().unwrap();
            let released_at = Instant::now();
            guard.unlock().map(|()| released_at)
        });
        guard_tx.send(guard).unwrap();
        let released_at = join_within(releaser, Duration::from_secs(10), "the releasing thread")
            .expect("the release on another thread succeeds");
        let got_at = got_rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
            panic!("{kind:?}: the waiter did not get the lock within 10 s of the release: no push message?")
        });
        let handoff = got_at.saturating_duration_since(released_at);
        eprintln!(
            "unbound: {kind:?}: released on another thread, the waiter had it {:.1} ms later",
            ms(handoff)
        );
        join_within(queued, Duration::from_secs(10), "the waiter");
        // Neither fallback could hand the waiter the lock within the bound
        // of the release: the claim below is the push message's.
        assert!(
            released_at + bound < waiter_built + first_heartbeat,
            "{kind:?}: released {:?} after the waiter's client was built: too late to tell \
             the push message from its first heartbeat",
            released_at - waiter_built
        );
        assert!(
            handoff < bound,
            "{kind:?}: the next waiter got the lock {handoff:?} after the release: no push message?"
        );
    }
}

#[test]
fn a_thread_that_holds_an_unbound_guard_and_asks_again_waits_for_itself_until_its_timeout() {
    let server = RedisServer::start();
    let client = server.client();
    let timeout = Duration::from_millis(400);
    for kind in Kind::EXCLUSIVE {
        let name = format!("again-{kind:?}");
        let first = take(&client, kind, &name, Duration::from_secs(5)).expect("free");
        assert!(
            try_take(&client, kind, &name).is_none(),
            "{kind:?}: a second unbound try on the holding thread is refused"
        );
        let asked = Instant::now();
        let again = take(&client, kind, &name, timeout);
        let waited = asked.elapsed();
        assert!(again.is_none(), "{kind:?}: the thread waits for itself");
        assert!(
            waited >= timeout,
            "{kind:?}: it waited {waited:?}, less than its timeout"
        );
        // The thread-bound calls of the same thread are no owner of it
        // either (the mutex's and the rwlock's would re-enter their own).
        // (A read for the rwlock: it would re-enter the thread's write.)
        let asked = if kind == Kind::Write {
            Kind::Read
        } else {
            kind
        };
        let wait = Wait::not_at_all();
        let bound =
            fairlock_test_support::take::<Bound>(&client, asked, &name, LeasePolicy::Client, wait)
                .unwrap()
                .is_some();
        assert!(!bound, "{kind:?}: a bound call re-entered an unbound hold");
        let (owners, queued) = holders_and_queue(&client, kind, &name);
        assert_eq!(owners.len(), 1, "{kind:?}: {owners:?}");
        assert_eq!(queued, 0, "{kind:?}: the timed-out call left a queue entry");
        first.unlock().unwrap();
        let next = take(&client, kind, &name, Duration::from_secs(5));
        assert!(next.is_some(), "{kind:?}: free again once released");
    }
    // Reads share: an unbound read beside another of the same thread is
    // granted at once, as any reader's.
    let first = take(&client, Kind::Read, "again-read", Duration::from_secs(5)).unwrap();
    let second = try_take(&client, Kind::Read, "again-read").expect("reads share");
    assert!(second.fencing_token() > first.fencing_token());
    assert!(try_take(&client, Kind::Write, "again-read").is_none());
}

#[test]
fn the_watchdog_renews_an_unbound_hold_while_another_thread_has_its_guard() {
    let server = RedisServer::start();
    // Renewed every 200 ms: a loaded machine's scheduling delays stay well
    // inside it, while five leases still take four renewals or more.
    let lease = Duration::from_millis(600);
    let client = server.builder().lease(lease).build().unwrap();
    for kind in Kind::EXCLUSIVE {
        let name = format!("renewed-{kind:?}");
        let guard = take(&client, kind, &name, Duration::from_secs(5)).expect("free");
        let token = guard.fencing_token();
        let holding = thread::spawn(move || {
            // Five leases on a thread that did not take it.
            thread::sleep(5 * lease);
            let lost = guard.is_lease_lost();
            (lost, guard.unlock())
        });
        let (lost, unlocked) = join_within(holding, Duration::from_secs(10), "the holder");
        assert!(
            !lost,
            "{kind:?}: the lease was lost while another thread held it"
        );
        unlocked.unwrap_or_else(|err| panic!("{kind:?}: release after 5 leases: {err}"));
        let (owners, _) = holders_and_queue(&client, kind, &name);
        assert!(
            owners.is_empty(),
            "{kind:?}: still held after the release: {owners:?}"
        );
        let next = take(&client, kind, &name, Duration::from_secs(5)).unwrap();
        assert!(next.fencing_token() > token);
    }
}

#[test]
fn a_lost_lease_reaches_the_unbound_guard_on_the_thread_that_has_it() {
    let server = RedisServer::start();
    // Watchdog period: a third of min(lease, waiter timeout) = 100 ms.
    let lease = Duration::from_millis(300);
    let client = server.builder().lease(lease).build().unwrap();
    let operator = server.client();
    for kind in Kind::EXCLUSIVE {
        let name = format!("lost-{kind:?}");
        let guard = take(&client, kind, &name, Duration::from_secs(5)).expect("free");
        let (tx, rx) = mpsc::channel();
        let holding = thread::spawn(move || {
            tx.send(()).unwrap();
            let end = guard.lease_signal().wait();
            let heard = Instant::now();
            (end, heard, guard.is_lease_lost(), guard.unlock())
        });
        rx.recv().unwrap();
        let forced = Instant::now();
        let freed = operator.force_unlock(kind.lock_kind(), &name).unwrap();
        assert!(freed, "{kind:?}: the force unlock found the hold");
        let (end, heard, lost, unlocked) =
            join_within(holding, Duration::from_secs(10), "the holding thread");
        let delay = heard.saturating_duration_since(forced);
        eprintln!(
            "unbound: {kind:?}: the loss reached the other thread after {:.0} ms",
            ms(delay)
        );
        assert_eq!(end, LeaseEnd::Lost, "{kind:?}");
        assert!(lost, "{kind:?}: is_lease_lost on the holding thread");
        assert!(
            delay < Duration::from_secs(2),
            "{kind:?}: heard of the loss {delay:?} after it"
        );
        let err = unlocked.expect_err("a lost hold's release reports it");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{kind:?}: {err}");
    }
}
