//! Redis Cluster: an r2d2 pool of the `redis` crate's sync cluster
//! connections, which route each script by its keys' slot and follow
//! `MOVED`/`ASK` and failovers; a subscriber thread per node of the slot
//! map, and plain connections to single nodes for the watchdog.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::cluster::ClusterClient;
use redis::{ConnectionInfo, ProtocolVersion};

use crate::connections::config::Config;
use crate::connections::slot_map::{Address, SlotMap};
use crate::error::{Error, Result};

use super::steady::{Link, Steady};
use super::{at_address, invalid_url, open_info, quiet, Listen, Timeouts};

/// Retries of one cluster call through redirections (`MOVED`, `ASK`) and a
/// failover (`READONLY`, refused connections; a `TRYAGAIN` and a
/// `CLUSTERDOWN` are the caller's to retry, within its deadline: `steady`),
/// waiting 100 ms to 1 s between them: a call gives up after about 4 s of
/// waits. Against a node that accepts but never answers, a call stops at
/// its first command timeout (and its `WAIT`'s, with `sync_replicas`) or
/// its deadline, all tries told (`steady::replied_by`).
const CLUSTER_RETRIES: u32 = 6;
const CLUSTER_MIN_RETRY_WAIT_MS: u64 = 100;
const CLUSTER_MAX_RETRY_WAIT_MS: u64 = 1000;

/// The connections to a Redis Cluster.
pub(super) struct Cluster {
    /// The cluster client, for the pool's and the watchdog's connections
    /// (see [`Cluster::reseed`]).
    client: Mutex<Arc<ClusterClient>>,
    /// The seeds' connection settings, as the URL gives them.
    infos: Vec<ConnectionInfo>,
    /// Cluster seed nodes: the first one's settings (scheme, credentials,
    /// TLS) are used for every node the slot map names.
    seeds: Vec<redis::Client>,
    /// Seed to try first for the next subscription.
    next_seed: Mutex<usize>,
}

impl Cluster {
    pub(super) fn open(config: &Config, nodes: &[String]) -> Result<Cluster> {
        // Seeds without `CLIENT SETINFO`; the node connections the cluster
        // client opens are `Steady`, which sends none either.
        let infos = (nodes.iter().map(|url| quiet(url))).collect::<Result<Vec<_>>>()?;
        let seeds = (infos.iter().cloned())
            .map(|info| open_info(config, info))
            .collect::<Result<Vec<_>>>()?;
        Ok(Cluster {
            client: Mutex::new(Arc::new(cluster_client(config, infos.clone())?)),
            infos,
            seeds,
            next_seed: Mutex::new(0),
        })
    }

    /// The cluster client as it is now.
    pub(super) fn client(&self) -> Arc<ClusterClient> {
        Arc::clone(&self.client.lock())
    }

    /// Has the cluster client open its connections at the first of the
    /// masters of `map` (a slot map just read) that answers, then of the
    /// seeds. It opens each at the first of its nodes that answers a
    /// `PING`, in their order: a seed that stopped (a master that accepts
    /// and never answers, failed over since) cost every new connection a
    /// connect timeout, as long as a call waits for one, so the first calls
    /// after the failover failed.
    pub(super) fn reseed(&self, config: &Config, map: &SlotMap) -> Result<()> {
        // Each master once, in the map's order.
        let mut seen = HashSet::new();
        let masters = (map.masters().into_iter()).filter(|&(_, _, master)| seen.insert(master));
        let masters = masters.map(|(_, _, address)| self.node_info(address));
        let nodes = masters.chain(self.infos.iter().cloned()).collect();
        *self.client.lock() = Arc::new(cluster_client(config, nodes)?);
        Ok(())
    }

    /// A plain connection of its own to the cluster node `at` names (the
    /// watchdog's, a subscriber thread's, a watch's, a slot map read's), or
    /// to any seed, made like the seeds' (credentials, TLS), within
    /// `timeouts` (the caller's, cut to its deadline if it has one) and
    /// with their command timeouts set: opening it asks nothing of the
    /// other nodes, so a stalled node never delays it.
    pub(super) fn connection(&self, at: &Listen, timeouts: Timeouts) -> Result<Steady> {
        let info = match at {
            Listen::Node(node) => self.node_info(node),
            // RESP3: shard messages, confirmations and `sunsubscribe` come
            // as pushes, which a read timed out before does not swallow
            // (the redis crate skips the next reply after one: RESP2).
            Listen::Shards(node) => {
                let info = self.node_info(node);
                let settings = info.redis_settings().clone();
                info.set_redis_settings(settings.set_protocol(ProtocolVersion::RESP3))
            }
            Listen::Main | Listen::AnySeed => return self.any_seed(timeouts),
        };
        timeouts.connect(&redis::Client::open(info).map_err(invalid_url)?)
    }

    /// A connection to the first reachable seed within `timeouts` each,
    /// starting after the last one used: if it died, the next reconnect
    /// tries the others first.
    fn any_seed(&self, timeouts: Timeouts) -> Result<Steady> {
        let mut next = self.next_seed.lock();
        let mut last_error = Error::invalid_config("no cluster node");
        for at in (*next..*next + self.seeds.len()).map(|i| i % self.seeds.len()) {
            match timeouts.connect(&self.seeds[at]) {
                Ok(conn) => {
                    *next = at + 1;
                    return Ok(conn);
                }
                Err(err) => last_error = err,
            }
        }
        Err(last_error)
    }

    /// The connection settings of the cluster node at `address`: the first
    /// seed's (credentials, TLS).
    fn node_info(&self, (host, port): &Address) -> ConnectionInfo {
        let seed = self.seeds[0].get_connection_info().clone();
        at_address(seed, host.clone(), *port)
    }
}

/// A cluster client that opens its connections at the first of `nodes`
/// that answers.
fn cluster_client(config: &Config, nodes: Vec<ConnectionInfo>) -> Result<ClusterClient> {
    let builder = redis::cluster::ClusterClientBuilder::new(nodes)
        .connection_timeout(config.connect_timeout)
        .response_timeout(config.command_timeout)
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(CLUSTER_MIN_RETRY_WAIT_MS)
        .max_retry_wait(CLUSTER_MAX_RETRY_WAIT_MS)
        .retry_wait_formula(CLUSTER_MIN_RETRY_WAIT_MS, 2);
    #[cfg(feature = "tls")]
    let builder = match config.tls_certificates()? {
        Some(certificates) => builder.certs(certificates),
        None => builder,
    };
    builder.build().map_err(invalid_url)
}

/// A cluster connection whose node connections are [`Steady`]: quiet (no
/// `CLIENT SETINFO`) and not failed by a signal.
pub(crate) type NodesConnection = redis::cluster::ClusterConnection<Steady>;

impl Link for NodesConnection {
    fn set_timeouts(&self, timeout: Duration) -> redis::RedisResult<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }
}
