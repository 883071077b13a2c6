//! The `fairlock-watchdog` thread: every third of `min(lease, waiter_timeout)`
//! it renews the leases of held locks and heartbeats this client's queued
//! waiters, all in one pipelined round trip (on a cluster, one per slot).
//!
//! The heartbeat is what keeps a live waiter in the queue however long the
//! holder keeps the lock, and its reply is the fallback that wakes a waiter
//! whose handoff message was lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use redis::cluster_routing::Slot;
use redis::{ConnectionLike, Value};

use crate::client::{replication_shortfall, Shared};
use crate::error::Result;
use crate::holds::Hold;
use crate::scripts::{
    evalsha, parse_heartbeat, query_loading_scripts, unexpected, wait_for_replicas, WaiterStatus,
};
use crate::waiters::{poll_time, Grant, Waiter};

pub(crate) fn run(shared: &Shared) {
    let period = shared.config.watchdog_period();
    while !shared.watchdog_sleep(period) {
        if let Err(err) = tick(shared) {
            log::warn!("fairlock: watchdog round failed: {err}");
        }
    }
}

/// One renewal round. Public to the crate so tests and callers can force one.
pub(crate) fn tick(shared: &Shared) -> Result<()> {
    let holds = shared.holds.snapshot();
    let groups = shared.waiters.by_lock();
    if holds.is_empty() && groups.is_empty() {
        return Ok(());
    }
    let mut first_error = None;
    for batch in batches(shared.backend.is_cluster(), holds, groups) {
        let sent = Instant::now();
        let result = shared.with_connection(|conn| renew_batch(shared, conn, &batch));
        match result {
            Ok(replies) => apply(shared, &batch, replies, sent),
            // Without a confirmed renewal, a hold counts as lost once its
            // last confirmed lease has run out (Hold::is_lost compares the time).
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Renewals and heartbeats sent in one pipeline: all of them on one server,
/// one slot's on a cluster (a pipeline goes to a single node).
#[derive(Default)]
struct Batch {
    holds: Vec<Arc<Hold>>,
    groups: Vec<Vec<Arc<Waiter>>>,
}

fn batches(per_slot: bool, holds: Vec<Arc<Hold>>, groups: Vec<Vec<Arc<Waiter>>>) -> Vec<Batch> {
    if !per_slot {
        return vec![Batch { holds, groups }];
    }
    let mut by_slot: HashMap<Slot, Batch> = HashMap::new();
    for hold in holds {
        let slot = Slot::for_key(hold.keys.lock());
        by_slot.entry(slot).or_default().holds.push(hold);
    }
    for group in groups {
        let slot = Slot::for_key(group[0].keys.lock());
        by_slot.entry(slot).or_default().groups.push(group);
    }
    by_slot.into_values().collect()
}

/// The batch's replies: one per hold, one per waiter group, and with
/// `sync_replicas` the count of replicas that acknowledged them last.
struct Replies {
    values: Vec<Value>,
    replicated: bool,
}

fn renew_batch(shared: &Shared, conn: &mut dyn ConnectionLike, batch: &Batch) -> Result<Replies> {
    let lease_ms = shared.config.lease.as_millis().to_string();
    let waiter_timeout_ms = shared.config.waiter_timeout.as_millis().to_string();
    let prefix = shared.wake_prefix.as_bytes();
    let mut pipe = redis::pipe();
    for hold in &batch.holds {
        let token = hold.token.to_string();
        pipe.add_command(evalsha(
            &shared.scripts.renew,
            &[hold.keys.lock()],
            &[
                prefix,
                hold.owner.as_bytes(),
                token.as_bytes(),
                lease_ms.as_bytes(),
            ],
        ));
    }
    for waiters in &batch.groups {
        let leases: Vec<String> = waiters
            .iter()
            .map(|w| w.renew_lease_ms.to_string())
            .collect();
        let mut args: Vec<&[u8]> = vec![prefix, waiter_timeout_ms.as_bytes()];
        for (waiter, lease) in waiters.iter().zip(&leases) {
            args.push(waiter.owner.as_bytes());
            args.push(lease.as_bytes());
        }
        let keys: Vec<&str> = waiters[0].keys.all.iter().map(String::as_str).collect();
        pipe.add_command(evalsha(&shared.scripts.heartbeat, &keys, &args));
    }
    let sync = shared.config.sync_replicas;
    if let Some(sync) = sync {
        pipe.add_command(wait_for_replicas(sync));
    }
    let mut values = query_loading_scripts(&shared.scripts, &pipe, conn)?;
    let replicated = match sync {
        None => true,
        Some(sync) => match values.pop() {
            Some(Value::Int(acknowledged)) => {
                let shortfall = replication_shortfall(sync, acknowledged);
                if let Some(err) = &shortfall {
                    log::warn!("fairlock: renewals not counted: {err}");
                }
                shortfall.is_none()
            }
            other => return Err(unexpected(&other)),
        },
    };
    if values.len() != batch.holds.len() + batch.groups.len() {
        return Err(unexpected(&values.len()));
    }
    Ok(Replies { values, replicated })
}

fn apply(shared: &Shared, batch: &Batch, replies: Replies, sent: Instant) {
    let (hold_replies, heartbeat_replies) = replies.values.split_at(batch.holds.len());
    let lease = shared.config.lease;
    for (hold, reply) in batch.holds.iter().zip(hold_replies) {
        match reply {
            // A renewal too few replicas saw does not extend the lease the
            // guard counts on: a failover could bring back the old expiry.
            Value::Int(1) if replies.replicated => hold.renewed(sent, lease),
            Value::Int(1) => {}
            Value::Int(0) => hold.mark_lost(),
            other => log::warn!("fairlock: renewal failed: {other:?}"),
        }
    }
    for (waiters, reply) in batch.groups.iter().zip(heartbeat_replies) {
        apply_heartbeat(waiters, reply.clone(), sent);
    }
}

fn apply_heartbeat(waiters: &[Arc<Waiter>], reply: Value, sent: Instant) {
    let (pttl_ms, statuses) = match parse_heartbeat(reply) {
        Ok(parsed) => parsed,
        Err(err) => {
            log::warn!("fairlock: heartbeat failed: {err}");
            return;
        }
    };
    for (waiter, status) in waiters.iter().zip(statuses) {
        match status {
            WaiterStatus::Queued(0) => waiter.poll_by(poll_time(pttl_ms)),
            WaiterStatus::Queued(_) => {}
            WaiterStatus::Owns(token) => {
                let ttl = std::time::Duration::from_millis(u64::try_from(pttl_ms).unwrap_or(0));
                waiter.grant(Grant {
                    token,
                    expires_at: sent + ttl,
                })
            }
            WaiterStatus::Gone => waiter.repoll(),
        }
    }
}
