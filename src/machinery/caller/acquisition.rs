//! The acquire algorithm of one call on one lock: what an attempt sends
//! (`Acquire`) and makes of its reply, the hold it registers, how it leaves
//! the queue (`Cancel`) on timeout or cancellation and what a grant or a
//! failure comes to; the wait itself (parked, holding no connection,
//! riding out an outage, a handoff confirmed with `sync_replicas`) is
//! [`queue_wait`](crate::machinery::caller::queue_wait)'s, over its
//! [`Queued`] trait. Every failure after a request may have reached Redis
//! has the call abandoned (see [`abandons`](crate::machinery::holds::abandons)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connections::caller::Limit;
use crate::error::{Error, ErrorKind, Result};
use crate::machinery::caller::queue_wait::{confirm, wait_in_queue, Attempted, Queued};
use crate::machinery::caller::wait::Wait;
use crate::machinery::caller::waiters::{Grant, Waiter};
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::machinery::holds::permits_seen::PermitsSeen;
use crate::machinery::holds::{lease_lost, Hold, NewHold, FORCE_RELEASED};
use crate::machinery::observe::{self, Labels};
use crate::machinery::shared::Shared;
use crate::protocol::{
    Acquire, AcquireReply, Ask, Call, Cancel, CancelReply, Lease, LockKeys, Mode,
};

/// Why a hold handed to a waiter was lost before the waiter confirmed it.
const GRANT_GONE: &str = "it was handed to this call and gone by the time the call confirmed it \
                          (its lease ran out meanwhile, or a force release freed it)";

/// What an acquisition got ([`Acquisition::run`]): its hold, the call
/// that made it, how long it waited, and the quickest round trip of its
/// requests (`None`: none was answered).
pub(crate) type Acquired = (Arc<Hold>, Call, Duration, Option<Duration>);

/// One acquisition of one lock (its `keys`) asking for `ask` under a lease
/// policy, owned by its thread or by itself. The algorithm is the same for
/// every kind; the protocol values follow from `ask`.
pub(crate) struct Acquisition<'m> {
    pub(crate) shared: &'m Shared,
    /// The core's record of the permits in force its calls saw.
    pub(crate) permits_seen: &'m PermitsSeen,
    pub(crate) keys: &'m Arc<LockKeys>,
    pub(crate) ask: Ask,
    pub(crate) policy: LeasePolicy,
    /// The lease the policy gives with the client's settings, checked.
    pub(crate) lease: Lease,
    /// The call is an owner of its own (`<client id>:u<call>`), not its
    /// thread: it never re-enters, and its guard may go to any thread.
    pub(crate) unbound: bool,
    /// What the owner id carries after `@` instead of the client's
    /// identity (an election candidate's value).
    pub(crate) owner_tag: Option<&'m str>,
    /// The labels of this lock's metrics (see [`observe`]).
    pub(crate) labels: Labels,
}

impl Acquisition<'_> {
    /// Waits as `wait` says; what it got: its hold, registered (shared
    /// with the thread's other guards of it when the call re-entered it),
    /// the call that made it, how long the call waited, which is reported
    /// with how it ended, and the quickest round trip of its requests
    /// ([`Waiter::round_trip`]: the link its release goes over). Not
    /// released on drop: the core wraps it at once in the `CallHold` a
    /// guard releases. A wait that cannot wait makes one attempt that never
    /// queues (`try_lock`). The lock's slot is listened on first, within
    /// the deadline.
    pub(crate) fn run(&self, wait: &Wait) -> Result<Option<Acquired>> {
        let started = Instant::now();
        // A new call of this thread (or of its own, unbound) on this lock.
        let (shared, id) = (self.shared, self.shared.next_call_id());
        let call = Call {
            keys: Arc::clone(self.keys),
            owner: shared.owner_id(self.unbound.then_some(id), self.owner_tag),
            id,
            lease: self.lease,
            ask: self.ask,
        };
        let deadline = wait.deadline();
        shared.listen_at(self.keys.slot, deadline.ok().flatten());
        let waiter = Arc::new(Waiter::new(call.clone()));
        let result = wait_in_queue(self, shared, &waiter, deadline, wait, &self.labels);
        // A try's call may have run when it failed (a hold too few replicas
        // saw is given back already).
        let failed = |err: &Error| err.kind() != ErrorKind::NotReplicated;
        if deadline.is_err() && result.as_ref().is_err_and(failed) {
            shared.abandon_later(&call);
        }
        let waited = started.elapsed();
        let cancelled = deadline.is_ok() && wait.is_cancelled();
        let outcome = match &result {
            Ok(Some(_)) => "acquired",
            Ok(None) if cancelled => "cancelled",
            Ok(None) => "timed_out",
            Err(_) => "failed",
        };
        observe::wait_ended(&self.labels, outcome, waited);
        Ok(result?.map(|hold| (hold, call, waited, waiter.round_trip())))
    }

    /// Registers the hold this call got (renewed by the watchdog unless its
    /// lease is fixed). The lease
    /// counts from `since` (when a request that ran before the grant was
    /// sent) and lasts `lease_left` by Redis's clock.
    fn hold(&self, waiter: &Waiter, token: u64, since: Instant, lease_left: Duration) -> Arc<Hold> {
        let granted = NewHold {
            call: waiter.call.clone(),
            token,
            labels: self.labels.clone(),
            since,
            lease_left,
            max_hold: self.policy.max_hold(),
        };
        let drift = self.shared.config().clock_drift;
        let hold = self.shared.register_hold(Hold::new(granted, drift));
        // A force release's or a revocation's message may have come
        // before it was a hold.
        let (freed, revoked) = waiter.told(token);
        if freed {
            hold.mark_lost(FORCE_RELEASED);
        }
        if revoked {
            hold.mark_revoked();
        }
        hold
    }
}

/// A lease left of `pttl_ms` as Redis answered it (none if negative).
fn lease_ms(pttl_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(pttl_ms).unwrap_or(0))
}

impl Queued for Acquisition<'_> {
    type Got = Arc<Hold>;

    /// One run of the acquire script: the hold when acquired. A hold whose
    /// reply came after its lease ran out by this client's count (counted
    /// from the send: a stalled link, a paused process) is asked about once
    /// more, a repeat of the same call: Redis answers with the lease it has
    /// (or takes, queues or refuses anew if it was lost), so a caller is
    /// never handed a hold already lost that Redis gave it a moment ago.
    fn attempt(&self, waiter: &Waiter, mode: Mode, limit: Limit) -> Result<Attempted<Arc<Hold>>> {
        let (shared, call) = (self.shared, &waiter.call);
        // Re-entry needs a live guard of this thread, its exclusive one
        // first (see `Holds::held_by`); a semaphore's calls never re-enter.
        let reenters = self.ask.reentrant() && !self.unbound;
        let live_token = reenters.then(|| shared.held_by(call.keys.lock(), &call.owner).1);
        let op = Acquire {
            ask: self.ask,
            owner: &call.owner,
            lease: self.lease,
            waiter_timeout: shared.config().waiter_timeout,
            mode,
            call: call.id,
            live_token: live_token.unwrap_or(0),
        };
        let (drift, mut ask_again) = (shared.config().clock_drift, true);
        loop {
            let sent = Instant::now();
            let written = shared.caller.call_write(&call.keys, &op, limit)?;
            let (reply, replicated) = written.into_parts();
            let fence = shared.config().fence_life;
            (self.permits_seen).note(self.keys, self.ask.capacity(), reply.in_force(), fence);
            return match reply {
                // Counted out on arrival: asked once more.
                AcquireReply::Acquired { pttl_ms, .. }
                    if std::mem::take(&mut ask_again) && drift.is_over(sent, lease_ms(pttl_ms)) =>
                {
                    continue
                }
                // The hold, unless too few replicas saw it: then it is
                // abandoned, within the request's `limit`.
                AcquireReply::Acquired { token, pttl_ms, .. } => {
                    replicated.inspect_err(|_| shared.abandon_now(call, limit))?;
                    let hold = self.hold(waiter, token, sent, lease_ms(pttl_ms));
                    Ok(Attempted::Got(hold))
                }
                // A queue entry too few replicas saw costs at most its place
                // after a failover; the wait goes on.
                AcquireReply::Waiting {
                    pttl_ms,
                    position,
                    last_token,
                    ..
                } => Ok(Attempted::Waiting(pttl_ms, position, last_token)),
            };
        }
    }

    /// With `sync_replicas`, a shortfall gives the hold back at once, and a
    /// grant whose confirmation came back after this process counts it out
    /// (a slow link) is not returned: it is gone as far as the call knows
    /// (`LeaseLost`), so the call asks Redis once more, as for a grant
    /// counted out on arrival (`wait_in_queue`).
    fn granted(&self, waiter: &Waiter, grant: Grant, limit: Limit) -> Result<Arc<Hold>> {
        let lost = || lease_lost(&waiter.call, grant.token, GRANT_GONE);
        let revoked =
            confirm(self.shared, &waiter.call, grant.token, lost, limit).inspect_err(|err| {
                if err.kind() == ErrorKind::NotReplicated {
                    self.shared.abandon_now(&waiter.call, limit);
                } else if !err.is_lease_lost() {
                    self.shared.abandon_later(&waiter.call);
                }
            })?;
        let drift = self.shared.config().clock_drift;
        if drift.is_over(grant.since, grant.ttl) {
            return Err(lost());
        }
        let hold = self.hold(waiter, grant.token, grant.since, grant.ttl);
        if revoked {
            hold.mark_revoked();
        }
        observe::handed_over(&self.labels, grant.delivered.elapsed());
        Ok(hold)
    }

    /// Removes the waiter's queue entry; if the lock had been handed to the
    /// call already, Redis gives it back (to the next waiters) instead of
    /// keeping it: this leave may reach Redis after the call stopped
    /// waiting for its reply (a stalled link delivers it late, the client
    /// may be gone), and a hold kept then would stay taken until its lease
    /// ran out, with nobody to use or release it. The wait ends without the
    /// lock. If the request fails, the watchdog abandons the call later
    /// (it may have been handed the lock meanwhile).
    fn leave(&self, waiter: &Waiter, limit: Limit) -> Result<Option<Arc<Hold>>> {
        let entry = waiter.call.entry();
        let abandon = |_: &Error| self.shared.abandon_later(&waiter.call);
        let written = (self.shared.caller).call_write(&waiter.call.keys, &Cancel { entry }, limit);
        let reply = written.inspect_err(abandon)?.into_parts().0;
        if reply == CancelReply::GivenBack {
            let (id, name) = (waiter.call.id, waiter.call.keys.name());
            log::debug!(
                "fairlock: call {id} on {name:?} was handed the lock as it left; given back"
            );
        }
        Ok(None)
    }

    /// A hold a cancelled wait's request got is let go: no guard will
    /// stand for it, and the wait's leave gives it back.
    fn kept_when_cancelled(&self, hold: Arc<Hold>) -> Option<Arc<Hold>> {
        self.shared.unregister_hold(&hold);
        None
    }

    /// Not acquired in time, as a wait that ran out while parked: whatever
    /// a request of the call took or queued goes back once Redis answers.
    fn out_of_time(&self, waiter: &Waiter, _: Error) -> Result<Option<Arc<Hold>>> {
        self.shared.abandon_later(&waiter.call);
        Ok(None)
    }

    /// Unreachable past the wait's patience: the call may still run (or
    /// have run) in Redis, so whatever it took or queued goes back once
    /// Redis answers. Answered with an error: it leaves the queue (a hold
    /// handed to it meanwhile given back); a hold too few replicas saw was
    /// given back already, and the call never queued.
    fn failed(&self, waiter: &Waiter, err: Error, limit: Limit) -> Result<Option<Arc<Hold>>> {
        if err.is_connection() {
            self.shared.abandon_later(&waiter.call);
        } else if err.kind() != ErrorKind::NotReplicated {
            // (A leave that fails is abandoned later: the error is the call's.)
            let _ = self.leave(waiter, limit);
        }
        Err(err)
    }
}
