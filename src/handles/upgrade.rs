//! A reader-writer lock's changes of access on a held guard: an
//! upgradable read's upgrade to the write, with every way of waiting, and
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
use crate::handles::guard::Guard;
use crate::handles::kind;
use crate::handles::lock::forever;
use crate::handles::ownership::Ownership;
use crate::handles::rwlock::{ReadGuard, UpgradableReadGuard, WriteGuard};
use crate::machinery::caller::wait::Wait;
use crate::protocol::Access;

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
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the
    /// upgradable read was no longer held (its lease ran out, a force
    /// unlock) or this client counted it lost
    /// ([`is_lease_lost`](Guard::is_lease_lost)), also by the time an
    /// outage the upgrade met ended it (the message names the outage);
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused)
    /// (thread-bound) when this thread holds other guards of the lock: the
    /// upgrade would wait for them (nothing is written);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// fails (a claim already made rides out an outage as a queued call
    /// does); with [`sync_replicas`](crate::ClientBuilder::sync_replicas),
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
