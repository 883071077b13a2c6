//! `FairRwLock` and its `ReadGuard` and `WriteGuard`: readers share,
//! writers exclude, in FIFO phases so nobody starves (the acquire
//! algorithm behind its waits is [`acquisition`](crate::handles::acquisition)'s,
//! with the rwlock's scripts). Handle and guards share this module, as no
//! import cycle is wanted.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::handles::call_hold::{guard_methods, CallHold};
use crate::handles::cancel::WaitCanceller;
use crate::handles::handle::{handle_methods, Handle, Wait};
use crate::handles::status::RwLockStatus;
use crate::machinery::shared::ClientInner;
use crate::protocol::{Access, Ask, LockKind};

/// A fair reader-writer lock named by a string, shared by every thread of
/// every process that uses the same Redis and key prefix.
///
/// Readers share it and writers hold it alone, in FIFO phases: consecutive
/// readers at the head of the queue enter together; a writer waits for the
/// readers ahead of it; a reader that arrives after a queued writer waits
/// behind it. So neither readers nor writers starve.
///
/// Re-entrant per thread, as [`FairMutex`](crate::FairMutex): a thread that
/// holds it may read again (read in read, read in write: granted at once,
/// even past queued writers) and write again if it holds it for writing.
/// A thread that holds it only for reading and asks to write gets
/// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused) at once,
/// never a deadlock. Each guard is a hold of its own with its own fencing
/// token, larger than every earlier one of this name, read or write.
///
/// The rwlock of a name is a lock of its own, in keys of its own: the mutex
/// and the semaphore of the same name are other locks.
///
/// Cheap to clone; `Send + Sync`. Made by [`Client::fair_rwlock`](crate::Client::fair_rwlock).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let catalog = client.fair_rwlock("catalog");
/// {
///     let read = catalog.read()?; // shared with other readers
///     println!("reading, token {}", read.fencing_token());
/// }
/// let write = catalog.write()?; // alone
/// write.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FairRwLock {
    pub(crate) handle: Handle,
}

handle_methods!(FairRwLock, "client.fair_rwlock(\"catalog\")");

impl FairRwLock {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> Self {
        FairRwLock {
            handle: Handle::new(client, name, LockKind::RwLock),
        }
    }

    /// Waits in FIFO order, as long as it takes, and returns a read guard.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// fails while waiting; [`ErrorKind::KeyConflict`](crate::ErrorKind::KeyConflict).
    /// As with [`FairMutex::lock`](crate::FairMutex::lock), whatever a call
    /// that failed after it was sent took or queued is given back.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").read()?;
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<ReadGuard> {
        self.read_as(Wait::Forever)?
            .ok_or_else(Error::unbounded_wait_ended)
    }

    /// Waits in FIFO order, as long as it takes, and returns a write guard.
    ///
    /// # Errors
    /// As [`read`](Self::read), and
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused) when
    /// this thread holds the lock for reading only (nothing is written).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").write()?;
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<WriteGuard> {
        self.write_as(Wait::Forever)?
            .ok_or_else(Error::unbounded_wait_ended)
    }

    /// Reads only if that needs no waiting: no writer holds it and nobody
    /// is queued (never ahead of a queued waiter), or this thread holds it.
    /// Never joins the queue.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fair_rwlock("catalog").try_read()? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read(&self) -> Result<Option<ReadGuard>> {
        self.read_as(Wait::Never)
    }

    /// Writes only if that needs no waiting: nobody holds it and nobody is
    /// queued, or this thread holds it for writing. Never joins the queue.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fair_rwlock("catalog").try_write()? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write(&self) -> Result<Option<WriteGuard>> {
        self.write_as(Wait::Never)
    }

    /// Waits in FIFO order for at most `timeout` to read. On timeout the
    /// queue entry is removed before returning `Ok(None)`; if the lock was
    /// handed over in that last instant, the guard is returned instead.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.fair_rwlock("catalog").try_read_for(Duration::from_secs(5))? {
    ///     Some(guard) => drop(guard),
    ///     None => println!("a writer kept it for 5 s; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read_for(&self, timeout: Duration) -> Result<Option<ReadGuard>> {
        self.read_as(Wait::AtMost(Some(timeout), None))
    }

    /// Waits in FIFO order for at most `timeout` to write; as
    /// [`try_read_for`](Self::try_read_for).
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fair_rwlock("catalog").try_write_for(Duration::from_secs(5))? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write_for(&self, timeout: Duration) -> Result<Option<WriteGuard>> {
        self.write_as(Wait::AtMost(Some(timeout), None))
    }

    /// Waits in FIFO order to read until the lock is ours, `timeout` passes
    /// (`None`: no limit) or `cancel` is cancelled from another
    /// thread; then the queue entry is removed before returning `Ok(None)`,
    /// as with [`try_read_for`](Self::try_read_for).
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone();
    /// std::thread::spawn(move || stopper.cancel());
    /// let maybe = client.fair_rwlock("catalog").read_cancellable(None, &cancel)?;
    /// # drop(maybe);
    /// # Ok(()) }
    /// ```
    pub fn read_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<ReadGuard>> {
        self.read_as(Wait::AtMost(timeout, Some(cancel)))
    }

    /// Waits in FIFO order to write; as [`read_cancellable`](Self::read_cancellable).
    ///
    /// # Errors
    /// As [`write`](Self::write).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = fairlock::WaitCanceller::new();
    /// let maybe = client.fair_rwlock("catalog").write_cancellable(None, &cancel)?;
    /// # drop(maybe);
    /// # Ok(()) }
    /// ```
    pub fn write_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<WriteGuard>> {
        self.write_as(Wait::AtMost(timeout, Some(cancel)))
    }

    /// Number of live waiters queued, readers and writers.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName),
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("{} waiting", client.fair_rwlock("catalog").queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn queue_len(&self) -> Result<usize> {
        Ok(self.status(0)?.queue_len)
    }

    /// Everything about the lock in one atomic read: the first `max`
    /// holders (by lease end, each read or write) and `max` queued waiters
    /// (in order), the totals and the last fencing token. Writes nothing.
    ///
    /// # Errors
    /// As [`queue_len`](Self::queue_len).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.fair_rwlock("catalog").status(10)?;
    /// for holder in &status.holders {
    ///     println!("{} holds it ({:?})", holder.who, holder.access);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn status(&self, max: usize) -> Result<RwLockStatus> {
        Ok(RwLockStatus::from_reply(self.handle.status(max, max)?))
    }

    fn read_as(&self, wait: Wait<'_>) -> Result<Option<ReadGuard>> {
        let hold = self.handle.acquire(Ok(Ask::RwLock(Access::Read)), wait)?;
        Ok(hold.map(|hold| ReadGuard {
            rwlock: self.clone(),
            hold,
            _not_send: PhantomData,
        }))
    }

    fn write_as(&self, wait: Wait<'_>) -> Result<Option<WriteGuard>> {
        let hold = self.handle.acquire(Ok(Ask::RwLock(Access::Write)), wait)?;
        Ok(hold.map(|hold| WriteGuard {
            rwlock: self.clone(),
            hold,
            _not_send: PhantomData,
        }))
    }
}

impl std::fmt::Debug for FairRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairRwLock")
            .field("name", &self.name())
            .field("fixed_lease", &self.handle.fixed_lease())
            .finish_non_exhaustive()
    }
}

/// A read hold of a [`FairRwLock`], shared with other readers, held until
/// [`unlock`](Self::unlock)ed or dropped (best effort: errors are logged;
/// `unlock` reports them). Its release lets in the writer at the head of
/// the queue once no other reader holds the lock.
///
/// `Sync` but not `Send`: holds are re-entrant per thread, so a guard stays
/// on the thread that took it, like `std::sync::RwLockReadGuard`.
///
/// ```compile_fail
/// fn assert_send<T: Send>() {}
/// assert_send::<fairlock::ReadGuard>();
/// ```
#[must_use = "if unused the read hold is released immediately"]
pub struct ReadGuard {
    rwlock: FairRwLock,
    hold: CallHold,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

/// A write hold of a [`FairRwLock`], alone, held until
/// [`unlock`](Self::unlock)ed or dropped (best effort: errors are logged;
/// `unlock` reports them). Its release lets in the next writer or the run
/// of readers at the head of the queue.
///
/// `Sync` but not `Send`, as [`ReadGuard`].
///
/// ```compile_fail
/// fn assert_send<T: Send>() {}
/// assert_send::<fairlock::WriteGuard>();
/// ```
#[must_use = "if unused the write hold is released immediately"]
pub struct WriteGuard {
    rwlock: FairRwLock,
    hold: CallHold,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl ReadGuard {
    /// The lock this read hold is of.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").read()?;
    /// assert_eq!(guard.rwlock().name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn rwlock(&self) -> &FairRwLock {
        &self.rwlock
    }
}

impl WriteGuard {
    /// The lock this write hold is of.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").write()?;
    /// println!("{} waiting behind the writer", guard.rwlock().queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn rwlock(&self) -> &FairRwLock {
        &self.rwlock
    }
}

guard_methods!(
    ReadGuard,
    "read hold",
    "client.fair_rwlock(\"catalog\").read()",
    unlock
);
guard_methods!(
    WriteGuard,
    "write hold",
    "client.fair_rwlock(\"catalog\").write()",
    unlock
);
