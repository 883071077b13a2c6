//! `Client`: the handle users open; it starts the connections and the
//! background threads, and hands out every primitive: mutexes, semaphores,
//! reader-writer locks, multi-locks and elections; and `ClientBuilder`,
//! every setting of a client, with its default.

use std::sync::Arc;
use std::time::Duration;

use crate::connections::config::{ClockDrift, Config, Endpoint, Hidden};
use crate::connections::warning::ServerWarning;
use crate::connections::IntoConnectionInfo;
use crate::error::Result;
use crate::handles::kind;
use crate::handles::lock::{FairLock, Settings};
use crate::handles::status::Status;
use crate::handles::{Election, FairMultiLock, FairMutex, FairRwLock, FairSemaphore};
use crate::machinery::caller::target::Target;
use crate::machinery::core::Core;
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::protocol::{LockKind, SyncReplicas};

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
/// guard of it are dropped: within about one command timeout while Redis
/// does not answer (the watchdog's round under way, or its last try to
/// give back a call that failed). A child process forked meanwhile has
/// copies of them that stand for its parent's (the same connections, the
/// same holds): dropped there, they send nothing and release nothing, and
/// the parent keeps its holds; called there, they fail with
/// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) and send
/// nothing. The child builds a client of its own.
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
    inner: Arc<Core>,
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
    ///   (`user:password@` before the first host is for the master,
    ///   percent-encoded as in a `redis://` URL).
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
        ClientBuilder::of(Endpoint::Url(url.to_owned()))
    }

    /// Starts a builder for a client of the one server `info` names:
    /// anything the `redis` crate's `redis::Client::open` takes, e.g. a
    /// `redis::ConnectionInfo` built in code, the settings of a
    /// `redis::Client` the application already holds
    /// (`get_connection_info().clone()`), a `redis::ConnectionAddr`, or a
    /// `redis://`/`redis+unix://` URL string. Its address, database and
    /// credentials are used as given; TLS parameters too, unless
    /// `ClientBuilder::tls_root_cert_pem` (with the `tls` feature) replaces
    /// them. Cluster and
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
    pub fn builder_from(info: impl IntoConnectionInfo) -> ClientBuilder {
        let info = info.into_connection_info().map(Box::new);
        ClientBuilder::of(Endpoint::Info(info.map_err(|err| err.to_string())))
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
        let nodes = nodes.into_iter().map(|n| n.as_ref().to_owned()).collect();
        ClientBuilder::of(Endpoint::ClusterNodes(nodes))
    }

    /// A handle to the lock called `name`. No I/O happens here; an invalid
    /// name is reported by the first call on the handle as
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName).
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
        self.lock(name, kind::Mutex(()))
    }

    /// A handle to the fair semaphore `name` with `permits` permits (at
    /// most that many holders at once, in arrival order). No I/O: a name
    /// or a number of permits outside `1..=`[`MAX_PERMITS`](crate::MAX_PERMITS)
    /// is reported by the first call that uses it. The semaphore of a name
    /// is a lock of its own, apart from the mutex of that name; every
    /// client using it must say the same `permits`
    /// ([`ErrorKind::PermitsMismatch`](crate::ErrorKind::PermitsMismatch) otherwise),
    /// until [`set_permits`](crate::FairSemaphore::set_permits) sets one
    /// for all ([`permits_in_force`](crate::FairSemaphore::permits_in_force)
    /// then tells).
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
        self.lock(name, kind::Semaphore { permits })
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
        self.lock(name, kind::RwLock(()))
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
        let set = FairMultiLock::new(self.settings());
        (names.into_iter()).fold(set, |set, name| set.and_mutex(name.as_ref()))
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
    /// let leadership = election.with_value("node-1").campaign()?;
    /// drop(leadership); // resigns
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: &str) -> Election {
        self.lock(name, kind::Election { value: None })
    }

    /// The status of the `kind` of lock called `name` (see
    /// [`FairLock::status`]), without a handle: a semaphore's is read
    /// without knowing its number of permits, which the status reports.
    ///
    /// # Errors
    /// As [`FairLock::status`].
    ///
    /// ```no_run
    /// use fairlock::{Capacity, LockKind};
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.status(LockKind::Semaphore, "uploads", 10)?;
    /// if let Capacity::Permits(permits) = status.capacity {
    ///     println!("{} of {permits} permits free", status.available().unwrap_or(0));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn status(&self, kind: LockKind, name: &str, max: usize) -> Result<Status> {
        Status::read(&self.inner, &self.target(name, kind), max)
    }

    /// Frees every hold of the `kind` of lock called `name`, whoever holds
    /// it, as [`FairLock::force_unlock`] does, without a handle: the
    /// semaphore's needs no number of permits, and an operator's tool
    /// names the kind as a value. Returns true if anything was held. Only
    /// that kind of lock of the name is touched: the others of the name
    /// are locks of their own.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName) for an
    /// empty or oversized name, before any I/O (retrying does not help);
    /// otherwise as [`FairLock::force_unlock`].
    ///
    /// ```no_run
    /// use fairlock::LockKind;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if client.force_unlock(LockKind::Election, "scheduler")? {
    ///     println!("the stuck leader is gone; the next candidate leads");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self, kind: LockKind, name: &str) -> Result<bool> {
        Ok(self.inner.force_release(&self.target(name, kind))?.holds > 0)
    }

    /// Asks every current holder of the `kind` of lock called `name` to
    /// let go, as [`FairLock::revoke`] does, without a handle, and returns
    /// how many holds it asked (0 when nobody held it). It frees nothing.
    ///
    /// # Errors
    /// As [`force_unlock`](Self::force_unlock).
    ///
    /// ```no_run
    /// use fairlock::LockKind;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let asked = client.revoke(LockKind::RwLock, "catalog")?;
    /// println!("asked {asked} readers and writers to let go");
    /// # Ok(()) }
    /// ```
    pub fn revoke(&self, kind: LockKind, name: &str) -> Result<usize> {
        self.inner.revoke(&self.target(name, kind))
    }

    fn target(&self, name: &str, kind: LockKind) -> Target {
        Target::new(&self.inner.config().key_prefix, name, kind)
    }

    fn lock<K: kind::Kind, O: crate::Ownership>(&self, name: &str, kind: K) -> FairLock<K, O> {
        let target = self.target(name, <K as kind::sealed::Kind>::KIND);
        FairLock::new(self.settings(), target, kind)
    }

    /// A new handle's settings: a renewed lease, no maximum hold.
    fn settings<O: crate::Ownership>(&self) -> Settings<O> {
        Settings::new(Arc::clone(&self.inner), LeasePolicy::Renewed(None))
    }

    /// This client's random id, the first part of every owner id it uses.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("this client is {}", client.id());
    /// // every owner id it uses starts with it:
    /// if let Some(holder) = client.fair_mutex("orders:42").status(1)?.holder() {
    ///     println!("held by this client: {}", holder.who.client_id() == client.id());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        self.inner.client_id()
    }

    /// What this client found wrong with its servers as it started, in the
    /// order found: a server that may evict fairlock's keys (on a cluster,
    /// one per such master), or whose eviction policy this client's user
    /// may not read. Empty when nothing was. Each is also logged once at
    /// `warn` (target [`SERVER_WARNING_TARGET`](crate::SERVER_WARNING_TARGET)),
    /// which only a program with a `log` logger sees; this is for a program
    /// to show or act on, without one. The `fairlock` command prints each
    /// on stderr, `warning: ...`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// for warning in client.warnings() {
    ///     eprintln!("warning: {warning}"); // e.g. "redis at 127.0.0.1:6379 may evict fairlock's keys (...)"
    /// }
    /// # Ok(()) }
    /// ```
    pub fn warnings(&self) -> &[ServerWarning] {
        &self.inner.warnings
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id())
            .field("key_prefix", &self.inner.config().key_prefix)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`]; every setting has a default.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
///     .lease(Duration::from_secs(10))
///     .waiter_timeout(Duration::from_secs(5))
///     .key_prefix("billing-locks")
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ClientBuilder {
    config: Config,
}

impl ClientBuilder {
    /// The builder with one setting changed by `set`.
    fn with(mut self, set: impl FnOnce(&mut Config)) -> Self {
        set(&mut self.config);
        self
    }

    /// The defaults, connecting to `target`.
    pub(crate) fn of(target: Endpoint) -> Self {
        let config = Config::default();
        ClientBuilder { config }.with(|config| config.target = target)
    }

    /// Lease of a lock held through the watchdog: if this client stops renewing
    /// (process killed, network cut), the lock frees this long after the last
    /// renewal. Renewed every third of `min(lease, waiter_timeout)`. Defaults
    /// to 30 s; from [`MIN_LEASE`](crate::MIN_LEASE) (30 ms) to
    /// [`MAX_LEASE`](crate::MAX_LEASE) (365 days), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .lease(Duration::from_secs(10)) // a dead holder frees the lock within 10 s
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn lease(self, lease: Duration) -> Self {
        self.with(|config| config.lease = lease)
    }

    /// How long a queued waiter keeps its place after its client went
    /// silent. Live waiters are heartbeated by the watchdog and never lose
    /// their place, however long they wait. Defaults to 10 s; from
    /// [`MIN_LEASE`](crate::MIN_LEASE) (30 ms) to [`MAX_LEASE`](crate::MAX_LEASE) (365 days).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .waiter_timeout(Duration::from_secs(3)) // a dead waiter's place goes after 3 s
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn waiter_timeout(self, waiter_timeout: Duration) -> Self {
        self.with(|config| config.waiter_timeout = waiter_timeout)
    }

    /// Most pooled connections open at once. Waiting threads hold none. A call
    /// waits for a pooled connection at most the
    /// [connect timeout](Self::connect_timeout): with every one in use that
    /// long, it fails, [`ErrorKind::Connection`](crate::ErrorKind::Connection), "no
    /// redis connection could be had in time", nothing sent (retryable); a
    /// timed wait whose deadline comes first is not acquired. Defaults to 16;
    /// from 1 to 10 000 (Redis's default `maxclients`), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build), before any I/O.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .pool_size(4)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn pool_size(self, pool_size: u32) -> Self {
        self.with(|config| config.pool_size = pool_size)
    }

    /// Idle connections the pool keeps open, opened in the background from when
    /// the client is built (`build` waits for the first connection only) and
    /// again whenever fewer are open (as r2d2's `min_idle`). `None` keeps
    /// [`pool_size`](Self::pool_size) connections open. Defaults to `Some(1)`;
    /// more than `pool_size` is
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build), before any I/O.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// // Four connections kept ready, opened as the client starts.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .pool_size(8)
    ///     .min_idle(Some(4))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn min_idle(self, min_idle: Option<u32>) -> Self {
        self.with(|config| config.min_idle = min_idle)
    }

    /// How long a pooled connection lives at most: older ones are closed (and
    /// replaced up to [`min_idle`](Self::min_idle)) when the pool next looks,
    /// every 30 s; a connection in use is closed once it is back. `None` keeps
    /// them for ever. Defaults to
    /// [`DEFAULT_MAX_LIFETIME`](crate::DEFAULT_MAX_LIFETIME) (30 minutes,
    /// r2d2's); from [`MIN_POOL_DURATION`](crate::MIN_POOL_DURATION) (1 s) to
    /// [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// // Reconnect every 5 minutes, e.g. to follow a load balancer.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .max_lifetime(Some(Duration::from_secs(300)))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn max_lifetime(self, max_lifetime: Option<Duration>) -> Self {
        self.with(|config| config.max_lifetime = max_lifetime)
    }

    /// How long a pooled connection may stay idle: idle longer, it is closed
    /// (and replaced up to [`min_idle`](Self::min_idle)) when the pool next
    /// looks, every 30 s. `None` keeps idle connections open. Defaults to
    /// [`DEFAULT_IDLE_TIMEOUT`](crate::DEFAULT_IDLE_TIMEOUT) (10 minutes,
    /// r2d2's); from [`MIN_POOL_DURATION`](crate::MIN_POOL_DURATION) (1 s) to
    /// [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// // Let a burst's extra connections go after a minute.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .idle_timeout(Some(Duration::from_secs(60)))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn idle_timeout(self, idle_timeout: Option<Duration>) -> Self {
        self.with(|config| config.idle_timeout = idle_timeout)
    }

    /// Start of every key and channel this client uses, e.g. for an ACL rule
    /// `~fairlock:* &fairlock:*`. 1 to 256 bytes, without `{` or `}`, else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build). Defaults to `"fairlock"`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .key_prefix("billing-locks") // keys billing-locks:{...}:...
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn key_prefix(self, key_prefix: impl Into<String>) -> Self {
        self.with(|config| config.key_prefix = key_prefix.into())
    }

    /// How long to wait for a connection to Redis. Defaults to 5 s; above
    /// zero and at most [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .connect_timeout(Duration::from_secs(2))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn connect_timeout(self, connect_timeout: Duration) -> Self {
        self.with(|config| config.connect_timeout = connect_timeout)
    }

    /// How long one Redis call may take before it fails as
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection). On a cluster, a
    /// lock call whose slot is being moved to another master is retried for
    /// this long too. A call that fails this way may still run in Redis later
    /// (a paused server resumes it); the client then abandons whatever it took
    /// or queued as soon as Redis answers again (see docs/failures.md).
    /// Defaults to 5 s; above zero and at most
    /// [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .command_timeout(Duration::from_millis(500))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn command_timeout(self, command_timeout: Duration) -> Self {
        self.with(|config| config.command_timeout = command_timeout)
    }

    /// Trusts only the PEM root certificate(s) in `pem` for a `rediss://`
    /// server, e.g. a private CA: the one server, every node of a cluster,
    /// and behind Sentinel the Sentinels and the master alike. Defaults to
    /// the system roots. Needs the `tls` feature.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, when `pem` holds no PEM certificate, or one that cannot be a
    /// root, or the URL does not use TLS.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let private_ca = std::fs::read("/etc/redis/ca.pem")?;
    /// let client = fairlock::Client::builder("rediss://redis.internal:6380")
    ///     .tls_root_cert_pem(private_ca)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_cert_pem(self, pem: impl Into<Vec<u8>>) -> Self {
        self.with(|config| config.tls_root_cert = Hidden(Some(pem.into())))
    }

    /// Presents the PEM certificate (chain) `cert` and its PEM private key
    /// `key` to `rediss://` servers that ask for a client certificate
    /// (mutual TLS, Redis's `tls-auth-clients yes`). Every TLS connection
    /// of the client presents it: to the one server, to every node of a
    /// cluster, and behind Sentinel to the Sentinels and the master, as
    /// the root of [`tls_root_cert_pem`](Self::tls_root_cert_pem) covers
    /// them all. Off by default. Needs the `tls` feature.
    ///
    /// Behind Sentinel with any certificate set, the `redis` crate's own
    /// connections to the Sentinels, and the one that checks the master's
    /// `ROLE` at each lookup, send `CLIENT SETINFO` (an ACL user without
    /// it sees a denial in `ACL LOG`); the pool's connections do not.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, when `cert` holds no PEM certificate, `key` no PEM private key,
    /// or the URL does not use TLS.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = fairlock::Client::builder("rediss://redis.internal:6380")
    ///     .tls_root_cert_pem(std::fs::read("/etc/redis/ca.pem")?)
    ///     .tls_client_cert_pem(
    ///         std::fs::read("/etc/fairlock/client.pem")?,
    ///         std::fs::read("/etc/fairlock/client.key")?,
    ///     )
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_cert_pem(self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.with(|config| {
            config.tls_client_cert = Hidden(Some(crate::connections::config::ClientTlsConfig {
                client_cert: cert.into(),
                client_key: key.into(),
            }))
        })
    }

    /// The password the Sentinels themselves require (their `requirepass`,
    /// or an ACL user's with [`sentinel_username`](Self::sentinel_username)),
    /// sent to every Sentinel of a `redis+sentinel://` URL. The master and
    /// its successors keep the credentials of the URL (before the first
    /// host); neither is sent to the other. Off by default.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, for an empty password or a URL other than `redis+sentinel://`
    /// (or `rediss+sentinel://`). A wrong or missing password fails the build
    /// at once with [`ErrorKind::Auth`](crate::ErrorKind::Auth), its message
    /// naming the Sentinel's refusal.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// // The master takes "data-pw"; the Sentinels require "sentinel-pw".
    /// let client = fairlock::Client::builder(
    ///     "redis+sentinel://:data-pw@10.0.0.1:26379,10.0.0.2:26379/orders",
    /// )
    /// .sentinel_password("sentinel-pw")
    /// .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn sentinel_password(self, password: impl Into<String>) -> Self {
        self.with(|config| config.sentinel_password = Hidden(Some(password.into())))
    }

    /// The ACL user the Sentinels themselves are asked for, with
    /// [`sentinel_password`](Self::sentinel_password) (which it needs).
    /// Without it, the password goes to the Sentinels' `default` user.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, for an empty user, a user without a
    /// [`sentinel_password`](Self::sentinel_password), or a URL other than
    /// `redis+sentinel://`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis+sentinel://10.0.0.1:26379/orders")
    ///     .sentinel_username("fairlock-sentinel")
    ///     .sentinel_password("sentinel-pw")
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn sentinel_username(self, username: impl Into<String>) -> Self {
        self.with(|config| config.sentinel_username = Some(username.into()))
    }

    /// Makes every lock write (acquire, renew, release, cancel, force unlock)
    /// wait until at least `replicas` replicas of the master that ran it
    /// acknowledged it (Redis `WAIT`, in the same round trip), for at most
    /// `timeout`. A shortfall is a failure: an acquisition is rolled back and
    /// reported as
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated), a renewal
    /// does not count, a release reports it. So a failover right after `lock()`
    /// returned cannot promote a replica that never saw the acquisition.
    ///
    /// This is not consensus: a write acknowledged by a replica can still be
    /// lost if that replica is not the one promoted, and Redis replication
    /// stays asynchronous for everything else. `timeout` must be above zero
    /// and below the command timeout; Redis counts it in whole milliseconds
    /// (under 1 ms waits 1 ms). A write's reply is waited for a command timeout,
    /// its `WAIT`'s `timeout` more (within a call's deadline): a shortfall
    /// over a slow link is still `NotReplicated`, not `Connection`. Off by
    /// default.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     // every lock write waits for 1 replica, at most 100 ms
    ///     .sync_replicas(1, Duration::from_millis(100))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn sync_replicas(self, replicas: u32, timeout: Duration) -> Self {
        self.with(|config| config.sync_replicas = Some(SyncReplicas { replicas, timeout }))
    }

    /// How much of every lease the client keeps in reserve against clocks that
    /// drift apart: a guard counts its lease as over `rate` of it plus `margin`
    /// before the time Redis was asked to keep it. On one machine a holder cut
    /// off from Redis already learns of the loss before anyone else can take
    /// the lock (the lease counts from when the confirming request was sent);
    /// the allowance keeps that true when the holder's clock runs up to `rate`
    /// slower than the server's, as between machines. Defaults to 1% + 2 ms
    /// (Redlock's figures); `rate` may be 0 to 0.25, and the allowance must
    /// leave two thirds of the lease (and of any fixed lease), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// // Hosts without NTP: allow 5% drift, plus 10 ms of timer slack.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .clock_drift(0.05, Duration::from_millis(10))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn clock_drift(self, rate: f64, margin: Duration) -> Self {
        self.with(|config| config.clock_drift = ClockDrift { rate, margin })
    }

    /// How long a lock's fence key, which keeps its last fencing token,
    /// outlives its last write (a take or a release). While it keeps the last
    /// token, the next is that + 1 (a step that reads the server clock
    /// anyway, such as a handoff, takes the larger of that and the clock in
    /// microseconds); once it is gone, the server clock in microseconds. So
    /// no token is above the clock when it was issued, and without the fence
    /// the clock alone keeps them increasing; the fence covers a server clock
    /// that steps back (or a failover to a server whose clock is behind) by
    /// less than this. Each name locked in the last `fence_life` keeps one
    /// small key (about 244 bytes, as measured in BENCHMARKS.md: some 41 MB for
    /// a million distinct names an hour at the default). Defaults to
    /// [`DEFAULT_FENCE_LIFE`](crate::DEFAULT_FENCE_LIFE) (10 minutes); from
    /// [`MIN_FENCE_LIFE`](crate::MIN_FENCE_LIFE) (1 s) to
    /// [`MAX_LEASE`](crate::MAX_LEASE) (365 days).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .fence_life(Duration::from_secs(3600)) // covers a clock step back of up to 1 h
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn fence_life(self, fence_life: Duration) -> Self {
        self.with(|config| config.fence_life = fence_life)
    }

    /// With the `metrics` feature, label every lock's metrics with its
    /// name as well as its primitive (see docs/observing.md).
    /// Off by default: a service that makes a name per job or per customer
    /// would make a time series per name. Without the feature it changes
    /// nothing.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .metrics_lock_names(true)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn metrics_lock_names(self, on: bool) -> Self {
        self.with(|config| config.metrics_lock_names = on)
    }

    /// Names this client as its user sees it, e.g. `"web-3/worker-7"`: 1 to
    /// [`MAX_IDENTITY_LEN`](crate::MAX_IDENTITY_LEN) bytes of ASCII
    /// letters, digits and `. _ - / @ : +`. Every status then shows it with
    /// each of the client's holds and waits
    /// ([`Participant::identity`](crate::Participant::identity)), as does
    /// `fairlock status`. Without one, holders show by client id and
    /// thread only.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .identity("web-3/worker-7")
    ///     .build()?;
    /// let status = client.fair_mutex("nightly-report").status(10)?;
    /// if let Some(holder) = status.holder() {
    ///     println!("held by {}", holder.who.identity().unwrap_or("an unnamed client"));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn identity(self, identity: impl Into<String>) -> Self {
        self.with(|config| config.identity = Some(identity.into()))
    }

    /// Refuses to start against a server that may evict fairlock's keys:
    /// `build` fails with
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) when the
    /// server has a memory limit (`maxmemory`) and a `maxmemory-policy` other
    /// than `noeviction` (every fairlock key has a TTL, so the `volatile-*`
    /// policies reach them too: under memory pressure a held lock can vanish
    /// and another client take it). Without it (the default) the client logs a
    /// warning once at start instead. Either way the policy is read once, at
    /// start, with `INFO memory` (docs/security.md's ACL line grants it); on a
    /// cluster, from every master. A user whose ACL does not grant it, or a
    /// server without `INFO` (renamed away), skips the check, or with this
    /// setting fails ([`ErrorKind::Permission`](crate::ErrorKind::Permission)
    /// for the ACL).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .require_noeviction(true)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn require_noeviction(self, on: bool) -> Self {
        self.with(|config| config.require_noeviction = on)
    }

    /// Checks the settings, connects, and starts the client's watchdog and
    /// subscriber threads.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) for a bad
    /// setting or URL, a database the server does not have, or, with
    /// [`require_noeviction`](Self::require_noeviction), a server that may
    /// evict; [`ErrorKind::Auth`](crate::ErrorKind::Auth) for refused
    /// credentials, [`ErrorKind::Permission`](crate::ErrorKind::Permission) for
    /// a command the user's ACL denies;
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// cannot be reached within the connect timeout, or does not answer within
    /// the command timeout (the message names the one);
    /// [`ErrorKind::Server`](crate::ErrorKind::Server) for a refusal fairlock
    /// has no kind for; [`ErrorKind::Internal`](crate::ErrorKind::Internal)
    /// when a thread cannot start. The first connection is opened directly, so
    /// each is reported as soon as it is known (a refused port at once), its
    /// cause in the message.
    ///
    /// A bad setting is refused before any I/O (this runs without a server):
    ///
    /// ```
    /// # fn main() -> fairlock::Result<()> {
    /// match fairlock::Client::builder("redis://127.0.0.1:6379").pool_size(0).build() {
    ///     Err(err) => assert_eq!(err.kind(), fairlock::ErrorKind::InvalidConfig),
    ///     Ok(_) => unreachable!("a pool of 0 connections is refused before any I/O"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn build(self) -> Result<Client> {
        let topology = self.config.validate()?;
        let inner = Arc::new(Core::start(self.config, topology)?);
        Ok(Client { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let url = Endpoint::Url("redis://x".to_owned());
        ClientBuilder::of(url).config.validate().unwrap();
        let period = Config::default().watchdog_period();
        assert_eq!(period, Duration::from_secs(10) / 3);
    }
}
