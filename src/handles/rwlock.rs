//! The reader-writer lock's requests, for both ownership modes: readers
//! share, writers exclude, in FIFO phases so nobody starves (the acquire
//! algorithm behind every wait is [`acquisition`](crate::machinery::caller::acquisition)'s,
//! with the counted engine's scripts).

use std::time::Duration;

use crate::error::Result;
use crate::handles::guard::Guard;
use crate::handles::kind;
use crate::handles::lock::{forever, FairLock};
use crate::handles::ownership::{Bound, Ownership};
use crate::machinery::caller::wait::Wait;
use crate::protocol::{Access, Ask};

/// A fair reader-writer lock named by a string, shared by every thread of
/// every process that uses the same Redis and key prefix.
///
/// Readers share it and writers hold it alone, in FIFO phases: consecutive
/// readers at the head of the queue enter together; a writer waits for the
/// readers ahead of it; a reader that arrives after a queued writer waits
/// behind it. So neither readers nor writers starve.
///
/// Thread-bound, it is re-entrant per thread, as
/// [`FairMutex`](crate::FairMutex): a thread that holds it may read again
/// (read in read, read in write: granted at once, even past queued
/// writers) and write again if it holds it for writing. A thread that
/// holds it only for reading and asks to write gets
/// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused) at once,
/// never a deadlock. [`Unbound`](crate::Unbound), it is never re-entered:
/// a read of the same thread behind a queued writer waits behind it too,
/// and a write of a thread holding an unbound read waits for it (until its
/// timeout). Each guard is a hold of its own with its own fencing token,
/// larger than every earlier one of this name, read or write.
///
/// The rwlock of a name is a lock of its own, in keys of its own: the mutex
/// and the semaphore of the same name are other locks. Made by
/// [`Client::fair_rwlock`](crate::Client::fair_rwlock); cheap to clone,
/// `Send + Sync`.
///
/// Its own methods: [`read`](FairLock::read), [`write`](FairLock::write),
/// [`upgradable_read`](FairLock::upgradable_read),
/// [`try_read`](FairLock::try_read), [`try_write`](FairLock::try_write),
/// [`try_upgradable_read`](FairLock::try_upgradable_read),
/// [`try_read_for`](FairLock::try_read_for),
/// [`try_write_for`](FairLock::try_write_for),
/// [`try_upgradable_read_for`](FairLock::try_upgradable_read_for),
/// [`read_with`](FairLock::read_with), [`write_with`](FairLock::write_with),
/// [`upgradable_read_with`](FairLock::upgradable_read_with). Its guards are a
/// [`ReadGuard`], a [`WriteGuard`] and an [`UpgradableReadGuard`].
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
/// let catalog = client.fair_rwlock("catalog");
/// {
///     let read = catalog.read()?; // shared with other readers
///     println!("reading, token {}", read.fencing_token());
/// }
/// let write = catalog.write()?; // alone
/// write.unlock()?;
/// # Ok(()) }
/// ```
pub type FairRwLock<O = Bound> = FairLock<kind::RwLock, O>;

/// A read hold of a [`FairRwLock`], shared with other readers; its
/// release lets in the writer at the head of the queue once no other
/// reader holds the lock.
///
/// Its own methods: [`access`](#method.access).
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
/// let read: fairlock::ReadGuard = client.fair_rwlock("catalog").read()?;
/// read.unlock()?;
/// # Ok(()) }
/// ```
pub type ReadGuard<O = Bound> = Guard<kind::Read, O>;

/// A write hold of a [`FairRwLock`], alone; its release lets in the next
/// writer or the run of readers at the head of the queue.
///
/// Its own methods: [`downgrade`](#method.downgrade),
/// [`downgrade_to_upgradable`](#method.downgrade_to_upgradable),
/// [`access`](#method.access).
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
/// let write: fairlock::WriteGuard = client.fair_rwlock("catalog").write()?;
/// write.unlock()?;
/// # Ok(()) }
/// ```
pub type WriteGuard<O = Bound> = Guard<kind::Write, O>;

/// An upgradable read hold of a [`FairRwLock`]: shared with readers, but
/// not with writers or another upgradable read, so it can become the
/// write ([`upgrade`](Guard::upgrade)) without anyone writing in between;
/// a [`WriteGuard`] comes back to one with
/// [`downgrade_to_upgradable`](Guard::downgrade_to_upgradable).
///
/// Its own methods: [`upgrade`](#method.upgrade),
/// [`try_upgrade`](#method.try_upgrade),
/// [`try_upgrade_for`](#method.try_upgrade_for),
/// [`upgrade_with`](#method.upgrade_with), [`downgrade`](#method.downgrade),
/// [`access`](#method.access).
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
/// let read: fairlock::UpgradableReadGuard = client.fair_rwlock("catalog").upgradable_read()?;
/// let write = read.upgrade()?; // waits for the reads granted before it only
/// write.unlock()?;
/// # Ok(()) }
/// ```
pub type UpgradableReadGuard<O = Bound> = Guard<kind::UpgradableRead, O>;

impl<O: Ownership> FairLock<kind::RwLock, O> {
    /// Waits as `wait` says to read, in FIFO order: the general form of
    /// every way to read. `Ok(None)` when the wait ended without it, the
    /// queue entry removed first; if the lock was handed over in that last
    /// instant, the guard is returned instead.
    ///
    /// # Errors
    /// As [`FairMutex::lock_with`](crate::FairMutex::lock_with)
    /// ([`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName),
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) before
    /// any I/O, then `Connection`, `Auth`, `Permission`, `KeyConflict`,
    /// `FormatMismatch`, `Server`, `NotReplicated`, `Internal`), and as
    /// there whatever a call that failed after it was sent took or queued is
    /// abandoned (released, or taken out of the queue).
    ///
    /// ```no_run
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone();
    /// std::thread::spawn(move || stopper.cancel());
    /// let maybe = client.fair_rwlock("catalog").read_with(Wait::forever().cancelled_by(&cancel))?;
    /// # drop(maybe);
    /// # Ok(()) }
    /// ```
    pub fn read_with(&self, wait: impl Into<Wait>) -> Result<Option<ReadGuard<O>>> {
        self.settings
            .request(&self.target, Ask::RwLock(Access::Read), None, &wait.into())
    }

    /// Waits as `wait` says to write, in FIFO order: the general form of
    /// every way to write; as [`read_with`](Self::read_with).
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with), and (thread-bound)
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused) when
    /// this thread holds the lock for reading only (nothing is written).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog");
    /// if let Some(guard) = catalog.write_with(Wait::at_most(Duration::from_secs(5)))? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn write_with(&self, wait: impl Into<Wait>) -> Result<Option<WriteGuard<O>>> {
        self.settings
            .request(&self.target, Ask::RwLock(Access::Write), None, &wait.into())
    }

    /// Waits in FIFO order, as long as it takes, and returns a read guard.
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").read()?;
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<ReadGuard<O>> {
        forever(self.read_with(Wait::forever()))
    }

    /// Waits in FIFO order, as long as it takes, and returns a write guard.
    ///
    /// # Errors
    /// As [`write_with`](Self::write_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").write()?;
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<WriteGuard<O>> {
        forever(self.write_with(Wait::forever()))
    }

    /// Reads only if that needs no waiting: no writer holds it and nobody
    /// is queued (never ahead of a queued waiter), or this thread holds it
    /// (thread-bound). Never joins the queue.
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fair_rwlock("catalog").try_read()? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read(&self) -> Result<Option<ReadGuard<O>>> {
        self.read_with(Wait::not_at_all())
    }

    /// Writes only if that needs no waiting: nobody holds it and nobody is
    /// queued, or this thread holds it for writing (thread-bound). Never
    /// joins the queue.
    ///
    /// # Errors
    /// As [`write_with`](Self::write_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fair_rwlock("catalog").try_write()? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write(&self) -> Result<Option<WriteGuard<O>>> {
        self.write_with(Wait::not_at_all())
    }

    /// Waits in FIFO order for at most `timeout` to read.
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with).
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
    pub fn try_read_for(&self, timeout: Duration) -> Result<Option<ReadGuard<O>>> {
        self.read_with(Wait::at_most(timeout))
    }

    /// Waits in FIFO order for at most `timeout` to write.
    ///
    /// # Errors
    /// As [`write_with`](Self::write_with).
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
    pub fn try_write_for(&self, timeout: Duration) -> Result<Option<WriteGuard<O>>> {
        self.write_with(Wait::at_most(timeout))
    }

    /// Waits as `wait` says for an upgradable read, in FIFO order: the
    /// general form of every way to take one. It shares the lock with
    /// readers but not with writers or another upgradable read (those
    /// queue behind it, and it behind them), and it can become the write
    /// ([`upgrade`](Guard::upgrade)) without anyone writing in between
    /// (parking_lot's `upgradable_read`). `Ok(None)` when the wait ended
    /// without it, as [`read_with`](Self::read_with).
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with), and (thread-bound)
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused) when
    /// this thread holds the lock (a read, an upgradable read or the write:
    /// one upgradable read at a time, and a write downgraded beside it
    /// would make two) (nothing is written).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog");
    /// if let Some(read) = catalog.upgradable_read_with(Wait::at_most(Duration::from_secs(5)))? {
    ///     read.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn upgradable_read_with(
        &self,
        wait: impl Into<Wait>,
    ) -> Result<Option<UpgradableReadGuard<O>>> {
        let ask = Ask::RwLock(Access::UpgradableRead);
        self.settings.request(&self.target, ask, None, &wait.into())
    }

    /// Waits in FIFO order, as long as it takes, and returns an upgradable
    /// read guard.
    ///
    /// # Errors
    /// As [`upgradable_read_with`](Self::upgradable_read_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// # drop(read);
    /// # Ok(()) }
    /// ```
    pub fn upgradable_read(&self) -> Result<UpgradableReadGuard<O>> {
        forever(self.upgradable_read_with(Wait::forever()))
    }

    /// Takes an upgradable read only if that needs no waiting: no writer
    /// or upgradable read holds it and nobody is queued. Never joins the
    /// queue.
    ///
    /// # Errors
    /// As [`upgradable_read_with`](Self::upgradable_read_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(read) = client.fair_rwlock("catalog").try_upgradable_read()? {
    ///     read.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_upgradable_read(&self) -> Result<Option<UpgradableReadGuard<O>>> {
        self.upgradable_read_with(Wait::not_at_all())
    }

    /// Waits in FIFO order for at most `timeout` for an upgradable read.
    ///
    /// # Errors
    /// As [`upgradable_read_with`](Self::upgradable_read_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog");
    /// if let Some(read) = catalog.try_upgradable_read_for(Duration::from_secs(5))? {
    ///     read.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_upgradable_read_for(
        &self,
        timeout: Duration,
    ) -> Result<Option<UpgradableReadGuard<O>>> {
        self.upgradable_read_with(Wait::at_most(timeout))
    }
}

impl<O: Ownership> Guard<kind::Read, O> {
    /// The hold's access: a read.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").read()?;
    /// assert_eq!(read.access(), Some(fairlock::Access::Read));
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Option<Access> {
        self.hold.call.ask.access()
    }
}
