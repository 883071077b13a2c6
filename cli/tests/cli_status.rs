//! `fairlock status NAME`, driven as a built binary against a private
//! redis-server per test: the kinds of lock of the name in use and only
//! those (a busy semaphore without a free mutex above it), the free mutex
//! when nothing of the name is in use, the kinds asked for with
//! `--mutex`, `--semaphore`, `--rwlock`, `--election`, and `--json` with
//! exactly the keys docs/cli.md documents, each kind its own.

use crate::cli_support;

use std::collections::{BTreeSet, HashSet};

use cli_support::{code, fairlock, output, status_json, stderr, stdout, Proc, PATIENCE};
use fairlock::LockKind;
use fairlock_test_support::{wait_until, RedisServer};
use serde_json::Value;

/// Every kind, in the order `status` shows them.
const KINDS: [LockKind; 4] = [
    LockKind::Mutex,
    LockKind::Semaphore,
    LockKind::RwLock,
    LockKind::Election,
];

/// `fairlock run --semaphore 2 jobs -- sleep 60`, as the fleet would.
fn job(server: &RedisServer, command: &[&str]) -> Proc {
    Proc::spawn(
        fairlock(server)
            .args(["run", "--semaphore", "2", "jobs", "--"])
            .args(command),
    )
}

/// Two `run --semaphore 2 jobs` holding, a third queued: the two holders
/// and the third's client id (read through the library).
fn two_hold_and_one_waits(server: &RedisServer) -> (Vec<Proc>, Proc, String) {
    let client = server.client();
    let semaphore = || client.status(LockKind::Semaphore, "jobs", 10).unwrap();
    let holders: Vec<Proc> = (0..2).map(|_| job(server, &["sleep", "60"])).collect();
    assert!(
        wait_until(PATIENCE, || semaphore().holder_count == 2),
        "two hold"
    );
    let waiter = job(server, &["true"]);
    assert!(
        wait_until(PATIENCE, || semaphore().queue_len == 1),
        "one waits"
    );
    let waiting = semaphore().waiters[0].who.client_id().to_owned();
    (holders, waiter, waiting)
}

/// The holders stop (SIGTERM, passed on to their sleep); the waiter gets
/// its permit and runs.
fn finish(holders: Vec<Proc>, waiter: Proc) {
    for holder in holders {
        holder.signal("TERM");
        let _ = holder.finish(PATIENCE);
    }
    let out = waiter.finish(PATIENCE);
    assert_eq!(code(&out), 0, "the waiter ran: {}", stderr(&out));
}

#[test]
fn a_busy_semaphore_shows_its_holders_and_queue_and_no_free_mutex() {
    let server = RedisServer::start();
    let (holders, waiter, waiting) = two_hold_and_one_waits(&server);

    let out = output(fairlock(&server).args(["status", "jobs"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "lock:       \"jobs\"", "{text}");
    assert_eq!(lines[1], "semaphore:  2 permits, 2 held, 0 free", "{text}");
    // Each fairlock by its default identity, USER@HOST:PID, then its client.
    for line in &lines[2..4] {
        assert!(line.starts_with("  holder:   "), "{text}");
        let identity = line["  holder:   ".len()..].split(' ').next().unwrap();
        assert!(identity.contains('@') && identity.contains(':'), "{text}");
        assert!(line.contains(" (client "), "{text}");
        assert!(line.contains(" thread 1), lease "), "{text}");
        assert!(line.contains(" left, token "), "{text}");
    }
    assert_eq!(lines[4], "  queue:    1 waiting", "{text}");
    assert!(
        lines[5].starts_with("      1. ")
            && lines[5].contains(&format!(" (client {waiting} thread 1) (keeps its place ")),
        "{text}"
    );
    assert!(lines[6].starts_with("  last token: "), "{text}");
    assert_eq!(lines.len(), 7, "{text}");
    for other in ["mutex:", "rwlock:", "election:", "none (free)", "empty"] {
        assert!(!text.contains(other), "no {other:?}: {text}");
    }

    finish(holders, waiter);
}

#[test]
fn status_json_of_a_busy_semaphore_has_the_documented_keys() {
    let server = RedisServer::start();
    let (holders, waiter, waiting) = two_hold_and_one_waits(&server);

    let json = status_json(&server, "jobs");
    assert_eq!(json["name"], "jobs");
    let shown: BTreeSet<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(shown, BTreeSet::from(["name", "semaphore"]), "{json}");
    let s = &json["semaphore"];
    assert_eq!(s["permits"], 2);
    assert_eq!(s["available"], 0);
    assert_eq!(s["holder_count"], 2);
    let holders_json = s["holders"].as_array().unwrap();
    assert_eq!(holders_json.len(), 2, "{json}");
    let ids: HashSet<&str> = holders_json
        .iter()
        .map(|h| h["client_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "two fairlock processes: {json}");
    assert!(!ids.contains(waiting.as_str()), "{json}");
    let mut tokens = Vec::new();
    for h in holders_json {
        assert_eq!(h["permits"], 1, "{json}");
        // fairlock's default identity: USER@HOST:PID.
        let identity = h["identity"].as_str().unwrap_or_default();
        assert!(identity.contains('@'), "{json}");
        let pid = identity.rsplit(':').next().unwrap();
        assert!(pid.parse::<u32>().is_ok(), "{json}");
        assert!(h["thread"].is_u64(), "{json}");
        assert!(h["remaining_lease_ms"].as_u64().unwrap() > 0, "{json}");
        tokens.push(h["fencing_token"].as_u64().unwrap());
    }
    assert_eq!(s["last_fencing_token"], *tokens.iter().max().unwrap());
    assert_eq!(s["queue_len"], 1);
    let queued = &s["queue"][0];
    assert_eq!(queued["position"], 1);
    assert_eq!(queued["client_id"], waiting.as_str());
    assert_eq!(queued["permits"], 1);
    assert!(queued["liveness_left_ms"].is_u64(), "{json}");

    // Every key, and only those, that docs/cli.md's example shows (and its
    // table names), at every level.
    let documented = documented_example();
    assert_eq!(key_paths(&json), key_paths(&documented), "{json}");
    let table = documented_key_table();
    for path in key_paths(&json) {
        let key = path.rsplit(['.', ']']).next().unwrap();
        assert!(table.contains(key), "docs/cli.md's table names {key:?}");
    }

    finish(holders, waiter);
}

#[test]
fn a_name_with_nothing_in_use_shows_the_free_mutex_and_a_kind_asked_for() {
    let server = RedisServer::start();
    let status = |args: &[&str]| {
        let out = output(
            fairlock(&server).args(["status", "idle"]).args(args),
            PATIENCE,
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stdout(&out)
    };
    assert_eq!(
        status(&[]),
        "lock:       \"idle\"\n\
         mutex:      free\n  \
         queue:    empty\n  \
         last token: none recorded\n"
    );
    assert_eq!(
        status(&["--semaphore", "--rwlock"]),
        "lock:       \"idle\"\n\
         semaphore:  permits unknown, 0 held\n  \
         queue:    empty\n  \
         last token: none recorded\n\
         rwlock:     free\n  \
         queue:    empty\n  \
         last token: none recorded\n"
    );

    // A kind asked for is shown beside the one in use, free or not.
    let client = server.client();
    let permit = client.fair_semaphore("idle", 3).acquire().unwrap();
    let text = status(&["--mutex", "--semaphore"]);
    assert!(
        text.starts_with("lock:       \"idle\"\nmutex:      free\n"),
        "{text}"
    );
    assert!(
        text.contains("\nsemaphore:  3 permits, 1 held, 2 free\n"),
        "{text}"
    );
    let text = status(&[]);
    assert!(
        !text.contains("mutex:"),
        "only the semaphore is in use: {text}"
    );
    // An election without a leader is vacant, with no term recorded.
    assert_eq!(
        status(&["--election"]),
        "lock:       \"idle\"\n\
         election:   vacant\n  \
         queue:    empty\n  \
         last term: none recorded\n"
    );
    permit.unlock().unwrap();
}

/// An election's status in its own words: its leader, leading for a
/// term, the candidates waiting, the last term; it said "held", "holder:",
/// "token" and "last token", as of a mutex.
#[test]
fn an_election_s_status_names_its_leader_and_term() {
    let server = RedisServer::start();
    let client = server.client();
    let leadership = (client.election("sched").with_value("web-1:80"))
        .campaign()
        .unwrap();
    let candidate = server.client();
    let next = std::thread::spawn(move || {
        let election = candidate.election("sched").with_value("web-2:80");
        election.campaign().unwrap().unlock().unwrap();
    });
    let election = || client.status(LockKind::Election, "sched", 1).unwrap();
    assert!(wait_until(PATIENCE, || election().queue_len == 1));

    let out = output(fairlock(&server).args(["status", "sched"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let term = leadership.term();
    assert_eq!(
        lines[..2],
        ["lock:       \"sched\"", "election:   led"],
        "{text}"
    );
    assert!(
        lines[2].starts_with("  leader:   web-1:80 (")
            && lines[2].contains(client.id())
            && lines[2].ends_with(&format!(" left, term {term}")),
        "{text}"
    );
    assert_eq!(lines[3], "  queue:    1 waiting", "{text}");
    assert!(lines[4].starts_with("      1. web-2:80 ("), "{text}");
    assert_eq!(lines[5], format!("  last term: {term}"), "{text}");
    assert_eq!(lines.len(), 6, "{text}");
    for lock_word in ["held", "holder", "token", "free"] {
        assert!(!text.contains(lock_word), "{lock_word:?}: {text}");
    }

    leadership.unlock().unwrap();
    next.join().unwrap();
}

/// Each kind's JSON has its own keys only: a mutex no `permits`,
/// `available` or `write_held` (it had all three, and every holder and
/// waiter an `access` and `permits`), a semaphore no `write_held`, an
/// election none of them. One holder and one waiter of each kind.
#[test]
fn each_kinds_json_has_its_own_keys_only() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "kinds";
    let mutex = client.fair_mutex(name).lock().unwrap();
    let permit = client.fair_semaphore(name, 1).acquire().unwrap();
    let write = client.fair_rwlock(name).write().unwrap();
    let leader = client.election(name).with_value("a").campaign().unwrap();
    let waiters: Vec<_> = KINDS
        .into_iter()
        .map(|kind| {
            let client = server.client();
            std::thread::spawn(move || match kind {
                LockKind::Mutex => drop(client.fair_mutex(name).lock().unwrap()),
                LockKind::Semaphore => drop(client.fair_semaphore(name, 1).acquire().unwrap()),
                LockKind::RwLock => drop(client.fair_rwlock(name).read().unwrap()),
                _ => drop(client.election(name).with_value("b").campaign().unwrap()),
            })
        })
        .collect();
    for kind in KINDS {
        assert!(
            wait_until(PATIENCE, || client.status(kind, name, 1).unwrap().queue_len
                == 1),
            "{kind:?}: one waits"
        );
    }
    let json = status_json_of(
        &server,
        name,
        &["--mutex", "--semaphore", "--rwlock", "--election"],
    );
    let common = [
        "holder_count",
        "holders",
        "holders[].client_id",
        "holders[].thread",
        "holders[].identity",
        "holders[].remaining_lease_ms",
        "holders[].fencing_token",
        "queue_len",
        "queue",
        "queue[].position",
        "queue[].client_id",
        "queue[].thread",
        "queue[].identity",
        "queue[].liveness_left_ms",
        "last_fencing_token",
    ];
    for (kind, own) in [
        ("mutex", &["holders[].hold_count"][..]),
        (
            "semaphore",
            &[
                "permits",
                "available",
                "holders[].permits",
                "queue[].permits",
            ],
        ),
        (
            "rwlock",
            &["write_held", "holders[].access", "queue[].access"],
        ),
        ("election", &[]),
    ] {
        let expected: BTreeSet<String> = common
            .iter()
            .chain(own)
            .map(|key| format!("{kind}.{key}"))
            .chain([kind.to_owned()])
            .collect();
        let shown: BTreeSet<String> = key_paths(&json)
            .into_iter()
            .filter(|path| path == kind || path.starts_with(&format!("{kind}.")))
            .collect();
        assert_eq!(shown, expected, "{kind}: {json}");
    }
    assert_eq!(json["semaphore"]["permits"], 1);
    assert_eq!(json["semaphore"]["available"], 0);
    assert_eq!(json["rwlock"]["write_held"], true);
    assert_eq!(json["rwlock"]["holders"][0]["access"], "write");
    assert_eq!(json["rwlock"]["queue"][0]["access"], "read");
    // And the docs list each kind's keys.
    let table = documented_key_table();
    for path in key_paths(&json) {
        let key = path.rsplit(['.', ']']).next().unwrap();
        assert!(table.contains(key), "docs/cli.md's table names {key:?}");
    }

    mutex.unlock().unwrap();
    permit.unlock().unwrap();
    write.unlock().unwrap();
    leader.unlock().unwrap();
    for waiter in waiters {
        waiter.join().unwrap();
    }
}

/// `status NAME --json` with `args`, parsed.
fn status_json_of(server: &RedisServer, name: &str, args: &[&str]) -> Value {
    let out = output(
        fairlock(server).args(["status", name, "--json"]).args(args),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("status --json prints JSON")
}

/// Every key of `value` as a path, `semaphore.holders[].client_id`,
/// array entries merged.
fn key_paths(value: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, at: &str, paths: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    let path = if at.is_empty() {
                        key.clone()
                    } else {
                        format!("{at}.{key}")
                    };
                    paths.insert(path.clone());
                    walk(value, &path, paths);
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, &format!("{at}[]"), paths);
                }
            }
            _ => {}
        }
    }
    let mut paths = BTreeSet::new();
    walk(value, "", &mut paths);
    paths
}

fn cli_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md");
    std::fs::read_to_string(path).expect("docs/cli.md")
}

/// The section of docs/cli.md on `status --json`: from its heading to
/// the next one of its level.
fn json_section() -> String {
    let doc = cli_md();
    let heading = "## `status --json`\n";
    let start = doc.find(heading).expect("the section") + heading.len();
    let rest = &doc[start..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
}

/// The JSON example of that section.
fn documented_example() -> Value {
    let section = json_section();
    let start = section.find("```json\n").expect("a json example") + "```json\n".len();
    let end = start + section[start..].find("```").unwrap();
    serde_json::from_str(&section[start..end]).expect("the example is JSON")
}

/// The keys its tables name: each `` `key` `` in the first cell of a row.
fn documented_key_table() -> BTreeSet<String> {
    json_section()
        .lines()
        .filter_map(|line| line.strip_prefix('|')?.split('|').next())
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A server that may evict fairlock's keys (a memory limit and an
/// allkeys-*/volatile-* policy) is named once on stderr, `warning: ...`,
/// by `status`, `run` and `elect` (before: by `run --verbose` alone, and
/// `status` said nothing), with what to set, and the command still runs;
/// `--verbose`, which prints the library's log, does not say it twice. A
/// server without a limit says nothing.
#[test]
fn a_server_that_may_evict_is_warned_of_once_on_stderr() {
    let server = RedisServer::start();
    server.set_eviction("100mb", "allkeys-lru");
    let commands: [&[&str]; 5] = [
        &["status", "jobs"],
        &["run", "jobs", "--", "true"],
        &["run", "--verbose", "jobs", "--", "true"],
        &["elect", "jobs", "--", "true"],
        &["elect", "--verbose", "jobs", "--", "true"],
    ];
    for args in commands {
        let out = output(fairlock(&server).args(args), PATIENCE);
        let said = stderr(&out);
        assert_eq!(code(&out), 0, "{args:?}: {said}");
        let warnings: Vec<&str> = said.lines().filter(|l| l.contains("evict")).collect();
        assert_eq!(warnings.len(), 1, "{args:?}: {said}");
        assert!(
            warnings[0].starts_with("warning: redis at "),
            "{args:?}: {said}"
        );
        assert!(
            said.contains("maxmemory-policy allkeys-lru"),
            "{args:?}: {said}"
        );
        assert!(
            said.contains("set maxmemory-policy noeviction"),
            "{args:?}: {said}"
        );
    }
    server.set_eviction("0", "allkeys-lru");
    for args in commands {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_eq!(code(&out), 0);
        assert!(
            !stderr(&out).contains("evict"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// What a status answers is its output: written where it cannot be (a full
/// disk, here /dev/full: ENOSPC), it exits with 74 (EX_IOERR) and says
/// why on stderr, where it exited 0 with nothing written, so a script
/// that saved it went on with an empty file. So does `elect --watch`,
/// whose lines are its answer. A reader that went away (a closed pipe) is
/// no failure (docs/failures.md).
#[test]
fn a_status_that_cannot_write_its_output_exits_with_74() {
    let server = RedisServer::start();
    let client = server.client();
    let guard = client.fair_mutex("full").lock().unwrap();
    let leadership = client.election("full").campaign().unwrap();
    for args in [
        &["status", "full"][..],
        &["status", "full", "--json"],
        &["status", "full", "--watch", "--count", "1"],
        &["elect", "full", "--watch"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = output(fairlock(&server).args(args).stdout(full), PATIENCE);
        let said = stderr(&out);
        assert_eq!(code(&out), 74, "{args:?}: {said}");
        assert!(
            said.contains("cannot write") && said.contains("No space left on device"),
            "{args:?}: {said}"
        );
    }
    drop((guard, leadership));
}

/// A waiter whose client died keeps its entry until something drops it (a
/// heartbeat of another waiter, a handoff): `status` lists it where it is,
/// marked dead and not numbered, for it is not in line; the live waiter
/// behind it is next (position 1 of the 1 `queue_len` counts).
#[test]
fn a_dead_entry_ahead_is_marked_and_not_numbered() {
    use std::time::Duration;
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client.fair_mutex("dead-head");
    let held = mutex.lock().unwrap();
    let dying = Proc::spawn(fairlock(&server).args(["run", "dead-head", "--", "true"]));
    assert!(wait_until(PATIENCE, || mutex.queue_len().unwrap() == 1));
    drop(dying); // SIGKILL: its entry outlives it by its 5 s waiter timeout
                 // A live waiter behind it, whose heartbeats (every 20 s) drop no dead
                 // entry while the test reads.
    let patient = server
        .builder()
        .lease(Duration::from_secs(60))
        .waiter_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let live = std::thread::spawn(move || patient.fair_mutex("dead-head").lock().map(drop));
    let read = || client.status(LockKind::Mutex, "dead-head", 10).unwrap();
    assert!(
        wait_until(PATIENCE, || {
            let status = read();
            status.waiters.len() == 2 && status.waiters[0].liveness_left.is_none()
        }),
        "the dead entry ahead of a live one: {:?}",
        read()
    );

    let json = status_json(&server, "dead-head");
    let queue = &json["mutex"]["queue"];
    assert_eq!(json["mutex"]["queue_len"], 1, "{json}");
    assert_eq!(queue[0]["liveness_left_ms"], Value::Null, "{json}");
    assert_eq!(queue[0]["position"], Value::Null, "the dead entry: {json}");
    assert_eq!(queue[1]["position"], 1, "the live one is next: {json}");
    let out = output(fairlock(&server).args(["status", "dead-head"]), PATIENCE);
    let text = stdout(&out);
    let queued: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("  queue:"))
        .take(3)
        .collect();
    assert_eq!(queued.first(), Some(&"  queue:    1 waiting"), "{text}");
    assert!(
        queued[1].starts_with("       - ") && queued[1].ends_with(" (dead, not dropped yet)"),
        "{text}"
    );
    assert!(
        queued[2].starts_with("      1. ") && queued[2].contains("keeps its place"),
        "{text}"
    );

    held.unlock().unwrap();
    live.join().unwrap().unwrap();
}

/// `--limit 0` lists no holder and no waiter of any kind, and still says
/// how many hold and wait: the library's status lists a mutex's and an
/// election's one holder whatever the limit, and `status` printed it.
#[test]
fn a_limit_of_zero_lists_no_holder_and_no_waiter_of_any_kind() {
    let server = RedisServer::start();
    let client = server.client();
    let name = "limit0";
    // A holder and a waiter of each kind, each a `fairlock` of its own.
    let kinds: [(LockKind, &[&str]); 4] = [
        (LockKind::Mutex, &["run", name]),
        (LockKind::Semaphore, &["run", name, "--semaphore", "1"]),
        (LockKind::RwLock, &["run", name, "--write"]),
        (LockKind::Election, &["elect", name]),
    ];
    let mut procs = Vec::new();
    for (kind, args) in kinds {
        let status = || client.status(kind, name, 10).unwrap();
        procs.push(Proc::spawn(
            fairlock(&server).args(args).args(["--", "sleep", "60"]),
        ));
        assert!(
            wait_until(PATIENCE, || status().holder_count == 1),
            "{kind:?} held"
        );
        procs.push(Proc::spawn(
            fairlock(&server).args(args).args(["--", "true"]),
        ));
        assert!(
            wait_until(PATIENCE, || status().queue_len == 1),
            "{kind:?} queued"
        );
    }

    let out = output(
        fairlock(&server).args(["status", name, "--limit", "0"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("holder:"), "no holder listed: {text}");
    assert!(!text.contains(" 1. "), "no waiter listed: {text}");
    let more = text.matches("... and 1 more (see --limit)").count();
    assert_eq!(
        more, 8,
        "a holder and a waiter of each kind counted: {text}"
    );
    assert_eq!(text.matches("queue:    1 waiting").count(), 4, "{text}");

    let json = status_json_of(&server, name, &["--limit", "0"]);
    for kind in KINDS {
        let lock = &json[kind.label()];
        assert_eq!(lock["holders"], Value::Array(vec![]), "{kind:?}: {json}");
        assert_eq!(lock["queue"], Value::Array(vec![]), "{kind:?}: {json}");
        assert_eq!(lock["holder_count"], 1, "{kind:?}: {json}");
        assert_eq!(lock["queue_len"], 1, "{kind:?}: {json}");
    }
}

/// A name is any bytes: its `lock:` line quotes and escapes it, as every
/// other line naming it does, so that a newline keeps the layout and an
/// escape sequence does not reach the terminal. It was printed raw.
#[test]
fn a_name_with_a_newline_or_an_escape_is_quoted() {
    let server = RedisServer::start();
    let name = "two\nlines\x1b[2J";
    let out = output(fairlock(&server).args(["status", name]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains('\x1b'), "{text:?}");
    let first = text.lines().next().unwrap();
    assert_eq!(first, r#"lock:       "two\nlines\u{1b}[2J""#, "{text:?}");
    assert_eq!(text.lines().nth(1), Some("mutex:      free"), "{text:?}");
}

/// An owner id is what Redis holds, whoever wrote it: one with an escape
/// sequence (written by a raw script call, not by fairlock) is shown
/// escaped, by `status` as by every line naming a holder, so that it does
/// not reach the terminal. It was printed raw.
#[test]
fn an_owner_id_with_an_escape_is_shown_escaped() {
    let server = RedisServer::start();
    let lock = fairlock_test_support::ScriptedLock::new(&server, "foreign");
    lock.acquire(&mut server.conn(), "evil\x1b[2J:1", 1);
    let out = output(fairlock(&server).args(["status", "foreign"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.contains(r"client evil\u{1b}[2J thread 1"), "{text:?}");
}
