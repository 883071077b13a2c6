//! A hold's two signals to other threads, each given by every guard of
//! every primitive, both waiting on the one hold and its condvar:
//! [`LeaseSignal`], what another thread blocks on to learn that a hold's
//! lease is gone (or its maximum hold reached), so that it stops its side
//! effects at once; and [`RevocationSignal`], what a holder waits on or
//! polls to learn that someone asked its hold to let go
//! ([`FairLock::revoke`](crate::FairLock::revoke), `fairlock revoke`). A
//! revocation asks; it never takes the lock away: the holder finishes what
//! it must and releases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::machinery::holds::{Hold, LeaseEnd, Revocation};

/// Tells other threads when a hold ends: [`LeaseEnd::Lost`] the moment
/// the lease is gone, [`LeaseEnd::MaxHold`] when a hold taken
/// [`with_max_hold`](crate::FairMutex::with_max_hold) reached it (no more
/// renewals: wind down before the lease runs out), [`LeaseEnd::Released`]
/// when the guard (with its re-entrant guards) was released first.
///
/// Every guard of every kind gives one ([`Guard::lease_signal`](crate::Guard::lease_signal):
/// a mutex's, a permit, a read, a write, a leadership, each part of a
/// [`MultiGuard`](crate::MultiGuard)). Cheap to clone, `Send + Sync`, and
/// usable after the guard is gone.
///
/// When it fires, measured from the loss:
/// - a lease that no renewal confirmed in time (Redis unreachable, a
///   partition, a paused process): at this client's own end of the lease,
///   which comes before Redis can free the lock (the lease counts from when
///   the confirming request was sent, less the
///   [clock-drift allowance](crate::ClientBuilder::clock_drift));
/// - a force unlock: at once, by a message to the holder's client;
/// - a lock Redis says is no longer this hold's (expired while the
///   process was paused, or force-unlocked with that message lost): at
///   the watchdog's next round, within a third of `min(lease,
///   waiter_timeout)`; for a fixed lease, at its end.
///
/// ```no_run
/// use std::time::Duration;
/// use fairlock::LeaseEnd;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_mutex("nightly-export").lock()?;
/// let signal = guard.lease_signal();
/// let worker = std::thread::spawn(move || {
///     for _batch in 0..1_000 {
///         if signal.wait_timeout(Duration::ZERO) == Some(LeaseEnd::Lost) {
///             return Err("lock lost: stopping before the next batch");
///         }
///         // ... write one batch, with the fencing token ...
///     }
///     Ok(())
/// });
/// let outcome = worker.join().expect("worker thread");
/// drop(guard);
/// # let _ = outcome;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseSignal {
    pub(crate) hold: Arc<Hold>,
}

impl LeaseSignal {
    /// Blocks until the hold ends; returns how: the first end that came
    /// while it waited (a [`MaxHold`](LeaseEnd::MaxHold) even if the lease
    /// it capped has also run out by the time the thread runs again).
    /// Blocks for as long as the lease is held: use
    /// [`wait_timeout`](Self::wait_timeout) to bound it.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// let signal = guard.lease_signal();
    /// let watcher = std::thread::spawn(move || match signal.wait() {
    ///     fairlock::LeaseEnd::Released => println!("released in time"),
    ///     end => eprintln!("lost the lock ({end:?}): abort the export"),
    /// });
    /// drop(guard);
    /// watcher.join().expect("watcher");
    /// # Ok(()) }
    /// ```
    pub fn wait(&self) -> LeaseEnd {
        (self.hold.wait_end(None)).expect("a wait without a deadline returns only at the end")
    }

    /// Blocks until the hold ends or `timeout` passes: `Some(end)` when it
    /// ended, `None` when it is still held. `Duration::ZERO` only looks.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// let signal = guard.lease_signal();
    /// // Sleeps between batches, but wakes at once if the lease ends.
    /// while signal.wait_timeout(Duration::from_secs(1)).is_none() {
    ///     // ... one batch, with guard.fencing_token() ...
    /// #   break;
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn wait_timeout(&self, timeout: Duration) -> Option<LeaseEnd> {
        self.hold.wait_end(Instant::now().checked_add(timeout))
    }

    /// How the hold ended, if it has; never blocks.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// let signal = guard.lease_signal();
    /// assert_eq!(signal.ended(), None); // still held
    /// drop(guard);
    /// assert_eq!(signal.ended(), Some(fairlock::LeaseEnd::Released));
    /// # Ok(()) }
    /// ```
    pub fn ended(&self) -> Option<LeaseEnd> {
        self.hold.end_as_of(Instant::now())
    }

    /// The fencing token of the hold this signal watches.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// let signal = guard.lease_signal();
    /// assert_eq!(signal.fencing_token(), guard.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.hold.token()
    }
}

impl std::fmt::Debug for LeaseSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseSignal")
            .field("lock", &self.hold.call.keys.lock())
            .field("fencing_token", &self.hold.token())
            .field("ended", &self.ended())
            .finish()
    }
}

/// Tells a holder when someone asked its hold to let go: a revocation
/// ([`FairLock::revoke`](crate::FairLock::revoke), `fairlock revoke NAME`)
/// of the lock while the hold was there. Holds taken after the revocation
/// are not asked.
///
/// Every guard of every kind gives one
/// ([`Guard::revocation_signal`](crate::Guard::revocation_signal): a mutex's,
/// a permit, a read, a write, a leadership, each part of a
/// [`MultiGuard`](crate::MultiGuard)). Cheap to clone, `Send + Sync`, and
/// usable after the guard is gone.
///
/// When it fires: one round trip after `revoke` was sent, plus the push
/// message's delivery to the holder's client; if that message is lost (its
/// subscriber was reconnecting), at the watchdog's next renewal of the hold,
/// whose reply says it too: within a third of `min(lease, waiter_timeout)`.
/// A hold with a [fixed lease](crate::FairLock::with_fixed_lease), or past
/// its maximum hold, is not renewed and hears of it from the message only.
///
/// ```no_run
/// use std::time::Duration;
/// # fn export_one_batch(_token: u64) -> bool { false }
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_mutex("nightly-export").lock()?;
/// let revoked = guard.revocation_signal();
/// // Export batch after batch until done or asked to let go.
/// while !revoked.is_revoked() && export_one_batch(guard.fencing_token()) {}
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RevocationSignal {
    pub(crate) hold: Arc<Hold>,
}

impl RevocationSignal {
    /// Whether someone asked the hold to let go; never blocks.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// let revoked = permit.revocation_signal();
    /// assert!(!revoked.is_revoked()); // nobody asked yet
    /// # Ok(()) }
    /// ```
    pub fn is_revoked(&self) -> bool {
        self.hold.is_revoked()
    }

    /// Blocks until the hold is asked to let go
    /// ([`Revocation::Requested`]) or ends without being asked
    /// ([`Revocation::HoldEnded`]); a hold asked and then released says
    /// `Requested`. Never blocks past the hold's end.
    ///
    /// ```no_run
    /// use fairlock::Revocation;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// let revoked = leadership.revocation_signal();
    /// let stop = std::thread::spawn(move || revoked.wait() == Revocation::Requested);
    /// // ... lead until asked to step down ...
    /// # drop(leadership);
    /// # let _ = stop.join();
    /// # Ok(()) }
    /// ```
    pub fn wait(&self) -> Revocation {
        (self.hold.wait_revoked(None)).expect("a wait without a deadline returns only at the end")
    }

    /// As [`wait`](Self::wait), for at most `timeout`: `None` when neither
    /// came by then. `Duration::ZERO` only looks.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let write = client.fair_rwlock("catalog").write()?;
    /// let revoked = write.revocation_signal();
    /// // One step a second, until asked to let go.
    /// while revoked.wait_timeout(Duration::from_secs(1)).is_none() {
    ///     // ... one step of the rebuild ...
    /// #   break;
    /// }
    /// write.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Revocation> {
        self.hold.wait_revoked(Instant::now().checked_add(timeout))
    }

    /// The fencing token of the hold this signal watches.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// assert_eq!(guard.revocation_signal().fencing_token(), guard.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.hold.token()
    }
}

impl std::fmt::Debug for RevocationSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevocationSignal")
            .field("lock", &self.hold.call.keys.lock())
            .field("fencing_token", &self.hold.token())
            .field("revoked", &self.is_revoked())
            .finish()
    }
}
