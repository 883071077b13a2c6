//! A Redis Cluster of three masters with one replica each for tests
//! ([`RedisCluster`]), and where a lock's keys live in it ([`lock_key`],
//! [`slot_of`]). Every process is a child of the test, SIGKILLed and reaped
//! on drop (also when the test panics, when the logs are printed). Only
//! single-node connections of the `redis` crate are used here (plain, or
//! TLS for a cluster of [`RedisCluster::start_tls`]), never its cluster
//! client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::info::{field, info_replication, query_string, replica_acknowledges};
use crate::timing::{poll, START_TIMEOUT};
use crate::{free_port, on_a_free_port, private_dir, Dial, RedisServer};

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
struct NodeLine {
    id: String,
    port: u16,
    flags: Vec<String>,
    /// The master's id, for a replica.
    master_id: Option<String>,
    connected: bool,
    /// Inclusive slot ranges served.
    slots: Vec<(u16, u16)>,
}

impl NodeLine {
    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    fn is_master(&self) -> bool {
        self.has_flag("master")
    }

    fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parses `CLUSTER NODES`:
/// `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`
fn parse_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let bad = || format!("unparsable CLUSTER NODES line: {line:?}");
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 8 {
                return Err(bad());
            }
            let address = words[1].split([',', '@']).next().ok_or_else(bad)?;
            let port = address
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .ok_or_else(bad)?;
            let mut slots = Vec::new();
            for slot in &words[8..] {
                if slot.starts_with('[') {
                    continue; // a slot being imported or migrated
                }
                let (a, b) = slot.split_once('-').unwrap_or((slot, slot));
                slots.push((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?));
            }
            Ok(NodeLine {
                id: words[0].to_owned(),
                port,
                flags: words[2].split(',').map(str::to_owned).collect(),
                master_id: (words[3] != "-").then(|| words[3].to_owned()),
                connected: words[7] == "connected",
                slots,
            })
        })
        .collect()
}

/// The lock hash of `name` under the default prefix (see src/protocol/keys.rs).
pub fn lock_key(name: &str) -> String {
    let digest = sha1_smol::Sha1::from(name).digest().to_string();
    format!("fairlock:{{{}}}:lock:{name}", &digest[..16])
}

/// The slot Redis Cluster gives `key`: CRC16 of its hash tag, mod 16384.
pub fn slot_of(key: &str) -> u16 {
    let tag = key
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % 16384
}

/// Three masters with one replica each, on loopback ports. The cluster bus
/// ports are chosen free too (`--cluster-port`), since the default
/// (port + 10000) may be above 65535 for an ephemeral port; a server
/// before 7.0 (no `--cluster-port`) gets a port whose port + 10000 is free.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// For each master killed by [`kill`](Self::kill): its replica then.
    former_replica: HashMap<u16, u16>,
    /// Holds `redis-cli --cluster create`'s output; removed on drop.
    dir: PathBuf,
    /// How the nodes are reached: plain TCP, or TLS for a cluster of
    /// [`start_tls`](Self::start_tls).
    dial: Dial,
}

/// Starts one cluster node with `extra` arguments (TLS only if `tls`), on
/// a port and a bus port not in `used` (which gains both); its port and
/// its bus port.
fn start_node(used: &mut Vec<u16>, extra: &[String], tls: bool) -> (RedisServer, u16) {
    // Redis 6.2 has no `--cluster-port`: its bus is port + 10000.
    let bus_port_option = crate::server_version() >= (7, 0, 0);
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "1000",
        "--cluster-require-full-coverage",
        "no",
        "--cluster-replica-validity-factor",
        "0",
        "--cluster-allow-reads-when-down",
        "yes",
        // Replicas sync at once (the default waits 5 s for more).
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ];
    args.extend(extra.iter().map(String::as_str));
    let (node, bus_port) = if bus_port_option {
        // A fresh bus port for each attempt: one free when probed may be
        // taken (by any socket's ephemeral port) before the node binds it.
        on_a_free_port("a cluster node", |port| {
            let bus_port = loop {
                let bus = free_port();
                if !used.contains(&bus) && bus != port {
                    break bus;
                }
            };
            let bus = bus_port.to_string();
            let mut args = args.clone();
            args.extend(["--cluster-port", &bus]);
            RedisServer::try_start_on(port, &args, tls).map(|node| (node, bus_port))
        })
    } else {
        let node = RedisServer::start_with_bus(&args);
        let bus_port = node.port() + 10000;
        (node, bus_port)
    };
    used.extend([node.port(), bus_port]);
    (node, bus_port)
}

impl RedisCluster {
    /// Starts six nodes, joins them with `redis-cli --cluster create
    /// --cluster-replicas 1`, and waits until the cluster is whole: every
    /// node sees all slots assigned, six healthy nodes, three masters each
    /// with one replica whose link to it is up.
    pub fn start() -> RedisCluster {
        Self::start_with(Dial::default(), &[])
    }

    /// As [`start`](Self::start), with nodes that listen for TLS only and
    /// ask every client for a certificate of the CA of `tls` (mutual TLS),
    /// their cluster bus and replication over TLS too (`tls-cluster`,
    /// `tls-replication`, presenting the client certificate of `tls`; see
    /// [`TlsFiles::cluster_node_args`](crate::TlsFiles::cluster_node_args)).
    /// The support's own connections and `redis-cli` present that
    /// certificate; [`url`](Self::url) and [`seed_urls`](Self::seed_urls)
    /// say `rediss`. Needs a server of 7.0 or later built with TLS.
    #[cfg(feature = "tls")]
    pub fn start_tls(tls: &crate::TlsFiles) -> RedisCluster {
        Self::start_with(Dial::tls(tls), &tls.cluster_node_args())
    }

    /// Starts the six nodes with `extra` arguments, reached by `dial`.
    fn start_with(dial: Dial, extra: &[String]) -> RedisCluster {
        let started = Instant::now();
        let dir = private_dir("cluster").expect("create the cluster's directory");
        let mut cluster = RedisCluster {
            nodes: Vec::new(),
            former_replica: HashMap::new(),
            dir,
            dial,
        };
        let tls = cluster.dial.is_tls();
        // Redis 6.2 has no `--cluster-port`: its bus is port + 10000.
        let bus_port_option = crate::server_version() >= (7, 0, 0);
        assert!(
            bus_port_option || !tls,
            "a TLS cluster needs a server of 7.0 or later"
        );
        let mut used: Vec<u16> = Vec::new();
        for _ in 0..6 {
            let (node, _) = start_node(&mut used, extra, tls);
            cluster.nodes.push(node);
        }
        cluster.create();
        let created = started.elapsed();
        if let Err(error) = poll(START_TIMEOUT, Duration::from_millis(50), || {
            cluster.check_whole()
        }) {
            panic!(
                "the cluster was not ready within {START_TIMEOUT:?}: {error}\n{}",
                cluster.describe()
            );
        }
        eprintln!(
            "cluster: started in {:.0} ms ({:.0} ms to `--cluster create`)",
            crate::ms(started.elapsed()),
            crate::ms(created)
        );
        cluster
    }

    /// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`,
    /// bounded to 30 s; panics with its output if it fails.
    fn create(&self) {
        let out_path = self.dir.join("cluster-create.out");
        let out = std::fs::File::create(&out_path).expect("create the output file");
        let err = out.try_clone().expect("clone the output file");
        let mut child = Command::new("redis-cli")
            .args(self.dial.cli_args())
            .arg("--cluster")
            .arg("create")
            .args(self.ports().iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("redis-cli runs");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for redis-cli") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = std::fs::read_to_string(&out_path).unwrap_or_default();
        match status {
            Some(status) if status.success() && output.contains("[OK] All 16384 slots covered") => {
            }
            Some(status) => panic!("redis-cli --cluster create failed ({status}):\n{output}"),
            None => panic!("redis-cli --cluster create did not finish within 30 s:\n{output}"),
        }
    }

    /// `Ok` when every node agrees the cluster is whole (see [`start`](Self::start)).
    fn check_whole(&self) -> Result<(), String> {
        let mut layout: Option<Vec<(u16, u16)>> = None;
        for port in self.ports() {
            let info = query_string(&self.dial, port, &["CLUSTER", "INFO"])?;
            for (name, want) in [
                ("cluster_state", "ok"),
                ("cluster_slots_assigned", "16384"),
                ("cluster_slots_ok", "16384"),
                ("cluster_known_nodes", "6"),
            ] {
                let got = field(&info, name).unwrap_or("(missing)");
                if got != want {
                    return Err(format!("node {port}: {name} is {got}, not {want}"));
                }
            }
            let nodes = parse_nodes(&query_string(&self.dial, port, &["CLUSTER", "NODES"])?)?;
            if nodes.len() != 6 {
                return Err(format!("node {port} knows {} nodes, not 6", nodes.len()));
            }
            for node in &nodes {
                let unhealthy = ["fail", "fail?", "handshake", "noaddr"]
                    .iter()
                    .find(|f| node.has_flag(f));
                if let Some(flag) = unhealthy {
                    return Err(format!("node {port} flags node {} {flag}", node.port));
                }
                if !node.connected {
                    return Err(format!("node {port}: link to {} not connected", node.port));
                }
            }
            let mut pairs = Vec::new();
            for master in nodes.iter().filter(|n| n.is_master()) {
                let replicas: Vec<&NodeLine> = nodes
                    .iter()
                    .filter(|n| n.master_id.as_deref() == Some(&master.id))
                    .collect();
                if replicas.len() != 1 {
                    return Err(format!(
                        "node {port}: master {} has {} replicas, not 1",
                        master.port,
                        replicas.len()
                    ));
                }
                pairs.push((master.port, replicas[0].port));
            }
            if pairs.len() != 3 {
                return Err(format!("node {port} sees {} masters, not 3", pairs.len()));
            }
            pairs.sort_unstable();
            match &layout {
                None => layout = Some(pairs),
                Some(first) if *first != pairs => {
                    return Err(format!(
                        "nodes disagree on (master, replica) pairs: {first:?} vs {pairs:?} (node {port})"
                    ))
                }
                Some(_) => {}
            }
        }
        for (master, replica) in layout.unwrap_or_default() {
            let info = info_replication(&self.dial, replica)?;
            let role = field(&info, "role").unwrap_or("(missing)");
            let link = field(&info, "master_link_status").unwrap_or("(missing)");
            if role != "slave" || link != "up" {
                return Err(format!(
                    "replica {replica} of {master}: role {role}, master_link_status {link}"
                ));
            }
            replica_acknowledges(&self.dial, master, replica)?;
        }
        Ok(())
    }

    /// Starts one more node, a master with no slots (as `redis-cli
    /// --cluster add-node` adds one to scale out), and has the cluster meet
    /// it; waits until every live node knows every node, its links are up
    /// and it says `cluster_state:ok`. Its port. Plain TCP clusters only.
    pub fn add_node(&mut self) -> u16 {
        assert!(!self.dial.is_tls(), "add_node: a plain cluster only");
        let mut used = self.ports();
        let (node, bus_port) = start_node(&mut used, &[], false);
        let port = node.port();
        let (port_arg, bus_arg) = (port.to_string(), bus_port.to_string());
        let mut meet = vec!["CLUSTER", "MEET", "127.0.0.1", &port_arg];
        if crate::server_version() >= (7, 0, 0) {
            meet.push(&bus_arg);
        }
        query_string(&self.dial, self.masters()[0], &meet).unwrap_or_else(|e| panic!("{e}"));
        self.nodes.push(node);
        let want = self.nodes.len();
        let met = poll(START_TIMEOUT, Duration::from_millis(50), || {
            for at in self.live_ports() {
                let nodes = parse_nodes(&query_string(&self.dial, at, &["CLUSTER", "NODES"])?)?;
                if nodes.len() != want {
                    return Err(format!("node {at} knows {} nodes, not {want}", nodes.len()));
                }
                if let Some(n) = nodes
                    .iter()
                    .find(|n| !n.connected || n.has_flag("handshake"))
                {
                    return Err(format!("node {at}: {} not met yet", n.port));
                }
                // A master just started refuses writes (`CLUSTERDOWN`) for
                // its first 2 s (Redis's writable delay), longer than a
                // cluster client's retries may wait: an operator's tooling
                // waits for it too before it moves slots there.
                let info = query_string(&self.dial, at, &["CLUSTER", "INFO"])?;
                let state = field(&info, "cluster_state").unwrap_or("(missing)");
                if state != "ok" {
                    return Err(format!("node {at}: cluster_state:{state}"));
                }
            }
            Ok(())
        });
        if let Err(error) = met {
            panic!("node {port} did not join: {error}\n{}", self.describe());
        }
        port
    }

    /// Ports of every node, in start order (dead ones too).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    fn is_alive(&self, port: u16) -> bool {
        self.nodes
            .iter()
            .any(|n| n.port() == port && n.pid().is_some())
    }

    /// Ports of the nodes not killed.
    pub fn live_ports(&self) -> Vec<u16> {
        self.ports()
            .into_iter()
            .filter(|&p| self.is_alive(p))
            .collect()
    }

    /// `redis` or, for a TLS cluster, `rediss`.
    fn scheme(&self) -> &'static str {
        if self.dial.is_tls() {
            "rediss"
        } else {
            "redis"
        }
    }

    /// `redis://127.0.0.1:<port>` (`rediss://` for a TLS cluster) for each
    /// of the six nodes.
    pub fn seed_urls(&self) -> Vec<String> {
        let scheme = self.scheme();
        self.ports()
            .iter()
            .map(|p| format!("{scheme}://127.0.0.1:{p}"))
            .collect()
    }

    /// `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...` naming all six nodes
    /// (`rediss+cluster://` for a TLS cluster).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("{}+cluster://{}", self.scheme(), hosts.join(","))
    }

    /// `CLUSTER NODES` as the first live node that answers sees it.
    fn view(&self) -> Vec<NodeLine> {
        let mut errors = Vec::new();
        for port in self.live_ports() {
            match query_string(&self.dial, port, &["CLUSTER", "NODES"])
                .and_then(|t| parse_nodes(&t))
            {
                Ok(nodes) => return nodes,
                Err(error) => errors.push(error),
            }
        }
        panic!("no live cluster node answers CLUSTER NODES: {errors:?}");
    }

    /// Ports of the current masters (sorted): nodes flagged `master`, not
    /// `fail`, that serve at least one slot, as a live node sees them.
    pub fn masters(&self) -> Vec<u16> {
        let mut masters: Vec<u16> = self
            .view()
            .iter()
            .filter(|n| n.is_master() && !n.has_flag("fail") && !n.slots.is_empty())
            .map(|n| n.port)
            .collect();
        masters.sort_unstable();
        masters
    }

    /// The slot of `key` (`CLUSTER KEYSLOT` on a live node).
    pub fn key_slot(&self, key: &str) -> u16 {
        let port = *self.live_ports().first().expect("a live cluster node");
        let mut conn = self.conn(port);
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .expect("CLUSTER KEYSLOT")
    }

    /// Port of the master serving `slot`, as a live node sees it.
    pub fn master_for_slot(&self, slot: u16) -> u16 {
        let view = self.view();
        view.iter()
            .find(|n| n.is_master() && n.serves(slot))
            .map(|n| n.port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}: {view:?}"))
    }

    /// Port of the master serving `key`'s slot.
    pub fn master_of_key(&self, key: &str) -> u16 {
        self.master_for_slot(self.key_slot(key))
    }

    /// The first name `<prefix>-<i>` whose lock lives on each master, by
    /// master port.
    pub fn one_name_per_master(&self, prefix: &str) -> HashMap<u16, String> {
        let masters = self.masters();
        let mut picked: HashMap<u16, String> = HashMap::new();
        for name in (0..1000).map(|i| format!("{prefix}-{i}")) {
            if picked.len() == masters.len() {
                break;
            }
            let master = self.master_for_slot(slot_of(&lock_key(&name)));
            picked.entry(master).or_insert(name);
        }
        assert_eq!(picked.len(), masters.len(), "{picked:?}");
        picked
    }

    /// Port of the (one) replica of the master on `master_port`.
    pub fn replica_of(&self, master_port: u16) -> u16 {
        let view = self.view();
        let master = view
            .iter()
            .find(|n| n.port == master_port)
            .unwrap_or_else(|| panic!("no node on port {master_port}: {view:?}"));
        let replicas: Vec<u16> = view
            .iter()
            .filter(|n| n.master_id.as_deref() == Some(&master.id))
            .map(|n| n.port)
            .collect();
        match replicas[..] {
            [replica] => replica,
            _ => panic!("master {master_port} has replicas {replicas:?}, not one: {view:?}"),
        }
    }

    /// A single-node (non-cluster) connection to the node on `port`, over
    /// TLS for a TLS cluster.
    pub fn conn(&self, port: u16) -> redis::Connection {
        self.dial
            .conn(port)
            .unwrap_or_else(|e| panic!("cluster node: {e}"))
    }

    /// SIGKILLs the node on `port` (and reaps it); returns when it was
    /// killed. For a master, its replica then is remembered for
    /// [`wait_for_promotion`](Self::wait_for_promotion).
    pub fn kill(&mut self, port: u16) -> Instant {
        let view = self.view();
        let is_master = view.iter().any(|n| n.port == port && n.is_master());
        if is_master {
            let replica = self.replica_of(port);
            self.former_replica.insert(port, replica);
        }
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"));
        let at = Instant::now();
        node.kill();
        at
    }

    /// Waits until the replica the dead master on `dead_master_port` had
    /// reports `role:master`, every live node lists it as a master serving
    /// slots, and every live node's `CLUSTER INFO` says `cluster_state:ok`.
    /// Returns the time this took from the call; panics past `timeout` with
    /// every live node's `CLUSTER NODES`.
    pub fn wait_for_promotion(&self, dead_master_port: u16, timeout: Duration) -> Duration {
        let called = Instant::now();
        let replica = self
            .former_replica
            .get(&dead_master_port)
            .copied()
            .unwrap_or_else(|| self.replica_of(dead_master_port));
        let result = poll(timeout, Duration::from_millis(20), || {
            let info = info_replication(&self.dial, replica)?;
            let role = field(&info, "role").unwrap_or("(missing)");
            if role != "master" {
                return Err(format!("replica {replica} is still role:{role}"));
            }
            for port in self.live_ports() {
                let info = query_string(&self.dial, port, &["CLUSTER", "INFO"])?;
                let state = field(&info, "cluster_state").unwrap_or("(missing)");
                if state != "ok" {
                    return Err(format!("node {port}: cluster_state:{state}"));
                }
                let nodes = parse_nodes(&query_string(&self.dial, port, &["CLUSTER", "NODES"])?)?;
                let promoted = nodes
                    .iter()
                    .any(|n| n.port == replica && n.is_master() && !n.slots.is_empty());
                if !promoted {
                    return Err(format!(
                        "node {port} does not list {replica} as a master yet"
                    ));
                }
            }
            Ok(())
        });
        if let Err(error) = result {
            panic!(
                "replica {replica} of dead master {dead_master_port} not promoted within \
                 {timeout:?}: {error}\n{}",
                self.describe()
            );
        }
        called.elapsed()
    }

    fn node_id(&self, port: u16) -> String {
        let view = self.view();
        view.iter()
            .find(|n| n.port == port)
            .map(|n| n.id.clone())
            .unwrap_or_else(|| panic!("no node on port {port}: {view:?}"))
    }

    /// Opens `slot` for moving from master `from` to master `to` the way
    /// `redis-cli --cluster reshard` does: `IMPORTING` on the target first,
    /// then `MIGRATING` on the source. From here the source answers `ASK`
    /// for keys it no longer has, and `TRYAGAIN` for a command whose keys
    /// it has only some of.
    pub fn begin_slot_move(&self, slot: u16, from: u16, to: u16) {
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let slot = slot.to_string();
        for (port, state, id) in [(to, "IMPORTING", &from_id), (from, "MIGRATING", &to_id)] {
            query_string(&self.dial, port, &["CLUSTER", "SETSLOT", &slot, state, id])
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// Keys of `slot` stored on the node on `port`.
    pub fn keys_in_slot(&self, port: u16, slot: u16) -> Vec<String> {
        redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1000)
            .query(&mut self.conn(port))
            .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT {slot} on {port}: {e}"))
    }

    /// The one slot of a lock's `keys`, checked: the same for each key by
    /// computation and as the server reports it, and served by `master`.
    pub fn slot_of_lock(&self, keys: &[String], master: u16) -> u16 {
        let slot = slot_of(&keys[0]);
        for key in keys {
            assert_eq!(slot_of(key), slot, "{key}");
            assert_eq!(self.key_slot(key), slot, "{key}: the server's slot");
        }
        assert_eq!(self.master_for_slot(slot), master);
        slot
    }

    /// Asserts that `keys`, all of `slot`, are stored on `master` and that
    /// no other master has a key of that slot.
    pub fn assert_keys_only_on(&self, master: u16, slot: u16, keys: &[String]) {
        let mut expected = keys.to_vec();
        expected.sort_unstable();
        for port in self.masters() {
            let mut found = self.keys_in_slot(port, slot);
            found.sort_unstable();
            if port == master {
                assert_eq!(found, expected, "keys of slot {slot} on its master {port}");
            } else {
                assert_eq!(found, Vec::<String>::new(), "keys of slot {slot} on {port}");
            }
        }
    }

    /// A client of the cluster with short leases and timeouts, for tests
    /// that run a lock on every master.
    pub fn client(&self) -> fairlock::Client {
        fairlock::Client::builder(&self.url())
            .lease(Duration::from_secs(5))
            .waiter_timeout(Duration::from_secs(3))
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    }

    /// Moves one key of a slot being moved from `from` to `to` (`MIGRATE`).
    pub fn migrate_key(&self, from: u16, to: u16, key: &str) {
        let reply: String = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to)
            .arg(key)
            .arg(0)
            .arg(5000)
            .query(&mut self.conn(from))
            .unwrap_or_else(|e| panic!("MIGRATE {key} from {from} to {to}: {e}"));
        assert!(reply == "OK" || reply == "NOKEY", "MIGRATE {key}: {reply}");
    }

    /// Ends the move: `to` owns `slot` (`SETSLOT NODE` on the target, the
    /// source, then the other masters, as redis-cli does), and waits until
    /// every live node's `CLUSTER NODES` says so. Returns the wait.
    pub fn finish_slot_move(&self, slot: u16, from: u16, to: u16) -> Duration {
        let to_id = self.node_id(to);
        let slot_arg = slot.to_string();
        let others = self.masters().into_iter().filter(|&m| m != from && m != to);
        for port in [to, from].into_iter().chain(others) {
            query_string(
                &self.dial,
                port,
                &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id],
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let called = Instant::now();
        let agreed = poll(Duration::from_secs(10), Duration::from_millis(20), || {
            for port in self.live_ports() {
                let nodes = parse_nodes(&query_string(&self.dial, port, &["CLUSTER", "NODES"])?)?;
                if !nodes.iter().any(|n| n.port == to && n.serves(slot)) {
                    return Err(format!("node {port} does not see {to} serving slot {slot}"));
                }
            }
            Ok(())
        });
        if let Err(error) = agreed {
            panic!(
                "slot {slot} move to {to} not agreed: {error}\n{}",
                self.describe()
            );
        }
        called.elapsed()
    }

    /// `CLUSTER NODES` of every live node, for failure messages.
    pub fn describe(&self) -> String {
        self.live_ports()
            .into_iter()
            .map(|port| {
                let nodes =
                    query_string(&self.dial, port, &["CLUSTER", "NODES"]).unwrap_or_else(|e| e);
                format!("---- CLUSTER NODES on {port} ----\n{nodes}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // The nodes kill themselves (and print their logs if panicking).
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
