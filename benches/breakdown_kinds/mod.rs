//! Where the server's time goes for the semaphore and the reader-writer
//! lock, in no-op units, measured as `benches/breakdown/` measures the
//! mutex (kept apart: `scripts/bench-before` copies that module into older
//! checkouts, which have neither primitive). The server time of each
//! script path is EVALSHA's usec in INFO commandstats around a batch of
//! calls of that path, one at a time, not pipelined, against a `return 1`
//! EVALSHA with no keys measured the same way in the same rounds; rounds
//! interleave the scenes in a rotating order and the figures are medians
//! over rounds.
//!
//! The scripts are driven directly with the library's protocol values
//! (`SemAcquire`, `SemRelease`, `RwAcquire`, `RwRelease`), and queues are
//! filled with pipelined first-call acquires of owners nobody listens for
//! (a fixed 10 min lease, a 10 min liveness deadline: they stay live for
//! the run), as the mutex's `fake_queue` does.
//!
//! Scenes (each a set of locks, see [`Scene`]):
//! - the semaphore (1 permit), nobody queued: a release that frees a
//!   permit, an arrival that takes it (the fast paths);
//! - the semaphore with 1, 100, 1 000, 10 000 queued: a release that hands
//!   the permit to the head, an arrival that queues at the tail;
//! - the rwlock, nobody queued, reading, then writing: a release with
//!   nobody waiting, an arrival that takes the free lock (the fast paths);
//! - the rwlock with 1 .. 10 000 queued, readers and writers alternating
//!   in the queue and the holder a writer: each release admits the head
//!   alone (a reader after a writer, then a writer after that reader),
//!   each arrival queues at the tail, continuing the alternation.
//!
//! Writes `breakdown_kinds.json`: the no-op's µs; for each `kind`
//! (`semaphore`, `rwlock_read`, `rwlock_write`, `rwlock`) and operation
//! (`op`, with `queued` waiters) its µs and no-ops; and each handoff
//! cycle's ratio to the same kind's cycle with 1 queued (the median of
//! the per-round ratios): flat, if the scripts are O(log N).

use std::process::Command;
use std::time::{Duration, Instant};

use criterion::Criterion;
use fairlock::__test_support::{
    Access, Acquire, AcquireReply, Ask, CommonArgs, Lease, LockKeys, LockKind, Mode, Op, Operation,
    Release, ReleaseReply, Script,
};
use fairlock_test_support::fake_queue::evalsha_usec;
use fairlock_test_support::RedisServer;

use crate::common::{measuring, median, write_json};

/// The library's default key prefix.
const PREFIX: &str = "fairlock";

/// Queue lengths of the handoff cycles measured.
const QUEUED: [u64; 4] = [1, 100, 1_000, 10_000];

/// Queued waiters per scene at most (spread over its locks).
const WAITERS_PER_SCENE: u64 = 20_000;

/// The semaphore's permits: one, so a release hands over to exactly one
/// waiter, as the mutex's does.
const PERMITS: u32 = 1;

/// Every hold's fixed lease and every waiter's liveness: longer than the
/// run, so nothing expires while it is measured.
const LIFE: Duration = Duration::from_secs(600);

/// Calls per batch, and rounds (as benches/breakdown/).
fn bounds() -> (u64, usize) {
    if measuring() {
        (300, 15)
    } else {
        (5, 2)
    }
}

/// What a scene's locks are and what its calls ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// A semaphore of [`PERMITS`].
    Semaphore,
    /// A rwlock; every hold and arrival reads.
    Read,
    /// A rwlock; every hold and arrival writes.
    Write,
    /// A rwlock held by a writer, readers and writers alternating in its
    /// queue and in the arrivals.
    Alternating,
}

impl Workload {
    /// The `kind` of its figures in the JSON.
    fn kind(self) -> &'static str {
        match self {
            Workload::Semaphore => "semaphore",
            Workload::Read => "rwlock_read",
            Workload::Write => "rwlock_write",
            Workload::Alternating => "rwlock",
        }
    }

    fn keys(self, name: &str) -> LockKeys {
        match self {
            Workload::Semaphore => LockKeys::of_kind(PREFIX, name, LockKind::Semaphore),
            _ => LockKeys::of_kind(PREFIX, name, LockKind::RwLock),
        }
        .expect("a valid lock name")
    }

    /// The access of the scene's first hold.
    fn first_access(self) -> Access {
        match self {
            Workload::Read => Access::Read,
            _ => Access::Write,
        }
    }

    /// The access of the arrival after one that asked `access`.
    fn after(self, access: Access) -> Access {
        match (self, access) {
            (Workload::Alternating, Access::Read) => Access::Write,
            (Workload::Alternating, Access::Write) => Access::Read,
            _ => access,
        }
    }
}

/// A hold, as its release names it.
#[derive(Debug)]
struct Hold {
    owner: String,
    call: u64,
    token: u64,
}

/// One lock of a scene: its keys, its holder, and the access its next
/// arrival asks for (the semaphore ignores it).
struct Lock {
    keys: LockKeys,
    holder: Option<Hold>,
    next: Access,
}

/// The scripts a scene runs, loaded once (a `redis::Script` hashes its
/// source when made).
struct Scripts {
    common: [String; 2],
    acquire: redis::Script,
    release: redis::Script,
}

impl Scripts {
    fn new() -> Scripts {
        let common = CommonArgs {
            wake_prefix: format!("{PREFIX}:wake:"),
            fence_life: fairlock::DEFAULT_FENCE_LIFE,
        };
        // The semaphore and the rwlock run the same counted scripts.
        let script = |op| redis::Script::new(Script::of(LockKind::Semaphore, op).source());
        Scripts {
            common: common.args(),
            acquire: script(Op::Acquire),
            release: script(Op::Release),
        }
    }

    /// `op` on `keys` as a client sends it: its KEYS, the common
    /// arguments, its ARGV.
    fn invocation<'s, O: Operation>(
        &'s self,
        keys: &LockKeys,
        op: &O,
    ) -> redis::ScriptInvocation<'s> {
        let script = match O::OP {
            Op::Acquire => &self.acquire,
            Op::Release => &self.release,
            other => unreachable!("no scene runs {other:?}"),
        };
        let mut inv = script.prepare_invoke();
        for key in op.keys(keys) {
            inv.key(key);
        }
        inv.arg(&self.common);
        for arg in op.args() {
            inv.arg(arg);
        }
        inv
    }

    fn run<O: Operation>(&self, conn: &mut redis::Connection, keys: &LockKeys, op: &O) -> O::Reply
    where
        O::Reply: std::fmt::Debug,
    {
        let reply = self.invocation(keys, op).invoke(conn).unwrap();
        op.parse(reply).unwrap()
    }

    /// A first-call attempt of `owner`'s call `call` asking `access`
    /// (the semaphore ignores it): added to `pipe` when one is given (the
    /// reply then unread), else run, its reply returned.
    fn arrive(
        &self,
        conn: &mut redis::Connection,
        workload: Workload,
        keys: &LockKeys,
        (owner, call, access): (&str, u64, Access),
        pipe: Option<&mut redis::Pipeline>,
    ) -> Option<AcquireReply> {
        let ask = match workload {
            Workload::Semaphore => Ask::Permits { n: 1, of: PERMITS },
            _ => Ask::RwLock(access),
        };
        let op = Acquire {
            ask,
            owner,
            lease: Lease::Fixed(LIFE),
            waiter_timeout: LIFE,
            mode: Mode::First,
            call,
            live_token: 0,
        };
        self.send(conn, keys, &op, pipe)
    }

    /// Runs `op` and returns its reply, or adds it to `pipe` (then None).
    fn send<O: Operation<Reply = AcquireReply>>(
        &self,
        conn: &mut redis::Connection,
        keys: &LockKeys,
        op: &O,
        pipe: Option<&mut redis::Pipeline>,
    ) -> Option<AcquireReply> {
        let inv = self.invocation(keys, op);
        match pipe {
            Some(pipe) => {
                pipe.invoke_script(&inv).ignore();
                None
            }
            None => Some(op.parse(inv.invoke(conn).unwrap()).unwrap()),
        }
    }

    /// Releases `hold`, its lease vouched for as a client on the defaults
    /// sends it (no PTTL); the reply.
    fn release(&self, conn: &mut redis::Connection, keys: &LockKeys, hold: &Hold) -> ReleaseReply {
        let (owner, token, call) = (hold.owner.as_str(), hold.token, hold.call);
        let vouched_until = Some(Instant::now() + Duration::from_secs(60));
        self.run(
            conn,
            keys,
            &Release {
                owner,
                token,
                call,
                vouched_until,
            },
        )
    }
}

/// Held locks of one workload with `queued` waiters each, as many as a
/// batch needs so that each lock's queue stays within a few entries of
/// `queued` (at most [`WAITERS_PER_SCENE`] in all).
struct Scene {
    workload: Workload,
    queued: u64,
    locks: Vec<Lock>,
    conn: redis::Connection,
}

impl Scene {
    fn new(
        server: &RedisServer,
        scripts: &Scripts,
        workload: Workload,
        queued: u64,
        batch: u64,
    ) -> Scene {
        let count = (WAITERS_PER_SCENE / queued.max(1)).clamp(1, batch);
        let mut conn = server.conn();
        let locks = (0..count)
            .map(|i| {
                let name = format!("bench:breakdown_kinds:{}:{queued}:{i}", workload.kind());
                Scene::lock(scripts, &mut conn, workload, workload.keys(&name), queued)
            })
            .collect();
        Scene {
            workload,
            queued,
            locks,
            conn,
        }
    }

    /// A lock taken by `holder:1` with `queued` waiters behind it (their
    /// accesses alternating from a reader on, for [`Workload::Alternating`]).
    fn lock(
        scripts: &Scripts,
        conn: &mut redis::Connection,
        workload: Workload,
        keys: LockKeys,
        queued: u64,
    ) -> Lock {
        let first = workload.first_access();
        let hold = ("holder:1", 0, first);
        let token = match scripts.arrive(conn, workload, &keys, hold, None) {
            Some(AcquireReply::Acquired { token, .. }) => token,
            other => panic!("the lock starts free, got {other:?}"),
        };
        let mut access = workload.after(first);
        let mut pipe = redis::pipe();
        for i in 0..queued {
            let owner = format!("w{i}:1");
            scripts.arrive(conn, workload, &keys, (&owner, i, access), Some(&mut pipe));
            access = workload.after(access);
            if i % 1000 == 999 || i + 1 == queued {
                pipe.query::<()>(conn).unwrap();
                pipe = redis::pipe();
            }
        }
        let waiting = fairlock_test_support::fake_queue::queued_entries(conn, &keys.all[1]);
        assert_eq!(waiting, queued, "{workload:?}: every waiter queued");
        Lock {
            keys,
            holder: Some(Hold {
                owner: hold.0.into(),
                call: 0,
                token,
            }),
            next: access,
        }
    }

    /// Mean server µs of `batch` releases by the holders (round-robin over
    /// the locks), then of `batch` arrivals. With none queued a release
    /// frees its lock and an arrival takes it; with some, a release hands
    /// over to the head and an arrival queues at the tail, so each queue
    /// is back at its length. `newcomer` numbers the arrivals over the run.
    fn round(&mut self, scripts: &Scripts, batch: u64, newcomer: &mut u64) -> [f64; 2] {
        let (workload, queued, count) = (self.workload, self.queued, self.locks.len());
        let locks = &mut self.locks;
        let release = server_us(&mut self.conn, |c| {
            for i in 0..batch {
                let lock = &mut locks[i as usize % count];
                let hold = lock.holder.take().expect("the lock is held");
                lock.holder = match scripts.release(c, &lock.keys, &hold) {
                    ReleaseReply::Released { .. } if queued == 0 => None,
                    ReleaseReply::HandedOver(mut to) if queued > 0 && to.len() == 1 => {
                        let to = to.pop().unwrap();
                        Some(Hold {
                            owner: to.owner,
                            call: to.call,
                            token: to.token,
                        })
                    }
                    other => panic!("{workload:?} with {queued} queued: release {other:?}"),
                };
            }
        });
        let arrive = server_us(&mut self.conn, |c| {
            for i in 0..batch {
                let lock = &mut locks[i as usize % count];
                *newcomer += 1;
                let (owner, call) = (format!("n{newcomer}:1"), 1_000_000 + *newcomer);
                let access = lock.next;
                let arrival = (owner.as_str(), call, access);
                match scripts.arrive(c, workload, &lock.keys, arrival, None) {
                    Some(AcquireReply::Acquired { token, .. }) if queued == 0 => {
                        lock.holder = Some(Hold { owner, call, token })
                    }
                    Some(AcquireReply::Waiting {
                        position: Some(_), ..
                    }) if queued > 0 => {}
                    other => panic!("{workload:?} with {queued} queued: arrival {other:?}"),
                }
                lock.next = workload.after(access);
            }
        });
        [release / batch as f64, arrive / batch as f64]
    }
}

/// Server µs spent in EVALSHA while `run` runs (read around a whole batch:
/// INFO between single calls would cool the CPU caches).
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

/// The scenes, in the order of [`measure`]'s figures.
fn scenes() -> Vec<(Workload, u64)> {
    let queues = |w: Workload| QUEUED.into_iter().map(move |q| (w, q));
    std::iter::once((Workload::Semaphore, 0))
        .chain(queues(Workload::Semaphore))
        .chain([(Workload::Read, 0), (Workload::Write, 0)])
        .chain(queues(Workload::Alternating))
        .collect()
}

/// Each round's mean µs per call: `[0]` the no-op's `[no-op, 0]`, then
/// each of [`scenes`]'s `[release, arrival]`.
fn measure(server: &RedisServer, batch: u64, rounds: usize) -> Vec<Vec<[f64; 2]>> {
    let scripts = Scripts::new();
    let (noop, mut noop_conn) = (redis::Script::new("return 1"), server.conn());
    let mut scenes: Vec<Scene> = scenes()
        .into_iter()
        .map(|(workload, queued)| Scene::new(server, &scripts, workload, queued, batch))
        .collect();
    let mut newcomer = 0;
    // One unrecorded pass loads the no-op and warms every lock.
    noop_us(&mut noop_conn, &noop, batch);
    for scene in &mut scenes {
        scene.round(&scripts, batch, &mut newcomer);
    }
    let mut per_round = vec![Vec::new(); scenes.len() + 1];
    for round in 0..rounds {
        for k in 0..per_round.len() {
            let i = (k + round) % per_round.len();
            let figures = match i {
                0 => [noop_us(&mut noop_conn, &noop, batch), 0.0],
                _ => scenes[i - 1].round(&scripts, batch, &mut newcomer),
            };
            per_round[i].push(figures);
        }
    }
    per_round
}

/// One operation's medians over the rounds: µs, and no-ops (each round's
/// µs over that round's no-op).
struct Figure {
    kind: &'static str,
    op: &'static str,
    queued: u64,
    us: f64,
    noops: f64,
}

/// A handoff cycle's ratio to the same kind's cycle with 1 queued.
struct Flatness {
    kind: &'static str,
    queued: u64,
    vs_queued_1: f64,
}

/// Every figure from [`measure`]'s rounds.
fn figures(per_round: &[Vec<[f64; 2]>]) -> (Vec<Figure>, Vec<Flatness>) {
    let unit: Vec<f64> = per_round[0].iter().map(|r| r[0]).collect();
    let (mut figures, mut flatness) = (Vec::new(), Vec::new());
    let mut cycles_with_1: Vec<(Workload, Vec<f64>)> = Vec::new();
    for (i, (workload, queued)) in scenes().into_iter().enumerate() {
        let part =
            |which: usize| -> Vec<f64> { per_round[i + 1].iter().map(|r| r[which]).collect() };
        let (release, arrival) = (part(0), part(1));
        let cycle: Vec<f64> = release.iter().zip(&arrival).map(|(r, a)| r + a).collect();
        let names = if queued == 0 {
            ["release_free", "take", "uncontended_cycle"]
        } else {
            ["release_handoff", "arrival", "handoff_cycle"]
        };
        for (op, per_round) in names.into_iter().zip([&release, &arrival, &cycle]) {
            let noops = per_round.iter().zip(&unit).map(|(us, unit)| us / unit);
            figures.push(Figure {
                kind: workload.kind(),
                op,
                queued,
                us: median(per_round.clone()),
                noops: median(noops.collect()),
            });
        }
        if queued == 1 {
            cycles_with_1.push((workload, cycle));
        } else if queued > 1 {
            let (_, base) = cycles_with_1
                .iter()
                .find(|(w, _)| *w == workload)
                .expect("the queue of 1 is measured first");
            let ratio = cycle.iter().zip(base).map(|(c, b)| c / b);
            flatness.push(Flatness {
                kind: workload.kind(),
                queued,
                vs_queued_1: median(ratio.collect()),
            });
        }
    }
    (figures, flatness)
}

/// Server time per semaphore and rwlock script path, in µs and no-ops;
/// see the module comment.
pub fn run(_: &mut Criterion) {
    let server = RedisServer::start();
    let (batch, rounds) = bounds();
    let per_round = measure(&server, batch, rounds);
    let (figures, flatness) = figures(&per_round);
    let unit = median(per_round[0].iter().map(|r| r[0]).collect());
    let ops: Vec<String> = figures
        .iter()
        .map(|f| {
            format!(
                "{{\"kind\": \"{}\", \"op\": \"{}\", \"queued\": {}, \"us\": {:.2}, \"noops\": {:.2}}}",
                f.kind, f.op, f.queued, f.us, f.noops
            )
        })
        .collect();
    let flatness: Vec<String> = flatness
        .iter()
        .map(|f| {
            format!(
                "{{\"kind\": \"{}\", \"queued\": {}, \"vs_queued_1\": {:.3}}}",
                f.kind, f.queued, f.vs_queued_1
            )
        })
        .collect();
    write_json(
        "breakdown_kinds",
        &format!(
            "{{\"schema\": 1, \"commit\": \"{}\", \"redis_version\": \"{}\", \"calls_each\": {}, \
             \"permits\": {PERMITS}, \"noop_us\": {unit:.2}, \"ops\": [{}], \"handoff_cycle_vs_queued_1\": [{}]}}",
            commit(),
            redis_version(&server),
            batch * rounds as u64,
            ops.join(", "),
            flatness.join(", "),
        ),
    );
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
