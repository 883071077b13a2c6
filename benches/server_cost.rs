//! Where the server's work goes on each of the mutex's fast paths, counted
//! in instructions rather than timed: redis-server runs under valgrind's
//! callgrind, and each figure is the instructions Redis spends inside its
//! `call()` (what INFO commandstats times) per operation, over a batch of
//! operations, so that it is the same on a busy machine as on an idle one.
//!
//! Each path is split into:
//! - the call itself: a `return 1` script given the same KEYS and ARGV
//!   (Redis turns each argument into a Lua string);
//! - the prelude: the path's own script cut before its first command (the
//!   helper closures it builds and its argument checks);
//! - the commands: a script that sends only the path's commands, with
//!   values of the same size;
//! - the rest: what the script does between its commands (reading and
//!   building values, comparisons), the whole minus the three above.
//!
//! Beside them, the unfair cycle (`SET NX PX`, then a compare-and-delete
//! script), Redisson's fair lock replayed (`redisson/`: its uncontended
//! cycle, its handoff, each step), the commands each path sends (INFO
//! commandstats' counts), and the price of each building block a script is
//! made of (`building_blocks/`).
//!
//! With `FAIRLOCK_SERVER_COST_PROFILE=<dir>` the server's callgrind
//! collects only inside `processCommand` and the dumps of the mutex's,
//! Redisson's and the floors' cycles are kept in `<dir>`
//! (`<by>-<kind>-<cycle>.cg`, `floor-<layout>-<cycle>.cg`), for
//! `callgrind_annotate` to say where their instructions go
//! (docs/performance.md, "Where the server's instructions go").
//! With `FAIRLOCK_SERVER_COST_CYCLES=<prefix>` (say `FCALL-mutex`) it
//! counts only the whole cycles whose label starts with it (`floor-`:
//! the floors', say `floor-Packed`; several prefixes comma-separated, say
//! `FCALL-mutex,floor-`, in one run), prints them and writes nothing: a
//! quick measure while a script changes.
//!
//! `cargo bench --bench server_cost` (needs `valgrind`; a minute or two)
//! writes `target/fairlock-bench/server_cost.json`, which
//! `scripts/bench-report` puts into BENCHMARKS.md; `cargo test --bench
//! server_cost` drives every path with small batches on a plain server
//! (no valgrind), checks their replies, and writes nothing.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fairlock::__test_support::{words, LockKind, Op, Script};
use fairlock_test_support::fake_queue::{self, ScriptedLock};
use fairlock_test_support::RedisServer;

mod building_blocks;
#[path = "common/mod.rs"]
mod common;
mod floor;
mod redisson;

/// Where the profile mode keeps its callgrind dumps (see the top).
const PROFILE_ENV: &str = "FAIRLOCK_SERVER_COST_PROFILE";

/// The settings every acquire of the bench sends (the mutex's ARGV[6], the
/// counted engine's ARGV[8]): a lease the watchdog renews, as a client's
/// on the defaults is (so a handoff caps the grant at the waiter's
/// liveness deadline, as it does theirs: a fixed lease, which this bench
/// sent until 2026-11-29, skips that step and cost a handoff 1.7% less), a
/// waiter timeout of 60 s (long enough for a batch under callgrind), first
/// attempt, no live guard. The waiter timeout is shorter than half the
/// lease and fence life, as the client's defaults are (10 s against 30 s
/// and 600 s), so the mutex's queue key stays within its anchor's TTL and
/// no step grows the anchor. A counted lock's meta, which outlives its
/// queue by a fence life, still has its fence grown on the handoff rows, in
/// the write that path makes anyway (no command more). Until the run of
/// 2026-11-29 this bench sent 600 s, past that half, which grew the
/// mutex's anchor at every arrival into an empty queue and every handoff
/// with others queued (since 2026-11-30 the queue key is pushed out no
/// further than its anchor where that covers the waiter timeout).
const SETTINGS: &str = "0 60000 first 0";

/// The quick mode (see the top): only the whole cycles whose label
/// (`<EVALSHA|FCALL>-<kind>`, `floor-<layout>`) starts with one of this
/// variable's comma-separated values, printed.
const CYCLES_ENV: &str = "FAIRLOCK_SERVER_COST_CYCLES";

/// Operations per counted batch (and the warm-up before each batch).
fn batch() -> u64 {
    if common::measuring() {
        400
    } else {
        5
    }
}

/// A redis-server under callgrind, with what it takes to read its counts.
struct Counted {
    server: RedisServer,
    pid: String,
    dumps: PathBuf,
    /// In the profile mode: where dumps are kept, and the name the next
    /// count's dump is kept as (`keep_as`).
    profile: Option<PathBuf>,
    keep: RefCell<Option<String>>,
}

impl Counted {
    fn start() -> Option<Counted> {
        if !common::measuring() {
            // `cargo test --bench server_cost`: every path driven and
            // checked on a plain server, nothing counted (no valgrind: the
            // suite stays quick).
            let server = RedisServer::start();
            let dumps = std::env::temp_dir();
            return Some(Counted {
                server,
                pid: String::new(),
                dumps,
                profile: None,
                keep: RefCell::new(None),
            });
        }
        if Command::new("valgrind").arg("--version").output().is_err() {
            eprintln!("server_cost: valgrind not found; install it (apt-get install valgrind) to count the server's instructions");
            return None;
        }
        let dumps =
            std::env::temp_dir().join(format!("fairlock-server-cost-{}", std::process::id()));
        std::fs::create_dir_all(&dumps).unwrap();
        let profile = std::env::var_os(PROFILE_ENV).map(PathBuf::from);
        // The profile collects only inside processCommand (which runs each
        // command's `call()` once: a script's commands enter `call()` from
        // the script, not through processCommand), so that every function's
        // inclusive and self counts are those of command execution, not of
        // the event loop's reads and writes. `call()`'s own count, which is
        // what the bench reports, is the same either way.
        let collect = match &profile {
            Some(dir) => {
                std::fs::create_dir_all(dir).unwrap();
                "--toggle-collect=processCommand "
            }
            None => "",
        };
        let wrapper = dumps.join("redis-server");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec valgrind --tool=callgrind {collect}--callgrind-out-file={}/cg.%p {} \"$@\"\n",
                dumps.display(),
                fairlock_test_support::server_binary().display()
            ),
        )
        .unwrap();
        Command::new("chmod")
            .arg("+x")
            .arg(&wrapper)
            .status()
            .unwrap();
        let server = RedisServer::start_binary(&wrapper, &[]);
        let mut conn = server.conn();
        let info: String = redis::cmd("INFO").arg("server").query(&mut conn).unwrap();
        let pid = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .unwrap()
            .trim()
            .to_owned();
        Some(Counted {
            server,
            pid,
            dumps,
            profile,
            keep: RefCell::new(None),
        })
    }

    /// In the profile mode, keeps the next count's dump as `<label>.cg`.
    fn keep_as(&self, label: String) {
        *self.keep.borrow_mut() = Some(label);
    }

    fn control(&self, flag: &str) {
        let ok = Command::new("callgrind_control")
            .args([flag, &self.pid])
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "callgrind_control {flag} {}", self.pid);
    }

    /// Instructions inside `call()` per operation while `run` makes `n`
    /// operations, after `n` more of warm-up.
    fn per_op(&self, n: u64, mut run: impl FnMut(u64)) -> f64 {
        for i in 0..n {
            run(i);
        }
        self.count(n, || {
            for i in n..2 * n {
                run(i);
            }
        })
    }

    /// Instructions inside `call()` while `run` runs, over `n`.
    fn count(&self, n: u64, run: impl FnOnce()) -> f64 {
        if self.pid.is_empty() {
            self.keep.take();
            run();
            return 0.0;
        }
        self.control("-z");
        run();
        self.control("-d");
        let dump = std::fs::read_dir(&self.dumps)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("cg."))
            .max_by_key(|p| p.metadata().unwrap().modified().unwrap())
            .unwrap();
        let total = instructions_in_call(&dump);
        if let (Some(dir), Some(label)) = (&self.profile, self.keep.take()) {
            std::fs::copy(&dump, dir.join(format!("{label}.cg"))).unwrap();
        }
        for entry in std::fs::read_dir(&self.dumps).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("cg.")
                && path != dump
            {
                let _ = std::fs::remove_file(path);
            }
        }
        let _ = std::fs::remove_file(dump);
        total / n as f64
    }
}

/// The inclusive instructions of Redis's `call()` in a callgrind dump.
fn instructions_in_call(dump: &Path) -> f64 {
    let out = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=100"])
        .arg(dump)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains(":call ["))
        .and_then(|l| l.split_whitespace().next())
        .map(|n| n.replace(',', "").parse().unwrap())
        .unwrap_or_else(|| panic!("no call() in callgrind_annotate's output:\n{text}"))
}

/// Calls per command name since the last `CONFIG RESETSTAT`, over `n`.
fn commands_per_op(conn: &mut redis::Connection, n: u64) -> BTreeMap<String, f64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls: f64 = rest
                .split(',')
                .next()?
                .strip_prefix("calls=")?
                .parse()
                .ok()?;
            Some((name.to_uppercase(), calls / n as f64))
        })
        // The bench's own: Redis 7 names a subcommand "CONFIG|RESETSTAT".
        .filter(|(name, _)| !["INFO", "CONFIG"].contains(&name.split('|').next().unwrap()))
        .collect()
}

/// The first line of the mutex's acquire and release after their
/// prelude: today's, and the one before the scripts' second performance pass
/// (for the report's before column).
const FIRST_READ: [&str; 3] = [
    "local stored = redis.call('GET', LOCK)",
    "local token, holder, calls, mark, fence, left = read_lock()",
    "local held, holder, calls, mark, fence = read_lock()",
];

/// The commands each operation sent over the `n` counted and `n` warm-up
/// operations of a path (`commands_per_op`), less the plain `SET` the bench
/// sends after each one.
fn commands_besides_plain_set(conn: &mut redis::Connection, n: u64) -> BTreeMap<String, f64> {
    let mut sent = commands_per_op(conn, 2 * n);
    if let Some(set) = sent.get_mut("SET") {
        *set -= 1.0;
    }
    sent
}

/// `source` cut before its first line that reads the lock, ending in
/// `return 1`: the prelude of a fast path.
fn prelude(source: &str) -> String {
    let at = FIRST_READ
        .iter()
        .find_map(|marker| source.find(&format!("\n{marker}")))
        .unwrap_or_else(|| panic!("no line of {FIRST_READ:?} in the script"));
    format!("{}\nreturn 1\n", &source[..at])
}

struct Row {
    path: &'static str,
    whole: f64,
    call: f64,
    prelude: f64,
    commands: f64,
    sent: BTreeMap<String, f64>,
}

fn main() {
    let Some(counted) = Counted::start() else {
        return;
    };
    let n = batch();
    let server = &counted.server;
    // What is counted as Redisson's must be a lock that works.
    redisson::check(server);
    let mut conn = server.conn();
    let noop = redis::Script::new("return 1");
    let unit = counted.per_op(n, |_| {
        let _: i64 = noop.invoke(&mut conn).unwrap();
    });

    // The unfair cycle: SET NX PX, then compare-and-delete.
    let cad = redis::Script::new(common::UNFAIR_RELEASE);
    let unfair = counted.per_op(n, |i| common::unfair_cycle(&mut conn, &cad, i + 1));

    let lock = ScriptedLock::new(server, "bench:cost");
    let keys = lock.keys.clone();
    let acquire = Script::of(LockKind::Mutex, Op::Acquire).source();
    let release = Script::of(LockKind::Mutex, Op::Release).source();
    // A script given the KEYS and ARGV of a path (its values as the
    // client sends them), and a batch of such calls.
    let with_args = |script: &redis::Script, args: &[String], conn: &mut redis::Connection| {
        let mut inv = script.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in args {
            inv.arg(a);
        }
        let _: redis::Value = inv.invoke(conn).unwrap();
    };
    let acquire_args: Vec<String> = ["fairlock:wake:", "600000", "c1:1", "7", "60000", SETTINGS]
        .map(String::from)
        .to_vec();
    // As a client sends a release whose lease it vouches for (the defaults).
    let release_args: Vec<String> = ["fairlock:wake:", "600000", "c1:1#7", "1795728762856307"]
        .map(String::from)
        .to_vec();
    let free_value = &fake_queue::versioned("1795728762856307 - c1:1#6");
    let held_value = &fake_queue::versioned("1795728762856307 c1:1#7 600000 c1:1#6");
    let set_free = |conn: &mut redis::Connection| {
        let () = redis::cmd("SET")
            .arg(&keys[0])
            .arg(free_value)
            .arg("PX")
            .arg(600_000)
            .query(conn)
            .unwrap();
    };
    let plain_set = counted.per_op(n, |_| set_free(&mut conn));

    let mut rows = Vec::new();
    // take: a free lock nobody waits for (then a plain SET frees it again).
    {
        let _: () = redis::cmd("DEL").arg(&keys).query(&mut conn).unwrap();
        set_free(&mut conn);
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut conn)
            .unwrap();
        let whole = counted.per_op(n, |i| {
            let reply = lock.acquire(&mut conn, "c1:1", 1_000 + i);
            assert_eq!(reply[0], 1, "the lock was free");
            set_free(&mut conn);
        }) - plain_set;
        let sent = commands_besides_plain_set(&mut conn, n);
        let call = counted.per_op(n, |_| with_args(&noop, &acquire_args, &mut conn));
        let cut = redis::Script::new(&prelude(acquire));
        let pre = counted.per_op(n, |_| with_args(&cut, &acquire_args, &mut conn));
        let only = redis::Script::new(&format!(
            "redis.call('GET', KEYS[1]) \
             redis.call('SET', KEYS[1], '{held_value}', 'PX', '660000') return 1"
        ));
        let commands =
            counted.per_op(n, |_| with_args(&only, &acquire_args, &mut conn)) - plain_set;
        // `only` leaves a held value; each batch starts from the free one.
        set_free(&mut conn);
        rows.push(Row {
            path: "take",
            whole,
            call,
            prelude: pre - call,
            commands: commands + plain_set - call,
            sent,
        });
    }
    // release that frees: the lock held by c1:1's call 7 (a plain SET),
    // released.
    {
        let set_held = |conn: &mut redis::Connection| {
            let () = redis::cmd("SET")
                .arg(&keys[0])
                .arg(held_value)
                .arg("PX")
                .arg(660_000)
                .query(conn)
                .unwrap();
        };
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut conn)
            .unwrap();
        let whole = counted.per_op(n, |_| {
            set_held(&mut conn);
            let holder = (
                "c1:1".to_owned(),
                "1795728762856307".to_owned(),
                "7".to_owned(),
            );
            assert_eq!(lock.release(&mut conn, &holder), 0);
        }) - plain_set;
        let sent = commands_besides_plain_set(&mut conn, n);
        let call = counted.per_op(n, |_| with_args(&noop, &release_args, &mut conn));
        let cut = redis::Script::new(&prelude(release));
        let pre = counted.per_op(n, |_| with_args(&cut, &release_args, &mut conn));
        let only = redis::Script::new(&format!(
            "redis.call('GET', KEYS[1]) \
             redis.call('SET', KEYS[1], '{free_value}', 'KEEPTTL') return 1"
        ));
        let commands = counted.per_op(n, |_| with_args(&only, &release_args, &mut conn));
        rows.push(Row {
            path: "release that frees",
            whole,
            call,
            prelude: pre - call,
            commands: commands - call,
            sent,
        });
    }
    // With one waiter queued on each of `n` locks: releases that hand
    // over, then arrivals that queue behind the new holders (each queue
    // is one long again); twice, the first batch to warm up.
    {
        let locks: Vec<ScriptedLock> = (0..n)
            .map(|i| ScriptedLock::new(server, &format!("bench:cost:q{i}")))
            .collect();
        let mut next = 0u64;
        let (mut handover, mut arrival) = (0.0, 0.0);
        let (mut handover_sent, mut arrival_sent) = (BTreeMap::new(), BTreeMap::new());
        for _ in 0..2 {
            for l in &locks {
                let _: () = redis::cmd("DEL").arg(&l.keys).query(&mut conn).unwrap();
                next += 1;
                assert_eq!(l.acquire(&mut conn, "holder:1", next)[0], 1);
                next += 1;
                assert_eq!(l.acquire(&mut conn, &format!("w{next}:1"), next)[0], 0);
            }
            let holders: Vec<_> = locks.iter().map(|l| l.holder(&mut conn)).collect();
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut conn)
                .unwrap();
            handover = counted.count(n, || {
                for (l, holder) in locks.iter().zip(&holders) {
                    assert_eq!(l.release(&mut conn, holder), 0);
                }
            });
            handover_sent = commands_per_op(&mut conn, n);
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut conn)
                .unwrap();
            let first = next;
            arrival = counted.count(n, || {
                for (i, l) in locks.iter().enumerate() {
                    let id = first + 1 + i as u64;
                    assert_eq!(l.acquire(&mut conn, &format!("n{id}:1"), id)[0], 0);
                }
            });
            next += n;
            arrival_sent = commands_per_op(&mut conn, n);
        }
        let (take, free) = (&rows[0], &rows[1]);
        let queued = [
            (
                "arrival that queues (1 queued)",
                arrival,
                take.call,
                take.prelude,
                arrival_sent,
            ),
            (
                "release that hands over (1 queued)",
                handover,
                free.call,
                free.prelude,
                handover_sent,
            ),
        ];
        for (path, whole, call, prelude, sent) in queued {
            rows.push(Row {
                path,
                whole,
                call,
                prelude,
                commands: f64::NAN,
                sent,
            });
        }
    }

    // Whole cycles, as a client sends them: by EVALSHA, and by FCALL of
    // the library where the server has Functions; for every kind of lock.
    let rw = u64::from(fairlock::__test_support::RW_CAPACITY);
    let locks = [
        (
            "mutex",
            Driven::new(LockKind::Mutex, "bench:cycles", None),
            true,
        ),
        (
            "semaphore",
            Driven::new(LockKind::Semaphore, "bench:cycles", Some([1, 1])),
            true,
        ),
        (
            "rwlock read",
            Driven::new(LockKind::RwLock, "bench:cycles:r", Some([rw, 1])),
            false,
        ),
        (
            "rwlock write",
            Driven::new(LockKind::RwLock, "bench:cycles:w", Some([rw, rw])),
            true,
        ),
    ];
    let mut callers = vec![("EVALSHA", Caller::EvalSha)];
    let loaded = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(fairlock::__test_support::library_source())
        .query::<String>(&mut conn);
    match loaded {
        Ok(_) => callers.push(("FCALL", Caller::FCall)),
        Err(err) => eprintln!("server_cost: no FCALL rows: FUNCTION LOAD: {err}"),
    }
    if let Ok(only) = std::env::var(CYCLES_ENV) {
        // The quick mode: the cycles whose label starts with one of the
        // prefixes, and nothing else.
        let prefixes: Vec<&str> = only.split(',').collect();
        let wanted = |label: &str| prefixes.iter().any(|p| label.starts_with(p));
        for (how, caller) in callers {
            for (kind, lock, handoff) in &locks {
                let label = format!("{how}-{}", kind.replace(' ', "-"));
                if wanted(&label) {
                    let [uncontended, handoff, handoff_7] =
                        cycles_of(&counted, n, &mut conn, caller, lock, *handoff, &label);
                    println!(
                        "{label}: uncontended {uncontended:.0}, handoff {handoff:.0}, 7 queued {handoff_7:.0}"
                    );
                }
            }
        }
        // The floors (`floor-Fairlocks`, `floor-Packed`, `floor-Entries`,
        // `floor-Scored`).
        if prefixes.iter().any(|p| p.starts_with("floor")) && floor::load(&mut conn) {
            let keys = fairlock::__test_support::LockKeys::of_kind(
                "fairlock",
                "bench:floor",
                LockKind::Mutex,
            )
            .unwrap()
            .common()
            .to_vec();
            let layouts = [
                floor::Layout::Fairlocks,
                floor::Layout::Packed,
                floor::Layout::Entries,
                floor::Layout::Scored,
            ];
            for layout in layouts {
                let label = format!("floor-{layout:?}");
                if wanted(&label) {
                    let f = floor_of(&counted, n, &mut conn, &keys, "", layout);
                    println!(
                        "{label}: uncontended {:.0}, handoff {:.0}, 7 queued {:.0}, heartbeat {:.0}",
                        f.uncontended, f.handoff, f.handoff_7, f.heartbeat
                    );
                }
            }
        }
        return;
    }
    let redisson = redisson_cost(&counted, n, &mut conn);
    if !common::measuring() {
        // The replay sends what the description says: 8 commands to take
        // a free lock, 6 to free it (no PUBLISH: nobody to wake); 8 to
        // wake the head, 10 for the head to take it, 8 to queue.
        assert_eq!(
            commands_and_calls(&redisson.sent_uncontended),
            (14.0, 2.0),
            "{:?}",
            redisson.sent_uncontended
        );
        assert_eq!(
            commands_and_calls(&redisson.sent_handoff),
            (26.0, 3.0),
            "{:?}",
            redisson.sent_handoff
        );
    }
    let mut cycles = Vec::new();
    let mut cycles_json = Vec::new();
    for (how, caller) in callers {
        for (kind, lock, handoff) in &locks {
            let label = format!("{how}-{}", kind.replace(' ', "-"));
            let [uncontended, handoff, handoff_7] =
                cycles_of(&counted, n, &mut conn, caller, lock, *handoff, &label);
            cycles_json.push(format!(
                "{{\"by\": \"{how}\", \"kind\": \"{kind}\", \"uncontended\": {uncontended:.0}, \"handoff\": {}, \"handoff_7\": {}, \"per_redisson\": {{\"uncontended\": {}, \"handoff\": {}}}}}",
                number(handoff),
                number(handoff_7),
                ratio(uncontended / redisson.uncontended),
                ratio(handoff / redisson.handoff)
            ));
            cycles.push((how, *kind, uncontended, handoff, handoff_7));
        }
    }
    // The mutex's floors (benches/floor/): its cycle's fast paths alone,
    // with fairlock's arguments and with them packed, and its handoff's
    // arrival and release alone (1 and 7 queued); then both on a layout
    // fairlock does not use, and the handoff on a third (deadlines in the
    // queue entries' scores).
    let floors: Vec<Floor> = if floor::load(&mut conn) {
        let keys =
            fairlock::__test_support::LockKeys::of_kind("fairlock", "bench:floor", LockKind::Mutex)
                .unwrap()
                .common()
                .to_vec();
        [
            ("fairlock's arguments", floor::Layout::Fairlocks),
            ("arguments packed", floor::Layout::Packed),
            (
                "another layout: deadlines in the entries",
                floor::Layout::Entries,
            ),
            (
                "a third layout: deadlines in the entries' scores",
                floor::Layout::Scored,
            ),
        ]
        .into_iter()
        .map(|(what, layout)| floor_of(&counted, n, &mut conn, &keys, what, layout))
        .collect()
    } else {
        Vec::new()
    };
    print_cycles(unfair, &redisson, &cycles, &floors);
    // Blocks cost a few thousand instructions each, so a Lua GC step in
    // or out of a batch moves them: five times the batch keeps them
    // within a few hundred.
    let blocks = building_blocks::measure(&counted, 5 * n, &mut conn);

    let mut json = format!(
        "{{\"server\": \"{}\", \"batch\": {n}, \"noop\": {unit:.0}, \"unfair_cycle\": {unfair:.0}, \"paths\": [",
        server_name()
    );
    for (i, row) in rows.iter().enumerate() {
        let sent: Vec<String> = row
            .sent
            .iter()
            .filter(|(_, c)| **c > 0.01)
            .map(|(k, c)| format!("\"{k}\": {c:.2}"))
            .collect();
        json.push_str(&format!(
            "{}{{\"path\": \"{}\", \"whole\": {:.0}, \"call\": {:.0}, \"prelude\": {:.0}, \"commands\": {}, \"rest\": {}, \"sent\": {{{}}}}}",
            if i == 0 { "" } else { ", " },
            row.path,
            row.whole,
            row.call,
            row.prelude,
            number(row.commands),
            number(row.whole - row.call - row.prelude - row.commands),
            sent.join(", ")
        ));
    }
    let steps: Vec<String> = redisson
        .steps
        .iter()
        .map(|(path, whole, sent)| {
            format!(
                "{{\"path\": \"{path}\", \"whole\": {whole:.0}, \"sent\": {}}}",
                sent_json(sent)
            )
        })
        .collect();
    json.push_str(&format!(
        "], \"cycles\": [{}], \"floors\": [{}], \"redisson\": {{\"by\": \"EVALSHA\", \"uncontended\": {:.0}, \"handoff\": {:.0}, \"sent_uncontended\": {}, \"sent_handoff\": {}, \"paths\": [{}]}}, \"building_blocks\": {blocks}}}",
        cycles_json.join(", "),
        floors
            .iter()
            .map(|f| format!(
                "{{\"layout\": \"{}\", \"uncontended\": {:.0}, \"handoff\": {}, \"handoff_7\": {}, \"heartbeat\": {}}}",
                f.what,
                f.uncontended,
                number(f.handoff),
                number(f.handoff_7),
                number(f.heartbeat)
            ))
            .collect::<Vec<_>>()
            .join(", "),
        redisson.uncontended,
        redisson.handoff,
        sent_json(&redisson.sent_uncontended),
        sent_json(&redisson.sent_handoff),
        steps.join(", ")
    ));
    println!("{json}");
    common::write_json("server_cost", &json);
}

/// A figure for the JSON: `null` when not measured (NaN).
fn number(x: f64) -> String {
    if x.is_nan() {
        "null".to_owned()
    } else {
        format!("{x:.0}")
    }
}

/// A ratio for the JSON: `null` when not measured (NaN, or 0/0 when
/// nothing is counted).
fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "null".to_owned()
    }
}

/// The cycles' table: each kind's cycles by each caller beside Redisson's
/// and the unfair cycle, with fairlock / Redisson and fairlock / unfair.
/// A floor measured (benches/floor/): what its layout is, its cycle, its
/// handoff with 1 and 7 queued, and a queued waiter's heartbeat (NaN where
/// it has none).
struct Floor {
    what: &'static str,
    uncontended: f64,
    handoff: f64,
    handoff_7: f64,
    heartbeat: f64,
}

/// Counts the floor of `layout` on `keys`: the uncontended cycle, and
/// but for the packed arguments (a cycle only) the handoff with one
/// waiter queued and with seven, as `cycles_of` drives fairlock's; then,
/// where the layout can renew an entry, the heartbeat of the last of the
/// seven.
fn floor_of(
    counted: &Counted,
    n: u64,
    conn: &mut redis::Connection,
    keys: &[String],
    what: &'static str,
    layout: floor::Layout,
) -> Floor {
    let _: () = redis::cmd("DEL").arg(keys).query(conn).unwrap();
    let mut last = 1_795_728_762_856_307;
    let free = match layout {
        floor::Layout::Entries => format!("e{} {last} - c1:1#6", fairlock::DATA_FORMAT),
        _ => fake_queue::versioned(&format!("{last} - c1:1#6")),
    };
    let _: () = redis::cmd("SET")
        .arg(&keys[0])
        .arg(free)
        .arg("PX")
        .arg(600_000)
        .query(conn)
        .unwrap();
    // Each take's token is the last one + 1, read from the key.
    let label = format!("floor-{layout:?}");
    counted.keep_as(format!("{label}-uncontended"));
    let uncontended = counted.per_op(n, |i| {
        let token = floor::cycle(conn, keys, layout, 10 + i);
        assert_eq!(token, last + 1, "tokens go up by one");
        last = token;
    });
    let mut handoffs = [f64::NAN; 2];
    let mut heartbeat = f64::NAN;
    if !matches!(layout, floor::Layout::Packed) {
        // A holder and one waiter, as cycles_of starts them.
        let token = last + 1;
        let (held, px) = layout.held(token, "h:1", 1);
        let _: () = redis::cmd("SET")
            .arg(&keys[0])
            .arg(held)
            .arg("PX")
            .arg(px)
            .query(conn)
            .unwrap();
        let mut holder = ("h:1".to_owned(), token.to_string(), "1".to_owned());
        let mut queued = 0;
        for (depth, handoff) in [1, 7].into_iter().zip(handoffs.iter_mut()) {
            // Waiters queue behind the holder; each step hands over to the
            // head and queues a newcomer, so the queue stays `depth` long.
            while queued < depth {
                queued += 1;
                floor::arrive(conn, keys, layout, &format!("q{queued}:1"), 100 + queued);
            }
            counted.keep_as(format!("{label}-handoff-{depth}"));
            *handoff = counted.per_op(n, |i| {
                let newcomer = format!("n{depth}-{i}:1");
                let position =
                    floor::handoff(conn, keys, layout, &mut holder, &newcomer, 1_000 + i);
                assert_eq!(position, depth as i64 - 1, "the queue stays {depth} long");
            });
        }
        if !matches!(layout, floor::Layout::Entries) {
            // The last newcomer queued (per_op ran 2n steps), the last of seven.
            let entry = format!("n7-{}:1 {} 60000 0", 2 * n - 1, 1_000 + 2 * n - 1);
            counted.keep_as(format!("{label}-heartbeat"));
            heartbeat = counted.per_op(n, |_| {
                assert_eq!(floor::heartbeat(conn, keys, layout, &entry), 6);
            });
        }
    }
    Floor {
        what,
        uncontended,
        handoff: handoffs[0],
        handoff_7: handoffs[1],
        heartbeat,
    }
}

fn print_cycles(
    unfair: f64,
    redisson: &RedissonCost,
    cycles: &[(&str, &str, f64, f64, f64)],
    floors: &[Floor],
) {
    let k = |x: f64| {
        if x.is_nan() {
            "-".to_owned()
        } else {
            format!("{:.1}k", x / 1000.0)
        }
    };
    let x = |r: f64| {
        if r.is_finite() {
            format!("{r:.2}x")
        } else {
            "-".to_owned()
        }
    };
    println!("server work per cycle, instructions in call()");
    println!(
        "  {:<40} {:>11} {:>9} {:>13} {:>13} {:>9}",
        "", "uncontended", "handoff", "/ Redisson", "/ Redisson", "/ unfair"
    );
    println!(
        "  {:<40} {:>11}",
        "unfair (SET NX PX + compare-and-delete)",
        k(unfair)
    );
    println!(
        "  {:<40} {:>11} {:>9}",
        "Redisson fair lock (EVALSHA)",
        k(redisson.uncontended),
        k(redisson.handoff)
    );
    for (how, kind, uncontended, handoff, handoff_7) in cycles {
        println!(
            "  {:<40} {:>11} {:>9} {:>13} {:>13} {:>9} {:>17}",
            format!("fairlock {kind} ({how})"),
            k(*uncontended),
            k(*handoff),
            x(uncontended / redisson.uncontended),
            x(handoff / redisson.handoff),
            x(uncontended / unfair),
            format!("{} (7 queued)", k(*handoff_7))
        );
    }
    for f in floors {
        println!(
            "  {:<40} {:>11} {:>9} {:>13} {:>13} {:>9} {:>17}",
            format!("floor of the mutex, {}", f.what),
            k(f.uncontended),
            k(f.handoff),
            x(f.uncontended / redisson.uncontended),
            x(f.handoff / redisson.handoff),
            x(f.uncontended / unfair),
            format!("{} (7 queued)", k(f.handoff_7))
        );
        if !f.heartbeat.is_nan() {
            println!(
                "  {:<40} {:>11}",
                "  its heartbeat (1 of 7 waiters)",
                k(f.heartbeat)
            );
        }
    }
    println!("  Redisson's steps:");
    for (path, whole, sent) in &redisson.steps {
        let (commands, calls) = commands_and_calls(sent);
        println!(
            "    {path:<40} {:>9} ({commands:.0} commands in {calls:.0} script)",
            k(*whole)
        );
    }
}

/// The server counted, e.g. "Redis 7.0.15".
fn server_name() -> String {
    let (major, minor, patch) = fairlock_test_support::server_version();
    let name = if fairlock_test_support::server_is_valkey() {
        "Valkey"
    } else {
        "Redis"
    };
    format!("{name} {major}.{minor}.{patch}")
}

/// How a cycle calls the mutex's scripts.
#[derive(Clone, Copy)]
enum Caller {
    EvalSha,
    FCall,
}

impl Caller {
    /// Runs `op` of a lock of `kind` on `keys` with ARGV `args`, as this
    /// caller.
    fn run(
        self,
        conn: &mut redis::Connection,
        kind: LockKind,
        op: Op,
        keys: &[String],
        args: &[String],
    ) -> redis::Value {
        let script = Script::of(kind, op);
        match self {
            Caller::EvalSha => {
                let script = redis::Script::new(script.source());
                let mut inv = script.prepare_invoke();
                for k in keys {
                    inv.key(k);
                }
                for a in args {
                    inv.arg(a);
                }
                inv.invoke(conn).unwrap()
            }
            Caller::FCall => redis::cmd("FCALL")
                .arg(fairlock::__test_support::function_name(script))
                .arg(keys.len())
                .arg(keys)
                .arg(args)
                .query(conn)
                .unwrap(),
        }
    }
}

/// A lock of one kind as the cycles below drive it: its keys and what
/// each acquire asks for (capacity and units after the owner, call and lease).
struct Driven {
    kind: LockKind,
    keys: Vec<String>,
    counted: Option<[u64; 2]>,
}

impl Driven {
    fn new(kind: LockKind, name: &str, counted: Option<[u64; 2]>) -> Driven {
        let keys = fairlock::__test_support::LockKeys::of_kind("fairlock", name, kind)
            .unwrap()
            .common()
            .to_vec();
        Driven {
            kind,
            keys,
            counted,
        }
    }

    fn acquire(
        &self,
        caller: Caller,
        conn: &mut redis::Connection,
        owner: &str,
        id: u64,
    ) -> redis::Value {
        let common = ["fairlock:wake:", "600000", owner].map(String::from);
        let Some([capacity, units]) = self.counted else {
            // The mutex's layout: the take's own three, then the rest as one.
            let mut args = common.to_vec();
            args.extend([id.to_string(), "60000".to_owned(), SETTINGS.to_owned()]);
            return caller.run(conn, self.kind, Op::Acquire, &self.keys, &args);
        };
        // The counted layout: the take's own five, then the rest as one.
        let mut args = common.to_vec();
        args.extend([
            id.to_string(),
            "60000".to_owned(),
            capacity.to_string(),
            units.to_string(),
            SETTINGS.to_owned(),
        ]);
        caller.run(conn, self.kind, Op::Acquire, &self.keys, &args)
    }

    fn release(
        &self,
        caller: Caller,
        conn: &mut redis::Connection,
        owner: &str,
        token: i64,
        id: u64,
    ) -> redis::Value {
        let args = [
            "fairlock:wake:",
            "600000",
            &format!("{owner}#{id}"),
            &token.to_string(),
        ]
        .map(String::from);
        caller.run(conn, self.kind, Op::Release, &self.keys, &args)
    }
}

/// Instructions in `call()` per uncontended cycle (take + release that
/// frees) and per handoff cycle (release that hands over + arrival that
/// queues), with one waiter queued and with seven (as when eight threads
/// contend), as `caller` sends them to `lock` (the handoffs only where an
/// arrival queues behind a holder: not for reads); the profile mode keeps
/// their dumps as `<label>-<cycle>.cg`.
fn cycles_of(
    counted: &Counted,
    n: u64,
    conn: &mut redis::Connection,
    caller: Caller,
    lock: &Driven,
    handoff: bool,
    label: &str,
) -> [f64; 3] {
    let _: () = redis::cmd("DEL").arg(&lock.keys).query(conn).unwrap();
    counted.keep_as(format!("{label}-uncontended"));
    let uncontended = counted.per_op(n, |i| {
        let token: i64 =
            redis::from_redis_value(lock.acquire(caller, conn, "c1:1", 10 + i)).unwrap();
        assert_eq!(
            lock.release(caller, conn, "c1:1", token, 10 + i),
            redis::Value::Int(0)
        );
    });
    if !handoff {
        return [uncontended, f64::NAN, f64::NAN];
    }
    // A holder and one waiter; each step hands over to the waiter and
    // queues a newcomer behind it.
    let token: i64 = redis::from_redis_value(lock.acquire(caller, conn, "h:1", 1)).unwrap();
    let mut holder = ("h:1".to_owned(), token, 1u64);
    assert_ne!(lock.acquire(caller, conn, "w:1", 2), redis::Value::Int(0));
    let mut handoffs = [0.0; 2];
    for (depth, handoff) in [1, 7].into_iter().zip(handoffs.iter_mut()) {
        // Six more waiters behind the one queued, for the second batch.
        for j in 1..depth {
            let owner = format!("q{j}:1");
            assert_ne!(
                lock.acquire(caller, conn, &owner, 100 + j),
                redis::Value::Int(0)
            );
        }
        counted.keep_as(format!("{label}-handoff-{depth}"));
        *handoff = counted.per_op(n, |i| {
            let (owner, token, id) = &holder;
            let reply: Vec<redis::Value> =
                redis::from_redis_value(words(lock.release(caller, conn, owner, *token, *id)))
                    .unwrap();
            let next: String = redis::from_redis_value(reply[0].clone()).unwrap();
            let next_id: u64 = redis::from_redis_value(reply[1].clone()).unwrap();
            let next_token: i64 = redis::from_redis_value(reply[2].clone()).unwrap();
            holder = (next, next_token, next_id);
            let newcomer = format!("n{depth}-{i}:1");
            let queued: Vec<i64> =
                redis::from_redis_value(words(lock.acquire(caller, conn, &newcomer, 1_000 + i)))
                    .unwrap();
            assert_eq!(queued[0], 0, "the newcomer queued");
        });
    }
    [uncontended, handoffs[0], handoffs[1]]
}

/// Redisson's fair lock by the same count: its cycles as fairlock's are
/// counted (`cycles_of`), each step alone, and the commands of each.
struct RedissonCost {
    uncontended: f64,
    handoff: f64,
    sent_uncontended: BTreeMap<String, f64>,
    sent_handoff: BTreeMap<String, f64>,
    steps: Vec<(&'static str, f64, BTreeMap<String, f64>)>,
}

/// Counts Redisson's replayed fair lock (`redisson/`), by EVALSHA as its
/// client sends it: the uncontended cycle (lock + unlock of a free lock
/// nobody waits for) and the handoff per acquisition as fairlock's handoff
/// cycle counts it (one waiter queued behind a holder: the unlock that
/// wakes the head, the head's acquire that takes the lock, and a
/// newcomer's acquire that queues behind it), then each step over `n`
/// locks, with `lock()`'s second try (a queued waiter asks again after it
/// subscribed), which that cycle leaves out as fairlock's leaves out its
/// client's waits.
fn redisson_cost(counted: &Counted, n: u64, conn: &mut redis::Connection) -> RedissonCost {
    use redisson::{owner, FairLock};
    let lock = FairLock::new("bench:redisson");
    lock.clear(conn);
    let reset = |conn: &mut redis::Connection| {
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query(conn).unwrap();
    };
    reset(conn);
    counted.keep_as("EVALSHA-redisson-uncontended".into());
    let uncontended = counted.per_op(n, |_| {
        assert_eq!(lock.acquire(conn, &owner(1)), None, "the lock was free");
        assert_eq!(lock.unlock(conn, &owner(1)), Some(1), "it is free again");
    });
    let sent_uncontended = commands_per_op(conn, 2 * n);

    // A holder and one waiter; each step hands over to the waiter and
    // queues a newcomer behind it.
    let (mut holder, mut waiter) = (owner(2), owner(3));
    assert_eq!(lock.acquire(conn, &holder), None);
    assert!(lock.acquire(conn, &waiter).is_some());
    reset(conn);
    counted.keep_as("EVALSHA-redisson-handoff".into());
    let handoff = counted.per_op(n, |i| {
        assert_eq!(lock.unlock(conn, &holder), Some(1), "freed for the head");
        assert_eq!(lock.acquire(conn, &waiter), None, "the head takes it");
        let newcomer = owner(1_000 + i);
        assert!(lock.acquire(conn, &newcomer).is_some(), "it queues");
        holder = std::mem::replace(&mut waiter, newcomer);
    });
    let sent_handoff = commands_per_op(conn, 2 * n);
    lock.clear(conn);

    // Each step alone, over `n` locks in the same state; twice, the first
    // batch to warm up.
    let locks: Vec<FairLock> = (0..n)
        .map(|i| FairLock::new(&format!("bench:redisson:{i}")))
        .collect();
    let mut steps = Vec::new();
    for _ in 0..2 {
        steps.clear();
        let mut step = |name: &'static str,
                        conn: &mut redis::Connection,
                        run: &dyn Fn(&mut redis::Connection, &FairLock)| {
            reset(conn);
            let whole = counted.count(n, || {
                for l in &locks {
                    run(conn, l);
                }
            });
            steps.push((name, whole, commands_per_op(conn, n)));
        };
        for l in &locks {
            l.clear(conn);
        }
        step("take (free, nobody waits)", conn, &|c, l| {
            assert_eq!(l.acquire(c, &owner(1)), None)
        });
        step("release that frees", conn, &|c, l| {
            assert_eq!(l.unlock(c, &owner(1)), Some(1))
        });
        for l in &locks {
            assert_eq!(l.acquire(conn, &owner(2)), None);
        }
        step("arrival that queues (0 queued)", conn, &|c, l| {
            assert!(l.acquire(c, &owner(3)).is_some())
        });
        step("lock()'s second try, queued", conn, &|c, l| {
            assert!(l.acquire(c, &owner(3)).is_some())
        });
        step("release that wakes the head (1 queued)", conn, &|c, l| {
            assert_eq!(l.unlock(c, &owner(2)), Some(1))
        });
        step("take by the woken head", conn, &|c, l| {
            assert_eq!(l.acquire(c, &owner(3)), None)
        });
    }
    for l in &locks {
        l.clear(conn);
    }
    RedissonCost {
        uncontended,
        handoff,
        sent_uncontended,
        sent_handoff,
        steps,
    }
}

/// The commands in `sent` other than the calls themselves (EVALSHA,
/// FCALL), and the calls.
fn commands_and_calls(sent: &BTreeMap<String, f64>) -> (f64, f64) {
    let calls: f64 = sent
        .iter()
        .filter(|(k, _)| ["EVALSHA", "FCALL", "EVAL"].contains(&k.as_str()))
        .map(|(_, c)| c)
        .sum();
    (sent.values().sum::<f64>() - calls, calls)
}

/// `sent` as a JSON object.
fn sent_json(sent: &BTreeMap<String, f64>) -> String {
    let fields: Vec<String> = sent
        .iter()
        .filter(|(_, c)| **c > 0.01)
        .map(|(k, c)| format!("\"{k}\": {c:.2}"))
        .collect();
    format!("{{{}}}", fields.join(", "))
}
