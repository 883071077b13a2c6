//! Throughput across shards: many locks with different names on a Redis
//! Cluster of three masters (each with a replica) against the same workload
//! on one redis-server, measured in one run. Both deployments are private,
//! started through the test support on loopback ports.
//!
//! `cargo bench --bench shards` takes about half a minute; `scripts/bench-report`
//! puts the table in BENCHMARKS.md. Results go to
//! `target/fairlock-bench/shards.json` (only under `cargo bench`).
//!
//! On each deployment, one after the other (only one runs at a time):
//!
//! - floor: median round trip of an EVALSHA of a no-op script (`return 1`,
//!   given one key so a cluster connection routes it to that key's master);
//!   a plain connection on the single server, the `redis` crate's sync
//!   `ClusterClient` on the cluster;
//! - cycle: median uncontended `lock()` + `unlock()` of one name, one thread;
//! - throughput: 64 names, 4 clients (default timings), each running one
//!   thread per name, so every name has 4 threads from 4 clients contending
//!   (256 threads, nearly all parked waiting their turn); empty critical
//!   sections. After a 1 s warm-up, acquisitions are counted over five 2 s
//!   windows; the median and the range of the per-window rates are kept.
//!   Inside each critical section a per-name flag is swapped on and off: a
//!   thread that finds it already on counts an overlap (two holders of one
//!   name), and the run fails unless there were none.
//! - alongside the windows: acquisitions per name; CPU time of every
//!   redis-server (INFO cpu) and of this process (/proc/self/stat); per
//!   master, the names it serves (from its keys), its share of the
//!   acquisitions and of the EVALSHA calls (INFO commandstats), and the
//!   subscriber connections on it (CLIENT LIST, shard subscriptions too:
//!   each client's subscriber sits on one node, or with sharded pub/sub
//!   one per master); on the cluster, PUBLISH messages the cluster bus
//!   delivered (CLUSTER INFO), since a classic PUBLISH reaches every node
//!   (0 with sharded pub/sub, Redis 7.0 and later).
//!
//! Under `cargo test --all-targets` (a smoke run) it runs briefly: 8 names x 2
//! threads, one 200 ms window, asserting acquisitions on both deployments
//! and no overlap; nothing is written.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{measuring, own_cpu, percentile, server_cpu, write_json};
use fairlock::Client;
use fairlock_test_support::cluster::RedisCluster;
use fairlock_test_support::RedisServer;

/// Sizes of the run: the full workload under `cargo bench`, a brief one in
/// the smoke run.
struct Bounds {
    names: usize,
    /// Clients, and so threads contending for each name.
    threads_per_name: usize,
    warm_up: Duration,
    window: Duration,
    windows: usize,
    /// Timed floor calls and lock cycles (after a tenth as many untimed).
    samples: usize,
}

impl Bounds {
    fn new() -> Bounds {
        if measuring() {
            Bounds {
                names: 64,
                threads_per_name: 4,
                warm_up: Duration::from_secs(1),
                window: Duration::from_secs(2),
                windows: 5,
                samples: 2000,
            }
        } else {
            Bounds {
                names: 8,
                threads_per_name: 2,
                warm_up: Duration::from_millis(100),
                window: Duration::from_millis(200),
                windows: 1,
                samples: 50,
            }
        }
    }
}

/// Median of `samples` timed calls of `call`, after a tenth as many untimed.
fn median_of(samples: usize, mut call: impl FnMut()) -> Duration {
    for _ in 0..samples / 10 {
        call();
    }
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed()
        })
        .collect();
    times.sort();
    percentile(&times, 0.5)
}

/// EVALSHA calls a redis-server has run, from `INFO commandstats`.
fn script_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("calls=")))
        .map_or(0, |n| n.parse().unwrap())
}

/// PUBLISH messages a cluster node has received over the cluster bus.
fn bus_publishes(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cluster_stats_messages_publish_received:"))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Which of the bench's lock names have keys on a server: the distinct
/// `bench:shards:<n>` suffixes of its keys (every key of a lock ends with
/// the lock's name).
fn names_on(conn: &mut redis::Connection) -> Vec<usize> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*bench:shards:[0-9]*")
        .query(conn)
        .unwrap();
    let mut names: Vec<usize> = keys
        .iter()
        .filter_map(|k| k.rsplit_once("bench:shards:")?.1.parse().ok())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Connections subscribed to a channel or pattern (`CLIENT LIST`).
fn subscribers(conn: &mut redis::Connection) -> usize {
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    clients
        .lines()
        .filter(|l| {
            l.split_whitespace().any(|f| {
                let n = ["sub=", "psub=", "ssub="]
                    .iter()
                    .find_map(|p| f.strip_prefix(p));
                n.is_some_and(|n| n != "0")
            })
        })
        .count()
}

/// One node of a deployment, as the throughput run watches it.
struct Node {
    port: u16,
    master: bool,
    conn: redis::Connection,
}

/// What each node had done at one moment.
#[derive(Default)]
struct Counters {
    cpu: Vec<f64>,
    evalsha: Vec<u64>,
    bus: Vec<u64>,
    subscribers: Vec<usize>,
}

fn read_counters(nodes: &mut [Node], cluster: bool) -> Counters {
    let mut c = Counters::default();
    for node in nodes {
        c.cpu.push(server_cpu(&mut node.conn, ""));
        c.evalsha.push(script_calls(&mut node.conn));
        c.bus.push(if cluster {
            bus_publishes(&mut node.conn)
        } else {
            0
        });
        c.subscribers.push(subscribers(&mut node.conn));
    }
    c
}

/// One master (or the single server) during the windows.
struct Master {
    port: u16,
    /// Its place among the nodes of the URL the clients were given (0: first).
    url_position: usize,
    /// How many of the names it serves.
    names: usize,
    /// Subscriber connections on it (each client has one, on one node).
    subscribers: usize,
    /// Its share of the acquisitions, and of the EVALSHA calls.
    acq_share: f64,
    evalsha_share: f64,
    /// Acquisitions per second of an average name it serves.
    acq_per_name_per_s: f64,
    /// Its CPU busy during the windows, in cores (CPU s per wall s).
    cores: f64,
}

/// Figures of the throughput run on one deployment.
struct Throughput {
    /// Acquisitions per second in each window.
    windows: Vec<f64>,
    overlaps: u64,
    /// Server CPU busy during the windows, in cores (CPU s per wall s): the
    /// masters (or the single server), and the replicas.
    masters_cores: f64,
    replicas_cores: f64,
    /// This process (clients and their 2 threads each, and the workers).
    bench_cores: f64,
    masters: Vec<Master>,
    /// Acquisitions per second of the slowest, the median and the fastest
    /// name over all windows.
    per_name: [f64; 3],
    /// PUBLISH messages the cluster bus delivered (received, summed over
    /// the nodes) per acquisition.
    bus_per_acquisition: f64,
}

/// `b.threads_per_name` clients on `url`, each with one thread per name,
/// lock and unlock as fast as they can; see the module docs.
fn throughput(url: &str, nodes: &mut [Node], cluster: bool, b: &Bounds) -> Throughput {
    let names: Vec<String> = (0..b.names).map(|i| format!("bench:shards:{i}")).collect();
    let clients: Vec<Client> = (0..b.threads_per_name)
        .map(|_| Client::builder(url).build().unwrap())
        .collect();
    let held: Vec<AtomicBool> = names.iter().map(|_| AtomicBool::new(false)).collect();
    let acquired: Vec<AtomicU64> = names.iter().map(|_| AtomicU64::new(0)).collect();
    let snapshot = || -> Vec<u64> { acquired.iter().map(|n| n.load(Ordering::Relaxed)).collect() };
    let total = || snapshot().iter().sum::<u64>();
    let (overlaps, stop) = (AtomicU64::new(0), AtomicBool::new(false));
    let mut windows = Vec::with_capacity(b.windows);
    let (before, after, per_name, wall, bench_cores) = std::thread::scope(|s| {
        for client in &clients {
            for ((name, held), acquired) in names.iter().zip(&held).zip(&acquired) {
                let mutex = client.fair_mutex(name);
                let (overlaps, stop) = (&overlaps, &stop);
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let guard = mutex.lock().unwrap();
                        if held.swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        acquired.fetch_add(1, Ordering::Relaxed);
                        held.store(false, Ordering::SeqCst);
                        guard.unlock().unwrap();
                    }
                });
            }
        }
        std::thread::sleep(b.warm_up);
        let before = read_counters(nodes, cluster);
        let per_name_before = snapshot();
        let own_before = own_cpu();
        let started = Instant::now();
        for _ in 0..b.windows {
            let (count, at) = (total(), Instant::now());
            std::thread::sleep(b.window);
            windows.push((total() - count) as f64 / at.elapsed().as_secs_f64());
        }
        let wall = started.elapsed().as_secs_f64();
        let bench_cores = (own_cpu() - own_before) / wall;
        let per_name: Vec<u64> = snapshot()
            .iter()
            .zip(&per_name_before)
            .map(|(a, b)| a - b)
            .collect();
        let after = read_counters(nodes, cluster);
        // Every thread finishes its turn and leaves; the waiters behind
        // it are still granted in order, so all of them get out.
        stop.store(true, Ordering::Relaxed);
        (before, after, per_name, wall, bench_cores)
    });
    drop(clients);

    let acquisitions = per_name.iter().sum::<u64>().max(1) as f64;
    let cores = |master: bool| -> f64 {
        nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.master == master)
            .fold(0.0, |sum, (i, _)| sum + after.cpu[i] - before.cpu[i])
            / wall
    };
    let (masters_cores, replicas_cores) = (cores(true), cores(false));
    let evalsha_total = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.master)
        .map(|(i, _)| after.evalsha[i] - before.evalsha[i])
        .sum::<u64>()
        .max(1) as f64;
    let mut masters = Vec::new();
    for (i, node) in nodes.iter_mut().enumerate() {
        if !node.master {
            continue;
        }
        let served = names_on(&mut node.conn);
        let done: u64 = served.iter().map(|&n| per_name[n]).sum();
        masters.push(Master {
            port: node.port,
            url_position: i,
            names: served.len(),
            subscribers: after.subscribers[i],
            acq_share: done as f64 / acquisitions,
            evalsha_share: (after.evalsha[i] - before.evalsha[i]) as f64 / evalsha_total,
            acq_per_name_per_s: done as f64 / served.len().max(1) as f64 / wall,
            cores: (after.cpu[i] - before.cpu[i]) / wall,
        });
    }
    let mut rates: Vec<f64> = per_name.iter().map(|&n| n as f64 / wall).collect();
    rates.sort_by(f64::total_cmp);
    let bus: u64 = (0..nodes.len()).map(|i| after.bus[i] - before.bus[i]).sum();
    Throughput {
        windows,
        overlaps: overlaps.load(Ordering::SeqCst),
        masters_cores,
        replicas_cores,
        bench_cores,
        masters,
        per_name: [rates[0], rates[rates.len() / 2], rates[rates.len() - 1]],
        bus_per_acquisition: bus as f64 / acquisitions,
    }
}

/// Everything measured on one deployment.
struct Deployment {
    floor: Duration,
    cycle: Duration,
    run: Throughput,
}

impl Deployment {
    fn median_rate(&self) -> f64 {
        let mut rates = self.run.windows.clone();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    }

    fn json(&self, replicas: usize) -> String {
        let r = &self.run;
        let min = r.windows.iter().copied().fold(f64::INFINITY, f64::min);
        let max = r.windows.iter().copied().fold(0.0, f64::max);
        let windows: Vec<String> = r.windows.iter().map(|w| format!("{w:.0}")).collect();
        let masters: Vec<String> = r
            .masters
            .iter()
            .map(|m| {
                format!(
                    "{{\"port\": {}, \"url_position\": {}, \"names\": {}, \"subscribers\": {}, \
                     \"acq_share\": {:.3}, \"evalsha_share\": {:.3}, \"acq_per_name_per_s\": {:.1}, \
                     \"cores\": {:.3}}}",
                    m.port,
                    m.url_position,
                    m.names,
                    m.subscribers,
                    m.acq_share,
                    m.evalsha_share,
                    m.acq_per_name_per_s,
                    m.cores
                )
            })
            .collect();
        format!(
            "{{\"masters\": {}, \"replicas\": {replicas}, \
             \"floor_us\": {:.1}, \"cycle_us\": {:.1}, \
             \"acq_per_s_median\": {:.0}, \"acq_per_s_min\": {min:.0}, \"acq_per_s_max\": {max:.0}, \
             \"windows\": [{}], \"overlaps\": {}, \
             \"per_name_acq_per_s\": {{\"min\": {:.1}, \"median\": {:.1}, \"max\": {:.1}}}, \
             \"server_cores_masters\": {:.2}, \"server_cores_replicas\": {:.2}, \"bench_process_cores\": {:.2}, \
             \"bus_publishes_per_acquisition\": {:.2}, \"per_master\": [{}]}}",
            r.masters.len(),
            self.floor.as_secs_f64() * 1e6,
            self.cycle.as_secs_f64() * 1e6,
            self.median_rate(),
            windows.join(", "),
            r.overlaps,
            r.per_name[0],
            r.per_name[1],
            r.per_name[2],
            r.masters_cores,
            r.replicas_cores,
            r.bench_cores,
            r.bus_per_acquisition,
            masters.join(", "),
        )
    }
}

/// Floor, cycle and throughput on one deployment; `noop` runs one floor call.
fn measure(
    label: &str,
    url: &str,
    mut noop: impl FnMut(),
    nodes: &mut [Node],
    cluster: bool,
    b: &Bounds,
) -> Deployment {
    let started = Instant::now();
    let floor = median_of(b.samples, &mut noop);
    let cycle = {
        // The mutex holds the client too: both go (with the client's
        // threads and connections) before the throughput run.
        let mutex = Client::builder(url)
            .build()
            .unwrap()
            .fair_mutex("bench:shards:uncontended");
        median_of(b.samples, || mutex.lock().unwrap().unlock().unwrap())
    };
    let run = throughput(url, nodes, cluster, b);
    let d = Deployment { floor, cycle, run };
    let r = &d.run;
    eprintln!(
        "shards: {label}: floor {:.1} µs, cycle {:.1} µs, {:.0} acquisitions/s (windows {:?}), \
         per name {:.0}/{:.0}/{:.0} (min/median/max), overlaps {}; cores: servers {:.2} + replicas \
         {:.2}, bench {:.2}; bus publishes per acquisition {:.2} ({:.1} s)",
        d.floor.as_secs_f64() * 1e6,
        d.cycle.as_secs_f64() * 1e6,
        d.median_rate(),
        r.windows.iter().map(|w| w.round()).collect::<Vec<_>>(),
        r.per_name[0],
        r.per_name[1],
        r.per_name[2],
        r.overlaps,
        r.masters_cores,
        r.replicas_cores,
        r.bench_cores,
        r.bus_per_acquisition,
        started.elapsed().as_secs_f64()
    );
    for m in &r.masters {
        eprintln!(
            "shards: {label}:   master {}: {} names, {} subscribers, {:.1}% of acquisitions \
             ({:.1}% of EVALSHA), {:.0}/s per name, {:.2} cores",
            m.port,
            m.names,
            m.subscribers,
            m.acq_share * 100.0,
            m.evalsha_share * 100.0,
            m.acq_per_name_per_s,
            m.cores
        );
    }
    d
}

fn main() {
    let started = Instant::now();
    let b = Bounds::new();
    let noop = redis::Script::new("return 1");

    let server = RedisServer::start();
    let single = {
        let mut conn = server.conn();
        let mut nodes = vec![Node {
            port: server.port(),
            master: true,
            conn: server.conn(),
        }];
        let noop = noop.key("bench:shards:floor");
        let floor = move || {
            let _: i64 = noop.invoke(&mut conn).unwrap();
        };
        measure("single", &server.url(), floor, &mut nodes, false, &b)
    };
    drop(server);

    let cluster = RedisCluster::start();
    let masters = cluster.masters();
    // In the order of `cluster.url()`, which names the nodes as `ports()` lists them.
    let mut nodes: Vec<Node> = cluster
        .ports()
        .into_iter()
        .map(|port| Node {
            port,
            master: masters.contains(&port),
            conn: cluster.conn(port),
        })
        .collect();
    let sharded = {
        let mut conn = redis::cluster::ClusterClient::new(cluster.seed_urls())
            .unwrap()
            .get_connection()
            .unwrap();
        let noop = noop.key("bench:shards:floor");
        let floor = move || {
            let _: i64 = noop.invoke(&mut conn).unwrap();
        };
        measure("cluster", &cluster.url(), floor, &mut nodes, true, &b)
    };
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    drop(nodes);
    drop(cluster);

    for (label, d) in [("single", &single), ("cluster", &sharded)] {
        assert_eq!(
            d.run.overlaps, 0,
            "{label}: two threads held one name at once"
        );
        assert!(
            d.run.windows.iter().all(|&w| w > 0.0),
            "{label}: no acquisitions in a window: {:?}",
            d.run.windows
        );
    }
    let ratio = sharded.median_rate() / single.median_rate();
    let total = started.elapsed();
    eprintln!(
        "shards: cluster/single {ratio:.2}; cluster nodes {ports:?}, masters {masters:?}; whole run {:.1} s",
        total.as_secs_f64()
    );
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    write_json(
        "shards",
        &format!(
            "{{\"names\": {}, \"threads_per_name\": {}, \"clients\": {}, \"threads\": {}, \
             \"warm_up_s\": {:.1}, \"window_s\": {:.1}, \"samples\": {}, \"cores\": {cores}, \
             \"single\": {}, \"cluster\": {}, \"ratio\": {ratio:.3}, \"run_s\": {:.1}}}",
            b.names,
            b.threads_per_name,
            b.threads_per_name,
            b.names * b.threads_per_name,
            b.warm_up.as_secs_f64(),
            b.window.as_secs_f64(),
            b.samples,
            single.json(0),
            sharded.json(ports.len() - masters.len()),
            total.as_secs_f64(),
        ),
    );
    if measuring() {
        eprintln!("shards: wrote target/fairlock-bench/shards.json");
    }
}
