//! `FairSemaphore` and its `SemaphorePermit`: at most N holders of a name
//! at once, in arrival order (the acquire algorithm behind its waits is
//! [`acquisition`](crate::handles::acquisition)'s, with the semaphore's scripts).
//! Handle and permit share this module, as no import cycle is wanted.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::handles::call_hold::{guard_methods, CallHold};
use crate::handles::cancel::WaitCanceller;
use crate::handles::handle::{handle_methods, Handle, Wait};
use crate::handles::status::SemaphoreStatus;
use crate::machinery::shared::ClientInner;
use crate::protocol::{Ask, LockKind};

/// Most permits a semaphore may have (1 is the least); outside
/// `1..=MAX_PERMITS` the first call on the semaphore reports
/// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig).
///
/// ```
/// assert_eq!(fairlock::MAX_PERMITS, 1_000_000);
/// ```
pub const MAX_PERMITS: u32 = 1_000_000;

/// A fair semaphore named by a string: at most `permits` permits held at
/// once across every client of the same Redis and key prefix, granted
/// strictly in arrival order (a newcomer never passes a queued waiter, even
/// while a permit is free). A call may take several permits at once
/// ([`acquire_many`](Self::acquire_many)): a large request at the head of
/// the queue is never passed by a smaller one behind it, so it cannot
/// starve. Each hold is a lease the watchdog renews (or a fixed one, with
/// [`with_lease`](Self::with_lease)); a dead holder's permits come back
/// when its lease runs out.
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
    pub(crate) handle: Handle,
    permits: u32,
}

handle_methods!(FairSemaphore, "client.fair_semaphore(\"uploads\", 4)");

impl FairSemaphore {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str, permits: u32) -> Self {
        FairSemaphore {
            handle: Handle::new(client, name, LockKind::Semaphore),
            permits,
        }
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
        self.acquire_many(1)
    }

    /// Waits in FIFO order, as long as it takes, for `n` permits at once
    /// and returns them as one hold. A request at the head of the queue is
    /// never passed by a smaller one behind it, even one that would fit;
    /// when it is admitted, the requests right behind it that fit are
    /// admitted in the same step.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); [`ErrorKind::InvalidConfig`] when `n`
    /// is 0 or more than [`permits`](Self::permits), before any I/O.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cores = client.fair_semaphore("build-cores", 16);
    /// let permit = cores.acquire_many(4)?; // a 4-core job
    /// assert_eq!(permit.num_permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn acquire_many(&self, n: u32) -> Result<SemaphorePermit> {
        self.acquire_as(n, Wait::Forever)?
            .ok_or_else(Error::unbounded_wait_ended)
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
        self.try_acquire_many(1)
    }

    /// Takes `n` permits only if that needs no waiting: they are free and
    /// nobody is queued. Never joins the queue.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(permit) = client.fair_semaphore("build-cores", 16).try_acquire_many(4)? {
    ///     permit.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<SemaphorePermit>> {
        self.acquire_as(n, Wait::Never)
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
        self.try_acquire_many_for(1, timeout)
    }

    /// Waits in FIFO order for at most `timeout` for `n` permits at once;
    /// on timeout the queue entry is removed before returning `Ok(None)`,
    /// and the smaller requests it held back are admitted if they fit.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cores = client.fair_semaphore("build-cores", 16);
    /// match cores.try_acquire_many_for(8, Duration::from_secs(5))? {
    ///     Some(permit) => drop(permit),
    ///     None => println!("8 cores not free within 5 s; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_for(
        &self,
        n: u32,
        timeout: Duration,
    ) -> Result<Option<SemaphorePermit>> {
        self.acquire_as(n, Wait::AtMost(Some(timeout), None))
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
        self.acquire_as(1, Wait::AtMost(timeout, Some(cancel)))
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
    ///     println!("{} holds token {}", holder.who, holder.fencing_token);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn status(&self, max: usize) -> Result<SemaphoreStatus> {
        Ok(SemaphoreStatus::from_reply(self.handle.status(max, max)?))
    }

    /// A wait for `n` permits bounded by `timeout` (`None`: none) and `cancel`.
    fn acquire_as(&self, n: u32, wait: Wait<'_>) -> Result<Option<SemaphorePermit>> {
        let hold = self.handle.acquire(self.ask(n), wait)?;
        Ok(hold.map(|hold| SemaphorePermit {
            semaphore: self.clone(),
            hold,
        }))
    }

    /// What a call for `n` permits asks for; an `n` outside `1..=permits`
    /// (or a semaphore of bad permits) is an error before any I/O.
    pub(crate) fn ask(&self, n: u32) -> Result<Ask> {
        check_permits(self.permits)?;
        check_request(n, self.permits)?;
        Ok(Ask::Permits {
            n,
            of: self.permits,
        })
    }
}

fn check_request(n: u32, permits: u32) -> Result<()> {
    if (1..=permits).contains(&n) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidConfig,
        format!("a call may take from 1 to the semaphore's {permits} permits, asked for {n}"),
    ))
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
            .field("name", &self.name())
            .field("permits", &self.permits)
            .field("fixed_lease", &self.handle.fixed_lease())
            .finish_non_exhaustive()
    }
}

/// One hold of a [`FairSemaphore`] (one permit, or
/// [`num_permits`](Self::num_permits) taken at once), held until
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
    /// How many permits this hold takes (1 unless taken with
    /// [`acquire_many`](FairSemaphore::acquire_many) and its kin).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("build-cores", 16).acquire_many(3)?;
    /// assert_eq!(permit.num_permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.hold.units()
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
}

guard_methods!(
    SemaphorePermit,
    "permit",
    "client.fair_semaphore(\"db-migrations\", 3).acquire()",
    release
);

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
    fn a_call_asks_for_one_to_all_permits() {
        assert_eq!(
            check_request(0, 3).unwrap_err().kind(),
            ErrorKind::InvalidConfig
        );
        assert_eq!(
            check_request(4, 3).unwrap_err().kind(),
            ErrorKind::InvalidConfig
        );
        assert!(check_request(1, 3).is_ok() && check_request(3, 3).is_ok());
    }
}
