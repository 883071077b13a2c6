//! The connections of one client, whichever way Redis is deployed: a pool
//! for the lock scripts and a way to open the subscriber's own connection.
//!
//! - One server: an r2d2 pool of `redis::Client` connections.
//! - Redis Cluster: an r2d2 pool of the `redis` crate's sync cluster
//!   connections, which route each script by its keys' slot and follow
//!   `MOVED`/`ASK` and failovers. Classic `PUBLISH` reaches every node of a
//!   cluster, but over the cluster bus, which holds small writes back for
//!   milliseconds; so the client listens on every node of the slot map
//!   and reads each handoff on the node whose script published it.
//! - Sentinel: an r2d2 pool of connections to the master the Sentinels name
//!   when each connection is opened; connections to a dead or demoted master
//!   are dropped from the pool, so the next ones reach its successor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::ConnectionLike;

use crate::config::Config;
use crate::error::{Error, ErrorKind, Result};
use crate::slot_map::{Address, SlotMap};
use crate::topology::Topology;

/// Retries of one cluster call through redirections (`MOVED`, `ASK`) and a
/// failover (`CLUSTERDOWN`, `TRYAGAIN`, `READONLY`, refused connections),
/// waiting 100 ms to 1 s between them: a call gives up after about 4 s of
/// waits. Against a node that accepts but never answers, each attempt
/// costs a command timeout, so such a call can take 7 of them.
const CLUSTER_RETRIES: u32 = 6;
const CLUSTER_MIN_RETRY_WAIT_MS: u64 = 100;
const CLUSTER_MAX_RETRY_WAIT_MS: u64 = 1000;

/// The pool of one client, by deployment.
pub(crate) enum Pool {
    Single(r2d2::Pool<redis::Client>),
    Cluster(r2d2::Pool<ClusterManager>),
    Sentinel(r2d2::Pool<SentinelManager>),
}

/// A pooled connection of any deployment; back to the pool on drop.
pub(crate) enum Conn {
    Single(r2d2::PooledConnection<redis::Client>),
    /// Boxed: a cluster connection is several times larger than the others.
    Cluster(Box<r2d2::PooledConnection<ClusterManager>>),
    Sentinel(r2d2::PooledConnection<SentinelManager>),
}

impl Conn {
    pub(crate) fn get(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Conn::Single(conn) => &mut **conn,
            Conn::Cluster(conn) => &mut conn.conn,
            Conn::Sentinel(conn) => &mut conn.conn,
        }
    }

    /// Looks at the outcome of a call. A connection that met a demoted
    /// master (`READONLY`) is marked so the pool drops it instead of handing
    /// it out again. A cluster call that could not reach a node makes every
    /// cluster connection opened so far stale: their slot maps may point at
    /// a dead master, and the `redis` crate refreshes a map only on a
    /// redirection, which a dead node never sends.
    pub(crate) fn note<T>(&mut self, result: &Result<T>) {
        let Err(err) = result else {
            return;
        };
        match self {
            Conn::Sentinel(conn)
                if err
                    .redis_error()
                    .is_some_and(|e| e.code() == Some("READONLY")) =>
            {
                conn.demoted = true;
            }
            // A slot being moved is no sign of a stale map.
            Conn::Cluster(conn) if err.is_connection() && !err.is_slot_moving() => {
                conn.generation.fetch_max(conn.born + 1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

/// Where the subscriber threads open their own connections.
enum SubscribeVia {
    Client(redis::Client),
    /// Cluster seed nodes: the first one's settings (scheme, credentials,
    /// TLS) are used for every node the slot map names.
    Nodes(Vec<redis::Client>),
    Sentinel(SentinelManager),
}

/// Where one subscriber thread listens.
#[derive(Clone)]
pub(crate) enum Listen {
    /// The one server, or the master the Sentinels name at each connect.
    Main,
    /// One cluster node (boxed: a client is large, the others are empty).
    Node(Box<redis::Client>),
    /// Any reachable cluster seed, tried in turn (when the slot map could
    /// not be read): every node hears every `PUBLISH`, only later.
    AnySeed,
}

impl Listen {
    /// The node's address, for logs.
    pub(crate) fn describe(&self) -> String {
        match self {
            Listen::Main => "the server".to_owned(),
            Listen::Node(client) => client.get_connection_info().addr().to_string(),
            Listen::AnySeed => "a cluster seed node".to_owned(),
        }
    }
}

/// A connection outside the pool (see [`Backend::own_connection`]).
pub(crate) enum OwnConn {
    /// The one server, or the master of the moment behind Sentinel.
    Node(redis::Connection),
    /// Boxed: a cluster connection is several times larger.
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl OwnConn {
    pub(crate) fn get(&mut self) -> &mut dyn ConnectionLike {
        match self {
            OwnConn::Node(conn) => conn,
            OwnConn::Cluster(conn) => &mut **conn,
        }
    }
}

/// A client's connections to Redis.
pub(crate) struct Backend {
    pub(crate) pool: Pool,
    subscribe: SubscribeVia,
    /// The cluster client, for the watchdog's own connections.
    cluster: Option<redis::cluster::ClusterClient>,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// Seed to try first for the next subscription (cluster).
    next_seed: Mutex<usize>,
}

impl Backend {
    pub(crate) fn open(config: &Config, topology: Topology) -> Result<Backend> {
        let mut cluster = None;
        let (pool, subscribe) = match topology {
            Topology::Single(url) => {
                let client = open_node(config, &url)?;
                let pool = pool_builder(config)
                    .connection_customizer(Box::new(CommandTimeouts(config.command_timeout)))
                    .build(client.clone())?;
                (Pool::Single(pool), SubscribeVia::Client(client))
            }
            Topology::Cluster(nodes) => {
                let seeds = nodes
                    .iter()
                    .map(|url| open_node(config, url))
                    .collect::<Result<Vec<_>>>()?;
                let client = open_cluster(config, &nodes)?;
                cluster = Some(client.clone());
                let manager = ClusterManager {
                    client,
                    generation: Arc::new(AtomicU64::new(0)),
                };
                let pool = pool_builder(config).build(manager)?;
                (Pool::Cluster(pool), SubscribeVia::Nodes(seeds))
            }
            Topology::Sentinel {
                sentinels,
                master,
                tls,
                username,
                password,
                db,
            } => {
                let mut node = redis::RedisConnectionInfo::default().set_db(db);
                if let Some(username) = username {
                    node = node.set_username(username);
                }
                if let Some(password) = password {
                    node = node.set_password(password);
                }
                let mut info = redis::sentinel::SentinelNodeConnectionInfo::default()
                    .set_redis_connection_info(node);
                if tls {
                    info = info.set_tls_mode(redis::TlsMode::Secure);
                }
                let client = redis::sentinel::SentinelClient::build(
                    sentinels,
                    master,
                    Some(info),
                    redis::sentinel::SentinelServerType::Master,
                )
                .map_err(|err| {
                    Error::with_source(ErrorKind::InvalidConfig, "invalid sentinel url", err)
                })?;
                let manager = SentinelManager {
                    client: Arc::new(Mutex::new(client)),
                    connect_timeout: config.connect_timeout,
                    command_timeout: config.command_timeout,
                };
                let pool = pool_builder(config).build(manager.clone())?;
                (Pool::Sentinel(pool), SubscribeVia::Sentinel(manager))
            }
        };
        Ok(Backend {
            pool,
            subscribe,
            cluster,
            connect_timeout: config.connect_timeout,
            command_timeout: config.command_timeout,
            next_seed: Mutex::new(0),
        })
    }

    /// True on Redis Cluster, whose pipelines must stay in one slot.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.pool, Pool::Cluster(_))
    }

    /// A pooled connection, waiting at most the connect timeout for one.
    pub(crate) fn get(&self) -> Result<Conn> {
        self.checkout(self.connect_timeout)
    }

    /// A pooled connection if one is free within `timeout` (for shutdown).
    pub(crate) fn get_timeout(&self, timeout: Duration) -> Option<Conn> {
        self.checkout(timeout).ok()
    }

    /// A pooled connection within `timeout`. On a cluster, stale idle
    /// connections go back (and are dropped) until a current one turns up;
    /// a new one reads the slot map afresh.
    fn checkout(&self, timeout: Duration) -> Result<Conn> {
        Ok(match &self.pool {
            Pool::Single(pool) => Conn::Single(pool.get_timeout(timeout)?),
            Pool::Cluster(pool) => {
                let mut conn = pool.get_timeout(timeout)?;
                for _ in 0..pool.max_size() {
                    if !conn.is_stale() {
                        break;
                    }
                    drop(conn);
                    conn = pool.get_timeout(timeout)?;
                }
                Conn::Cluster(Box::new(conn))
            }
            Pool::Sentinel(pool) => Conn::Sentinel(pool.get_timeout(timeout)?),
        })
    }

    /// The cluster's slot map, read on a pooled connection (`None` off a
    /// cluster).
    pub(crate) fn slot_map(&self) -> Option<Result<SlotMap>> {
        self.is_cluster().then(|| SlotMap::read(self.get()?.get()))
    }

    /// Where subscriber threads listen: one place, or on a cluster every
    /// node (masters and replicas) `map` names, so that a promoted replica
    /// is already listened to. Nodes added later are heard through the
    /// cluster bus.
    pub(crate) fn listen_targets(&self, map: Option<&SlotMap>) -> Result<Vec<Listen>> {
        let SubscribeVia::Nodes(seeds) = &self.subscribe else {
            return Ok(vec![Listen::Main]);
        };
        let Some(map) = map.filter(|map| !map.nodes().is_empty()) else {
            return Ok(vec![Listen::AnySeed]);
        };
        map.nodes()
            .iter()
            .map(|address| Ok(Listen::Node(Box::new(node_client(&seeds[0], address)?))))
            .collect()
    }

    /// A plain connection of the watchdog's own to one cluster node, made
    /// like the seeds' (credentials, TLS), with the command timeouts set:
    /// opening it asks nothing of the other nodes, so a stalled node never
    /// delays it.
    pub(crate) fn node_connection(&self, address: &Address) -> Result<redis::Connection> {
        let SubscribeVia::Nodes(seeds) = &self.subscribe else {
            return Err(Error::new(
                ErrorKind::Server,
                "a node connection off a cluster",
            ));
        };
        let conn =
            node_client(&seeds[0], address)?.get_connection_with_timeout(self.connect_timeout)?;
        set_timeouts(&conn, self.command_timeout)?;
        Ok(conn)
    }

    /// A new connection of the watchdog's own, outside the pool, so that
    /// renewals never wait behind user calls for a pooled connection: to
    /// the server, to the cluster (with its own slot map), or to the master
    /// the Sentinels name now.
    pub(crate) fn own_connection(&self) -> Result<OwnConn> {
        Ok(match (&self.subscribe, &self.cluster) {
            (_, Some(cluster)) => {
                OwnConn::Cluster(Box::new(cluster.get_connection().map_err(Error::from)?))
            }
            (SubscribeVia::Client(client), _) => {
                let conn = client.get_connection_with_timeout(self.connect_timeout)?;
                set_timeouts(&conn, self.command_timeout)?;
                OwnConn::Node(conn)
            }
            (SubscribeVia::Sentinel(manager), _) => OwnConn::Node(manager.connect_master()?),
            (SubscribeVia::Nodes(_), None) => {
                return Err(Error::new(
                    ErrorKind::Server,
                    "a cluster backend without a cluster client",
                ))
            }
        })
    }

    /// A new connection of a subscriber thread's own, with the command
    /// timeouts set.
    pub(crate) fn subscriber_connection(&self, target: &Listen) -> Result<redis::Connection> {
        let conn = match (target, &self.subscribe) {
            (Listen::Node(client), _) => {
                client.get_connection_with_timeout(self.connect_timeout)?
            }
            (_, SubscribeVia::Client(client)) => {
                client.get_connection_with_timeout(self.connect_timeout)?
            }
            (_, SubscribeVia::Sentinel(manager)) => return manager.connect_master(),
            (_, SubscribeVia::Nodes(seeds)) => self.any_seed(seeds)?,
        };
        set_timeouts(&conn, self.command_timeout)?;
        Ok(conn)
    }

    /// A connection to the first reachable seed, starting after the last
    /// one used: if it died, the next reconnect tries the others first.
    fn any_seed(&self, seeds: &[redis::Client]) -> Result<redis::Connection> {
        let mut next = self.next_seed.lock();
        let mut last_error = None;
        for i in 0..seeds.len() {
            let at = (*next + i) % seeds.len();
            match seeds[at].get_connection_with_timeout(self.connect_timeout) {
                Ok(conn) => {
                    *next = at + 1;
                    return Ok(conn);
                }
                Err(err) => last_error = Some(err),
            }
        }
        Err(match last_error {
            Some(err) => err.into(),
            None => Error::new(ErrorKind::InvalidConfig, "no cluster node"),
        })
    }
}

/// A client for the cluster node at `address`, made like `template` (a seed).
fn node_client(template: &redis::Client, (host, port): &Address) -> Result<redis::Client> {
    let info = template.get_connection_info();
    let addr = match info.addr() {
        redis::ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => redis::ConnectionAddr::TcpTls {
            host: host.clone(),
            port: *port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => redis::ConnectionAddr::Tcp(host.clone(), *port),
    };
    redis::Client::open(info.clone().set_addr(addr)).map_err(invalid_url)
}

fn pool_builder<M: r2d2::ManageConnection>(config: &Config) -> r2d2::Builder<M> {
    let maintenance = scheduled_thread_pool::ScheduledThreadPool::builder()
        .num_threads(1)
        .thread_name_pattern("fairlock-pool")
        // Exit with the pool instead of lingering until the next reaper run.
        .on_drop_behavior(scheduled_thread_pool::OnPoolDropBehavior::DiscardPendingScheduled)
        .build();
    r2d2::Pool::builder()
        .max_size(config.pool_size)
        .min_idle(Some(1))
        // A PING per checkout would double the round trips of every call;
        // broken connections are caught by has_broken and by the error path.
        .test_on_check_out(false)
        .connection_timeout(config.connect_timeout)
        .thread_pool(Arc::new(maintenance))
}

fn set_timeouts(conn: &redis::Connection, timeout: Duration) -> redis::RedisResult<()> {
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))
}

/// Sets the per-call timeouts on every pooled single-server connection.
#[derive(Debug)]
struct CommandTimeouts(Duration);

impl r2d2::CustomizeConnection<redis::Connection, redis::RedisError> for CommandTimeouts {
    fn on_acquire(
        &self,
        conn: &mut redis::Connection,
    ) -> std::result::Result<(), redis::RedisError> {
        set_timeouts(conn, self.0)
    }
}

fn invalid_url(err: redis::RedisError) -> Error {
    Error::with_source(ErrorKind::InvalidConfig, "invalid redis url", err)
}

/// The `redis::Client` of one node's URL; a TLS root given to the builder
/// covers it.
fn open_node(config: &Config, url: &str) -> Result<redis::Client> {
    #[cfg(feature = "tls")]
    if let Some(certificates) = tls_certificates(config)? {
        return redis::Client::build_with_tls(url, certificates).map_err(invalid_url);
    }
    #[cfg(not(feature = "tls"))]
    let _ = config;
    redis::Client::open(url).map_err(invalid_url)
}

#[cfg(feature = "tls")]
fn tls_certificates(config: &Config) -> Result<Option<redis::TlsCertificates>> {
    let Some(root) = &config.tls_root_cert else {
        return Ok(None);
    };
    if !root
        .windows(27)
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            "tls_root_cert_pem holds no PEM certificate",
        ));
    }
    Ok(Some(redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(root.clone()),
    }))
}

fn open_cluster(config: &Config, nodes: &[String]) -> Result<redis::cluster::ClusterClient> {
    let builder = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
        .connection_timeout(config.connect_timeout)
        .response_timeout(config.command_timeout)
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(CLUSTER_MIN_RETRY_WAIT_MS)
        .max_retry_wait(CLUSTER_MAX_RETRY_WAIT_MS)
        .retry_wait_formula(CLUSTER_MIN_RETRY_WAIT_MS, 2);
    #[cfg(feature = "tls")]
    let builder = match tls_certificates(config)? {
        Some(certificates) => builder.certs(certificates),
        None => builder,
    };
    builder.build().map_err(invalid_url)
}

/// Opens cluster connections, each with the slot map of its opening.
pub(crate) struct ClusterManager {
    client: redis::cluster::ClusterClient,
    /// Connections opened before this generation are stale (see [`Conn::note`]).
    generation: Arc<AtomicU64>,
}

/// A cluster connection and the generation it was opened in.
pub(crate) struct ClusterConnection {
    conn: redis::cluster::ClusterConnection,
    born: u64,
    generation: Arc<AtomicU64>,
}

impl ClusterConnection {
    fn is_stale(&self) -> bool {
        self.born < self.generation.load(Ordering::Relaxed)
    }
}

impl r2d2::ManageConnection for ClusterManager {
    type Connection = ClusterConnection;
    type Error = Error;

    fn connect(&self) -> Result<ClusterConnection> {
        let born = self.generation.load(Ordering::Relaxed);
        let conn = self
            .client
            .get_connection()
            .map_err(|err| Error::from(err).spelled_out())?;
        Ok(ClusterConnection {
            conn,
            born,
            generation: Arc::clone(&self.generation),
        })
    }

    fn is_valid(&self, conn: &mut ClusterConnection) -> Result<()> {
        redis::cmd("PING").query::<()>(&mut conn.conn)?;
        Ok(())
    }

    fn has_broken(&self, conn: &mut ClusterConnection) -> bool {
        conn.is_stale() || !conn.conn.is_open()
    }
}

/// Opens connections to whichever server the Sentinels name as master now.
#[derive(Clone)]
pub(crate) struct SentinelManager {
    client: Arc<Mutex<redis::sentinel::SentinelClient>>,
    connect_timeout: Duration,
    command_timeout: Duration,
}

impl SentinelManager {
    fn connect_master(&self) -> Result<redis::Connection> {
        // Ask the Sentinels for the master's address, then connect to it.
        let master = self.client.lock().get_client()?;
        let conn = master.get_connection_with_timeout(self.connect_timeout)?;
        set_timeouts(&conn, self.command_timeout)?;
        Ok(conn)
    }
}

/// A connection to the master of the moment; `demoted` once it answered
/// `READONLY` (it became a replica), so the pool lets it go.
pub(crate) struct SentinelConnection {
    conn: redis::Connection,
    demoted: bool,
}

impl r2d2::ManageConnection for SentinelManager {
    type Connection = SentinelConnection;
    type Error = Error;

    fn connect(&self) -> Result<SentinelConnection> {
        Ok(SentinelConnection {
            conn: self.connect_master().map_err(Error::spelled_out)?,
            demoted: false,
        })
    }

    fn is_valid(&self, conn: &mut SentinelConnection) -> Result<()> {
        redis::cmd("PING").query::<()>(&mut conn.conn)?;
        Ok(())
    }

    fn has_broken(&self, conn: &mut SentinelConnection) -> bool {
        conn.demoted || !conn.conn.is_open()
    }
}
