//! The `fairlock-watchdog` thread: every third of `min(lease, waiter_timeout)`
//! it renews the leases of held locks and heartbeats this client's queued
//! waiters, all in one pipelined round trip.
//!
//! The heartbeat is what keeps a live waiter in the queue however long the
//! holder keeps the lock, and its reply is the fallback that wakes a waiter
//! whose handoff message was lost.

use std::sync::Arc;
use std::time::Instant;

use redis::Value;

use crate::client::Shared;
use crate::error::Result;
use crate::holds::Hold;
use crate::scripts::{evalsha, parse_heartbeat, WaiterStatus};
use crate::waiters::{poll_time, Grant, Waiter};

pub(crate) fn run(shared: &Shared) {
    let period = shared.config.watchdog_period();
    while !shared.sleep_unless_stopping(period) {
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
    let sent = Instant::now();
    let result = renew_all(shared, &holds, &groups);
    // Without a confirmed renewal, a hold counts as lost once its last
    // confirmed lease has run out (Hold::is_lost compares the time).
    let replies = result?;
    let (hold_replies, heartbeat_replies) = replies.split_at(holds.len());
    let lease = shared.config.lease;
    for (hold, reply) in holds.iter().zip(hold_replies) {
        match reply {
            Value::Int(1) => hold.renewed(sent, lease),
            Value::Int(0) => hold.mark_lost(),
            other => log::warn!("fairlock: renewal failed: {other:?}"),
        }
    }
    for (waiters, reply) in groups.iter().zip(heartbeat_replies) {
        apply_heartbeat(waiters, reply.clone(), sent);
    }
    Ok(())
}

fn renew_all(
    shared: &Shared,
    holds: &[Arc<Hold>],
    groups: &[Vec<Arc<Waiter>>],
) -> Result<Vec<Value>> {
    let lease_ms = shared.config.lease.as_millis().to_string();
    let waiter_timeout_ms = shared.config.waiter_timeout.as_millis().to_string();
    let prefix = shared.wake_prefix.as_bytes();
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for hold in holds {
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
    for waiters in groups {
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
    let mut conn = shared.connection()?;
    let mut replies: Vec<Value> = pipe.query(&mut *conn)?;
    if replies.iter().any(is_noscript) {
        // The server lost its script cache (restart or failover): load and redo.
        shared.scripts.load_all(&mut conn)?;
        replies = pipe.query(&mut *conn)?;
    }
    if replies.len() != holds.len() + groups.len() {
        return Err(crate::scripts::unexpected(&replies.len()));
    }
    Ok(replies)
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(err) if err.code() == "NOSCRIPT")
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
