//! A reader-writer lock's changes of access on a held guard (issue 30): an
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

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::handles::call_hold::CallHold;
use crate::handles::cancel::WaitCanceller;
use crate::handles::guard::Guard;
use crate::handles::kind;
use crate::handles::ownership::Ownership;
use crate::handles::queue_wait::{wait_in_queue, Attempted, Queued};
use crate::handles::rwlock::{ReadGuard, UpgradableReadGuard, WriteGuard};
use crate::handles::wait::{NoWait, Wait};
use crate::machinery::holds::Hold;
use crate::machinery::shared::Shared;
use crate::machinery::waiters::{Grant, Waiter};
use crate::protocol::{
    Access, Ask, Call, Downgrade, DowngradeReply, Mode, Renew, Upgrade, UpgradeReply, UpgradeStep,
    Written,
};

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
    /// unlock);
    /// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused)
    /// (thread-bound) when this thread holds other guards of the lock: the
    /// upgrade would wait for them (nothing is written);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// fails (a claim already made rides out an outage as a queued call
    /// does); with [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated). On
    /// every error the hold is given back (the guard is consumed).
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
    pub fn upgrade_with(
        mut self,
        wait: impl Into<Wait>,
    ) -> Result<std::result::Result<WriteGuard<O>, Self>> {
        if upgrade(&mut self.hold, &wait.into())? {
            Ok(Ok(Guard::new(self.hold)))
        } else {
            Ok(Err(self))
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
        self.upgrade_with(Wait::forever())?
            .map_err(|_| Error::unbounded_wait_ended())
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
    pub fn try_upgrade(self) -> Result<std::result::Result<WriteGuard<O>, Self>> {
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
    pub fn try_upgrade_for(
        self,
        timeout: Duration,
    ) -> Result<std::result::Result<WriteGuard<O>, Self>> {
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
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated); on
    /// every error the hold is given back.
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
        downgrade(&mut self.hold, Access::Read)?;
        Ok(Guard::new(self.hold))
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
    /// was no longer held (nothing was changed);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated); on
    /// every error the hold is given back (the guard is consumed).
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
        downgrade(&mut self.hold, Access::Read)?;
        Ok(Guard::new(self.hold))
    }

    /// Becomes an upgradable read, atomically, in one round trip, as
    /// [`downgrade`](Self::downgrade) becomes a read: the reads queued
    /// behind it come in, and it can become the write again
    /// ([`upgrade`](Guard::upgrade)) with nobody writing in between.
    ///
    /// # Errors
    /// As [`downgrade`](Self::downgrade).
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
        downgrade(&mut self.hold, Access::UpgradableRead)?;
        Ok(Guard::new(self.hold))
    }
}

/// A change of a hold's access under way: renewals that fail meanwhile may
/// have named the token it replaces (see [`Hold::renewal_failed`]).
struct Changing<'h>(&'h Hold);

impl<'h> Changing<'h> {
    fn new(hold: &'h Hold) -> Self {
        hold.set_changing(true);
        Changing(hold)
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.0.set_changing(false);
    }
}

/// Upgrades `hold` (an upgradable read) to the write, waiting as `wait`
/// says; false when the wait ended first (the claim withdrawn). On an
/// error other than a lost lease, whatever the upgrade may have left (its
/// claim, the write) is given back once Redis answers; the caller's guard
/// gives back the read.
fn upgrade(hold: &mut CallHold, wait: &Wait) -> Result<bool> {
    let shared = &hold.client.shared;
    let call = &hold.call;
    if shared.hold_count(call.keys.lock(), &call.owner) > 1 {
        return Err(Error::new(
            ErrorKind::UpgradeRefused,
            format!(
                "this thread holds other guards of rwlock {:?} beside its upgradable read: the \
                 upgrade would wait for them; release them first (nothing was changed)",
                hold.target.name()
            ),
        ));
    }
    let _changing = Changing::new(&hold.hold);
    let upgrader = Upgrader {
        shared,
        hold: &hold.hold,
        claim: Call {
            ask: Ask::Upgrade,
            ..call.clone()
        },
    };
    let got = match wait.deadline() {
        Err(NoWait) => upgrader.try_once(),
        Ok(deadline) => upgrader.wait(deadline, wait.canceller()),
    };
    match got {
        Ok(Some(token)) => {
            hold.hold.changed(token, true);
            hold.call.ask = Ask::RwLock(Access::Write);
            Ok(true)
        }
        Ok(None) => Ok(false),
        Err(err) => {
            if !err.is_lease_lost() {
                shared.give_back_later(&upgrader.claim);
                shared.give_back_later(&Call {
                    ask: Ask::RwLock(Access::Write),
                    ..call.clone()
                });
            }
            Err(err)
        }
    }
}

/// One upgrade of one upgradable read: its claim is the waiting call (its
/// hold's call id, asking for [`Ask::Upgrade`]).
struct Upgrader<'a> {
    shared: &'a Shared,
    hold: &'a Hold,
    claim: Call,
}

impl Upgrader<'_> {
    /// One attempt of `step` (one round trip).
    fn send(&self, step: UpgradeStep) -> Result<Written<UpgradeReply>> {
        let claim = &self.claim;
        let op = Upgrade {
            owner: &claim.owner,
            token: self.hold.token(),
            call: claim.id,
            lease: claim.lease,
            waiter_timeout: self.shared.config().waiter_timeout,
            step,
        };
        self.shared.call_write(&claim.keys, &op)
    }

    /// The write's token if `step` upgraded, `None` if it did not.
    fn settle(&self, step: UpgradeStep) -> Result<Option<u64>> {
        let (reply, replicated) = self.send(step)?.into_parts();
        match reply {
            UpgradeReply::Upgraded { token, .. } => replicated.map(|()| Some(token)),
            UpgradeReply::Waiting { .. } => Ok(None),
            UpgradeReply::Lost => Err(self.lost()),
        }
    }

    /// Upgrades only if no read is left; never claims.
    fn try_once(&self) -> Result<Option<u64>> {
        self.settle(UpgradeStep::Attempt(Mode::Try))
    }

    /// Claims the head of the queue and waits for the grant until
    /// `deadline` (`None`: no limit) or `cancel`, as an acquisition waits.
    fn wait(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&WaitCanceller>,
    ) -> Result<Option<u64>> {
        let waiter = Arc::new(Waiter::new(self.claim.clone()));
        // Registered before the claim reaches Redis, so that no grant
        // message arrives for an id nobody listens to.
        self.shared.register_waiter(Arc::clone(&waiter));
        if let Some(cancel) = cancel {
            cancel.watch(&waiter);
        }
        let result = wait_in_queue(self, self.shared, &waiter, deadline);
        self.shared.forget_waiter(waiter.call.id);
        result
    }

    /// With `sync_replicas`, makes sure enough replicas saw the write
    /// handed over as `token` (a renewal and a `WAIT`, one round trip).
    fn confirm(&self, token: u64) -> Result<()> {
        let shared = self.shared;
        if shared.config().sync_replicas.is_none() {
            return Ok(());
        }
        let claim = &self.claim;
        let op = Renew {
            owner: &claim.owner,
            token,
            call: claim.id,
            lease: (!claim.lease.is_fixed()).then(|| claim.lease.duration()),
        };
        let (renewed, replicated) = shared.call_write(&claim.keys, &op)?.into_parts();
        if !renewed.is_held() {
            return Err(self.lost());
        }
        replicated
    }

    /// The upgradable read was no longer held.
    fn lost(&self) -> Error {
        self.hold.mark_lost();
        Error::new(
            ErrorKind::LeaseLost,
            format!(
                "the upgradable read (token {}) of {:?} was no longer held",
                self.hold.token(),
                self.claim.keys.lock()
            ),
        )
    }
}

/// The claim waits in the queue as an acquisition does (at its head).
impl Queued for Upgrader<'_> {
    type Got = u64;

    fn attempt(&self, _waiter: &Waiter, mode: Mode) -> Result<Attempted<u64>> {
        let (reply, replicated) = self.send(UpgradeStep::Attempt(mode))?.into_parts();
        match reply {
            UpgradeReply::Upgraded { token, .. } => replicated.map(|()| Attempted::Got(token)),
            UpgradeReply::Waiting {
                pttl_ms,
                position,
                last_token,
            } => Ok(Attempted::waiting(pttl_ms, position, last_token)),
            UpgradeReply::Lost => Err(self.lost()),
        }
    }

    fn granted(&self, _waiter: &Waiter, grant: Grant) -> Result<u64> {
        self.confirm(grant.token)?;
        Ok(grant.token)
    }

    /// Withdrawn, unless it was settled in that last instant.
    fn leave(&self, _waiter: &Waiter) -> Result<Option<u64>> {
        self.settle(UpgradeStep::Withdraw)
    }

    /// The caller (`upgrade`) gives back what the claim may have left.
    fn failed(&self, _waiter: &Waiter, err: Error) -> Result<Option<u64>> {
        Err(err)
    }
}

/// Downgrades `hold` (a write, or an upgradable read) to `to`, admitting
/// the waiters that fit in the same step (this client's wake from the
/// reply). On a connection error the downgraded hold is given back once
/// Redis answers; the caller's guard gives back the hold as it was.
fn downgrade(hold: &mut CallHold, to: Access) -> Result<()> {
    let shared = &hold.client.shared;
    let _changing = Changing::new(&hold.hold);
    let call = &hold.call;
    let op = Downgrade {
        owner: &call.owner,
        token: hold.hold.token(),
        call: call.id,
        to,
    };
    let downgraded = Call {
        ask: Ask::RwLock(to),
        ..call.clone()
    };
    let (reply, replicated) = shared
        .call_write(&call.keys, &op)
        .inspect_err(|_| shared.give_back_later(&downgraded))?
        .into_parts();
    match reply {
        DowngradeReply::Downgraded { token, handed, .. } => {
            for next in handed.iter().filter(|next| shared.is_own(&next.owner)) {
                shared.grant_waiter(next.wait_id, next.token, next.ttl_ms);
            }
            hold.hold.changed(token, false);
            hold.call = downgraded;
            replicated
        }
        DowngradeReply::Lost => {
            hold.hold.mark_lost();
            Err(Error::new(
                ErrorKind::LeaseLost,
                format!(
                    "{} (token {}) was no longer held",
                    call.ask.describe(hold.target.name()),
                    hold.hold.token()
                ),
            ))
        }
    }
}
