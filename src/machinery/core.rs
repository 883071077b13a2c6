//! The client's core, and every entry point the handles call, in this one
//! file: [`Core::start`] (connections, scripts, the threads), acquire with
//! a wait ([`Core::acquire`], run by
//! [`Acquisition`](crate::machinery::caller::acquisition::Acquisition) on the
//! caller's thread), the admin calls (status, force release, revoke, a
//! semaphore's number of permits), the thread's own hold of a lock and an
//! election's watch. A hold it returns
//! ([`CallHold`](crate::machinery::caller::call_hold::CallHold)) is released and
//! changes access through its own methods. The handles only type it (lock_api's
//! `Mutex<R, T>` over a raw lock, Curator's recipes over `LockInternals`):
//! they send no protocol operation and hold no connection.

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::connections::caller::{Caller, Limit};
use crate::connections::config::Config;
use crate::connections::scripts::Scripts;
use crate::connections::topology::Topology;
use crate::connections::warning::ServerWarning;
use crate::connections::{eviction, Backend, Listen};
use crate::error::{Error, ErrorKind, Result};
use crate::machinery::caller::acquisition::Acquisition;
use crate::machinery::caller::call_hold::CallHold;
use crate::machinery::caller::target::Target;
use crate::machinery::caller::wait::Wait;
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::machinery::holds::permits_seen::PermitsSeen;
use crate::machinery::observe::{self, Labels};
use crate::machinery::shared::{spawn_named, Shared};
use crate::machinery::subscriber::watch::Subscription;
use crate::machinery::{subscriber, watchdog};
use crate::protocol::{
    owner, Ask, ForceRelease, Freed, LockKeys, Operation, PermitsSet, Revoke, Revoked, SetPermits,
    Status, StatusReply, Written,
};

/// A client's core: its shared state and its background threads, which
/// stop when it is dropped (with the client's last handle).
pub(crate) struct Core {
    pub(super) shared: Arc<Shared>,
    /// Joined when the client is dropped.
    pub(super) threads: Vec<JoinHandle<()>>,
    /// What the start found wrong with the servers; never changed after.
    pub(crate) warnings: Vec<ServerWarning>,
    /// Semaphores found with another number of permits in force (only
    /// callers read and write it: no background thread).
    pub(super) permits_seen: PermitsSeen,
}

impl Drop for Core {
    fn drop(&mut self) {
        if self.is_copy() {
            // The threads are not in this process: nothing to stop or join.
            std::mem::forget(std::mem::take(&mut self.threads));
            return;
        }
        self.shared.stop();
        let mut threads = std::mem::take(&mut self.threads);
        // A listener may start one for a node that joined the cluster
        // until it sees the client stopping: joined until none is left.
        while !threads.is_empty() {
            for handle in threads.drain(..) {
                if handle.join().is_err() {
                    log::error!("fairlock: a background thread panicked");
                }
            }
            threads = self.shared.shards.take_threads();
        }
    }
}

impl Core {
    /// Connects as `config` and `topology` say, finds the scripts on the
    /// server (loading them where they are missing) and starts the threads; returns once this client can be woken (a
    /// subscription is live).
    pub(crate) fn start(config: Config, topology: Topology) -> Result<Core> {
        let backend = Backend::open(&config, topology)?;
        observe::describe();
        let scripts = Scripts::new(&config.common_args(), observe::scripts_reloaded);
        // The first connection is opened here, not through the pool, whose
        // connect attempts r2d2 retries until the checkout's timeout: a
        // refused port, refused credentials or a database the server does
        // not have are reported at once, with their cause.
        // A short command first: a server that asks for a password drops an
        // unauthenticated connection that sends one as long as the library,
        // where a short one hears why (NOAUTH).
        // Something that answers, but not as Redis, or does not answer at
        // all, is named as such in one line (`Error::at_first_contact`).
        let server = config.target.describe();
        // The first connection's or its first command's error, as
        // `first_failure` says it.
        let started = Instant::now();
        let first_contact = |err: Error| {
            let err = backend.first_failure(err, started);
            err.at_first_contact(&server, config.connect_timeout, config.command_timeout)
        };
        let mut first = backend.own_connection().map_err(first_contact)?;
        let time: redis::RedisResult<Vec<String>> = redis::cmd("TIME").query(&mut *first);
        time.map_err(Error::from_redis).map_err(first_contact)?;
        let loaded = scripts.find_or_load(&mut *first, backend.is_cluster());
        loaded.map_err(|err| err.during(format_args!("loading fairlock's scripts at {server}")))?;
        let warnings = eviction::check(&mut *first, &server, config.require_noeviction)?;
        // Under sync_replicas a write's WAIT rides after its script: a user
        // that may not WAIT would have each call's write made and the call
        // fail. Found here: `WAIT 0 0` answers at once.
        if config.sync_replicas.is_some() {
            let wait = redis::cmd("WAIT")
                .arg(0)
                .arg(0)
                .query::<redis::Value>(&mut *first);
            let during = |err| Error::from_redis(err).during(format_args!("WAIT at {server}"));
            wait.map_err(during)?;
        }
        let shared = Arc::new(Shared::new(Caller {
            config,
            backend,
            scripts,
            reconnected: || observe::reconnected("pool"),
            pid: std::process::id(),
        }));

        // The subscription must be live before any waiter can queue, or the
        // first handoff message could be missed. On a cluster one thread
        // listens on each node; one live subscription is enough to start
        // (every node hears every message), the others keep trying. With
        // sharded pub/sub a connection is enough (at a master, its first
        // slot subscribed: a refusal of the user is told here): each call
        // has its slot subscribed before it is sent (`Shared::listen_at`).
        let mut inner = Core {
            shared: Arc::clone(&shared),
            threads: Vec::new(),
            warnings,
            permits_seen: PermitsSeen::default(),
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let slot_map = shared.refresh_slot_map(None, None).unwrap_or_else(|err| {
            log::warn!("fairlock: cannot read the cluster's nodes, listening on a seed: {err}");
            None
        });
        // Sharded pub/sub where the cluster has it (it took the Functions
        // library: Redis 7.0 and later, Valkey) and its slot map names a
        // node (a lone node that met no peer names itself by no host): on
        // every node the map names (a replica's thread subscribes once it
        // is promoted).
        let listeners = match slot_map.as_deref() {
            Some(map) if shared.caller.scripts.calls_functions() && !map.nodes().is_empty() => {
                shared.caller.scripts.use_sharded();
                map.nodes().iter().cloned().map(Listen::Shards).collect()
            }
            map => shared.caller.backend.listeners(map),
        };
        // The scripts publish each wake-up after writing what it tells of,
        // and Redis checks a script's PUBLISH as it runs: a user that may
        // not publish on its wake channel would have each handoff written
        // and its release refused. Found here by publishing on this
        // client's own channel, which nobody hears yet.
        let route = shared.caller.scripts.route();
        let channel = route.wake_channel(&shared.config().wake_prefix(), 0, shared.client_id());
        let published = route
            .publish_command(&channel)
            .query::<redis::Value>(&mut *first);
        let on = |err| {
            Error::from_redis(err).during(format_args!("publishing on {channel} at {server}"))
        };
        published.map_err(on)?;
        for at in &listeners {
            (inner.threads).push(subscriber::spawn(&shared, at.clone(), ready_tx.clone())?);
        }
        let mut deadline =
            Instant::now() + shared.config().connect_timeout + shared.config().command_timeout;
        let timed_out = "timed out subscribing to the wake-up channel";
        let mut outcome = Err(Error::new(ErrorKind::Connection, timed_out));
        for _ in &listeners {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(ready) = ready_rx.recv_timeout(left) else {
                break;
            };
            if ready.is_ok() {
                // A slow node costs a later fast path, not the start.
                deadline = deadline.min(Instant::now() + Duration::from_millis(500));
            } else if ready
                .as_ref()
                .is_err_and(|err| err.kind() == ErrorKind::Permission)
            {
                // Any node's (ACL rules are per node): it would never wake.
                outcome = ready;
                break;
            }
            outcome = outcome.or(ready);
        }
        // On error, dropping `inner` stops and joins the subscribers.
        outcome.map_err(|err| err.during(format_args!("subscribing at {server}")))?;
        (inner.threads).push(spawn_named("fairlock-watchdog", &shared, watchdog::run)?);
        Ok(inner)
    }

    /// One acquire call on `target` asking for `ask` under `policy`, owned
    /// by its thread or (`unbound`) by itself, its owner id tagged with
    /// `tag` (an election's value), waiting as `wait` says: the hold it
    /// got, or `None` when the wait ended first. A bad name, lease or
    /// maximum hold is an error before any I/O.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        target: &Target,
        ask: Ask,
        policy: LeasePolicy,
        unbound: bool,
        tag: Option<&str>,
        wait: &Wait,
    ) -> Result<Option<CallHold>> {
        let keys = target.keys_for("acquire")?;
        let lease = (policy.lease(self.config())).map_err(|err| target.during("acquire", err))?;
        let named = self.config().metrics_lock_names;
        let acquisition = Acquisition {
            shared: &self.shared,
            permits_seen: &self.permits_seen,
            keys,
            ask,
            policy,
            lease,
            unbound,
            owner_tag: tag,
            labels: Labels::new(keys.kind(), named.then_some(target.name())),
        };
        let got = acquisition.run(wait)?;
        Ok(got.map(|(hold, call, waited, round_trip)| CallHold {
            client: Arc::clone(self),
            target: target.clone(),
            policy,
            hold,
            call,
            waited,
            round_trip,
            released: false,
        }))
    }

    /// Subscribes to the channel of the election `target` (on a cluster,
    /// on a seed node: every node hears every message, or with sharded
    /// pub/sub at its slot's master; behind Sentinel, on the master), on a
    /// connection of its own.
    pub(crate) fn watch(&self, target: &Target) -> Result<Subscription> {
        let route = self.shared.caller.scripts.route();
        let channel = route.election_channel(&self.config().key_prefix, target.keys()?);
        Subscription::open(&self.shared, route, channel)
    }

    /// Whether this is a forked child's copy of its parent's client
    /// ([`Caller::is_copy`]): dropping it or a guard of it there sends
    /// nothing and frees nothing, and every call fails.
    pub(crate) fn is_copy(&self) -> bool {
        self.shared.caller.is_copy()
    }

    /// The client's settings.
    pub(crate) fn config(&self) -> &Config {
        self.shared.config()
    }

    /// The client's random id.
    pub(crate) fn client_id(&self) -> &str {
        self.shared.client_id()
    }

    /// The calling thread's owner id and the token of its hold of `keys`
    /// that a live guard stands for (0: none).
    pub(crate) fn thread_hold(&self, keys: &LockKeys) -> (Arc<str>, u64) {
        let owner = self.shared.owner_id(None, None);
        let (_, live) = self.shared.held_by(keys.lock(), &owner);
        (owner, live)
    }

    /// Reads `target`'s status, listing at most `holders` holders and
    /// `waiters` waiters (an election's history with it), its reply waited
    /// for until `deadline` (and a request's grace) at most, pool wait
    /// included, if given (an election watch's read, kept to its timeout).
    pub(crate) fn status_by(
        &self,
        target: &Target,
        holders: usize,
        waiters: usize,
        deadline: Option<Instant>,
    ) -> Result<StatusReply> {
        let keys = target.keys_for("status")?;
        let op = Status {
            kind: keys.kind(),
            waiters,
            holders,
        };
        (self.shared.caller).call_limited(keys, &op, Limit::by(deadline))
    }

    /// Frees every hold of the lock, whoever holds it, and hands it on to
    /// the queue in the same step.
    pub(crate) fn force_release(&self, target: &Target) -> Result<Freed> {
        let call_key = self.call_key();
        let op = ForceRelease { call_key };
        let freed = self
            .write(target, "force release", &op)
            .and_then(|w| w.replicated());
        freed.map_err(Error::made_all_the_same)
    }

    /// Asks every hold of the lock present now to let go; frees nothing.
    /// Returns how many holds it asked.
    pub(crate) fn revoke(&self, target: &Target) -> Result<usize> {
        let call_key = self.call_key();
        let op = Revoke { call_key };
        let revoked = self
            .write(target, "revoke", &op)
            .and_then(|w| w.replicated());
        let revoked: Revoked = revoked.map_err(Error::made_all_the_same)?;
        Ok(usize::try_from(revoked.holds).unwrap_or(usize::MAX))
    }

    /// A new call key of this client: an admin call that carries one,
    /// delivered twice, acts once (frees the lock once, asks no later hold).
    fn call_key(&self) -> String {
        owner::call_key(self.shared.client_id(), self.shared.next_call_id())
    }

    /// Runs the write `op` (the admin call `what`) on `lock`.
    fn write<O: Operation>(&self, lock: &Target, what: &str, op: &O) -> Result<Written<O::Reply>> {
        (self.shared.caller).call_write(lock.keys_for(what)?, op, Limit::default())
    }

    /// The number of permits in force on the semaphore `target` as this
    /// client's last acquire call on it saw it, if any call found another
    /// than its own.
    pub(crate) fn permits_in_force(&self, target: &Target) -> Option<u32> {
        self.permits_seen.get(target.keys().ok()?)
    }

    /// Sets a semaphore's number of permits for every client; this
    /// client's waiters it admits wake from the reply.
    pub(crate) fn set_permits(&self, target: &Target, permits: u32) -> Result<PermitsSet> {
        let written = self.write(target, "set permits", &SetPermits { permits })?;
        let (set, replicated) = written.into_parts();
        self.shared.grant_own(&set.admitted);
        replicated.map(|()| set)
    }
}
