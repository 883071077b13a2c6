//! `WaitCanceller`: ends blocked waits from another thread.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::machinery::caller::waiters::Waiter;

/// Ends waits from another thread: a signal-handling thread, a shutdown
/// path. Any [`Wait`](crate::Wait) takes one
/// ([`Wait::cancelled_by`](crate::Wait::cancelled_by)), so every request of
/// every primitive can be cancelled, with or without a deadline beside it
/// (a service's wait usually has both, and the two end it the same way).
/// Such a wait returns `Ok(None)` soon after [`cancel`](Self::cancel),
/// having left the queue as a timed-out `try_lock_for` does (a lock
/// handed over to it in that instant goes on to the next waiter): at once from
/// its sleep, and once its request is over when one is in flight (a poll
/// that a stalled server holds fails at the command timeout; a lock that
/// request took is given back). A first request with no reply fails the
/// call then (`Connection`), as it does a wait whose deadline passed
/// meanwhile: nothing is known of the lock, and what the request queued or
/// took is given back once Redis answers. Cancelling is
/// final: a later wait with the same canceller does not wait, it only
/// takes the lock if that needs no waiting, as
/// [`FairMutex::try_lock`](crate::FairMutex::try_lock): a loop that takes
/// the lock until a shutdown checks [`is_cancelled`](Self::is_cancelled)
/// (below), as one that stops only on `None` goes on taking a lock nobody
/// else asks for. One canceller may end many waits, on any primitives, at
/// once. Cheap to clone; `Send + Sync`. Not async-signal-safe, as nothing
/// in fairlock is: call `cancel` on a thread that receives the signal
/// (signal-hook's `Signals` iterator, `sigwait`), never inside a signal
/// handler, where it deadlocks a thread the signal interrupted while that
/// thread held the canceller (`is_cancelled`, a wait starting).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let shutdown = fairlock::WaitCanceller::new();
/// let worker = {
///     let (mutex, shutdown) = (client.fair_mutex("nightly-report"), shutdown.clone());
///     std::thread::spawn(move || -> fairlock::Result<()> {
///         let wait = fairlock::Wait::forever().cancelled_by(&shutdown);
///         while !shutdown.is_cancelled() {
///             let Some(guard) = mutex.lock_with(wait.clone())? else {
///                 break; // cancelled while queued: out of the queue
///             };
///             // ... one job under the lock ...
///             drop(guard);
///         }
///         Ok(())
///     })
/// };
/// shutdown.cancel(); // e.g. on SIGTERM, from the thread that waits for it
/// worker.join().expect("worker")?;
/// # Ok(()) }
/// ```
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
    ///
    /// ```
    /// let cancel = fairlock::WaitCanceller::new();
    /// assert!(!cancel.is_cancelled());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends every wait using this canceller, now or later.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone();
    /// std::thread::spawn(move || {
    ///     std::thread::sleep(std::time::Duration::from_secs(1));
    ///     stopper.cancel(); // ends the wait below
    /// });
    /// let wait = fairlock::Wait::forever().cancelled_by(&cancel);
    /// let got = client.fair_mutex("nightly-report").lock_with(wait)?;
    /// println!("got the lock: {}", got.is_some());
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```
    /// let cancel = fairlock::WaitCanceller::new();
    /// cancel.clone().cancel();
    /// assert!(cancel.is_cancelled()); // clones share one state
    /// ```
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
