//! `WaitCanceller`: ends blocked waits from another thread.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::machinery::waiters::Waiter;

/// Ends waits from another thread: a signal-handling thread, a shutdown
/// path. A wait given to [`FairMutex::lock_cancellable`](crate::FairMutex::lock_cancellable)
/// returns `Ok(None)` soon after [`cancel`](Self::cancel), having left the
/// queue as a timed-out `try_lock_for` does (or returns the guard, if the
/// lock was handed over in that instant). Cancelling is final: a later
/// wait with the same canceller does not wait, it only takes the lock if
/// that needs no waiting, as [`FairMutex::try_lock`](crate::FairMutex::try_lock).
/// Cheap to clone; `Send + Sync`.
#[derive(Clone, Default)]
pub struct WaitCanceller {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    cancelled: bool,
    waiters: Vec<Weak<Waiter>>,
}

impl WaitCanceller {
    /// A canceller not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends every wait using this canceller, now or later.
    pub fn cancel(&self) {
        let waiters = {
            let mut inner = self.inner.lock();
            inner.cancelled = true;
            std::mem::take(&mut inner.waiters)
        };
        for waiter in waiters.iter().filter_map(Weak::upgrade) {
            waiter.cancel();
        }
    }

    /// True once [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.lock().cancelled
    }

    pub(crate) fn watch(&self, waiter: &Arc<Waiter>) {
        let mut inner = self.inner.lock();
        if inner.cancelled {
            waiter.cancel();
        } else {
            inner.waiters.retain(|w| w.strong_count() > 0);
            inner.waiters.push(Arc::downgrade(waiter));
        }
    }
}

impl std::fmt::Debug for WaitCanceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitCanceller")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}
