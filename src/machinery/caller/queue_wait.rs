//! Waiting in a lock's queue, written once for every call that waits
//! there: an acquisition (any kind, any ask) and an upgrade's claim. The
//! call is sent, it sleeps parked on its [`Waiter`] holding no connection,
//! is woken by a grant, a poll time or its deadline, rides out an outage
//! for a while, and leaves the queue when it stops waiting. What each
//! request is, what a grant gives and how a failure is cleaned up are the
//! caller's ([`Queued`]); a grant is confirmed with `sync_replicas` the
//! same way for both ([`confirm`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connections::caller::Limit;
use crate::error::{Error, Result};
use crate::machinery::caller::wait::{NoWait, Wait};
use crate::machinery::caller::waiters::{Grant, Waiter, Wake};
use crate::machinery::observe::{self, Labels};
use crate::machinery::shared::Shared;
use crate::protocol::{Ask, Call, Mode, Renew, RenewReply};

/// How long past its deadline a waiting call may take to leave the queue,
/// a pooled connection and the reply included (see [`Limit::within`]), on
/// a link whose round trip is short (the machine's share: a thread woken
/// late on a busy machine): what is not done by then is abandoned later,
/// so a timed wait returns by its deadline plus this (and a request's
/// `REPLY_GRACE`, connections/caller.rs, when one was in flight instead)
/// whatever the server does. The leave that ends a parked wait (its
/// deadline, its cancel), whose answer is what the call returns, is given
/// the link's share too ([`link_grace`]).
pub(super) const LEAVE_GRACE: Duration = Duration::from_millis(50);

/// The grace past a wait's end of `requests` requests that end it, sent
/// one after another: [`LEAVE_GRACE`], a round trip each (`round_trip`:
/// the quickest the requests of the call that measured the link took,
/// [`Waiter::round_trip`]; `None`: none answered, nothing added), and one
/// more for the link's jitter, at most one `command_timeout` (what any
/// request is given). A request on a link slower than 50 ms a round trip
/// could not be answered within `LEAVE_GRACE` alone. The leave that ends a
/// parked wait (its deadline, its cancel) is one: an upgrade whose
/// withdrawal goes unanswered cannot say it still holds its read (the
/// claim may have been settled), it failed with `Connection`, its read
/// released. A multi-lock's give-back of the parts it took, one release
/// each: they were sent without waiting for their replies, still held when
/// the call returned. In a stall a wait still returns by its deadline and
/// this grace, which the link it measured bounds, not the stall.
pub(crate) fn link_grace(
    round_trip: Option<Duration>,
    requests: usize,
    command_timeout: Duration,
) -> Duration {
    let links = round_trip.map_or(Duration::ZERO, |rt| rt * (requests as u32 + 1));
    (LEAVE_GRACE + links).min(command_timeout.max(LEAVE_GRACE))
}

/// The limit of a call that ends a wait ending by `end`, or now if that
/// has passed (a leave after a failure keeps to the wait's end as one past
/// it does; a check after a gap): that and [`LEAVE_GRACE`]; none without
/// an end.
pub(super) fn leave_within(end: Option<Instant>) -> Limit {
    end.map_or(Limit::default(), |end| {
        Limit::within(end.max(Instant::now()) + LEAVE_GRACE)
    })
}

/// True when `err` is the deadline's doing: it passed while a request
/// waited for a pooled connection or for its reply.
fn out_of_time(err: &Error, deadline: Option<Instant>) -> bool {
    (err.is_pool_busy() || err.is_timeout()) && deadline.is_some_and(|at| Instant::now() >= at)
}

/// What one request of a waiting call was answered with.
pub(crate) enum Attempted<T> {
    /// It got what it asked for.
    Got(T),
    /// It waits: the lease left of what holds the lock (ms), its place in
    /// the queue (`None`: not queued) and the last fencing token issued.
    Waiting(i64, Option<u64>, u64),
}

/// A call that waits in a lock's queue.
pub(crate) trait Queued {
    /// What it gets: a guard's hold, an upgrade's token.
    type Got;

    /// One request, in `mode` (one round trip), within `limit`.
    fn attempt(&self, waiter: &Waiter, mode: Mode, limit: Limit) -> Result<Attempted<Self::Got>>;

    /// What a grant (a push message, a release reply, a heartbeat) gives,
    /// confirmed within `limit`.
    fn granted(&self, waiter: &Waiter, grant: Grant, limit: Limit) -> Result<Self::Got>;

    /// Leaves the queue as the wait ends (its deadline, a cancel); what it
    /// got instead if it was granted in that last instant and keeps that
    /// (an upgrade's claim; an acquisition gives back a hold handed to it
    /// then). Within `limit`.
    fn leave(&self, waiter: &Waiter, limit: Limit) -> Result<Option<Self::Got>>;

    /// How the call ends after a request failed with `err` (Redis answered
    /// with an error, or could not be reached past the wait's patience):
    /// whatever it may have left in Redis is abandoned; a leave of the
    /// queue is kept to `limit` (the wait's end and [`LEAVE_GRACE`]).
    fn failed(&self, waiter: &Waiter, err: Error, limit: Limit) -> Result<Option<Self::Got>>;

    /// How the call ends when its deadline passed while its request
    /// waited for a pooled connection that every other call of the client
    /// kept busy ([`Error::is_pool_busy`]), or for a reply that did not
    /// come by then (a stalled or slow server): by default as after any
    /// failure.
    fn out_of_time(&self, waiter: &Waiter, err: Error) -> Result<Option<Self::Got>> {
        self.failed(waiter, err, Limit::within(Instant::now() + LEAVE_GRACE))
    }

    /// How the call ends when its deadline passed with a later request of
    /// it (a poll) unanswered, or waiting for a pooled connection: by
    /// default as when out of time.
    fn poll_cut_short(&self, waiter: &Waiter, err: Error) -> Result<Option<Self::Got>> {
        self.out_of_time(waiter, err)
    }

    /// What a wait cancelled while the request that got `got` was out (a
    /// poll, a first attempt, a grant's confirmation) does with it: `Some`
    /// keeps it, as the leave of an upgrade keeps a claim settled as it
    /// leaves (the default); `None` lets it go, for the wait's leave to
    /// give it back (an acquisition's hold).
    fn kept_when_cancelled(&self, got: Self::Got) -> Option<Self::Got> {
        Some(got)
    }
}

/// Waits in the queue until `queued` gets what it asks for, its `deadline`
/// (`wait`'s, `None`: no limit) passes or `wait`'s canceller is cancelled,
/// counted in the metrics of the lock `labels` names; a wait that cannot
/// wait ([`NoWait`]) makes one attempt that never queues. The `waiter` of
/// the call is registered before its first request reaches Redis, so that
/// no handoff message can arrive for an id nobody listens to, and
/// forgotten once the wait ends; the caller keeps it, to read what its
/// requests measured of the link ([`Waiter::round_trip`]). A first request fails at once when Redis is
/// unreachable; a queued call rides out a restart or a failover (or a
/// refusal that passes, `OOM`) for the client's outage patience, as its
/// place (or a new one) is still there when Redis is back.
pub(crate) fn wait_in_queue<Q: Queued>(
    queued: &Q,
    shared: &Shared,
    waiter: &Arc<Waiter>,
    deadline: std::result::Result<Option<Instant>, NoWait>,
    wait: &Wait,
    labels: &Labels,
) -> Result<Option<Q::Got>> {
    let Ok(deadline) = deadline else {
        return match queued.attempt(waiter, Mode::Try, Limit::default())? {
            Attempted::Got(got) => Ok(Some(got)),
            Attempted::Waiting(..) => Ok(None),
        };
    };
    shared.park(Arc::clone(waiter));
    observe::waiting(labels, 1.0);
    for cancel in wait.cancellers() {
        cancel.watch(waiter);
    }
    let mut mode = Mode::First;
    let mut outage = None;
    // What the outage last said (a refusal, an unreachable server): a
    // request the patience's own end cut short says nothing of Redis.
    let mut cause: Option<Error> = None;
    let result = loop {
        let sent = Instant::now();
        if mode == Mode::First {
            // Any handoff comes after this request has queued the waiter.
            waiter.saw_queued(sent, 0);
        }
        // Through an outage (as far as this wait's requests or its
        // heartbeats know), no request waits past the patience's end.
        let since = outage.or(waiter.unheard_since());
        let patience_end = since.map(|since| since + shared.config().outage_patience());
        let by = deadline.into_iter().chain(patience_end).min();
        let attempted = queued.attempt(waiter, mode, Limit::by(by));
        // The link's share of the grace of its leave ([`link_grace`]).
        let took = attempted.is_ok().then(|| sent.elapsed());
        let reached =
            !matches!(&attempted, Err(err) if err.is_connection() || err.is_refused_for_now());
        waiter.answered(reached, took);
        match attempted {
            Ok(Attempted::Got(got)) => match kept(queued, waiter, got) {
                Some(got) => break Ok(Some(got)),
                None => break leave_at_end(queued, shared, waiter, deadline),
            },
            Ok(Attempted::Waiting(pttl_ms, position, last_token)) => {
                (outage, cause) = (None, None);
                if let Some(position) = position {
                    if mode == Mode::First {
                        // On the caller's thread, once Redis has queued the
                        // call (the soak tells arrival order by it).
                        let (id, name) = (waiter.call.id, waiter.call.keys.name());
                        log::trace!(
                            "fairlock: queued at position {position} (call {id} on {name:?})"
                        );
                    }
                    waiter.in_queue(sent, position, last_token, pttl_ms);
                    // A fixed lease shorter than the heartbeats see to is
                    // asked about every third of it: a lease handed over
                    // counts from the last request that saw it queued.
                    let third = waiter.call.lease.duration() / 3;
                    if waiter.call.lease.is_fixed() && third < shared.config().watchdog_period() {
                        waiter.poll_by(sent + third);
                    }
                }
            }
            // A first request unanswered by then fails as when Redis cannot
            // be had: nothing is known of the lock.
            Err(err)
                if out_of_time(&err, deadline) && (mode == Mode::Poll || err.is_pool_busy()) =>
            {
                // Heartbeated no more: the abandon goes first (a poll whose
                // reply the deadline did not wait for may have taken the
                // lock).
                waiter.give_up();
                break queued.poll_cut_short(waiter, err);
            }
            // A refusal that passes (`OOM`, `MISCONF`, `NOREPLICAS`: nothing
            // ran) is ridden out as an outage is, the place kept.
            Err(err) if (err.is_connection() || err.is_refused_for_now()) && mode == Mode::Poll => {
                let first = waiter.unheard_since().map_or(sent, |since| since.min(sent));
                let patience = shared.config().outage_patience();
                // A request that timed out as the patience ended was cut
                // short by it: what Redis said before (to this wait's
                // requests, else to its refused heartbeats) is the outage's
                // cause.
                let ran_out = patience_end.is_some_and(|end| Instant::now() >= end);
                let cut_short = err.is_timeout() && ran_out;
                let refused = waiter.heartbeats_refused_as();
                let said = (cause.take().map(|said| (said, "the one before it")))
                    .or(refused.map(|said| (said, "its heartbeats before it")))
                    .filter(|_| cut_short);
                // Requests failing for want of Redis since the first (set
                // once) try again until that has lasted the patience.
                let unanswered = outage.get_or_insert(first).elapsed();
                if unanswered >= patience {
                    let gave_up = format!(
                        "a queued call gave up after {patience:?} with redis unreachable or refusing \
                         it (its patience: waiter_timeout + connect_timeout)"
                    );
                    // What is left in Redis is dealt with as the last request's
                    // error says (a timeout's call may have run).
                    break match (queued.failed(waiter, err, leave_within(deadline)), said) {
                        (Err(_), Some((said, before))) => Err(said.during(format_args!(
                            "{gave_up}; its last request had no reply by then, {before}"
                        ))),
                        // Only its heartbeats failed before, none refused: the
                        // request, sent as the patience they used up ended, had
                        // what was left of it (1 ms), a figure that says nothing
                        // of Redis.
                        (Err(err), None) if cut_short => {
                            Err(err.without_its_figure().during(format_args!(
                                "{gave_up}; nothing it sent had a reply for {} ms, its last \
                                 request none by then",
                                unanswered.as_millis()
                            )))
                        }
                        (ended, _) => ended
                            .map_err(|err| err.during(format_args!("{gave_up}; its last request"))),
                    };
                }
                log::debug!("fairlock: waiting through an outage: {err}");
                cause = Some(err);
                shared.retry_in_order(waiter);
            }
            Err(err) => break queued.failed(waiter, err, leave_within(deadline)),
        }
        mode = Mode::Poll;
        match waiter.sleep(deadline) {
            // A grant this process counts out before it is used: its lease
            // counts from the last request that saw the waiter queued, and
            // that request may have been answered late (a stall, a pause).
            // Redis says, in one poll, whether the call holds the lock (its
            // lease as Redis has it) or lost the grant and queued again:
            // a caller is never handed a hold already lost.
            Wake::Granted(grant) if shared.config().clock_drift.is_over(grant.since, grant.ttl) => {
                log::debug!(
                    "fairlock: a grant of {:?} (token {}) was counted out on arrival; asking redis",
                    waiter.call.keys.name(),
                    grant.token
                );
            }
            Wake::Granted(grant) => {
                // Its confirmation (sync_replicas) keeps to the deadline too:
                // one unanswered by then is given up as a parked wait is.
                let by = deadline.map(|at| at.max(Instant::now()));
                break match queued.granted(waiter, grant, Limit::by(by)) {
                    Err(err) if out_of_time(&err, by) => {
                        waiter.give_up();
                        queued.out_of_time(waiter, err)
                    }
                    // Gone before it was confirmed (a force release), or
                    // counted out by the time its confirmation came back:
                    // the call asks Redis, and queues again if it lost it,
                    // as a grant counted out on arrival does.
                    Err(err) if err.is_lease_lost() => continue,
                    Ok(got) => match kept(queued, waiter, got) {
                        Some(got) => Ok(Some(got)),
                        None => leave_at_end(queued, shared, waiter, deadline),
                    },
                    Err(err) => Err(err),
                };
            }
            Wake::Poll => {}
            Wake::GaveUp => break leave_at_end(queued, shared, waiter, deadline),
        }
    };
    shared.unpark(waiter.call.id);
    observe::waiting(labels, -1.0);
    result
}

/// `got`, unless the wait was cancelled while the request that got it was
/// out and `queued` lets it go then ([`Queued::kept_when_cancelled`]): a
/// cancelled wait returns `Ok(None)` once its request is over
/// (`WaitCanceller`), and its leave gives back what that request took.
fn kept<Q: Queued>(queued: &Q, waiter: &Waiter, got: Q::Got) -> Option<Q::Got> {
    if !waiter.is_cancelled() {
        return Some(got);
    }
    let kept = queued.kept_when_cancelled(got);
    if kept.is_none() {
        // Heartbeated no more: it leaves.
        waiter.give_up();
    }
    kept
}

/// The leave that ends a wait past its `deadline` (or cancelled, a
/// deadline come early): it takes no longer than its grace, which follows
/// the link (a stalled server or an outage: the watchdog abandons the call
/// once Redis answers; a refusal that passes, `NOREPLICAS` or `MISCONF`,
/// and a server reached that serves nothing for now, `BUSY` with someone's
/// long script, `LOADING`, `CLUSTERDOWN`, end it the same way, once Redis
/// takes the abandon).
fn leave_at_end<Q: Queued>(
    queued: &Q,
    shared: &Shared,
    waiter: &Waiter,
    deadline: Option<Instant>,
) -> Result<Option<Q::Got>> {
    let by = deadline.map_or(Instant::now(), |at| at.max(Instant::now()));
    let grace = link_grace(waiter.round_trip(), 1, shared.config().command_timeout);
    match queued.leave(waiter, Limit::within(by + grace)) {
        Err(err)
            if out_of_time(&err, Some(by)) || err.is_refused_for_now() || err.is_not_serving() =>
        {
            queued.out_of_time(waiter, err)
        }
        left => left,
    }
}

/// With `sync_replicas`, makes sure enough replicas saw the handoff that
/// granted `call` `token` before it returns: one renewal (a write, which
/// leaves a fixed lease as it is, and an upgrade's lease end, which the
/// hold keeps: capped at a maximum hold) and a `WAIT`, in one round trip,
/// within `limit`. The error `lost` makes when the hold is gone; a
/// shortfall is the error. True when the renewal says a revocation asks the
/// hold to let go: its message may have come before the hold was this
/// client's.
pub(crate) fn confirm(
    shared: &Shared,
    call: &Call,
    token: u64,
    lost: impl FnOnce() -> Error,
    limit: Limit,
) -> Result<bool> {
    if shared.config().sync_replicas.is_none() {
        return Ok(false);
    }
    let op = Renew {
        owner: &call.owner,
        token,
        first: token,
        call: call.id,
        lease: (!call.lease.is_fixed() && call.ask != Ask::Upgrade).then(|| call.lease.duration()),
    };
    // Its errors name the call it confirms, not the renewal it sends.
    let kind = call.keys.kind();
    let confirmed = match call.ask {
        Ask::Upgrade => "upgrade",
        _ => "acquire",
    };
    let named = |err: Error| err.renamed(&kind.call("renew"), &kind.call(confirmed));
    let written = (shared.caller).call_write(&call.keys, &op, limit);
    let (renewed, replicated) = written.map_err(named)?.into_parts();
    if !renewed.is_held() {
        return Err(lost());
    }
    replicated.map_err(named)?;
    Ok(renewed == RenewReply::Revoked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leave_is_given_two_round_trips_of_the_link_beyond_its_grace_at_most_a_command_timeout() {
        let ms = Duration::from_millis;
        let timeout = ms(5000);
        assert_eq!(link_grace(None, 1, timeout), LEAVE_GRACE);
        assert_eq!(link_grace(Some(ms(1)), 1, timeout), ms(52));
        // A 60 ms round trip: the leave's reply comes 60 ms after the
        // deadline, past LEAVE_GRACE alone.
        assert_eq!(link_grace(Some(ms(60)), 1, timeout), ms(170));
        assert_eq!(link_grace(Some(ms(4000)), 1, timeout), timeout);
        // A command timeout below LEAVE_GRACE takes nothing from it.
        assert_eq!(link_grace(Some(ms(30)), 1, ms(20)), LEAVE_GRACE);
    }

    #[test]
    fn requests_sent_one_after_another_are_given_a_round_trip_each_and_one_more() {
        let ms = Duration::from_millis;
        let timeout = ms(5000);
        // Three releases on a 60 ms link.
        assert_eq!(link_grace(Some(ms(60)), 3, timeout), ms(50 + 180 + 60));
        assert_eq!(link_grace(None, 3, timeout), LEAVE_GRACE);
        assert_eq!(link_grace(Some(ms(2000)), 3, timeout), timeout);
    }
}
