//! Re-entry of a mutex: the thread that holds it locks it again at once
//! and gets a second guard with the same fencing token; the hold count
//! counts the guards, the lock stays held until the last goes, and another
//! thread of the same client is another owner that waits. A thread's owner
//! id is its own to the end, its thread-locals' destructors included.

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

/// A thread whose guard was counted lost (a fixed lease counted with a
/// drift allowance of 20%, so Redis holds it a fifth of the lease longer)
/// and that locks again before dropping it gets a new, live hold with a
/// new token, not a second guard of the hold it counted lost. (Before, the
/// lock call re-entered that hold: it returned a guard already lost, with
/// the old token, and grew the lease at Redis of a hold both guards said
/// was gone.)
#[test]
fn a_lock_of_a_thread_whose_guard_was_counted_lost_takes_a_new_hold() {
    let server = RedisServer::start();
    let client = (server.builder())
        .clock_drift(0.2, Duration::ZERO)
        .build()
        .unwrap();
    let lease = Duration::from_secs(2);
    let mutex = client
        .fair_mutex("reentry-after-loss")
        .with_fixed_lease(lease);
    let first = mutex.lock().unwrap();
    assert!(wait_until(lease, || first.is_lease_lost()));
    let left = mutex.remaining_lease().unwrap();
    let again = mutex.lock().unwrap();
    let status = mutex.status(1).unwrap();
    let held = status.holder().map(|holder| holder.fencing_token);
    eprintln!(
        "counted lost with {left:?} left at redis; locked again: token {} (the lost one {}), \
         lost={}, redis holds token {held:?}",
        again.fencing_token(),
        first.fencing_token(),
        again.is_lease_lost()
    );
    assert!(left.is_some(), "redis had let go already: {left:?}");
    assert!(!again.is_lease_lost(), "returned a guard already lost");
    assert!(again.fencing_token() > first.fencing_token());
    assert_eq!(held, Some(again.fencing_token()));
    // The lost guard's unlock leaves the new hold alone.
    let err = first.unlock().unwrap_err();
    assert_eq!(err.kind(), fairlock::ErrorKind::LeaseLost, "{err}");
    assert_eq!(mutex.hold_count().unwrap(), 1);
    again.unlock().unwrap();
}

/// A thread-local's destructor that locks a mutex as its thread ends (a
/// per-thread buffer flushed under the lock): it gets the lock and releases
/// it. Destructors run in the reverse order of the thread-locals' first
/// use, so this one, used before the thread's first lock, runs after
/// fairlock's own (its thread's owner id) is gone. (Before, the lock call
/// panicked there, "cannot access a Thread Local Storage value during or
/// after destruction", which a thread-local's destructor turns into an
/// abort of the process; the destructor here catches it to report it.)
#[test]
fn a_thread_locals_destructor_locks_as_its_thread_ends() {
    type Locked = std::thread::Result<fairlock::Result<u64>>;
    struct AtExit(fairlock::FairMutex, std::sync::mpsc::Sender<Locked>);
    impl Drop for AtExit {
        fn drop(&mut self) {
            let lock = || self.0.lock().map(|guard| guard.fencing_token());
            let _ = self
                .1
                .send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(lock)));
        }
    }
    thread_local! {
        static AT_EXIT: std::cell::RefCell<Option<AtExit>> = const { std::cell::RefCell::new(None) };
    }
    let server = RedisServer::start();
    let mutex = server.client().fair_mutex("at-thread-exit");
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let at_exit = AtExit(mutex.clone(), locked_tx);
    let (first, thread_mutex) = (mutex.lock().unwrap().fencing_token(), mutex.clone());
    let thread = std::thread::spawn(move || {
        AT_EXIT.with_borrow_mut(|slot| *slot = Some(at_exit));
        thread_mutex.lock().unwrap().unlock().unwrap();
    });
    let locked = locked
        .recv_timeout(Duration::from_secs(10))
        .expect("the destructor ran");
    join_within(thread, Duration::from_secs(10), "the ending thread");
    let token = (locked.expect("the destructor's lock panicked")).unwrap();
    assert!(token > first, "token {token} after {first}");
    assert!(!mutex.is_locked().unwrap());
}
