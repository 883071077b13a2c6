//! The `fairlock` command's other kinds of lock, driven as a built binary
//! against a private redis-server per test: `run --semaphore N` (the
//! semaphore), `run --read` / `--write` (the reader-writer lock),
//! `status` listing every holder of every kind, the permits mismatch,
//! `permits NAME N` changing a semaphore's number with waiters queued, and
//! the clap conflicts between the kinds' flags.
//!
//! Commands record what they do in a scratch log with `>>` (O_APPEND: each
//! short line is one atomic write), "start N TOKEN" after the lock was
//! taken and "end N" before it is given back, so the log's order bounds
//! what the lock let overlap.

use crate::cli_support;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use cli_support::{
    assert_one_line_error, code, fairlock, output, read_pid, sh, status_json, stderr, stdout,
    steady_client, Proc, Scratch, PATIENCE,
};
use fairlock::__test_support::LockKeys;
use fairlock::LockKind;
use fairlock_test_support::fake_queue::{counted_lease_ends, set_counted_lease_end};
use fairlock_test_support::{wait_until, RedisServer};

/// The exit code of a permits mismatch (main.rs's `exit::PERMITS_MISMATCH`).
const PERMITS_MISMATCH: i32 = 78;

/// A command for `sh -c` that logs "start N TOKEN", waits (at most 10 s)
/// until the log holds `partners` starts in all, stays a little, and logs
/// "end N". Waiting for partners makes the overlap the lock allows happen
/// for sure, rather than by luck of timing.
fn logged(log: &Path, n: usize, partners: usize) -> String {
    let log = log.display();
    format!(
        "echo \"start {n} $FAIRLOCK_TOKEN\" >> '{log}'; \
         i=0; while [ \"$(grep -c '^start' '{log}')\" -lt {partners} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; \
         sleep 0.3; echo \"end {n}\" >> '{log}'"
    )
}

/// What a log says: each command's token by its number, in the order
/// they started, and the most commands running at once.
struct Log {
    starts: Vec<(usize, u64)>,
    max_running: usize,
    ended: usize,
    /// For each command: how many others ran at some moment while it did.
    overlapped: Vec<(usize, usize)>,
}

fn read_log(path: &Path) -> Log {
    let text = std::fs::read_to_string(path).expect("the commands wrote the log");
    let mut running: Vec<usize> = Vec::new();
    let mut log = Log {
        starts: Vec::new(),
        max_running: 0,
        ended: 0,
        overlapped: Vec::new(),
    };
    let mut peers: std::collections::HashMap<usize, usize> = Default::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["start", n, token] => {
                let n: usize = n.parse().unwrap();
                log.starts.push((n, token.parse().expect("FAIRLOCK_TOKEN")));
                running.push(n);
                log.max_running = log.max_running.max(running.len());
                for &r in &running {
                    let others = running.len() - 1;
                    let seen = peers.entry(r).or_default();
                    *seen = (*seen).max(others);
                }
            }
            ["end", n] => {
                let n: usize = n.parse().unwrap();
                running.retain(|&r| r != n);
                log.ended += 1;
            }
            _ => panic!("unexpected log line {line:?}"),
        }
    }
    let mut overlapped: Vec<(usize, usize)> = peers.into_iter().collect();
    overlapped.sort_unstable();
    log.overlapped = overlapped;
    log
}

/// The tokens ordered by command number increase: the lock was granted in
/// the order the commands queued.
fn assert_granted_in_order(log: &Log) {
    let mut by_number = log.starts.clone();
    by_number.sort_unstable();
    let tokens: Vec<u64> = by_number.iter().map(|&(_, token)| token).collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens by arrival: {by_number:?}"
    );
}

#[test]
fn permits_2_runs_at_most_two_commands_at_once_in_arrival_order() {
    let server = RedisServer::start();
    let scratch = Scratch::new("permits");
    let log = scratch.path("log");
    let client = steady_client(&server);
    let sem = client.fair_semaphore("pool", 2);
    let held = [sem.acquire().unwrap(), sem.acquire().unwrap()];

    let mut runs = Vec::new();
    for n in 1..=5 {
        runs.push(Proc::spawn(
            fairlock(&server)
                .args(["run", "pool", "--semaphore", "2"])
                .args(sh(&logged(&log, n, 2))),
        ));
        assert!(
            wait_until(PATIENCE, || sem.queue_len().unwrap() == n),
            "run {n} did not queue"
        );
    }
    for permit in held {
        permit.unlock().unwrap();
    }
    for run in runs {
        let out = run.finish(PATIENCE * 2);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let log = read_log(&log);
    assert_eq!(log.starts.len(), 5, "every command ran once");
    assert_eq!(log.ended, 5);
    assert_eq!(log.max_running, 2, "two at once, never more");
    assert_granted_in_order(&log);
    let status = sem.status(10).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
}

#[test]
fn a_busy_semaphore_waits_gives_up_and_leaves_like_the_mutex() {
    let server = RedisServer::start();
    let scratch = Scratch::new("busy-sem");
    let marker = scratch.path("ran");
    let client = server.client();
    let sem = client.fair_semaphore("busy", 1);
    let held = sem.acquire().unwrap();

    let out = output(
        fairlock(&server)
            .args([
                "run",
                "busy",
                "--semaphore",
                "1",
                "--wait",
                "300ms",
                "--",
                "touch",
            ])
            .arg(&marker),
        PATIENCE,
    );
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("gave up waiting"), "{}", stderr(&out));
    let out = output(
        fairlock(&server)
            .args([
                "run",
                "busy",
                "--semaphore",
                "1",
                "-n",
                "-E",
                "9",
                "--",
                "touch",
            ])
            .arg(&marker),
        PATIENCE,
    );
    assert_eq!(code(&out), 9, "{}", stderr(&out));
    assert!(stderr(&out).contains("is busy"), "{}", stderr(&out));

    let run = Proc::spawn(
        fairlock(&server)
            .args(["run", "busy", "--semaphore", "1", "--", "touch"])
            .arg(&marker),
    );
    assert!(wait_until(PATIENCE, || sem.queue_len().unwrap() == 1));
    run.signal("INT");
    let out = run.finish(PATIENCE);
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted by SIGINT while waiting"));
    assert_eq!(sem.queue_len().unwrap(), 0, "left the queue");
    assert!(!marker.exists(), "nothing ran");

    // Once free, the command runs with its permit's token.
    held.unlock().unwrap();
    let out = output(
        fairlock(&server)
            .args(["run", "busy", "--semaphore", "1"])
            .args(sh("echo $FAIRLOCK_TOKEN $FAIRLOCK_NAME; exit 3")),
        PATIENCE,
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let printed = stdout(&out);
    let (token, name) = printed.trim().split_once(' ').expect("token and name");
    assert_eq!(name, "busy");
    let token: u64 = token.parse().unwrap();
    assert_eq!(sem.status(0).unwrap().last_fencing_token, Some(token));
    assert_eq!(sem.available().unwrap(), 1, "given back after the command");
}

#[test]
fn a_permits_mismatch_is_exit_78_with_one_line_and_nothing_run() {
    let server = RedisServer::start();
    let scratch = Scratch::new("mismatch");
    let marker = scratch.path("ran");
    let client = server.client();
    let sem = client.fair_semaphore("three", 3);
    let _permit = sem.acquire().unwrap();

    let out = output(
        fairlock(&server)
            .args(["run", "three", "--semaphore", "2", "--", "touch"])
            .arg(&marker),
        PATIENCE,
    );
    assert_one_line_error(&out, PERMITS_MISMATCH, "permits mismatch");
    let err = stderr(&out);
    assert!(
        err.contains("disagree") && err.contains('2') && err.contains('3'),
        "{err}"
    );
    assert!(!marker.exists(), "nothing runs");
    let status = sem.status(10).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (1, 0));
}

#[test]
fn conflicting_kind_flags_are_one_line_usage_errors() {
    let server = RedisServer::start();
    let scratch = Scratch::new("conflicts");
    let marker = scratch.path("ran");
    let marker = marker.to_str().unwrap();
    for args in [
        &["run", "x", "--semaphore", "0"][..],
        &["run", "x", "--semaphore", "1000001"],
        &["run", "x", "--semaphore", "two"],
        &["run", "x", "--semaphore"],
        &["run", "x", "--read", "--write"],
        &["run", "x", "--read", "--semaphore", "2"],
        &["run", "x", "--semaphore", "2", "--write"],
        &["run", "x", "--mutex", "--read"],
        &["run", "x", "--read", "--write", "--semaphore", "2"],
        // The spellings of before (hidden aliases) conflict alike.
        &["run", "x", "--permits", "0"],
        &["run", "x", "--shared", "--exclusive"],
        &["run", "x", "-s", "-x"],
        &["run", "x", "-s", "--permits", "2"],
        &["run", "x", "--permits", "2", "-x"],
    ] {
        let out = output(
            fairlock(&server).args(args).args(["--", "touch", marker]),
            PATIENCE,
        );
        assert_one_line_error(&out, 2, &format!("{args:?}"));
    }
    assert!(!Path::new(marker).exists());
}

/// The mutex, the 2-permit semaphore and the rwlock of `name` are free.
fn assert_every_kind_free(client: &fairlock::Client, name: &str) {
    assert!(!client.fair_mutex(name).is_locked().unwrap());
    assert!(!client.fair_semaphore(name, 2).is_locked().unwrap());
    assert!(!client.fair_rwlock(name).is_locked().unwrap());
}

/// `run`'s flags for each kind of lock, and what its messages call the hold.
const EVERY_KIND: [(&[&str], &str); 4] = [
    (&["--semaphore", "2"], "the permit"),
    (&["--read"], "the read lock"),
    (&["--write"], "the write lock"),
    (&[], "the lock"),
];

#[test]
fn a_fixed_lease_holds_every_kind_for_at_most_its_length() {
    let server = RedisServer::start();
    let client = server.client();
    for (flags, what) in EVERY_KIND {
        // No watchdog renews a --fixed-lease: a command that outlives it
        // has lost its hold, whatever the kind. Its own client, which
        // Redis may count the holder a moment longer, is not named as the
        // one that holds it now.
        let started = Instant::now();
        let out = output(
            fairlock(&server)
                .args(["run", "fixed", "--fixed-lease", "300ms"])
                .args(flags)
                .args(sh("echo $FAIRLOCK_CLIENT_ID; exec sleep 3")),
            PATIENCE,
        );
        assert_eq!(code(&out), 70, "{flags:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("its --fixed-lease of 300ms ran out") && err.contains(what),
            "{flags:?}: {err}"
        );
        let own = stdout(&out).trim().to_owned();
        assert!(
            !own.is_empty() && !err.contains(&own),
            "{flags:?}: {own}: {err}"
        );
        assert!(started.elapsed() < PATIENCE, "{:?}", started.elapsed());
    }
    // Nothing was left held: every kind of the name is free again.
    assert_every_kind_free(&client, "fixed");
}

/// A `--fixed-lease` run that waited its turn holds for its length from
/// the handoff, whatever the kind. It counts the grant from the last
/// request that saw it queued (its own, or a heartbeat): those must come
/// more often than its lease. Here the handoff comes 1.2 s after the
/// waiter started, before the first heartbeat of a 30 s lease's client
/// (1.7 s).
#[test]
fn a_queued_fixed_lease_is_not_lost_on_arrival() {
    let server = RedisServer::start();
    let client = server.client();
    let scratch = Scratch::new("queued-fixed-lease");
    // The holder's flags, and a waiter's it keeps out.
    let kinds: [(&[&str], &[&str], LockKind); 4] = [
        (
            &["--semaphore", "1"],
            &["--semaphore", "1"],
            LockKind::Semaphore,
        ),
        (&["--read"], &["--write"], LockKind::RwLock),
        (&["--write"], &["--read"], LockKind::RwLock),
        (&[], &[], LockKind::Mutex),
    ];
    for (i, (flags, waiting, kind)) in kinds.into_iter().enumerate() {
        let (ready, go) = (
            scratch.path(&format!("r{i}")),
            scratch.path(&format!("g{i}")),
        );
        let script = format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.01; done",
            ready.display(),
            go.display()
        );
        let holder = Proc::spawn(
            fairlock(&server)
                .args(["run", "fq"])
                .args(flags)
                .args(sh(&script)),
        );
        assert!(wait_until(PATIENCE, || ready.exists()), "{flags:?}");
        let started = Instant::now();
        let waiter = Proc::spawn(
            fairlock(&server)
                .args(["run", "fq", "--fixed-lease", "500ms"])
                .args(waiting)
                .args(["--", "true"]),
        );
        let queued = || client.status(kind, "fq", 1).unwrap().queue_len == 1;
        assert!(wait_until(PATIENCE, queued), "{waiting:?}");
        std::thread::sleep(Duration::from_millis(1200).saturating_sub(started.elapsed()));
        std::fs::write(&go, "").unwrap();
        let out = waiter.finish(PATIENCE);
        assert_eq!(code(&out), 0, "{waiting:?}: {}", stderr(&out));
        assert_eq!(code(&holder.finish(PATIENCE)), 0, "{flags:?}");
    }
}

/// `--lease D` is the lease the watchdog renews (etcdctl lock --ttl's
/// meaning), for every kind: a command that outlives D keeps its hold
/// (the old `--lease` was the fixed one: exit 70), the status shows at
/// most D left, and a SIGKILLed fairlock's hold frees within about D.
#[test]
fn a_renewed_lease_outlives_its_length_and_frees_soon_after_a_kill() {
    let server = RedisServer::start();
    let client = server.client();
    let scratch = Scratch::new("renewed-lease");
    for (i, (flags, what)) in EVERY_KIND.into_iter().enumerate() {
        let ready = scratch.path(&format!("ready{i}"));
        let script = format!("touch {}; sleep 1.2", ready.display());
        let run = Proc::spawn(
            fairlock(&server)
                .args(["run", "renewed", "--lease", "600ms"])
                .args(flags)
                .args(["--", "sh", "-c", &script]),
        );
        assert!(wait_until(PATIENCE, || ready.exists()), "{what}");
        let status = status_json(&server, "renewed");
        let kind = status
            .as_object()
            .unwrap()
            .keys()
            .find(|k| *k != "name")
            .unwrap()
            .clone();
        let left = status[&kind]["holders"][0]["remaining_lease_ms"]
            .as_u64()
            .unwrap();
        assert!(left <= 600, "{what}: a lease of 600 ms, {left} ms left");
        let out = run.finish(PATIENCE);
        assert_eq!(
            code(&out),
            0,
            "{what} kept past its lease: {}",
            stderr(&out)
        );
    }
    assert_every_kind_free(&client, "renewed");

    // Killed: nobody renews, the mutex frees within the lease.
    let ready = scratch.path("ready-killed");
    let holder = Proc::spawn(
        fairlock(&server)
            .args(["run", "killed", "--lease", "500ms"])
            .args(sh(&format!("touch {}; sleep 30", ready.display()))),
    );
    assert!(wait_until(PATIENCE, || ready.exists()));
    holder.signal("KILL");
    let killed = Instant::now();
    drop(holder);
    let mutex = client.fair_mutex("killed");
    assert!(wait_until(PATIENCE, || !mutex.is_locked().unwrap()));
    let freed = killed.elapsed();
    eprintln!("--lease 500ms: freed {freed:?} after the SIGKILL");
    assert!(freed < Duration::from_millis(1500), "{freed:?}");
}

#[test]
fn shared_commands_overlap_and_an_exclusive_one_runs_alone_in_arrival_order() {
    let server = RedisServer::start();
    let scratch = Scratch::new("rwlock");
    let (log, marker) = (scratch.path("log"), scratch.path("ran"));
    let client = server.client();
    let rwlock = client.fair_rwlock("catalog");
    let held = rwlock.write().unwrap();

    // Busy either way while a writer holds it.
    for flag in ["--read", "--write"] {
        let out = output(
            fairlock(&server)
                .args(["run", "catalog", flag, "-n", "--", "touch"])
                .arg(&marker),
            PATIENCE,
        );
        assert_eq!(code(&out), 75, "{flag}: {}", stderr(&out));
    }
    assert!(!marker.exists());

    // R R W R R: the first two readers wait for each other (they must
    // overlap to finish quickly), the writer for nobody, the last two for
    // all five starts.
    let plan = [
        ("--read", 2),
        ("--read", 2),
        ("--write", 0),
        ("--read", 5),
        ("--read", 5),
    ];
    let mut runs = Vec::new();
    for (i, (flag, partners)) in plan.into_iter().enumerate() {
        let n = i + 1;
        runs.push(Proc::spawn(
            fairlock(&server)
                .args(["run", "catalog", flag])
                .args(sh(&logged(&log, n, partners))),
        ));
        assert!(
            wait_until(PATIENCE, || rwlock.queue_len().unwrap() == n),
            "run {n} did not queue"
        );
    }
    let started = Instant::now();
    held.unlock().unwrap();
    for run in runs {
        let out = run.finish(PATIENCE * 2);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let took = started.elapsed();
    let log = read_log(&log);
    assert_eq!(log.starts.len(), 5, "every command ran once");
    assert_eq!(log.ended, 5);
    assert_eq!(log.max_running, 2, "readers two at a time");
    assert_granted_in_order(&log);
    let others = |n: usize| log.overlapped.iter().find(|&&(m, _)| m == n).unwrap().1;
    assert_eq!(others(3), 0, "the writer ran alone: {:?}", log.overlapped);
    for reader in [1, 2, 4, 5] {
        assert_eq!(others(reader), 1, "reader {reader}: {:?}", log.overlapped);
    }
    // Readers that did not share would each have waited 10 s for the other.
    assert!(took < Duration::from_secs(9), "{took:?}");
    let status = rwlock.status(10).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
}

#[test]
fn status_lists_the_rwlock_holders_with_their_access_beside_the_other_kinds() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let rwlock = a.fair_rwlock("all");
    let read_a = rwlock.read().unwrap();
    let read_b = b.fair_rwlock("all").read().unwrap();
    let run = Proc::spawn(
        fairlock(&server)
            .args(["run", "all", "--write"])
            .args(sh("echo $FAIRLOCK_CLIENT_ID")),
    );
    assert!(wait_until(PATIENCE, || rwlock.queue_len().unwrap() == 1));
    // The mutex and a semaphore of the same name are other locks, shown too.
    let mutex_guard = a.fair_mutex("all").lock().unwrap();
    let permit = b.fair_semaphore("all", 1).acquire().unwrap();

    let status = status_json(&server, "all");
    assert_eq!(
        status["mutex"]["holders"][0]["fencing_token"],
        mutex_guard.fencing_token()
    );
    assert_eq!(status["semaphore"]["permits"], 1);
    assert_eq!(
        status["semaphore"]["holders"][0]["fencing_token"],
        permit.fencing_token()
    );
    let rw = &status["rwlock"];
    assert_eq!(rw["write_held"], false);
    assert_eq!(rw["holder_count"], 2);
    let holders = rw["holders"].as_array().unwrap();
    let seen: HashSet<(&str, &str, u64)> = holders
        .iter()
        .map(|h| {
            (
                h["client_id"].as_str().unwrap(),
                h["access"].as_str().unwrap(),
                h["fencing_token"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        HashSet::from([
            (a.id(), "read", read_a.fencing_token()),
            (b.id(), "read", read_b.fencing_token())
        ])
    );
    for h in holders {
        let lease = h["remaining_lease_ms"].as_u64().unwrap();
        assert!(lease > 0 && lease <= 2000, "test lease is 2 s: {lease}");
    }
    assert_eq!(rw["queue_len"], 1);
    assert_eq!(rw["queue"][0]["access"], "write");
    assert_eq!(rw["queue"][0]["position"], 1);
    let waiter = rw["queue"][0]["client_id"].as_str().unwrap().to_owned();

    let out = output(fairlock(&server).args(["status", "all"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "rwlock:     held for reading by 2 readers".to_owned(),
        "semaphore:  1 permit, 1 held, 0 free".to_owned(),
        mutex_guard.fencing_token().to_string(),
    ] {
        assert!(text.contains(&needle), "{needle} in {text}");
    }
    let (mutex_at, sem_at, rw_at) = (
        text.find("mutex:      held").unwrap(),
        text.find("semaphore:").unwrap(),
        text.find("rwlock:").unwrap(),
    );
    assert!(mutex_at < sem_at && sem_at < rw_at, "{text}");
    let rw_lines: Vec<&str> = text[rw_at..].lines().collect();
    let line_of = |id: &str| {
        *rw_lines
            .iter()
            .find(|line| line.contains(id))
            .unwrap_or_else(|| panic!("{id} under rwlock: in {text}"))
    };
    for (id, token) in [
        (a.id(), read_a.fencing_token()),
        (b.id(), read_b.fencing_token()),
    ] {
        let line = line_of(id);
        assert!(line.starts_with("  holder:   client "), "{line}");
        assert!(line.contains(", read, lease "), "{line}");
        assert!(line.ends_with(&format!("token {token}")), "{line}");
    }
    let line = line_of(&waiter);
    assert!(line.contains(", write (keeps its place"), "{line}");

    read_a.unlock().unwrap();
    read_b.unlock().unwrap();
    let out = run.finish(PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        waiter,
        "the waiter listed was this run"
    );
    drop((mutex_guard, permit));
}

#[test]
fn status_lists_every_permit_holder_and_the_waiters() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let sem_a = a.fair_semaphore("shared", 2);
    let permit_a = sem_a.acquire().unwrap();
    let permit_b = b.fair_semaphore("shared", 2).acquire().unwrap();
    let run = Proc::spawn(
        fairlock(&server)
            .args(["run", "shared", "--semaphore", "2"])
            .args(sh("echo $FAIRLOCK_CLIENT_ID")),
    );
    assert!(wait_until(PATIENCE, || sem_a.queue_len().unwrap() == 1));

    let status = status_json(&server, "shared");
    assert!(
        status.get("mutex").is_none(),
        "the mutex is free, not shown: {status}"
    );
    let s = &status["semaphore"];
    assert_eq!(s["permits"], 2);
    assert_eq!(s["holder_count"], 2);
    assert_eq!(s["available"], 0);
    let holders = s["holders"].as_array().unwrap();
    let ids: HashSet<&str> = holders
        .iter()
        .map(|h| h["client_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, HashSet::from([a.id(), b.id()]));
    let tokens: HashSet<u64> = holders
        .iter()
        .map(|h| h["fencing_token"].as_u64().unwrap())
        .collect();
    assert_eq!(
        tokens,
        HashSet::from([permit_a.fencing_token(), permit_b.fencing_token()])
    );
    for h in holders {
        let lease = h["remaining_lease_ms"].as_u64().unwrap();
        assert!(lease > 0 && lease <= 2000, "test lease is 2 s: {lease}");
        assert!(h["thread"].is_u64());
    }
    assert_eq!(s["queue_len"], 1);
    let waiter = s["queue"][0]["client_id"].as_str().unwrap().to_owned();
    assert_eq!(s["queue"][0]["position"], 1);
    assert_eq!(
        s["last_fencing_token"],
        permit_a.fencing_token().max(permit_b.fencing_token())
    );

    let out = output(fairlock(&server).args(["status", "shared"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("mutex:"), "{text}");
    assert!(
        text.contains("semaphore:  2 permits, 2 held, 0 free"),
        "{text}"
    );
    for needle in [
        a.id().to_owned(),
        b.id().to_owned(),
        permit_a.fencing_token().to_string(),
        permit_b.fencing_token().to_string(),
        waiter.clone(),
    ] {
        assert!(text.contains(&needle), "{needle} in {text}");
    }

    permit_a.unlock().unwrap();
    let out = run.finish(PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        waiter,
        "the waiter listed was this run"
    );
    permit_b.unlock().unwrap();
}

/// The process is gone or a zombie (whoever adopted it may not reap it).
fn is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// How far a lease end nobody renews may still move (rounding of the
/// server's ms clock on each rewrite of the key), far under a renewal's
/// move.
const RENEWAL_SLACK_MS: i64 = 50;

#[test]
fn a_killed_holders_permit_comes_back_after_its_lease_and_the_next_runs() {
    let server = RedisServer::start();
    let scratch = Scratch::new("killed-holder");
    let (pidfile, ran) = (scratch.path("pid"), scratch.path("ran"));
    let client = server.client();
    let sem = client.fair_semaphore("dead", 1);

    let holder_script = format!("echo $$ > '{}'; exec sleep 120", pidfile.display());
    let holder = Proc::spawn(
        fairlock(&server)
            .args(["run", "dead", "--semaphore", "1"])
            .args(sh(&holder_script)),
    );
    assert!(wait_until(PATIENCE, || read_pid(&pidfile).is_some()));
    let next = Proc::spawn(
        fairlock(&server)
            .args([
                "run",
                "dead",
                "--semaphore",
                "1",
                "--wait",
                "90s",
                "--",
                "touch",
            ])
            .arg(&ran),
    );
    assert!(wait_until(PATIENCE, || sem.queue_len().unwrap() == 1));

    holder.signal("KILL");
    let killed = Instant::now();
    let out = holder.finish(PATIENCE);
    assert_eq!(out.status.code(), None, "SIGKILLed");
    // Its command got SIGTERM (fairlock died, nobody renews its permit).
    let pid = read_pid(&pidfile).unwrap();
    assert!(
        wait_until(PATIENCE, || is_gone(&pid)),
        "the orphaned command was told to stop"
    );
    let status = sem.status(1).unwrap();
    assert_eq!(status.holder_count, 1, "the dead holder's permit is leased");

    // Nobody renews it any more (the CLI's lease is the library's default,
    // 30 s, renewed every 1.7 s): two renewal periods later its lease end
    // has not moved, and it is still held.
    let keys = LockKeys::of_kind("fairlock", "dead", LockKind::Semaphore)
        .unwrap()
        .all
        .to_vec();
    let mut conn = server.conn();
    let lease_end =
        |conn: &mut redis::Connection| -> Vec<(String, i64)> { counted_lease_ends(conn, &keys) };
    let before = lease_end(&mut conn);
    std::thread::sleep(Duration::from_millis(3500));
    let after = lease_end(&mut conn);
    // A renewal moves the end by about its period (1.7 s); the waiter's
    // heartbeats, which rewrite the meta with a TTL the server counts from
    // its own ms clock, may move it by a ms each.
    let moved: Vec<i64> = before
        .iter()
        .zip(&after)
        .map(|((a, a_end), (b, b_end))| {
            assert_eq!(a, b, "the same hold");
            (b_end - a_end).abs()
        })
        .collect();
    assert!(
        after.len() == before.len() && moved.iter().all(|ms| *ms <= RENEWAL_SLACK_MS),
        "the dead holder's lease was renewed: {before:?} then {after:?}"
    );
    assert_eq!(sem.status(1).unwrap().holder_count, 1);
    // Then its lease runs out, brought forward to 300 ms from now by the
    // server's clock rather than waited for: the waiting `run` must take
    // the permit then (the head learns it at its next heartbeat or poll).
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let ends_at = secs * 1000 + micros / 1000 + 300;
    let (member, _) = before[0].clone();
    set_counted_lease_end(&mut conn, &keys, &member, ends_at);
    let shortened = Instant::now();
    let out = next.finish(Duration::from_secs(30));
    let waited = shortened.elapsed();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ran.exists());
    eprintln!(
        "the next ran {waited:?} after the dead holder's lease was set to end in 300 ms ({:?} after the kill)",
        killed.elapsed()
    );
    assert!(
        waited >= Duration::from_millis(250),
        "not before the dead holder's lease ran out: {waited:?}"
    );
    assert!(waited <= Duration::from_secs(10), "{waited:?}");
    let status = sem.status(1).unwrap();
    assert_eq!((status.holder_count, status.queue_len), (0, 0));
}

#[test]
fn a_terminal_shows_the_waiting_line_for_a_semaphore() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: script(1) from util-linux is needed for a terminal");
        return;
    }
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.fair_semaphore("shown", 2);
    let _held = [sem.acquire().unwrap(), sem.acquire().unwrap()];
    let inner = format!(
        "'{}' --url '{}' run shown --semaphore 2 --wait 1s -- true",
        cli_support::BIN,
        server.url()
    );
    let out = output(
        std::process::Command::new("script")
            .args(["-qfec", &inner, "/dev/null"])
            .env_remove("REDIS_URL")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
        PATIENCE,
    );
    let shown = stdout(&out);
    assert_eq!(code(&out), 75, "{shown}");
    assert!(
        shown.contains("waiting for \"shown\" (2 permits): position 1 of 1, waited"),
        "{shown:?}"
    );
    assert!(
        shown.contains(", 2 holders, first lease ends in "),
        "{shown:?}"
    );
}

#[test]
fn a_lost_permit_or_rwlock_hold_is_reported_and_exits_70() {
    let server = RedisServer::start();
    let scratch = Scratch::new("lost");
    for (flags, what) in [
        (
            &["--semaphore", "2"][..],
            "lost the permit on \"gone\" (2 permits)",
        ),
        (&["--read"], "lost the read lock on \"gone\" (read)"),
        (&["--write"], "lost the write lock on \"gone\" (write)"),
    ] {
        let ready = scratch.path(&format!("ready-{}", flags[0]));
        let script = format!("touch '{}'; exec sleep 60", ready.display());
        let run = Proc::spawn(
            fairlock(&server)
                .args(["run", "gone", "--kill-on-loss"])
                .args(flags)
                .args(sh(&script)),
        );
        assert!(wait_until(PATIENCE, || ready.exists()), "{flags:?} ran");
        // Every key gone: the watchdog's next renewal finds no hold.
        let wiped = Instant::now();
        redis::cmd("FLUSHALL")
            .query::<()>(&mut server.conn())
            .unwrap();
        let out = run.finish(PATIENCE);
        assert_eq!(code(&out), 70, "{flags:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(what), "{what} in {err}");
        assert!(err.contains("stopping the command"), "{err}");
        let last = err.lines().last().unwrap_or("");
        assert!(
            last.starts_with("fairlock: the command ")
                && last.ends_with(&format!(
                    "; exiting with 70 because {} was lost",
                    &what[5..what.find(" on ").unwrap()]
                )),
            "{last}"
        );
        // Renewed every 1.7 s (a third of the 5 s waiter timeout).
        assert!(
            wiped.elapsed() < Duration::from_secs(10),
            "{:?}",
            wiped.elapsed()
        );
    }
}

/// `unlock --force` and `revoke` of a lock of the name that nobody holds
/// say which lock that was, and which other kind of the name is held and
/// its flag: an operator who left out `--semaphore` does not take a
/// stuck semaphore for free.
#[test]
fn unlock_and_revoke_of_a_free_kind_name_the_kinds_held_and_their_flags() {
    let server = RedisServer::start();
    let client = server.client();
    let permit = client.fair_semaphore("busy", 2).acquire().unwrap();
    let read = client.fair_rwlock("busy").read().unwrap();
    for args in [
        &["unlock", "busy", "--force"][..],
        &["revoke", "busy"],
        &["unlock", "busy", "--force", "--election"],
        &["revoke", "busy", "--mutex"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let said = stdout(&out);
        let kind = if args.contains(&"--election") {
            "election"
        } else {
            "mutex"
        };
        assert!(
            said.contains(&format!("the {kind} \"busy\"")),
            "{args:?}: {said}"
        );
        assert!(
            said.contains("the semaphore \"busy\" (2 permits) is held: --semaphore")
                && said.contains("the rwlock \"busy\" is held: --rwlock"),
            "{args:?}: {said}"
        );
    }
    // Every kind free: nothing more to say.
    drop((permit, read));
    let out = output(
        fairlock(&server).args(["unlock", "busy", "--force"]),
        PATIENCE,
    );
    assert!(!stdout(&out).contains("is held"), "{}", stdout(&out));
}

/// Holds of every kind lost with a restart that lost the data: fairlock
/// says the library's reason ("redis lost it") once the command is done,
/// where it only guessed before (for a mutex: "the lease was not renewed
/// in time, or someone ran unlock --force"; for the others the first).
#[test]
fn holds_lost_with_a_restart_say_redis_lost_them() {
    let mut server = RedisServer::start();
    let scratch = Scratch::new("restarted");
    let mut runs = Vec::new();
    for (i, flags) in [&[][..], &["--semaphore", "2"], &["--read"], &["--write"]]
        .into_iter()
        .enumerate()
    {
        let ready = scratch.path(&format!("ready-{i}"));
        let script = format!("touch '{}'; exec sleep 60", ready.display());
        let run = Proc::spawn(
            fairlock(&server)
                .args(["run", &format!("restarted-{i}"), "--kill-on-loss"])
                .args(flags)
                .args(sh(&script)),
        );
        assert!(wait_until(PATIENCE, || ready.exists()), "{flags:?} ran");
        runs.push((flags, run));
    }
    server.kill();
    server.start_again();
    for (flags, run) in runs {
        let out = run.finish(PATIENCE);
        assert_eq!(code(&out), 70, "{flags:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("was no longer held: redis lost it"),
            "{flags:?}: {err}"
        );
    }
}

#[test]
fn unlock_force_frees_every_hold_of_a_semaphore_or_a_rwlock_and_the_next_get_it() {
    let server = RedisServer::start();
    let stuck = server.client();
    let waiting = server.client();
    let sem = stuck.fair_semaphore("stuck", 2);
    let (a, b) = (sem.acquire().unwrap(), sem.acquire().unwrap());
    let rwlock = stuck.fair_rwlock("stuck");
    let read = rwlock.read().unwrap();
    let next = std::thread::spawn(move || {
        let permit = waiting.fair_semaphore("stuck", 2).acquire().unwrap();
        let write = waiting.fair_rwlock("stuck").write().unwrap();
        (permit.fencing_token(), write.fencing_token())
    });
    assert!(wait_until(PATIENCE, || sem.queue_len().unwrap() == 1));

    let out = output(
        fairlock(&server).args(["unlock", "stuck", "--semaphore"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 2, "--force is required");
    assert_eq!(sem.status(10).unwrap().holder_count, 2);
    let out = output(
        fairlock(&server).args(["unlock", "stuck", "--force", "--semaphore", "--rwlock"]),
        PATIENCE,
    );
    assert_one_line_error(&out, 2, "--semaphore with --rwlock");

    let out = output(
        fairlock(&server).args(["unlock", "stuck", "--force", "--semaphore"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("unlocked the semaphore \"stuck\""), "{said}");
    for token in [a.fencing_token(), b.fencing_token()] {
        assert!(said.contains(&format!("(token {token})")), "{said}");
    }
    assert!(said.contains(stuck.id()), "{said}");
    // The waiter got a permit in the same step; the old ones are lost.
    assert!(wait_until(PATIENCE, || rwlock.queue_len().unwrap() == 1));
    assert!(a.unlock().unwrap_err().is_lease_lost());
    assert!(b.unlock().unwrap_err().is_lease_lost());
    assert!(rwlock.is_locked().unwrap(), "the rwlock is another lock");

    let out = output(
        fairlock(&server).args(["unlock", "stuck", "--force", "--rwlock"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let said = stdout(&out);
    assert!(said.contains("unlocked the rwlock \"stuck\""), "{said}");
    assert!(
        said.contains(&format!("(token {})", read.fencing_token())),
        "{said}"
    );
    let (permit_token, write_token) = next.join().unwrap();
    assert!(write_token > permit_token && permit_token > read.fencing_token());
    assert!(read.unlock().unwrap_err().is_lease_lost());

    let out = output(
        fairlock(&server).args(["unlock", "stuck", "--force", "--rwlock"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("was not held"), "{}", stdout(&out));
}

#[test]
fn unlock_force_election_ends_the_leadership_and_the_next_candidate_leads() {
    let server = RedisServer::start();
    let stuck = server.client();
    let election = stuck.election("sched");
    let leadership = election.with_value("web-1:80").campaign().unwrap();
    let lease = leadership.lease_signal();
    let candidate = server.client();
    let next = std::thread::spawn(move || {
        candidate
            .election("sched")
            .with_value("web-2:80")
            .campaign()
            .unwrap()
    });
    assert!(wait_until(PATIENCE, || election.queue_len().unwrap() == 1));

    let out = output(
        fairlock(&server).args(["unlock", "sched", "--force", "--semaphore", "--election"]),
        PATIENCE,
    );
    assert_one_line_error(&out, 2, "--semaphore with --election");
    let out = output(
        fairlock(&server).args(["unlock", "sched", "--force", "--rwlock", "--election"]),
        PATIENCE,
    );
    assert_one_line_error(&out, 2, "--rwlock with --election");
    // The mutex of the name is another lock: the leader still leads.
    let out = output(
        fairlock(&server).args(["unlock", "sched", "--force"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("was not held"), "{}", stdout(&out));
    assert_eq!(election.leader().unwrap().unwrap().value, "web-1:80");

    let out = output(
        fairlock(&server).args(["unlock", "sched", "--force", "--election"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // In the election's words: its leader, led for a term, whose
    // leadership ended (it said "unlocked", "held by" and "token").
    let said = stdout(&out);
    assert!(
        said.starts_with(
            "fairlock: ended the leadership of the election \"sched\"; it was led by web-1:80 "
        ),
        "{said}"
    );
    assert!(said.contains(stuck.id()), "{said}");
    assert!(
        said.contains(&format!("(term {})", leadership.term())),
        "{said}"
    );
    for lock_word in ["unlocked", "held", "token", "holder"] {
        assert!(!said.contains(lock_word), "{lock_word:?}: {said}");
    }
    // The old leader hears of it by a message; the candidate that
    // waited leads, in a later term.
    assert_eq!(lease.wait_timeout(PATIENCE), Some(fairlock::LeaseEnd::Lost));
    let next = next.join().unwrap();
    assert!(next.term() > leadership.term());
    assert!(next.fencing_token() > leadership.fencing_token());
    assert_eq!(election.leader().unwrap().unwrap().value, "web-2:80");
    assert!(leadership.unlock().unwrap_err().is_lease_lost());
    next.unlock().unwrap();
    let out = output(
        fairlock(&server).args(["unlock", "sched", "--force", "--election"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "fairlock: the election \"sched\" had no leader; nothing to do\n"
    );
}

#[test]
fn status_says_how_many_permits_each_hold_takes() {
    let server = RedisServer::start();
    let client = server.client();
    let sem = client.fair_semaphore("cores", 5);
    let four = sem.acquire_many(4).unwrap();
    let one = sem.acquire().unwrap();
    let status = status_json(&server, "cores");
    let s = &status["semaphore"];
    assert_eq!(
        (s["permits"].as_u64(), s["available"].as_u64()),
        (Some(5), Some(0))
    );
    let mut taken: Vec<(u64, u64)> = s["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["fencing_token"].as_u64().unwrap(),
                h["permits"].as_u64().unwrap(),
            )
        })
        .collect();
    taken.sort_unstable();
    assert_eq!(taken, [(four.fencing_token(), 4), (one.fencing_token(), 1)]);
    let out = output(fairlock(&server).args(["status", "cores"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("semaphore:  5 permits, 2 held, 0 free"),
        "{text}"
    );
    assert!(text.contains("4 permits, lease "), "{text}");
    assert_eq!(text.matches("permits, lease ").count(), 1, "{text}");
}

/// `run --max-hold`: the lease is renewed until then, then the command is
/// stopped (SIGTERM), fairlock says why and exits 70, and the lock, of any
/// kind, is free again for the next caller.
#[test]
fn a_max_hold_stops_the_command_of_every_kind_and_frees_the_lock() {
    let server = RedisServer::start();
    let client = server.client();
    for (flags, what) in EVERY_KIND {
        let started = Instant::now();
        let out = output(
            fairlock(&server)
                .args(["run", "bounded", "--max-hold", "1s"])
                .args(flags)
                .args(["--", "sleep", "30"]),
            PATIENCE,
        );
        let took = started.elapsed();
        assert_eq!(code(&out), 70, "{flags:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("gave up {what} on \"bounded\""))
                && err.contains("it reached its --max-hold of 1.0s; stopping the command")
                && err.contains(&format!(
                    "exiting with 70 because {what} reached its --max-hold"
                )),
            "{flags:?}: {err}"
        );
        // Held at least the second, and the sleep stopped well before its 30 s.
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(8),
            "{flags:?}: {took:?}"
        );
    }
    assert_every_kind_free(&client, "bounded");
}

/// `--max-hold` shorter than the lease (30 s by default): the lock passes
/// on within a watchdog period (1.7 s) of the maximum hold even if
/// fairlock hangs (SIGSTOP) right after the grant, before any renewal, to
/// a `--max-hold` waiter that then holds it as long as it needs.
#[test]
fn a_max_hold_shorter_than_the_lease_passes_the_lock_on_from_a_hung_holder() {
    let server = RedisServer::start();
    let scratch = Scratch::new("hung-max-hold");
    // The holder's flags, and a waiter's it keeps out.
    let kinds: [(&[&str], &[&str]); 4] = [
        (&["--semaphore", "1"], &["--semaphore", "1"]),
        (&["--read"], &["--write"]),
        (&["--write"], &["--read"]),
        (&[], &[]),
    ];
    for (i, (flags, waiting)) in kinds.into_iter().enumerate() {
        let (ready, next) = (
            scratch.path(&format!("r{i}")),
            scratch.path(&format!("n{i}")),
        );
        let holder = Proc::spawn(
            fairlock(&server)
                .args(["run", "hung", "--max-hold", "1s"])
                .args(flags)
                .args(sh(&format!("touch {}; exec sleep 30", ready.display()))),
        );
        assert!(wait_until(PATIENCE, || ready.exists()), "{flags:?}");
        holder.signal("STOP");
        let hung = Instant::now();
        let waiter = Proc::spawn(
            fairlock(&server)
                .args(["run", "hung", "--max-hold", "10s", "--wait", "8s"])
                .args(waiting)
                .args(sh(&format!("touch {}; sleep 0.3", next.display()))),
        );
        let bound = Duration::from_secs(9);
        assert!(wait_until(bound, || next.exists() || hung.elapsed() > bound));
        let passed = hung.elapsed();
        let out = waiter.finish(PATIENCE);
        eprintln!("{flags:?}: passed on {passed:?} after the holder hung");
        let err = stderr(&out);
        assert_eq!(
            code(&out),
            0,
            "{flags:?}, passed on after {passed:?}: {err}"
        );
        // 1 s of maximum hold, a watchdog period, and a busy machine's margin.
        assert!(
            passed < Duration::from_millis(4500),
            "{flags:?}: {passed:?}"
        );
        holder.signal("CONT");
        let out = holder.finish(PATIENCE);
        assert_eq!(code(&out), 70, "{flags:?}: {}", stderr(&out));
    }
}

/// `--identity` (or `FAIRLOCK_IDENTITY`) names the caller in every
/// status: JSON's "identity" and the text's "<identity> (client ...)",
/// for each kind's holder.
#[test]
fn an_identity_names_the_holder_in_status_text_and_json() {
    let server = RedisServer::start();
    let scratch = Scratch::new("identity");
    for (flags, kind) in [
        (&[][..], "mutex"),
        (&["--semaphore", "2"], "semaphore"),
        (&["--read"], "rwlock"),
    ] {
        let ready = scratch.path(&format!("ready-{}", flags.first().unwrap_or(&"mutex")));
        let script = format!("touch '{}'; exec sleep 60", ready.display());
        let run = Proc::spawn(
            fairlock(&server)
                .args(["--identity", "cron@web-3", "run", "named"])
                .args(flags)
                .args(sh(&script)),
        );
        assert!(wait_until(PATIENCE, || ready.exists()), "{flags:?} ran");
        let value = status_json(&server, "named");
        let holder = &value[kind]["holders"][0];
        assert_eq!(holder["identity"], "cron@web-3", "{flags:?}: {value}");
        assert!(holder["thread"].is_u64(), "{flags:?}: {value}");
        let text = output(fairlock(&server).args(["status", "named"]), PATIENCE);
        assert!(
            stdout(&text).contains("cron@web-3 (client "),
            "{flags:?}: {}",
            stdout(&text)
        );
        run.signal("TERM");
        let _ = run.finish(PATIENCE);
    }
    // Without one, USER@HOST:PID: cli/tests/cli_words.rs.
    // A bad identity is a usage error before anything runs.
    let out = output(
        fairlock(&server).args(["--identity", "two words", "run", "x", "--", "true"]),
        PATIENCE,
    );
    assert_one_line_error(&out, 2, "identity");
    assert!(stderr(&out).contains("identity"), "{}", stderr(&out));
}

/// `fairlock permits NAME N`: a grow admits the waiter of another client
/// at once and says so; a shrink with a call queued for more refuses it
/// (the call returns `PermitsExceeded`) and keeps the holders'; `run
/// --semaphore` with the old number is then served, not refused with 78,
/// and warned once that another number is in force;
/// 0, too many and a bad name are one-line usage errors.
#[test]
fn permits_sets_the_number_admits_and_refuses_waiters_and_says_so() {
    let server = RedisServer::start();
    let (holder, other) = (steady_client(&server), steady_client(&server));
    let sem = holder.fair_semaphore("jobs", 1);
    let held = sem.acquire().unwrap();
    let waiting = other.fair_semaphore("jobs", 1);
    let waiter = std::thread::spawn(move || waiting.acquire());
    assert!(wait_until(PATIENCE, || sem.queue_len().unwrap() == 1));

    let out = output(fairlock(&server).args(["permits", "jobs", "2"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains("\"jobs\" has 2 permits now (it had 1); 2 held; admitted 1 waiting call"),
        "{said}"
    );
    let admitted = waiter.join().unwrap().expect("admitted by the grow");
    assert!(admitted.fencing_token() > held.fencing_token());

    // 2 held; a call for both queues, then the number shrinks to 1.
    let two = other.fair_semaphore("jobs", 2);
    let big = std::thread::spawn(move || two.acquire_many(2).map(drop).map_err(|e| e.kind()));
    assert!(wait_until(PATIENCE, || sem.queue_len().unwrap() == 1));
    let out = output(fairlock(&server).args(["permits", "jobs", "1"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains("has 1 permit now (it had 2); 2 held (holders keep theirs")
            && said.contains("refused 1 waiting call that asked for more"),
        "{said}"
    );
    assert_eq!(
        big.join().unwrap(),
        Err(fairlock::ErrorKind::PermitsExceeded)
    );
    assert_eq!(sem.status(10).unwrap().holder_count, 2);
    drop(held);
    // One held of 1: a `run --semaphore 3` waits (no 78), then runs once free.
    let out = output(
        fairlock(&server).args(["run", "jobs", "--semaphore", "3", "-n", "-v", "--", "true"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(sem.queue_len().unwrap(), 0);
    // With the library's warnings shown, it says once that the number in
    // force is not its own.
    let said = stderr(&out);
    let told = "semaphore \"jobs\": 1 permit in force (set with set_permits), this handle says 3";
    assert_eq!(said.matches(told).count(), 1, "{said}");

    for args in [
        &["permits", "jobs", "0"][..],
        &["permits", "jobs", "1000001"],
        &["permits", "jobs", "two"],
        &["permits", "jobs"],
        &["permits", "", "2"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_one_line_error(&out, 2, &format!("{args:?}"));
    }
    assert_eq!(
        sem.status(0).unwrap().capacity,
        fairlock::Capacity::Permits(1)
    );
}

/// A `--fixed-lease` hold taken away long before its lease could run out
/// (`unlock --force` a moment after the grant) is not said to have run
/// out: the first line names what can take it away early, the release's
/// the library's words for what did. It said "its --fixed-lease of 1h00m
/// ran out" with 59 minutes of it left.
#[test]
fn a_fixed_lease_taken_early_is_not_said_to_have_run_out() {
    let server = RedisServer::start();
    let client = server.client();
    let run = Proc::spawn(
        fairlock(&server)
            .args(["run", "taken", "--fixed-lease", "1h", "--kill-on-loss"])
            .args(sh("exec sleep 30")),
    );
    let held = || client.fair_mutex("taken").is_locked().unwrap();
    assert!(wait_until(PATIENCE, held), "granted");
    let unlock = output(
        fairlock(&server).args(["unlock", "taken", "--force"]),
        PATIENCE,
    );
    assert_eq!(code(&unlock), 0, "{}", stderr(&unlock));
    let out = run.finish(PATIENCE);
    let err = stderr(&out);
    assert_eq!(code(&out), 70, "{err}");
    assert!(
        err.contains("lost the lock on \"taken\" while the command runs: someone ran unlock --force, or redis lost its data"),
        "{err}"
    );
    assert!(!err.contains("ran out"), "{err}");
    assert!(err.contains("a force release"), "{err}");
}
