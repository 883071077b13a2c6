//! `LeaseSignal`: what another thread blocks on to learn that a hold's
//! lease is gone (or its maximum hold reached), so that it stops its side
//! effects at once. Every guard of every primitive gives one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::machinery::holds::{Hold, LeaseEnd};

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
/// - a lock Redis says is no longer this hold's (force-unlocked, expired
///   while the process was paused): at the watchdog's next round, within
///   a third of `min(lease, waiter_timeout)`; for a fixed lease, at its end.
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
        let end = self.hold.wait_end(None);
        end.expect("a wait without a deadline returns only at the end")
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
