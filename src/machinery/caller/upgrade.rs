//! A reader-writer lock's changes of access on a held hold: an upgradable
//! read's upgrade to the write (its claim waits in the queue as any call
//! does, at its head), and a write's or an upgradable read's downgrade, in
//! one round trip that admits the waiters it lets in. The hold stays the
//! same hold (its call, its lease end, the watchdog's renewals); it gets a
//! new fencing token, and a renewal that raced the change is not taken for
//! a loss.

use std::sync::Arc;
use std::time::Instant;

use crate::connections::caller::Limit;
use crate::error::{Error, ErrorKind, Result};
use crate::machinery::caller::call_hold::CallHold;
use crate::machinery::caller::queue_wait::{confirm, link_grace, wait_in_queue, Attempted, Queued};
use crate::machinery::caller::wait::Wait;
use crate::machinery::caller::waiters::{Grant, Waiter};
use crate::machinery::holds::{lease_lost, GONE};
use crate::protocol::{
    Access, Ask, Call, Downgrade, DowngradeReply, Mode, Upgrade, UpgradeReply, UpgradeStep,
};

impl CallHold {
    /// Upgrades this hold (an upgradable read) to the write, waiting as
    /// `wait` says; false when the wait ended first (the claim withdrawn).
    /// A read Redis found gone is released here, and that release's answer
    /// says why ([`found_gone`](CallHold::found_gone)). On any other error,
    /// whatever the upgrade may have left (its claim, the write) is
    /// abandoned once Redis answers; the caller's guard abandons the read.
    pub(crate) fn upgrade(&mut self, wait: &Wait) -> Result<bool> {
        let started = Instant::now();
        // Counted lost, it stays lost: no write is made of it (nor kept,
        // when it was counted lost while the upgrade waited).
        self.unless_lost(wait.ends_by(), started)?;
        let shared = &self.client.shared;
        if shared.held_by(self.call.keys.lock(), &self.call.owner).0 > 1 {
            // (The caller gives the upgradable read back, as on every
            // error: the message says so.)
            let message = "this thread holds other guards of the rwlock beside its upgradable \
                           read: the upgrade would wait for them; the upgradable read was given \
                           back, the other guards are kept; release them before asking again";
            let refused = Error::new(ErrorKind::UpgradeRefused, message);
            return Err(self.target.during("upgrade", refused));
        }
        let _changing = self.hold.changing();
        let claim = asking(&self.call, Ask::Upgrade);
        let labels = &self.hold.labels;
        let waiter = Arc::new(Waiter::new(claim.clone()));
        let token = match wait_in_queue(&*self, shared, &waiter, wait.deadline(), wait, labels) {
            Ok(Some(token)) => token,
            // The read given back unless it was counted lost meanwhile.
            Ok(None) => {
                drop(_changing);
                return self.unless_lost(wait.ends_by(), started).map(|()| false);
            }
            // Redis found the upgradable read gone (its claim withdrawn
            // with it): released, the release says why.
            Err(err) if err.is_lease_lost() => {
                drop(_changing);
                return Err(self.found_gone(wait.ends_by(), started));
            }
            // Counted lost by the time it failed (an outage it rode out for
            // its patience), the loss is what the caller hears.
            Err(err) => {
                shared.abandon_later(&claim);
                shared.abandon_later(&asking(&claim, Ask::RwLock(Access::Write)));
                return Err(self.lost_meanwhile(err, "upgrade"));
            }
        };
        self.hold.changed(token, Ask::RwLock(Access::Write));
        self.call.ask = Ask::RwLock(Access::Write);
        drop(_changing);
        self.unless_lost(wait.ends_by(), started).map(|()| true)
    }

    /// Downgrades this hold (a write, or an upgradable read) to `to`,
    /// admitting the waiters that fit in the same step (this client's wake
    /// from the reply). A hold counted lost, before the call or by the time
    /// its reply came, is not downgraded: `LeaseLost`, and what Redis has
    /// of it is freed. On an error the hold is released within one command
    /// timeout of the call's start (`release_after`), and on a connection
    /// error the downgraded hold is abandoned once Redis answers.
    pub(crate) fn downgrade(&mut self, to: Access) -> Result<()> {
        let started = Instant::now();
        self.change_access(to, started).map_err(|err| {
            self.release_after(None, started);
            err.of_a_consumed_guard()
        })
    }

    /// A hold this client counted lost is not changed: it is released now,
    /// as its unlock would release it, and the unlock's error is the
    /// call's (`LeaseLost`, or what Redis answered instead: another
    /// build's data format, say). The release is done by the call's `end`
    /// (an upgrade's deadline or cancel) and the grace of a request on its
    /// link, or without one (a `try_upgrade`, a downgrade) within one
    /// command timeout of the call's start (`started`) and a leave's grace,
    /// pool wait included, as [`release_after`](Self::release_after) does,
    /// so that the call returns on time whatever the server does (Redis
    /// unreachable, that release would wait a connect timeout for a
    /// connection); the watchdog gives back what is not released by then.
    fn unless_lost(&mut self, end: Option<Instant>, started: Instant) -> Result<()> {
        if !self.hold.is_lost() {
            return Ok(());
        }
        // (An end already past gives the release its grace from now.)
        let end = end.map(|end| end.max(Instant::now()));
        let released = self.release_by(self.released_by(end, started));
        Err(released.err().unwrap_or_else(|| self.lost()))
    }

    fn change_access(&mut self, to: Access, started: Instant) -> Result<()> {
        self.unless_lost(None, started)?;
        let shared = &self.client.shared;
        let _changing = self.hold.changing();
        let call = &self.call;
        let op = Downgrade {
            owner: &call.owner,
            token: self.hold.token(),
            call: call.id,
            to,
        };
        let downgraded = asking(call, Ask::RwLock(to));
        let (reply, replicated) = (shared.caller)
            .call_write(&call.keys, &op, Limit::default())
            .map_err(|err| {
                shared.abandon_later(&downgraded);
                self.lost_meanwhile(err, "downgrade")
            })?
            .into_parts();
        let DowngradeReply::Downgraded { token, handed, .. } = reply else {
            // Released, the release says why.
            drop(_changing);
            return Err(self.found_gone(None, started));
        };
        shared.grant_own(&handed);
        self.hold.changed(token, Ask::RwLock(to));
        self.call = downgraded;
        drop(_changing);
        // Counted lost while the change was under way (its reply came
        // after this client's count of the lease ran out), it stays lost:
        // no read is made of it, as none is of a hold counted lost before.
        self.unless_lost(None, started).and(replicated)
    }

    /// One request of this hold's upgrade claim (`claim`: its call asking
    /// for [`Ask::Upgrade`]): the write's token if `step` upgraded,
    /// `Waiting` if it did not.
    fn upgrade_step(
        &self,
        claim: &Call,
        step: UpgradeStep,
        limit: Limit,
    ) -> Result<Attempted<u64>> {
        let shared = &self.client.shared;
        let op = Upgrade {
            owner: &claim.owner,
            token: self.hold.token(),
            call: claim.id,
            lease: claim.lease,
            waiter_timeout: shared.config().waiter_timeout,
            step,
        };
        let written = (shared.caller).call_write(&claim.keys, &op, limit)?;
        let (reply, replicated) = written.into_parts();
        match reply {
            UpgradeReply::Upgraded { token, .. } => replicated.map(|()| Attempted::Got(token)),
            UpgradeReply::Waiting {
                pttl_ms,
                position,
                last_token,
            } => Ok(Attempted::Waiting(pttl_ms, position, last_token)),
            // Not marked lost here: the caller (`upgrade`) releases the
            // hold, and that release says why it was lost.
            UpgradeReply::Lost => Err(lease_lost(&self.call, self.hold.token(), GONE)),
        }
    }
}

/// The same call (its id, owner, lease and lock) asking for `ask`: what a
/// change of access is named by, and what it leaves to abandon.
fn asking(call: &Call, ask: Ask) -> Call {
    Call {
        ask,
        ..call.clone()
    }
}

/// An upgrade's claim (the waiter's call) waits in the queue as an
/// acquisition does (at its head).
impl Queued for CallHold {
    type Got = u64;

    fn attempt(&self, waiter: &Waiter, mode: Mode, limit: Limit) -> Result<Attempted<u64>> {
        self.upgrade_step(&waiter.call, UpgradeStep::Attempt(mode), limit)
    }

    fn granted(&self, waiter: &Waiter, grant: Grant, limit: Limit) -> Result<u64> {
        let shared = &self.client.shared;
        if confirm(shared, &waiter.call, grant.token, || self.lost(), limit)? {
            self.hold.mark_revoked();
        }
        Ok(grant.token)
    }

    /// Withdrawn, unless it was settled in that last instant.
    fn leave(&self, waiter: &Waiter, limit: Limit) -> Result<Option<u64>> {
        match self.upgrade_step(&waiter.call, UpgradeStep::Withdraw, limit)? {
            Attempted::Got(token) => Ok(Some(token)),
            Attempted::Waiting(..) => Ok(None),
        }
    }

    /// A poll the deadline cut short may have upgraded the hold: the claim
    /// is withdrawn, as at any wait's end and with that leave's grace on
    /// the link, so the caller keeps the read (or gets the write, settled
    /// in that last instant) unless the withdrawal fails too.
    fn poll_cut_short(&self, waiter: &Waiter, _: Error) -> Result<Option<u64>> {
        let timeout = self.client.shared.config().command_timeout;
        let grace = link_grace(waiter.round_trip(), 1, timeout);
        self.leave(waiter, Limit::within(Instant::now() + grace))
    }

    /// The caller (`upgrade`) abandons what the claim may have left.
    fn failed(&self, _waiter: &Waiter, err: Error, _: Limit) -> Result<Option<u64>> {
        Err(err)
    }
}
