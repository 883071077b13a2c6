//! `FairMutexGuard`: proof of holding a lock; releases it when dropped.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::acquisition::Acquired;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::Hold;
use crate::lease_signal::LeaseSignal;
use crate::mutex::FairMutex;
use crate::protocol::{QueueEntry, Release, ReleaseReply};

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
    hold: Arc<Hold>,
    /// Id of the acquire call that made this guard (its wait id); the
    /// release names it, so a release delivered twice counts once.
    call: u64,
    /// That call's lease, fixed or renewed (for a give-back of the call).
    lease: Duration,
    fixed: bool,
    /// How long the acquire call that made this guard waited.
    waited: Duration,
    released: bool,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl FairMutexGuard {
    pub(crate) fn new(mutex: FairMutex, got: Acquired) -> Self {
        FairMutexGuard {
            mutex,
            hold: got.hold,
            call: got.call,
            lease: got.lease,
            fixed: got.fixed,
            waited: got.waited,
            released: false,
            _not_send: PhantomData,
        }
    }

    /// The fencing token of this hold: larger than the token of every
    /// earlier acquisition of this name, by any client, even across a Redis
    /// restart that lost its data. Pass it to the resource you protect and
    /// have it reject writes carrying a smaller token than one it has seen.
    /// Re-entrant guards share their outer guard's token.
    pub fn fencing_token(&self) -> u64 {
        self.hold.token
    }

    /// True once the hold is known to be gone: the watchdog found the lock
    /// no longer ours (expired, force-unlocked), or no renewal confirmed the
    /// lease before it ran out, or a fixed lease ran out. Whatever this
    /// says, only a fencing token makes a protected write safe.
    pub fn is_lease_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// A signal another thread can block on to learn the moment this
    /// hold's lease is lost (or that the guard was released first). See
    /// [`LeaseSignal`] for when it fires.
    pub fn lease_signal(&self) -> LeaseSignal {
        LeaseSignal::new(Arc::clone(&self.hold))
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
        self.waited
    }

    /// The mutex this guard holds.
    pub fn mutex(&self) -> &FairMutex {
        &self.mutex
    }

    /// Releases the hold and reports how that went. At the last hold of the
    /// thread the lock goes straight to the next live waiter.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] when the lock was no longer this hold's
    /// (nothing was changed: another holder's lock is never touched);
    /// [`ErrorKind::Connection`] when Redis could not be reached (the
    /// client's watchdog then gives the hold back as soon as Redis answers,
    /// or the lease runs out first); with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`] when the release happened on the master
    /// but too few replicas acknowledged it (after a failover the lock may
    /// then stay taken until this hold's lease runs out).
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    /// The acquire call that made this guard, as a give-back names it.
    fn call_entry(&self) -> QueueEntry<'_> {
        QueueEntry {
            owner: &self.hold.owner,
            wait_id: self.call,
            lease: self.lease,
            fixed: self.fixed,
            access: None,
        }
    }

    fn release(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let shared = &self.mutex.client().shared;
        shared.holds.unregister(&self.hold);
        let op = Release {
            owner: &self.hold.owner,
            token: self.hold.token,
            call: self.call,
        };
        let (reply, shortfall) = shared.call_write(&self.hold.keys, &op).inspect_err(|_| {
            // Not sent, or its reply lost: the watchdog gives this
            // guard's count back once Redis answers, so the lock does
            // not wait for its lease to run out.
            shared.give_back_later(&self.hold.keys, self.call_entry());
        })?;
        match reply {
            ReleaseReply::Left(_) => shortfall.map_or(Ok(()), Err),
            ReleaseReply::HandedOver(next) => {
                // A waiter of this client wakes now rather than when its
                // handoff message arrives (which then finds it gone).
                if shared.is_own(&next.owner) {
                    shared.grant_waiter(next.wait_id, next.token, next.ttl_ms);
                }
                shortfall.map_or(Ok(()), Err)
            }
            ReleaseReply::NotHeld => {
                self.hold.mark_lost();
                Err(Error::new(
                    ErrorKind::LeaseLost,
                    format!(
                        "lock {:?} was no longer held by this guard (token {})",
                        self.mutex.name(),
                        self.hold.token
                    ),
                ))
            }
        }
    }
}

impl Drop for FairMutexGuard {
    fn drop(&mut self) {
        if let Err(err) = self.release() {
            log::warn!(
                "fairlock: releasing {:?} on drop failed: {err}",
                self.mutex.name()
            );
        }
    }
}

impl std::fmt::Debug for FairMutexGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairMutexGuard")
            .field("name", &self.mutex.name())
            .field("fencing_token", &self.hold.token)
            .finish_non_exhaustive()
    }
}
