//! The mutex's requests, for both ownership modes, and what a thread can
//! ask about its own holds (the acquire algorithm behind every wait is
//! [`acquisition`](crate::machinery::caller::acquisition)'s).

use std::time::Duration;

use crate::error::Result;
use crate::handles::kind;
use crate::handles::lock::{forever, FairLock, Guard};
use crate::handles::ownership::{Bound, Ownership};
use crate::handles::status::Participant;
use crate::machinery::caller::wait::Wait;
use crate::protocol::Ask;

/// A fair (first come, first served) mutex named by a string, shared by
/// every thread of every process that uses the same Redis and key prefix.
/// Made by [`Client::fair_mutex`](crate::Client::fair_mutex); cheap to
/// clone, `Send + Sync`. Thread-bound by [default](crate::Ownership#which-is-the-default) (re-entrant per thread);
/// [`unbound`](FairLock::unbound) gives guards that move between threads.
///
/// Its own methods: [`lock`](FairLock::lock), [`try_lock`](FairLock::try_lock),
/// [`try_lock_for`](FairLock::try_lock_for),
/// [`lock_with`](FairLock::lock_with),
/// [`remaining_lease`](FairLock::remaining_lease),
/// [`force_unlock_holder`](FairLock::force_unlock_holder),
/// [`is_held_by_current_thread`](FairLock::is_held_by_current_thread),
/// [`hold_count`](FairLock::hold_count). Its guard is a [`FairMutexGuard`].
///
/// What every lock has: [`name`](FairLock::name),
/// [`lock_kind`](FairLock::lock_kind), [`status`](FairLock::status),
/// [`is_locked`](FairLock::is_locked), [`queue_len`](FairLock::queue_len),
/// [`force_unlock`](FairLock::force_unlock), [`revoke`](FairLock::revoke); its
/// lease settings, [`with_fixed_lease`](FairLock::with_fixed_lease),
/// [`with_max_hold`](FairLock::with_max_hold); its ownership,
/// [`bound`](FairLock::bound), [`unbound`](FairLock::unbound).
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mutex = client.fair_mutex("nightly-report");
/// match mutex.try_lock_for(Duration::from_secs(5))? {
///     Some(guard) => println!("got it, token {}", guard.fencing_token()),
///     None => println!("still busy after 5 s; left the queue"),
/// }
/// # Ok(()) }
/// ```
pub type FairMutex<O = Bound> = FairLock<kind::Mutex, O>;

/// A hold of a [`FairMutex`], until [`unlock`](Guard::unlock)ed or dropped.
///
/// What every guard has: [`name`](#method.name),
/// [`fencing_token`](#method.fencing_token), [`waited`](#method.waited),
/// [`is_lease_lost`](#method.is_lease_lost),
/// [`lease_signal`](#method.lease_signal), [`is_revoked`](#method.is_revoked),
/// [`revocation_signal`](#method.revocation_signal),
/// [`unlock`](#method.unlock), [`into_any`](#method.into_any),
/// [`lock_handle`](#method.lock_handle). A mutex's guard has no method of its
/// own.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard: fairlock::FairMutexGuard = client.fair_mutex("nightly-report").lock()?;
/// guard.unlock()?;
/// # Ok(()) }
/// ```
pub type FairMutexGuard<O = Bound> = Guard<kind::Mutex, O>;

impl<O: Ownership> FairLock<kind::Mutex, O> {
    /// Waits as `wait` says for the lock, in FIFO order: the general form
    /// of every way to lock. `Ok(None)` when the wait ended without it,
    /// the queue entry removed first (so nobody behind is delayed); if the
    /// lock was handed over in that last instant, it goes on to the next
    /// waiter (a leave may reach Redis after nobody waits for its answer:
    /// the lock is never left to a call that ended). That leave is given
    /// 50 ms past the wait's end and two round trips of the link (the
    /// quickest of the call's own requests), at most one command timeout;
    /// one with no reply by then (a stalled server), or refused for a
    /// reason that passes (`NOREPLICAS`, `MISCONF`, `BUSY` with someone's
    /// long script, `LOADING`), is `Ok(None)` all the
    /// same, and what the call took or queued is given back once Redis
    /// answers (takes it). A thread-bound call of a thread that holds the lock gets a
    /// second guard at once.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName),
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) (a bad
    /// fixed lease or maximum hold), both before any I/O; the kinds of
    /// [`status`](FairLock::status) (`Connection`, `Auth`, `Permission`,
    /// `KeyConflict`, `FormatMismatch`, `Server`); with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) (what
    /// was taken is given back first);
    /// [`ErrorKind::Internal`](crate::ErrorKind::Internal) when a
    /// background thread cannot start (or for a fairlock bug).
    /// A call that fails after it was sent may still have taken effect in
    /// Redis (a timeout, a connection lost mid-call): whatever it took or
    /// queued is abandoned by the client (released, or taken out of the
    /// queue) as soon as Redis answers again,
    /// never left as a hold nobody releases.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// let cancel = fairlock::WaitCanceller::new();
    /// let on_shutdown = cancel.clone(); // e.g. to a signal-handling thread
    /// std::thread::spawn(move || on_shutdown.cancel());
    /// match mutex.lock_with(Wait::at_most(Duration::from_secs(60)).cancelled_by(&cancel))? {
    ///     Some(guard) => guard.unlock()?,
    ///     None => println!("cancelled or timed out; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_with(&self, wait: impl Into<Wait>) -> Result<Option<FairMutexGuard<O>>> {
        self.settings
            .request(&self.target, Ask::Mutex, None, &wait.into())
    }

    /// Waits in FIFO order, as long as it takes, and returns the guard:
    /// [`lock_with`](Self::lock_with)`(Wait::forever())`.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// let guard = mutex.lock()?; // waits its turn, however long
    /// write_report(guard.fencing_token());
    /// guard.unlock()?; // or drop it: the next waiter gets the lock at once
    /// # fn write_report(_token: u64) {}
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<FairMutexGuard<O>> {
        forever(self.lock_with(Wait::forever()))
    }

    /// Takes the lock only if that needs no waiting: it is free and nobody
    /// is queued for it (never ahead of a queued waiter), or this thread
    /// already holds it (thread-bound). Never joins the queue:
    /// [`lock_with`](Self::lock_with)`(Wait::not_at_all())`.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.fair_mutex("nightly-report").try_lock()? {
    ///     Some(guard) => println!("free, token {}", guard.fencing_token()),
    ///     None => println!("held or queued for: not waiting"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<FairMutexGuard<O>>> {
        self.lock_with(Wait::not_at_all())
    }

    /// Waits in FIFO order for at most `timeout`:
    /// [`lock_with`](Self::lock_with)`(Wait::at_most(timeout))`.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fair_mutex("nightly-report").try_lock_for(Duration::from_secs(5))? {
    ///     guard.unlock()?;
    /// } // else: not ours within 5 s, and no longer queued
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<FairMutexGuard<O>>> {
        self.lock_with(Wait::at_most(timeout))
    }

    /// Lease left on the current hold, whoever holds it; `None` when free.
    ///
    /// # Errors
    /// As [`status`](FairLock::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(left) = client.fair_mutex("nightly-report").remaining_lease()? {
    ///     println!("the holder's lease runs {left:?} more unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        Ok(self.status(1)?.holder().and_then(|h| h.remaining_lease))
    }

    /// As [`force_unlock`](FairLock::force_unlock), and says who held the
    /// lock at the moment it was freed (read in the same atomic step).
    ///
    /// # Errors
    /// As [`status`](FairLock::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(was) = client.fair_mutex("nightly-report").force_unlock_holder()? {
    ///     println!("freed the lock {} held", was);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock_holder(&self) -> Result<Option<Participant>> {
        let freed = self.core().force_release(&self.target)?;
        Ok(freed.holder.map(Participant::new))
    }

    /// True when the calling thread (through this client) holds the lock:
    /// by a thread-bound call, of this handle or of its
    /// [`bound`](FairLock::bound) twin (an unbound acquisition belongs to
    /// no thread, so it never counts, nor does a hold its guards count
    /// lost, which a lock call does not re-enter).
    ///
    /// # Errors
    /// As [`status`](FairLock::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// let guard = mutex.lock()?;
    /// assert!(mutex.is_held_by_current_thread()?);
    /// drop(guard);
    /// assert!(!mutex.is_held_by_current_thread()?);
    /// # Ok(()) }
    /// ```
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many guards the calling thread holds on this lock (0 if none),
    /// taken by thread-bound calls (as
    /// [`is_held_by_current_thread`](Self::is_held_by_current_thread)).
    ///
    /// # Errors
    /// As [`status`](FairLock::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// let outer = mutex.lock()?;
    /// let inner = mutex.lock()?; // re-entered at once: the same thread
    /// assert_eq!(mutex.hold_count()?, 2);
    /// drop((inner, outer));
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> Result<u32> {
        // Only a hold this thread has a live guard of counts as its own.
        let (owner, live) = self.core().thread_hold(self.target.keys_for("status")?);
        let holder = self.status(1)?.holders.into_iter().next();
        let ours = holder.filter(|h| h.who.owner() == &*owner && h.fencing_token == live);
        Ok(ours.map_or(0, |holder| holder.hold_count))
    }
}
