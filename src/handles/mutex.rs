//! `FairMutex`: a handle to one named lock (the acquire algorithm behind
//! its waits is in [`acquisition`](crate::handles::acquisition)).

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::handles::cancel::WaitCanceller;
use crate::handles::guard::FairMutexGuard;
use crate::handles::handle::{handle_methods, Handle, Wait};
use crate::handles::status::{LockStatus, Participant};
use crate::machinery::shared::{ClientInner, Shared};
use crate::protocol::{Ask, LockKind};

/// A fair (first come, first served) mutex named by a string, shared by
/// every thread of every process that uses the same Redis and key prefix.
///
/// Cheap to clone; `Send + Sync`. Made by [`Client::fair_mutex`](crate::Client::fair_mutex).
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
#[derive(Clone)]
pub struct FairMutex {
    pub(crate) handle: Handle,
}

handle_methods!(FairMutex, "client.fair_mutex(\"nightly-report\")");

impl FairMutex {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> Self {
        FairMutex {
            handle: Handle::new(client, name, LockKind::Mutex),
        }
    }

    /// Waits in FIFO order, as long as it takes, and returns the guard.
    /// A thread that already holds the lock gets a second guard at once.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName), [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) (bad fixed
    /// lease), [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis fails while waiting,
    /// [`ErrorKind::KeyConflict`](crate::ErrorKind::KeyConflict). A call that fails after it was sent may
    /// still have taken effect in Redis (a timeout, a connection lost
    /// mid-call): whatever it took or queued is given back by the client
    /// as soon as Redis answers again, never left as a hold nobody releases.
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
    pub fn lock(&self) -> Result<FairMutexGuard> {
        self.acquire(Wait::Forever)?
            .ok_or_else(Error::unbounded_wait_ended)
    }

    /// Takes the lock only if that needs no waiting: it is free and nobody
    /// is queued for it (never ahead of a queued waiter), or this thread
    /// already holds it. Never joins the queue.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// match mutex.try_lock()? {
    ///     Some(guard) => println!("free, token {}", guard.fencing_token()),
    ///     None => println!("held or queued for: not waiting"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<FairMutexGuard>> {
        self.acquire(Wait::Never)
    }

    /// Waits in FIFO order for at most `timeout`. On timeout the queue entry
    /// is removed before returning `Ok(None)`, so nobody behind is delayed;
    /// if the lock was handed over in that last instant, the guard is
    /// returned instead.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// if let Some(guard) = mutex.try_lock_for(Duration::from_secs(5))? {
    ///     guard.unlock()?;
    /// } // else: not ours within 5 s, and no longer queued
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<FairMutexGuard>> {
        self.acquire(Wait::AtMost(Some(timeout), None))
    }

    /// Waits in FIFO order until the lock is ours, `timeout` passes (`None`:
    /// no limit) or `cancel` is cancelled from another thread. On timeout or
    /// cancellation the queue entry is removed before returning `Ok(None)`,
    /// as with [`try_lock_for`](Self::try_lock_for); if the lock was handed
    /// over in that last instant, the guard is returned instead.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// let cancel = fairlock::WaitCanceller::new();
    /// let on_shutdown = cancel.clone(); // e.g. to a signal-handling thread
    /// std::thread::spawn(move || on_shutdown.cancel());
    /// match mutex.lock_cancellable(Some(Duration::from_secs(60)), &cancel)? {
    ///     Some(guard) => guard.unlock()?,
    ///     None => println!("cancelled or timed out; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<FairMutexGuard>> {
        self.acquire(Wait::AtMost(timeout, Some(cancel)))
    }

    fn acquire(&self, wait: Wait<'_>) -> Result<Option<FairMutexGuard>> {
        let hold = self.handle.acquire(Ok(Ask::Mutex), wait)?;
        Ok(hold.map(|hold| FairMutexGuard::new(self.clone(), hold)))
    }

    /// True when the calling thread (through this client) holds the lock.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
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

    /// How many guards the calling thread holds on this lock (0 if none).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
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
        let shared = self.shared();
        let owner = shared.owner_id();
        // Only a hold this thread has a live guard of counts as its own.
        let live = shared.holds.live_token(self.handle.keys()?.lock(), &owner);
        Ok(match self.status(0)?.holder {
            Some(holder) if holder.who.owner() == owner && holder.fencing_token == live => {
                holder.hold_count
            }
            _ => 0,
        })
    }

    /// Lease left on the current hold, whoever holds it; `None` when free.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
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
        Ok(self.status(0)?.holder.and_then(|h| h.remaining_lease))
    }

    /// Number of live waiters queued (dead ones not yet removed are not counted).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("{} waiting", client.fair_mutex("nightly-report").queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn queue_len(&self) -> Result<usize> {
        Ok(self.status(0)?.queue_len)
    }

    /// Everything about the lock in one atomic read: the holder (owner id,
    /// hold count, token, lease left), the first `max_waiters` queued
    /// waiters in order with the liveness each has left, the live queue
    /// length and the last fencing token. Costs O(log N + max_waiters).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.fair_mutex("nightly-report").status(10)?;
    /// if let Some(holder) = &status.holder {
    ///     println!("held by {} (token {})", holder.who, holder.fencing_token);
    /// }
    /// for (place, waiter) in status.waiters.iter().enumerate() {
    ///     println!("{place}: {}", waiter.who);
    /// }
    /// println!("{} waiting in all", status.queue_len);
    /// # Ok(()) }
    /// ```
    pub fn status(&self, max_waiters: usize) -> Result<LockStatus> {
        Ok(LockStatus::from_reply(self.handle.status(max_waiters, 1)?))
    }

    /// As [`force_unlock`](Self::force_unlock), and says who held the lock
    /// at the moment it was freed (read in the same atomic step).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
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
        let freed = self.handle.force_release()?;
        Ok(freed.holder.map(Participant::new))
    }

    pub(crate) fn shared(&self) -> &Shared {
        self.handle.shared()
    }
}

impl std::fmt::Debug for FairMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairMutex")
            .field("name", &self.name())
            .field("fixed_lease", &self.handle.fixed_lease())
            .finish_non_exhaustive()
    }
}
