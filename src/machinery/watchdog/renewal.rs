//! One round's work for one slot (or for the one server): renew held
//! leases, heartbeat queued waiters, abandon calls whose outcome was never
//! learned. It runs on connections of the watchdog's own, outside the pool,
//! so user calls that hold every pooled connection (a slow or stalled
//! server) never make a renewal wait for one. The three are sent and read
//! one same way ([`exchange`]), each reply applied by its kind ([`apply`]).

use std::slice;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::connections::caller::during;
use crate::connections::scripts::Scripts;
use crate::connections::slot_map::Address;
use crate::connections::steady;
use crate::error::{Error, Result, Retry};
use crate::machinery::caller::waiters::Waiter;
use crate::machinery::holds::abandons::ToAbandon;
use crate::machinery::holds::Hold;
use crate::machinery::shared::{Shared, Work};
use crate::machinery::watchdog::Watchdog;
use crate::protocol::{
    unexpected, Abandon, Heartbeat, HeartbeatReply, Operation, Renew, SyncReplicas, WaiterStatus,
};

/// Runs one batch (on `node`, the master of its slot as the slot map says,
/// if known) and applies its replies. Returns the first error.
pub(crate) fn run(
    shared: &Shared,
    watchdog: &Watchdog,
    batch: &[Work],
    node: Option<&Address>,
) -> Result<()> {
    let (abandons, renewals): (Vec<&Work>, Vec<&Work>) =
        (batch.iter()).partition(|work| matches!(work, Work::Abandon(_)));
    let mut outcome = Ok(());
    // The renewals and heartbeats in one pipeline, then the abandons in
    // another: many calls to give back cost one round trip, and hold the
    // next round's renewals back no longer than that. Once Redis cannot be
    // reached, they wait for the next round (they would wait a command
    // timeout, and so would a client's drop).
    for (work, sync) in [(renewals, shared.config().sync_replicas), (abandons, None)] {
        if !work.is_empty() && !outcome.as_ref().is_err_and(Error::is_connection) {
            outcome = outcome.and(send(shared, watchdog, &work, node, sync));
        }
    }
    outcome
}

/// Sends `work` (see [`exchange`]) and applies the replies. Returns the
/// first error: the pipeline's, or an abandon's to send again.
fn send(
    shared: &Shared,
    watchdog: &Watchdog,
    work: &[&Work],
    node: Option<&Address>,
    sync: Option<SyncReplicas>,
) -> Result<()> {
    let sent = Instant::now();
    let (replies, replicated) = match exchange(shared, watchdog, work, node, sync) {
        Ok(exchanged) => exchanged,
        Err(err) => {
            // Without a confirmed renewal, a hold counts as lost once its
            // last confirmed lease has run out (Hold::is_lost compares the
            // time); one tried again soon ([`again_soon`]) may still be
            // renewed before then. Not heartbeated for want of Redis, a
            // waiter not at the head of its queue would otherwise wait for
            // Redis forever.
            let patience = shared.config().outage_patience();
            for work in work {
                match work {
                    Work::Renew(hold) if again_soon(shared, hold) => {
                        watchdog.recheck.store(true, Ordering::Relaxed)
                    }
                    Work::Heartbeat(waiters) if err.is_connection() => {
                        (waiters.iter()).for_each(|waiter| waiter.unheard(sent, patience, &err))
                    }
                    _ => {}
                }
            }
            return Err(err);
        }
    };
    // Too few replicas acknowledged the renewals on `node`: said at warn
    // the first time in a row, and once at info when enough do again.
    if work.iter().any(|work| matches!(work, Work::Renew(_))) {
        let id = shared.client_id();
        let said = replicated.as_ref().err().map(|err| {
            format!(
                "client {id}'s renewals are not counted while too few replicas acknowledge \
                 them: {err}"
            )
        });
        let over = || format!("client {id}'s renewals are acknowledged by enough replicas again");
        watchdog.short.say(node.cloned(), said, true, over);
    }
    let applied = (replies.into_iter())
        .map(|(call, reply)| apply(shared, watchdog, call, reply, replicated.is_ok(), sent));
    applied.fold(Ok(()), Result::and)
}

/// One script call of a round as it was sent, with what it is for.
enum Sent<'a> {
    /// A hold's renewal, asked at that instant: its lease counts from there.
    Renew(&'a Hold, Renew<'a>, Instant),
    /// A heartbeat of one lock's waiters.
    Heartbeat(&'a [Arc<Waiter>], Heartbeat<'a>),
    Abandon(&'a Arc<ToAbandon>, Abandon<'a>),
}

impl<'a> Sent<'a> {
    /// The call that does `work`, asked at `asked`.
    fn of(shared: &Shared, work: &'a Work, asked: Instant) -> Sent<'a> {
        match work {
            Work::Renew(hold) => {
                // A hold not renewed (checked after a gap) keeps its lease.
                let lease = hold.renewal_lease(asked, shared.config().lease);
                let renewal = hold.renewal(hold.is_renewable().then_some(lease));
                Sent::Renew(hold, renewal, asked)
            }
            Work::Heartbeat(waiters) => {
                let beat = Heartbeat {
                    waiter_timeout: shared.config().waiter_timeout,
                    waiters: waiters.iter().map(|waiter| waiter.call.entry()).collect(),
                };
                Sent::Heartbeat(waiters, beat)
            }
            Work::Abandon(given) => {
                let entry = given.call.entry();
                Sent::Abandon(given, Abandon { entry })
            }
        }
    }

    fn command(&self, scripts: &Scripts, by_fcall: bool) -> redis::Cmd {
        match self {
            Sent::Renew(hold, op, _) => scripts.command(&hold.call.keys, op, by_fcall),
            Sent::Heartbeat(waiters, op) => scripts.command(&waiters[0].call.keys, op, by_fcall),
            Sent::Abandon(given, op) => scripts.command(&given.call.keys, op, by_fcall),
        }
    }
}

/// Each call as sent with its reply, and whether enough replicas
/// acknowledged them (with `sync_replicas`).
type Exchanged<'a> = (Vec<(Sent<'a>, Result<Value>)>, Result<()>);

/// Sends the calls that do `work` as one pipeline on `node`'s connection
/// (see [`Watchdog::with_conn`]), with a `WAIT` for `sync`'s replicas after
/// them if given; or, when a slot moves (see [`splits`]), each in a
/// pipeline of its own through the cluster client, one that fails having
/// its error as its reply.
fn exchange<'a>(
    shared: &Shared,
    watchdog: &Watchdog,
    work: &[&'a Work],
    node: Option<&Address>,
    sync: Option<SyncReplicas>,
) -> Result<Exchanged<'a>> {
    let scripts = &shared.caller.scripts;
    let pipeline = |work: &[&'a Work], node| -> Result<Exchanged<'a>> {
        watchdog.with_conn(shared, node, |conn| {
            // The leases count from here, not from before the connection
            // was had (opened, maybe): the one capped by a maximum hold
            // asks for what is left of it from here, and counted from
            // earlier would end before it.
            let asked = Instant::now();
            let calls: Vec<Sent> = (work.iter())
                .map(|work| Sent::of(shared, work, asked))
                .collect();
            let pipe = |by_fcall| {
                let mut pipe = redis::pipe();
                for call in &calls {
                    pipe.add_command(call.command(scripts, by_fcall));
                }
                if let Some(sync) = sync {
                    pipe.add_command(sync.wait_command());
                }
                pipe
            };
            let wait = sync.map_or(Duration::ZERO, |sync| sync.timeout);
            let mut values = steady::waiting(wait, || scripts.query(pipe, conn))?;
            // A node that does not serve the slot (any more) answers with a
            // redirection: the batch goes again through the cluster client.
            // A master demoted since (`READONLY`) fails the batch too, so
            // that its connection is dropped and the batch goes to its
            // successor.
            if let Some(moved) = values.iter().find_map(redirection) {
                return Err(moved);
            }
            let shortfall = sync.map(|sync| sync.shortfall(values.pop())).transpose()?;
            if values.len() != calls.len() {
                return Err(unexpected(&values.len()));
            }
            let replies = calls.into_iter().zip(values.into_iter().map(Ok)).collect();
            Ok((replies, shortfall.flatten().map_or(Ok(()), Err)))
        })
    };
    let exchanged = pipeline(work, node);
    if !(exchanged.as_ref()).is_err_and(|err| splits(shared, err, work.len())) {
        return exchanged;
    }
    let (mut replies, mut replicated) = (Vec::new(), Ok(()));
    for one in work {
        match pipeline(slice::from_ref(one), None) {
            Ok((mut reply, enough)) => {
                replies.append(&mut reply);
                replicated = replicated.and(enough);
            }
            Err(err) => replies.push((Sent::of(shared, one, Instant::now()), Err(err))),
        }
    }
    Ok((replies, replicated))
}

/// Whether a batch of `commands` commands that failed with `err` goes
/// again one command at a time: on a cluster whose slot is being moved
/// (`ASK`, `TRYAGAIN`, `MOVED` after the cluster client's own retries).
/// Its pipeline goes whole to one node, but the keys of its locks may be
/// split between the two nodes of the move, and the `ASKING` the cluster
/// client sends before following an `ASK` covers only the first command
/// of the pipeline: the others were refused (`MOVED` back), so the whole
/// batch failed round after round while the move lasted, renewals Redis
/// had applied included, and a hold still in Redis was reported lost.
fn splits(shared: &Shared, err: &Error, commands: usize) -> bool {
    commands > 1 && err.is_slot_moving() && shared.caller.backend.is_cluster()
}

/// The error of a reply that redirects to another node or comes from a
/// demoted master, if it is one.
fn redirection(value: &Value) -> Option<Error> {
    let Value::ServerError(err) = value else {
        return None;
    };
    Some(Error::from_server(err.clone()))
        .filter(|err| err.is_slot_moving() || err.retry() == Retry::DemotedMaster)
}

/// Whether a renewal of `hold` that failed is tried again soon (the next
/// round [`RECHECK`](super::RECHECK) later), not a period later: one not
/// checked since a gap (the server still loading its data), or one whose
/// count would run out before the next round, so that an outage shorter
/// than its lease (a pause its renewal timed out in) does not lose it.
fn again_soon(shared: &Shared, hold: &Hold) -> bool {
    let next_round = Instant::now() + shared.config().watchdog_period();
    hold.is_unconfirmed_after_gap() || (!hold.is_lost() && hold.local_end() < next_round)
}

/// Applies one call's reply (a renewal counts only if enough replicas
/// acknowledged the batch: `replicated`). An error for an abandon to send
/// again: Redis not reached, its slot still moving.
fn apply(
    shared: &Shared,
    watchdog: &Watchdog,
    call: Sent,
    reply: Result<Value>,
    replicated: bool,
    sent: Instant,
) -> Result<()> {
    let level = watchdog.level();
    match call {
        Sent::Renew(hold, op, asked) => match reply.and_then(|value| op.parse(value)) {
            // A renewal too few replicas saw does not extend the lease the
            // guard counts on. (A hold only checked asks for no lease: zero
            // pushes nothing out.)
            Ok(reply) => {
                let lease = replicated.then(|| op.lease.unwrap_or_default());
                hold.renewal_answered(op.token, reply, asked, lease);
            }
            Err(err) => {
                let err = during::<Renew>(err, &hold.call.keys);
                log::log!(level, "fairlock: renewal failed: {err}");
                if again_soon(shared, hold) {
                    watchdog.recheck.store(true, Ordering::Relaxed);
                }
            }
        },
        Sent::Heartbeat(waiters, op) => match reply.and_then(|value| op.parse(value)) {
            Ok(reply) => apply_heartbeat(shared, waiters, reply, sent),
            Err(err) => {
                let err = during::<Heartbeat>(err, &waiters[0].call.keys);
                log::log!(level, "fairlock: heartbeat failed: {err}");
                // Refused for want of Redis (`LOADING`) or for a while
                // (`OOM`), as when the round could not reach it: a waiter
                // not at the head would otherwise wait as long as that lasts.
                if err.is_connection() || err.is_refused_for_now() {
                    let patience = shared.config().outage_patience();
                    (waiters.iter()).for_each(|waiter| waiter.unheard(sent, patience, &err));
                } else {
                    // Refused otherwise (an ACL, another program's data
                    // under a key): each asks, and ends with what Redis
                    // says if its own request is refused too.
                    waiters.iter().for_each(|waiter| waiter.repoll());
                }
            }
        },
        Sent::Abandon(given, op) => {
            let (id, key) = (given.call.id, given.call.keys.lock());
            // (`parse` makes an error reply the error it says.)
            match reply.and_then(|value| op.parse(value)) {
                Ok(_) => shared.abandon_answered(given, sent, false),
                Err(err) if err.is_connection() => return Err(err),
                // Its slot still moving: kept, and sent again next round.
                Err(err) if err.is_slot_moving() => {
                    log::debug!(
                        "fairlock: abandoning call {id} on {key:?} waits for a slot move: {err}"
                    );
                    return Err(err);
                }
                // Refused before it ran (over maxmemory, too few replicas, a
                // failed snapshot): kept, and sent again next round.
                Err(err) if err.is_refused_for_now() => {
                    log::debug!("fairlock: abandoning call {id} on {key:?} refused for now: {err}");
                }
                Err(err) => {
                    log::warn!("fairlock: abandoning call {id} on {key:?} refused, dropped: {err}");
                    shared.abandon_answered(given, sent, true);
                }
            }
        }
    }
    Ok(())
}

fn apply_heartbeat(shared: &Shared, waiters: &[Arc<Waiter>], reply: HeartbeatReply, sent: Instant) {
    let (pttl_ms, last_token) = (reply.pttl_ms, reply.last_token);
    let mut gone = Vec::new();
    for (waiter, status) in waiters.iter().zip(reply.statuses.iter().copied()) {
        match status {
            WaiterStatus::Queued(position) => waiter.in_queue(sent, position, last_token, pttl_ms),
            WaiterStatus::Owns(token) => match reply.lease_of(&waiter.call.entry()) {
                Some(ttl) => waiter.grant(token, Some(sent), ttl),
                // A counted lock's reply names the first lease of its holds
                // to run out, maybe another's: the waiter asks again, and
                // its poll's reply names its own hold's lease.
                None => waiter.repoll(),
            },
            WaiterStatus::Gone => {
                // Dropped as dead (this client's heartbeats stopped reaching
                // Redis for a waiter timeout), or not queued yet: it asks
                // again, and queues anew if it lost its place.
                log::info!(
                    "fairlock: waiter {} (owner {}) not found in the queue of {:?}; asking again",
                    waiter.call.id,
                    waiter.call.owner,
                    waiter.call.keys.lock()
                );
                gone.push(Arc::clone(waiter));
            }
        }
    }
    // Those that lost their place (a queue lost with the server's data)
    // join again in the order they had.
    shared.rejoin_in_order(gone);
}
