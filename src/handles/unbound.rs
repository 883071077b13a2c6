//! Acquisitions not bound to a thread: each call is an owner of its own
//! (`<client id>:u<call>`), never re-entered, and its guard is `Send +
//! 'static`, released or dropped on any thread. One guard type for every
//! kind, over the guard core every guard shares.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::handles::call_hold::{guard_methods, CallHold};
use crate::handles::cancel::WaitCanceller;
use crate::handles::handle::{Handle, Wait};
use crate::protocol::{Access, Ask};
use crate::{FairMutex, FairRwLock, FairSemaphore};

/// A lock whose acquisitions are not bound to a thread, made by
/// [`FairMutex::unbound`], [`FairSemaphore::unbound`] or
/// [`FairRwLock::unbound`]. Its methods are the lock's own, with the same
/// names, waits and errors, and each returns an [`UnboundGuard`]. Cheap to
/// clone; `Send + Sync`.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_mutex("nightly-report").unbound().lock()?;
/// std::thread::spawn(move || {
///     // ... the work, on another thread ...
///     guard.unlock()
/// })
/// .join()
/// .expect("worker")?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Unbound<L> {
    lock: L,
}

impl<L> Unbound<L> {
    pub(crate) fn new(lock: L) -> Self {
        Unbound { lock }
    }

    /// The lock, as the handle it was made from (its acquisitions bound to
    /// their thread again).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let reports = client.fair_mutex("nightly-report").unbound();
    /// assert_eq!(reports.lock_handle().name(), "nightly-report");
    /// let bound = reports.lock_handle().lock()?; // a thread-bound guard again
    /// # drop(bound);
    /// # Ok(()) }
    /// ```
    pub fn lock_handle(&self) -> &L {
        &self.lock
    }
}

/// One acquire call of an unbound lock.
fn acquire(handle: &Handle, ask: Result<Ask>, wait: Wait<'_>) -> Result<Option<UnboundGuard>> {
    Ok(handle.acquire(ask, wait)?.map(UnboundGuard::new))
}

/// The same, waiting as long as it takes.
fn acquire_forever(handle: &Handle, ask: Result<Ask>) -> Result<UnboundGuard> {
    acquire(handle, ask, Wait::Forever)?.ok_or_else(Error::unbounded_wait_ended)
}

impl Unbound<FairMutex> {
    /// As [`FairMutex::lock`], unbound: waits in FIFO order as long as it
    /// takes, even behind a guard of the same thread.
    ///
    /// # Errors
    /// As [`FairMutex::lock`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let reports = client.fair_mutex("nightly-report").unbound();
    /// let guard = reports.lock()?;
    /// std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<UnboundGuard> {
        acquire_forever(&self.lock.handle, Ok(Ask::Mutex))
    }

    /// As [`FairMutex::try_lock`], unbound (a guard of the same thread is
    /// no hold of this call's: it answers `None`).
    ///
    /// # Errors
    /// As [`FairMutex::lock`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let reports = client.fair_mutex("nightly-report").unbound();
    /// if let Some(guard) = reports.try_lock()? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<UnboundGuard>> {
        acquire(&self.lock.handle, Ok(Ask::Mutex), Wait::Never)
    }

    /// As [`FairMutex::try_lock_for`], unbound.
    ///
    /// # Errors
    /// As [`FairMutex::lock`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let reports = client.fair_mutex("nightly-report").unbound();
    /// if let Some(guard) = reports.try_lock_for(Duration::from_secs(5))? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<UnboundGuard>> {
        let wait = Wait::AtMost(Some(timeout), None);
        acquire(&self.lock.handle, Ok(Ask::Mutex), wait)
    }

    /// As [`FairMutex::lock_cancellable`], unbound.
    ///
    /// # Errors
    /// As [`FairMutex::lock`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let reports = client.fair_mutex("nightly-report").unbound();
    /// let cancel = fairlock::WaitCanceller::new();
    /// if let Some(guard) = reports.lock_cancellable(None, &cancel)? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<UnboundGuard>> {
        let wait = Wait::AtMost(timeout, Some(cancel));
        acquire(&self.lock.handle, Ok(Ask::Mutex), wait)
    }
}

impl Unbound<FairSemaphore> {
    /// As [`FairSemaphore::acquire`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// let permit = uploads.acquire()?;
    /// std::thread::spawn(move || permit.unlock()).join().expect("worker")?; // released on another thread
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self) -> Result<UnboundGuard> {
        self.acquire_many(1)
    }

    /// As [`FairSemaphore::acquire_many`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire_many`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// let permits = uploads.acquire_many(2)?;
    /// assert_eq!(permits.num_permits(), 2);
    /// std::thread::spawn(move || permits.unlock()).join().expect("worker")?; // released on another thread
    /// # Ok(()) }
    /// ```
    pub fn acquire_many(&self, n: u32) -> Result<UnboundGuard> {
        acquire_forever(&self.lock.handle, self.lock.ask(n))
    }

    /// As [`FairSemaphore::try_acquire`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// if let Some(permit) = uploads.try_acquire()? {
    ///     std::thread::spawn(move || permit.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self) -> Result<Option<UnboundGuard>> {
        self.try_acquire_many(1)
    }

    /// As [`FairSemaphore::try_acquire_many`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire_many`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// if let Some(permits) = uploads.try_acquire_many(2)? {
    ///     std::thread::spawn(move || permits.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<UnboundGuard>> {
        acquire(&self.lock.handle, self.lock.ask(n), Wait::Never)
    }

    /// As [`FairSemaphore::try_acquire_for`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// if let Some(permit) = uploads.try_acquire_for(Duration::from_secs(5))? {
    ///     std::thread::spawn(move || permit.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<UnboundGuard>> {
        self.try_acquire_many_for(1, timeout)
    }

    /// As [`FairSemaphore::try_acquire_many_for`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire_many`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// if let Some(permits) = uploads.try_acquire_many_for(3, Duration::from_secs(5))? {
    ///     std::thread::spawn(move || permits.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_for(&self, n: u32, timeout: Duration) -> Result<Option<UnboundGuard>> {
        let wait = Wait::AtMost(Some(timeout), None);
        acquire(&self.lock.handle, self.lock.ask(n), wait)
    }

    /// As [`FairSemaphore::acquire_cancellable`], unbound.
    ///
    /// # Errors
    /// As [`FairSemaphore::acquire`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let uploads = client.fair_semaphore("uploads", 4).unbound();
    /// let cancel = fairlock::WaitCanceller::new();
    /// if let Some(permit) = uploads.acquire_cancellable(None, &cancel)? {
    ///     std::thread::spawn(move || permit.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<UnboundGuard>> {
        let wait = Wait::AtMost(timeout, Some(cancel));
        acquire(&self.lock.handle, self.lock.ask(1), wait)
    }
}

impl Unbound<FairRwLock> {
    /// As [`FairRwLock::read`], unbound: never re-entered, so a read of
    /// the same thread behind a queued writer waits behind it too.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// let guard = catalog.read()?;
    /// assert_eq!(guard.access(), Some(fairlock::Access::Read));
    /// std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<UnboundGuard> {
        acquire_forever(&self.lock.handle, Ok(Ask::RwLock(Access::Read)))
    }

    /// As [`FairRwLock::write`], unbound: a write of a thread that holds
    /// an unbound read waits for it (until its timeout) instead of being
    /// refused as an upgrade.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// let guard = catalog.write()?;
    /// assert_eq!(guard.access(), Some(fairlock::Access::Write));
    /// std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<UnboundGuard> {
        acquire_forever(&self.lock.handle, Ok(Ask::RwLock(Access::Write)))
    }

    /// As [`FairRwLock::try_read`], unbound.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// if let Some(guard) = catalog.try_read()? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read(&self) -> Result<Option<UnboundGuard>> {
        let ask = Ok(Ask::RwLock(Access::Read));
        acquire(&self.lock.handle, ask, Wait::Never)
    }

    /// As [`FairRwLock::try_write`], unbound.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// if let Some(guard) = catalog.try_write()? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write(&self) -> Result<Option<UnboundGuard>> {
        let ask = Ok(Ask::RwLock(Access::Write));
        acquire(&self.lock.handle, ask, Wait::Never)
    }

    /// As [`FairRwLock::try_read_for`], unbound.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// if let Some(guard) = catalog.try_read_for(Duration::from_secs(5))? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read_for(&self, timeout: Duration) -> Result<Option<UnboundGuard>> {
        let ask = Ok(Ask::RwLock(Access::Read));
        acquire(&self.lock.handle, ask, Wait::AtMost(Some(timeout), None))
    }

    /// As [`FairRwLock::try_write_for`], unbound.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// if let Some(guard) = catalog.try_write_for(Duration::from_secs(5))? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write_for(&self, timeout: Duration) -> Result<Option<UnboundGuard>> {
        let ask = Ok(Ask::RwLock(Access::Write));
        acquire(&self.lock.handle, ask, Wait::AtMost(Some(timeout), None))
    }

    /// As [`FairRwLock::read_cancellable`], unbound.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// let cancel = fairlock::WaitCanceller::new();
    /// if let Some(guard) = catalog.read_cancellable(None, &cancel)? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<UnboundGuard>> {
        let ask = Ok(Ask::RwLock(Access::Read));
        acquire(&self.lock.handle, ask, Wait::AtMost(timeout, Some(cancel)))
    }

    /// As [`FairRwLock::write_cancellable`], unbound.
    ///
    /// # Errors
    /// As [`FairRwLock::read`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog").unbound();
    /// let cancel = fairlock::WaitCanceller::new();
    /// if let Some(guard) = catalog.write_cancellable(None, &cancel)? {
    ///     std::thread::spawn(move || guard.unlock()).join().expect("worker")?; // released on another thread
    /// }
    /// # Ok(()) }
    /// ```
    pub fn write_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<UnboundGuard>> {
        let ask = Ok(Ask::RwLock(Access::Write));
        acquire(&self.lock.handle, ask, Wait::AtMost(timeout, Some(cancel)))
    }
}

/// A hold taken through an [`Unbound`] lock, of any kind: `Send + Sync +
/// 'static`, so it may move to another thread (a pool's worker, a
/// channel's receiver) and be released or dropped there. Held until
/// [`unlock`](Self::unlock)ed or dropped; the watchdog renews it while it
/// lives, and its lease signal reaches it wherever it is.
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::UnboundGuard>();
/// ```
#[must_use = "if unused the hold is released immediately"]
pub struct UnboundGuard {
    hold: CallHold,
}

impl UnboundGuard {
    pub(crate) fn new(hold: CallHold) -> Self {
        UnboundGuard { hold }
    }

    /// The name of the lock it holds.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").unbound().lock()?;
    /// assert_eq!(guard.name(), "nightly-report");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.hold.name()
    }

    /// A reader-writer lock's hold: read or write; `None` for a mutex's or
    /// a semaphore's.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").unbound().read()?;
    /// assert_eq!(read.access(), Some(fairlock::Access::Read));
    /// let mutex = client.fair_mutex("nightly-report").unbound().lock()?;
    /// assert_eq!(mutex.access(), None);
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Option<Access> {
        self.hold.access()
    }

    /// The permits the hold takes: a semaphore's `n`; 1 for the other
    /// kinds.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permits = client.fair_semaphore("build-cores", 16).unbound().acquire_many(4)?;
    /// assert_eq!(permits.num_permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn num_permits(&self) -> u32 {
        match self.hold.access() {
            Some(_) => 1,
            None => self.hold.units(),
        }
    }
}

guard_methods!(
    UnboundGuard,
    "hold",
    "client.fair_mutex(\"nightly-report\").unbound().lock()",
    unlock
);
