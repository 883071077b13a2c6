//! The `fairlock-watchdog` thread: every third of `min(lease, waiter_timeout)`
//! it renews the leases of held locks, heartbeats this client's queued
//! waiters and abandons calls whose outcome was never learned (see
//! [`renewal`](crate::machinery::watchdog::renewal)).
//!
//! On one server (or behind Sentinel) a round is one pipelined round trip on
//! the watchdog's own connection. On Redis Cluster the work is split by
//! slot (a pipeline goes to one node) and the slots are grouped by the
//! master serving them; each master's group runs on a thread of its own,
//! and a group still running from an earlier round is skipped, so a master
//! that accepts but never answers (a stall costs several command timeouts
//! per call) holds back only its own renewals, never another master's.
//!
//! The heartbeat is what keeps a live waiter in the queue however long the
//! holder keeps the lock, and its reply is the fallback that wakes a waiter
//! whose handoff message was lost.

pub(crate) mod conns;
mod renewal;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::machinery::cluster_rounds::Group;
use crate::machinery::shared::Shared;
use renewal::Batch;

/// Rounds between two readings of the cluster's slot map, besides the ones
/// an error asks for.
const SLOT_MAP_ROUNDS: u64 = 64;

pub(crate) fn run(shared: &Arc<Shared>) {
    let period = shared.config().watchdog_period();
    let mut round = 0u64;
    while !shared.watchdog_sleep(period) {
        round += 1;
        tick(shared, round);
    }
    abandon_before_stopping(shared);
}

/// The client is going away with calls still to abandon (an unlock that
/// failed just before the client was dropped): one last try each, on this
/// thread, stopping at the first that cannot reach Redis, so that dropping
/// a client waits at most about one command timeout for it.
fn abandon_before_stopping(shared: &Shared) {
    for entry in shared.abandons.snapshot() {
        let batch = Batch {
            abandons: vec![entry],
            ..Batch::default()
        };
        if let Err(err) = renewal::run(shared, &batch, None) {
            log::warn!("fairlock: client stopped with calls not abandoned: {err}");
            return;
        }
    }
}

/// One round: everything to renew, heartbeat or abandon now.
fn tick(shared: &Arc<Shared>, round: u64) {
    let holds = shared.holds.snapshot();
    let groups = shared.waiters.by_lock();
    let abandons = shared.abandons.snapshot();
    if holds.is_empty() && groups.is_empty() && abandons.is_empty() {
        return;
    }
    if !shared.caller.backend.is_cluster() {
        let batch = Batch {
            holds,
            groups,
            abandons,
        };
        if let Err(err) = renewal::run(shared, &batch, None) {
            log::warn!("fairlock: watchdog round failed: {err}");
        }
        return;
    }
    let mut by_slot: HashMap<u16, Batch> = HashMap::new();
    for hold in holds {
        let slot = hold.call.keys.slot;
        by_slot.entry(slot).or_default().holds.push(hold);
    }
    for group in groups {
        let slot = group[0].call.keys.slot;
        by_slot.entry(slot).or_default().groups.push(group);
    }
    for entry in abandons {
        let slot = entry.call.keys.slot;
        by_slot.entry(slot).or_default().abandons.push(entry);
    }
    let cluster = &shared.cluster_rounds;
    let map = cluster.map.lock().clone();
    let mut by_master: HashMap<Group, Vec<Batch>> = HashMap::new();
    for (slot, batch) in by_slot {
        let master = map.as_ref().and_then(|map| map.master_of(slot));
        let group = master.map_or(Group::Slot(slot), |master| Group::Master(master.clone()));
        by_master.entry(group).or_default().push(batch);
    }
    for (group, batches) in by_master {
        if !cluster.in_flight.lock().insert(group.clone()) {
            continue; // still busy with an earlier round
        }
        let worker = Arc::clone(shared);
        let done = group.clone();
        let spawned = std::thread::Builder::new()
            .name("fairlock-renew".to_owned())
            .spawn(move || {
                let node = match &done {
                    Group::Master(address) => Some(address),
                    Group::Slot(_) => None,
                };
                for batch in &batches {
                    if let Err(err) = renewal::run(&worker, batch, node) {
                        log::warn!("fairlock: watchdog round on {done:?} failed: {err}");
                        worker
                            .cluster_rounds
                            .map_stale
                            .store(true, Ordering::Relaxed);
                    }
                }
                worker.cluster_rounds.in_flight.lock().remove(&done);
            });
        if let Err(err) = spawned {
            log::warn!("fairlock: cannot start a renewal thread: {err}");
            cluster.in_flight.lock().remove(&group);
        }
    }
    if map.is_none()
        || round.is_multiple_of(SLOT_MAP_ROUNDS)
        || cluster.map_stale.load(Ordering::Relaxed)
    {
        refresh_slot_map(shared);
    }
}

/// Reads the slot map again, on a thread of its own: the node asked may be
/// the stalled one.
fn refresh_slot_map(shared: &Arc<Shared>) {
    let cluster = &shared.cluster_rounds;
    if cluster.refreshing.swap(true, Ordering::AcqRel) {
        return;
    }
    cluster.map_stale.store(false, Ordering::Relaxed);
    let worker = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("fairlock-renew".to_owned())
        .spawn(move || {
            let rounds = &worker.cluster_rounds;
            match worker.caller.backend.slot_map() {
                Some(Ok(map)) => *rounds.map.lock() = Some(Arc::new(map)),
                Some(Err(err)) => {
                    log::debug!("fairlock: cannot read the slot map: {err}");
                    rounds.map_stale.store(true, Ordering::Relaxed);
                }
                None => {}
            }
            rounds.refreshing.store(false, Ordering::Release);
        });
    if spawned.is_err() {
        cluster.refreshing.store(false, Ordering::Release);
    }
}
