//! `FairMutexGuard`: proof of holding a lock; releases it when dropped.

use std::marker::PhantomData;

use crate::handles::call_hold::{guard_methods, CallHold};
use crate::handles::mutex::FairMutex;

/// Holds the lock until [`unlock`](Self::unlock)ed or dropped.
///
/// Dropping releases the hold best-effort (errors are logged, never
/// panicked on); `unlock` reports what Drop cannot. With re-entry, the lock
/// is free only when every guard of the thread is gone.
///
/// The guard is `Sync` but not `Send`: holds are re-entrant per thread, so
/// a guard stays on the thread that took it, like `std::sync::MutexGuard`.
///
/// ```compile_fail
/// fn assert_send<T: Send>() {}
/// assert_send::<fairlock::FairMutexGuard>();
/// ```
#[must_use = "if unused the lock is released immediately"]
pub struct FairMutexGuard {
    mutex: FairMutex,
    /// The hold, released once through the guard core every guard shares.
    hold: CallHold,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl FairMutexGuard {
    pub(crate) fn new(mutex: FairMutex, hold: CallHold) -> Self {
        FairMutexGuard {
            mutex,
            hold,
            _not_send: PhantomData,
        }
    }

    /// The mutex this guard holds.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// assert_eq!(guard.mutex().name(), "nightly-report");
    /// println!("{} waiting behind us", guard.mutex().queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn mutex(&self) -> &FairMutex {
        &self.mutex
    }
}

guard_methods!(
    FairMutexGuard,
    "hold",
    "client.fair_mutex(\"nightly-report\").lock()",
    unlock
);
