//! The command in the library's words, driven as a built binary against
//! private redis-servers: each kind named as `LockKind` names it (`run
//! --mutex`, `--semaphore N`, `--read`, `--write`; `elect --watch`), the
//! spellings of before still working as hidden aliases; `-v` before or
//! after the subcommand, an election's leader that "leads" and
//! "resigned"; exit codes that tell "try again later" (69, 75) from "fix
//! the credentials" (77) and "fix the configuration" (78); the default
//! identity USER@HOST:PID in `status`; and the permits in force in every
//! line that names a semaphore.

use crate::cli_support;

use std::fs::File;
use std::process::{Command, Stdio};

use cli_support::{
    assert_one_line_error, code, fairlock, output, sh, status_json, stderr, stdout, Proc, Scratch,
    BIN, PATIENCE,
};
use fairlock::LockKind;
use fairlock_test_support::{lock_key, wait_until, RedisServer, RefusedPort, Relay};

/// Runs `fairlock run NAME <flags>`, which prints its token; the kind of
/// lock of NAME whose last token that is.
fn kind_taken(server: &RedisServer, name: &str, flags: &[&str]) -> LockKind {
    let out = output(
        fairlock(server)
            .args(["run", name])
            .args(flags)
            .args(sh("echo $FAIRLOCK_TOKEN")),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{flags:?}: {}", stderr(&out));
    let token: u64 = stdout(&out).trim().parse().expect("a token");
    let client = server.client();
    let kinds = [
        LockKind::Mutex,
        LockKind::Semaphore,
        LockKind::RwLock,
        LockKind::Election,
    ];
    let taken: Vec<LockKind> = kinds
        .into_iter()
        .filter(|&kind| {
            let status = client.status(kind, name, 0).unwrap();
            status.last_fencing_token == Some(token)
        })
        .collect();
    assert_eq!(taken.len(), 1, "{flags:?}: token {token} in {taken:?}");
    taken[0]
}

/// Each kind by its new name and by every spelling of before (hidden
/// aliases for one release): the same lock, a fresh name each time.
#[test]
fn every_kind_by_its_name_and_by_its_old_spelling() {
    let server = RedisServer::start();
    let cases: [(&[&str], LockKind); 10] = [
        (&[], LockKind::Mutex),
        (&["--mutex"], LockKind::Mutex),
        (&["--semaphore", "2"], LockKind::Semaphore),
        (&["--permits", "2"], LockKind::Semaphore),
        (&["--read"], LockKind::RwLock),
        (&["--shared"], LockKind::RwLock),
        (&["-s"], LockKind::RwLock),
        (&["--write"], LockKind::RwLock),
        (&["--exclusive"], LockKind::RwLock),
        (&["-x"], LockKind::RwLock),
    ];
    for (i, (flags, kind)) in cases.into_iter().enumerate() {
        let name = format!("kind{i}");
        assert_eq!(kind_taken(&server, &name, flags), kind, "{flags:?}");
    }
    // Read and write are told apart: a held write makes both busy, a held
    // read only the writers, under either spelling.
    let client = server.client();
    let rwlock = client.fair_rwlock("rw");
    let read = rwlock.read().unwrap();
    for (flags, busy) in [
        (&["--read"][..], false),
        (&["-s"], false),
        (&["--write"], true),
        (&["-x"], true),
        (&["--exclusive"], true),
    ] {
        let out = output(
            fairlock(&server)
                .args(["run", "rw", "-n"])
                .args(flags)
                .args(["--", "true"]),
            PATIENCE,
        );
        let expected = if busy { 75 } else { 0 };
        assert_eq!(code(&out), expected, "{flags:?}: {}", stderr(&out));
    }
    read.unlock().unwrap();

    // unlock and revoke take --mutex, the default, spelled out.
    let mutex = client.fair_mutex("held");
    let guard = mutex.lock().unwrap();
    let out = output(
        fairlock(&server).args(["revoke", "held", "--mutex"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("asked 1 holder of the mutex \"held\""),
        "{}",
        stdout(&out)
    );
    let out = output(
        fairlock(&server).args(["unlock", "held", "--force", "--mutex"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!mutex.is_locked().unwrap());
    assert!(guard.unlock().unwrap_err().is_lease_lost());
    for args in [
        &["unlock", "held", "--force", "--mutex", "--semaphore"][..],
        &["revoke", "held", "--mutex", "--election"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_one_line_error(&out, 2, &format!("{args:?}"));
    }
}

/// `elect --watch` follows the leader (the library's `Election::watch`);
/// `--observe`, its spelling of before, still does.
#[test]
fn elect_watch_and_its_old_spelling_follow_the_leader() {
    let server = RedisServer::start();
    let scratch = Scratch::new("words-watch");
    let client = server.client();
    let leadership = client
        .election("sched")
        .with_value("web-1:80")
        .campaign()
        .unwrap();
    for flag in ["--watch", "--observe"] {
        let file = scratch.path(flag.trim_start_matches('-'));
        let watcher = Proc::spawn(
            fairlock(&server)
                .args(["elect", "sched", flag])
                .stdout(Stdio::from(File::create(&file).unwrap())),
        );
        let printed = || std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            wait_until(PATIENCE, || printed().contains("leader web-1:80 term ")),
            "{flag}: {:?}",
            printed()
        );
        watcher.signal("TERM");
        let out = watcher.finish(PATIENCE);
        assert_eq!(code(&out), 0, "{flag}: {}", stderr(&out));
    }
    leadership.unlock().unwrap();
}

/// `-v` before the subcommand or after it; `run -v` says acquired and
/// released, `elect -v` leads and resigned, in the library's words; `-q`
/// with `-v` is a usage error wherever each is.
#[test]
fn verbose_before_or_after_the_subcommand() {
    let server = RedisServer::start();
    for args in [
        &["-v", "run", "v1", "--", "true"][..],
        &["run", "-v", "v2", "--", "true"],
        &["run", "v3", "--verbose", "--", "true"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("fairlock: acquired \"v") && said.contains(" (token "),
            "{args:?}: {said}"
        );
        assert!(
            said.contains("fairlock: released \"v") && said.contains("after holding it"),
            "{args:?}: {said}"
        );
    }
    for args in [
        &["-v", "elect", "e1", "--", "true"][..],
        &["elect", "e2", "-v", "--", "true"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("fairlock: leads \"e") && said.contains(" (term "),
            "{args:?}: {said}"
        );
        assert!(
            said.contains("fairlock: resigned \"e") && said.contains("after leading it"),
            "{args:?}: {said}"
        );
        assert!(
            !said.contains("acquired") && !said.contains("released"),
            "{args:?}: {said}"
        );
    }
    // Every subcommand takes it, before or after.
    for args in [
        &["-v", "status", "v1"][..],
        &["status", "v1", "-v"],
        &["-v", "permits", "p", "2"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    }
    // Without it, a run says nothing.
    let out = output(
        fairlock(&server).args(["run", "v4", "--", "true"]),
        PATIENCE,
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    for args in [
        &["-v", "run", "-q", "q", "--", "true"][..],
        &["run", "q", "-q", "-v", "--", "true"],
        &["--verbose", "elect", "q", "--quiet", "--", "true"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_one_line_error(&out, 2, &format!("{args:?}"));
    }
}

/// A `fairlock` against `url`, not reading the caller's environment.
fn against(url: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("REDIS_URL")
        .args(["--url", url, "--connect-timeout", "2s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// What to do is in the exit code: 69 and 75 may pass later; 77 wants the
/// credentials or the grants fixed, 78 the configuration. `run` runs
/// nothing in any of these, and `status` fails alike.
#[test]
fn exit_codes_tell_retry_from_fix_the_credentials_or_the_config() {
    let server = RedisServer::start();
    let guarded = RedisServer::start_with(&["--requirepass", "x"]);
    let scratch = Scratch::new("words-codes");
    let marker = scratch.path("ran");
    let marker = marker.to_str().unwrap();

    // A user whose ACL denies scripts.
    let mut conn = server.conn();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all"][..])
        .arg("-@scripting")
        .query(&mut conn)
        .unwrap();
    // A mutex whose key holds another data format's state.
    let () = redis::cmd("SET")
        .arg(lock_key("foreign"))
        .arg("v999 1 - - -")
        .query(&mut conn)
        .unwrap();

    let refused_port = RefusedPort::new();
    let refused = refused_port.url();
    let db = format!("{}/99", server.url());
    let port = guarded.port();
    let cases: [(&str, &str, i32, &str); 9] = [
        ("a refused port", &refused, 69, "unreachable"),
        (
            "a wrong password",
            &guarded.url_as("default", "wrong"),
            77,
            "credentials",
        ),
        (
            "no password where one is asked",
            &guarded.url(),
            77,
            "credentials",
        ),
        (
            "an ACL that denies scripts",
            &server.url_as("noscripts", "pw"),
            77,
            "ACL",
        ),
        ("a database the server lacks", &db, 78, "no such database"),
        (
            "a scheme that is not Redis's",
            &format!("http://127.0.0.1:{port}"),
            78,
            "scheme",
        ),
        ("not a URL", "nonsense", 78, "nonsense"),
        (
            "a port that is not a number",
            "redis://127.0.0.1:notaport",
            78,
            "url",
        ),
        ("the right password", &guarded.url_as("default", "x"), 0, ""),
    ];
    for (what, url, exit_code, says) in cases {
        let out = output(
            against(url).args(["run", "codes", "--", "touch", marker]),
            PATIENCE,
        );
        let ran = std::path::Path::new(marker).exists();
        if exit_code == 0 {
            assert_eq!(code(&out), 0, "{what}: {}", stderr(&out));
            assert!(ran, "{what}: the command ran");
            std::fs::remove_file(marker).unwrap();
            continue;
        }
        assert_one_line_error(&out, exit_code, what);
        assert!(
            stderr(&out).to_lowercase().contains(&says.to_lowercase()),
            "{what}: {}",
            stderr(&out)
        );
        assert!(!ran, "{what}: nothing runs");
        let out = output(against(url).args(["status", "codes"]), PATIENCE);
        assert_one_line_error(&out, exit_code, &format!("status: {what}"));
    }

    // Another data format in the lock's key: 78, nothing runs.
    let out = output(
        fairlock(&server).args(["run", "foreign", "--", "touch", marker]),
        PATIENCE,
    );
    assert_one_line_error(&out, 78, "another data format");
    assert!(stderr(&out).contains("data format 999"), "{}", stderr(&out));
    assert!(!std::path::Path::new(marker).exists(), "nothing runs");

    // A wait that runs out is still 75 (and -E still changes it).
    let client = server.client();
    let _held = client.fair_mutex("busy").lock().unwrap();
    let out = output(
        fairlock(&server).args(["run", "busy", "-n", "--", "touch", marker]),
        PATIENCE,
    );
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(!std::path::Path::new(marker).exists(), "nothing runs");
}

/// This machine's name, as gethostname(2) gives it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("a Linux host name")
        .trim()
        .to_owned()
}

/// The identity `status --json` shows for the holder of the mutex `name`
/// while `fairlock <before> run name` (with `env`) holds it; and that
/// fairlock's pid.
fn identity_while_held(
    server: &RedisServer,
    scratch: &Scratch,
    name: &str,
    before: &[&str],
    env: &[(&str, Option<&str>)],
) -> (String, u32) {
    let ready = scratch.path(name);
    let script = format!("touch '{}'; exec sleep 60", ready.display());
    let mut cmd = fairlock(server);
    cmd.env_remove("FAIRLOCK_IDENTITY");
    for (key, value) in env {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let run = Proc::spawn(cmd.args(before).args(["run", name]).args(sh(&script)));
    assert!(wait_until(PATIENCE, || ready.exists()), "{name} ran");
    let value = status_json(server, name);
    let identity = value["mutex"]["holders"][0]["identity"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: an identity in {value}"))
        .to_owned();
    let pid = run.pid();
    run.signal("TERM");
    let _ = run.finish(PATIENCE);
    (identity, pid)
}

/// Without `--identity`, a holder shows as USER@HOST:PID of its fairlock:
/// $USER, else the uid's name; `--identity` and FAIRLOCK_IDENTITY win.
#[test]
fn the_default_identity_is_user_at_host_colon_pid() {
    let server = RedisServer::start();
    let scratch = Scratch::new("words-identity");
    let host = hostname();

    let (identity, pid) =
        identity_while_held(&server, &scratch, "by-user", &[], &[("USER", Some("cron"))]);
    assert_eq!(identity, format!("cron@{host}:{pid}"));

    let uid_name = Command::new("id").arg("-un").output().unwrap();
    let uid_name = String::from_utf8_lossy(&uid_name.stdout).trim().to_owned();
    let (identity, pid) = identity_while_held(&server, &scratch, "by-uid", &[], &[("USER", None)]);
    assert_eq!(identity, format!("{uid_name}@{host}:{pid}"));

    let (identity, _) = identity_while_held(
        &server,
        &scratch,
        "given",
        &["--identity", "deploy@ci"],
        &[("USER", Some("cron"))],
    );
    assert_eq!(identity, "deploy@ci");
    let (identity, _) = identity_while_held(
        &server,
        &scratch,
        "from-env",
        &[],
        &[("FAIRLOCK_IDENTITY", Some("nightly@web-3"))],
    );
    assert_eq!(identity, "nightly@web-3");

    // The text of status names the holder by it too.
    let ready = scratch.path("text");
    let script = format!("touch '{}'; exec sleep 60", ready.display());
    let run = Proc::spawn(
        fairlock(&server)
            .env("USER", "cron")
            .args(["run", "text"])
            .args(sh(&script)),
    );
    assert!(wait_until(PATIENCE, || ready.exists()));
    let out = output(fairlock(&server).args(["status", "text"]), PATIENCE);
    let expected = format!("  holder:   cron@{host}:{} (client ", run.pid());
    assert!(stdout(&out).contains(&expected), "{}", stdout(&out));
    run.signal("TERM");
    let _ = run.finish(PATIENCE);
}

/// After `permits pool 4`, every line that names the semaphore says 4 are
/// in force: `run --semaphore 3 -n`'s busy line (it said "(3 permits)"),
/// `-v`'s acquired and released, `revoke` and `unlock --force`.
#[test]
fn every_line_that_names_a_semaphore_says_the_permits_in_force() {
    let server = RedisServer::start();
    let out = output(fairlock(&server).args(["permits", "pool", "4"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let client = server.client();
    let sem = client.fair_semaphore("pool", 4);
    let held = sem.acquire_many(4).unwrap();

    let out = output(
        fairlock(&server).args(["run", "pool", "--semaphore", "3", "-n", "--", "true"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"pool\" (4 permits in force, not 3) is busy; nothing was run"),
        "{}",
        stderr(&out)
    );
    let out = output(
        fairlock(&server).args(["run", "pool", "--semaphore", "4", "-n", "--", "true"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"pool\" (4 permits) is busy"),
        "{}",
        stderr(&out)
    );

    let out = output(
        fairlock(&server).args(["revoke", "pool", "--semaphore"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("asked 1 holder of the semaphore \"pool\" (4 permits) to let go"),
        "{}",
        stdout(&out)
    );
    let out = output(
        fairlock(&server).args(["unlock", "pool", "--force", "--semaphore"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("unlocked the semaphore \"pool\" (4 permits); it was held by"),
        "{}",
        stdout(&out)
    );
    assert!(held.unlock().unwrap_err().is_lease_lost());

    let out = output(
        fairlock(&server).args(["-v", "run", "pool", "--semaphore", "3", "--", "true"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let said = stderr(&out);
    for line in [
        "fairlock: acquired \"pool\" (4 permits in force, not 3) after ",
        "fairlock: released \"pool\" (4 permits in force, not 3) after holding it ",
    ] {
        assert!(said.contains(line), "{line} in {said}");
    }
}

/// The line that names who holds a lock of several holders now counts
/// them in the singular too: "(the only holder)", not "(one of 1
/// holders)". `run --semaphore 2` through a relay; with the relay stalled
/// its permit is force-released and another client takes one; resumed,
/// the run hears that its permit was lost and names the one holder.
#[test]
fn a_lost_permit_names_the_only_holder_in_the_singular() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let scratch = Scratch::new("only-holder");
    let ready = scratch.path("ready");
    let run = Proc::spawn(
        Command::new(BIN)
            .env_remove("REDIS_URL")
            .args(["--url", &relay.url(), "run", "pool", "--semaphore", "2"])
            .args(sh(&format!("touch {}; sleep 2", ready.display())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    assert!(
        wait_until(PATIENCE, || ready.exists()),
        "the run never started"
    );
    relay.stall();
    let client = server.client();
    assert!(client.force_unlock(LockKind::Semaphore, "pool").unwrap());
    let permit = client.fair_semaphore("pool", 2).acquire().unwrap();
    relay.resume();
    let out = run.finish(PATIENCE);
    let err = stderr(&out);
    eprintln!("{err}");
    assert_eq!(code(&out), 70, "{err}");
    let now = format!("token {} (the only holder)", permit.fencing_token());
    assert!(err.contains(&now), "{err}");
}

/// A duration fairlock writes is one it takes: the bounds a refusal names
/// (`--watch`'s "from 100ms to 1h00m") and the forms every message uses
/// (`4m05s`, `1h02m`) are accepted as written by every duration option
/// (they were refused: `unknown unit "h00m" in "1h00m"`, exit 2).
#[test]
fn the_durations_fairlock_writes_are_ones_it_takes() {
    let server = RedisServer::start();
    let out = output(
        fairlock(&server).args(["status", "words", "--watch", "50ms"]),
        PATIENCE,
    );
    let said = stderr(&out);
    assert_one_line_error(&out, 2, "an interval too short");
    let bounds = said
        .split("must be from ")
        .nth(1)
        .and_then(|rest| rest.split(" (see").next())
        .unwrap_or_else(|| panic!("no bounds named: {said}"));
    for bound in bounds.split(" to ") {
        let out = output(
            fairlock(&server).args(["status", "words", "--watch", bound, "--count", "1"]),
            PATIENCE,
        );
        assert_eq!(code(&out), 0, "--watch {bound} ({said}): {}", stderr(&out));
    }
    for (flag, written) in [
        ("--wait", "4m05s"),
        ("--lease", "1m30s"),
        ("--max-hold", "1h02m"),
        ("--fixed-lease", "2m00s"),
    ] {
        let out = output(
            fairlock(&server).args(["run", "words", flag, written, "--", "true"]),
            PATIENCE,
        );
        assert_eq!(code(&out), 0, "{flag} {written}: {}", stderr(&out));
    }
    let out = output(
        fairlock(&server).args(["--connect-timeout", "1m30s", "status", "words"]),
        PATIENCE,
    );
    assert_eq!(code(&out), 0, "--connect-timeout 1m30s: {}", stderr(&out));
    // Largest unit first, each once; a bare number still says its unit.
    for bad in ["30s1m", "1m1m", "1m30"] {
        let out = output(
            fairlock(&server).args(["run", "words", "--wait", bad, "--", "true"]),
            PATIENCE,
        );
        assert_one_line_error(&out, 2, bad);
        assert!(
            stderr(&out).contains(bad),
            "names {bad:?}: {}",
            stderr(&out)
        );
    }
}
