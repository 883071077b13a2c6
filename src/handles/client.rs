//! `Client`: the handle users open; it starts the connections and the
//! background threads, and hands out every primitive: mutexes, semaphores,
//! reader-writer locks, multi-locks and elections.

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::connections::config::Config;
use crate::connections::scripts::Scripts;
use crate::connections::topology::Topology;
use crate::connections::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::handles::builder::ClientBuilder;
use crate::handles::election::Election;
use crate::handles::multi::FairMultiLock;
use crate::handles::mutex::FairMutex;
use crate::handles::rwlock::FairRwLock;
use crate::handles::semaphore::FairSemaphore;
use crate::machinery::shared::{ClientInner, Shared};
use crate::machinery::subscriber;
use crate::machinery::watchdog;

/// A handle to Redis that hands out every primitive: [`FairMutex`]es
/// ([`fair_mutex`](Self::fair_mutex)), [`FairSemaphore`]s
/// ([`fair_semaphore`](Self::fair_semaphore)), [`FairRwLock`]s
/// ([`fair_rwlock`](Self::fair_rwlock)), [`FairMultiLock`]s
/// ([`fair_multi_lock`](Self::fair_multi_lock)) and [`Election`]s
/// ([`election`](Self::election)). Making a handle does no I/O; every
/// handle of one client shares its connections and its background threads.
///
/// Cloning is cheap and shares one pool and one pair of background threads:
/// a watchdog (`fairlock-watchdog`) that renews held leases and keeps this
/// client's queued waiters alive, and a subscriber (`fairlock-subscriber`)
/// on its own connection that wakes waiting threads (on Redis Cluster, one
/// per node). All stop, and are joined, when the last `Client`, handle and
/// guard of it are dropped.
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

impl Client {
    /// Connects with every setting at its default.
    ///
    /// # Errors
    /// See [`ClientBuilder::build`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// # drop(mutex);
    /// # Ok(()) }
    /// ```
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Starts a builder for a client of Redis at `url`:
    /// - `redis://[user:password@]host:port[/db]` for one server;
    /// - `redis+unix:///path/to/socket[?db=N&user=U&pass=P]` (or
    ///   `unix:///...`) for one server over a Unix socket, as the `redis`
    ///   crate reads it (a `pass=` value is redacted like a URL password);
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
    /// let local = fairlock::Client::open("redis+unix:///run/redis/redis.sock?db=2")?;
    /// # Ok(()) }
    /// ```
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// Starts a builder for a client of the one server `info` names:
    /// anything the `redis` crate's `redis::Client::open` takes, e.g. a
    /// `redis::ConnectionInfo` built in code, the settings of a
    /// `redis::Client` the application already holds
    /// (`get_connection_info().clone()`), a `redis::ConnectionAddr`, or a
    /// `redis://`/`redis+unix://` URL string. Its address, database and
    /// credentials are used as given; TLS parameters too, unless
    /// [`ClientBuilder::tls_root_cert_pem`] replaces them. Cluster and
    /// Sentinel deployments are named by URL ([`builder`](Self::builder)).
    ///
    /// A constructor rather than a builder setting: a client has one
    /// target, so it is chosen where the builder starts, as with
    /// [`builder`](Self::builder) and [`cluster_builder`](Self::cluster_builder).
    ///
    /// The one place fairlock's API names a `redis` crate type, on purpose:
    /// it takes what a redis-rs user already holds. It is the `redis` 1.x
    /// trait, so a new major version of `redis` under fairlock would be a
    /// new major version of fairlock. [`builder`](Self::builder) takes a
    /// plain URL and has no such tie.
    ///
    /// Settings that cannot be converted, or that name no usable server
    /// (an empty host, port 0, a negative database, TLS without the `tls`
    /// feature), make [`ClientBuilder::build`] return
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) before
    /// any I/O. The password never shows in `Debug` output.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis_client = redis::Client::open("redis://:secret@10.0.0.7:6379/1")?;
    /// let client = fairlock::Client::builder_from(redis_client.get_connection_info().clone())
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn builder_from(info: impl redis::IntoConnectionInfo) -> ClientBuilder {
        ClientBuilder::from_info(info.into_connection_info())
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
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let orders = client.fair_mutex("orders:42");
    /// let guard = orders.lock()?;
    /// println!("token {}", guard.fencing_token());
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn fair_mutex(&self, name: &str) -> FairMutex {
        FairMutex::new(Arc::clone(&self.inner), name)
    }

    /// A handle to the fair semaphore `name` with `permits` permits (at
    /// most that many holders at once, in arrival order). No I/O: a name
    /// or a number of permits outside `1..=`[`MAX_PERMITS`](crate::MAX_PERMITS)
    /// is reported by the first call that uses it. The semaphore of a name
    /// is a lock of its own, apart from the mutex of that name; every
    /// client using it must say the same `permits`
    /// ([`ErrorKind::PermitsMismatch`](crate::ErrorKind::PermitsMismatch) otherwise).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let sem = client.fair_semaphore("db-migrations", 3);
    /// let permit = sem.acquire()?;
    /// drop(permit);
    /// # Ok(()) }
    /// ```
    pub fn fair_semaphore(&self, name: &str, permits: u32) -> FairSemaphore {
        FairSemaphore::new(Arc::clone(&self.inner), name, permits)
    }

    /// A handle to the fair reader-writer lock `name`: readers share it,
    /// writers hold it alone, in arrival order. No I/O: a bad name is
    /// reported by the first call that uses it. The rwlock of a name is a
    /// lock of its own, apart from the mutex and the semaphore of that name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let catalog = client.fair_rwlock("catalog");
    /// let guard = catalog.read()?;
    /// drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn fair_rwlock(&self, name: &str) -> FairRwLock {
        FairRwLock::new(Arc::clone(&self.inner), name)
    }

    /// A multi-lock over the mutexes `names`: all of them held together or
    /// none, deadlock-free between any clients taking overlapping sets in
    /// any order, each name FIFO (see [`FairMultiLock`], which also takes
    /// the reads and writes of reader-writer locks). No I/O: a bad name is
    /// reported by the first call, before any lock is taken.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let both = client.fair_multi_lock(["account:4", "account:17"]).lock()?;
    /// println!("account:4 token {:?}", both.fencing_token("account:4"));
    /// both.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn fair_multi_lock<I, S>(&self, names: I) -> FairMultiLock
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        names
            .into_iter()
            .fold(FairMultiLock::new(Arc::clone(&self.inner)), |set, name| {
                set.and_mutex(name.as_ref())
            })
    }

    /// A handle to the leader election `name`: candidates campaign with a
    /// value and lead one at a time, in arrival order (see [`Election`]).
    /// No I/O: a bad name is reported by the first call that uses it. The
    /// election of a name is apart from the mutex, the semaphore and the
    /// rwlock of that name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let election = client.election("scheduler");
    /// let leadership = election.campaign_with("node-1")?;
    /// drop(leadership); // resigns
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: &str) -> Election {
        Election::new(Arc::clone(&self.inner), name)
    }

    /// This client's random id, the first part of every owner id it uses.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("this client is {}", client.id());
    /// // every owner id it uses starts with it:
    /// if let Some(holder) = client.fair_mutex("orders:42").status(0)?.holder {
    ///     println!("held by this client: {}", holder.who.client_id() == client.id());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.shared.client_id
    }

    pub(crate) fn start(config: Config, topology: Topology) -> Result<Client> {
        let backend = Backend::open(&config, topology)?;
        crate::connections::observe::describe();
        let scripts = Scripts::new(&config.common_args());
        scripts.load_all(backend.get()?.get())?;
        let shared = Arc::new(Shared::new(config, backend, scripts));

        // The subscription must be live before any waiter can queue, or the
        // first handoff message could be missed. On a cluster one thread
        // listens on each node; one live subscription is enough to start
        // (every node hears every message), the others keep trying.
        let inner = ClientInner::new(Arc::clone(&shared));
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
            inner.own(subscriber);
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
        inner.own(watchdog);
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
        .map_err(|err| Error::with_source(ErrorKind::Internal, "cannot start a thread", err))
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.shared.client_id)
            .field("key_prefix", &self.inner.shared.config.key_prefix)
            .finish_non_exhaustive()
    }
}
