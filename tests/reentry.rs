//! Re-entry of a mutex: the thread that holds it locks it again at once
//! and gets a second guard with the same fencing token; the hold count
//! counts the guards, the lock stays held until the last goes, and another
//! thread of the same client is another owner that waits.

use std::time::{Duration, Instant};

use fairlock_test_support::*;

#[test]
fn a_second_lock_of_the_holding_thread_gives_a_guard_with_the_same_token() {
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client.fair_mutex("reentrant");
    let outer = mutex.lock().unwrap();
    let started = Instant::now();
    let inner = mutex.lock().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(mutex.hold_count().unwrap(), 2);
    let third = mutex.try_lock().unwrap().expect("try_lock re-enters too");
    assert_eq!(mutex.hold_count().unwrap(), 3);
    drop(third);
    inner.unlock().unwrap();
    assert!(mutex.is_locked().unwrap(), "still held by the outer guard");
    assert!(mutex.is_held_by_current_thread().unwrap());

    // Another thread of the same client is another owner: it must wait.
    let other = mutex.clone();
    let blocked = std::thread::spawn(move || other.try_lock().unwrap().is_none())
        .join()
        .unwrap();
    assert!(blocked, "another thread must not share the hold");

    outer.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap());
    assert_eq!(mutex.hold_count().unwrap(), 0);
    assert_eq!(mutex.remaining_lease().unwrap(), None);
}
