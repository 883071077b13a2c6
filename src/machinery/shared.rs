//! The client machinery's shared state: settings, connections, scripts,
//! the registries of waiters, holds and give-backs, and the stop and nudge
//! signals, shared by the handles and the background threads. Also the one
//! call path every operation takes to Redis.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::connections::config::Config;
use crate::connections::resp::Decimal;
use crate::connections::scripts::Scripts;
use crate::connections::{Backend, Listen};
use crate::error::{Result, Retry};
use crate::machinery::cluster_rounds::ClusterRounds;
use crate::machinery::give_backs::GiveBacks;
use crate::machinery::holds::{Hold, Holds};
use crate::machinery::own_conns::OwnConns;
use crate::machinery::waiters::{Waiter, Waiters};
use crate::protocol::{Call, LockKeys, Operation, SyncReplicas, WakeMessage, Written};

/// Pause between calls on a cluster slot that is being moved.
const SLOT_MOVE_RETRY_WAIT: Duration = Duration::from_millis(50);

/// Owns the threads; dropping it stops them.
pub(crate) struct ClientInner {
    pub(crate) shared: Arc<Shared>,
    /// Joined when the client is dropped.
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
}

/// State shared by the handles and the background threads. The threads hold
/// only this, never a [`ClientInner`], so they never keep the client alive.
pub(crate) struct Shared {
    pub(super) config: Config,
    pub(super) backend: Backend,
    pub(super) scripts: Scripts,
    /// Random id of this client; owner ids are `<client id>:<thread number>` (see `owner_id`).
    pub(super) client_id: String,
    pub(super) waiters: Waiters,
    pub(super) holds: Holds,
    /// Calls whose outcome was never learned, for the watchdog to undo.
    pub(super) give_backs: GiveBacks,
    /// The watchdog's own connections (renewals never wait for the pool).
    pub(super) own_conns: OwnConns,
    /// The watchdog's per-master rounds on Redis Cluster.
    pub(super) cluster_rounds: ClusterRounds,
    next_wait_id: AtomicU64,
    stopping: Mutex<bool>,
    stop_signal: Condvar,
    /// Set to have the watchdog run a round now (see [`Shared::nudge_watchdog`]).
    watchdog_nudged: Mutex<bool>,
    watchdog_signal: Condvar,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.shared.stop();
        for handle in self.threads.get_mut().drain(..) {
            if handle.join().is_err() {
                log::error!("fairlock: a background thread panicked");
            }
        }
    }
}

thread_local! {
    /// Number of the current thread inside this process, for owner ids.
    static THREAD_NUMBER: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };

    /// The current thread's last owner id (see [`Shared::owner_id`]).
    static BOUND_OWNER: std::cell::RefCell<Option<Arc<str>>> =
        const { std::cell::RefCell::new(None) };
}

impl Shared {
    /// The state of a client just connected, with a random client id.
    pub(crate) fn new(config: Config, backend: Backend, scripts: Scripts) -> Shared {
        Shared {
            config,
            backend,
            scripts,
            client_id: uuid::Uuid::new_v4().simple().to_string(),
            waiters: Waiters::default(),
            holds: Holds::default(),
            give_backs: GiveBacks::default(),
            own_conns: OwnConns::default(),
            cluster_rounds: ClusterRounds::default(),
            next_wait_id: AtomicU64::new(1),
            stopping: Mutex::new(false),
            stop_signal: Condvar::new(),
            watchdog_nudged: Mutex::new(false),
            watchdog_signal: Condvar::new(),
        }
    }

    /// The client's settings.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The client's random id.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The owner id of an acquire call: the calling thread's
    /// (`<client id>:<thread number>`: re-entrancy is per client and
    /// thread), or with `unbound_call` that call's own, whatever thread
    /// asks (`<client id>:u<call>`); then `@<tag>` when the call has one
    /// (an election's candidate: its value), else `@<identity>` when the
    /// client has one.
    ///
    /// Every acquire call takes one: a thread's own id is built once and
    /// handed out again while its calls go to the same client with the
    /// same suffix ([`BOUND_OWNER`]); a call's own is built in one
    /// allocation of its size, without `fmt`.
    pub(crate) fn owner_id(&self, unbound_call: Option<u64>, tag: Option<&str>) -> Arc<str> {
        let suffix = tag.or(self.config.identity.as_deref());
        let Some(call) = unbound_call else {
            let number = Decimal::of(THREAD_NUMBER.with(|n| *n));
            return BOUND_OWNER.with_borrow_mut(|last| match last {
                Some(owner) if self.spells(owner, "", &number, suffix) => Arc::clone(owner),
                _ => Arc::clone(last.insert(self.build_owner("", &number, suffix).into())),
            });
        };
        self.build_owner("u", &Decimal::of(call), suffix).into()
    }

    /// `<client id>:<kind><number>[@<suffix>]`.
    fn build_owner(&self, kind: &str, number: &Decimal, suffix: Option<&str>) -> String {
        let number = number.as_str();
        let size = self.client_id.len() + 1 + kind.len() + number.len();
        let mut owner = String::with_capacity(size + suffix.map_or(0, |s| 1 + s.len()));
        owner.push_str(&self.client_id);
        owner.push(':');
        owner.push_str(kind);
        owner.push_str(number);
        if let Some(suffix) = suffix {
            owner.push('@');
            owner.push_str(suffix);
        }
        owner
    }

    /// Whether `owner` is what [`build_owner`](Self::build_owner) builds
    /// from the same parts.
    fn spells(&self, owner: &str, kind: &str, number: &Decimal, suffix: Option<&str>) -> bool {
        let rest = owner
            .strip_prefix(self.client_id.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .and_then(|rest| rest.strip_prefix(kind))
            .and_then(|rest| rest.strip_prefix(number.as_str()));
        match (rest, suffix) {
            (Some(rest), None) => rest.is_empty(),
            (Some(rest), Some(suffix)) => rest.strip_prefix('@') == Some(suffix),
            (None, _) => false,
        }
    }

    /// Registers a waiting call, before its first attempt reaches Redis,
    /// so that no handoff message can arrive for an id nobody listens to.
    pub(crate) fn register_waiter(&self, waiter: Arc<Waiter>) {
        self.waiters.insert(waiter);
    }

    /// The waiting call `id` waits no more.
    pub(crate) fn forget_waiter(&self, id: u64) {
        self.waiters.remove(id);
    }

    /// The token of the hold of `lock_key` by `owner` that a live guard
    /// stands for (its exclusive one first), or 0: the only hold a thread
    /// may re-enter (see [`Holds::live_token`]).
    pub(crate) fn live_token(&self, lock_key: &str, owner: &str) -> u64 {
        self.holds.live_token(lock_key, owner)
    }

    /// How many holds of `lock_key` by `owner` have live guards here.
    pub(crate) fn hold_count(&self, lock_key: &str, owner: &str) -> usize {
        self.holds.count(lock_key, owner)
    }

    /// Registers a guard on `hold` (renewed by the watchdog unless its
    /// lease is fixed); a re-entrant guard joins the hold it re-entered. A
    /// renewed hold granted with less lease left than two watchdog periods
    /// has the watchdog renew it at once (a waiter whose heartbeats failed
    /// during an outage gets a grant no longer than its liveness deadline).
    pub(crate) fn register_hold(&self, hold: Hold, renewed: bool) -> Arc<Hold> {
        let expires_at = hold.local_end();
        let hold = self.holds.register(hold, renewed);
        if renewed && expires_at < Instant::now() + 2 * self.config.watchdog_period() {
            self.nudge_watchdog();
        }
        hold
    }

    /// A guard of `hold` is gone (released or dropped).
    pub(crate) fn unregister_hold(&self, hold: &Hold) {
        self.holds.unregister(hold);
    }

    /// A new connection of its own subscribed to `channel` (on a cluster,
    /// on a seed node: every node hears every message; behind Sentinel, on
    /// the master).
    pub(crate) fn subscription(&self, channel: &str) -> Result<redis::Connection> {
        self.backend.subscription(&Listen::Main, channel)
    }

    /// Whether owner id `owner` is one of this client's threads.
    pub(crate) fn is_own(&self, owner: &str) -> bool {
        owner
            .strip_prefix(self.client_id.as_str())
            .is_some_and(|rest| rest.starts_with(':'))
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

    pub(crate) fn wake_channel(&self) -> String {
        format!("{}{}", self.config.wake_prefix(), self.client_id)
    }

    pub(crate) fn next_wait_id(&self) -> u64 {
        self.next_wait_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `call` on a pooled connection. A connection the server closed
    /// while it sat in the pool (restart, failover), or behind Sentinel one
    /// to a master demoted since, fails at once and leaves the pool (see
    /// [`Conn::note`](crate::connections::Conn::note)); the call then goes out again on another one, at
    /// most once per pooled connection plus one.
    /// On a cluster, a call that could not reach a node goes out once more
    /// on a connection with a fresh slot map (see [`Conn::note`](crate::connections::Conn::note)), so the
    /// first call after a failover finds the promoted replica.
    /// The scripts make a call delivered twice count once (call ids).
    pub(crate) fn with_connection<T>(
        &self,
        mut call: impl FnMut(&mut dyn redis::ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let mut stale_retries = self.config.pool_size + 1;
        let mut fresh_map_retry = true;
        loop {
            let mut conn = self.backend.get()?;
            let result = call(conn.get());
            let stale = conn.note(&result);
            drop(conn);
            match result {
                Err(err) if stale_retries > 0 && stale => {
                    stale_retries -= 1;
                    log::debug!("fairlock: retrying on another connection: {err}");
                    crate::machinery::observe::reconnected(
                        crate::machinery::observe::Reconnect::Pool,
                    );
                }
                Err(err)
                    if fresh_map_retry && err.retry() != Retry::No && self.backend.is_cluster() =>
                {
                    fresh_map_retry = false;
                    log::debug!("fairlock: retrying with a fresh cluster slot map: {err}");
                }
                other => return other,
            }
        }
    }

    /// Runs `call` again while its lock's cluster slot is being moved
    /// between masters, for up to `command_timeout`: the script did not
    /// run, and a move usually ends within the cluster client's own
    /// retries (about 0.3-4 s of waits). The watchdog does not wait here:
    /// it renews again next period, and must not hold back other slots.
    fn through_slot_moves<T>(&self, mut call: impl FnMut() -> Result<T>) -> Result<T> {
        let give_up = Instant::now() + self.config.command_timeout;
        loop {
            match call() {
                Err(err) if err.is_slot_moving() && Instant::now() < give_up => {
                    log::debug!("fairlock: slot being moved, retrying: {err}");
                    std::thread::sleep(SLOT_MOVE_RETRY_WAIT);
                }
                other => return other,
            }
        }
    }

    /// Runs `op` on the lock `keys` on a pooled connection: one round trip.
    pub(crate) fn call<O: Operation>(&self, keys: &LockKeys, op: &O) -> Result<O::Reply> {
        self.call_with(keys, op, None)?.replicated()
    }

    /// Runs a writing `op`, still in one round trip: with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas) set, a `WAIT` rides
    /// in the same pipeline and a shortfall ([`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated))
    /// comes back with the reply.
    pub(crate) fn call_write<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
    ) -> Result<Written<O::Reply>> {
        self.call_with(keys, op, self.config.sync_replicas)
    }

    /// Runs a writing `op` once, within `budget` all told, the wait for a
    /// pooled connection included: no retry on another connection, no wait
    /// through a slot move. A guard's Drop sends its release this way, so
    /// it never holds its thread longer than one command timeout; on any
    /// error the caller hands the call to the watchdog.
    pub(crate) fn call_write_within<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        budget: Duration,
    ) -> Result<Written<O::Reply>> {
        let give_up = Instant::now() + budget;
        let mut conn = self.backend.get_within(budget)?;
        let left = give_up.saturating_duration_since(Instant::now());
        let capped = left < self.config.command_timeout;
        if capped {
            conn.set_command_timeout(left.max(Duration::from_millis(1)))?;
        }
        let result = self
            .scripts
            .run(conn.get(), keys, op, self.config.sync_replicas);
        if !conn.note(&result) && capped {
            // Back to the pool with the client's own timeout (a connection
            // that timed out is closed, and the pool drops it).
            let _ = conn.set_command_timeout(self.config.command_timeout);
        }
        result
    }

    fn call_with<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        sync: Option<SyncReplicas>,
    ) -> Result<Written<O::Reply>> {
        self.through_slot_moves(|| {
            self.with_connection(|conn| self.scripts.run(conn, keys, op, sync))
        })
    }

    /// Has the watchdog give back `call`, whose outcome is unknown or whose
    /// hold is not to be kept, as soon as Redis answers (see
    /// [`GiveBacks`]); the watchdog is nudged to try at once.
    pub(crate) fn give_back_later(&self, call: &Call) {
        self.give_backs
            .add(call.clone(), self.config.command_timeout);
        self.nudge_watchdog();
    }

    /// Gives back `call` now (Redis just answered), or later through the
    /// watchdog if that fails.
    pub(crate) fn give_back_now(&self, call: &Call) {
        let given_back = self
            .through_slot_moves(|| self.with_connection(|conn| self.scripts.abandon(conn, call)));
        if let Err(err) = given_back {
            log::warn!(
                "fairlock: giving back call {} failed, the watchdog retries: {err}",
                call.id
            );
            self.give_back_later(call);
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

    fn stop(&self) {
        *self.stopping.lock() = true;
        self.stop_signal.notify_all();
        self.nudge_watchdog();
        // Wakes the subscriber out of its blocking read at once; if Redis is
        // gone, its read timeout gets it out instead.
        if let Ok(mut conn) = self.backend.checkout(Duration::from_millis(200)) {
            let stop = WakeMessage::stop_command(&self.wake_channel());
            let _: redis::RedisResult<i64> = stop.query(conn.get());
        }
    }
}
