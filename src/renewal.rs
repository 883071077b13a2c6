//! One round's work for one slot (or for the one server): renew held
//! leases, heartbeat queued waiters, give back calls whose outcome was never
//! learned. It runs on connections of the watchdog's own, outside the pool,
//! so user calls that hold every pooled connection (a slow or stalled
//! server) never make a renewal wait for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use redis::{ConnectionLike, Value};

use crate::backend::{Backend, OwnConn};
use crate::client::{replication_shortfall, Shared};
use crate::error::{Error, Result};
use crate::give_backs::GiveBack;
use crate::holds::Hold;
use crate::scripts::{
    evalsha, parse_heartbeat, query_loading_scripts, unexpected, wait_for_replicas, Heartbeat,
    WaiterStatus,
};
use crate::slot_map::Address;
use crate::waiters::{poll_time, Grant, Waiter};

/// Renewals, heartbeats and give-backs of one slot (all of them on one
/// server): a pipeline goes to a single node.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) holds: Vec<Arc<Hold>>,
    /// Waiters of one lock each.
    pub(crate) groups: Vec<Vec<Arc<Waiter>>>,
    pub(crate) give_backs: Vec<Arc<GiveBack>>,
}

/// Idle connections of the watchdog's own, reused round after round: by
/// cluster master (a plain connection to that node), or `None` for the
/// deployment's own kind (the server, the Sentinels' master, the cluster).
#[derive(Default)]
pub(crate) struct OwnConns {
    idle: Mutex<HashMap<Option<Address>, Vec<OwnConn>>>,
}

impl OwnConns {
    /// Runs `call` on an idle connection to `node`, or on a new one. A
    /// connection that failed is dropped; a reused one that the server
    /// closed while it sat idle (a restart) is replaced and the call sent
    /// again once.
    fn with<T>(
        &self,
        backend: &Backend,
        node: Option<&Address>,
        mut call: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let key = node.cloned();
        let open = || match node {
            Some(address) => backend.node_connection(address).map(OwnConn::Node),
            None => backend.own_connection(),
        };
        let idle = self.idle.lock().get_mut(&key).and_then(Vec::pop);
        let reused = idle.is_some();
        let mut conn = match idle {
            Some(conn) => conn,
            None => open()?,
        };
        let mut result = call(conn.get());
        if reused && matches!(&result, Err(err) if err.is_dropped_connection()) {
            conn = open()?;
            result = call(conn.get());
        }
        if !matches!(&result, Err(err) if err.is_connection()) {
            self.idle.lock().entry(key).or_default().push(conn);
        }
        result
    }

    /// Runs `call` on `node` if given, or through the deployment's own
    /// connection when the node is unknown, unreachable, or says the slot
    /// is served elsewhere: then the slot map is stale, and `stale` is set.
    fn with_node_or_cluster<T>(
        &self,
        backend: &Backend,
        node: Option<&Address>,
        stale: &AtomicBool,
        mut call: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        if node.is_some() {
            match self.with(backend, node, &mut call) {
                Err(err) if err.is_connection() || err.is_slot_moving() => {
                    log::debug!("fairlock: renewing through the cluster client: {err}");
                    stale.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        self.with(backend, None, call)
    }
}

/// Runs one batch (on `node`, the master of its slot as the slot map says,
/// if known) and applies its replies. Returns the first error.
pub(crate) fn run(shared: &Shared, batch: &Batch, node: Option<&Address>) -> Result<()> {
    let mut outcome = Ok(());
    let conns = &shared.own_conns;
    let stale = shared.cluster_rounds.map_stale();
    if !batch.holds.is_empty() || !batch.groups.is_empty() {
        let sent = Instant::now();
        match conns.with_node_or_cluster(&shared.backend, node, stale, |conn| {
            renew(shared, conn, batch)
        }) {
            Ok(replies) => apply(shared, batch, replies, sent),
            // Without a confirmed renewal, a hold counts as lost once its
            // last confirmed lease has run out (Hold::is_lost compares the time).
            Err(err) => outcome = Err(err),
        }
    }
    for entry in &batch.give_backs {
        let sent = Instant::now();
        match conns.with_node_or_cluster(&shared.backend, node, stale, |conn| {
            give_back(shared, conn, entry)
        }) {
            Ok(_) => shared.give_backs.confirmed(entry, sent),
            Err(err) if err.is_connection() => {
                outcome = outcome.and(Err(err));
            }
            Err(err) => {
                log::warn!(
                    "fairlock: giving back call {} on {:?} refused, dropped: {err}",
                    entry.call,
                    entry.keys.lock()
                );
                shared.give_backs.forget(entry);
            }
        }
    }
    outcome
}

/// The batch's replies: one per hold, one per waiter group, and whether
/// enough replicas acknowledged them (with `sync_replicas`).
struct Replies {
    values: Vec<Value>,
    replicated: bool,
}

fn renew(shared: &Shared, conn: &mut dyn ConnectionLike, batch: &Batch) -> Result<Replies> {
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
        let numbers: Vec<(String, String)> = waiters
            .iter()
            .map(|w| (w.id.to_string(), w.renew_lease_ms.to_string()))
            .collect();
        let mut args: Vec<&[u8]> = vec![prefix, waiter_timeout_ms.as_bytes()];
        for (waiter, (id, lease)) in waiters.iter().zip(&numbers) {
            args.push(waiter.owner.as_bytes());
            args.push(id.as_bytes());
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
    // A node that does not serve the slot (any more) answers with a
    // redirection: the batch goes again through the cluster client.
    if let Some(moved) = values.iter().find_map(redirection) {
        return Err(moved);
    }
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

/// The error of a reply that redirects to another node, if it is one.
fn redirection(value: &Value) -> Option<Error> {
    let Value::ServerError(err) = value else {
        return None;
    };
    let err = Error::from(redis::RedisError::from(err.clone()));
    err.is_slot_moving().then_some(err)
}

fn give_back(shared: &Shared, conn: &mut dyn ConnectionLike, entry: &GiveBack) -> Result<Value> {
    let call = entry.call.to_string();
    let keys: Vec<&str> = entry.keys.all.iter().map(String::as_str).collect();
    let mut pipe = redis::pipe();
    pipe.add_command(evalsha(
        &shared.scripts.abandon,
        &keys,
        &[
            shared.wake_prefix.as_bytes(),
            entry.owner.as_bytes(),
            call.as_bytes(),
        ],
    ));
    let mut replies = query_loading_scripts(&shared.scripts, &pipe, conn)?;
    match replies.pop() {
        Some(Value::ServerError(err)) => Err(Error::from(redis::RedisError::from(err))),
        Some(reply @ Value::Int(_)) => Ok(reply),
        other => Err(unexpected(&other)),
    }
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
    let Heartbeat {
        pttl_ms,
        last_token,
        statuses,
    } = match parse_heartbeat(reply) {
        Ok(parsed) => parsed,
        Err(err) => {
            log::warn!("fairlock: heartbeat failed: {err}");
            return;
        }
    };
    for (waiter, status) in waiters.iter().zip(statuses) {
        match status {
            WaiterStatus::Queued(position) => {
                waiter.saw_queued(sent, last_token);
                if position == 0 {
                    waiter.poll_by(poll_time(pttl_ms));
                }
            }
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
