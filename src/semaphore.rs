//! `FairSemaphore` and its `SemaphorePermit`: at most N holders of a name
//! at once, in arrival order (the acquire algorithm behind its waits is
//! [`acquisition`](crate::acquisition)'s, with the semaphore's scripts).
//! Handle and permit share this module, as no import cycle is wanted.

use std::sync::Arc;
use std::time::Duration;

use crate::acquisition::{Acquired, Acquisition, Kind};
use crate::call_hold::CallHold;
use crate::cancel::WaitCanceller;
use crate::error::{Error, ErrorKind, Result};
use crate::lease_signal::LeaseSignal;
use crate::protocol::{LockKeys, SemStatus};
use crate::shared::{ClientInner, Shared};
use crate::status::SemaphoreStatus;

/// Most permits a semaphore may have (1 is the least).
pub const MAX_PERMITS: u32 = 1_000_000;

/// A fair semaphore named by a string: at most `permits` holders at once
/// across every client of the same Redis and key prefix, granted strictly
/// in arrival order (a newcomer never passes a queued waiter, even while a
/// permit is free). Each permit is a lease the watchdog renews; a dead
/// holder's permit comes back when its lease runs out.
///
/// The semaphore of a name is a lock of its own, in keys of its own: the
/// mutex of the same name is another lock. Permits are not re-entrant:
/// each acquire is a permit of its own, even on a thread that holds one.
///
/// Cheap to clone; `Send + Sync`. Made by [`Client::fair_semaphore`](crate::Client::fair_semaphore).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let migrations = client.fair_semaphore("db-migrations", 3);
/// let permit = migrations.acquire()?;
/// // ... at most 3 of these run at once across the fleet ...
/// permit.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FairSemaphore {
    client: Arc<ClientInner>,
    name: Arc<str>,
    permits: u32,
    /// The name's keys, or why the name is invalid (every call reports it).
    keys: Result<Arc<LockKeys>>,
}

impl FairSemaphore {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str, permits: u32) -> Self {
        let keys = LockKeys::semaphore(&client.shared.config.key_prefix, name).map(Arc::new);
        FairSemaphore {
            client,
            name: name.into(),
            permits,
            keys,
        }
    }

    /// The semaphore's name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.fair_semaphore("uploads", 4).name(), "uploads");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of permits this handle says the semaphore has.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.fair_semaphore("uploads", 4).permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Waits in FIFO order, as long as it takes, and returns a permit.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`]; [`ErrorKind::InvalidConfig`] when the
    /// permits are not in `1..=`[`MAX_PERMITS`];
    /// [`ErrorKind::PermitsMismatch`] when the semaphore is in use with
    /// another number of permits (nothing is written);
    /// [`ErrorKind::Connection`] when Redis fails while waiting. As with
    /// [`FairMutex::lock`](crate::FairMutex::lock), whatever a call that
    /// failed after it was sent took or queued is given back.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// println!("permit {}", permit.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<SemaphorePermit> {
        let got = self.acquisition()?.wait_until_acquired()?;
        Ok(self.permit(got))
    }

    /// Takes a permit only if that needs no waiting: one is free and nobody
    /// is queued (never ahead of a queued waiter). Never joins the queue.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(permit) = client.fair_semaphore("uploads", 4).try_acquire()? {
    ///     permit.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        let got = self.acquisition()?.try_once()?;
        Ok(got.map(|got| self.permit(got)))
    }

    /// Waits in FIFO order for at most `timeout`. On timeout the queue entry
    /// is removed before returning `Ok(None)`; if a permit was handed over
    /// in that last instant, it is returned instead.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let sem = client.fair_semaphore("uploads", 4);
    /// match sem.try_acquire_for(Duration::from_secs(5))? {
    ///     Some(permit) => drop(permit),
    ///     None => println!("no permit within 5 s; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<SemaphorePermit>> {
        self.wait_at_most(Some(timeout), None)
    }

    /// Waits in FIFO order until a permit is ours, `timeout` passes
    /// (`None`: no limit) or `cancel` is cancelled from another thread; on
    /// timeout or cancellation the queue entry is removed before returning
    /// `Ok(None)`, as with [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let sem = client.fair_semaphore("uploads", 4);
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone();
    /// std::thread::spawn(move || stopper.cancel());
    /// let maybe_permit = sem.acquire_cancellable(None, &cancel)?;
    /// # drop(maybe_permit);
    /// # Ok(()) }
    /// ```
    pub fn acquire_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<SemaphorePermit>> {
        self.wait_at_most(timeout, Some(cancel))
    }

    /// Permits free now (0 while the semaphore's state holds no number:
    /// then [`permits`](Self::permits) are free, as nobody holds one).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`], [`ErrorKind::Connection`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("{} free", client.fair_semaphore("uploads", 4).available()?);
    /// # Ok(()) }
    /// ```
    pub fn available(&self) -> Result<u32> {
        let status = self.status(0)?;
        Ok(match status.permits {
            Some(_) => status.available,
            None => self.permits,
        })
    }

    /// Number of live waiters queued.
    ///
    /// # Errors
    /// As [`available`](Self::available).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("{} waiting", client.fair_semaphore("uploads", 4).queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn queue_len(&self) -> Result<usize> {
        Ok(self.status(0)?.queue_len)
    }

    /// Everything about the semaphore in one atomic read: its permits, the
    /// first `max` holders (by lease end) and `max` queued waiters (in
    /// order), the totals and the last fencing token. Writes nothing.
    ///
    /// # Errors
    /// As [`available`](Self::available).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.fair_semaphore("uploads", 4).status(10)?;
    /// for holder in &status.holders {
    ///     println!("{} holds token {}", holder.who.owner, holder.fencing_token);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn status(&self, max: usize) -> Result<SemaphoreStatus> {
        let op = SemStatus {
            waiters: max,
            holders: max,
        };
        Ok(SemaphoreStatus::from_reply(
            self.shared().call(self.keys()?, &op)?,
        ))
    }

    /// A wait bounded by `timeout` (`None`: none) and `cancel`.
    fn wait_at_most(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&WaitCanceller>,
    ) -> Result<Option<SemaphorePermit>> {
        let got = self.acquisition()?.wait_at_most(timeout, cancel)?;
        Ok(got.map(|got| self.permit(got)))
    }

    /// One acquire call through this handle, with the client's lease
    /// (renewed by the watchdog).
    fn acquisition(&self) -> Result<Acquisition<'_>> {
        check_permits(self.permits)?;
        let shared = self.shared();
        let lease = shared.config.lease;
        Ok(Acquisition {
            kind: Kind::Semaphore {
                permits: self.permits,
            },
            shared,
            keys: self.keys()?,
            name: &self.name,
            lease,
            fixed: false,
        })
    }

    fn permit(&self, got: Acquired) -> SemaphorePermit {
        let hold = CallHold::new(Arc::clone(&self.client), Arc::clone(&self.name), got, None);
        SemaphorePermit {
            semaphore: self.clone(),
            hold,
        }
    }

    fn shared(&self) -> &Shared {
        &self.client.shared
    }

    fn keys(&self) -> Result<&Arc<LockKeys>> {
        self.keys.as_ref().map_err(Error::clone)
    }
}

/// `Ok` when `permits` is in `1..=MAX_PERMITS`.
fn check_permits(permits: u32) -> Result<()> {
    if (1..=MAX_PERMITS).contains(&permits) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidConfig,
        format!("a semaphore's permits must be from 1 to {MAX_PERMITS}, got {permits}"),
    ))
}

impl std::fmt::Debug for FairSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairSemaphore")
            .field("name", &self.name)
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

/// One permit of a [`FairSemaphore`], held until
/// [`release`](Self::release)d or dropped. Dropping releases it
/// best-effort (errors are logged); `release` reports what Drop cannot.
/// A released permit goes straight to the first live waiter.
/// `Send + Sync`: a permit is not tied to the thread that took it.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let permit = client.fair_semaphore("uploads", 4).acquire()?;
/// let token = permit.fencing_token();
/// // ... pass `token` to the resource, which rejects smaller ones ...
/// # let _ = token;
/// permit.release()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the permit is released immediately"]
pub struct SemaphorePermit {
    semaphore: FairSemaphore,
    hold: CallHold,
}

impl SemaphorePermit {
    /// The fencing token of this permit: larger than the token of every
    /// earlier permit of this name, by any client.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// assert!(permit.fencing_token() > 0);
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.hold.fencing_token()
    }

    /// How long the acquire call that made this permit waited, from its
    /// start to its return.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// println!("waited {:?} for a permit", permit.waited());
    /// # Ok(()) }
    /// ```
    pub fn waited(&self) -> Duration {
        self.hold.waited()
    }

    /// True once the permit is known to be gone (its lease ran out without
    /// a confirmed renewal, or Redis said it is no longer this call's).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// if permit.is_lease_lost() {
    ///     return Ok(()); // stop side effects
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.hold.is_lease_lost()
    }

    /// A signal another thread can block on to learn the moment this
    /// permit's lease is lost (or that it was released first).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// let signal = permit.lease_signal();
    /// std::thread::spawn(move || println!("ended: {:?}", signal.wait()));
    /// # Ok(()) }
    /// ```
    pub fn lease_signal(&self) -> LeaseSignal {
        self.hold.lease_signal()
    }

    /// The semaphore this permit is of.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// assert_eq!(permit.semaphore().name(), "uploads");
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self) -> &FairSemaphore {
        &self.semaphore
    }

    /// Releases the permit and reports how that went; a waiter queued for
    /// the semaphore gets it at once.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] when the permit was no longer this call's
    /// (nothing changed); [`ErrorKind::Connection`] when Redis could not be
    /// reached (the watchdog gives the permit back once Redis answers);
    /// [`ErrorKind::NotReplicated`] with `sync_replicas`, as for the mutex.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// client.fair_semaphore("uploads", 4).acquire()?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        self.hold.release()
    }
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("name", &self.semaphore.name())
            .field("fencing_token", &self.fencing_token())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_out_of_bounds_are_invalid_config() {
        assert_eq!(
            check_permits(0).unwrap_err().kind(),
            ErrorKind::InvalidConfig
        );
        let too_many = check_permits(MAX_PERMITS + 1).unwrap_err();
        assert_eq!(too_many.kind(), ErrorKind::InvalidConfig);
        assert!(check_permits(1).is_ok() && check_permits(MAX_PERMITS).is_ok());
    }

    #[test]
    fn handles_and_permits_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<FairSemaphore>();
        assert_send_sync::<SemaphorePermit>();
    }
}
