//! `fairlock elect`, driven as a built binary against a private
//! redis-server per test: candidates lead in turn, a SIGKILLed leader is
//! replaced once its lease runs out, and two `elect --watch` processes
//! (NDJSON and human lines) print every leader and every vacancy in order,
//! the one a killed lone leader leaves too, and end with 0 on SIGTERM and
//! SIGINT; a lost leadership stops the command with --kill-on-loss and
//! exits 70; the command's own exit code, its environment, -n's 75 and
//! usage errors; a SIGKILLed leader's command gets SIGTERM once.
//!
//! The observers write to scratch files the test reads as they grow, so
//! each step waits for what they printed, not for time to pass.

use crate::cli_support;

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cli_support::{
    assert_one_line_error, code, fairlock, output, read_pid, stderr, stdout, Proc, Scratch,
    PATIENCE,
};
use fairlock_test_support::{wait_until, RedisServer};
use serde_json::Value;

/// An `elect --watch` of `name` (with `extra` arguments) writing its
/// stdout to `file`.
fn observer(server: &RedisServer, name: &str, extra: &[&str], file: &Path) -> Proc {
    Proc::spawn(
        fairlock(server)
            .args(["elect", name, "--watch"])
            .args(extra)
            .stdout(Stdio::from(File::create(file).unwrap())),
    )
}

/// The lines `file` holds once it holds at least `n`, within `PATIENCE`.
fn lines(file: &Path, n: usize) -> Vec<String> {
    let read = || -> Vec<String> {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    };
    assert!(
        wait_until(PATIENCE, || read().len() >= n),
        "{n} lines expected in {}, got {:?}",
        file.display(),
        read()
    );
    read()
}

/// A candidate of `name` with `value` and a renewed lease of `lease`
/// running `script`: a killed one leads no longer after `lease`.
fn candidate(server: &RedisServer, name: &str, value: &str, lease: &str, script: &str) -> Proc {
    Proc::spawn(fairlock(server).args([
        "elect", name, "--value", value, "--lease", lease, "--", "sh", "-c", script,
    ]))
}

/// The term a candidate's command wrote to `path`, once it did.
fn term_in(path: &Path) -> u64 {
    assert!(
        wait_until(PATIENCE, || read_pid(path).is_some()),
        "{} never written",
        path.display()
    );
    read_pid(path).unwrap().parse().unwrap()
}

#[test]
fn a_killed_leader_is_replaced_and_the_observers_print_every_leader_and_vacancy() {
    let server = RedisServer::start();
    let scratch = Scratch::new("elect-observe");
    let (json_out, human_out) = (scratch.path("json"), scratch.path("human"));
    let json = observer(&server, "e", &["--json"], &json_out);
    let human = observer(&server, "e", &[], &human_out);
    let first = lines(&json_out, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&first[0]).unwrap()["event"],
        "vacant",
        "nobody leads yet: {first:?}"
    );
    lines(&human_out, 1);

    // a leads (a lease of 1 s, its command sleeping on), b queues
    // behind it; a is SIGKILLed: b leads once a's lease ran out, runs, and
    // resigns with nobody waiting.
    let (a_term, b_term) = (scratch.path("a"), scratch.path("b"));
    let a = candidate(
        &server,
        "e",
        "a",
        "1s",
        &format!("echo $FAIRLOCK_TOKEN > {}; sleep 30", a_term.display()),
    );
    let a_term = term_in(&a_term);
    let b = candidate(
        &server,
        "e",
        "b",
        "5s",
        &format!("echo $FAIRLOCK_TOKEN > {}; sleep 0.3", b_term.display()),
    );
    let client = server.client();
    let election = client.election("e");
    assert!(wait_until(PATIENCE, || election.queue_len().unwrap() == 1));
    let killed = Instant::now();
    a.signal("KILL");
    let out = b.finish(PATIENCE);
    assert_eq!(code(&out), 0, "b ran and resigned: {}", stderr(&out));
    let b_term = term_in(&b_term);
    let replaced = killed.elapsed();
    assert!(b_term > a_term);

    // c leads alone with a lease of 600 ms and is SIGKILLed: the vacancy
    // it leaves is said by no script, yet printed (the watch reads the
    // election again as the leader's lease would run out).
    let c = Proc::spawn(fairlock(&server).args([
        "elect", "e", "--value", "c", "--lease", "600ms", "--", "sleep", "30",
    ]));
    assert!(wait_until(PATIENCE, || election
        .leader()
        .unwrap()
        .is_some_and(|l| l.value == "c")));
    let c_term = election.leader().unwrap().unwrap().term;
    c.signal("KILL");

    // Every leader and vacancy, in order: the vacancy between a and b
    // only if an observer read the election while it lasted (between a's
    // lease end and b's claim).
    let last = format!("\"ended_term\":{c_term}");
    let read = || std::fs::read_to_string(&json_out).unwrap_or_default();
    assert!(
        wait_until(PATIENCE, || read().contains(&last)),
        "c's vacancy printed: {}",
        read()
    );
    let json_events: Vec<Value> = read()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut said: Vec<(String, u64, String)> = json_events
        .iter()
        .map(|e| {
            let event = e["event"].as_str().unwrap().to_owned();
            let term = e["term"].as_u64().or(e["ended_term"].as_u64()).unwrap_or(0);
            let value = e["value"].as_str().unwrap_or("").to_owned();
            (event, term, value)
        })
        .collect();
    let between = ("vacant".to_owned(), a_term, String::new());
    let had_between = said.get(2) == Some(&between);
    if had_between {
        said.remove(2);
    }
    let leader = |term, value: &str| ("leader".to_owned(), term, value.to_owned());
    let vacant = |term| ("vacant".to_owned(), term, String::new());
    assert_eq!(
        said,
        [
            vacant(0),
            leader(a_term, "a"),
            leader(b_term, "b"),
            vacant(b_term),
            leader(c_term, "c"),
            vacant(c_term),
        ],
        "every leader and vacancy in order: {json_events:?}"
    );
    assert_eq!(
        json_events.len(),
        6 + usize::from(had_between),
        "nothing more"
    );
    for e in &json_events {
        assert!(e["time_ms"].as_u64().is_some(), "{e}");
    }
    let human_lines = lines(&human_out, 6);
    let text = human_lines.join("\n");
    for expected in [
        format!("leader a term {a_term} ("),
        format!("leader b term {b_term} ("),
        format!("vacant after term {b_term}"),
        format!("leader c term {c_term} ("),
        format!("vacant after term {c_term}"),
    ] {
        assert!(text.contains(&expected), "{expected:?} in {text}");
    }
    eprintln!(
        "elect: b led {} ms after a was SIGKILLed (a's lease 1 s)",
        replaced.as_millis()
    );
    assert!(replaced < Duration::from_secs(1) + Duration::from_millis(1500));

    // SIGTERM and SIGINT end the observers with 0.
    json.signal("TERM");
    human.signal("INT");
    let out = json.finish(PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = human.finish(PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_lost_leadership_stops_the_command_and_exit_codes_are_runs() {
    let server = RedisServer::start();
    let scratch = Scratch::new("elect-codes");

    // The command's exit code passes through; it gets its term and the
    // default value, HOST:PID of fairlock; the leader resigns after it.
    let mut cmd = fairlock(&server);
    cmd.args(["elect", "codes"]).args([
        "--",
        "sh",
        "-c",
        "echo \"$FAIRLOCK_VALUE $FAIRLOCK_TOKEN\"; exit 7",
    ]);
    let proc = Proc::spawn(&mut cmd);
    let pid = proc.pid();
    let out = proc.finish(PATIENCE);
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    let said = stdout(&out);
    let (value, term) = said.trim().split_once(' ').expect("value and term");
    assert!(value.ends_with(&format!(":{pid}")), "{value}");
    assert!(term.parse::<u64>().unwrap() > 0, "{term}");
    let election = server.client().election("codes");
    assert_eq!(election.leader().unwrap(), None, "resigned");

    // -n while another leads: 75, nothing run.
    let leadership = election.with_value("other").campaign().unwrap();
    let marker = scratch.path("ran");
    let out = output(
        fairlock(&server)
            .args(["elect", "codes", "-n", "--", "touch"])
            .arg(&marker),
        PATIENCE,
    );
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(!marker.exists());
    leadership.unlock().unwrap();

    // A leadership lost while the command runs (a fixed lease of 300 ms)
    // with --kill-on-loss: the command gets SIGTERM, fairlock exits 70.
    let termed = scratch.path("termed");
    let script = format!(
        "trap 'touch {}; kill $!; exit 143' TERM; sleep 30 & wait",
        termed.display()
    );
    let started = Instant::now();
    let out = output(
        fairlock(&server).args([
            "elect",
            "codes",
            "--fixed-lease",
            "300ms",
            "--kill-on-loss",
            "--",
            "sh",
            "-c",
            &script,
        ]),
        PATIENCE,
    );
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lost the leadership on \"codes\" (election)"),
        "{}",
        stderr(&out)
    );
    assert!(termed.exists(), "the command got SIGTERM");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped, not waited for"
    );

    // Usage errors: a bad value, a command with --watch, no command.
    for args in [
        &["elect", "codes", "--value", "has space", "--", "true"][..],
        &["elect", "codes", "--watch", "--", "true"],
        &["elect", "codes"],
        &["elect", "codes", "--json", "--", "true"],
    ] {
        let out = output(fairlock(&server).args(args), PATIENCE);
        assert_one_line_error(&out, 2, &format!("{args:?}"));
    }
}

/// A leader's fairlock SIGKILLed: its command gets SIGTERM exactly once
/// (it used to get it once per thread of the dying fairlock that it was
/// handed to on the way out: PR_SET_PDEATHSIG fires when the parent
/// *thread* exits, and the kernel first hands an orphan to another live
/// thread of the same process). The command counts the SIGTERMs it
/// receives; 60 rounds.
#[test]
fn a_killed_leaders_command_gets_sigterm_once() {
    let server = RedisServer::start();
    let scratch = Scratch::new("elect-sigterm-once");
    let mut counts = Vec::new();
    for round in 0..60 {
        let (pid, count) = (
            scratch.path(&format!("pid{round}")),
            scratch.path(&format!("count{round}")),
        );
        // Each SIGTERM adds a line to `count`; the loop sleeps in short
        // steps so that each is handled as it comes.
        let script = format!(
            "trap 'echo x >> {count}' TERM; echo $$ > {pid}; while :; do sleep 0.02; done",
            count = count.display(),
            pid = pid.display()
        );
        let name = format!("once{round}");
        let leader =
            Proc::spawn(fairlock(&server).args(["elect", &name, "--", "sh", "-c", &script]));
        let command = {
            assert!(
                wait_until(PATIENCE, || read_pid(&pid).is_some()),
                "round {round}"
            );
            read_pid(&pid).unwrap()
        };
        leader.signal("KILL");
        drop(leader);
        let seen = || {
            std::fs::read_to_string(&count)
                .unwrap_or_default()
                .lines()
                .count()
        };
        assert!(
            wait_until(PATIENCE, || seen() >= 1),
            "round {round}: no SIGTERM"
        );
        // A second SIGTERM comes within microseconds of the first, if at
        // all; the command handles each within 20 ms.
        std::thread::sleep(Duration::from_millis(100));
        counts.push(seen());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &command])
            .status();
    }
    assert!(
        counts.iter().all(|&n| n == 1),
        "SIGTERMs per round: {counts:?}"
    );
}

/// A Redis outage after the first line is said once on stderr, and so is
/// its end, as `status --watch` says them (cli_watch.rs): `elect --watch`
/// said a warning per failed attempt, about one a second, and never that
/// Redis answered again.
#[test]
fn a_watchs_outage_is_said_once_and_so_is_its_end() {
    let mut server = RedisServer::start();
    let scratch = Scratch::new("elect-outage");
    let (out, err) = (scratch.path("out"), scratch.path("err"));
    let watch = Proc::spawn(
        fairlock(&server)
            .args(["elect", "outage", "--watch"])
            .stdout(Stdio::from(File::create(&out).unwrap()))
            .stderr(Stdio::from(File::create(&err).unwrap())),
    );
    lines(&out, 1);
    server.kill();
    let said = || std::fs::read_to_string(&err).unwrap_or_default();
    assert!(wait_until(PATIENCE, || !said().is_empty()), "said");
    // Several attempts fail meanwhile.
    std::thread::sleep(Duration::from_secs(4));
    server.start_again();
    let back = wait_until(PATIENCE, || said().contains("answers again"));
    let said = said();
    eprintln!("{said}");
    assert!(back, "its end is said: {said}");
    assert_eq!(said.lines().count(), 2, "{said}");
    assert!(said.lines().all(|l| l.starts_with("fairlock: ")), "{said}");
    watch.signal("TERM");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
}

/// The end of a watch's outage says how long Redis was away: from the
/// failed read's start, not from its failure, which came a connect
/// timeout later (5 s): a 6 s outage was said as "after 2.0s".
#[test]
fn a_watchs_outage_is_said_with_its_whole_length() {
    let mut server = RedisServer::start();
    let scratch = Scratch::new("elect-outage-length");
    let (out, err) = (scratch.path("out"), scratch.path("err"));
    let watch = Proc::spawn(
        fairlock(&server)
            .args(["elect", "outage-length", "--watch"])
            .stdout(Stdio::from(File::create(&out).unwrap()))
            .stderr(Stdio::from(File::create(&err).unwrap())),
    );
    lines(&out, 1);
    let killed = Instant::now();
    server.kill();
    let said = || std::fs::read_to_string(&err).unwrap_or_default();
    assert!(wait_until(PATIENCE, || !said().is_empty()), "said");
    // Away 6 s in all, from the kill.
    std::thread::sleep(Duration::from_secs(6).saturating_sub(killed.elapsed()));
    server.start_again();
    let away = killed.elapsed();
    let back = wait_until(PATIENCE, || said().contains("answers again"));
    let said = said();
    assert!(back, "its end is said: {said}");
    let after = said
        .split("answers again, after ")
        .nth(1)
        .and_then(|rest| rest.split('s').next())
        .and_then(|secs| secs.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("a length in seconds: {said}"));
    eprintln!("away {away:?}; said: {said}");
    assert!(
        after >= away.as_secs_f64() - 0.3 && after <= away.as_secs_f64() + 3.0,
        "away {away:?}, said after {after}s: {said}"
    );
    watch.signal("TERM");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
}

/// A candidate stopped after it leads and before its command starts (held
/// there by its `-v` line, written to a full pipe) says it resigned, the
/// word of its `-v` lines ("leads", "resigned"), not that it released the
/// lock (it said "released \"stopped-leader\" (election)"); the election
/// is vacant at once.
#[cfg(target_os = "linux")]
#[test]
fn a_leader_stopped_before_its_command_says_it_resigned() {
    use cli_support::FullPipe;
    use fairlock::LockKind;
    use fairlock_test_support::join_within;
    let server = RedisServer::start();
    let client = server.client();
    let scratch = Scratch::new("stopped-leader");
    let ran = scratch.path("ran");
    let pipe = FullPipe::new(&scratch);
    let elect = Proc::spawn(
        fairlock(&server)
            .args(["-v", "elect", "stopped-leader", "--", "touch"])
            .arg(&ran)
            .stderr(pipe.writer()),
    );
    let leaders = || {
        (client.status(LockKind::Election, "stopped-leader", 1))
            .unwrap()
            .holder_count
    };
    assert!(wait_until(PATIENCE, || leaders() == 1), "leads");
    pipe.signal_while_blocked(&elect, "TERM");
    let reading = pipe.read_all();
    let out = elect.finish(PATIENCE);
    let said = join_within(reading, PATIENCE, "stderr read to its end");
    assert_eq!(code(&out), 143, "{said}");
    assert!(!ran.exists(), "the command was not run");
    assert!(
        said.contains(
            "interrupted by SIGTERM before the command started; resigned \"stopped-leader\" \
             (election), nothing was run"
        ),
        "{said}"
    );
    assert!(!said.contains("released"), "{said}");
    assert_eq!(leaders(), 0, "vacant when it exits: {said}");
}

/// A watch whose link stalls (a relay holds every byte: Redis answers
/// nothing) says its outage once, and its end only once Redis answers
/// again. Its retries, each given up at its own 1 s deadline, came back
/// empty, which it took for an answer: "Redis answers again" every 7 s
/// while nothing answered (4 times in 40 s of a stall), each followed
/// by the warning again.
#[test]
fn a_watch_in_a_stall_says_redis_answers_again_only_when_it_does() {
    watch_says_its_outage_once(
        "stalled",
        "nothing answered during the stall",
        |_, relay| relay.stall(),
    );
}

/// A leader whose leadership is taken away while its command runs (a
/// force unlock, another candidate waiting) names the new leader in the
/// words of its `-v` lines, and as `status` names it, by its value (an
/// identity) then its client: "it is now led by web-2:80 (owner C:...),
/// term T". It said "it is now held by client C, token T", a lock's
/// words, then "led by client C, term T", without the value.
#[test]
fn a_lost_leadership_names_the_new_leader_and_its_term() {
    use fairlock::LockKind;
    let server = RedisServer::start();
    let client = server.client();
    let leaders = || {
        (client.status(LockKind::Election, "taken", 1))
            .unwrap()
            .holder_count
    };
    let elect = Proc::spawn(fairlock(&server).args([
        "elect",
        "taken",
        "--kill-on-loss",
        "--",
        "sleep",
        "30",
    ]));
    assert!(wait_until(PATIENCE, || leaders() == 1), "leads");
    let other = server.client();
    let election = other.election("taken").with_value("web-2:80");
    let next = std::thread::spawn(move || election.campaign().unwrap());
    let queued = || {
        client
            .status(LockKind::Election, "taken", 1)
            .unwrap()
            .queue_len
    };
    assert!(
        wait_until(PATIENCE, || queued() == 1),
        "the next candidate waits"
    );
    assert!(client.force_unlock(LockKind::Election, "taken").unwrap());
    let next = next.join().unwrap();
    let out = elect.finish(PATIENCE);
    let said = stderr(&out);
    assert_eq!(code(&out), 70, "{said}");
    let lost = (said.lines())
        .find(|line| line.starts_with("fairlock: lost the leadership on \"taken\""))
        .unwrap_or_else(|| panic!("the loss said: {said}"));
    assert!(lost.contains("; it is now led by web-2:80 ("), "{lost}");
    assert!(lost.contains(other.id()), "{lost}");
    let term = format!("), term {}; stopping the command", next.term());
    assert!(lost.contains(&term), "{lost}");
    assert!(
        !lost.contains("held by") && !lost.contains("token"),
        "{lost}"
    );
    next.unlock().unwrap();
}

/// A candidate waiting on a terminal sees its live line in the election's
/// words: "leader's lease 1.9s left", as its other lines say "leads" and
/// "term". It said "holder's lease", a lock's words (and "lock being
/// handed over" for the leadership being handed over).
#[test]
fn a_terminal_shows_the_leaders_lease_while_a_candidate_waits() {
    let server = RedisServer::start();
    let client = server.client();
    let leadership = client.election("shown").campaign().unwrap();
    let inner = format!(
        "'{}' --url '{}' elect shown --wait 1s -- true",
        cli_support::BIN,
        server.url()
    );
    let Some(out) = cli_support::on_a_terminal(&inner) else {
        return;
    };
    let shown = stdout(&out);
    assert_eq!(code(&out), 75, "{shown}");
    assert!(
        shown.contains("waiting for \"shown\": position 1 of 1, waited"),
        "{shown:?}"
    );
    assert!(shown.contains(" of 1.0s, leader's lease"), "{shown:?}");
    assert!(!shown.contains("holder's"), "{shown:?}");
    leadership.unlock().unwrap();
}

/// A watch whose subscription was killed while the server answers the
/// connections a client has and no new one (a relay holds back the new
/// ones) cannot subscribe again: it says so once, and its end only once
/// it can. Its retries, each given up at its 1 s deadline, came back
/// empty while a read on the open connections got its reply: "Redis
/// answers again" every 7 s, each followed by the warning again, while
/// the watch could not subscribe.
#[test]
fn a_watch_that_cannot_subscribe_again_says_redis_answers_only_once_it_can() {
    let cut = |server: &RedisServer, relay: &fairlock_test_support::Relay| {
        relay.stall_new();
        let killed = fairlock_test_support::kill_subscribers(&mut server.conn());
        assert!(killed >= 1, "the watch's subscription killed");
    };
    watch_says_its_outage_once("resubscribe", "the watch could not subscribe", cut);
}

/// `elect NAME --watch` through a relay, a leader of a 1 s lease (renewed,
/// not through the relay: the watch reads again just after each end of it
/// would come, about every 1 s), its link then `cut` for 15 s past the
/// outage's warning (`what`: how): the outage is said once, and its end
/// once the link is back, nothing more.
fn watch_says_its_outage_once(
    name: &str,
    what: &str,
    cut: impl FnOnce(&RedisServer, &fairlock_test_support::Relay),
) {
    let server = RedisServer::start();
    let relay = fairlock_test_support::Relay::start(server.port());
    let scratch = Scratch::new(&format!("elect-{name}"));
    let (out, err) = (scratch.path("out"), scratch.path("err"));
    let client = (server.builder())
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let leadership = client.election(name).campaign().unwrap();
    let watch = Proc::spawn(
        cli_support::fairlock_at(&relay.url())
            .args(["elect", name, "--watch"])
            .stdout(Stdio::from(File::create(&out).unwrap()))
            .stderr(Stdio::from(File::create(&err).unwrap())),
    );
    lines(&out, 1);
    cut(&server, &relay);
    let said = || std::fs::read_to_string(&err).unwrap_or_default();
    assert!(
        wait_until(PATIENCE, || !said().is_empty()),
        "the outage said"
    );
    // Its retries fail meanwhile (a read of 5 s each, a second apart).
    std::thread::sleep(Duration::from_secs(15));
    let during = said();
    relay.resume();
    let back = wait_until(PATIENCE, || said().contains("answers again"));
    let said = said();
    eprintln!("{said}");
    assert!(
        !during.contains("answers again") && during.lines().count() == 1,
        "{what}: {during}"
    );
    assert!(back, "its end is said: {said}");
    assert_eq!(said.lines().count(), 2, "{said}");
    watch.signal("INT");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
    leadership.unlock().unwrap();
}

/// What `--watch` prints of a leader is what the election's history in
/// Redis holds, whoever wrote it: a value with an escape sequence is
/// printed escaped, not raw to the terminal. It was printed raw.
#[test]
fn a_watched_value_with_an_escape_is_printed_escaped() {
    let server = RedisServer::start();
    let scratch = Scratch::new("elect-escape");
    let out = scratch.path("out");
    let watch = Proc::spawn(
        fairlock(&server)
            .args(["elect", "escape", "--watch"])
            .stdout(Stdio::from(File::create(&out).unwrap())),
    );
    lines(&out, 1);
    use fairlock::__test_support::LockKeys;
    let keys = LockKeys::of_kind("fairlock", "escape", fairlock::LockKind::Election).unwrap();
    let mut conn = server.conn();
    let history = &keys.common()[2];
    let entry = "0 7 evil\x1b[2J c:u1@evil\x1b[2J";
    let _: i64 = redis::cmd("LPUSH")
        .arg(history)
        .arg(entry)
        .query(&mut conn)
        .unwrap();
    // Its channel's message has it read the history at once.
    let published: i64 = (redis::cmd("PUBLISH").arg("fairlock:election:escape"))
        .arg(&entry[2..])
        .query(&mut conn)
        .unwrap();
    assert_eq!(published, 1, "the watch listens");
    let said = lines(&out, 2);
    watch.signal("TERM");
    assert_eq!(code(&watch.finish(PATIENCE)), 0);
    assert!(!said[1].contains('\x1b'), "{said:?}");
    assert!(said[1].contains(r"leader evil\u{1b}[2J term 7"), "{said:?}");
}
