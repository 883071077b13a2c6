//! The one guard core: a hold made by one acquire call and released by
//! naming that call, whatever the kind (a mutex's hold, a semaphore's
//! permits, a read, a write, a leadership). Every guard releases, drops and
//! abandons through it; the release reply is the same shape for every
//! kind ([`ReleaseReply`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connections::caller::Limit;
use crate::error::{Error, Result};
use crate::machinery::caller::queue_wait::{leave_within, link_grace, LEAVE_GRACE};
use crate::machinery::caller::target::Target;
use crate::machinery::core::Core;
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::machinery::holds::{Hold, GONE, KEYS_GONE};
use crate::protocol::{Call, Release, ReleaseReply};

/// How a give-back's failed release is logged ([`CallHold::release_logged`]).
const GIVEN_BACK: &str = "failed, the watchdog gives it back";

/// One call's hold, released once: by [`release`](Self::release) or, best
/// effort, on drop.
pub(crate) struct CallHold {
    pub(crate) client: Arc<Core>,
    /// The lock it holds, and the policy of the handle that took it (a
    /// guard gives that handle back).
    pub(crate) target: Target,
    pub(crate) policy: LeasePolicy,
    /// The hold: shared with the thread's other guards of it when a call
    /// re-entered it (a mutex's), with the call that first took it.
    pub(crate) hold: Arc<Hold>,
    /// The acquire call that made this guard (the first one, or a
    /// re-entry): its release names this call, and so does an abandon.
    pub(crate) call: Call,
    /// How long the acquire call waited, from its start to its return.
    pub(crate) waited: Duration,
    /// The quickest round trip of that call's requests (`None`: none was
    /// answered): the link to its lock's server, which its release goes
    /// over, as the call found it moments before a give-back as it ends.
    pub(crate) round_trip: Option<Duration>,
    pub(crate) released: bool,
}

/// Gives back `holds`, taken by one call (a multi-lock's parts) that then
/// ended without the rest or failed, one after another in the order
/// given, so that the call returns on time whatever the server does, and
/// with every release answered before it returns on a link that is only
/// slow: all done by the wait's `end`, or by now if that has passed (the
/// leave that ended the wait had its own grace), and their
/// [`link_grace`]: [`LEAVE_GRACE`], a round trip of the link for each and
/// one more, at most one command timeout. The link is the quickest round
/// trip of the calls that took them (on a cluster, the quickest node's):
/// most took one request, which a busy machine slows at random (8-32 ms
/// each to a local server beside a CPU hog), and in a stall the call
/// returns after the sum. Without an end, one command timeout from now
/// and `LEAVE_GRACE`. Pool waits included; what is not done by then the
/// watchdog gives back. A failure is logged as
/// [`release_after`](CallHold::release_after) logs it.
pub(crate) fn give_back(holds: Vec<&mut CallHold>, end: Option<Instant>) {
    let Some(first) = holds.first() else {
        return;
    };
    let (now, timeout) = (Instant::now(), first.client.config().command_timeout);
    let quickest = holds.iter().filter_map(|hold| hold.round_trip).min();
    let by = match end {
        Some(end) => end.max(now) + link_grace(quickest, holds.len(), timeout),
        None => now + timeout + LEAVE_GRACE,
    };
    for hold in holds {
        hold.release_logged(Limit::within(by), GIVEN_BACK);
    }
}

impl CallHold {
    /// Releases the hold (once; later calls do nothing). Waiters of this
    /// client that the release handed a hold to wake from its reply. (A
    /// drop releases within one command timeout, pool waits included: see
    /// `Drop`.)
    pub(crate) fn release(&mut self) -> Result<()> {
        self.release_within(Limit::by(None))
    }

    /// Releases a hold taken by a call that then ended or failed (a
    /// multi-lock's part taken before a later one gave up; the read of an
    /// upgrade, the hold of a downgrade that failed), so that the call
    /// returns on time whatever the server does: as
    /// [`release`](Self::release) does, all done by `end` (its wait's:
    /// `Wait::ends_by`, its deadline or its cancel) and the grace of a
    /// request on its link ([`link_grace`]), as the wait's own leave, or,
    /// with none, one command timeout from `started` (a change of access is
    /// one request: the call and this release take one timeout all told)
    /// and [`LEAVE_GRACE`], pool wait included; what is not done by then
    /// the watchdog gives back. A failure is logged, but for a hold found
    /// gone (nothing left to give back): the call has its own error to
    /// return.
    pub(crate) fn release_after(&mut self, end: Option<Instant>, started: Instant) {
        self.release_logged(Limit::within(self.released_by(end, started)), GIVEN_BACK);
    }

    /// Releases the hold within `limit`, a failure logged (`how` it
    /// failed), but for a hold found gone: its loss was logged, and a call
    /// that ends has its own error to return.
    fn release_logged(&mut self, limit: Limit, how: &str) {
        let released = self.release_within(limit);
        if let Some(err) = released.err().filter(|err| !err.is_lease_lost()) {
            let (release, name) = (self.call.keys.kind().call("release"), self.call.keys.name());
            log::warn!("fairlock: the {release} {name:?} {how}: {err}");
        }
    }

    /// When [`release_after`](Self::release_after) gives up: `end` and the
    /// grace of a request on its link (or one command timeout from
    /// `started` and a leave's grace), or now.
    pub(super) fn released_by(&self, end: Option<Instant>, started: Instant) -> Instant {
        let timeout = self.client.config().command_timeout;
        let by = match end {
            Some(end) => end + link_grace(self.round_trip, 1, timeout),
            None => started + timeout + LEAVE_GRACE,
        };
        by.max(Instant::now())
    }

    /// Redis said the hold is gone (a change of its access found it so,
    /// without saying why): Redis is asked why (as a renewal would be: a
    /// force release, its keys gone, the server's data lost across a gap)
    /// and the hold is counted lost with that reason (else the one of a
    /// hold found gone, [`lost`](Self::lost)), then released; both within
    /// what [`release_after`](Self::release_after) allows. The error says
    /// why.
    pub(crate) fn found_gone(&mut self, end: Option<Instant>, started: Instant) -> Error {
        let _ = self.check(Limit::within(self.released_by(end, started)));
        let lost = self.lost();
        self.release_after(end, started);
        lost
    }

    /// `err` of a call on the hold (`what`: an upgrade, a downgrade, its
    /// release) that met an outage (Redis unreachable or stalled, or
    /// refusing for now) when this client had counted the hold lost by
    /// then: the loss is the caller's error (`LeaseLost`), as an unlock's
    /// is, naming what the call met; the watchdog gives back what Redis
    /// still has. Any other error as it is.
    pub(crate) fn lost_meanwhile(&self, err: Error, what: &str) -> Error {
        let outage = err.is_connection() || err.is_refused_for_now();
        if !outage || !self.hold.is_lost() {
            return err;
        }
        let lost = self.lost();
        let what = self.call.keys.kind().act(what);
        let message = format!(
            "{lost}; its {what} failed too, and the watchdog gives back what redis still has \
             of it: {err}"
        );
        lost.reworded(message)
    }

    /// A hold not confirmed since the client's connection to Redis came
    /// back from a gap ([`Hold::is_unconfirmed_after_gap`]) is asked about
    /// once now (a renewal that leaves its lease as it is, as the
    /// watchdog's check after a gap), by `end` (a wait's end, or now if
    /// that has passed) and a leave's grace, or within one command timeout
    /// without one: one Redis lost with its data (a restart, a failover) is
    /// counted lost at once, not when the watchdog's check comes back. Any
    /// other hold sends nothing.
    pub(crate) fn check_after_gap(&self, end: Option<Instant>) -> Result<()> {
        if !self.hold.is_unconfirmed_after_gap() {
            return Ok(());
        }
        self.check(leave_within(end))
    }

    /// Asks Redis whether the hold is still this call's, within `limit`,
    /// as the watchdog's check after a gap does (a renewal that leaves its
    /// lease as it is), and counts what it says: still held, the gap
    /// confirmed over (no lease counted anew); gone, the hold lost with
    /// the reason the reply gives ([`Hold::renewal_answered`]).
    fn check(&self, limit: Limit) -> Result<()> {
        let (hold, shared) = (&self.hold, &self.client.shared);
        let op = hold.renewal(None);
        let asked = Instant::now();
        let written = shared.caller.call_write(&hold.call.keys, &op, limit)?;
        let (reply, _) = written.into_parts();
        hold.renewal_answered(op.token, reply, asked, Some(Duration::ZERO));
        Ok(())
    }

    /// As [`release`](Self::release), all done by `end`, pool wait
    /// included (the parts of a multi-lock, which share one timeout).
    pub(crate) fn release_by(&mut self, end: Instant) -> Result<()> {
        self.release_within(Limit::within(end))
    }

    fn release_within(&mut self, limit: Limit) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let shared = &self.client.shared;
        // Counted lost, it stays lost: what Redis still has of it (its end
        // there comes after this client's count) is freed all the same.
        let counted_lost = self.hold.is_lost();
        shared.unregister_hold(&self.hold);
        let call = &self.call;
        let release = Release {
            owner: &call.owner,
            token: self.hold.token(),
            call: call.id,
            vouched_until: self.vouched_until(),
        };
        let sent = (shared.caller).call_write(&call.keys, &release, limit);
        // Not sent, or its reply lost: the watchdog gives the call back once
        // Redis answers, so the hold does not wait out its lease.
        let abandon = |_: &Error| shared.abandon_later(call);
        let (reply, replicated) = match sent.inspect_err(abandon) {
            Ok(written) => written.into_parts(),
            // Counted lost, it is lost whatever outage its release met (a
            // stall, a refusal that passes): that is what the caller must
            // hear. What Redis answered otherwise (another build's data, an
            // ACL) is the answer, as for a hold not counted lost.
            Err(err) if counted_lost => return Err(self.lost_meanwhile(err, "release")),
            Err(err) => return Err(err),
        };
        if let ReleaseReply::HandedOver(next) = &reply {
            shared.grant_own(next);
        }
        if counted_lost || matches!(reply, ReleaseReply::NotHeld | ReleaseReply::Gone) {
            let gone = reply == ReleaseReply::Gone;
            return Err(self.hold.lost(call, if gone { KEYS_GONE } else { GONE }));
        }
        replicated
    }

    /// Until when this client vouches for the hold's lease at Redis, so
    /// that its release reads no PTTL: its own count of the lease, less
    /// the command timeout (the longest a request and its reply may take,
    /// repeats after a signal included: `connections::steady`), for a
    /// lease of at most the fence life (the freed key then keeps at most
    /// two fence lives, as the script's check of the PTTL would have it).
    fn vouched_until(&self) -> Option<Instant> {
        let config = self.client.config();
        let longest = self.call.lease.duration().max(config.lease);
        let end = (longest <= config.fence_life).then(|| self.hold.sure_end());
        end.flatten()?.checked_sub(config.command_timeout)
    }

    /// The hold was found gone (its lease ran out, a force unlock): marked
    /// lost, and the error that says so, and why when this client knows.
    pub(crate) fn lost(&self) -> Error {
        self.hold.lost(&self.call, GONE)
    }
}

impl Drop for CallHold {
    /// Releases within one command timeout, pool wait included; what did
    /// not go out by then the watchdog abandons it. A failure is logged,
    /// but for a hold found gone (its loss was logged). A forked child's
    /// copy of the guard releases nothing: the hold is the parent's.
    fn drop(&mut self) {
        if self.released || self.client.is_copy() {
            return;
        }
        let by = Instant::now() + self.client.config().command_timeout;
        self.release_logged(Limit::by(Some(by)), "on drop failed");
    }
}
