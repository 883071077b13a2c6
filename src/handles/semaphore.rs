//! The semaphore's requests, for both ownership modes: `n` permits of its
//! number, in arrival order (the acquire algorithm behind every wait is
//! [`acquisition`](crate::machinery::caller::acquisition)'s, with the counted
//! engine's scripts).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::handles::kind;
use crate::handles::lock::{forever, FairLock, Guard};
use crate::handles::ownership::{Bound, Ownership};
use crate::machinery::caller::wait::Wait;
use crate::protocol::Ask;

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
/// ([`acquire_many`](FairLock::acquire_many)): a large request at the head
/// of the queue is never passed by a smaller one behind it, so it cannot
/// starve. Each hold is a lease the watchdog renews (or a fixed one, with
/// [`with_fixed_lease`](FairLock::with_fixed_lease)); a dead holder's
/// permits come back when its lease runs out.
///
/// The semaphore of a name is a lock of its own, in keys of its own: the
/// mutex of the same name is another lock. Permits are not re-entrant:
/// each acquire is a permit of its own, even on a thread that holds one.
///
/// Made by [`Client::fair_semaphore`](crate::Client::fair_semaphore);
/// cheap to clone, `Send + Sync`.
///
/// Its own methods: [`acquire`](FairLock::acquire),
/// [`acquire_many`](FairLock::acquire_many),
/// [`try_acquire`](FairLock::try_acquire),
/// [`try_acquire_many`](FairLock::try_acquire_many),
/// [`try_acquire_for`](FairLock::try_acquire_for),
/// [`try_acquire_many_for`](FairLock::try_acquire_many_for),
/// [`acquire_with`](FairLock::acquire_with),
/// [`acquire_many_with`](FairLock::acquire_many_with),
/// [`permits`](FairLock::permits),
/// [`permits_in_force`](FairLock::permits_in_force),
/// [`available`](FairLock::available),
/// [`set_permits`](FairLock::set_permits). Its guard is a [`SemaphorePermit`].
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
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let migrations = client.fair_semaphore("db-migrations", 3);
/// let permit = migrations.acquire()?;
/// // ... at most 3 of these run at once across the fleet ...
/// permit.unlock()?;
/// # Ok(()) }
/// ```
pub type FairSemaphore<O = Bound> = FairLock<kind::Semaphore, O>;

/// One hold of a [`FairSemaphore`] (one permit, or
/// [`num_permits`](Guard::num_permits) taken at once), held until
/// [`unlock`](Guard::unlock)ed or dropped; a released permit goes straight
/// to the first live waiter. `Send + Sync` in both ownership modes: a
/// permit is never re-entered, so it is not tied to its thread.
///
/// Its own methods: [`num_permits`](#method.num_permits).
///
/// What every guard has: [`name`](#method.name),
/// [`fencing_token`](#method.fencing_token), [`waited`](#method.waited),
/// [`is_lease_lost`](#method.is_lease_lost),
/// [`lease_signal`](#method.lease_signal), [`is_revoked`](#method.is_revoked),
/// [`revocation_signal`](#method.revocation_signal),
/// [`unlock`](#method.unlock), [`into_any`](#method.into_any),
/// [`lock_handle`](#method.lock_handle).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let permit: fairlock::SemaphorePermit = client.fair_semaphore("uploads", 4).acquire()?;
/// let token = permit.fencing_token();
/// // ... pass `token` to the resource, which rejects smaller ones ...
/// # let _ = token;
/// permit.unlock()?;
/// # Ok(()) }
/// ```
pub type SemaphorePermit<O = Bound> = Guard<kind::Semaphore, O>;

impl<O: Ownership> FairLock<kind::Semaphore, O> {
    /// The number of permits this handle says the semaphore has: the
    /// number the semaphore starts with when this handle's call is the
    /// first to use it, and the most one of its calls may ask for. Once
    /// [`set_permits`](Self::set_permits) changed the semaphore's number,
    /// that number rules instead (see there), and
    /// [`permits_in_force`](Self::permits_in_force) says so.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.fair_semaphore("uploads", 4).permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.kind.permits
    }

    /// The number of permits the semaphore runs with, as this client's
    /// last acquire call on it found it, without I/O: another than
    /// [`permits`](Self::permits) once [`set_permits`](Self::set_permits)
    /// set one (the first such call also says so in the log, once per
    /// semaphore per client, as a warning); `permits` until a call found
    /// another, or when the last one found its own again (the set number
    /// lapsed a fence life after the semaphore's last use). Each acquire
    /// reply carries the number when it differs, at no cost when it does
    /// not; [`status`](FairLock::status) reads the number now, in one
    /// round trip ([`Capacity::Permits`](crate::Capacity::Permits)).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let exports = client.fair_semaphore("exports", 3);
    /// let permit = exports.acquire()?;
    /// if exports.permits_in_force() != exports.permits() {
    ///     println!("{} run at once, not 3: set with set_permits", exports.permits_in_force());
    /// }
    /// # drop(permit);
    /// # Ok(()) }
    /// ```
    pub fn permits_in_force(&self) -> u32 {
        (self.core().permits_in_force(&self.target)).unwrap_or(self.kind.permits)
    }

    /// Waits as `wait` says for `n` permits at once, returned as one hold,
    /// in FIFO order: the general form of every way to acquire. A request
    /// at the head of the queue is never passed by a smaller one behind
    /// it, even one that would fit; when it is admitted, the requests
    /// right behind it that fit are admitted in the same step. `Ok(None)`
    /// when the wait ended without them, the queue entry removed first
    /// (and the smaller requests it held back admitted if they fit); if
    /// the permits were handed over in that last instant, they are given
    /// back to the next requests, as
    /// [`FairMutex::lock_with`](crate::FairMutex::lock_with) says.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName);
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) when
    /// the semaphore's permits are not in `1..=`[`MAX_PERMITS`] or `n` is 0
    /// or more than [`permits`](Self::permits), before any I/O;
    /// [`ErrorKind::PermitsMismatch`](crate::ErrorKind::PermitsMismatch)
    /// when the semaphore is in use with another number of permits (nothing
    /// is written);
    /// [`ErrorKind::PermitsExceeded`](crate::ErrorKind::PermitsExceeded)
    /// when [`set_permits`](Self::set_permits) left fewer than `n` (also
    /// for a call already queued); otherwise as
    /// [`FairMutex::lock_with`](crate::FairMutex::lock_with) (`Connection`,
    /// `Auth`, `Permission`, `KeyConflict`, `FormatMismatch`, `Server`,
    /// `NotReplicated`, `Internal`). As there, whatever a
    /// call that failed after it was sent took or queued is abandoned
    /// (released, or taken out of the queue).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cores = client.fair_semaphore("build-cores", 16);
    /// match cores.acquire_many_with(8, Wait::at_most(Duration::from_secs(5)))? {
    ///     Some(permit) => drop(permit),
    ///     None => println!("8 cores not free within 5 s; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire_many_with(
        &self,
        n: u32,
        wait: impl Into<Wait>,
    ) -> Result<Option<SemaphorePermit<O>>> {
        let ask =
            permits_ask(n, self.kind.permits).map_err(|err| self.target.during("acquire", err))?;
        self.settings.request(&self.target, ask, None, &wait.into())
    }

    /// One permit, waiting as `wait` says:
    /// [`acquire_many_with`](Self::acquire_many_with)`(1, wait)`.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone();
    /// std::thread::spawn(move || stopper.cancel());
    /// let sem = client.fair_semaphore("uploads", 4);
    /// let maybe_permit = sem.acquire_with(Wait::forever().cancelled_by(&cancel))?;
    /// # drop(maybe_permit);
    /// # Ok(()) }
    /// ```
    pub fn acquire_with(&self, wait: impl Into<Wait>) -> Result<Option<SemaphorePermit<O>>> {
        self.acquire_many_with(1, wait)
    }

    /// Waits in FIFO order, as long as it takes, and returns a permit.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("uploads", 4).acquire()?;
    /// println!("permit {}", permit.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<SemaphorePermit<O>> {
        self.acquire_many(1)
    }

    /// Waits in FIFO order, as long as it takes, for `n` permits at once.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cores = client.fair_semaphore("build-cores", 16);
    /// let permit = cores.acquire_many(4)?; // a 4-core job
    /// assert_eq!(permit.num_permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn acquire_many(&self, n: u32) -> Result<SemaphorePermit<O>> {
        forever(self.acquire_many_with(n, Wait::forever()))
    }

    /// Takes a permit only if that needs no waiting: one is free and nobody
    /// is queued (never ahead of a queued waiter). Never joins the queue.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(permit) = client.fair_semaphore("uploads", 4).try_acquire()? {
    ///     permit.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<SemaphorePermit<O>>> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits only if that needs no waiting: they are free and
    /// nobody is queued. Never joins the queue.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(permit) = client.fair_semaphore("build-cores", 16).try_acquire_many(4)? {
    ///     permit.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<SemaphorePermit<O>>> {
        self.acquire_many_with(n, Wait::not_at_all())
    }

    /// Waits in FIFO order for at most `timeout` for a permit.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.fair_semaphore("uploads", 4).try_acquire_for(Duration::from_secs(5))? {
    ///     Some(permit) => drop(permit),
    ///     None => println!("no permit within 5 s; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<SemaphorePermit<O>>> {
        self.try_acquire_many_for(1, timeout)
    }

    /// Waits in FIFO order for at most `timeout` for `n` permits at once.
    ///
    /// # Errors
    /// As [`acquire_many_with`](Self::acquire_many_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cores = client.fair_semaphore("build-cores", 16);
    /// if let Some(permit) = cores.try_acquire_many_for(8, Duration::from_secs(5))? {
    ///     drop(permit);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_for(
        &self,
        n: u32,
        timeout: Duration,
    ) -> Result<Option<SemaphorePermit<O>>> {
        self.acquire_many_with(n, Wait::at_most(timeout))
    }

    /// Permits free now ([`permits`](Self::permits) while nobody uses the
    /// semaphore, as nobody holds one then).
    ///
    /// # Errors
    /// As [`status`](FairLock::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("{} free", client.fair_semaphore("uploads", 4).available()?);
    /// # Ok(()) }
    /// ```
    pub fn available(&self) -> Result<u32> {
        Ok(self.status(0)?.available().unwrap_or(self.kind.permits))
    }

    /// Sets the semaphore's number of permits to `permits`, for every
    /// client, in one atomic step (one round trip): an administrative call
    /// (Redisson's `setPermits`; `fairlock permits NAME N` on the command
    /// line). In the same step:
    /// - a grow admits the waiters that now fit at once, in FIFO order (a
    ///   large request at the head still stops the ones behind it), each
    ///   woken as a release would wake it;
    /// - a shrink takes nothing from holders: they keep their permits, and
    ///   nobody is admitted until the holds fit under the new number;
    /// - a queued call that asks for more than `permits` is taken out of
    ///   the queue as it reaches its head (in this step when it heads it;
    ///   it holds nobody back meanwhile), woken, and returns
    ///   [`ErrorKind::PermitsExceeded`](crate::ErrorKind::PermitsExceeded),
    ///   as does every later call asking for more (also when another
    ///   change raised the number again before its poll: it is told, not
    ///   queued again behind the calls that came after it).
    ///
    /// The number set is the semaphore's whatever the handles' own
    /// [`permits`](Self::permits) say: a handle configured with another
    /// number is served with this one (no
    /// [`PermitsMismatch`](crate::ErrorKind::PermitsMismatch) any more), its
    /// `permits` only bound what one of its calls may ask for, and its
    /// [`permits_in_force`](Self::permits_in_force) says the number set
    /// after its client's next acquire call (which logs a warning, once
    /// per semaphore per client). It
    /// lasts while the semaphore is in use and a fence life after (10
    /// minutes by default: [`ClientBuilder::fence_life`](crate::ClientBuilder::fence_life));
    /// a semaphore left unused that long starts again with its next
    /// caller's `permits`. It lives in the semaphore's keys, so a server
    /// that loses them loses it too, at once, with the holds (a restart
    /// without persistence, a failover to a replica that had not received
    /// the change, an eviction): the semaphore then serves each handle's
    /// own `permits` (its waiters in at once if that number is larger);
    /// a restart from the AOF keeps it. To change the number for good,
    /// change the handles' too (the old and the new number work side by
    /// side meanwhile).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) when
    /// `permits` is not in `1..=`[`MAX_PERMITS`] and
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName), both
    /// before any I/O; otherwise as [`status`](FairLock::status), and
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) when
    /// the change was made on the master but too few replicas saw it.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let workers = client.fair_semaphore("render-workers", 4);
    /// let change = workers.set_permits(8)?; // the night shift: twice as many
    /// println!(
    ///     "{:?} -> {} permits, {} in use; {} waiters admitted, {} refused",
    ///     change.previous, change.permits, change.in_use, change.admitted, change.refused
    /// );
    /// # Ok(()) }
    /// ```
    pub fn set_permits(&self, permits: u32) -> Result<PermitsChange> {
        permits_ask(1, permits).map_err(|err| self.target.during("set permits", err))?;
        let set = self.core().set_permits(&self.target, permits)?;
        Ok(PermitsChange {
            previous: set.previous,
            permits,
            in_use: u32::try_from(set.in_use).unwrap_or(u32::MAX),
            admitted: set.admitted.len(),
            refused: usize::try_from(set.refused).unwrap_or(usize::MAX),
        })
    }
}

/// What [`FairSemaphore::set_permits`] did, as the same atomic step saw
/// it.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let change = client.fair_semaphore("render-workers", 4).set_permits(2)?;
/// if change.in_use > change.permits {
///     println!("{} permits held: nobody is admitted until fewer than 2 are", change.in_use);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PermitsChange {
    /// The number before: `None` when none was recorded (nobody had used
    /// the semaphore for a fence life; the number set is now its number).
    pub previous: Option<u32>,
    /// The number now.
    pub permits: u32,
    /// The permits the live holds take now: more than
    /// [`permits`](Self::permits) after a shrink below them (holders keep
    /// theirs, and nobody is admitted until the holds fit).
    pub in_use: u32,
    /// The waiters the change admitted, in FIFO order.
    pub admitted: usize,
    /// The queued calls that asked for more than the new number and headed
    /// the queue (the others leave it as they reach its head): taken out
    /// of the queue, each returns
    /// [`ErrorKind::PermitsExceeded`](crate::ErrorKind::PermitsExceeded).
    pub refused: usize,
}

impl<O: Ownership> Guard<kind::Semaphore, O> {
    /// The permits the hold takes: 1 unless taken with
    /// [`acquire_many`](FairLock::acquire_many) and its kin.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("build-cores", 16).acquire_many(3)?;
    /// assert_eq!(permit.num_permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.hold.call.ask.permits()
    }
}

/// What a call for `n` of a semaphore's `permits` asks for; either out of
/// bounds (`permits` out of `1..=MAX_PERMITS`, then `n` out of
/// `1..=permits`) is
/// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
/// any I/O. `set_permits` checks its number as a call for one of it.
pub(crate) fn permits_ask(n: u32, permits: u32) -> Result<Ask> {
    let error = if !(1..=MAX_PERMITS).contains(&permits) {
        format!("a semaphore's permits must be from 1 to {MAX_PERMITS}, got {permits}")
    } else if !(1..=permits).contains(&n) {
        format!("a call may take from 1 to the semaphore's {permits} permits, asked for {n}")
    } else {
        return Ok(Ask::Permits { n, of: permits });
    };
    Err(Error::invalid_config(error))
}
