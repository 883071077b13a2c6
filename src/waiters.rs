//! Threads blocked in `lock()`/`try_lock_for()`, and how they are woken.
//!
//! A waiting thread parks on its own [`Waiter`] (a parking_lot mutex and
//! condvar) and holds no connection. It is woken by the subscriber (the lock
//! was handed over, or it became head of the queue), by the watchdog's
//! heartbeat (same news, as a fallback for lost messages) or by its own poll
//! deadline (the head polls when the holder's lease would run out).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::keys::LockKeys;

/// The lock was handed to a waiter while it slept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) token: u64,
    /// When the granted lease runs out, as far as this process can tell.
    pub(crate) expires_at: Instant,
}

/// Why [`Waiter::sleep`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The lock is ours; no further round trip is needed.
    Granted(Grant),
    /// Time to ask Redis again (poll deadline, lost place, missed messages).
    Poll,
    /// The caller's own deadline passed.
    TimedOut,
}

#[derive(Debug, Default)]
struct WaitState {
    granted: Option<Grant>,
    poll_at: Option<Instant>,
    repoll: bool,
    cancelled: bool,
}

/// One blocked call waiting for one lock.
pub(crate) struct Waiter {
    /// Unique inside the client; wake messages name it.
    pub(crate) id: u64,
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) owner: String,
    /// Lease to keep if the heartbeat finds the lock was handed over;
    /// 0 for a fixed lease (the watchdog must not extend it).
    pub(crate) renew_lease_ms: u64,
    state: Mutex<WaitState>,
    wakeup: Condvar,
}

impl Waiter {
    pub(crate) fn new(id: u64, keys: Arc<LockKeys>, owner: String, renew_lease_ms: u64) -> Self {
        Waiter {
            id,
            keys,
            owner,
            renew_lease_ms,
            state: Mutex::new(WaitState::default()),
            wakeup: Condvar::new(),
        }
    }

    /// Records that the lock was handed to this waiter and wakes it.
    pub(crate) fn grant(&self, grant: Grant) {
        self.state.lock().granted = Some(grant);
        self.wakeup.notify_one();
    }

    /// Asks the waiter to poll Redis no later than `at`.
    pub(crate) fn poll_by(&self, at: Instant) {
        let mut state = self.state.lock();
        if state.poll_at.is_none_or(|current| at < current) {
            state.poll_at = Some(at);
            drop(state);
            self.wakeup.notify_one();
        }
    }

    /// Asks the waiter to poll Redis at once.
    pub(crate) fn repoll(&self) {
        self.state.lock().repoll = true;
        self.wakeup.notify_one();
    }

    /// Ends the wait as if its deadline had passed (see `WaitCanceller`).
    pub(crate) fn cancel(&self) {
        self.state.lock().cancelled = true;
        self.wakeup.notify_one();
    }

    /// Sets the next poll from an acquire reply: the head of the queue polls
    /// when the holder's lease would run out; others wait to be told. A
    /// poll time set meanwhile by a message is kept: that message came from
    /// a script that ran after this reply's.
    pub(crate) fn schedule_after_reply(&self, position: Option<u64>, pttl_ms: i64) {
        if position == Some(0) {
            self.poll_by(poll_time(pttl_ms));
        }
    }

    /// Sleeps until granted, asked to poll, or `deadline`.
    pub(crate) fn sleep(&self, deadline: Option<Instant>) -> Wake {
        let mut state = self.state.lock();
        loop {
            if let Some(grant) = state.granted.take() {
                return Wake::Granted(grant);
            }
            if std::mem::take(&mut state.repoll) {
                return Wake::Poll;
            }
            let now = Instant::now();
            if state.poll_at.is_some_and(|at| at <= now) {
                state.poll_at = None;
                return Wake::Poll;
            }
            if state.cancelled || deadline.is_some_and(|at| at <= now) {
                return Wake::TimedOut;
            }
            match earliest(state.poll_at, deadline) {
                Some(at) => {
                    self.wakeup.wait_until(&mut state, at);
                }
                None => self.wakeup.wait(&mut state),
            }
        }
    }
}

/// When the head of the queue should poll, given the holder's lease left
/// (`pttl_ms` < 0: no lease to wait for, poll now). One extra millisecond
/// lets the server's expiry pass first.
pub(crate) fn poll_time(pttl_ms: i64) -> Instant {
    let wait = u64::try_from(pttl_ms).map_or(0, |ms| ms + 1);
    Instant::now() + Duration::from_millis(wait)
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Every waiter of one client, by wait id.
#[derive(Default)]
pub(crate) struct Waiters {
    by_id: Mutex<HashMap<u64, Arc<Waiter>>>,
}

impl Waiters {
    pub(crate) fn insert(&self, waiter: Arc<Waiter>) {
        self.by_id.lock().insert(waiter.id, waiter);
    }

    pub(crate) fn remove(&self, id: u64) {
        self.by_id.lock().remove(&id);
    }

    pub(crate) fn get(&self, id: u64) -> Option<Arc<Waiter>> {
        self.by_id.lock().get(&id).cloned()
    }

    /// Wakes every waiter to poll: messages may have been missed.
    pub(crate) fn repoll_all(&self) {
        let all: Vec<_> = self.by_id.lock().values().cloned().collect();
        for waiter in all {
            waiter.repoll();
        }
    }

    /// Waiters grouped by lock (by the lock key), for one heartbeat per lock.
    pub(crate) fn by_lock(&self) -> Vec<Vec<Arc<Waiter>>> {
        let mut groups: HashMap<String, Vec<Arc<Waiter>>> = HashMap::new();
        for waiter in self.by_id.lock().values() {
            groups
                .entry(waiter.keys.lock().to_owned())
                .or_default()
                .push(Arc::clone(waiter));
        }
        groups.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter() -> Arc<Waiter> {
        let keys = Arc::new(LockKeys::new("p", "n").unwrap());
        Arc::new(Waiter::new(1, keys, "c:1".into(), 0))
    }

    #[test]
    fn a_grant_from_another_thread_wakes_the_sleeper() {
        let w = waiter();
        let granter = Arc::clone(&w);
        let handle = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            granter.grant(Grant {
                token: 7,
                expires_at: Instant::now(),
            });
        });
        let woke = w.sleep(Some(Instant::now() + Duration::from_secs(10)));
        handle.join().unwrap();
        assert!(matches!(woke, Wake::Granted(Grant { token: 7, .. })));
    }

    #[test]
    fn sleep_honours_the_deadline_and_the_poll_time() {
        let w = waiter();
        let start = Instant::now();
        assert_eq!(
            w.sleep(Some(start + Duration::from_millis(30))),
            Wake::TimedOut
        );
        assert!(start.elapsed() >= Duration::from_millis(30));
        w.schedule_after_reply(Some(0), 20);
        assert_eq!(
            w.sleep(Some(Instant::now() + Duration::from_secs(10))),
            Wake::Poll
        );
        w.repoll();
        assert_eq!(w.sleep(None), Wake::Poll);
    }
}
