//! The reader-writer lock's requests, for both ownership modes: readers
//! share, writers exclude, in FIFO phases so nobody starves (the acquire
//! algorithm behind every wait is [`acquisition`](crate::machinery::caller::acquisition)'s,
//! with the counted engine's scripts); then its guards' changes of access:
//! an upgradable read's upgrade to the write, with every way of waiting, and
//! a write's downgrade to a read or an upgradable read (an upgradable
//! read's to a read), in one round trip that admits the waiters it lets
//! in. The hold stays the same hold through each change: its call, its
//! lease end, the watchdog's renewals, its lease signal, its maximum hold
//! and a force unlock all carry over; it gets a new fencing token.
//!
//! Why a new token: the reads granted beside an upgradable read carry
//! larger tokens than it, so a resource that remembers the largest token
//! it has seen (reads' included) would refuse the upgraded write if it
//! kept its read's token; with a new one, larger than every token issued
//! before, the write outranks every hold granted before it, and each token
//! names one access, so a fenced resource can tell a write from the read
//! that preceded it (and a downgraded read from the write before it).

use std::result::Result as StdResult;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::handles::kind;
use crate::handles::lock::{forever, FairLock, Guard};
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
    /// instant, it goes on to the next waiters, as
    /// [`FairMutex::lock_with`](crate::FairMutex::lock_with) says.
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

impl<O: Ownership> Guard<kind::UpgradableRead, O> {
    /// Becomes the write, waiting as `wait` says: the general form of
    /// every way to upgrade. It waits only for the reads granted before
    /// it: its claim goes ahead of every queued call (nobody queued can
    /// pass it, and since those wait behind it, it never waits for them,
    /// so no deadlock can come of it; only one upgradable read is held at
    /// a time, so upgrades never wait for each other), and the last of
    /// those reads to go hands it the write with the push message any
    /// waiter gets (the watchdog's heartbeat and the claim's own poll
    /// cover a lost one). Nobody writes between the read and the write.
    ///
    /// The write is the same hold (the same lease, renewed by the
    /// watchdog, the same [`lease_signal`](Guard::lease_signal) and
    /// maximum hold) with a new [fencing token](Guard::fencing_token),
    /// larger than every token issued before it, the reads' granted beside
    /// it included: a resource can tell the write from the read that
    /// preceded it. One round trip when no read is left; a wait otherwise.
    ///
    /// `Ok(Err(self))` when the wait ended first (its deadline, its
    /// [`WaitCanceller`](crate::WaitCanceller), or [`Wait::not_at_all`]
    /// with reads still held): the claim was withdrawn, the upgradable
    /// read is still held, and the waiters the claim held back are let in.
    /// `Ok(Ok(write))` instead when the claim was settled in that last
    /// instant, before its withdrawal ran. The withdrawal is given 50 ms
    /// past the wait's end and two round trips of the link (the quickest
    /// of the upgrade's own requests), at most one command timeout: the
    /// call returns by then, on a slow link as on a fast one.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the
    /// upgradable read was no longer held (its lease ran out, a force
    /// unlock) or this client counted it lost
    /// ([`is_lease_lost`](Guard::is_lease_lost)), also by the time an
    /// outage the upgrade met ended it (the message names the outage);
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused)
    /// (thread-bound) when this thread holds other guards of the lock: the
    /// upgrade would wait for them (nothing is asked of Redis but the
    /// upgradable read's release, as on every error; the other guards are
    /// kept);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// fails (a claim already made rides out an outage as a queued call
    /// does), also when the withdrawal at the wait's end has no reply
    /// within that grace (a stalled server): the claim may have been
    /// settled meanwhile, so the read is not handed back, and what the
    /// claim left (the claim, or the write) is given back once Redis
    /// answers; with [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated);
    /// otherwise the kinds of
    /// [`status`](crate::FairLock::status) (`Auth`, `Permission`,
    /// `KeyConflict`, `FormatMismatch`, `Server`). On
    /// every error the hold is released (the guard is consumed).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// match read.upgrade_with(Wait::at_most(Duration::from_secs(5)))? {
    ///     Ok(write) => write.unlock()?,
    ///     Err(read) => read.unlock()?, // readers kept it for 5 s; still ours to read
    /// }
    /// # Ok(()) }
    /// ```
    pub fn upgrade_with(mut self, wait: impl Into<Wait>) -> Result<StdResult<WriteGuard<O>, Self>> {
        let (started, wait) = (Instant::now(), wait.into().fixed_from_now());
        match self.hold.upgrade(&wait) {
            Ok(true) => Ok(Ok(Guard::new(self.hold))),
            Ok(false) => Ok(Err(self)),
            Err(err) => {
                // The read, by the wait's end (a try's: one command timeout
                // from its start): the call returns on time.
                self.hold.release_after(wait.ends_by(), started);
                Err(err.of_a_consumed_guard())
            }
        }
    }

    /// Becomes the write, waiting as long as it takes for the reads
    /// granted before it (see [`upgrade_with`](Self::upgrade_with)).
    ///
    /// # Errors
    /// As [`upgrade_with`](Self::upgrade_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// let stale = true; // what the read found
    /// if stale {
    ///     let write = read.upgrade()?;
    ///     println!("rewriting with token {}", write.fencing_token());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn upgrade(self) -> Result<WriteGuard<O>> {
        // A read given back (`Err`) by a wait without a limit is a bug.
        forever(Ok(self.upgrade_with(Wait::forever())?.ok()))
    }

    /// Becomes the write only if no read granted before it is left (one
    /// round trip); `Ok(Err(self))` otherwise, nothing queued.
    ///
    /// # Errors
    /// As [`upgrade_with`](Self::upgrade_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// match read.try_upgrade()? {
    ///     Ok(write) => drop(write),
    ///     Err(read) => drop(read), // readers still in
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_upgrade(self) -> Result<StdResult<WriteGuard<O>, Self>> {
        self.upgrade_with(Wait::not_at_all())
    }

    /// Becomes the write, waiting at most `timeout` for the reads granted
    /// before it; `Ok(Err(self))` when they kept it that long.
    ///
    /// # Errors
    /// As [`upgrade_with`](Self::upgrade_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// if let Ok(write) = read.try_upgrade_for(Duration::from_secs(5))? {
    ///     write.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_upgrade_for(self, timeout: Duration) -> Result<StdResult<WriteGuard<O>, Self>> {
        self.upgrade_with(Wait::at_most(timeout))
    }

    /// Becomes a plain read, atomically, in one round trip: the waiters at
    /// the head of the queue that fit beside it (a writer's turn stays a
    /// writer's; an upgradable read queued behind it) are admitted in the
    /// same step. A new fencing token, as [`upgrade_with`](Self::upgrade_with)'s.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost),
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated);
    /// otherwise the kinds of
    /// [`status`](crate::FairLock::status) (`Auth`, `Permission`,
    /// `KeyConflict`, `FormatMismatch`, `Server`); on
    /// every error the hold is released.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// let read: fairlock::ReadGuard = read.downgrade()?; // another may upgrade now
    /// # drop(read);
    /// # Ok(()) }
    /// ```
    pub fn downgrade(mut self) -> Result<ReadGuard<O>> {
        self.hold.downgrade(Access::Read)?;
        Ok(Guard::new(self.hold))
    }

    /// The hold's access: an upgradable read.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let read = client.fair_rwlock("catalog").upgradable_read()?;
    /// assert_eq!(read.access(), Some(fairlock::Access::UpgradableRead));
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Option<Access> {
        self.hold.call.ask.access()
    }
}

impl<O: Ownership> Guard<kind::Write, O> {
    /// Becomes a read, atomically, in one round trip: nobody writes in
    /// between, and the reads queued behind the write (up to the next
    /// queued writer) are admitted in the same step, each with its push
    /// message. The same hold (lease, watchdog, lease signal, maximum
    /// hold) with a new fencing token, larger than the write's, so a
    /// resource can tell the read from the write before it.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the write
    /// was no longer held or this client counted it lost
    /// ([`is_lease_lost`](Guard::is_lease_lost)), before the call or by the
    /// time its reply came, or by the time it failed for want of Redis (no
    /// read is made of it; what Redis still had of it is freed);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated);
    /// otherwise the kinds of
    /// [`status`](crate::FairLock::status) (`Auth`, `Permission`,
    /// `KeyConflict`, `FormatMismatch`, `Server`); on
    /// every error the hold is released (the guard is consumed).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let write = client.fair_rwlock("catalog").write()?;
    /// // ... write ...
    /// let read = write.downgrade()?; // the readers queued behind come in now
    /// // ... read what was written, beside them ...
    /// # drop(read);
    /// # Ok(()) }
    /// ```
    pub fn downgrade(mut self) -> Result<ReadGuard<O>> {
        self.hold.downgrade(Access::Read)?;
        Ok(Guard::new(self.hold))
    }

    /// Becomes an upgradable read, atomically, in one round trip, as
    /// [`downgrade`](Self::downgrade) becomes a read: the reads queued
    /// behind it come in, and it can become the write again
    /// ([`upgrade`](Guard::upgrade)) with nobody writing in between.
    ///
    /// # Errors
    /// As [`downgrade`](Self::downgrade), and
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused)
    /// when this thread holds another write of the lock (write in write):
    /// only one upgradable read is held at a time, and the other write
    /// could be made a second. Nothing is changed at Redis; this write is
    /// released (the guard consumed), the thread's other guards kept.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let write = client.fair_rwlock("catalog").write()?;
    /// let read = write.downgrade_to_upgradable()?;
    /// let write = read.upgrade()?; // waits for the readers let in meanwhile
    /// # drop(write);
    /// # Ok(()) }
    /// ```
    pub fn downgrade_to_upgradable(mut self) -> Result<UpgradableReadGuard<O>> {
        self.hold.downgrade(Access::UpgradableRead)?;
        Ok(Guard::new(self.hold))
    }

    /// The hold's access: the write.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let write = client.fair_rwlock("catalog").write()?;
    /// assert_eq!(write.access(), Some(fairlock::Access::Write));
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Option<Access> {
        self.hold.call.ask.access()
    }
}
