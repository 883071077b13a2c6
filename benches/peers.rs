//! fairlock against the locks a user would pick instead, measured in one run
//! on one private redis-server with the same workloads:
//!
//! - `rlock` (sync API): `SET NX PX`, retried every 100 ms (its default
//!   `AcquireOptions`: TTL 10 s, automatic renewal, no acquisition timeout);
//! - `rslock` (Redlock, async): driven on a current-thread tokio runtime, one
//!   per thread, inside this bench only; `LockManager::new(vec![url])`,
//!   `lock(key, 10 s TTL)` and `unlock(&lock)`, with
//!   `set_retry(u32::MAX, 200 ms)`: it retries for ever (so acts as a
//!   blocking lock), sleeping a random 0–200 ms (its default delay) between
//!   tries;
//! - python-redis-lock and redis-py's `Lock`, through `benches/peers/peers.py`
//!   run with target/peers-venv's python (`scripts/peers-setup` makes it; the
//!   bench runs that script itself when the virtualenv is missing).
//!
//! fairlock runs twice: with a client per thread like the others, and as
//! "fairlock (one client)", every thread's handles from one shared client
//! (the library's intended use within a process). Two rows after the
//! libraries are no library: "fair floor (BLPOP)" and "fair floor
//! (pub/sub)" (`benches/fair_floor`) are the least a fair lock through one
//! Redis does per handoff, with a waiter told of its grant by its own
//! `BLPOP` (one thread woken) or, as fairlock's are, by pub/sub through a
//! subscriber thread (two): what any fair lock pays on this machine, beside
//! the unfair locks that let the releasing thread take the lock again.
//!
//! `scripts/peers-setup && cargo bench --features peers --bench peers` takes a
//! few minutes; `scripts/bench-report` puts the table in BENCHMARKS.md. The
//! results go to `target/fairlock-bench/peers.json` (only under
//! `cargo bench`): the run's round-trip floor (`floor_ns`, the median of
//! no-op EVALSHAs over the same connection path, taken in three bursts, at
//! the start, between the Rust libraries' other workloads and their
//! contended rounds, and before the Python peers, each burst's median in
//! `floor_bursts_ns`: a loopback round trip on a VM moves several-fold with
//! how busy its cores were just before) and `libraries`, one
//! object per library; a figure a library could not produce is null, and
//! its `note` says why.
//!
//! `FAIRLOCK_BENCH_LINK_DELAY_US=500` puts every library's connections (the
//! Python peers' too, through the URL they are given) and the floor on an
//! emulated link of ~1 ms round trip (see `common::Link`); the results then
//! go to `target/fairlock-bench/link/peers.json`.
//!
//! The workloads, identical for every library (threads, each with its own
//! client and so its own connection, but for fairlock (one client); empty
//! critical sections):
//!
//! - cycle: lock + release of a free lock on one thread; median of single
//!   cycles (at most 20 000 cycles or 1.5 s, after 100 warm-up cycles).
//! - handoff: two workers on two clients take strict turns. A worker calls
//!   lock only once the other holds the lock (so nobody barges); the holder
//!   releases once the other has entered its lock call, after 3 ms (for that
//!   call to reach its wait) plus a uniform random pause as long as the
//!   library's polling period (100 ms for rlock and redis-py; none for the
//!   libraries woken by a push, nor for rslock whose retry delay is already
//!   random), so the release falls at a random point of the waiter's polling
//!   cycle. A sample is the time from just before the holder's release call
//!   to the other worker's lock call returning; p50 and p99 over at most 500
//!   handoffs or 4 s.
//! - contended: 2, 8 and 32 threads lock and release one lock for a 2 s
//!   window; acquisitions completed inside the window, per second. The
//!   busiest thread's share of them is kept too (`contended_N_max_share`).
//!   The Rust libraries take their windows in 5 rounds, each round every
//!   library in turn, so that a change of the machine's speed during the
//!   run weighs on all of them alike: each figure is the median of its
//!   rounds, and `contended_N_rounds` lists them in round order (a
//!   library's N-th is beside every other's N-th). Beside each rate, the
//!   CPU time redis-server's main thread spent per acquisition
//!   (`contended_N_server_us`) and its share of the window
//!   (`contended_N_server_busy`, INFO cpu), and the same of this
//!   process, where the library's client threads run
//!   (`contended_N_clients_us`, `contended_N_clients_busy`, in cores): a
//!   rate bound by the server's work shows a server busy most of the
//!   window.
//! - fifo (queued waiters): a holder holds; 8 waiters start one after
//!   another, each once the previous one is waiting: seen in the library's
//!   queue where it has one (fairlock's queue length; python-redis-lock's
//!   waiters blocked in BLPOP), otherwise after a fixed 75 ms. The holder
//!   releases and the grant order is compared with the arrival order;
//!   5 rounds. `inversions` counts adjacent grants out of arrival order (as
//!   `benches/lock.rs` does); `inverted_pairs` counts every pair out of order.
//!
//! With `--features peers` the redis crate is built with the async features
//! rslock needs (features unify); fairlock's code paths stay the sync ones.

mod common;
mod fair_floor;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{
    connect, link_delay_us, measuring, own_cpu, percentile, results_dir, server_cpu, write_json,
    Link,
};
use fairlock_test_support::{wait_until, RedisServer};
use serde_json::{json, Map, Value};

/// Every bound of every workload, in one place.
struct Bounds {
    cycle_max: usize,
    cycle_time: Duration,
    handoff_max: usize,
    handoff_time: Duration,
    contended_window: Duration,
    contended_rounds: usize,
    threads: [usize; 3],
    fifo_waiters: usize,
    fifo_rounds: usize,
}

impl Bounds {
    fn new() -> Bounds {
        let full = measuring();
        Bounds {
            cycle_max: if full { 20_000 } else { 50 },
            cycle_time: Duration::from_millis(if full { 1500 } else { 200 }),
            handoff_max: if full { 500 } else { 10 },
            handoff_time: Duration::from_millis(if full { 4000 } else { 1000 }),
            contended_window: Duration::from_millis(if full { 2000 } else { 200 }),
            contended_rounds: if full { 5 } else { 1 },
            threads: [2, 8, 32],
            fifo_waiters: if full { 8 } else { 4 },
            fifo_rounds: if full { 5 } else { 1 },
        }
    }
}

/// Before releasing in the handoff workload, after the other worker entered
/// its lock call (see the module comment).
const SETTLE: Duration = Duration::from_millis(3);
/// Between two waiters' starts where a library's queue cannot be seen.
const ARRIVAL_GAP: Duration = Duration::from_millis(75);
/// rslock's lock TTL (it renews nothing; every critical section is empty).
const RSLOCK_TTL: Duration = Duration::from_secs(10);

/// One thread's handle on one lock, on its own client.
trait Locker {
    /// Locks, runs `critical`, releases; panics on any error.
    fn locked(&mut self, critical: &mut dyn FnMut());
}

/// A Rust library under test.
trait Peer: Sync {
    fn name(&self) -> &'static str;
    /// How it is configured here.
    fn config(&self) -> String;
    /// A locker for lock `key` on a new client of its own, connected (one
    /// cycle on a private key has run).
    fn locker(&self, key: &str) -> Box<dyn Locker>;
    /// Its polling period, when it polls at a fixed period.
    fn poll_period(&self) -> Duration {
        Duration::ZERO
    }
    /// How many wait for `key`, if the library shows its queue.
    fn queued(&self, _key: &str) -> Option<usize> {
        None
    }
}

fn warm_key(key: &str) -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("{key}:warm:{}", SEQ.fetch_add(1, Ordering::Relaxed))
}

struct Fairlock {
    url: String,
    watcher: fairlock::Client,
}

struct FairlockLocker {
    _client: fairlock::Client,
    mutex: fairlock::FairMutex,
}

impl Locker for FairlockLocker {
    fn locked(&mut self, critical: &mut dyn FnMut()) {
        let guard = self.mutex.lock().expect("fairlock: lock");
        critical();
        guard.unlock().expect("fairlock: unlock");
    }
}

/// fairlock with every thread's handles from one shared client.
struct FairlockOneClient {
    client: fairlock::Client,
}

impl Peer for FairlockOneClient {
    fn name(&self) -> &'static str {
        "fairlock (one client)"
    }
    fn config(&self) -> String {
        "as fairlock, but every thread's fair_mutex(name) comes from one shared Client: a waiter of the same \
         client is woken from the release reply"
            .into()
    }
    fn locker(&self, key: &str) -> Box<dyn Locker> {
        self.client
            .fair_mutex(&warm_key(key))
            .lock()
            .expect("fairlock: warm-up")
            .unlock()
            .unwrap();
        Box::new(FairlockLocker {
            _client: self.client.clone(),
            mutex: self.client.fair_mutex(key),
        })
    }
    fn queued(&self, key: &str) -> Option<usize> {
        Some(
            self.client
                .fair_mutex(key)
                .queue_len()
                .expect("fairlock: queue_len"),
        )
    }
}

impl Peer for Fairlock {
    fn name(&self) -> &'static str {
        "fairlock"
    }
    fn config(&self) -> String {
        "Client::builder(url).build() (defaults: lease 30 s, waiter timeout 10 s), fair_mutex(name).lock(), \
         guard.unlock(): queued, woken by a push message"
            .into()
    }
    fn locker(&self, key: &str) -> Box<dyn Locker> {
        let client = fairlock::Client::builder(&self.url)
            .build()
            .expect("fairlock: client");
        client
            .fair_mutex(&warm_key(key))
            .lock()
            .expect("fairlock: warm-up")
            .unlock()
            .unwrap();
        let mutex = client.fair_mutex(key);
        Box::new(FairlockLocker {
            _client: client,
            mutex,
        })
    }
    fn queued(&self, key: &str) -> Option<usize> {
        Some(
            self.watcher
                .fair_mutex(key)
                .queue_len()
                .expect("fairlock: queue_len"),
        )
    }
}

struct Rlock {
    url: String,
}

struct RlockLocker {
    rlock: rlock::sync_lock::RLock,
    key: String,
}

impl Locker for RlockLocker {
    fn locked(&mut self, critical: &mut dyn FnMut()) {
        let mut guard = self
            .rlock
            .acquire_mutex(&self.key)
            .expect("rlock: acquire_mutex");
        critical();
        guard.release().expect("rlock: release");
    }
}

impl Peer for Rlock {
    fn name(&self) -> &'static str {
        "rlock"
    }
    fn config(&self) -> String {
        "sync_lock::RLock::new(url), acquire_mutex(key) with the default AcquireOptions (TTL 10 s, automatic \
         renewal on a thread per guard, retry every 100 ms, no timeout), guard.release(): polls SET NX"
            .into()
    }
    fn locker(&self, key: &str) -> Box<dyn Locker> {
        let rlock = rlock::sync_lock::RLock::new(self.url.as_str()).expect("rlock: new");
        let mut locker = RlockLocker {
            rlock,
            key: warm_key(key),
        };
        locker.locked(&mut || ());
        locker.key = key.to_owned();
        Box::new(locker)
    }
    fn poll_period(&self) -> Duration {
        Duration::from_millis(100)
    }
}

struct Rslock {
    url: String,
}

struct RslockLocker {
    runtime: tokio::runtime::Runtime,
    manager: rslock::LockManager,
    key: String,
}

impl Locker for RslockLocker {
    fn locked(&mut self, critical: &mut dyn FnMut()) {
        let lock = self
            .runtime
            .block_on(self.manager.lock(self.key.as_str(), RSLOCK_TTL))
            .expect("rslock: lock");
        critical();
        self.runtime.block_on(self.manager.unlock(&lock));
    }
}

impl Peer for Rslock {
    fn name(&self) -> &'static str {
        "rslock"
    }
    fn config(&self) -> String {
        "LockManager::new(vec![url]) with set_retry(u32::MAX, 200 ms) (retries for ever, a random 0-200 ms \
         apart: the default delay), lock(key, 10 s TTL), unlock(&lock); on a current-thread tokio runtime per \
         thread: polls SET NX"
            .into()
    }
    fn locker(&self, key: &str) -> Box<dyn Locker> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio: runtime");
        let mut manager = rslock::LockManager::new(vec![self.url.clone()]);
        manager.set_retry(u32::MAX, Duration::from_millis(200));
        let mut locker = RslockLocker {
            runtime,
            manager,
            key: warm_key(key),
        };
        locker.locked(&mut || ());
        locker.key = key.to_owned();
        Box::new(locker)
    }
}

fn ns(d: Duration) -> Value {
    json!(d.as_nanos() as u64)
}

/// A small deterministic generator for the handoff jitter.
struct XorShift(u64);

impl XorShift {
    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn cycle(peer: &dyn Peer, b: &Bounds) -> Map<String, Value> {
    let mut me = peer.locker("peers:cycle");
    for _ in 0..100 {
        me.locked(&mut || ());
    }
    let mut samples = Vec::with_capacity(b.cycle_max);
    let deadline = Instant::now() + b.cycle_time;
    while samples.len() < b.cycle_max && Instant::now() < deadline {
        let start = Instant::now();
        me.locked(&mut || ());
        samples.push(start.elapsed());
    }
    samples.sort();
    let mut out = Map::new();
    out.insert("cycle_ns".into(), ns(percentile(&samples, 0.5)));
    out.insert("cycle_samples".into(), json!(samples.len()));
    out
}

#[derive(Default)]
struct Turns {
    /// The worker that last acquired.
    holder: Option<usize>,
    /// The worker that has entered its lock call and not yet returned.
    entering: Option<usize>,
    released_at: Option<Instant>,
    samples: Vec<Duration>,
    done: bool,
}

struct StopOnPanic<'a>(&'a Mutex<Turns>, &'a Condvar);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(mut st) = self.0.lock() {
                st.done = true;
            }
            self.1.notify_all();
        }
    }
}

fn handoff(peer: &dyn Peer, b: &Bounds) -> Map<String, Value> {
    let state = Mutex::new(Turns::default());
    let cond = Condvar::new();
    let started = Instant::now();
    std::thread::scope(|s| {
        for i in 0..2usize {
            let (state, cond) = (&state, &cond);
            s.spawn(move || {
                // If this worker panics, the other must not wait for it for ever.
                let _stop_on_panic = StopOnPanic(state, cond);
                let mut me = peer.locker("peers:handoff");
                let other = 1 - i;
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
                loop {
                    {
                        // Worker 0 starts; after that, each waits for the other to hold.
                        let mut st = cond
                            .wait_while(state.lock().unwrap(), |st| {
                                !(st.done
                                    || (i == 0 && st.holder.is_none())
                                    || st.holder == Some(other))
                            })
                            .unwrap();
                        if st.done {
                            return;
                        }
                        st.entering = Some(i);
                        cond.notify_all();
                    }
                    me.locked(&mut || {
                        let now = Instant::now();
                        let pause = {
                            let mut st = state.lock().unwrap();
                            if let Some(at) = st.released_at.take() {
                                st.samples.push(now - at);
                            }
                            st.holder = Some(i);
                            st.entering = None;
                            if st.samples.len() >= b.handoff_max
                                || started.elapsed() > b.handoff_time
                            {
                                st.done = true;
                            }
                            cond.notify_all();
                            if st.done {
                                return;
                            }
                            drop(
                                cond.wait_while(st, |st| st.entering != Some(other))
                                    .unwrap(),
                            );
                            SETTLE + peer.poll_period().mul_f64(rng.next_f64())
                        };
                        std::thread::sleep(pause);
                        state.lock().unwrap().released_at = Some(Instant::now());
                    });
                    if state.lock().unwrap().done {
                        return;
                    }
                }
            });
        }
    });
    let mut samples = state.into_inner().unwrap().samples;
    samples.sort();
    let mut out = Map::new();
    out.insert("handoff_p50_ns".into(), ns(percentile(&samples, 0.5)));
    out.insert("handoff_p99_ns".into(), ns(percentile(&samples, 0.99)));
    out.insert("handoff_samples".into(), json!(samples.len()));
    out
}

fn contended(peer: &dyn Peer, b: &Bounds, url: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut conn = connect(url, "contended: a connection to read INFO cpu");
    for threads in b.threads {
        let key = format!("peers:contended:{threads}");
        let stop = AtomicBool::new(false);
        let ready = Barrier::new(threads + 1);
        let (counts, window, server, clients) = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let (key, stop, ready) = (&key, &stop, &ready);
                    s.spawn(move || {
                        let mut me = peer.locker(key);
                        let mut count = 0u64;
                        ready.wait();
                        while !stop.load(Ordering::Relaxed) {
                            me.locked(&mut || {
                                if !stop.load(Ordering::Relaxed) {
                                    count += 1;
                                }
                            });
                        }
                        count
                    })
                })
                .collect();
            ready.wait();
            let main_thread = |conn: &mut redis::Connection| server_cpu(conn, "_main_thread");
            let (start, server, clients) = (Instant::now(), main_thread(&mut conn), own_cpu());
            std::thread::sleep(b.contended_window);
            stop.store(true, Ordering::Relaxed);
            let window = start.elapsed();
            let (server, clients) = (main_thread(&mut conn) - server, own_cpu() - clients);
            let counts: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
            (counts, window, server, clients)
        });
        let total: u64 = counts.iter().sum();
        let busiest = counts.iter().copied().max().unwrap_or(0);
        out.insert(
            format!("contended_{threads}_per_s"),
            json!(total as f64 / window.as_secs_f64()),
        );
        // The CPU the server and the clients spent per acquisition, and how
        // busy each was: whether a core or the chain between the threads
        // bounds the rate.
        for (who, cpu) in [("server", server), ("clients", clients)] {
            if total > 0 {
                out.insert(
                    format!("contended_{threads}_{who}_us"),
                    json!(cpu * 1e6 / total as f64),
                );
            }
            out.insert(
                format!("contended_{threads}_{who}_busy"),
                json!(cpu / window.as_secs_f64()),
            );
        }
        out.insert(
            format!("contended_{threads}_max_share"),
            json!(if total == 0 {
                0.0
            } else {
                busiest as f64 / total as f64
            }),
        );
    }
    out
}

fn fifo(peer: &dyn Peer, b: &Bounds) -> Map<String, Value> {
    let key = "peers:fifo";
    let n = b.fifo_waiters;
    let mut holder = peer.locker(key);
    let (mut inversions, mut inverted_pairs, mut grants) = (0, 0, 0);
    for _ in 0..b.fifo_rounds {
        let order = Mutex::new(Vec::with_capacity(n));
        let ready = Barrier::new(n + 1);
        let go: Vec<(Mutex<bool>, Condvar)> = (0..n).map(|_| Default::default()).collect();
        std::thread::scope(|s| {
            for (i, go) in go.iter().enumerate() {
                let (order, ready) = (&order, &ready);
                s.spawn(move || {
                    let mut me = peer.locker(key);
                    ready.wait();
                    drop(go.1.wait_while(go.0.lock().unwrap(), |go| !*go).unwrap());
                    me.locked(&mut || order.lock().unwrap().push(i));
                });
            }
            ready.wait();
            holder.locked(&mut || {
                for (i, go) in go.iter().enumerate() {
                    *go.0.lock().unwrap() = true;
                    go.1.notify_one();
                    if peer.queued(key).is_some() {
                        assert!(
                            wait_until(Duration::from_secs(10), || peer.queued(key) == Some(i + 1)),
                            "{}: waiter {i} not queued within 10 s",
                            peer.name()
                        );
                    } else {
                        std::thread::sleep(ARRIVAL_GAP);
                    }
                }
            });
        });
        let order = order.into_inner().unwrap();
        assert_eq!(order.len(), n);
        inversions += order.windows(2).filter(|w| w[1] < w[0]).count();
        inverted_pairs += (0..n)
            .flat_map(|x| (x + 1..n).map(move |y| (x, y)))
            .filter(|&(x, y)| order[y] < order[x])
            .count();
        grants += n;
    }
    let mut out = Map::new();
    out.insert("inversions".into(), json!(inversions));
    out.insert("inverted_pairs".into(), json!(inverted_pairs));
    out.insert("grants".into(), json!(grants));
    out.insert("fifo_rounds".into(), json!(b.fifo_rounds));
    out.insert("fifo_waiters".into(), json!(n));
    out
}

/// The figures every row has (null until measured).
const FIGURES: [&str; 9] = [
    "cycle_ns",
    "handoff_p50_ns",
    "handoff_p99_ns",
    "contended_2_per_s",
    "contended_8_per_s",
    "contended_32_per_s",
    "inversions",
    "grants",
    "inverted_pairs",
];

fn empty_row(name: &str, kind: &str) -> Map<String, Value> {
    let mut row = Map::new();
    row.insert("name".into(), json!(name));
    row.insert("kind".into(), json!(kind));
    for figure in FIGURES {
        row.insert(figure.into(), Value::Null);
    }
    row.insert("note".into(), Value::Null);
    row
}

fn add_note(row: &mut Map<String, Value>, note: &str) {
    let text = match row.get("note") {
        Some(Value::String(old)) => format!("{old}; {note}"),
        _ => note.to_owned(),
    };
    row.insert("note".into(), json!(text));
}

/// The version Cargo.lock pins for `krate`.
fn locked_version(krate: &str) -> Value {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
        .unwrap_or_default();
    let needle = format!("name = \"{krate}\"\nversion = \"");
    lock.find(&needle)
        .and_then(|at| lock[at + needle.len()..].split('"').next())
        .map_or(Value::Null, |v| json!(v))
}

fn rust_row(peer: &dyn Peer, kind: &str, b: &Bounds) -> Map<String, Value> {
    let mut row = empty_row(peer.name(), kind);
    row.insert("config".into(), json!(peer.config()));
    // "fairlock (one client)" is the fairlock crate too.
    let krate = peer.name().split(' ').next().unwrap_or_default();
    row.insert("version".into(), locked_version(krate));
    type Workload = fn(&dyn Peer, &Bounds) -> Map<String, Value>;
    let workloads: [(&str, Workload); 3] = [("cycle", cycle), ("handoff", handoff), ("fifo", fifo)];
    for (what, workload) in workloads {
        if let Some(figures) = run_workload(peer, what, &mut row, || workload(peer, b)) {
            row.extend(figures);
        }
    }
    row
}

/// Runs one workload of `peer`: its figures, or None with a note in `row`
/// when it panicked (a library that panics loses that workload's figures,
/// not the run).
fn run_workload(
    peer: &dyn Peer,
    what: &str,
    row: &mut Map<String, Value>,
    workload: impl FnOnce() -> Map<String, Value>,
) -> Option<Map<String, Value>> {
    let start = Instant::now();
    let figures = std::panic::catch_unwind(std::panic::AssertUnwindSafe(workload));
    eprintln!(
        "peers: {:<21} {what:<9} {:>6.1} s",
        peer.name(),
        start.elapsed().as_secs_f64()
    );
    figures
        .map_err(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into());
            add_note(row, &format!("{what} failed: {message}"));
        })
        .ok()
}

/// The contended workload of every Rust library, in `b.contended_rounds`
/// rounds of each library in turn (see the module comment); into each
/// row, each figure's median over the rounds and the rounds' rates.
fn contended_rounds(peers: &[&dyn Peer], rows: &mut [Map<String, Value>], b: &Bounds, url: &str) {
    let mut rounds: Vec<Vec<Map<String, Value>>> = vec![Vec::new(); peers.len()];
    for round in 0..b.contended_rounds {
        for ((peer, row), kept) in peers.iter().zip(rows.iter_mut()).zip(&mut rounds) {
            let what = format!("contended {}", round + 1);
            if let Some(figures) = run_workload(*peer, &what, row, || contended(*peer, b, url)) {
                kept.push(figures);
            }
        }
    }
    for (row, kept) in rows.iter_mut().zip(rounds) {
        let figures: std::collections::BTreeSet<String> =
            kept.iter().flat_map(|r| r.keys().cloned()).collect();
        for figure in figures {
            let mut values: Vec<f64> = kept
                .iter()
                .filter_map(|r| r.get(&figure)?.as_f64())
                .collect();
            if let Some(threads) = figure.strip_suffix("_per_s") {
                row.insert(format!("{threads}_rounds"), json!(values));
            }
            values.sort_by(f64::total_cmp);
            row.insert(figure, json!(values[values.len() / 2]));
        }
    }
}

const PY_NAMES: [&str; 2] = ["python-redis-lock", "redis-py Lock"];

/// The virtualenv's python, after running scripts/peers-setup if it is
/// missing (only under `cargo bench`); Err(why) when there is none.
fn peers_python() -> Result<std::path::PathBuf, String> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let python = root.join("target/peers-venv/bin/python");
    let usable = |p: &std::path::Path| {
        Command::new(p)
            .args(["-c", "import redis, redis_lock"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if usable(&python) {
        return Ok(python);
    }
    if !measuring() {
        return Err("target/peers-venv is missing (smoke run: scripts/peers-setup not run)".into());
    }
    eprintln!("peers: target/peers-venv is missing or incomplete: running scripts/peers-setup");
    let setup = Command::new(root.join("scripts/peers-setup")).status();
    match setup {
        Ok(status) if status.success() && usable(&python) => Ok(python),
        Ok(status) => Err(format!("scripts/peers-setup failed ({status})")),
        Err(err) => Err(format!("scripts/peers-setup could not run: {err}")),
    }
}

/// Runs one workload of benches/peers/peers.py, killed after `limit`.
fn run_python(
    python: &std::path::Path,
    url: &str,
    workload: &str,
    limit: Duration,
) -> Result<Value, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/peers.py");
    let mut command = Command::new(python);
    command.arg(script).arg(url).arg(workload);
    if !measuring() {
        command.arg("--quick");
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{workload}: cannot start peers.py: {e}"))?;
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{workload}: peers.py did not finish within {limit:?}"
                ));
            }
        }
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{workload}: peers.py failed ({}): {}",
            output.status,
            stderr.trim()
        ));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("{workload}: peers.py printed no JSON: {e}"))
}

fn python_rows(url: &str) -> Vec<Map<String, Value>> {
    let mut rows: Vec<_> = PY_NAMES
        .iter()
        .map(|name| empty_row(name, "Python, sync (threads)"))
        .collect();
    let python = match peers_python() {
        Ok(python) => python,
        Err(why) => {
            for row in &mut rows {
                add_note(row, &format!("not measured: {why}"));
            }
            return rows;
        }
    };
    for workload in ["cycle", "handoff", "contended", "fifo"] {
        let start = Instant::now();
        match run_python(&python, url, workload, Duration::from_secs(180)) {
            Ok(result) => {
                for row in &mut rows {
                    let name = row["name"].as_str().unwrap().to_owned();
                    match result.get(&name).and_then(Value::as_object) {
                        Some(figures) if figures.contains_key("error") => {
                            add_note(row, figures["error"].as_str().unwrap_or("failed"));
                        }
                        Some(figures) => row.extend(figures.clone()),
                        None => add_note(row, &format!("{workload}: no result from peers.py")),
                    }
                }
            }
            Err(why) => {
                for row in &mut rows {
                    add_note(row, &why);
                }
            }
        }
        eprintln!(
            "peers: {:<21} {workload:<9} {:>6.1} s",
            "python peers",
            start.elapsed().as_secs_f64()
        );
    }
    rows
}

/// The round-trip floor over `url`: the median of single no-op EVALSHAs
/// (after 100 warm-up calls), bounded like the cycle workload; returns it
/// and the sample count.
/// One burst of the round-trip floor: no-op EVALSHAs, one at a time, each
/// timed.
fn floor(url: &str, b: &Bounds) -> Vec<Duration> {
    let mut conn = connect(url, "floor: a connection");
    let noop = redis::Script::new("return 1");
    let mut call = || noop.invoke::<i64>(&mut conn).expect("floor: no-op");
    for _ in 0..100 {
        call();
    }
    let mut samples = Vec::with_capacity(b.cycle_max);
    let deadline = Instant::now() + b.cycle_time;
    while samples.len() < b.cycle_max && Instant::now() < deadline {
        let start = Instant::now();
        call();
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

fn main() {
    let started = Instant::now();
    let b = Bounds::new();
    let server = RedisServer::start();
    let link = Link::to(&server);
    let url = link.url().to_owned();
    let mut bursts = vec![floor(&url, &b)];
    let fairlock = Fairlock {
        url: url.clone(),
        watcher: fairlock::Client::builder(&url).build().unwrap(),
    };
    let one_client = FairlockOneClient {
        client: fairlock::Client::builder(&url).build().unwrap(),
    };
    let (rlock, rslock) = (Rlock { url: url.clone() }, Rslock { url: url.clone() });
    let by_blpop = fair_floor::FairFloor::new(&url, fair_floor::Told::Blpop);
    let by_pubsub = fair_floor::FairFloor::new(&url, fair_floor::Told::PubSub);
    let (sync, floor_kind) = ("Rust, sync", "floor of a fair lock, not a library");
    let peers: [(&dyn Peer, &str); 6] = [
        (&fairlock, sync),
        (&one_client, sync),
        (&rlock, sync),
        (&rslock, "Rust, async (current-thread tokio)"),
        (&by_blpop, floor_kind),
        (&by_pubsub, floor_kind),
    ];
    let mut rows: Vec<_> = peers
        .iter()
        .map(|&(peer, kind)| rust_row(peer, kind, &b))
        .collect();
    bursts.push(floor(&url, &b));
    contended_rounds(&peers.map(|(peer, _)| peer), &mut rows, &b, &url);
    drop((fairlock, one_client));
    bursts.push(floor(&url, &b));
    rows.extend(python_rows(&url));
    let burst_medians: Vec<u64> = bursts
        .iter()
        .map(|burst| percentile(burst, 0.5).as_nanos() as u64)
        .collect();
    let mut samples = bursts.concat();
    samples.sort();
    let (floor, floor_samples) = (percentile(&samples, 0.5), samples.len());
    let total = started.elapsed();
    eprintln!("peers: whole run {:.1} s", total.as_secs_f64());
    eprintln!(
        "peers: floor {floor:?} (median of {floor_samples}; bursts' medians {burst_medians:?} ns)"
    );
    for row in &rows {
        eprintln!("{}", Value::Object(row.clone()));
    }
    if measuring() {
        let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
        let results = json!({
            "link_delay_us": link_delay_us(),
            "floor_ns": floor.as_nanos() as u64,
            "floor_samples": floor_samples,
            "floor_bursts_ns": burst_medians,
            "libraries": rows,
        });
        write_json("peers", &serde_json::to_string_pretty(&results).unwrap());
        eprintln!(
            "peers: wrote {}",
            results_dir().join("peers.json").display()
        );
    }
}
