//! `FairMutexGuard`: proof of holding a lock; releases it when dropped.

use std::marker::PhantomData;
use std::time::Duration;

use crate::error::Result;
use crate::handles::call_hold::CallHold;
use crate::handles::lease_signal::LeaseSignal;
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

    /// The fencing token of this hold: larger than the token of every
    /// earlier acquisition of this name, by any client, even across a Redis
    /// restart that lost its data. Pass it to the resource you protect and
    /// have it reject writes carrying a smaller token than one it has seen.
    /// Re-entrant guards share their outer guard's token.
    pub fn fencing_token(&self) -> u64 {
        self.hold.fencing_token()
    }

    /// True once the hold is known to be gone: the watchdog found the lock
    /// no longer ours (expired, force-unlocked), or no renewal confirmed the
    /// lease before it ran out, or a fixed lease ran out. Whatever this
    /// says, only a fencing token makes a protected write safe.
    pub fn is_lease_lost(&self) -> bool {
        self.hold.is_lease_lost()
    }

    /// A signal another thread can block on to learn the moment this
    /// hold's lease is lost (or that the guard was released first). See
    /// [`LeaseSignal`] for when it fires.
    pub fn lease_signal(&self) -> LeaseSignal {
        self.hold.lease_signal()
    }

    /// How long the `lock()` (or `try_lock*`) call that made this guard
    /// waited, from its start to its return: its queueing time plus its
    /// round trips. A re-entrant guard's own call, not its outer one's.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// println!("waited {:?} for the lock", guard.waited());
    /// # Ok(()) }
    /// ```
    pub fn waited(&self) -> Duration {
        self.hold.waited()
    }

    /// The mutex this guard holds.
    pub fn mutex(&self) -> &FairMutex {
        &self.mutex
    }

    /// Releases the hold and reports how that went. At the last hold of the
    /// thread the lock goes straight to the next live waiter.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the lock was no longer this hold's
    /// (nothing was changed: another holder's lock is never touched);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis could not be reached (the
    /// client's watchdog then gives the hold back as soon as Redis answers,
    /// or the lease runs out first); with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) when the release happened on the master
    /// but too few replicas acknowledged it (after a failover the lock may
    /// then stay taken until this hold's lease runs out).
    pub fn unlock(mut self) -> Result<()> {
        self.hold.release()
    }
}

impl std::fmt::Debug for FairMutexGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairMutexGuard")
            .field("name", &self.mutex.name())
            .field("fencing_token", &self.fencing_token())
            .finish_non_exhaustive()
    }
}
