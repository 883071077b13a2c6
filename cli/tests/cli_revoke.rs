//! `fairlock revoke` and what `fairlock run` does with a revocation, driven
//! as built binaries against a private redis-server: `run` passes the
//! request on to its command as a real signal (SIGTERM by default, or its
//! `--on-revoke` signal), releases when the command ends, and exits with the
//! command's own status; `revoke` names whom it asked, of every kind.

use crate::cli_support;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use cli_support::{code, fairlock, output, sh, stderr, stdout, Proc, Scratch, PATIENCE};
use fairlock_test_support::{wait_until, RedisServer};

/// A command that notes when it began, and on `signal` notes when it got
/// it and exits with `status`.
fn trapping(began: &Path, got: &Path, signal: &str, status: i32) -> String {
    format!(
        "trap 'date +%s%N > {got}; kill $!; exit {status}' {signal}; date +%s%N > {began}; sleep 30 & wait",
        got = got.display(),
        began = began.display()
    )
}

fn nanos(path: &Path) -> i64 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

#[test]
fn run_passes_a_revocation_to_its_command_as_sigterm_and_exits_with_its_status() {
    let server = RedisServer::start();
    let scratch = Scratch::new("revoke");
    let (began, got) = (scratch.path("began"), scratch.path("got"));

    let nobody = output(fairlock(&server).args(["revoke", "job"]), PATIENCE);
    assert_eq!(code(&nobody), 0, "{}", stderr(&nobody));
    assert!(
        stdout(&nobody).contains("the mutex \"job\" is not held; nobody to ask"),
        "{}",
        stdout(&nobody)
    );

    let script = trapping(&began, &got, "TERM", 7);
    let run = Proc::spawn(fairlock(&server).args(["run", "job"]).args(sh(&script)));
    assert!(wait_until(PATIENCE, || began.exists()), "the command began");
    let sent = now_nanos();
    let revoked = output(fairlock(&server).args(["revoke", "job"]), PATIENCE);
    assert_eq!(code(&revoked), 0, "{}", stderr(&revoked));
    let said = stdout(&revoked);
    assert!(
        said.contains("asked 1 holder of the mutex \"job\" to let go: ")
            && said.contains(" (client "),
        "{said}"
    );
    let out = run.finish(PATIENCE);
    // The command's own status: the lock was not lost, it was given back.
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "asked to let go of \"job\" (fairlock revoke); sending SIGTERM to the command"
        ),
        "{err}"
    );
    let after_ms = (nanos(&got) - sent) as f64 / 1e6;
    eprintln!("fairlock revoke started → the command got SIGTERM: {after_ms:.1} ms");
    // A process start and a round trip; the renewal that would also carry
    // the request comes every 1.7 s (a 30 s lease, a 5 s waiter timeout).
    assert!(after_ms < 1500.0, "{after_ms} ms");
    let status = output(fairlock(&server).args(["status", "job"]), PATIENCE);
    assert!(stdout(&status).contains("free"), "{}", stdout(&status));
}

#[test]
fn on_revoke_picks_the_signal_and_revoke_names_every_holder_of_a_kind() {
    let server = RedisServer::start();
    let scratch = Scratch::new("on-revoke");
    let mut runs = Vec::new();
    for i in 0..2 {
        let (began, got) = (
            scratch.path(&format!("began{i}")),
            scratch.path(&format!("got{i}")),
        );
        let script = trapping(&began, &got, "USR1", 9);
        let run = Proc::spawn(
            fairlock(&server)
                .args(["run", "pool", "--semaphore", "2", "--on-revoke", "usr1"])
                .args(sh(&script)),
        );
        assert!(wait_until(PATIENCE, || began.exists()), "command {i} began");
        runs.push(run);
    }
    // The mutex of the name is another lock: nobody holds it.
    let mutex = output(fairlock(&server).args(["revoke", "pool"]), PATIENCE);
    assert!(stdout(&mutex).contains("is not held"), "{}", stdout(&mutex));
    let revoked = output(
        fairlock(&server).args(["revoke", "pool", "--semaphore"]),
        PATIENCE,
    );
    assert_eq!(code(&revoked), 0, "{}", stderr(&revoked));
    let said = stdout(&revoked);
    assert!(
        said.contains("asked 2 holders of the semaphore \"pool\" (2 permits) to let go: ")
            && said.matches("(token ").count() == 2,
        "{said}"
    );
    for run in runs {
        let out = run.finish(PATIENCE);
        assert_eq!(code(&out), 9, "{}", stderr(&out));
        assert!(stderr(&out).contains("sending SIGUSR1"), "{}", stderr(&out));
    }

    // `none` lets the command finish; a bad signal is a usage error.
    let out = output(
        fairlock(&server).args(["run", "calm", "--on-revoke", "none", "--", "true"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let bad = output(
        fairlock(&server).args(["run", "calm", "--on-revoke", "SIGNOPE", "--", "true"]),
        PATIENCE,
    );
    assert_eq!(code(&bad), 2, "{}", stderr(&bad));
    let conflicting = output(
        fairlock(&server).args(["revoke", "pool", "--semaphore", "--election"]),
        PATIENCE,
    );
    assert_eq!(code(&conflicting), 2, "{}", stderr(&conflicting));
}

#[test]
fn elect_passes_a_revocation_of_the_leadership_to_its_command() {
    let server = RedisServer::start();
    let scratch = Scratch::new("elect-revoke");
    let (began, got) = (scratch.path("began"), scratch.path("got"));
    let script = trapping(&began, &got, "USR2", 5);
    let elect = Proc::spawn(
        fairlock(&server)
            .args([
                "elect",
                "sched",
                "--value",
                "web-1:80",
                "--on-revoke",
                "usr2",
            ])
            .args(sh(&script)),
    );
    assert!(wait_until(PATIENCE, || began.exists()), "the command began");
    // The mutex of the name is another lock; the election's leader is asked.
    let mutex = output(fairlock(&server).args(["revoke", "sched"]), PATIENCE);
    assert_eq!(
        stdout(&mutex),
        "fairlock: the mutex \"sched\" is not held; nobody to ask; \
         the election \"sched\" has a leader: --election\n"
    );
    let term = (server.client().election("sched").leader().unwrap())
        .expect("a leader")
        .term;
    let sent = now_nanos();
    let revoked = output(
        fairlock(&server).args(["revoke", "sched", "--election"]),
        PATIENCE,
    );
    assert_eq!(code(&revoked), 0, "{}", stderr(&revoked));
    // In the election's words: its leader, asked to step down, and its
    // term (it said "holder", "let go" and "token").
    let said = stdout(&revoked);
    assert!(
        said.starts_with(
            "fairlock: asked 1 leader of the election \"sched\" to step down: web-1:80 "
        ) && said.ends_with(&format!(" (term {term})\n")),
        "{said}"
    );
    for lock_word in ["holder", "let go", "token"] {
        assert!(!said.contains(lock_word), "{lock_word:?}: {said}");
    }
    let out = elect.finish(PATIENCE);
    // The command's own status: the leadership was given back, not lost.
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(stderr(&out).contains("sending SIGUSR2"), "{}", stderr(&out));
    let after_ms = (nanos(&got) - sent) as f64 / 1e6;
    eprintln!(
        "fairlock revoke --election started → the leader's command got SIGUSR2: {after_ms:.1} ms"
    );
    assert!(after_ms < 1500.0, "{after_ms} ms");
    let status = output(
        fairlock(&server).args(["status", "sched", "--election"]),
        PATIENCE,
    );
    assert!(
        !stdout(&status).contains("web-1:80"),
        "the leader resigned: {}",
        stdout(&status)
    );
    let vacant = output(
        fairlock(&server).args(["revoke", "sched", "--election"]),
        PATIENCE,
    );
    assert_eq!(
        stdout(&vacant),
        "fairlock: the election \"sched\" has no leader; nobody to ask\n"
    );
}

/// More holders than the 100 named (a semaphore of many permits): `revoke`
/// and `unlock --force` say how many more they asked or freed. `revoke`
/// called them holders "that came after the last read", which they were
/// not; `unlock` said nothing of them.
#[test]
fn holders_beyond_those_named_are_counted_as_more() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.fair_semaphore("many", 200);
    let guards: Vec<_> = (0..103).map(|_| semaphore.acquire().unwrap()).collect();
    for args in [
        &["revoke", "many", "--semaphore"][..],
        &["unlock", "many", "--force", "--semaphore"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        let said = stdout(&out);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        eprintln!("{args:?}: ...{}", &said[said.len().saturating_sub(120)..]);
        assert_eq!(said.matches(" (token ").count(), 100, "{args:?}: {said}");
        assert!(!said.contains("came after"), "{args:?}: {said}");
        assert!(
            said.trim_end().ends_with(", and 3 more"),
            "{args:?}: {said}"
        );
    }
    drop(guards);
}

/// An `unlock --force` whose reply never came (Redis held the write back
/// past the command timeout, then ran it) may have freed the lock: its
/// error says so and to look before trying again, since a repeat frees
/// whoever holds it next. It said only "timed out" (exit 69, "try again
/// later"), though the lock was freed.
#[test]
fn an_unlock_whose_reply_never_came_says_it_may_have_freed_the_lock() {
    use fairlock_test_support::relay::Relay;
    use std::time::{Duration, Instant};
    let server = RedisServer::start();
    let holder = server.client();
    let guard = holder.fair_mutex("stuck").lock().unwrap();
    let relay = Relay::recording(server.port());
    relay.set_delay(Duration::from_millis(500));
    let unlock = Proc::spawn(
        std::process::Command::new(cli_support::BIN)
            .env_remove("REDIS_URL")
            .args(["--url", &relay.url(), "unlock", "stuck", "--force"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    // Its status read, then the force release read by the relay, which
    // hands it to Redis 500 ms later: writes are held back by then.
    let scripts = || {
        relay
            .sent()
            .iter()
            .filter(|c| ["FCALL", "EVALSHA"].contains(&c.as_str()))
            .count()
    };
    let forcing = || scripts() >= 2;
    assert!(wait_until(PATIENCE, forcing), "{:?}", relay.sent());
    let paused = Instant::now();
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "8000", "WRITE"][..])
        .query(&mut server.conn())
        .unwrap();
    let out = unlock.finish(PATIENCE);
    let err = stderr(&out);
    eprintln!("after {:?}: {:?} {err}", paused.elapsed(), out.status);
    assert_eq!(code(&out), 69, "{err}");
    assert!(
        wait_until(PATIENCE, || holder
            .status(fairlock::LockKind::Mutex, "stuck", 1)
            .unwrap()
            .holder_count
            == 0),
        "freed all the same"
    );
    assert!(err.contains("may have"), "{err}");
    assert!(err.contains("see `fairlock status \"stuck\"`"), "{err}");
    drop(guard);
}

/// `fairlock revoke <args>` started through a relay that adds 300 ms each
/// way, once its read of the holders (its first script) ran at Redis: its
/// revocation comes 600 ms later at the least, its reply and its request
/// each 300 ms on the way. The relay, to be kept while it runs, and it.
fn revoke_after_its_read(
    server: &RedisServer,
    args: &[&str],
) -> (fairlock_test_support::relay::Relay, Proc) {
    use fairlock_test_support::script_calls;
    use std::process::{Command, Stdio};
    let relay = fairlock_test_support::relay::Relay::with_delay(
        server.port(),
        std::time::Duration::from_millis(300),
    );
    let mut conn = server.conn();
    let before = script_calls(&mut conn);
    let revoke = Proc::spawn(
        Command::new(cli_support::BIN)
            .env_remove("REDIS_URL")
            .args(["--url", &relay.url(), "revoke"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    // (Its start's call that finds the library loaded runs first, where
    // the server has Functions.)
    let start = i64::from(fairlock_test_support::script_command() == "FCALL");
    assert!(wait_until(PATIENCE, || script_calls(&mut conn) > before + start));
    (relay, revoke)
}

/// A holder that came between `revoke`'s read of the holders and its
/// revocation is asked too (the lock was free at the read): `revoke` says
/// so, as `unlock --force` does of such a holder. It said "asked 1 holder
/// ... to let go: and 1 more", naming nobody before its "more".
#[test]
fn a_holder_that_came_after_the_read_is_said_to_have() {
    let server = RedisServer::start();
    let holder = server.client();
    let (_relay, revoke) = revoke_after_its_read(&server, &["late"]);
    let guard = holder.fair_mutex("late").lock().unwrap();
    let out = revoke.finish(PATIENCE);
    let said = stdout(&out);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(wait_until(PATIENCE, || guard.is_revoked()), "asked: {said}");
    assert_eq!(
        said.trim_end(),
        "fairlock: asked 1 holder of the mutex \"late\" to let go: a holder that came after the last read",
    );
    drop(guard);
}

/// A holder that let go between `revoke`'s read of the holders and its
/// revocation is not asked: `revoke` does not say it asked each holder it
/// read, only how many it asked, of those. It said "asked 1 holder of the
/// semaphore ... to let go: A (token ...), B (token ...)", naming two.
#[test]
fn a_holder_gone_before_the_revocation_is_not_said_asked() {
    use std::time::Duration;
    let server = RedisServer::start();
    // Fixed leases: no renewal runs a script the test would take for
    // `revoke`'s read.
    let (one, other) = (server.client(), server.client());
    let hold = |client: &fairlock::Client| {
        let semaphore = client.fair_semaphore("gone", 2);
        semaphore
            .with_fixed_lease(Duration::from_secs(60))
            .acquire()
            .unwrap()
    };
    let (stays, goes) = (hold(&one), hold(&other));
    let (_relay, revoke) = revoke_after_its_read(&server, &["gone", "--semaphore"]);
    let gone_token = goes.fencing_token();
    goes.unlock().unwrap();
    let out = revoke.finish(PATIENCE);
    let said = stdout(&out);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(wait_until(PATIENCE, || stays.is_revoked()), "asked: {said}");
    assert!(
        said.starts_with(
            "fairlock: asked 1 holder of the semaphore \"gone\" (2 permits) to let go, of the 2 read just before: "
        ),
        "{said}"
    );
    assert!(said.contains(&format!("(token {gone_token})")), "{said}");
    assert!(
        said.contains(&format!("(token {})", stays.fencing_token())),
        "{said}"
    );
    drop(stays);
}
