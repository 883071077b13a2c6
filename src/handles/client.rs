//! `Client`: the handle users open; it starts the connections and the
//! background threads, and hands out every primitive: mutexes, semaphores,
//! reader-writer locks, multi-locks and elections.

use std::sync::Arc;

use crate::connections::config::{self, Config};
use crate::connections::topology::Topology;
use crate::connections::warning::ServerWarning;
use crate::connections::IntoConnectionInfo;
use crate::error::Result;
use crate::handles::builder::ClientBuilder;
use crate::handles::kind;
use crate::handles::lock::{FairLock, Settings};
use crate::handles::status::Status;
use crate::handles::{Election, FairMultiLock, FairMutex, FairRwLock, FairSemaphore};
use crate::machinery::caller::target::Target;
use crate::machinery::core::Core;
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::protocol::LockKind;

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
        ClientBuilder::of(config::Endpoint::Url(url.to_owned()))
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
        ClientBuilder::of(config::Endpoint::Info(info.map_err(|err| err.to_string())))
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
        ClientBuilder::of(config::Endpoint::ClusterNodes(nodes))
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
        let renewed = LeasePolicy::Renewed(None);
        Settings::new(Arc::clone(&self.inner), renewed)
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

    pub(crate) fn start(config: Config, topology: Topology) -> Result<Client> {
        let inner = Arc::new(Core::start(config, topology)?);
        Ok(Client { inner })
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
