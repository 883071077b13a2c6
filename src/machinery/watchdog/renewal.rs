//! One round's work for one slot (or for the one server): renew held
//! leases, heartbeat queued waiters, abandon calls whose outcome was never
//! learned. It runs on connections of the watchdog's own, outside the pool,
//! so user calls that hold every pooled connection (a slow or stalled
//! server) never make a renewal wait for one.

use std::slice;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::Level;
use redis::{ConnectionLike, Value};

use crate::connections::slot_map::Address;
use crate::error::{Error, Result, Retry};
use crate::machinery::caller::waiters::Waiter;
use crate::machinery::holds::Hold;
use crate::machinery::shared::Shared;
use crate::machinery::watchdog::{Batch, Watchdog};
use crate::protocol::{
    unexpected, Abandon, Heartbeat, HeartbeatReply, Operation, Renew, RenewReply, WaiterStatus,
};

/// Runs one batch (on `node`, the master of its slot as the slot map says,
/// if known) and applies its replies. Returns the first error.
pub(crate) fn run(
    shared: &Shared,
    watchdog: &Watchdog,
    batch: &Batch,
    node: Option<&Address>,
) -> Result<()> {
    let mut outcome = Ok(());
    if !batch.holds.is_empty() || !batch.groups.is_empty() {
        let sent = Instant::now();
        let renewed = watchdog.with_conn(shared, node, |conn| {
            renew(shared, conn, &batch.holds, &batch.groups)
        });
        let renewed = match renewed {
            Err(err) if splits(shared, &err, batch.holds.len() + batch.groups.len()) => {
                Ok(renew_one_by_one(shared, watchdog, batch))
            }
            renewed => renewed,
        };
        if let (Ok(replies), false) = (&renewed, batch.holds.is_empty()) {
            watchdog.replicas_short(shared, node, replies.replicated.as_ref().err());
        }
        // Without a confirmed renewal, a hold counts as lost once its last
        // confirmed lease has run out (Hold::is_lost compares the time).
        let unchecked = |hold: &Arc<Hold>| hold.is_unconfirmed_after_gap();
        let level = watchdog.level();
        let applied = renewed.map(|replies| apply(shared, batch, replies, sent, level));
        // A hold not checked since a gap got no answer (the server loading
        // its data): checked again soon.
        if (applied.as_ref()).map_or_else(|_| batch.holds.iter().any(unchecked), |u| *u) {
            watchdog.recheck.store(true, Ordering::Relaxed);
        }
        outcome = applied.map(drop);
        if outcome.as_ref().is_err_and(Error::is_connection) {
            // Not heartbeated: a waiter not at the head of its queue would
            // otherwise wait for Redis forever.
            let patience = shared.config().outage_patience();
            (batch.groups.iter().flatten()).for_each(|waiter| waiter.unheard(sent, patience));
        }
    }
    // Redis cannot be reached: they wait for the next round (they would
    // wait a command timeout, and so would a client's drop).
    if batch.abandons.is_empty() || outcome.as_ref().is_err_and(Error::is_connection) {
        return outcome;
    }
    // All in one pipeline: many calls to give back cost one round trip, and
    // hold the next round's renewals back no longer than that.
    let ops: Vec<Abandon> = (batch.abandons.iter())
        .map(|given| Abandon {
            entry: given.call.entry(),
        })
        .collect();
    // The abandons `which` as one pipeline, sent to `node` (or through the
    // cluster client); a node that answers with a redirection fails it.
    let send = |which: std::ops::Range<usize>, node| {
        let (given, ops) = (&batch.abandons[which.clone()], &ops[which]);
        let pipe = |by| {
            let mut pipe = redis::pipe();
            for (entry, op) in given.iter().zip(ops) {
                pipe.add_command(shared.caller.scripts.command(&entry.call.keys, op, by));
            }
            pipe
        };
        watchdog.with_conn(shared, node, |conn| {
            let values = shared.caller.scripts.query(pipe, conn)?;
            values.iter().find_map(redirection).map_or(Ok(values), Err)
        })
    };
    let sent = Instant::now();
    let replies = send(0..ops.len(), node);
    let values: Vec<Result<Value>> = match replies {
        Ok(values) => values.into_iter().map(Ok).collect(),
        // Each alone, as the renewals above.
        Err(err) if splits(shared, &err, batch.abandons.len()) => (0..ops.len())
            .map(|i| {
                let mut values = send(i..i + 1, None)?;
                values.pop().ok_or_else(|| unexpected(&values.len()))
            })
            .collect(),
        Err(err) => return outcome.and(Err(err)),
    };
    // (`parse` makes an error reply the error it says.)
    for ((entry, op), value) in batch.abandons.iter().zip(&ops).zip(values) {
        let (id, key) = (entry.call.id, entry.call.keys.lock());
        match value.and_then(|value| op.parse(value)) {
            Ok(_) => shared.abandon_answered(entry, sent, false),
            Err(err) if err.is_connection() => outcome = outcome.and(Err(err)),
            // Its slot still moving: kept, and sent again next round.
            Err(err) if err.is_slot_moving() => {
                log::debug!(
                    "fairlock: abandoning call {id} on {key:?} waits for a slot move: {err}"
                );
                outcome = outcome.and(Err(err));
            }
            // Refused before it ran (over maxmemory, too few replicas, a
            // failed snapshot): kept, and sent again next round.
            Err(err) if err.is_refused_for_now() => {
                log::debug!("fairlock: abandoning call {id} on {key:?} refused for now: {err}");
            }
            Err(err) => {
                log::warn!("fairlock: abandoning call {id} on {key:?} refused, dropped: {err}");
                shared.abandon_answered(entry, sent, true);
            }
        }
    }
    outcome
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

/// The batch's renewals and heartbeats, each in a pipeline of its own
/// through the cluster client (see [`splits`]); one that fails has its
/// error as its reply. The leases count from before the first was asked.
fn renew_one_by_one(shared: &Shared, watchdog: &Watchdog, batch: &Batch) -> Replies {
    let mut all = Replies {
        asked: Instant::now(),
        renewed: Vec::new(),
        heartbeats: Vec::new(),
        replicated: Ok(()),
    };
    let holds = (batch.holds.iter()).map(|hold| (slice::from_ref(hold), &[][..]));
    let groups = (batch.groups.iter()).map(|group| (&[][..], slice::from_ref(group)));
    for (holds, groups) in holds.chain(groups) {
        let one = watchdog.with_conn(shared, None, |conn| renew(shared, conn, holds, groups));
        match (one, holds.first()) {
            (Ok(mut one), _) => {
                all.renewed.append(&mut one.renewed);
                all.heartbeats.append(&mut one.heartbeats);
                all.replicated = all.replicated.and(one.replicated);
            }
            (Err(err), Some(hold)) => all.renewed.push((Err(err), Duration::ZERO, hold.token())),
            (Err(err), None) => all.heartbeats.push(Err(err)),
        }
    }
    all
}

/// The batch's replies, parsed: one per hold, one per waiter group, and
/// whether enough replicas acknowledged them (with `sync_replicas`).
struct Replies {
    /// When the renewals' leases were asked: each counts from there.
    asked: Instant,
    /// Each hold's renewal, the lease it asked for and the token it named.
    renewed: Vec<(Result<RenewReply>, Duration, u64)>,
    heartbeats: Vec<Result<HeartbeatReply>>,
    replicated: Result<()>,
}

/// Renews `holds` and heartbeats `groups` in one pipeline on `conn`.
fn renew(
    shared: &Shared,
    conn: &mut dyn ConnectionLike,
    holds: &[Arc<Hold>],
    groups: &[Vec<Arc<Waiter>>],
) -> Result<Replies> {
    // The leases count from here, not from before the connection was had
    // (opened, maybe): the one capped by a maximum hold asks for what is
    // left of it from here, and counted from earlier would end before it.
    let asked = Instant::now();
    let lease = shared.config().lease;
    let renewals: Vec<Renew> = (holds.iter())
        .map(|hold| Renew {
            owner: &hold.call.owner,
            token: hold.token(),
            first: hold.first_token,
            call: hold.call.id,
            // A hold not renewed (checked after a gap) keeps its lease.
            lease: (hold.is_renewable()).then(|| hold.renewal_lease(asked, lease)),
        })
        .collect();
    let beats: Vec<Heartbeat> = (groups.iter())
        .map(|waiters| Heartbeat {
            waiter_timeout: shared.config().waiter_timeout,
            waiters: waiters.iter().map(|waiter| waiter.call.entry()).collect(),
        })
        .collect();
    let (sync, scripts) = (shared.config().sync_replicas, &shared.caller.scripts);
    let pipe = |by| {
        let mut pipe = redis::pipe();
        for (hold, renewal) in holds.iter().zip(&renewals) {
            pipe.add_command(scripts.command(&hold.call.keys, renewal, by));
        }
        for (waiters, beat) in groups.iter().zip(&beats) {
            pipe.add_command(scripts.command(&waiters[0].call.keys, beat, by));
        }
        if let Some(sync) = sync {
            pipe.add_command(sync.wait_command());
        }
        pipe
    };
    let wait = sync.map_or(Duration::ZERO, |sync| sync.timeout);
    let query = || scripts.query(pipe, conn);
    let mut values = crate::connections::steady::waiting(wait, query)?;
    // A node that does not serve the slot (any more) answers with a
    // redirection: the batch goes again through the cluster client. A
    // master demoted since (`READONLY`) fails the batch too, so that its
    // connection is dropped and the batch goes to its successor.
    if let Some(moved) = values.iter().find_map(redirection) {
        return Err(moved);
    }
    let shortfall = sync.map(|sync| sync.shortfall(values.pop())).transpose()?;
    let replicated = shortfall.flatten().map_or(Ok(()), Err);
    if values.len() != renewals.len() + beats.len() {
        return Err(unexpected(&values.len()));
    }
    let heartbeat_values = values.split_off(renewals.len());
    Ok(Replies {
        asked,
        // (A hold only checked asks for no lease: zero pushes nothing out.)
        renewed: (renewals.iter().zip(values))
            .map(|(r, value)| (r.parse(value), r.lease.unwrap_or_default(), r.token))
            .collect(),
        heartbeats: (beats.iter().zip(heartbeat_values))
            .map(|(beat, value)| beat.parse(value))
            .collect(),
        replicated,
    })
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

/// Applies the replies; true if a hold not checked since a gap got no
/// answer (an error reply).
fn apply(shared: &Shared, batch: &Batch, replies: Replies, sent: Instant, level: Level) -> bool {
    let mut unanswered = false;
    for (hold, (renewed, lease, token)) in batch.holds.iter().zip(replies.renewed) {
        if let Ok(RenewReply::Revoked) = renewed {
            // Asked to let go: said by the reply as well as by a message,
            // so a lost message is made up for here.
            hold.mark_revoked();
        }
        match renewed {
            // A renewal too few replicas saw does not extend the lease the
            // guard counts on: a failover could bring back the old expiry.
            Ok(reply) if reply.is_held() && replies.replicated.is_ok() => {
                hold.renewed(replies.asked, lease)
            }
            Ok(reply) if reply.is_held() => {}
            Ok(reply) => hold.renewal_failed(token, reply),
            Err(err) => {
                log::log!(level, "fairlock: renewal failed: {err}");
                unanswered |= hold.is_unconfirmed_after_gap();
            }
        }
    }
    for (waiters, reply) in batch.groups.iter().zip(replies.heartbeats) {
        match reply {
            Ok(reply) => apply_heartbeat(shared, waiters, reply, sent),
            Err(err) => {
                log::log!(level, "fairlock: heartbeat failed: {err}");
                // Refused for want of Redis (`LOADING`) or for a while
                // (`OOM`), as when the round could not reach it: a waiter
                // not at the head would otherwise wait as long as that lasts.
                if err.is_connection() || err.is_refused_for_now() {
                    let patience = shared.config().outage_patience();
                    (waiters.iter()).for_each(|waiter| waiter.unheard(sent, patience));
                } else {
                    // Refused otherwise (an ACL, another program's data
                    // under a key): each asks, and ends with what Redis
                    // says if its own request is refused too.
                    waiters.iter().for_each(|waiter| waiter.repoll());
                }
            }
        }
    }
    unanswered
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
