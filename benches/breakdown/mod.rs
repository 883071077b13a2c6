//! Where the server's time goes, in no-op units: the server time of each
//! script path (EVALSHA's usec in INFO commandstats around a batch of
//! calls of that path, one at a time, not pipelined) against a `return 1`
//! EVALSHA with no keys, measured the same way in the same rounds.
//!
//! Self-contained on purpose, so that `scripts/bench-before` can copy this
//! directory into a checkout of an older commit for the report's "before"
//! column: it uses only `fake_queue`'s `queue_of`, `ScriptedLock::{holder,
//! acquire, release}` and `evalsha_usec`, and `common::{measuring,
//! write_json}`, which older commits have too, and reads no more of a
//! reply than they share (acquire's first element, release's integer).
//!
//! Writes `breakdown.json`: the no-op's µs, then for each operation (`op`,
//! with `queued` waiters) its µs and no-ops (medians over interleaved
//! rounds of the per-round figures), each handoff cycle's ratio to the
//! uncontended cycle, and one condvar wake-up.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use fairlock_test_support::fake_queue::{evalsha_usec, queue_of, ScriptedLock};
use fairlock_test_support::RedisServer;

use crate::common::{measuring, write_json};

/// Queue lengths of the handoff cycles measured.
const QUEUED: [u64; 4] = [1, 100, 1_000, 10_000];

/// Queued waiters per scene at most (spread over its locks).
const WAITERS_PER_SCENE: u64 = 20_000;

/// Calls per batch, and rounds. Rounds interleave the scenes (in a
/// rotating order), so a burst of other load on this shared machine lands
/// on all of them alike; the median over rounds then drops it.
fn bounds() -> (u64, usize) {
    if measuring() {
        (300, 15)
    } else {
        (5, 2)
    }
}

/// Server µs spent in EVALSHA while `run` runs. Read around a whole batch
/// of calls of one kind: INFO between single calls would cool the CPU
/// caches and inflate each call (a no-op by half).
fn server_us(conn: &mut redis::Connection, run: impl FnOnce(&mut redis::Connection)) -> f64 {
    let before = evalsha_usec(conn);
    run(conn);
    evalsha_usec(conn) - before
}

/// Mean server µs of a `return 1` EVALSHA with no keys over `batch` calls:
/// the unit.
fn noop_us(conn: &mut redis::Connection, noop: &redis::Script, batch: u64) -> f64 {
    let total = server_us(conn, |c| {
        for _ in 0..batch {
            let _: i64 = noop.invoke(c).unwrap();
        }
    });
    total / batch as f64
}

/// Held locks with `queued` waiters each, as many as a batch needs so that
/// each lock's queue stays within a few entries of `queued` (at most
/// [`WAITERS_PER_SCENE`] in all).
struct Scene {
    queued: u64,
    locks: Vec<ScriptedLock>,
    conn: redis::Connection,
}

impl Scene {
    fn new(server: &RedisServer, queued: u64, batch: u64) -> Scene {
        let count = (WAITERS_PER_SCENE / queued.max(1)).clamp(1, batch);
        let mut conn = None;
        let locks = (0..count)
            .map(|i| {
                let (lock, c) = queue_of(server, &format!("bench:breakdown:{queued}:{i}"), queued);
                conn.get_or_insert(c);
                lock
            })
            .collect();
        Scene {
            queued,
            locks,
            conn: conn.unwrap(),
        }
    }

    /// Mean server µs of `batch` releases by the holders (round-robin over
    /// the locks), then of `batch` arrivals. With none queued a release
    /// frees its lock and an arrival takes it; with some, a release hands
    /// over to the head and an arrival queues at the tail, so each queue
    /// is back at its length. `newcomer` numbers the arrivals over the run.
    fn round(&mut self, batch: u64, newcomer: &mut u64) -> [f64; 2] {
        let (locks, queued) = (&self.locks, self.queued);
        let lock = |i: u64| &locks[i as usize % locks.len()];
        let release = server_us(&mut self.conn, |c| {
            for i in 0..batch {
                let holder = lock(i).holder(c);
                assert_eq!(lock(i).release(c, &holder), 0);
            }
        });
        let arrive = server_us(&mut self.conn, |c| {
            for i in 0..batch {
                *newcomer += 1;
                let owner = format!("n{newcomer}:1");
                let took = lock(i).acquire(c, &owner, 1_000_000 + *newcomer)[0] == 1;
                assert_eq!(took, queued == 0, "with {queued} queued");
            }
        });
        [release / batch as f64, arrive / batch as f64]
    }
}

/// One operation's medians over the rounds: µs, and no-ops (each round's
/// µs over that round's no-op).
struct Figure {
    op: &'static str,
    queued: u64,
    us: f64,
    noops: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The figures of one operation from its per-round µs, against the
/// per-round no-op µs.
fn figure(op: &'static str, queued: u64, per_round: &[f64], noop: &[f64]) -> Figure {
    let noops = per_round.iter().zip(noop).map(|(us, unit)| us / unit);
    Figure {
        op,
        queued,
        us: median(per_round.to_vec()),
        noops: median(noops.collect()),
    }
}

/// Server time per script path, in µs and no-ops; see the module comment.
pub fn run(_: &mut Criterion) {
    let server = RedisServer::start();
    let (batch, rounds) = bounds();
    let per_round = measure(&server, batch, rounds);
    let (figures, ratios) = figures(&per_round);
    let wake = condvar_wake(if measuring() { 3000 } else { 20 });
    let unit = median(per_round[0].iter().map(|r| r[0]).collect());
    write_json(
        "breakdown",
        &breakdown_json(
            &server,
            unit,
            &figures,
            &ratios,
            wake,
            batch * rounds as u64,
        ),
    );
}

/// Each round's mean µs per call: `[0]` the no-op's `[no-op, 0]`, then
/// each scene's `[release, arrival]` (none queued, then [`QUEUED`]).
fn measure(server: &RedisServer, batch: u64, rounds: usize) -> Vec<Vec<[f64; 2]>> {
    let (noop, mut noop_conn) = (redis::Script::new("return 1"), server.conn());
    let mut scenes: Vec<Scene> = std::iter::once(0)
        .chain(QUEUED)
        .map(|queued| Scene::new(server, queued, batch))
        .collect();
    let mut newcomer = 0;
    // One unrecorded pass loads the scripts and warms every lock.
    noop_us(&mut noop_conn, &noop, batch);
    for scene in &mut scenes {
        scene.round(batch, &mut newcomer);
    }
    let mut per_round = vec![Vec::new(); scenes.len() + 1];
    for round in 0..rounds {
        for k in 0..per_round.len() {
            let i = (k + round) % per_round.len();
            let figures = match i {
                0 => [noop_us(&mut noop_conn, &noop, batch), 0.0],
                _ => scenes[i - 1].round(batch, &mut newcomer),
            };
            per_round[i].push(figures);
        }
    }
    per_round
}

/// Every operation's figures from [`measure`]'s rounds, and each handoff
/// cycle's ratio to the uncontended cycle (the median of the per-round
/// ratios) by queue length.
fn figures(per_round: &[Vec<[f64; 2]>]) -> (Vec<Figure>, Vec<(u64, f64)>) {
    let part =
        |i: usize, which: usize| -> Vec<f64> { per_round[i].iter().map(|r| r[which]).collect() };
    let sum = |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x + y).collect() };
    let unit = part(0, 0);
    let (release_free, take) = (part(1, 0), part(1, 1));
    let uncontended = sum(&take, &release_free);
    let mut figures = vec![
        figure("take", 0, &take, &unit),
        figure("release_free", 0, &release_free, &unit),
        figure("uncontended_cycle", 0, &uncontended, &unit),
    ];
    let mut ratios = Vec::new();
    for (k, &queued) in QUEUED.iter().enumerate() {
        let (handover, arrival) = (part(2 + k, 0), part(2 + k, 1));
        let cycle = sum(&arrival, &handover);
        figures.push(figure("arrival", queued, &arrival, &unit));
        figures.push(figure("release_handoff", queued, &handover, &unit));
        figures.push(figure("handoff_cycle", queued, &cycle, &unit));
        let ratio = cycle.iter().zip(&uncontended).map(|(h, u)| h / u);
        ratios.push((queued, median(ratio.collect())));
    }
    (figures, ratios)
}

/// The JSON of `breakdown.json` (see the module comment).
fn breakdown_json(
    server: &RedisServer,
    noop_us: f64,
    figures: &[Figure],
    ratios: &[(u64, f64)],
    wake: Duration,
    calls_each: u64,
) -> String {
    let ops: Vec<String> = figures
        .iter()
        .map(|f| {
            format!(
                "{{\"op\": \"{}\", \"queued\": {}, \"us\": {:.2}, \"noops\": {:.2}}}",
                f.op, f.queued, f.us, f.noops
            )
        })
        .collect();
    let ratios: Vec<String> = ratios
        .iter()
        .map(|(queued, r)| format!("{{\"queued\": {queued}, \"ratio\": {r:.3}}}"))
        .collect();
    format!(
        "{{\"schema\": 2, \"commit\": \"{}\", \"redis_version\": \"{}\", \"calls_each\": {calls_each}, \
         \"noop_us\": {noop_us:.2}, \"ops\": [{}], \"handoff_cycle_vs_uncontended\": [{}], \
         \"condvar_wake_p50_us\": {:.1}}}",
        commit(),
        redis_version(server),
        ops.join(", "),
        ratios.join(", "),
        wake.as_secs_f64() * 1e6,
    )
}

/// The commit measured (`git rev-parse --short HEAD` here), or "unknown".
fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into())
}

/// The server's `redis_version` (INFO server).
fn redis_version(server: &RedisServer) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut server.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_owned()
}

/// Median time for a parked thread to run after a condvar notify.
fn condvar_wake(rounds: usize) -> Duration {
    let state = Arc::new((
        parking_lot::Mutex::new(None::<Instant>),
        parking_lot::Condvar::new(),
    ));
    let waiter = {
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let mut samples = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                let mut sent = state.0.lock();
                while sent.is_none() {
                    state.1.wait(&mut sent);
                }
                samples.push(sent.take().unwrap().elapsed());
            }
            samples.sort();
            samples[samples.len() / 2]
        })
    };
    for _ in 0..rounds {
        // Hand over the next stamp only once the last one was taken, so no
        // wake-up is lost and the waiter gets exactly `rounds` of them.
        while state.0.lock().is_some() {
            std::thread::sleep(Duration::from_micros(50));
        }
        std::thread::sleep(Duration::from_micros(200));
        *state.0.lock() = Some(Instant::now());
        state.1.notify_one();
    }
    waiter.join().unwrap()
}
