//! `fairlock status NAME --watch`, driven as a built binary against a
//! private redis-server per test: a block per change (and nothing while
//! the lock only ticks down) when stdout is a file, NDJSON with --json,
//! SIGINT and SIGTERM ending it with 0, `--count` ending a quiet watch into
//! a pipe, a Redis outage said once and its
//! end too, one-line usage errors, and the frame redrawn on a terminal.
//!
//! The watcher writes to a scratch file the test reads as it grows, so
//! each step waits for what the watcher printed, not for time to pass.

use crate::cli_support;

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{
    assert_one_line_error, code, fairlock, output, stderr, stdout, Proc, Scratch, BIN, PATIENCE,
};
use fairlock_test_support::{script_calls, wait_until, RedisServer};

/// How a block for a log starts (watch.rs's timestamp line).
const BLOCK: &str = "--- ";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn blocks(path: &Path) -> Vec<String> {
    let text = read(path);
    text.split(BLOCK)
        .skip(1)
        .map(|block| format!("{BLOCK}{block}"))
        .collect()
}

/// `fairlock status NAME --watch ARGS...` writing to files in `scratch`.
fn watcher(server: &RedisServer, scratch: &Scratch, name: &str, args: &[&str]) -> Proc {
    let out = File::create(scratch.path("out")).unwrap();
    let err = File::create(scratch.path("err")).unwrap();
    Proc::spawn(
        fairlock(server)
            .args(["status", name, "--watch"])
            .args(args)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err)),
    )
}

/// Waits for the `n`th block and returns them all.
fn await_blocks(path: &Path, n: usize) -> Vec<String> {
    assert!(
        wait_until(PATIENCE, || blocks(path).len() >= n),
        "block {n} within {PATIENCE:?}: {:?}",
        read(path)
    );
    blocks(path)
}

#[test]
fn a_log_gets_a_block_per_change_and_nothing_while_only_leases_tick() {
    let server = RedisServer::start();
    let scratch = Scratch::new("watch-blocks");
    let out = scratch.path("out");
    let watch = watcher(&server, &scratch, "job", &["100ms"]);
    let first = await_blocks(&out, 1);
    assert!(first[0].contains("mutex:      free"), "{first:?}");
    assert!(!first[0].contains("changed:"), "{first:?}");

    let client = server.client();
    let guard = client.fair_mutex("job").lock().unwrap();
    let held = await_blocks(&out, 2);
    assert!(
        held[1].contains(&format!("changed: new holder client {}", client.id())),
        "{held:?}"
    );
    assert!(held[1].contains(&format!("token {}", guard.fencing_token())));

    // Held for 40+ more status scripts (4 a read, every 100 ms): the lease
    // ticks down and is renewed, the watcher reads ten times or so, and
    // prints nothing, since nobody came or went.
    let mut conn = server.conn();
    let before = script_calls(&mut conn);
    assert!(
        wait_until(PATIENCE, || script_calls(&mut conn) >= before + 44),
        "the watcher keeps reading"
    );
    assert_eq!(
        blocks(&out).len(),
        2,
        "no change, no block: {:?}",
        read(&out)
    );

    let token = guard.fencing_token();
    guard.unlock().unwrap();
    let freed = await_blocks(&out, 3);
    assert!(freed[2].contains("mutex:      free"), "{freed:?}");
    assert!(
        freed[2].contains(&format!("no longer holds it (token {token})")),
        "{freed:?}"
    );

    let interrupted = Instant::now();
    watch.signal("INT");
    let done = watch.finish(PATIENCE);
    let took = interrupted.elapsed();
    eprintln!("SIGINT to exit: {took:?}");
    assert_eq!(code(&done), 0, "{}", read(&scratch.path("err")));
    assert!(took < Duration::from_secs(5), "stopped at once: {took:?}");
    assert_eq!(read(&scratch.path("err")), "", "nothing on stderr");
    assert_eq!(blocks(&out).len(), 3, "{:?}", read(&out));
}

#[test]
fn json_watch_prints_one_object_per_line_per_change() {
    let server = RedisServer::start();
    let scratch = Scratch::new("watch-json");
    let out = scratch.path("out");
    let watch = watcher(&server, &scratch, "ndjson", &["100ms", "--json"]);
    let lines = |n: usize| {
        assert!(
            wait_until(PATIENCE, || read(&out).lines().count() >= n),
            "line {n}: {:?}",
            read(&out)
        );
    };
    lines(1);
    let client = server.client();
    let guard = client.fair_mutex("ndjson").lock().unwrap();
    lines(2);
    let token = guard.fencing_token();
    guard.unlock().unwrap();
    lines(3);
    watch.signal("TERM");
    let done = watch.finish(PATIENCE);
    assert_eq!(code(&done), 0, "{}", read(&scratch.path("err")));

    let text = read(&out);
    let objects: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect();
    assert_eq!(objects.len(), 3, "{text}");
    let holders = |i: usize| objects[i]["mutex"]["holders"].as_array().unwrap().clone();
    assert!(holders(0).is_empty(), "{text}");
    assert_eq!(holders(1)[0]["client_id"], client.id());
    assert_eq!(holders(1)[0]["fencing_token"], token);
    assert!(holders(2).is_empty(), "{text}");
    assert_eq!(objects[2]["mutex"]["last_fencing_token"], token);
    let times: Vec<u64> = objects
        .iter()
        .map(|o| o["time_ms"].as_u64().expect("time_ms"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for object in &objects {
        assert_eq!(object["name"], "ndjson");
    }
}

/// Beyond `--limit`, the holders listed are those whose lease ends first,
/// which renewals change: a log of a quiet semaphore watched with `--limit
/// 1` gets no block when another holder comes to be listed (it got one
/// each time, saying falsely that a holder came and another went), and a
/// holder that goes is said by the number held.
#[test]
fn holders_beyond_the_limit_renewing_are_no_change() {
    let server = RedisServer::start();
    let scratch = Scratch::new("watch-limit");
    let out = scratch.path("out");
    let client = |lease| {
        let builder = fairlock::Client::builder(&server.url());
        builder.lease(lease).build().unwrap()
    };
    let semaphore = |client: &fairlock::Client| client.fair_semaphore("pool", 2);
    // A renewed lease of 2 s is listed first, until the fixed 5 s one
    // runs down below it.
    let renewed = client(Duration::from_secs(2));
    let fixed = client(Duration::from_secs(30));
    let a = semaphore(&renewed).acquire().unwrap();
    let b = (semaphore(&fixed).with_fixed_lease(Duration::from_secs(5)))
        .acquire()
        .unwrap();
    let listed = || {
        fixed
            .status(fairlock::LockKind::Semaphore, "pool", 1)
            .unwrap()
            .holders[0]
            .who
            .client_id()
            .to_owned()
    };
    assert_eq!(listed(), renewed.id());
    let args = ["100ms", "--semaphore", "--limit", "1"];
    let watch = watcher(&server, &scratch, "pool", &args);
    assert!(
        await_blocks(&out, 1)[0].contains("2 held"),
        "{:?}",
        read(&out)
    );
    assert!(
        wait_until(PATIENCE, || listed() == fixed.id()),
        "listed in turn"
    );
    let mut conn = server.conn();
    let before = script_calls(&mut conn);
    assert!(wait_until(PATIENCE, || script_calls(&mut conn) >= before + 3));
    assert_eq!(
        blocks(&out).len(),
        1,
        "no change, no block: {:?}",
        read(&out)
    );
    drop(b);
    let gone = await_blocks(&out, 2);
    assert!(gone[1].contains("changed: semaphore: 1 held"), "{gone:?}");
    assert!(!gone[1].contains("new holder"), "{gone:?}");
    watch.signal("TERM");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
    drop(a);
}

/// `--count N` counts reads, printed or not: a quiet lock watched into a
/// pipe ends after N reads, N-1 intervals (it counted printed changes,
/// so with nothing changing it never ended).
#[test]
fn count_ends_a_quiet_watch_into_a_pipe() {
    let server = RedisServer::start();
    for json in [false, true] {
        let started = Instant::now();
        let out = output(
            fairlock(&server)
                .args(["status", "quiet", "--watch", "500ms", "--count", "2"])
                .args(json.then_some("--json")),
            PATIENCE,
        );
        let took = started.elapsed();
        eprintln!("--watch 500ms --count 2 (json {json}): ended after {took:?}");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_millis(1500),
            "two reads, one interval apart: {took:?}"
        );
        let printed = stdout(&out);
        let views = if json {
            printed.lines().count()
        } else {
            printed.matches(BLOCK).count()
        };
        assert_eq!(views, 1, "one view, nothing changed: {printed:?}");
    }
}

#[test]
fn a_redis_outage_is_said_once_and_so_is_its_end() {
    let mut server = RedisServer::start();
    let scratch = Scratch::new("watch-outage");
    let (out, err) = (scratch.path("out"), scratch.path("err"));
    let mut watch = watcher(&server, &scratch, "outage", &["100ms"]);
    await_blocks(&out, 1);

    server.kill();
    assert!(
        wait_until(PATIENCE, || read(&err).contains("cannot read the status")),
        "the outage is said: {:?}",
        read(&err)
    );
    // Several retries fail meanwhile (10 s apart at most), said once.
    std::thread::sleep(Duration::from_secs(2));
    server.start_again();
    assert!(
        wait_until(Duration::from_secs(30), || read(&err)
            .contains("Redis answers again")),
        "its end is said: {:?}",
        read(&err)
    );
    let said = read(&err);
    assert_eq!(said.lines().count(), 2, "{said}");
    assert!(said.lines().all(|l| l.starts_with("fairlock: ")), "{said}");
    assert!(!watch.has_exited(), "still watching");

    watch.signal("TERM");
    let done = watch.finish(PATIENCE);
    assert_eq!(code(&done), 0);
    // The restarted server is empty, as the first one was: no change.
    assert_eq!(blocks(&out).len(), 1, "{:?}", read(&out));
}

#[test]
fn a_bad_interval_or_count_is_one_line_and_exit_2() {
    let server = RedisServer::start();
    for args in [
        &["--watch", "10ms"][..],
        &["--watch", "2h"],
        &["--watch", "soon"],
        &["--watch", "5"],
        &["--watch", "1s", "--count", "0"],
        &["--watch", "1s", "--count", "99999999999999999999"],
        &["--count", "3"],
    ] {
        let out = output(
            fairlock(&server).args(["status", "bad"]).args(args),
            PATIENCE,
        );
        assert_one_line_error(&out, 2, &format!("{args:?}"));
        assert_eq!(stdout(&out), "", "{args:?}");
    }
    let out = output(
        fairlock(&server).args(["status", "bad", "--watch", "50ms"]),
        PATIENCE,
    );
    assert!(
        stderr(&out).contains("from 100ms to 1h"),
        "{}",
        stderr(&out)
    );
    // A count past u64 is out of range, not "no whole number".
    let out = output(
        fairlock(&server).args([
            "status",
            "bad",
            "--watch",
            "--count",
            "99999999999999999999",
        ]),
        PATIENCE,
    );
    assert!(
        stderr(&out).contains("from 1 to 18446744073709551615"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_terminal_gets_the_frame_redrawn_in_place() {
    let server = RedisServer::start();
    let client = server.client();
    let guard = client.fair_mutex("shown").lock().unwrap();
    let inner = format!(
        "stty rows 40 cols 200; '{BIN}' --url '{}' status shown --watch 100ms --count 4",
        server.url()
    );
    let Some(out) = cli_support::on_a_terminal(&inner) else {
        return;
    };
    let shown = stdout(&out);
    assert_eq!(code(&out), 0, "{shown:?}");
    assert!(
        shown.starts_with("\x1b[?25l\x1b[H\x1b[2J"),
        "cursor hidden, screen cleared: {shown:?}"
    );
    let frames = shown.matches("\x1b[H").count();
    assert_eq!(
        frames, 4,
        "one frame per refresh, each from the top: {shown:?}"
    );
    assert_eq!(
        shown.matches("fairlock status \"shown\" at ").count(),
        4,
        "{shown:?}"
    );
    assert!(shown.contains(", every 100ms; Ctrl-C to stop"), "{shown:?}");
    assert!(shown.contains("no change since"), "{shown:?}");
    assert!(
        shown.contains(&format!("token {}", guard.fencing_token())),
        "{shown:?}"
    );
    assert!(shown.contains("lease "), "{shown:?}");
    assert!(shown.contains("\x1b[K"), "lines cleared: {shown:?}");
    assert!(
        shown.trim_end().ends_with("\x1b[J\x1b[?25h"),
        "cursor shown again at the end: {shown:?}"
    );
    drop(guard);
}

/// `--json` is JSON on a terminal too (a program reading through a pty:
/// `ssh -t`, `docker exec -t`, expect), as `status --json` and `elect
/// --watch --json` are: one object per change, no frame, no escape.
#[test]
fn json_on_a_terminal_is_json_not_a_frame() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: script(1) from util-linux is needed for a terminal");
        return;
    }
    let server = RedisServer::start();
    let guard = server.client().fair_mutex("shown").lock().unwrap();
    let inner = format!(
        "'{BIN}' --url '{}' status shown --watch 100ms --count 3 --json",
        server.url()
    );
    let out = output(
        Command::new("script")
            .args(["-qfec", &inner, "/dev/null"])
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        PATIENCE,
    );
    let shown = stdout(&out);
    assert_eq!(code(&out), 0, "{shown:?}");
    let objects: Vec<serde_json::Value> = (shown.lines())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("JSON: {shown:?}")))
        .collect();
    assert_eq!(
        objects.len(),
        1,
        "one read printed, nothing changed: {shown:?}"
    );
    let holder = &objects[0]["mutex"]["holders"][0];
    assert_eq!(holder["fencing_token"], guard.fencing_token(), "{shown:?}");
    assert!(objects[0]["time_ms"].is_u64(), "{shown:?}");
}

/// SIGINT or SIGTERM ends a watch with exit 0 from its start: also while
/// it connects to a server that does not answer (stopped by SIGSTOP: the
/// handshake waits out the 5 s command timeout), as `elect --watch` does.
#[test]
fn a_signal_ends_a_watch_with_0_while_redis_does_not_answer() {
    let server = RedisServer::start();
    let pid = server.pid().expect("the server runs").to_string();
    let kill = |signal: &str| {
        let status = Command::new("kill").args([signal, &pid]).status();
        assert!(status.unwrap().success());
    };
    for signal in ["TERM", "INT"] {
        kill("-STOP");
        let watch = Proc::spawn(fairlock(&server).args(["status", "stalled", "--watch"]));
        std::thread::sleep(Duration::from_millis(500));
        watch.signal(signal);
        let signalled = Instant::now();
        let out = watch.finish(PATIENCE);
        let took = signalled.elapsed();
        kill("-CONT");
        eprintln!(
            "SIG{signal} while connecting: {:?} after {took:?}",
            out.status
        );
        assert_eq!(out.status.code(), Some(0), "SIG{signal}: {}", stderr(&out));
        assert!(took < Duration::from_secs(2), "SIG{signal}: {took:?}");
    }
}

/// SIGTERM ends a watch with 0 also while its output cannot be written: a
/// reader that stopped reading (a stalled log shipper, a stopped pager)
/// leaves the pipe full and the watch blocked in its write, holding
/// stdout. `status --watch` (text and --json) and `elect --watch` alike.
#[test]
fn a_signal_ends_a_watch_whose_reader_stopped_reading() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let server = RedisServer::start();
    for args in [
        &["status", "stuck", "--watch", "100ms"][..],
        &["status", "stuck", "--watch", "100ms", "--json"],
        &["elect", "stuck", "--watch"],
    ] {
        // A pipe of one page, filled: the watch's first write blocks.
        let (reader, mut writer) = std::io::pipe().unwrap();
        let fd = writer.as_raw_fd();
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        unsafe {
            libc::fcntl(fd, libc::F_SETPIPE_SZ, 4096);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        while writer.write(&[b'x'; 512]).is_ok() {}
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
        let watch = Proc::spawn(fairlock(&server).args(args).stdout(Stdio::from(writer)));
        let wchan = format!("/proc/{}/wchan", watch.pid());
        assert!(
            wait_until(PATIENCE, || read(Path::new(&wchan)).contains("pipe_write")),
            "{args:?} blocked in its write: {:?}",
            read(Path::new(&wchan))
        );
        watch.signal("TERM");
        let signalled = Instant::now();
        let out = watch.finish(Duration::from_secs(5));
        let took = signalled.elapsed();
        eprintln!(
            "{args:?}: SIGTERM in a blocked write: {:?} after {took:?}",
            out.status
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(took < Duration::from_secs(2), "{args:?}: {took:?}");
        drop(reader);
    }
}

/// A reader that went away (`| head -1`) ends a watch with 0 at once,
/// though a quiet lock gives it nothing more to write (it ran on, the
/// pipeline with it, until the next change): `status --watch` and `elect
/// --watch` alike.
#[test]
fn a_watch_ends_when_its_reader_goes_away_though_nothing_changes() {
    use std::io::BufRead;
    let server = RedisServer::start();
    for args in [
        &["status", "quiet", "--watch", "100ms", "--json"][..],
        &["elect", "quiet", "--watch"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut watch = Proc::spawn(fairlock(&server).args(args).stdout(Stdio::from(writer)));
        let mut first = String::new();
        let mut reader = std::io::BufReader::new(reader);
        reader.read_line(&mut first).unwrap();
        assert!(!watch.has_exited(), "{args:?}: a watch runs on: {first}");
        drop(reader); // as `head -1` exits
        let gone = Instant::now();
        let out = watch.finish(Duration::from_secs(5));
        let took = gone.elapsed();
        eprintln!(
            "{args:?}: reader gone after {first:?}: {:?} after {took:?}",
            out.status
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(took < Duration::from_secs(2), "{args:?}: {took:?}");
    }
}

/// SIGQUIT (Ctrl-\ at the terminal) and SIGHUP end a watch as SIGINT and
/// SIGTERM do, exit 0, the cursor shown again: they killed it (131, 129;
/// a core dump where enabled), leaving the terminal's cursor hidden.
/// `status --watch` on a terminal, and `elect --watch`.
#[test]
fn sigquit_and_sighup_end_a_watch_with_0_and_the_cursor_shown() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: script(1) from util-linux is needed for a terminal");
        return;
    }
    let server = RedisServer::start();
    let scratch = Scratch::new("watch-quit");
    let mut conn = server.conn();
    for signal in ["QUIT", "HUP"] {
        let pid_file = scratch.path(&format!("pid-{signal}"));
        let inner = format!(
            "echo $$ > '{}'; exec '{BIN}' --url '{}' status shown --watch 100ms",
            pid_file.display(),
            server.url()
        );
        let before = script_calls(&mut conn);
        let watch = Proc::spawn(
            Command::new("script")
                // script(1) runs `inner` with `$SHELL -c` (sh where SHELL is
                // unset, as in CI): its `$$` is that shell, which `exec`
                // makes the watch. Nested in another `sh -c`, the `$$` was
                // the outer shell's, which dash keeps as a parent: the
                // signal killed it, not the watch (exit 131).
                .args(["-qfec", &inner, "/dev/null"])
                .env_remove("REDIS_URL")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        // Its second read begun (four status scripts a read): the first
        // frame is shown, the cursor hidden.
        assert!(wait_until(PATIENCE, || script_calls(&mut conn) > before + 4));
        let pid = cli_support::read_pid(&pid_file).expect("the watch's pid");
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        assert!(sent.unwrap().success());
        let out = watch.finish(PATIENCE);
        let shown = stdout(&out);
        eprintln!(
            "SIG{signal}: {:?}, ends {:?}",
            out.status,
            &shown[shown.len().saturating_sub(20)..]
        );
        assert_eq!(code(&out), 0, "SIG{signal}: {shown:?}");
        assert!(
            shown.trim_end().ends_with("\x1b[?25h"),
            "SIG{signal}: cursor shown: {shown:?}"
        );

        let watch = Proc::spawn(fairlock(&server).args(["elect", "quit", "--watch"]));
        let before = script_calls(&mut conn);
        assert!(wait_until(PATIENCE, || script_calls(&mut conn) > before));
        watch.signal(signal);
        let out = watch.finish(PATIENCE);
        assert_eq!(
            out.status.code(),
            Some(0),
            "elect --watch, SIG{signal}: {:?}",
            out.status
        );
    }
}

/// A semaphore watched with `--limit 1` that goes from one holder (listed)
/// to two (beyond the limit, so none listed) is held by two: the block
/// says so, and not that it is free (it said "semaphore: free" beside
/// "semaphore: 2 held", as if the holders listed were all there were).
#[test]
fn holders_beyond_the_limit_coming_are_not_a_free_lock() {
    let server = RedisServer::start();
    let scratch = Scratch::new("watch-limit-free");
    let out = scratch.path("out");
    let client = server.client();
    let semaphore = client.fair_semaphore("pool", 2);
    let a = semaphore.acquire().unwrap();
    let args = ["100ms", "--semaphore", "--limit", "1"];
    let watch = watcher(&server, &scratch, "pool", &args);
    let first = await_blocks(&out, 1);
    assert!(first[0].contains("1 held"), "{first:?}");
    let b = semaphore.acquire().unwrap();
    let both = await_blocks(&out, 2);
    assert!(both[1].contains("changed: semaphore: 2 held"), "{both:?}");
    let said = both[1].lines().find(|l| l.starts_with("changed:")).unwrap();
    assert!(!said.contains("free"), "{both:?}");
    // Both gone (one by one, or between two reads): the last block says
    // the semaphore is free, from two holders beyond the limit too.
    drop((a, b));
    assert!(
        wait_until(PATIENCE, || blocks(&out)
            .last()
            .is_some_and(|block| block.contains("0 held, 2 free"))),
        "{:?}",
        read(&out)
    );
    let freed = blocks(&out);
    assert!(
        freed.last().unwrap().contains("semaphore: free"),
        "{freed:?}"
    );
    watch.signal("TERM");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
}

/// A queue watched with `--limit 1` moves up: when the head waiter gets
/// the lock, the next one comes into the part listed. Nobody joined, and
/// the block says only who left (it said "queue: 1 joined, 1 left, 2
/// waiting", taking the waiter that moved up for one that came).
#[test]
fn waiters_moving_up_into_the_limit_did_not_join() {
    let server = RedisServer::start();
    let scratch = Scratch::new("watch-limit-queue");
    let out = scratch.path("out");
    let client = server.client();
    let guard = client.fair_mutex("line").lock().unwrap();
    let queued = |n: usize| {
        let status = client
            .status(fairlock::LockKind::Mutex, "line", 10)
            .unwrap();
        status.queue_len == n
    };
    let mut waiters = Vec::new();
    for n in 1..=3 {
        waiters.push(Proc::spawn(
            fairlock(&server).args(["run", "line", "--", "sleep", "30"]),
        ));
        assert!(wait_until(PATIENCE, || queued(n)), "waiter {n} queued");
    }
    let watch = watcher(&server, &scratch, "line", &["100ms", "--limit", "1"]);
    let first = await_blocks(&out, 1);
    assert!(first[0].contains("queue:    3 waiting"), "{first:?}");
    guard.unlock().unwrap();
    let moved = await_blocks(&out, 2);
    let said = moved[1]
        .lines()
        .find(|l| l.starts_with("changed:"))
        .unwrap();
    assert!(said.contains("queue: 1 left, 2 waiting"), "{moved:?}");
    assert!(!said.contains("joined"), "{moved:?}");
    watch.signal("TERM");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
    drop(waiters);
}
