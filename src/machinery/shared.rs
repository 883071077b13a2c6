//! What every thread of a client shares: the struct the core, the callers
//! and the two background threads hold, the stop and nudge signals, the
//! cluster's slot map (one copy, one refresh: [`Shared::refresh_slot_map`]),
//! and the registries of waiters, holds and calls to abandon, private here:
//! every thread reaches them through the methods below, named for what it
//! does (a caller parks, a message grants, the watchdog takes a round's
//! work), the subscriber alone its own registry of shard channels.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::connections::caller::{Caller, Limit};
use crate::connections::config::Config;
use crate::connections::resp::Decimal;
use crate::connections::slot_map::{Address, SlotMap};
use crate::error::{Error, ErrorKind, Result};
use crate::machinery::caller::waiters::{poll_time, Waiter, Waiters};
use crate::machinery::holds::abandons::{Abandons, ToAbandon};
use crate::machinery::holds::{Hold, Holds, FORCE_RELEASED};
use crate::machinery::subscriber::shards::Shards;
use crate::protocol::{owner, Call, HandedOver, Route, WakeMessage};

/// State shared by the core and the background threads. The threads hold
/// only this, never the client's `Core`, so they never keep the client
/// alive.
pub(crate) struct Shared {
    /// The settings, connections and scripts, and the call path over them.
    pub(super) caller: Caller,
    /// Random id of this client, the first part of its owner ids.
    client_id: String,
    /// The threads parked in a queue, by call id.
    waiters: Waiters,
    /// Every hold with live guards: what the watchdog renews and what a
    /// thread may re-enter.
    holds: Holds,
    /// Calls whose outcome was never learned, for the watchdog to undo.
    abandons: Abandons,
    /// The slots listened on with sharded pub/sub: the subscriber's (a
    /// caller only waits for its slot, with [`listen_at`](Self::listen_at)).
    pub(crate) shards: Shards,
    /// The cluster's slot map as last read; `None` off a cluster.
    slot_map: Mutex<Option<Arc<SlotMap>>>,
    next_call_id: AtomicU64,
    /// Whether the client is stopping, and whether the watchdog is to run
    /// a round now ([`Shared::nudge_watchdog`]); `signal` tells of both.
    stop_nudge: Mutex<(bool, bool)>,
    signal: Condvar,
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
    pub(crate) fn new(caller: Caller) -> Shared {
        Shared {
            caller,
            client_id: uuid::Uuid::new_v4().simple().to_string(),
            waiters: Waiters::default(),
            holds: Holds::default(),
            abandons: Abandons::default(),
            shards: Shards::default(),
            slot_map: Mutex::default(),
            next_call_id: AtomicU64::new(1),
            stop_nudge: Mutex::default(),
            signal: Condvar::new(),
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

    /// The owner id of an acquire call (see [`owner`]): the calling
    /// thread's, or with `unbound_call` that call's own; suffixed with
    /// `tag` when the call has one (an election's candidate: its value),
    /// else with the client's identity, if any. A thread's own is built
    /// once and handed out again while its calls go to the same client
    /// with the same suffix ([`BOUND_OWNER`]).
    pub(crate) fn owner_id(&self, unbound_call: Option<u64>, tag: Option<&str>) -> Arc<str> {
        let (client, suffix) = (self.client_id(), tag.or(self.config().identity.as_deref()));
        let Some(call) = unbound_call else {
            let number = Decimal::of(THREAD_NUMBER.with(|n| *n));
            let number = number.as_str();
            // The thread's number never changes: the client and suffix may.
            let same =
                |id: &str| owner::client_of(id) == Some(client) && owner::caller_of(id).1 == suffix;
            let built = || -> Arc<str> { owner::build(client, "", number, suffix).into() };
            // Built anew in a thread-local's destructor run after this one's.
            return (BOUND_OWNER.try_with(|last| match &mut *last.borrow_mut() {
                Some(id) if same(id) => Arc::clone(id),
                last => Arc::clone(last.insert(built())),
            }))
            .unwrap_or_else(|_| built());
        };
        owner::build(client, "u", Decimal::of(call).as_str(), suffix).into()
    }

    /// Registers a guard on `hold` (renewed by the watchdog unless its
    /// call's lease is fixed); a re-entrant guard joins the hold it
    /// re-entered. A renewed hold granted with less lease left than two
    /// watchdog periods has the watchdog renew it at once (a waiter whose
    /// heartbeats failed during an outage gets a grant no longer than its
    /// liveness deadline).
    pub(crate) fn register_hold(&self, hold: Hold) -> Arc<Hold> {
        let (expires_at, renewed) = (hold.local_end(), !hold.call.lease.is_fixed());
        let hold = self.holds.register(hold);
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
            if owner::client_of(&next.owner) == Some(self.client_id()) {
                self.grant_waiter(next.call, next.token, next.ttl_ms);
            }
        }
    }

    /// The lock was handed to this client's waiting call `call_id` with
    /// `token` for `ttl_ms` (as a "G" message or a release reply says):
    /// wakes it if it still waits. The second word of the same handoff
    /// finds it gone, or granted already with the same token.
    fn grant_waiter(&self, call_id: u64, token: u64, ttl_ms: u64) {
        if let Some(waiter) = self.waiters.get(call_id) {
            waiter.grant(token, None, Duration::from_millis(ttl_ms));
        }
    }

    /// Hands a wake message (`payload`, as a subscription read it) to what
    /// it names: a grant or the head of the queue to its waiter, a
    /// revocation or a force release to the holds of its lock with tokens
    /// up to the one it names.
    pub(crate) fn deliver(&self, payload: &[u8]) {
        let Some(message) = WakeMessage::parse(payload) else {
            let text = String::from_utf8_lossy(payload);
            return log::debug!("fairlock: ignoring wake message {text:?}");
        };
        match message {
            WakeMessage::Granted {
                call,
                token,
                ttl_ms,
            } => self.grant_waiter(call, token, ttl_ms),
            WakeMessage::Head { call, pttl_ms } => {
                if let Some(waiter) = self.waiters.get(call) {
                    waiter.poll_by(poll_time(pttl_ms));
                }
            }
            WakeMessage::Revoke { up_to, lock_key } => {
                self.tell(&lock_key, up_to, Waiter::revoked, Hold::mark_revoked);
            }
            WakeMessage::Freed { up_to, lock_key } => {
                self.tell(&lock_key, up_to, Waiter::freed, |h| {
                    h.mark_lost(FORCE_RELEASED)
                });
            }
            WakeMessage::Stop => {}
        }
    }

    /// Tells the waiters of `lock_key` (`waiter`) and then its holds
    /// granted with tokens up to `up_to` (`hold`) of a revocation or a force
    /// release: a hold registered after it is told by its waiter, one before
    /// by the holds' turn.
    fn tell(&self, lock_key: &str, up_to: u64, waiter: fn(&Waiter, u64), hold: impl Fn(&Hold)) {
        (self.waiters.of_lock(lock_key).iter()).for_each(|w| waiter(w, up_to));
        self.holds.each_up_to(lock_key, up_to, hold);
    }

    /// Messages may have been lost (a subscription is back after a gap,
    /// in which the server may have restarted empty or failed over): every
    /// waiter asks again, and the watchdog checks every hold and queue
    /// entry at once (a renewal round), so a hold lost with the data is
    /// told now, not a watchdog period later.
    pub(crate) fn missed_messages(&self) {
        self.holds.note_gap();
        self.waiters.repoll_all();
        self.nudge_watchdog();
    }

    /// Stops renewing `hold` (its last guard released it or let it go).
    pub(crate) fn unregister_hold(&self, hold: &Hold) {
        self.holds.unregister(hold);
    }

    /// How many holds of `lock_key` `owner` has with live guards, and the
    /// token a re-entry names (0: none; see [`Holds::held_by`]).
    pub(crate) fn held_by(&self, lock_key: &str, owner: &str) -> (usize, u64) {
        self.holds.held_by(lock_key, owner)
    }

    /// Parks `waiter` where messages and heartbeats find it by call id.
    pub(crate) fn park(&self, waiter: Arc<Waiter>) {
        self.waiters.insert(waiter);
    }

    /// Forgets the waiter of call `call_id`: its wait is over.
    pub(crate) fn unpark(&self, call_id: u64) {
        self.waiters.remove(call_id);
    }

    /// A round's work for the watchdog: every hold, the waiters of each
    /// lock, the calls still to abandon, in that order.
    pub(crate) fn round(&self) -> Vec<Work> {
        let holds = self.holds.snapshot().into_iter().map(Work::Renew);
        let groups = self.waiters.by_lock().into_iter().map(Work::Heartbeat);
        let abandons = self.abandons.snapshot().into_iter().map(Work::Abandon);
        holds.chain(groups).chain(abandons).collect()
    }

    /// The calls still to abandon (what a client going away tries once
    /// more).
    pub(crate) fn abandons_left(&self) -> Vec<Arc<ToAbandon>> {
        self.abandons.snapshot()
    }

    /// `waiter`'s poll could not reach Redis: it asks again
    /// [`RETRY`](crate::machinery::caller::waiters::RETRY) later through
    /// the rejoin in order ([`Waiters::rejoin`]): none of its lock's
    /// waiters that joined after it polls before it was answered, so a
    /// queue lost with data the server is still loading (`LOADING`) is
    /// joined again in order too.
    pub(crate) fn retry_in_order(&self, waiter: &Arc<Waiter>) {
        self.waiters.rejoin(vec![Arc::clone(waiter)]);
    }

    /// The waiters a heartbeat found gone from their queue ask again, in
    /// the order they had (see [`Waiters::rejoin_in_order`]).
    pub(crate) fn rejoin_in_order(&self, gone: Vec<Arc<Waiter>>) {
        self.waiters.rejoin_in_order(gone);
    }

    /// Redis answered an abandon of `entry` sent at `sent` (`refused`: with
    /// an error, and it is dropped).
    pub(crate) fn abandon_answered(&self, entry: &Arc<ToAbandon>, sent: Instant, refused: bool) {
        self.abandons.answered(entry, sent, refused);
    }

    /// The cluster's slot map as last read; `None` off a cluster or before
    /// a first read.
    pub(crate) fn slot_map(&self) -> Option<Arc<SlotMap>> {
        self.slot_map.lock().clone()
    }

    /// Reads the cluster's slot map again and keeps it, for every thread
    /// that goes by slot (the watchdog groups renewals by master, a shard
    /// listener subscribes the slots its node masters): the one place it is
    /// written. `Ok(None)` off a cluster. A map that names another master
    /// of a slot than before makes every pooled connection stale (their
    /// maps may send calls to a master that stalled and was failed over),
    /// and the first map, or one that names other masters, has the new
    /// connections opened at its masters first (`Backend::reseed`).
    /// Asked of the node `near` first if given (a subscriber's own node: a
    /// stalled one does not hold back the thread that listens on another),
    /// by `by` if given (a watch's call).
    pub(crate) fn refresh_slot_map(
        &self,
        near: Option<&Address>,
        by: Option<Instant>,
    ) -> Result<Option<Arc<SlotMap>>> {
        let Some(new) = self.caller.backend.slot_map(near, by) else {
            return Ok(None);
        };
        let new = Arc::new(new?);
        let old = self.slot_map.lock().replace(Arc::clone(&new));
        let moved = (old.as_ref()).is_some_and(|old| old.masters() != new.masters());
        if old.is_none() || moved {
            if let Err(err) = self.caller.backend.reseed(&self.caller.config, &new) {
                log::debug!("fairlock: new connections still open at the seeds: {err}");
            }
        }
        if moved {
            self.caller.backend.renew_all();
        }
        Ok(Some(new))
    }

    /// With sharded pub/sub, has the client listen on the channel of
    /// `slot` before a call there that may be woken is sent (its first
    /// grant would be lost otherwise): waits up to the command timeout, and
    /// not past the call's `deadline`, for the slot's first subscription
    /// (see [`Shards::listen`]). A forked child's copy waits for nothing:
    /// no thread of its process listens, and its call is refused.
    pub(crate) fn listen_at(&self, slot: u16, deadline: Option<Instant>) {
        if self.caller.scripts.route() == Route::Sharded && !self.caller.is_copy() {
            let timeout = self.config().command_timeout;
            let left = deadline.map_or(timeout, |at| at.saturating_duration_since(Instant::now()));
            self.shards.listen(slot, left.min(timeout));
        }
    }

    pub(crate) fn wake_channel(&self) -> String {
        format!("{}{}", self.config().wake_prefix(), self.client_id)
    }

    /// A new call id, unique in this client.
    pub(crate) fn next_call_id(&self) -> u64 {
        self.next_call_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Has the watchdog abandon `call`, whose outcome is unknown or whose
    /// hold is not to be kept, as soon as Redis answers (see
    /// [`Abandons`]); the watchdog is nudged to try at once.
    pub(crate) fn abandon_later(&self, call: &Call) {
        (self.abandons).add(call.clone(), self.config().command_timeout);
        self.nudge_watchdog();
    }

    /// Abandons `call` now (Redis just answered), within `limit` (a
    /// waiting call's deadline), or later through the watchdog if that
    /// fails.
    pub(crate) fn abandon_now(&self, call: &Call, limit: Limit) {
        if let Err(err) = self.caller.abandon(call, limit) {
            let id = call.id;
            log::warn!("fairlock: abandoning call {id} failed, the watchdog retries: {err}");
            self.abandon_later(call);
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stop_nudge.lock().0
    }

    /// Sleeps up to `timeout`, or until the client stops or, for the
    /// `watchdog`, until nudged (the nudge taken); true when the client is
    /// stopping.
    pub(crate) fn sleep(&self, timeout: Duration, watchdog: bool) -> bool {
        let mut state = self.stop_nudge.lock();
        let idle = |&mut (stopping, nudged): &mut (bool, bool)| !(stopping || watchdog && nudged);
        self.signal.wait_while_for(&mut state, idle, timeout);
        state.1 &= !watchdog;
        state.0
    }

    /// Has the watchdog renew at once, e.g. a hold granted with less lease
    /// left than two watchdog periods (a waiter whose heartbeats failed
    /// during an outage gets a grant no longer than its liveness deadline).
    pub(crate) fn nudge_watchdog(&self) {
        self.stop_nudge.lock().1 = true;
        self.signal.notify_all();
    }

    pub(super) fn stop(&self) {
        self.stop_nudge.lock().0 = true;
        self.signal.notify_all();
        // Wakes the subscriber out of its blocking read at once; if Redis is
        // gone or stalled, its read timeout gets it out instead (a shard
        // listener's short one always: no PUBLISH, which a cluster copies
        // to every node). Within that timeout: a stop waits for no more.
        if self.caller.scripts.route() == Route::Sharded {
            return;
        }
        let within = Duration::from_millis(200);
        if let Ok(mut conn) = self.caller.backend.checkout(within) {
            let stop = WakeMessage::stop_command(&self.wake_channel());
            if conn.set_command_timeout(within).is_ok() {
                let _: redis::RedisResult<i64> = stop.query(conn.get());
            }
        }
    }
}

/// One call of a watchdog round ([`Shared::round`]).
pub(crate) enum Work {
    Renew(Arc<Hold>),
    /// Heartbeat the waiters of one lock.
    Heartbeat(Vec<Arc<Waiter>>),
    Abandon(Arc<ToAbandon>),
}

impl Work {
    /// The call whose lock it is for (a heartbeat's first waiter's).
    pub(crate) fn call(&self) -> &Call {
        match self {
            Work::Renew(hold) => &hold.call,
            Work::Heartbeat(waiters) => &waiters[0].call,
            Work::Abandon(given) => &given.call,
        }
    }
}

/// Starts a named background thread that holds only the shared state.
pub(crate) fn spawn_named(
    name: &str,
    shared: &Arc<Shared>,
    body: impl FnOnce(&Arc<Shared>) + Send + 'static,
) -> Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || body(&shared))
        .map_err(|err| Error::with_source(ErrorKind::Internal, "cannot start a thread", err))
}
