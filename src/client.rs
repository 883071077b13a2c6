//! The client: a connection pool, two background threads, and the state
//! they share with every mutex handle and guard.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::backend::{Backend, Conn};
use crate::config::{ClientBuilder, Config};
use crate::error::{Error, ErrorKind, Result};
use crate::give_backs::GiveBacks;
use crate::holds::Holds;
use crate::mutex::FairMutex;
use crate::protocol::{Abandon, LockKeys, Operation, SyncReplicas, WakeMessage};
use crate::renewal::OwnConns;
use crate::scripts::Scripts;
use crate::waiters::Waiters;
use crate::watchdog::ClusterRounds;
use crate::{subscriber, watchdog};

/// Pause between calls on a cluster slot that is being moved.
const SLOT_MOVE_RETRY_WAIT: Duration = Duration::from_millis(50);

/// A handle to Redis that hands out [`FairMutex`]es.
///
/// Cloning is cheap and shares one pool and one pair of background threads:
/// a watchdog (`fairlock-watchdog`) that renews held leases and keeps this
/// client's queued waiters alive, and a subscriber (`fairlock-subscriber`)
/// on its own connection that wakes waiting threads (on Redis Cluster, one
/// per node). All stop, and are joined, when the last `Client`, `FairMutex`
/// and guard of it are dropped.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let orders = client.fair_mutex("orders:42");
/// let guard = orders.lock()?;
/// // ... only one thread in the fleet runs this at a time, in arrival order ...
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

/// Owns the threads; dropping it stops them.
pub(crate) struct ClientInner {
    pub(crate) shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// State shared by the handles and the background threads. The threads hold
/// only this, never a [`ClientInner`], so they never keep the client alive.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) backend: Backend,
    pub(crate) scripts: Scripts,
    /// Random id of this client; owner ids are `<client id>:<thread number>`.
    pub(crate) client_id: String,
    /// Channel prefix every script publishes wake-ups under.
    pub(crate) wake_prefix: String,
    pub(crate) waiters: Waiters,
    pub(crate) holds: Holds,
    /// Calls whose outcome was never learned, for the watchdog to undo.
    pub(crate) give_backs: GiveBacks,
    /// The watchdog's own connections (renewals never wait for the pool).
    pub(crate) own_conns: OwnConns,
    /// The watchdog's per-master rounds on Redis Cluster.
    pub(crate) cluster_rounds: ClusterRounds,
    next_wait_id: AtomicU64,
    stopping: Mutex<bool>,
    stop_signal: Condvar,
    /// Set to have the watchdog run a round now (see [`Shared::nudge_watchdog`]).
    watchdog_nudged: Mutex<bool>,
    watchdog_signal: Condvar,
}

impl Client {
    /// Connects with every setting at its default.
    ///
    /// # Errors
    /// See [`ClientBuilder::build`].
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Starts a builder for a client of Redis at `url`:
    /// - `redis://[user:password@]host:port[/db]` for one server;
    /// - `redis+cluster://[user:password@]host:port,host:port,...` for Redis
    ///   Cluster (any reachable nodes as seeds; the rest are discovered);
    /// - `redis+sentinel://host:port,host:port,.../master-name[/db]` for the
    ///   master a set of Sentinels names, followed across failovers
    ///   (`user:password@` before the first host is for the master).
    ///
    /// `rediss` instead of `redis` in any of them means TLS (feature `tls`).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let sharded = fairlock::Client::open("redis+cluster://10.0.0.1:6379,10.0.0.2:6379")?;
    /// let failover = fairlock::Client::open("redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/locks")?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// Starts a builder for a Redis Cluster client from seed node URLs, as
    /// `redis::cluster::ClusterClient::new` takes them
    /// (`redis://[user:password@]host:port` each).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::cluster_builder(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn cluster_builder<I, S>(nodes: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ClientBuilder::cluster(nodes.into_iter().map(|n| n.as_ref().to_owned()).collect())
    }

    /// A handle to the lock called `name`. No I/O happens here; an invalid
    /// name is reported by the first call on the handle as
    /// [`ErrorKind::InvalidName`].
    pub fn fair_mutex(&self, name: &str) -> FairMutex {
        FairMutex::new(Arc::clone(&self.inner), name)
    }

    /// This client's random id, the first part of every owner id it uses.
    pub fn id(&self) -> &str {
        &self.inner.shared.client_id
    }

    pub(crate) fn start(config: Config) -> Result<Client> {
        let backend = Backend::open(&config)?;
        let scripts = Scripts::new();
        scripts.load_all(backend.get()?.get())?;

        let client_id = uuid::Uuid::new_v4().simple().to_string();
        let wake_prefix = format!("{}:wake:", config.key_prefix);
        let shared = Arc::new(Shared {
            config,
            backend,
            scripts,
            client_id,
            wake_prefix,
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
        });

        // The subscription must be live before any waiter can queue, or the
        // first handoff message could be missed. On a cluster one thread
        // listens on each node; one live subscription is enough to start
        // (every node hears every message), the others keep trying.
        let inner = ClientInner {
            shared: Arc::clone(&shared),
            threads: Mutex::new(Vec::new()),
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let slot_map = match shared.backend.slot_map() {
            Some(Ok(map)) => Some(Arc::new(map)),
            Some(Err(err)) => {
                log::warn!("fairlock: cannot read the cluster's nodes, listening on a seed: {err}");
                None
            }
            None => None,
        };
        let targets = shared.backend.listen_targets(slot_map.as_deref())?;
        *shared.cluster_rounds.map.lock() = slot_map;
        for target in &targets {
            let (ready_tx, target) = (ready_tx.clone(), target.clone());
            let subscriber = spawn_named("fairlock-subscriber", &shared, move |shared| {
                subscriber::run(shared, &target, ready_tx)
            })?;
            inner.threads.lock().push(subscriber);
        }
        let mut deadline =
            Instant::now() + shared.config.connect_timeout + shared.config.command_timeout;
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
        Ok(Client {
            inner: Arc::new(inner),
        })
    }
}

/// Starts a named background thread that holds only the shared state.
fn spawn_named(
    name: &str,
    shared: &Arc<Shared>,
    body: impl FnOnce(&Arc<Shared>) + Send + 'static,
) -> Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || body(&shared))
        .map_err(|err| Error::with_source(ErrorKind::Server, "cannot start a thread", err))
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.shared.client_id)
            .field("key_prefix", &self.inner.shared.config.key_prefix)
            .finish_non_exhaustive()
    }
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
}

impl Shared {
    /// Owner id of the calling thread: re-entrancy is per (client, thread).
    pub(crate) fn owner_id(&self) -> String {
        THREAD_NUMBER.with(|n| format!("{}:{n}", self.client_id))
    }

    pub(crate) fn wake_channel(&self) -> String {
        format!("{}{}", self.wake_prefix, self.client_id)
    }

    pub(crate) fn next_wait_id(&self) -> u64 {
        self.next_wait_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn connection(&self) -> Result<Conn> {
        self.backend.get()
    }

    /// Runs `call` on a pooled connection. A connection the server closed
    /// while it sat in the pool (restart, failover) fails at once with a
    /// dropped-connection error and leaves the pool; the call then goes out
    /// again on another one, at most once per pooled connection plus one.
    /// On a cluster, a call that could not reach a node goes out once more
    /// on a connection with a fresh slot map (see [`Conn::note`]), so the
    /// first call after a failover finds the promoted replica.
    /// The scripts make a call delivered twice count once (call ids).
    pub(crate) fn with_connection<T>(
        &self,
        mut call: impl FnMut(&mut dyn redis::ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let mut stale_retries = self.config.pool_size + 1;
        let mut fresh_map_retry = true;
        loop {
            let mut conn = self.connection()?;
            let result = call(conn.get());
            conn.note(&result);
            drop(conn);
            match result {
                Err(err) if stale_retries > 0 && err.is_dropped_connection() => {
                    stale_retries -= 1;
                    log::debug!("fairlock: retrying on another connection: {err}");
                }
                Err(err) if fresh_map_retry && err.is_connection() && self.backend.is_cluster() => {
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
        Ok(self.call_with(keys, op, None)?.0)
    }

    /// Runs a writing `op`, still in one round trip: with
    /// [`sync_replicas`](ClientBuilder::sync_replicas) set, a `WAIT` rides
    /// in the same pipeline and a shortfall ([`ErrorKind::NotReplicated`])
    /// comes back beside the reply.
    pub(crate) fn call_write<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
    ) -> Result<(O::Reply, Option<Error>)> {
        let sync = self.config.sync_replicas;
        let (reply, acknowledged) = self.call_with(keys, op, sync)?;
        let shortfall = sync
            .zip(acknowledged)
            .and_then(|(sync, acknowledged)| sync.shortfall(acknowledged));
        Ok((reply, shortfall))
    }

    fn call_with<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        sync: Option<SyncReplicas>,
    ) -> Result<(O::Reply, Option<i64>)> {
        self.through_slot_moves(|| {
            self.with_connection(|conn| self.scripts.run(conn, keys, &self.wake_prefix, op, sync))
        })
    }

    /// Has the watchdog give back call `call` of `owner` on `keys`, whose
    /// outcome is unknown or whose hold is not to be kept, as soon as Redis
    /// answers (see [`GiveBacks`]); the watchdog is nudged to try at once.
    pub(crate) fn give_back_later(&self, keys: &Arc<LockKeys>, owner: &str, call: u64) {
        self.give_backs.add(
            Arc::clone(keys),
            owner.to_owned(),
            call,
            self.config.command_timeout,
        );
        self.nudge_watchdog();
    }

    /// Gives back call `call` of `owner` now (Redis just answered), or
    /// later through the watchdog if that fails.
    pub(crate) fn give_back_now(&self, keys: &Arc<LockKeys>, owner: &str, call: u64) {
        if let Err(err) = self.call(keys, &Abandon { owner, call }) {
            log::warn!("fairlock: giving back call {call} failed, the watchdog retries: {err}");
            self.give_back_later(keys, owner, call);
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
        if let Some(mut conn) = self.backend.get_timeout(Duration::from_millis(200)) {
            let _: redis::RedisResult<i64> = redis::cmd("PUBLISH")
                .arg(self.wake_channel())
                .arg(WakeMessage::STOP)
                .query(conn.get());
        }
    }
}
