//! The state the core and the background threads share: the call path
//! (the `Caller`: settings, connections, scripts), the registries of
//! waiters, holds and abandons, and the stop and nudge signals; and what
//! more than one of them does with it (owner ids: `owner`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::connections::caller::Caller;
use crate::connections::config::Config;
use crate::machinery::caller::waiters::Waiters;
use crate::machinery::cluster_rounds::ClusterRounds;
use crate::machinery::holds::abandons::Abandons;
use crate::machinery::holds::permits_seen::PermitsSeen;
use crate::machinery::holds::{Hold, Holds};
use crate::machinery::subscriber::shards::Shards;
use crate::machinery::watchdog::conns::OwnConns;
use crate::protocol::{Call, HandedOver, Route, WakeMessage};

/// State shared by the core and the background threads. The threads hold
/// only this, never the [`Core`](crate::machinery::core::Core), so
/// they never keep the client alive.
pub(crate) struct Shared {
    /// The settings, connections and scripts, and the call path over them.
    pub(super) caller: Caller,
    /// Random id of this client; owner ids are `<client id>:<thread number>` (see `owner_id`).
    pub(super) client_id: String,
    pub(super) waiters: Waiters,
    pub(super) holds: Holds,
    /// Calls whose outcome was never learned, for the watchdog to undo.
    pub(super) abandons: Abandons,
    /// The watchdog's own connections (renewals never wait for the pool).
    pub(super) own_conns: OwnConns,
    /// The watchdog's per-master rounds on Redis Cluster.
    pub(super) cluster_rounds: ClusterRounds,
    /// Semaphores found with another number of permits in force.
    pub(super) permits_seen: PermitsSeen,
    /// The slots listened on with sharded pub/sub.
    pub(super) shards: Shards,
    next_wait_id: AtomicU64,
    stopping: Mutex<bool>,
    stop_signal: Condvar,
    /// Set to have the watchdog run a round now (see [`Shared::nudge_watchdog`]).
    watchdog_nudged: Mutex<bool>,
    watchdog_signal: Condvar,
}

impl Shared {
    /// The state of a client just connected, with a random client id.
    pub(crate) fn new(caller: Caller) -> Shared {
        Shared {
            caller,
            client_id: uuid::Uuid::new_v4().simple().to_string(),
            waiters: Waiters::default(),
            holds: Holds::default(),
            abandons: Abandons::default(),
            own_conns: OwnConns::default(),
            cluster_rounds: ClusterRounds::default(),
            permits_seen: PermitsSeen::default(),
            shards: Shards::default(),
            next_wait_id: AtomicU64::new(1),
            stopping: Mutex::new(false),
            stop_signal: Condvar::new(),
            watchdog_nudged: Mutex::new(false),
            watchdog_signal: Condvar::new(),
        }
    }

    /// The client's settings.
    pub(crate) fn config(&self) -> &Config {
        &self.caller.config
    }

    /// The client's random id.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Registers a guard on `hold` (renewed by the watchdog unless its
    /// lease is fixed); a re-entrant guard joins the hold it re-entered. A
    /// renewed hold granted with less lease left than two watchdog periods
    /// has the watchdog renew it at once (a waiter whose heartbeats failed
    /// during an outage gets a grant no longer than its liveness deadline).
    pub(crate) fn register_hold(&self, hold: Hold, renewed: bool) -> Arc<Hold> {
        let expires_at = hold.local_end();
        let hold = self.holds.register(hold, renewed);
        if renewed && expires_at < Instant::now() + 2 * self.config().watchdog_period() {
            self.nudge_watchdog();
        }
        hold
    }

    /// Wakes this client's waiters among those a reply says it admitted
    /// (a release, a downgrade, a change of permits) now, rather than when
    /// their handoff messages arrive (which then find them gone).
    pub(crate) fn grant_own(&self, admitted: &[HandedOver]) {
        for next in admitted {
            let own = next.owner.strip_prefix(self.client_id.as_str());
            if own.is_some_and(|rest| rest.starts_with(':')) {
                self.grant_waiter(next.wait_id, next.token, next.ttl_ms);
            }
        }
    }

    /// The lock was handed to this client's waiting call `wait_id` with
    /// `token` for `ttl_ms` (as a "G" message or a release reply says):
    /// wakes it if it still waits. The second word of the same handoff
    /// finds it gone, or granted already with the same token.
    pub(crate) fn grant_waiter(&self, wait_id: u64, token: u64, ttl_ms: u64) {
        if let Some(waiter) = self.waiters.get(wait_id) {
            waiter.grant_from_message(token, Duration::from_millis(ttl_ms));
        }
    }

    /// With sharded pub/sub, has the client listen on the channel of
    /// `slot` before a call there that may be woken is sent (its first
    /// grant would be lost otherwise): waits up to the command timeout for
    /// the slot's first subscription (see [`Shards::listen`]).
    pub(crate) fn listen_at(&self, slot: u16) {
        if self.caller.scripts.route() == Route::Sharded {
            self.shards.listen(slot, self.config().command_timeout);
        }
    }

    pub(crate) fn wake_channel(&self) -> String {
        format!("{}{}", self.config().wake_prefix(), self.client_id)
    }

    pub(crate) fn next_wait_id(&self) -> u64 {
        self.next_wait_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Has the watchdog abandon `call`, whose outcome is unknown or whose
    /// hold is not to be kept, as soon as Redis answers (see
    /// [`Abandons`]); the watchdog is nudged to try at once.
    pub(crate) fn abandon_later(&self, call: &Call) {
        self.abandons
            .add(call.clone(), self.config().command_timeout);
        self.nudge_watchdog();
    }

    /// Abandons `call` now (Redis just answered), or later through the
    /// watchdog if that fails.
    pub(crate) fn abandon_now(&self, call: &Call) {
        if let Err(err) = self.caller.abandon(call) {
            log::warn!(
                "fairlock: abandoning call {} failed, the watchdog retries: {err}",
                call.id
            );
            self.abandon_later(call);
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        *self.stopping.lock()
    }

    /// Sleeps up to `timeout`; returns true when the client is stopping.
    pub(crate) fn sleep_unless_stopping(&self, timeout: Duration) -> bool {
        let mut stopping = self.stopping.lock();
        if !*stopping {
            self.stop_signal.wait_for(&mut stopping, timeout);
        }
        *stopping
    }

    /// The watchdog's sleep: up to `timeout`, or until nudged or stopping.
    /// Returns true when the client is stopping.
    pub(crate) fn watchdog_sleep(&self, timeout: Duration) -> bool {
        let mut nudged = self.watchdog_nudged.lock();
        if !*nudged && !self.is_stopping() {
            self.watchdog_signal.wait_for(&mut nudged, timeout);
        }
        *nudged = false;
        self.is_stopping()
    }

    /// Has the watchdog renew at once, e.g. a hold granted with less lease
    /// left than two watchdog periods (a waiter whose heartbeats failed
    /// during an outage gets a grant no longer than its liveness deadline).
    pub(crate) fn nudge_watchdog(&self) {
        *self.watchdog_nudged.lock() = true;
        self.watchdog_signal.notify_one();
    }

    pub(super) fn stop(&self) {
        *self.stopping.lock() = true;
        self.stop_signal.notify_all();
        self.nudge_watchdog();
        // Wakes the subscriber out of its blocking read at once; if Redis is
        // gone, its read timeout gets it out instead (a shard listener's
        // short one always: no PUBLISH, which a cluster copies to every node).
        if self.caller.scripts.route() == Route::Sharded {
            return;
        }
        if let Ok(mut conn) = self.caller.backend.checkout(Duration::from_millis(200)) {
            let stop = WakeMessage::stop_command(&self.wake_channel());
            let _: redis::RedisResult<i64> = stop.query(conn.get());
        }
    }
}
