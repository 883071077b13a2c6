//! Who holds it: a client built with an identity is named by it in every
//! status, for each kind's holders and waiters, thread-bound or unbound;
//! a client without one shows as before (no identity, its thread); an
//! identity changes nothing else (re-entry, release, handoff).

use std::thread;
use std::time::Duration;

use fairlock::{Bound, Client, Participant, Unbound, Wait};
use fairlock_test_support::*;

fn named(server: &RedisServer, identity: &str) -> Client {
    server.builder().identity(identity).build().unwrap()
}

/// The holders and the queued waiters of `name`'s lock of `kind`.
fn participants(observer: &Client, kind: Kind, name: &str) -> (Vec<Participant>, Vec<Participant>) {
    let s = observer.status(kind.lock_kind(), name, 10).unwrap();
    let holders = s.holders.into_iter().map(|h| h.who).collect();
    (holders, s.waiters.into_iter().map(|w| w.who).collect())
}

#[test]
fn every_status_names_holders_and_waiters_by_their_clients_identity() {
    let server = RedisServer::start();
    let web = named(&server, "web-3/worker-7");
    let cron = named(&server, "cron@host.example:9");
    let anonymous = server.client();
    let observer = server.client();
    // What the holder takes, and what its waiters wait for.
    for (kind, held_as, waited_as) in [
        ("mutex", Kind::Mutex, Kind::Mutex),
        ("semaphore", Kind::Semaphore, Kind::Semaphore),
        ("rwlock", Kind::Write, Kind::Read),
    ] {
        let name = format!("who-{kind}");
        // web holds (thread-bound), cron waits (unbound), anonymous waits.
        let held = take::<Bound>(&web, held_as, &name, LeasePolicy::Client, Wait::forever())
            .unwrap()
            .expect("free");
        let waiters: Vec<_> = [(cron.clone(), true), (anonymous.clone(), false)]
            .into_iter()
            .map(|(client, unbound)| {
                let name = name.clone();
                let before = participants(&observer, waited_as, &name).1.len();
                let waiter_name = name.clone();
                let waiter = thread::spawn(move || {
                    let t = Duration::from_secs(20);
                    let name = waiter_name;
                    let got = if unbound {
                        take::<Unbound>(&client, waited_as, &name, LeasePolicy::Client, t)
                            .map(|g| g.is_some())
                    } else {
                        take::<Bound>(&client, waited_as, &name, LeasePolicy::Client, t)
                            .map(|g| g.is_some())
                    };
                    got.unwrap()
                });
                assert!(
                    wait_until(Duration::from_secs(5), || {
                        participants(&observer, waited_as, &name).1.len() == before + 1
                    }),
                    "{kind}: the waiter never queued"
                );
                waiter
            })
            .collect();

        let (holders, queued) = participants(&observer, held_as, &name);
        assert_eq!(holders.len(), 1, "{kind}: {holders:?}");
        assert_eq!(holders[0].identity(), Some("web-3/worker-7"), "{kind}");
        assert_eq!(holders[0].client_id(), web.id(), "{kind}");
        assert!(holders[0].thread().is_some(), "{kind}: a thread-bound hold");
        assert_eq!(queued.len(), 2, "{kind}: {queued:?}");
        assert_eq!(queued[0].identity(), Some("cron@host.example:9"), "{kind}");
        assert_eq!(queued[0].client_id(), cron.id(), "{kind}");
        assert_eq!(queued[0].thread(), None, "{kind}: an unbound call");
        assert_eq!(queued[1].identity(), None, "{kind}: no identity");
        assert_eq!(queued[1].client_id(), anonymous.id(), "{kind}");
        assert!(queued[1].thread().is_some(), "{kind}");

        drop(held);
        for waiter in waiters {
            assert!(
                join_within(waiter, Duration::from_secs(30), "a waiter"),
                "{kind}"
            );
        }
    }
}

#[test]
fn an_identity_changes_nothing_else_re_entry_and_release_work_as_before() {
    let server = RedisServer::start();
    let client = named(&server, "svc:a/b@c+d_e.f-g");
    let mutex = client.fair_mutex("reentrant-named");
    let outer = mutex.lock().unwrap();
    let inner = mutex.lock().unwrap();
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(mutex.hold_count().unwrap(), 2);
    assert!(mutex.is_held_by_current_thread().unwrap());
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap());
    let rwlock = client.fair_rwlock("reentrant-named");
    let write = rwlock.write().unwrap();
    let read = rwlock.read().unwrap();
    drop(read);
    write.unlock().unwrap();
    let permit = client
        .fair_semaphore("reentrant-named", 2)
        .acquire_many(2)
        .unwrap();
    assert_eq!(permit.num_permits(), 2);
    permit.unlock().unwrap();
}
