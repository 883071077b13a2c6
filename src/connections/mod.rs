//! The connections of one client, whichever way Redis is deployed: a pool
//! for the lock scripts and a way to open the subscriber's own connection.
//! [`Deployment`] says how each kind of deployment opens its connections
//! (a module of its own for what is specific to a cluster or to
//! Sentinels); one r2d2 pool ([`pool`]) keeps them, whichever the
//! deployment, and [`Backend`] dispatches to the rest.
//!
//! - One server ([`Deployment::Server`]): an r2d2 pool of connections to it;
//!   where a failover moves its address (a managed Redis's DNS name), a
//!   connection to the master demoted since (`READONLY`) leaves the pool.
//! - Redis Cluster ([`cluster`]): an r2d2 pool of the `redis` crate's sync
//!   cluster connections, which route each script by its keys' slot and
//!   follow `MOVED`/`ASK` and failovers. Classic `PUBLISH` reaches every
//!   node of a cluster, but over the cluster bus, which holds small writes
//!   back for milliseconds; so the client listens on every node of the slot
//!   map and reads each handoff on the node whose script published it.
//! - Sentinel ([`Deployment::Sentinel`], the Sentinels asked by [`sentinel`]): an
//!   r2d2 pool of connections to the master the Sentinels name when each
//!   connection is opened; connections to a dead or demoted master are
//!   dropped from the pool, so the next ones reach its successor. The Sentinels get credentials of their own
//!   (`sentinel_password`); the TLS certificates cover them and the master.
//!
//! The rest of the connections layer sits beside them: the settings
//! ([`config`]), where the locks live as the URL says ([`topology`]), a
//! cluster's slot map ([`slot_map`]), running the protocol's scripts on a
//! connection ([`scripts`], each call packed in one buffer by [`resp`]), what a
//! client found wrong with its servers ([`eviction`], [`warning`]); what
//! fairlock reports about itself is the machinery's `observe`, which this
//! layer tells of a reload or a reconnect through hooks.

pub(crate) mod caller;
mod cluster;
pub(crate) mod config;
pub(crate) mod eviction;
pub(crate) mod library;
pub(crate) mod own_conns;
mod pool;
pub(crate) mod resp;
pub(crate) mod scripts;
mod sentinel;
pub(crate) mod slot_map;
pub(crate) mod steady;
pub(crate) mod topology;
pub(crate) mod warning;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What [`Client::builder_from`](crate::Client::builder_from) takes: the
/// redis crate's connection settings in any of their forms.
pub(crate) use redis::IntoConnectionInfo;
use redis::{ConnectionAddr, ConnectionInfo};

use crate::connections::config::Config;
use crate::connections::slot_map::{Address, MapReader, SlotMap};
use crate::connections::topology::{redact_url, Topology};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{check_subscribed, Route};

use cluster::Cluster;
use pool::Manager;
use steady::Link;
use steady::{quiet_info, Steady};

/// Where one subscriber thread listens.
#[derive(Clone)]
pub(crate) enum Listen {
    /// The one server, or the master the Sentinels name at each connect.
    Main,
    /// One cluster node, reached as the seeds are.
    Node(Address),
    /// Any reachable cluster seed, tried in turn (when the slot map could
    /// not be read): every node hears every `PUBLISH`, only later.
    AnySeed,
    /// One cluster node, for the shard channels of the slots it masters
    /// (sharded pub/sub: `Route::Sharded`).
    Shards(Address),
}

impl Listen {
    /// The node's address, for logs.
    pub(crate) fn describe(&self) -> String {
        match self {
            Listen::Main => "the server".to_owned(),
            Listen::AnySeed => "a cluster seed node".to_owned(),
            Listen::Node((host, port)) | Listen::Shards((host, port)) => format!("{host}:{port}"),
        }
    }
}

/// A connection outside the pool (see [`Backend::own_connection`]): to
/// the one server, to the master of the moment behind Sentinel, to one
/// cluster node, or a cluster connection of its own.
pub(crate) type OwnConn = Box<dyn Link>;

/// How one deployment's connections are opened.
enum Deployment {
    /// One server's address.
    Server(redis::Client),
    /// Whichever server the Sentinels name as master at each connect: a
    /// connection to a master demoted since is dropped from the pool, so
    /// the next ones reach its successor.
    Sentinel(Box<sentinel::Sentinels>),
    Cluster(Cluster),
}

impl Deployment {
    /// A new connection within `timeouts`, with the command timeouts set:
    /// to the server, to the master the Sentinels name now, or on a
    /// cluster to the node `at` names (any seed for [`Listen::Main`]).
    fn connect(&self, at: &Listen, timeouts: Timeouts) -> Result<Steady> {
        match self {
            Deployment::Server(client) => timeouts.connect(client),
            Deployment::Sentinel(sentinels) => timeouts.connect(&sentinels.master(timeouts)?),
            Deployment::Cluster(cluster) => cluster.connection(at, timeouts),
        }
    }
}

/// A client's connections to Redis: the pooled ones and the others (see
/// [`pool`]).
pub(crate) struct Backend {
    pool: r2d2::Pool<Manager>,
    /// The pool's manager: the deployment and its timeouts, for the
    /// connections opened outside the pool too.
    manager: Manager,
    /// A cluster's slot map reads, off the pool.
    map_reader: MapReader,
}

impl Backend {
    pub(crate) fn open(config: &Config, topology: Topology) -> Result<Backend> {
        let deployment = match topology {
            Topology::Single(url) => Deployment::Server(open_info(config, quiet(&url)?)?),
            Topology::Given(info) => Deployment::Server(open_info(config, *info)?),
            Topology::Cluster(nodes) => Deployment::Cluster(Cluster::open(config, &nodes)?),
            Topology::Sentinel { sentinels, node } => {
                Deployment::Sentinel(Box::new(sentinel::client(config, sentinels, node)?))
            }
        };
        Ok(Backend::pooled(config, deployment))
    }

    /// True on Redis Cluster, whose pipelines must stay in one slot.
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster().is_some()
    }

    /// The cluster, for what only a cluster has.
    fn cluster(&self) -> Option<&Cluster> {
        match &*self.manager.deployment {
            Deployment::Cluster(cluster) => Some(cluster),
            _ => None,
        }
    }

    /// The cluster's slot map, read off the pool on a connection of its
    /// own to a node, `near` first if given ([`MapReader`]; `None` off a
    /// cluster), each connect and the reply by `by` if given (a watch's
    /// call): the node asked may be one that stalled.
    pub(crate) fn slot_map(
        &self,
        near: Option<&Address>,
        by: Option<Instant>,
    ) -> Option<Result<SlotMap>> {
        let cluster = self.cluster()?;
        Some(steady::replied_by(by, || {
            self.map_reader.read(near, |at| {
                let at = at.cloned().map_or(Listen::AnySeed, Listen::Node);
                cluster.connection(&at, self.manager.timeouts.by(by))
            })
        }))
    }

    /// Where subscriber threads listen: one place, or on a cluster every
    /// node (masters and replicas) `map` names, so that a promoted replica
    /// is already listened to, or any seed when the map could not be read
    /// or names none. Nodes added later are heard through the cluster bus
    /// until a slot map names them (`listen_on_new_nodes`).
    pub(crate) fn listeners(&self, map: Option<&SlotMap>) -> Vec<Listen> {
        let nodes = map.map(SlotMap::nodes).unwrap_or_default();
        match &*self.manager.deployment {
            Deployment::Server(_) | Deployment::Sentinel(_) => vec![Listen::Main],
            Deployment::Cluster(_) if nodes.is_empty() => vec![Listen::AnySeed],
            Deployment::Cluster(_) => nodes.iter().cloned().map(Listen::Node).collect(),
        }
    }

    /// Has a cluster's new connections opened at the masters `map` names
    /// first (see [`Cluster::reseed`]); nothing elsewhere.
    pub(crate) fn reseed(&self, config: &Config, map: &SlotMap) -> Result<()> {
        (self.cluster()).map_or(Ok(()), |cluster| cluster.reseed(config, map))
    }

    /// A new connection of its own to where `at` says, with the command
    /// timeouts set: the watchdog's to one cluster node, a subscriber
    /// thread's to one for shard channels (see [`Cluster::connection`]).
    pub(crate) fn connection(&self, at: &Listen) -> Result<Steady> {
        self.manager.deployment.connect(at, self.manager.timeouts)
    }

    /// How many times the Sentinels named another master than before (0
    /// elsewhere): a subscription opened before may be on a master that
    /// stopped answering, which closes nothing.
    pub(crate) fn master_moves(&self) -> u64 {
        match &*self.manager.deployment {
            Deployment::Sentinel(sentinels) => sentinels.moves.load(Ordering::Relaxed),
            _ => 0,
        }
    }

    /// A new connection of the watchdog's own, outside the pool, so that
    /// renewals never wait behind user calls for a pooled connection: to
    /// the server, to the cluster (with its own slot map), or to the master
    /// the Sentinels name now.
    pub(crate) fn own_connection(&self) -> Result<OwnConn> {
        self.manager.open()
    }

    /// `err`, met by the first connection or its first command (started
    /// at `started`), said better. The cluster client names each node's
    /// refusal only in its text ("failed to connect to each cluster
    /// node"), and a seed not in cluster mode or with no slots as "No
    /// connections found": when it failed before any node could time out,
    /// a seed's own connection says whether the credentials, the
    /// database or the seed's certificate were refused, or the seed is no cluster node or has no
    /// slots (`CLUSTER SLOTS`), rather than an outage.
    pub(crate) fn first_failure(&self, err: Error, started: Instant) -> Error {
        let quick = started.elapsed() < self.manager.timeouts.connect;
        let Some(cluster) = self.cluster().filter(|_| quick) else {
            return err;
        };
        let seed = cluster.connection(&Listen::AnySeed, self.manager.timeouts);
        let map = seed.and_then(|mut seed| SlotMap::read(&mut seed));
        // `Ok(true)`: the seed answered, with no slots.
        match map.map(|map| map.nodes().is_empty()) {
            Err(refused) if !refused.is_connection() || refused.refused_certificate().is_some() => {
                refused
            }
            Ok(true) => Error::new(
                ErrorKind::Connection,
                "the cluster node has no slots assigned (a lone node that met no peer?): the cluster is not set up yet",
            ),
            _ => err,
        }
    }

    /// A new connection of its own (a subscriber thread's, a watch's), with
    /// the command timeouts set, subscribed to `channel` (a shard channel
    /// at a [`Listen::Shards`] node): the server's
    /// answer is checked (see [`check_subscribed`](crate::protocol::check_subscribed)),
    /// all of it by `by` if given (a watch's call).
    pub(crate) fn subscription(
        &self,
        at: &Listen,
        channel: &str,
        by: Option<Instant>,
    ) -> Result<redis::Connection> {
        let timeouts = || self.manager.timeouts.by(by);
        let mut conn = (self.manager.deployment)
            .connect(at, timeouts())?
            .into_inner();
        let route = match at {
            Listen::Shards(_) => Route::Sharded,
            _ => Route::Classic,
        };
        subscribe_on(&mut conn, route, channel, Some(timeouts().command))?;
        Ok(conn)
    }
}

/// Subscribes `conn` to `channel` by `route` and reads the server's
/// confirmation within `timeout` (the connection's read timeout): a
/// subscription opened, or one confirmed again while its link is quiet.
/// Sent and read apart: a `query` skips the RESP3 push that answers an
/// `SSUBSCRIBE`. No signal cuts it short (`steady`); if a stop does, it is
/// sent again, within the timeout all told: the redis crate skips the
/// first confirmation (RESP2), or the second comes as a push the
/// subscriber reads as one (RESP3).
pub(crate) fn subscribe_on(
    conn: &mut redis::Connection,
    route: Route,
    channel: &str,
    timeout: Option<Duration>,
) -> Result<()> {
    let command = route.subscribe_command(channel).get_packed_command();
    let confirmation = steady::request_on(conn, timeout, |conn, _| {
        conn.send_packed_command(&command)?;
        conn.recv_response()
    });
    check_subscribed(steady::worded(confirmation, timeout).map_err(Error::from_redis)?)
}

/// The timeouts a connection outside the pool is opened with.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    connect: Duration,
    command: Duration,
}

impl Timeouts {
    /// These timeouts, each cut to what is left until `by` (1 ms at least).
    fn by(self, by: Option<Instant>) -> Timeouts {
        let left = by.map(|at| at.saturating_duration_since(Instant::now()));
        let cut = |t: Duration| left.map_or(t, |left| t.min(left.max(Duration::from_millis(1))));
        Timeouts {
            connect: cut(self.connect),
            command: cut(self.command),
        }
    }

    /// A new connection to `client` within the connect timeout (again if a
    /// signal cut it short), with the command timeouts set.
    fn connect(self, client: &redis::Client) -> Result<Steady> {
        Steady::connect_to(client, Some(self.connect))
            .and_then(|steady| steady.set_timeouts(self.command).map(|()| steady))
            .map_err(Error::from_redis)
    }
}

/// `info` at `host`:`port`, its TLS settings kept (a `rediss` one's).
fn at_address(info: ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
    let mut addr = info.addr().clone();
    match &mut addr {
        ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => (*h, *p) = (host, port),
        _ => addr = ConnectionAddr::Tcp(host, port),
    }
    info.set_addr(addr)
}

/// The schemes of one server's URL, which the `redis` crate reads (a
/// cluster's and Sentinels' are fairlock's own: `Topology`).
const SERVER_SCHEMES: [&str; 6] = ["redis", "rediss", "valkey", "valkeys", "unix", "redis+unix"];

fn invalid_url(err: redis::RedisError) -> Error {
    let message = format!(
        "invalid redis url (a scheme fairlock takes is {}, redis+cluster or redis+sentinel)",
        SERVER_SCHEMES.join(", ")
    );
    Error::with_source(ErrorKind::InvalidConfig, message, err)
}

/// `url`, which the `redis` crate could not read, named (its password
/// hidden: a cluster has several seeds); the schemes fairlock takes are
/// listed only when its scheme is none of them.
fn unreadable(url: &str, err: redis::RedisError) -> Error {
    let known = url
        .split_once("://")
        .is_some_and(|(scheme, _)| SERVER_SCHEMES.contains(&scheme));
    if !known {
        return invalid_url(err);
    }
    let message = format!("invalid redis url {:?}", redact_url(url));
    Error::with_source(ErrorKind::InvalidConfig, message, err)
}

/// The `redis::Client` of one server's connection settings (a node's URL
/// through [`quiet`]); a TLS root given to the builder covers it. Its
/// connections send no `CLIENT SETINFO` (see [`quiet`]).
fn open_info(config: &Config, info: ConnectionInfo) -> Result<redis::Client> {
    let info = quiet_info(info);
    #[cfg(feature = "tls")]
    if let Some(certificates) = config.tls_certificates()? {
        return redis::Client::build_with_tls(info, certificates).map_err(invalid_url);
    }
    #[cfg(not(feature = "tls"))]
    let _ = config;
    redis::Client::open(info).map_err(invalid_url)
}

/// `url`'s connection settings without the `CLIENT SETINFO` the redis crate
/// sends at connect by default: its answer is ignored, and Redis 6.2, 7.2+
/// and Valkey log the least-privilege user's denial of it in `ACL LOG` on
/// every connect (Redis 7.0 refuses the rule that would allow it).
/// Checked as `builder_from`'s settings are (a port 0 is no server).
fn quiet(url: &str) -> Result<ConnectionInfo> {
    let info = url
        .into_connection_info()
        .map_err(|err| unreadable(url, err))?;
    Topology::of_info(&info)?;
    Ok(quiet_info(info))
}
