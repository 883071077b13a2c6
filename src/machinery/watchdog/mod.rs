//! The `fairlock-watchdog` thread: every third of `min(lease, waiter_timeout)`
//! it renews the leases of held locks, heartbeats this client's queued
//! waiters and abandons calls whose outcome was never learned (see
//! [`renewal`](crate::machinery::watchdog::renewal)).
//!
//! On one server (or behind Sentinel) a round is one pipelined round trip on
//! the watchdog's own connection (and one more for calls to abandon). On
//! Redis Cluster the work is split by slot (a pipeline goes to one node)
//! and the slots are grouped by the master serving them; each master's
//! group runs on a thread of its own, and a group still running from an
//! earlier round is skipped, so a master that accepts but never answers (a
//! stall costs several command timeouts per call) holds back only its own
//! renewals, never another master's.
//!
//! What it keeps for itself, its connections (`conns`) and its rounds by
//! master ([`Watchdog`]), no other thread sees; the slot map it groups
//! them by is every thread's ([`Shared::refresh_slot_map`]).
//!
//! The heartbeat is what keeps a live waiter in the queue however long the
//! holder keeps the lock, and its reply is the fallback that wakes a waiter
//! whose handoff message was lost.

mod conns;
mod renewal;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::connections::own_conns::OwnConns;
use crate::connections::slot_map::Address;
use crate::connections::OwnConn;
use crate::machinery::shared::{spawn_named, Shared, Work};

/// Rounds between two readings of the cluster's slot map, besides the ones
/// an error asks for.
const SLOT_MAP_ROUNDS: u64 = 64;

/// What the watchdog keeps for itself and its renewal threads: its own
/// connections and, on a cluster, its rounds by master.
#[derive(Default)]
pub(crate) struct Watchdog {
    /// Its own connections (renewals never wait for the pool).
    conns: OwnConns<Option<Address>, OwnConn>,
    /// Set when a node did not answer for its slots as the slot map said:
    /// the map is read again.
    map_stale: AtomicBool,
    /// A reading of the slot map is under way.
    refreshing: AtomicBool,
    /// Groups whose renewal thread is still running.
    in_flight: Mutex<HashSet<Group>>,
    /// A renewal failed that is tried again soon (one not checked since a
    /// gap, one whose count runs out before the next round: see
    /// `renewal::again_soon`): the next round comes [`RECHECK`] later, not
    /// a period later.
    recheck: AtomicBool,
    /// This round is such a recheck: what fails in it again is logged at
    /// debug, not once every [`RECHECK`] as a warning.
    rechecking: AtomicBool,
    /// Where rounds failed last time (the server, or a cluster group):
    /// the next failures there are logged at debug, not once a round.
    failing: Streaks<Option<Group>>,
    /// Nodes (`None`: the one server) whose last renewals too few
    /// replicas acknowledged (with `sync_replicas`): said once while it lasts.
    short: Streaks<Option<Address>>,
}

/// Where a trouble was said at warn and its end not yet (a server, a
/// cluster group, a node): while it lasts it is said at debug, and its
/// end once, at info.
#[derive(Default)]
struct Streaks<K>(Mutex<HashSet<K>>);

impl<K: std::hash::Hash + Eq + Clone> Streaks<K> {
    /// Says how it went at `key`: a `trouble` at warn when it begins
    /// there (only when `warn`: a recheck's failure begins nothing), then
    /// at debug while it lasts; all going well again, once at info
    /// (`over`), when a trouble was said there.
    fn say(&self, key: K, trouble: Option<String>, warn: bool, over: impl FnOnce() -> String) {
        match trouble {
            Some(said) if warn && self.0.lock().insert(key.clone()) => {
                log::warn!("fairlock: {said}")
            }
            Some(said) => log::debug!("fairlock: {said}"),
            None if self.0.lock().remove(&key) => log::info!("fairlock: {}", over()),
            None => {}
        }
    }
}

/// As the subscriber and the waiters try again while Redis is away.
const RECHECK: Duration = Duration::from_millis(100);

impl Watchdog {
    /// The level of a failure's log line in this round (see `rechecking`).
    pub(crate) fn level(&self) -> log::Level {
        match self.rechecking.load(Ordering::Relaxed) {
            true => log::Level::Debug,
            false => log::Level::Warn,
        }
    }

    /// Logs how a round on `on` (`None`: the one server) went: a failure
    /// at warn the first time in a row (see `level`), then at debug; the
    /// first success after a warning at info.
    fn said(&self, shared: &Shared, on: Option<Group>, ran: &crate::error::Result<()>) {
        let id = shared.client_id();
        let at = (on.as_ref()).map_or(String::new(), |group| format!(" on {group:?}"));
        let failed = ran.as_ref().err().map(|err| {
            format!(
                "client {id}'s watchdog round{at} failed: {err}; leases are not renewed nor \
                 waiters' places kept until a round succeeds"
            )
        });
        let over = || format!("client {id}'s watchdog round{at} succeeded again");
        (self.failing).say(on, failed, self.level() == log::Level::Warn, over);
    }
}

/// Renewals that run on one thread: a master's slots, or one slot whose
/// master the map does not know.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Group {
    Master(Address),
    Slot(u16),
}

/// The thread's body: a round every watchdog period, or when nudged,
/// until the client stops.
pub(crate) fn run(shared: &Arc<Shared>) {
    let watchdog = Arc::new(Watchdog::default());
    let period = shared.config().watchdog_period();
    let mut round = 0u64;
    let mut wait = period;
    while !shared.sleep(wait, true) {
        round += 1;
        // A round that could not reach Redis and ran into the stop was
        // the last try: dropping the client waits for no other. Unless it
        // failed at once (a refused connection), which says nothing of
        // Redis by the time of the stop (a link back since): one more try
        // then keeps the drop within about one command timeout still.
        let began = Instant::now();
        if !tick(shared, &watchdog, round)
            && shared.is_stopping()
            && began.elapsed() >= shared.config().command_timeout / 2
        {
            return;
        }
        let recheck = watchdog.recheck.swap(false, Ordering::Relaxed);
        watchdog.rechecking.store(recheck, Ordering::Relaxed);
        wait = if recheck { RECHECK } else { period };
    }
    abandon_before_stopping(shared, &watchdog);
}

/// The client is going away with calls still to abandon (an unlock that
/// failed just before the client was dropped): one last try, on this
/// thread, all of them in one pipeline (one per slot on a cluster, whose
/// pipelines go to one slot's node), stopping at the first that cannot
/// reach Redis, so that dropping a client waits at most about one command
/// timeout for it (the round under way when it stopped, or this), and one
/// round trip where Redis answers, however many calls there are.
fn abandon_before_stopping(shared: &Shared, watchdog: &Watchdog) {
    let work = shared.abandons_left().into_iter().map(Work::Abandon);
    let batches = match shared.caller.backend.is_cluster() {
        true => by_slot(work.collect()).into_values().collect(),
        false => vec![work.collect()],
    };
    for batch in batches.iter().filter(|batch| !batch.is_empty()) {
        if let Err(err) = renewal::run(shared, watchdog, batch, None) {
            log::warn!("fairlock: client stopped with calls not abandoned: {err}");
            return;
        }
    }
}

/// `work` split by the slot of each call's lock: a cluster's pipeline
/// goes whole to one slot's node.
fn by_slot(work: Vec<Work>) -> HashMap<u16, Vec<Work>> {
    let mut by_slot: HashMap<u16, Vec<Work>> = HashMap::new();
    for work in work {
        by_slot.entry(work.call().keys.slot).or_default().push(work);
    }
    by_slot
}

/// One round: everything to renew, heartbeat or abandon now. False when
/// it could not reach Redis (on one server; a cluster's run on threads).
fn tick(shared: &Arc<Shared>, watchdog: &Arc<Watchdog>, round: u64) -> bool {
    let work = shared.round();
    if shared.caller.backend.stalled() {
        watchdog.map_stale.store(true, Ordering::Relaxed);
    }
    // No connection is kept to a node the slot map names no more (a master
    // that left the cluster), as the map reader keeps none.
    if let Some(map) = shared.slot_map() {
        (watchdog.conns).retain(|node| node.as_ref().is_none_or(|node| map.nodes().contains(node)));
    }
    if work.is_empty() && !watchdog.map_stale.load(Ordering::Relaxed) {
        return true;
    }
    if !shared.caller.backend.is_cluster() {
        let ran = renewal::run(shared, watchdog, &work, None);
        watchdog.said(shared, None, &ran);
        return !ran.is_err_and(|err| err.is_connection());
    }
    let map = shared.slot_map();
    let mut by_master: HashMap<Group, Vec<Vec<Work>>> = HashMap::new();
    for (slot, batch) in by_slot(work) {
        let master = map.as_ref().and_then(|map| map.master_of(slot));
        let group = master.map_or(Group::Slot(slot), |master| Group::Master(master.clone()));
        by_master.entry(group).or_default().push(batch);
    }
    for (group, batches) in by_master {
        if !watchdog.in_flight.lock().insert(group.clone()) {
            continue; // still busy with an earlier round
        }
        let (own, done) = (Arc::clone(watchdog), group.clone());
        let spawned = spawn_named("fairlock-renew", shared, move |worker| {
            let node = match &done {
                Group::Master(address) => Some(address),
                Group::Slot(_) => None,
            };
            let mut ran = Ok(());
            for batch in &batches {
                if let Err(err) = renewal::run(worker, &own, batch, node) {
                    own.map_stale.store(true, Ordering::Relaxed);
                    ran = Err(err);
                }
            }
            own.said(worker, Some(done.clone()), &ran);
            own.in_flight.lock().remove(&done);
        });
        if let Err(err) = spawned {
            log::warn!("fairlock: cannot start a renewal thread: {err}");
            watchdog.in_flight.lock().remove(&group);
        }
    }
    if map.is_none()
        || round.is_multiple_of(SLOT_MAP_ROUNDS)
        || watchdog.map_stale.load(Ordering::Relaxed)
    {
        refresh_slot_map(shared, watchdog);
    }
    true
}

/// Reads the slot map again ([`Shared::refresh_slot_map`]), on a thread of
/// its own: the node asked may be the stalled one.
fn refresh_slot_map(shared: &Arc<Shared>, watchdog: &Arc<Watchdog>) {
    if watchdog.refreshing.swap(true, Ordering::AcqRel) {
        return;
    }
    watchdog.map_stale.store(false, Ordering::Relaxed);
    let own = Arc::clone(watchdog);
    let spawned = spawn_named("fairlock-renew", shared, move |worker| {
        match worker.refresh_slot_map(None, None) {
            // A master new to the client (a replica promoted by the failover
            // of one that stopped, which said no `sunsubscribe`; a node back
            // in the cluster) is listened on.
            Ok(Some(map)) => crate::machinery::subscriber::listen_on_new_nodes(worker, &map),
            Ok(None) => {}
            Err(err) => {
                log::debug!("fairlock: cannot read the slot map: {err}");
                own.map_stale.store(true, Ordering::Relaxed);
            }
        }
        own.refreshing.store(false, Ordering::Release);
    });
    if spawned.is_err() {
        watchdog.refreshing.store(false, Ordering::Release);
    }
}
