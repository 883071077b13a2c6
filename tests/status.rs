//! A lock's status: its holder (who, hold count, fencing token, lease
//! left), its queue length, its last token, and its first waiters in
//! arrival order with their liveness left.

use std::time::Duration;

use fairlock::{Client, LockKind};
use fairlock_test_support::*;

#[test]
fn lists_the_holder_and_the_queue_in_order() {
    let server = RedisServer::start();
    let holder_client = server.client();
    let m = holder_client.fair_mutex("status");
    let free = m.status(10).unwrap();
    assert_eq!(free.holder(), None);
    assert!(free.waiters.is_empty());
    assert_eq!(free.queue_len, 0);

    let guard = m.lock().unwrap();
    let _again = m.lock().unwrap();
    let clients: Vec<Client> = (0..3).map(|_| server.client()).collect();
    let waiters: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let w = c.fair_mutex("status");
            let handle = std::thread::spawn(move || w.lock().map(|g| g.fencing_token()));
            assert!(wait_until(Duration::from_secs(5), || m
                .queue_len()
                .unwrap()
                == i + 1));
            handle
        })
        .collect();
    let status = m.status(2).unwrap();
    let holder = status.holder().cloned().expect("held");
    assert_eq!(holder.who.client_id(), holder_client.id());
    assert!(holder.who.thread().is_some());
    assert_eq!(holder.hold_count, 2);
    assert_eq!(holder.fencing_token, guard.fencing_token());
    assert!(holder.remaining_lease.unwrap() <= Duration::from_secs(2));
    assert_eq!(status.queue_len, 3);
    assert_eq!(status.last_fencing_token, Some(guard.fencing_token()));
    let listed: Vec<&str> = status.waiters.iter().map(|w| w.who.client_id()).collect();
    assert_eq!(
        listed,
        vec![clients[0].id(), clients[1].id()],
        "first two, in order"
    );
    for w in &status.waiters {
        let left = w.liveness_left.expect("live");
        assert!(
            left > Duration::ZERO && left <= Duration::from_secs(1),
            "{left:?}"
        );
    }
    drop(_again);
    drop(guard);
    for handle in waiters {
        handle.join().unwrap().unwrap();
    }
}

/// `status(max)` lists at most `max` holders, as it lists waiters, for
/// every kind: the mutex's and an election's one holder was listed by
/// `status(0)` (a semaphore's and a rwlock's were not), though the totals
/// are what `status(0)` is for.
#[test]
fn status_lists_at_most_max_holders_of_every_kind() {
    let server = RedisServer::start();
    let client = server.client();
    let holds = [
        client
            .fair_mutex("most")
            .unbound()
            .lock()
            .unwrap()
            .into_any(),
        client
            .fair_semaphore("most", 2)
            .unbound()
            .acquire()
            .unwrap()
            .into_any(),
        client
            .fair_rwlock("most")
            .unbound()
            .read()
            .unwrap()
            .into_any(),
        client.election("most").campaign().unwrap().into_any(),
    ];
    for kind in [
        LockKind::Mutex,
        LockKind::Semaphore,
        LockKind::RwLock,
        LockKind::Election,
    ] {
        let none = client.status(kind, "most", 0).unwrap();
        assert_eq!((none.holders.len(), none.holder_count), (0, 1), "{kind:?}");
        let one = client.status(kind, "most", 1).unwrap();
        assert_eq!((one.holders.len(), one.holder_count), (1, 1), "{kind:?}");
    }
    drop(holds);
}
