//! The soak: several worker processes × threads lock a few names at random
//! (holds of 0–30 ms, `lock`, short `try_lock_for`s, `lock_with`s of a wait
//! cancelled from another thread) for `FAIRLOCK_SOAK_SECONDS` (default 60),
//! while the test restarts Redis (its data lost), flushes its scripts,
//! kills its subscriber connections, partitions one worker at a time through
//! its own relay (stalls shorter and longer than the lease, cuts), stops one
//! (SIGSTOP, for longer than the lease) and SIGKILLs workers, starting a
//! replacement for each. `scripts/soak
//! SECONDS` runs it alone and shows its summary; the seed is printed and
//! `FAIRLOCK_SOAK_SEED` repeats a chaos schedule.
//!
//! A protected resource in this process (a loopback line server) takes
//! every write a holder makes after checking `is_lease_lost()`: it rejects a
//! fencing token lower than the highest it has seen for the name, and
//! records for each hold (name, token, worker, thread) the interval it was
//! believed held: from its acquire call's return to the last check that
//! allowed a write (a worker checks, does some work, then writes).
//! All times are CLOCK_MONOTONIC, one clock for every process here.
//!
//! What must hold, and is asserted:
//! - no two holds of one name overlap, unless a Redis restart (which loses
//!   every lock) began between the first one's acquire call and the second
//!   one's acquisition: those are counted apart and their late writes are
//!   what fencing rejects;
//! - tokens of one name increase with acquisition order, across restarts:
//!   a hold acquired after another one's call returned has a larger token;
//! - no FIFO inversion among live waiters, by their arrival at Redis:
//!   waiter A's first request had been answered that Redis queued it (the
//!   worker notes when, from the library's trace line) before waiter B's
//!   call started, A was still waiting then, both got the lock, and B's
//!   token is lower (B was granted first). B's call reached Redis after it
//!   started, so after A's: no time on the way to Redis (a pooled
//!   connection, the relay, a descheduled thread) can make a pair count
//!   that did not arrive in that order. Pairs are eligible only if from 1 s
//!   before A's call to the end of both calls there was no restart, script
//!   flush or subscriber kill, and neither worker was partitioned, stopped
//!   or killed, nor starved (a worker says when it was not scheduled for
//!   over 250 ms, an overloaded machine: its heartbeats may then come too
//!   late for its waiters to stay queued, which the liveness rule allows):
//!   those take a queue apart, and it re-forms by the next poll.
//!   The number of eligible pairs is reported so that the 0 means
//!   something, and so is the number of pairs left out because B's call
//!   began after A's but before A was known queued (their order at Redis
//!   is not known);
//! - every worker either exited cleanly when told to stop or was SIGKILLed
//!   by the soak; a long-lived worker's thread count and the server's
//!   connections at the end are bounded by those at the start.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fairlock_test_support::roles::soak::{
    mono_ns, LEASE, MAX_LIFE_MS, NAMES, RESOURCE, SEED, THREADS, URL, WAITER_TIMEOUT, WORKER,
};
use fairlock_test_support::roles::Rng;
use fairlock_test_support::*;

/// The child process binary (tests/support/child/).
const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");
/// The soak's length in seconds (default [`DEFAULT_SECONDS`]).
const SECONDS_VAR: &str = "FAIRLOCK_SOAK_SECONDS";
/// Repeats a chaos schedule (default: from the clock, printed).
const SEED_VAR: &str = "FAIRLOCK_SOAK_SEED";
const DEFAULT_SECONDS: u64 = 60;
const MIN_SECONDS: u64 = 10;

const WORKERS: usize = 4;
const THREADS_PER_WORKER: usize = 3;
const LOCK_NAMES: [&str; 3] = ["soak:a", "soak:b", "soak:c"];
/// The worker that is never killed: its threads and memory are watched.
const LONG_LIVED: usize = 0;

/// Before the chaos starts and after it ends: nothing is disturbed.
const WARM_UP: Duration = Duration::from_secs(2);
const QUIET: Duration = Duration::from_secs(3);
/// How long a child may take to start and connect, on a loaded machine.
const STARTUP: Duration = Duration::from_secs(20);
/// How long a worker may take to finish its calls once told to stop.
const STOP_BOUND: Duration = Duration::from_secs(30);

/// Chaos this long before a waiter's call may still shape its queue.
const FIFO_SETTLE: Duration = Duration::from_secs(1);

/// Acquisitions per second the soak must reach at least (about 130 are
/// made on a 2-core machine, idle or with one core hogged).
const MIN_ACQUISITIONS_PER_S: u64 = 30;
/// Waiter pairs per second the FIFO check must find eligible at least
/// (about 50 on the same machine), so that its 0 means something.
const MIN_FIFO_PAIRS_PER_S: u64 = 5;

#[test]
fn soak() {
    let seconds = env_number(SECONDS_VAR).unwrap_or(DEFAULT_SECONDS);
    assert!(
        seconds >= MIN_SECONDS,
        "{SECONDS_VAR}={seconds}: a soak needs at least {MIN_SECONDS} s"
    );
    let seed = env_number(SEED_VAR).unwrap_or_else(|| wall_clock_ms() as u64);
    report(&format!(
        "soak: {seconds} s, seed {seed} ({SEED_VAR}={seed} repeats the chaos schedule)"
    ));
    let began = Instant::now();
    let mut server = RedisServer::start();
    let resource = Resource::start();
    let mut fleet = Fleet {
        children: Children::new(CHILD),
        relays: Vec::new(),
        live: Vec::new(),
        killed: 0,
        server_port: server.port(),
        resource_port: resource.port,
        seed,
        max_life: Duration::from_secs(seconds + 120),
    };
    for _ in 0..WORKERS {
        fleet.spawn();
    }
    thread::sleep(WARM_UP);
    let start = Metrics::read(&server, fleet.children.pid(LONG_LIVED));

    let chaos_time = Duration::from_secs(seconds)
        .saturating_sub(WARM_UP + QUIET + began.elapsed())
        .max(Duration::from_secs(1));
    let chaos = run_chaos(&mut server, &mut fleet, seed, chaos_time);

    thread::sleep(QUIET);
    fleet.check_alive();
    let end = Metrics::read(&server, fleet.children.pid(LONG_LIVED));
    let started = fleet.relays.len();
    let stopped = fleet.stop_all();

    let events = fleet.children.take_ready(|_| true);
    let calls = parse_calls(&events);
    let mut chaos = chaos;
    chaos.extend(parse_starved(&events));
    let ledger = resource.finish();
    let summary = Summary::new(&calls, &ledger, &chaos);
    let elapsed = began.elapsed();
    report(&summary.table(
        &chaos,
        started,
        fleet.killed,
        stopped,
        &start,
        &end,
        elapsed,
    ));

    assert_eq!(
        summary.overlaps_unexplained, 0,
        "holds of one name overlapped without a restart between them: {:?}",
        summary.overlap_examples
    );
    assert_eq!(
        summary.fifo.inversions, 0,
        "FIFO inversions among live waiters: {:?}",
        summary.fifo.examples
    );
    assert_eq!(
        summary.token_order_violations, 0,
        "a later acquisition got a lower token: {:?}",
        summary.token_examples
    );
    let floor = MIN_ACQUISITIONS_PER_S * seconds;
    assert!(
        summary.acquisitions >= floor,
        "{} acquisitions, expected at least {floor}",
        summary.acquisitions
    );
    let pairs_floor = MIN_FIFO_PAIRS_PER_S * seconds;
    assert!(
        summary.fifo.eligible as u64 >= pairs_floor,
        "{} waiter pairs eligible for the FIFO check, expected at least {pairs_floor}",
        summary.fifo.eligible
    );
    assert_eq!(
        stopped,
        started - fleet.killed,
        "workers that exited cleanly"
    );
    assert!(
        end.threads <= start.threads,
        "the long-lived worker's threads: {} at start, {} at the end",
        start.threads,
        end.threads
    );
    // Pools open connections as threads need them: at most one per worker
    // thread more than at the start (pool size 4, 3 threads).
    let slack = (WORKERS * THREADS_PER_WORKER) as i64;
    assert!(
        end.connections <= start.connections + slack,
        "server connections: {} at start, {} at the end",
        start.connections,
        end.connections
    );
}

/// A number from the environment; a set but unparsable value fails the test.
fn env_number(var: &str) -> Option<u64> {
    let value = std::env::var(var).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|err| panic!("{var}={value:?} is not a whole number: {err}")),
    )
}

/// Prints to stderr even while the test harness captures output, so the
/// summary shows in every run.
fn report(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

// ---------------------------------------------------------------------------
// The protected resource.

/// One hold, as the resource saw it: believed held from `start` (its
/// acquire call returned) to `end` (the last check that allowed a write).
#[derive(Debug, Clone, Copy)]
struct Hold {
    worker: u64,
    thread: u64,
    token: u64,
    call_start: u64,
    start: u64,
    end: u64,
}

#[derive(Default)]
struct Ledger {
    highest: HashMap<String, u64>,
    writes: u64,
    stale: u64,
    /// By (name, token, worker, thread).
    holds: HashMap<(String, u64, u64, u64), Hold>,
}

impl Ledger {
    /// One write line; returns the reply.
    fn write(&mut self, line: &str) -> &'static str {
        let words: Vec<&str> = line.split(' ').collect();
        let [_, name, token, worker, thread, t0, t1, t] = words[..] else {
            panic!("resource: bad line {line:?}");
        };
        let number = |s: &str| -> u64 {
            s.parse()
                .unwrap_or_else(|e| panic!("resource: {line:?}: {e}"))
        };
        let (token, worker, thread) = (number(token), number(worker), number(thread));
        let (t0, t1, t) = (number(t0), number(t1), number(t));
        self.writes += 1;
        let hold = self
            .holds
            .entry((name.to_owned(), token, worker, thread))
            .or_insert(Hold {
                worker,
                thread,
                token,
                call_start: t0,
                start: t1,
                end: t,
            });
        hold.end = hold.end.max(t);
        let highest = self.highest.entry(name.to_owned()).or_insert(0);
        if token < *highest {
            self.stale += 1;
            "stale"
        } else {
            *highest = token;
            "ok"
        }
    }
}

/// A loopback line server holding the [`Ledger`]; one thread per
/// connection, each ending when its worker closes it (exits or is killed).
struct Resource {
    port: u16,
    ledger: Arc<Mutex<Ledger>>,
    closing: Arc<AtomicBool>,
    acceptor: JoinHandle<Vec<JoinHandle<()>>>,
}

impl Resource {
    fn start() -> Resource {
        let listener = TcpListener::bind("127.0.0.1:0").expect("resource: bind");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let closing = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (ledger, closing) = (Arc::clone(&ledger), Arc::clone(&closing));
            thread::spawn(move || {
                let mut served = Vec::new();
                while !closing.load(SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let ledger = Arc::clone(&ledger);
                            served.push(thread::spawn(move || serve(stream, &ledger)));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
                served
            })
        };
        Resource {
            port,
            ledger,
            closing,
            acceptor,
        }
    }

    /// Stops accepting and joins every connection's thread (their workers
    /// are gone by now); returns the ledger.
    fn finish(self) -> Ledger {
        self.closing.store(true, SeqCst);
        let served = join_within(self.acceptor, Duration::from_secs(5), "resource acceptor");
        for handle in served {
            join_within(handle, Duration::from_secs(5), "a resource connection");
        }
        std::mem::take(&mut *self.ledger.lock().unwrap())
    }
}

fn serve(stream: TcpStream, ledger: &Mutex<Ledger>) {
    stream.set_nodelay(true).unwrap();
    let mut writer = stream.try_clone().unwrap();
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        let reply = ledger.lock().unwrap().write(&line);
        if writeln!(writer, "{reply}").is_err() {
            break;
        }
    }
}

// ---------------------------------------------------------------------------
// The workers.

struct Fleet {
    children: Children,
    /// Each worker's relay, by worker index (the index in `children`); a
    /// killed worker's is dropped.
    relays: Vec<Option<Relay>>,
    live: Vec<usize>,
    killed: usize,
    server_port: u16,
    resource_port: u16,
    seed: u64,
    max_life: Duration,
}

impl Fleet {
    /// Starts a worker behind a relay of its own; waits until it is connected.
    fn spawn(&mut self) -> usize {
        let relay = Relay::start(self.server_port);
        let index = self.relays.len();
        let names = LOCK_NAMES.join(",");
        let vars = [
            (URL, relay.url()),
            (NAMES, names),
            (THREADS, THREADS_PER_WORKER.to_string()),
            (SEED, self.seed.to_string()),
            (WORKER, index.to_string()),
            (RESOURCE, self.resource_port.to_string()),
            (MAX_LIFE_MS, self.max_life.as_millis().to_string()),
        ];
        let child = self.children.spawn("soak", &vars);
        assert_eq!(child, index);
        self.relays.push(Some(relay));
        self.children.expect_prefix(child, "ready", STARTUP);
        self.live.push(child);
        child
    }

    fn relay(&self, worker: usize) -> &Relay {
        self.relays[worker].as_ref().expect("a live worker's relay")
    }

    /// SIGKILLs `worker` and drops its relay.
    fn kill(&mut self, worker: usize) {
        self.children.kill(worker);
        self.relays[worker] = None;
        self.live.retain(|&w| w != worker);
        self.killed += 1;
    }

    /// Panics if a live worker exited by itself.
    fn check_alive(&mut self) {
        for &worker in &self.live {
            if let Some(status) = self.children.exited(worker) {
                panic!("worker {worker} exited by itself: {status}");
            }
        }
    }

    /// Tells every live worker to stop; returns how many exited cleanly
    /// (panics on any that did not).
    fn stop_all(&mut self) -> usize {
        for &worker in &self.live {
            self.children.send(worker, "stop");
        }
        for &worker in &self.live {
            let status = self.children.wait_exit(worker, STOP_BOUND, false);
            assert!(status.success(), "worker {worker} stopped with {status}");
            // Its last line: every event before it has arrived too.
            self.children
                .expect_prefix(worker, "done", Duration::from_secs(5));
        }
        std::mem::take(&mut self.live).len()
    }
}

/// The long-lived worker's threads and memory and the server's connections.
#[derive(Debug)]
struct Metrics {
    threads: u64,
    rss_kib: u64,
    connections: i64,
}

impl Metrics {
    fn read(server: &RedisServer, pid: u32) -> Metrics {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        };
        Metrics {
            threads: field("Threads:"),
            rss_kib: field("VmRSS:"),
            // Less this connection, which the server counts too.
            connections: connected_clients(&mut server.conn()) - 1,
        }
    }
}

// ---------------------------------------------------------------------------
// Chaos.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    /// Redis SIGKILLed and started again on its port, empty.
    Restart,
    ScriptFlush,
    /// `CLIENT KILL TYPE pubsub`.
    KillSubscribers,
    /// One worker's relay stalled for less than its lease.
    StallShort,
    /// One worker's relay stalled for more than its lease and waiter timeout.
    StallLong,
    /// One worker's connections cut, then healed.
    Cut,
    /// One worker stopped (SIGSTOP) for more than its lease, then
    /// continued: a process pause, what fencing tokens are for.
    Pause,
    /// One worker SIGKILLed (a replacement is started).
    KillWorker,
    /// One worker not scheduled for over 250 ms, as it saw itself (a
    /// machine overloaded by other work, not the soak's doing): its
    /// heartbeats may have come too late for its waiters to stay queued.
    Starved,
}

impl Kind {
    /// One round of the schedule: every kind, and kills twice.
    const ROUND: [Kind; 9] = [
        Kind::Restart,
        Kind::ScriptFlush,
        Kind::KillSubscribers,
        Kind::StallShort,
        Kind::StallLong,
        Kind::Cut,
        Kind::Pause,
        Kind::KillWorker,
        Kind::KillWorker,
    ];

    fn is_global(self) -> bool {
        matches!(
            self,
            Kind::Restart | Kind::ScriptFlush | Kind::KillSubscribers
        )
    }
}

/// One chaos event: `from` to `to` (CLOCK_MONOTONIC ns); for a kill, `to`
/// is the end of time (the worker never comes back).
#[derive(Debug, Clone, Copy)]
struct Chaos {
    kind: Kind,
    worker: Option<usize>,
    from: u64,
    to: u64,
}

/// Chaos for `length`: rounds of [`Kind::ROUND`] in random order, one
/// event every 1–3 s, each stall, cut or kill on a random live worker (a
/// kill never on the long-lived one).
fn run_chaos(
    server: &mut RedisServer,
    fleet: &mut Fleet,
    seed: u64,
    length: Duration,
) -> Vec<Chaos> {
    let mut rng = Rng::new(seed);
    let end = Instant::now() + length;
    let mut done = Vec::new();
    let mut round: Vec<Kind> = Vec::new();
    loop {
        let gap = rng.millis(1000, 3000);
        if Instant::now() + gap >= end {
            break;
        }
        thread::sleep(gap);
        if round.is_empty() {
            round = Kind::ROUND.to_vec();
        }
        let kind = round.swap_remove(rng.below(round.len() as u64) as usize);
        let any_worker = fleet.live[rng.below(fleet.live.len() as u64) as usize];
        let from = mono_ns();
        let worker = match kind {
            Kind::Restart => {
                server.restart();
                None
            }
            Kind::ScriptFlush => {
                let () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query(&mut server.conn())
                    .expect("SCRIPT FLUSH");
                None
            }
            Kind::KillSubscribers => {
                kill_subscribers(&mut server.conn());
                None
            }
            Kind::StallShort | Kind::StallLong => {
                let pause = if kind == Kind::StallShort {
                    rng.millis(200, 700)
                } else {
                    rng.millis(longest_lease_ms() + 300, longest_lease_ms() + 1500)
                };
                let relay = fleet.relay(any_worker);
                relay.stall();
                thread::sleep(pause);
                relay.resume();
                Some(any_worker)
            }
            Kind::Cut => {
                let relay = fleet.relay(any_worker);
                relay.cut();
                thread::sleep(rng.millis(100, 1500));
                relay.heal();
                Some(any_worker)
            }
            Kind::Pause => {
                let pid = fleet.children.pid(any_worker);
                send_signal(pid, "STOP");
                thread::sleep(rng.millis(longest_lease_ms() + 300, longest_lease_ms() + 1500));
                send_signal(pid, "CONT");
                Some(any_worker)
            }
            Kind::KillWorker => {
                let candidates: Vec<usize> = fleet
                    .live
                    .iter()
                    .copied()
                    .filter(|&w| w != LONG_LIVED)
                    .collect();
                let victim = candidates[rng.below(candidates.len() as u64) as usize];
                fleet.kill(victim);
                fleet.spawn();
                Some(victim)
            }
            Kind::Starved => unreachable!("seen by the workers, never scheduled"),
        };
        let to = if kind == Kind::KillWorker {
            u64::MAX
        } else {
            mono_ns()
        };
        done.push(Chaos {
            kind,
            worker,
            from,
            to,
        });
        fleet.check_alive();
    }
    thread::sleep(end.saturating_duration_since(Instant::now()));
    done
}

/// The longer of the workers' lease and waiter timeout, in ms.
fn longest_lease_ms() -> u64 {
    LEASE.max(WAITER_TIMEOUT).as_millis() as u64
}

// ---------------------------------------------------------------------------
// What the workers reported.

/// One acquire call, from its `acq` line.
#[derive(Debug, Clone)]
struct Call {
    worker: usize,
    /// Read through `Debug`, in failure messages.
    #[allow(dead_code)]
    thread: u64,
    name: String,
    mode: String,
    t0: u64,
    t1: u64,
    outcome: String,
    token: Option<u64>,
    lost: bool,
    /// When its first request's reply said Redis had queued it.
    queued: Option<u64>,
}

/// The spans in which a worker saw itself starved (`starved <from> <to>`).
fn parse_starved(events: &[Event]) -> Vec<Chaos> {
    (events.iter())
        .filter(|e| e.text.starts_with("starved "))
        .map(|e| {
            let w = e.words();
            let number = |s: &str| -> u64 {
                s.parse()
                    .unwrap_or_else(|err| panic!("{:?}: {err}", e.text))
            };
            assert_eq!(w.len(), 3, "bad event {:?}", e.text);
            Chaos {
                kind: Kind::Starved,
                worker: Some(e.child),
                from: number(w[1]),
                to: number(w[2]),
            }
        })
        .collect()
}

fn parse_calls(events: &[Event]) -> Vec<Call> {
    events
        .iter()
        .filter(|e| e.text.starts_with("acq "))
        .map(|e| {
            let w = e.words();
            let number = |s: &str| -> u64 {
                s.parse()
                    .unwrap_or_else(|err| panic!("{:?}: {err}", e.text))
            };
            assert_eq!(w.len(), 10, "bad event {:?}", e.text);
            Call {
                worker: e.child,
                thread: number(w[1]),
                name: w[2].to_owned(),
                mode: w[3].to_owned(),
                t0: number(w[4]),
                t1: number(w[5]),
                outcome: w[6].to_owned(),
                token: (w[7] != "-").then(|| number(w[7])),
                lost: w[8] == "1",
                queued: (w[9] != "-").then(|| number(w[9])),
            }
        })
        .collect()
}

struct Summary {
    calls: usize,
    outcomes: Vec<(String, usize)>,
    acquisitions: u64,
    waits_ms: [f64; 3],
    lock_waits_ms: [f64; 3],
    leases_lost: usize,
    writes: u64,
    stale: u64,
    holds: usize,
    overlaps_unexplained: usize,
    overlaps_restart: usize,
    overlap_examples: Vec<(Hold, Hold)>,
    fifo: Fifo,
    token_checked: usize,
    token_order_violations: usize,
    token_examples: Vec<(u64, Call)>,
}

impl Summary {
    fn new(calls: &[Call], ledger: &Ledger, chaos: &[Chaos]) -> Summary {
        let mut outcomes: HashMap<String, usize> = HashMap::new();
        for call in calls {
            *outcomes.entry(call.outcome.clone()).or_default() += 1;
        }
        let mut outcomes: Vec<(String, usize)> = outcomes.into_iter().collect();
        outcomes.sort_by_key(|o| std::cmp::Reverse(o.1));
        let ok: Vec<&Call> = calls.iter().filter(|c| c.outcome == "ok").collect();
        let waits = |filter: &dyn Fn(&Call) -> bool| {
            percentiles(
                ok.iter()
                    .filter(|c| filter(c))
                    .map(|c| c.t1 - c.t0)
                    .collect(),
            )
        };
        let (overlaps_unexplained, overlaps_restart, overlap_examples) = overlaps(ledger, chaos);
        let fifo = fifo(&ok, chaos);
        let (token_checked, token_order_violations, token_examples) = token_order(&ok);
        Summary {
            calls: calls.len(),
            outcomes,
            acquisitions: ok.len() as u64,
            waits_ms: waits(&|_| true),
            lock_waits_ms: waits(&|c| c.mode == "lock"),
            leases_lost: ok.iter().filter(|c| c.lost).count(),
            writes: ledger.writes,
            stale: ledger.stale,
            holds: ledger.holds.len(),
            overlaps_unexplained,
            overlaps_restart,
            overlap_examples,
            fifo,
            token_checked,
            token_order_violations,
            token_examples,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn table(
        &self,
        chaos: &[Chaos],
        started: usize,
        killed: usize,
        stopped: usize,
        start: &Metrics,
        end: &Metrics,
        elapsed: Duration,
    ) -> String {
        let mut kinds: HashMap<Kind, usize> = HashMap::new();
        for event in chaos {
            *kinds.entry(event.kind).or_default() += 1;
        }
        let mut kinds: Vec<(Kind, usize)> = kinds.into_iter().collect();
        kinds.sort();
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k:?} {n}")).collect();
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(o, n)| format!("{o} {n}"))
            .collect();
        let [p50, p99, max] = self.waits_ms;
        let [l50, l99, lmax] = self.lock_waits_ms;
        let rows = [
            ("run", format!("{:.1} s, {WORKERS} processes × {THREADS_PER_WORKER} threads, {} names, lease {LEASE:?}, waiter timeout {WAITER_TIMEOUT:?}", elapsed.as_secs_f64(), LOCK_NAMES.len())),
            ("acquire calls", format!("{} ({})", self.calls, outcomes.join(", "))),
            ("acquisitions", self.acquisitions.to_string()),
            ("waits, all modes", format!("p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms")),
            ("waits, lock()", format!("p50 {l50:.1} ms, p99 {l99:.1} ms, max {lmax:.1} ms")),
            ("leases lost", self.leases_lost.to_string()),
            ("writes", format!("{} in {} holds; stale rejected {}", self.writes, self.holds, self.stale)),
            ("overlapping holds", format!("{} (and {} across a Redis restart that lost the lock)", self.overlaps_unexplained, self.overlaps_restart)),
            ("FIFO inversions", format!("{} of {} eligible pairs ({} left out: B called before A was known queued)", self.fifo.inversions, self.fifo.eligible, self.fifo.unknown)),
            ("token order", format!("{} violations in {} acquisitions with an earlier one", self.token_order_violations, self.token_checked)),
            ("chaos", format!("{} events: {}", chaos.len(), kinds.join(", "))),
            ("worker processes", format!("{started} started, {killed} SIGKILLed, {stopped} exited cleanly")),
            ("server connections", format!("{} → {}", start.connections, end.connections)),
            ("long-lived worker", format!("threads {} → {}, RSS {} → {} KiB", start.threads, end.threads, start.rss_kib, end.rss_kib)),
        ];
        let mut out = String::from("---- soak summary ----\n");
        for (what, value) in rows {
            out += &format!("{what:<20} {value}\n");
        }
        out
    }
}

/// p50, p99 and max of `ns`, in ms (zeros if empty).
fn percentiles(mut ns: Vec<u64>) -> [f64; 3] {
    if ns.is_empty() {
        return [0.0; 3];
    }
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e6;
    [at(0.5), at(0.99), at(1.0)]
}

/// Pairs of holds of one name, by different holders, whose believed-held
/// intervals overlap: (without a restart between them, across a restart,
/// a few examples of the first kind).
fn overlaps(ledger: &Ledger, chaos: &[Chaos]) -> (usize, usize, Vec<(Hold, Hold)>) {
    let restarts: Vec<u64> = chaos
        .iter()
        .filter(|c| c.kind == Kind::Restart)
        .map(|c| c.from)
        .collect();
    let mut by_name: HashMap<&str, Vec<Hold>> = HashMap::new();
    for ((name, ..), hold) in &ledger.holds {
        by_name.entry(name).or_default().push(*hold);
    }
    let (mut unexplained, mut across, mut examples) = (0, 0, Vec::new());
    for holds in by_name.values() {
        let spans: Vec<Span<u64>> = holds
            .iter()
            .map(|h| Span {
                from: h.start,
                to: h.end,
                token: h.token,
            })
            .collect();
        for (a, b) in overlapping(&spans) {
            let (a, b) = (&holds[a], &holds[b]);
            if (a.worker, a.thread, a.token) == (b.worker, b.thread, b.token) {
                continue;
            }
            let first_call = a.call_start.min(b.call_start);
            if restarts.iter().any(|&r| first_call < r && r < b.start) {
                across += 1;
            } else {
                unexplained += 1;
                if examples.len() < 5 {
                    examples.push((*a, *b));
                }
            }
        }
    }
    (unexplained, across, examples)
}

/// What the FIFO check found; see the module docs.
#[derive(Debug, Default)]
struct Fifo {
    eligible: usize,
    inversions: usize,
    /// Undisturbed pairs whose order at Redis is not known: B's call began
    /// after A's, while A was not yet known queued.
    unknown: usize,
    examples: Vec<(Call, Call)>,
}

fn fifo(ok: &[&Call], chaos: &[Chaos]) -> Fifo {
    let settle = FIFO_SETTLE.as_nanos() as u64;
    let disturbed = |a: &Call, b: &Call| {
        let (from, to) = (a.t0.saturating_sub(settle), a.t1.max(b.t1));
        chaos.iter().any(|c| {
            let touches =
                c.kind.is_global() || c.worker == Some(a.worker) || c.worker == Some(b.worker);
            touches && c.from <= to && c.to >= from
        })
    };
    let mut by_name: HashMap<&str, Vec<&Call>> = HashMap::new();
    for call in ok {
        by_name.entry(&call.name).or_default().push(call);
    }
    let mut found = Fifo::default();
    for calls in by_name.values_mut() {
        calls.sort_by_key(|c| c.t0);
        for (i, a) in calls.iter().enumerate() {
            // A waited (it was queued), and B's call began while it did.
            let Some(queued) = a.queued else { continue };
            let later = calls[i + 1..].iter().take_while(|b| b.t0 < a.t1);
            for b in later {
                if disturbed(a, b) {
                    continue;
                }
                if b.t0 <= queued {
                    found.unknown += 1;
                    continue;
                }
                found.eligible += 1;
                if b.token < a.token {
                    found.inversions += 1;
                    if found.examples.len() < 5 {
                        found.examples.push(((*a).clone(), (*b).clone()));
                    }
                }
            }
        }
    }
    found
}

/// Acquisitions of one name whose call started after another one's
/// returned must have a larger token, restarts or not: (acquisitions
/// checked, violations, examples as (the larger earlier token, the call)).
fn token_order(ok: &[&Call]) -> (usize, usize, Vec<(u64, Call)>) {
    let mut by_name: HashMap<&str, Vec<&Call>> = HashMap::new();
    for call in ok {
        by_name.entry(&call.name).or_default().push(call);
    }
    let (mut checked, mut violations, mut examples) = (0, 0, Vec::new());
    for calls in by_name.values_mut() {
        calls.sort_by_key(|c| c.t1);
        // The largest token among the calls that returned first.
        let mut prefix_max = Vec::with_capacity(calls.len());
        let mut max = 0;
        for call in calls.iter() {
            max = max.max(call.token.unwrap());
            prefix_max.push(max);
        }
        for b in calls.iter() {
            let before = calls.partition_point(|a| a.t1 < b.t0);
            if before == 0 {
                continue;
            }
            checked += 1;
            let earlier = prefix_max[before - 1];
            if earlier >= b.token.unwrap() {
                violations += 1;
                if examples.len() < 5 {
                    examples.push((earlier, (*b).clone()));
                }
            }
        }
    }
    (checked, violations, examples)
}

/// The soak's checks can fail: made-up reports with one overlap, one FIFO
/// inversion, one token out of order and one stale write are each counted,
/// and chaos excuses only what it should.
#[test]
fn soak_checks_catch_violations() {
    const MS: u64 = 1_000_000;
    let call = |worker: usize, t0: u64, t1: u64, token: u64| Call {
        worker,
        thread: 0,
        name: "n".to_owned(),
        mode: "lock".to_owned(),
        t0: t0 * MS,
        t1: t1 * MS,
        outcome: "ok".to_owned(),
        token: Some(token),
        lost: false,
        // Its first request answered 5 ms after it began.
        queued: Some((t0 + 5) * MS),
    };
    let event = |kind: Kind, worker: Option<usize>, at: u64| Chaos {
        kind,
        worker,
        from: at * MS,
        to: at * MS + 1,
    };

    // A queued by 5, B called at 100 while A still waited; B was granted
    // first.
    let (a, b) = (call(0, 0, 300, 20), call(1, 100, 200, 10));
    let found = fifo(&[&a, &b], &[]);
    assert_eq!((found.eligible, found.inversions, found.unknown), (1, 1, 0));
    let b_after = call(1, 100, 400, 30);
    assert_eq!(fifo(&[&a, &b_after], &[]).inversions, 0, "in order");
    for excuse in [
        event(Kind::Restart, None, 150),
        event(Kind::StallLong, Some(1), 150),
    ] {
        assert_eq!(fifo(&[&a, &b], &[excuse]).eligible, 0, "{excuse:?} excuses");
    }
    let elsewhere = event(Kind::Cut, Some(2), 150);
    let found = fifo(&[&a, &b], &[elsewhere]);
    assert_eq!(found.inversions, 1, "another worker's cut");
    let close = call(1, 3, 200, 10);
    let found = fifo(&[&a, &close], &[]);
    assert_eq!(
        (found.eligible, found.unknown),
        (0, 1),
        "before A was queued"
    );
    // A's first request took 150 ms to be answered (a busy machine): B,
    // called 100 ms after A, may have reached Redis first; it is not counted.
    let slow = Call {
        queued: Some(150 * MS),
        ..a.clone()
    };
    let found = fifo(&[&slow, &b], &[]);
    assert_eq!(
        (found.eligible, found.unknown),
        (0, 1),
        "order at Redis unknown"
    );
    // A took the lock at once (never queued): nobody could pass it.
    let took = Call {
        queued: None,
        ..a.clone()
    };
    assert_eq!(fifo(&[&took, &b], &[]).eligible, 0, "not a waiter");

    // A returned at 300; C called at 400 and got a lower token.
    let c = call(2, 400, 410, 15);
    assert_eq!(token_order(&[&a, &c]).1, 1);
    assert_eq!(token_order(&[&a, &call(2, 400, 410, 25)]).1, 0);

    // Holds of "n": token 20 believed 10..100 ms, token 30 from 50 ms.
    let mut ledger = Ledger::default();
    for line in [
        "W n 20 0 0 0 10 10",
        "W n 30 1 0 40 50 50",
        "W n 20 0 0 0 10 100",
    ] {
        let ms = |s: &str| (s.parse::<u64>().unwrap() * MS).to_string();
        let w: Vec<&str> = line.split(' ').collect();
        let line = format!(
            "{} {} {} {}",
            w[..5].join(" "),
            ms(w[5]),
            ms(w[6]),
            ms(w[7])
        );
        ledger.write(&line);
    }
    assert_eq!(
        (ledger.writes, ledger.stale),
        (3, 1),
        "the late token 20 is stale"
    );
    let (unexplained, across, _) = overlaps(&ledger, &[]);
    assert_eq!((unexplained, across), (1, 0));
    let (unexplained, across, _) = overlaps(&ledger, &[event(Kind::Restart, None, 20)]);
    assert_eq!((unexplained, across), (0, 1), "a restart between them");
}
