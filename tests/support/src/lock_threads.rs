//! Lock holders on threads of the test: a thread that locks a mutex (or
//! takes a hold of any kind) and keeps the guard until told to unlock.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{join_within, wait_until};

/// A thread that locks a mutex (or takes a hold of any kind) and keeps the
/// guard until told to unlock.
pub struct LockThread {
    granted: std::sync::mpsc::Receiver<Result<(Instant, u64), fairlock::Error>>,
    release: std::sync::mpsc::Sender<()>,
    handle: Option<JoinHandle<Result<Instant, String>>>,
}

impl LockThread {
    /// Spawns a thread that calls `mutex.lock()`.
    pub fn lock(mutex: fairlock::FairMutex) -> LockThread {
        LockThread::take(move || mutex.lock().map(fairlock::Guard::into_any))
    }

    /// Spawns a thread that takes a hold of any kind with `take` (a
    /// semaphore's `acquire`, a rwlock's `write`, ...).
    pub fn take(
        take: impl FnOnce() -> fairlock::Result<fairlock::AnyGuard> + Send + 'static,
    ) -> LockThread {
        let (granted_tx, granted) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let guard = match take() {
                Ok(guard) => guard,
                Err(err) => {
                    let message = format!("lock failed: {err:?}");
                    let _ = granted_tx.send(Err(err));
                    return Err(message);
                }
            };
            let _ = granted_tx.send(Ok((Instant::now(), guard.fencing_token())));
            let _ = release_rx.recv_timeout(Duration::from_secs(60));
            let at = Instant::now();
            guard
                .unlock()
                .map(|()| at)
                .map_err(|err| format!("{err:?}"))
        });
        LockThread {
            granted,
            release,
            handle: Some(handle),
        }
    }

    /// Waits for the grant: (when, token). Panics on timeout or error.
    pub fn granted_within(&self, timeout: Duration, what: &str) -> (Instant, u64) {
        match self.granted.recv_timeout(timeout) {
            Ok(Ok(grant)) => grant,
            Ok(Err(err)) => panic!("{what}: lock failed: {err:?}"),
            Err(_) => panic!("{what} was not granted within {timeout:?}"),
        }
    }

    /// True if granted within `timeout` (the grant is consumed).
    pub fn is_granted_within(&self, timeout: Duration) -> bool {
        matches!(self.granted.recv_timeout(timeout), Ok(Ok(_)))
    }

    /// Tells the thread to unlock; returns when it started to, once it did.
    pub fn release(mut self, what: &str) -> Instant {
        let _ = self.release.send(());
        let handle = self.handle.take().unwrap();
        join_within(handle, Duration::from_secs(10), what)
            .unwrap_or_else(|err| panic!("{what} failed to unlock: {err}"))
    }
}

impl Drop for LockThread {
    fn drop(&mut self) {
        let _ = self.release.send(());
        if let Some(handle) = self.handle.take() {
            // Bounded: the thread is either blocked in lock() on a live
            // client (then it gets the lock or an error) or about to unlock.
            let _ = wait_until(Duration::from_secs(10), || handle.is_finished());
        }
    }
}

/// Hands the lock of `guard` (a hold of `holder`) to a thread of another
/// client waiting on `next`, the same name: waits until that waiter is
/// queued, unlocks, waits for its grant and has it release. Returns the
/// handoff time (unlock to grant) and the waiter's fencing token, which
/// must be above the guard's. Panics, naming `what`, when the waiter is not
/// queued within 5 s or not granted within `within`.
pub fn hand_over(
    guard: fairlock::FairMutexGuard,
    holder: &fairlock::FairMutex,
    next: fairlock::FairMutex,
    within: Duration,
    what: &str,
) -> (Duration, u64) {
    let held_token = guard.fencing_token();
    let waiter = LockThread::lock(next);
    assert!(
        wait_until(Duration::from_secs(5), || holder.queue_len().unwrap() == 1),
        "{what}: the waiter never queued"
    );
    let released = Instant::now();
    guard.unlock().unwrap();
    let (granted, token) = waiter.granted_within(within, what);
    waiter.release(what);
    assert!(
        token > held_token,
        "{what}: token {token} after {held_token}"
    );
    (granted.saturating_duration_since(released), token)
}
