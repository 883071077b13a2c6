//! Starting a client: its connections, its scripts, and its background
//! threads (a subscriber per node listened on, then the watchdog), joined
//! when the last handle drops.

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::connections::caller::Caller;
use crate::connections::config::Config;
use crate::connections::eviction;
use crate::connections::scripts::Scripts;
use crate::connections::topology::Topology;
use crate::connections::{Backend, Listen};
use crate::error::{Error, ErrorKind, Result};
use crate::machinery::engine::Engine;
use crate::machinery::shared::Shared;
use crate::machinery::{observe, subscriber, watchdog};

impl Engine {
    /// Connects as `config` and `topology` say, loads the scripts and
    /// starts the threads; returns once this client can be woken (a
    /// subscription is live).
    pub(crate) fn start(config: Config, topology: Topology) -> Result<Engine> {
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
        let mut first = backend.own_connection().map_err(|err| {
            err.at_first_contact(&server, false, config.connect_timeout, "connect_timeout")
        })?;
        redis::cmd("TIME")
            .query::<Vec<String>>(&mut *first)
            .map_err(|err| {
                Error::from_redis(err).at_first_contact(
                    &server,
                    true,
                    config.command_timeout,
                    "command_timeout",
                )
            })?;
        scripts.load_all(&mut *first)?;
        let warnings = eviction::check(&mut *first, &server, config.require_noeviction)?;
        let reconnected = || observe::reconnected(observe::Reconnect::Pool);
        let shared = Arc::new(Shared::new(Caller {
            config,
            backend,
            scripts,
            reconnected,
        }));

        // The subscription must be live before any waiter can queue, or the
        // first handoff message could be missed. On a cluster one thread
        // listens on each node; one live subscription is enough to start
        // (every node hears every message), the others keep trying. With
        // sharded pub/sub a connection is enough: each call has its slot
        // subscribed before it is sent (`Shared::listen_at`).
        let inner = Engine {
            shared: Arc::clone(&shared),
            threads: Mutex::default(),
            warnings,
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let slot_map = match shared.caller.backend.slot_map().transpose() {
            Ok(map) => map.map(Arc::new),
            Err(err) => {
                log::warn!("fairlock: cannot read the cluster's nodes, listening on a seed: {err}");
                None
            }
        };
        // Sharded pub/sub where the cluster has it (it took the Functions
        // library: Redis 7.0 and later, Valkey) and its slot map is known.
        let targets = match slot_map.as_deref() {
            Some(map) if shared.caller.scripts.calls_functions() => {
                shared.caller.scripts.use_sharded();
                Backend::shard_targets(map)
            }
            map => shared.caller.backend.listen_targets(map)?,
        };
        *shared.cluster_rounds.map.lock() = slot_map;
        for target in &targets {
            if let Listen::Shards(node) = target {
                shared.shards.needs_listener(node);
            }
            let (ready_tx, target) = (ready_tx.clone(), target.clone());
            let subscriber = spawn_named("fairlock-subscriber", &shared, move |shared| {
                subscriber::run(shared, &target, ready_tx)
            })?;
            inner.threads.lock().push(subscriber);
        }
        let mut deadline =
            Instant::now() + shared.config().connect_timeout + shared.config().command_timeout;
        let mut outcome = Err(Error::new(
            ErrorKind::Connection,
            "timed out subscribing to the wake-up channel",
        ));
        for _ in &targets {
            let left = deadline.saturating_duration_since(Instant::now());
            match ready_rx.recv_timeout(left) {
                Ok(Ok(())) => {
                    outcome = Ok(());
                    // A slow node costs a later fast path, not the start.
                    deadline = deadline.min(Instant::now() + Duration::from_millis(500));
                }
                Ok(Err(err)) if outcome.is_err() => outcome = Err(err),
                Ok(Err(_)) => {}
                Err(_) => break,
            }
        }
        outcome?; // on error, dropping `inner` stops and joins the subscribers
        let watchdog = spawn_named("fairlock-watchdog", &shared, watchdog::run)?;
        inner.threads.lock().push(watchdog);
        Ok(inner)
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
