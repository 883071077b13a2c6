//! The `fairlock-subscriber` thread: one connection of its own, subscribed
//! to this client's wake channel, turning messages into condvar wake-ups.
//! On Redis Cluster there is one such thread per node (see
//! [`Backend::listeners`](crate::connections::Backend::listeners)); a
//! message then arrives once per node, and the later copies find nothing
//! left to wake. With sharded pub/sub (a cluster of Redis 7.0 or later) the
//! thread of each node subscribes to the shard channels of the slots this
//! client uses that its node masters ([`Shards`](crate::machinery::subscriber::shards::Shards)),
//! each message arrives once, from the shard that sent it, and a slot that
//! moved (the server says `sunsubscribe`) or whose master failed is
//! subscribed again where the slot map, read again, puts it.
//!
//! Messages (see `lua/lib/messages.lua`): `G <call id> <token> <ttl ms>` hands the
//! lock to a waiter; `H <call id> <pttl ms>` tells a waiter it heads the
//! queue (after a grant a heartbeat's reply tells it instead); `R <token> <lock key>` asks this client's holds of that lock
//! with tokens up to that one to let go (a revocation: the holds' renewals
//! say it too, so a lost message is made up for at the next renewal);
//! `L <token> <lock key>` says those holds were freed by a force release
//! (a lost one is found at the next renewal as well); `S`
//! asks the thread to notice that the client is stopping.
//! Messages published while the connection is down are lost, so after every
//! reconnect (every subscription of a slot again) all waiters poll once; a
//! connection quiet for a watchdog period has the server confirm its
//! subscriptions, so one that died without a word is opened again.
//!
//! Its one read ([`read`]: a read that timed out or that a signal cut
//! short is read again) serves the wake channel, the shard channels and
//! an election's watch ([`watch`], read on the caller's thread, on a
//! connection of its own), which is here for it.

pub(crate) mod shards;
pub(crate) mod watch;

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustc_hash::FxHashSet;

use crate::connections::slot_map::{Address, SlotMap};
use crate::connections::steady::{self, is_interrupted};
use crate::connections::{subscribe_on, Listen};
use crate::error::{Error, Result};
use crate::machinery::observe;
use crate::machinery::shared::{spawn_named, Shared};
use crate::protocol::keys::hash_slot;
use crate::protocol::{Push, Route};

/// The pause before the first attempt to subscribe again after a
/// subscription that worked was lost.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// How long a read blocks before the thread checks whether to stop.
const READ_TIMEOUT: Duration = Duration::from_millis(250);
/// The longest pause between two attempts to subscribe again: a server
/// back from a restart is heard from within it, and with it the holds it
/// may have lost (see [`Shared::missed_messages`]). A refused attempt costs a
/// round trip; one to a host that does not answer, a connect timeout.
const MAX_BACKOFF: Duration = Duration::from_millis(100);
/// How long a shard listener's read blocks before it looks for slots to
/// subscribe: the longest a call waits for its slot's first subscription.
const SHARD_READ_TIMEOUT: Duration = Duration::from_millis(20);
/// How often a shard listener reads the slot map again while a slot
/// wanted is listened on nowhere.
const MAP_READ_PERIOD: Duration = Duration::from_millis(250);

/// Listens at `at` until the client stops. The first subscription's
/// outcome goes to `ready`; after a failed first try the thread keeps
/// trying (the client gives up on it only if no thread could subscribe).
pub(crate) fn run(shared: &Arc<Shared>, at: &Listen, ready: Sender<Result<()>>) {
    let (mut ready, name) = (Some(ready), at.describe());
    let mut backoff = FIRST_BACKOFF;
    let mut map_read = Instant::now();
    while !shared.is_stopping() {
        let listened = match at {
            Listen::Shards(node) => listen_shards(shared, node, &mut ready, &mut backoff),
            _ => listen(shared, at, &mut ready, &mut backoff),
        };
        let Err(err) = listened else {
            return;
        };
        if let Listen::Shards(node) | Listen::Node(node) = at {
            // A classic listener reads the map itself (no shard listener
            // does), once a period at most.
            if matches!(at, Listen::Node(_)) && map_read.elapsed() >= MAP_READ_PERIOD {
                map_read = Instant::now();
                let _ = shared.refresh_slot_map(None, None);
            }
            if shared.shards.left(node, shared.slot_map().as_deref()) {
                log::info!("fairlock: {name} left the cluster, no longer listened on: {err}");
                return;
            }
        }
        if let Some(ready) = ready.take() {
            let _ = ready.send(Err(err));
        } else if backoff < MAX_BACKOFF {
            // Once per loss, not once per attempt while the server is away.
            log::warn!("fairlock: wake-up subscription on {name} lost, reconnecting: {err}");
        } else {
            log::debug!("fairlock: still reconnecting to {name}: {err}");
        }
        if shared.sleep(backoff, false) {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Subscribes and dispatches messages until the client stops (Ok) or the
/// connection fails (Err). `ready` is there until the first subscription's
/// outcome is told: a later one is a reconnect; `backoff` starts over once
/// subscribed.
fn listen(
    shared: &Shared,
    at: &Listen,
    ready: &mut Option<Sender<Result<()>>>,
    backoff: &mut Duration,
) -> Result<()> {
    let (channel, backend) = (shared.wake_channel(), &shared.caller.backend);
    let mut conn = backend.subscription(at, &channel, None)?;
    let moves = backend.master_moves();
    (conn.set_read_timeout(Some(READ_TIMEOUT))).map_err(Error::from_redis)?;
    let mut pubsub = conn.as_pubsub();
    let (quiet, mut heard) = (shared.config().watchdog_period(), Instant::now());
    if opened(at, ready, backoff) {
        // Handoffs published while we were away were lost: everyone asks.
        shared.missed_messages();
    }
    loop {
        if shared.is_stopping() {
            return Ok(());
        }
        // Behind Sentinel a master that stopped answering closes nothing:
        // once they name another, it is left for the new one.
        if backend.master_moves() != moves {
            let message = "the sentinels named another master";
            return Err(Error::new(crate::ErrorKind::Connection, message));
        }
        // Quiet for a watchdog period, the server is asked to confirm the
        // subscription (a SUBSCRIBE again): a link that died without a word
        // (a NAT or load balancer that forgot the idle connection, a server
        // gone silent) is otherwise never noticed, the client deaf for good.
        if heard.elapsed() >= quiet {
            // Read again if a signal cuts it short, within the timeout.
            let timeout = Some(shared.config().command_timeout);
            let confirmed = steady::again(timeout, |left| {
                pubsub.set_read_timeout(left)?;
                pubsub.subscribe(&channel)
            });
            // Put back first: a connection given up is left within it.
            (pubsub.set_read_timeout(Some(READ_TIMEOUT)).and(confirmed))
                .map_err(Error::from_redis)?;
            heard = Instant::now();
        }
        if let Some(msg) = read(pubsub.get_message()).map_err(Error::from_redis)? {
            heard = Instant::now();
            shared.deliver(msg.get_payload_bytes());
        }
    }
}

/// A listener's connection at `at` is open: the first tells `ready`, a
/// later one (true) is back after a loss, said at `info` and counted; the
/// `backoff` of its next loss starts over.
fn opened(at: &Listen, ready: &mut Option<Sender<Result<()>>>, backoff: &mut Duration) -> bool {
    *backoff = FIRST_BACKOFF;
    if let Some(ready) = ready.take() {
        let _ = ready.send(Ok(()));
        return false;
    }
    log::info!(
        "fairlock: wake-up subscription on {} is back",
        at.describe()
    );
    observe::reconnected("subscriber");
    true
}

/// One read of a subscription, the wake channel's, a shard channel's or an
/// election's (its watch): `Ok(None)` when it timed out or a signal cut it
/// short (`connections::steady`): the connection is fine and a message
/// may be waiting, so the reader reads again.
pub(crate) fn read<T>(read: redis::RedisResult<T>) -> redis::RedisResult<Option<T>> {
    match read {
        Ok(value) => Ok(Some(value)),
        Err(err) if err.is_timeout() || is_interrupted(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Listens on the shard channels of the slots `node` masters until the
/// client stops (Ok) or the connection fails (Err), as [`listen`] does.
fn listen_shards(
    shared: &Arc<Shared>,
    node: &Address,
    ready: &mut Option<Sender<Result<()>>>,
    backoff: &mut Duration,
) -> Result<()> {
    let at = Listen::Shards(node.clone());
    let mut conn = shared.caller.backend.connection(&at)?.into_inner();
    if ready.is_some() {
        listen_first(shared, node, &mut conn)?;
    }
    (conn.set_read_timeout(Some(SHARD_READ_TIMEOUT))).map_err(Error::from_redis)?;
    // Its slots, subscribed again, have every waiter poll (`serve_shards`).
    opened(&at, ready, backoff);
    let mut live = FxHashSet::default();
    let served = serve_shards(shared, node, &mut conn, &mut live);
    shared.shards.lost(live);
    served
}

/// At the client's start, subscribes on `conn` the channel of the first
/// slot `node` masters, so that a user that may not `SSUBSCRIBE` is
/// refused then (`Permission`), not by a wait of the command timeout at
/// each slot's first call. A call of that slot subscribes it again, which
/// is confirmed again.
fn listen_first(shared: &Shared, node: &Address, conn: &mut redis::Connection) -> Result<()> {
    let map = shared.slot_map();
    let masters = map.as_deref().map(SlotMap::masters).unwrap_or_default();
    let Some(&(slot, ..)) = masters.iter().find(|(.., master)| *master == node) else {
        return Ok(());
    };
    let prefix = shared.config().wake_prefix();
    let channel = Route::Sharded.wake_channel(&prefix, slot, shared.client_id());
    subscribe_on(conn, Route::Sharded, &channel, None)
}

/// The loop of [`listen_shards`]: subscribes the slots wanted that the
/// slot map says `node` masters, reads the map again while a wanted slot
/// is listened on nowhere, and dispatches messages; `live` holds the slots
/// confirmed on `conn`.
fn serve_shards(
    shared: &Arc<Shared>,
    node: &Address,
    conn: &mut redis::Connection,
    live: &mut FxHashSet<u16>,
) -> Result<()> {
    let (config, mut heard, mut probed) = (shared.config(), Instant::now(), false);
    let (prefix, quiet) = (config.wake_prefix(), config.watchdog_period());
    let mut asked = FxHashSet::default();
    let mut map_read = Instant::now();
    loop {
        if shared.is_stopping() {
            return Ok(());
        }
        // Quiet for a watchdog period, its live slots are subscribed again
        // (as `listen` confirms its channel): no answer within the command
        // timeout, the link died without a word.
        if heard.elapsed() >= quiet && !live.is_empty() {
            if heard.elapsed() >= quiet + config.command_timeout {
                let message = "the shard subscriptions were not confirmed in time";
                return Err(Error::new(crate::ErrorKind::Connection, message));
            }
            if !std::mem::replace(&mut probed, true) {
                asked.retain(|slot| !live.contains(slot));
            }
        }
        if map_read.elapsed() >= MAP_READ_PERIOD && shared.shards.any_missing() {
            map_read = Instant::now();
            if let Ok(Some(map)) = shared.refresh_slot_map(Some(node), None) {
                listen_on_new_nodes(shared, &map);
            }
            // Those refused (a MOVED) are asked again where the map says.
            asked.retain(|slot| live.contains(slot));
        }
        let map = shared.slot_map();
        let serves = |slot| map.as_ref().and_then(|map| map.master_of(slot)) == Some(node);
        for slot in shared.shards.to_subscribe(&asked, serves) {
            let channel = Route::Sharded.wake_channel(&prefix, slot, shared.client_id());
            let command = Route::Sharded.subscribe_command(&channel);
            (conn.send_packed_command(&command.get_packed_command())).map_err(Error::from_redis)?;
            asked.insert(slot);
        }
        // RESP3: a read given up (timed out, or cut short by a signal)
        // makes the redis crate skip no push after it.
        let Some(value) = read(conn.recv_response()).map_err(Error::from_redis)? else {
            continue;
        };
        (heard, probed) = (Instant::now(), false);
        match Push::parse(value) {
            Push::Message(payload) => shared.deliver(&payload),
            Push::Subscribed(channel) => {
                let slot = hash_slot(&channel);
                // Handoffs published in the gap were lost: everyone asks.
                if live.insert(slot) && shared.shards.subscribed(slot) {
                    shared.missed_messages();
                }
            }
            Push::Unsubscribed(channel) => {
                let slot = hash_slot(&channel);
                asked.remove(&slot);
                if live.remove(&slot) {
                    shared.shards.lost([slot]);
                }
            }
            Push::Refused(err) => log::debug!("fairlock: a shard subscription at {node:?}: {err}"),
            Push::Other => {}
        }
    }
}

/// Starts the listener thread at `at`, which tells `ready` of its first
/// subscription.
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    at: Listen,
    ready: Sender<Result<()>>,
) -> Result<JoinHandle<()>> {
    if let Listen::Shards(node) | Listen::Node(node) = &at {
        shared.shards.needs_listener(node);
    }
    spawn_named("fairlock-subscriber", shared, move |shared| {
        run(shared, &at, ready)
    })
}

/// Starts a listener thread for each node of `map` that has none, as the
/// client's start does for every node: one that joined the cluster after
/// the client started (masters added to scale out), whose slots would
/// otherwise be heard nowhere.
pub(crate) fn listen_on_new_nodes(shared: &Arc<Shared>, map: &SlotMap) {
    for node in map.nodes() {
        if !shared.shards.needs_listener(node) {
            continue;
        }
        let (host, port) = node;
        log::info!("fairlock: listening on {host}:{port}, new in the cluster");
        // Nobody waits for its first subscription: the calls of its slots
        // wait for their own (`Shards::listen`).
        let (ready, _) = std::sync::mpsc::channel();
        let at = match shared.caller.scripts.route() {
            Route::Sharded => Listen::Shards(node.clone()),
            Route::Classic => Listen::Node(node.clone()),
        };
        match spawn(shared, at, ready) {
            Ok(thread) => shared.shards.keep_thread(thread),
            Err(err) => {
                log::warn!("fairlock: no listener for {node:?} yet: {err}");
                shared.shards.no_listener(node);
            }
        }
    }
}
