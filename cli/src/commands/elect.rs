//! `fairlock elect`: campaign for the leadership of an election and run a
//! command while leading (`run`'s waiting, running, stopping and exit
//! codes: [`run::run_holding`]), or with `--watch` (the library's
//! `Election::watch`) print every change of its leader, one line each.

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use clap::Args;
use fairlock::{Election, LeaderEvent, MAX_ELECTION_VALUE_LEN};
use serde_json::{json, Value};

use super::lock_name;
use super::run::{self, OnRevoke, RunArgs};
use crate::duration::{self, human};
use crate::kinds::Lock;
use crate::{exit, identity, watch, Connection, Failure, EXIT_CODES};

/// How long one wait of `--watch` for a change lasts before it waits
/// again (it reads the election at least this often besides).
const WATCH_WAIT: Duration = Duration::from_secs(60);
/// Between two attempts of `--watch` when Redis fails after its start.
const WATCH_RETRY: Duration = Duration::from_secs(1);

/// Campaign for the leadership of the election NAME, run COMMAND while
/// leading; or watch who leads (--watch).
///
/// Candidates lead one at a time, in the order their campaigns reached
/// Redis. Once this one leads, COMMAND runs; when it ends, the leader
/// resigns and the next candidate leads at once. A leader whose lease is
/// lost (this process died, or was cut off from Redis) leads no longer:
/// with --kill-on-loss COMMAND is stopped then (SIGTERM, then SIGKILL 5 s
/// later). Waiting, signals and exit codes are `fairlock run`'s. COMMAND
/// gets FAIRLOCK_TOKEN (the term), FAIRLOCK_VALUE, FAIRLOCK_NAME and
/// FAIRLOCK_CLIENT_ID in its environment.
///
/// With --watch, prints each new leader and each vacancy as one line
/// (the first: who leads now), every change in order, until SIGINT or
/// SIGTERM (SIGHUP, SIGQUIT) (exit 0).
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct ElectArgs {
    /// Name of the election.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Do not campaign: print every change of leader and every vacancy,
    /// one line each, until interrupted (the library's `Election::watch`).
    #[arg(long, alias = "observe")]
    pub watch: bool,

    /// With --watch: one JSON object per line.
    #[arg(long)]
    pub json: bool,

    /// The value this candidate campaigns with, which names it wherever
    /// the leader is shown (default: HOST:PID): 1 to 256 bytes of
    /// printable ASCII without spaces, e.g. 10.0.0.7:8080.
    #[arg(long, value_name = "VALUE", value_parser = value, conflicts_with = "watch")]
    pub value: Option<String>,

    /// Give up after waiting this long (500ms, 10s, 5m, 2h); 0s means do not
    /// wait. Waits forever when not given.
    #[arg(short, long, value_name = "DURATION", value_parser = duration::parse, conflicts_with = "watch")]
    pub wait: Option<Duration>,

    /// Do not wait at all: lead only if nobody leads or waits.
    #[arg(short, long, conflicts_with_all = ["wait", "watch"])]
    pub nonblock: bool,

    /// The lease the watchdog renews while leading (default 30s): a
    /// killed leader leads no longer this long after its last renewal (as
    /// `run --lease`).
    #[arg(long, value_name = "DURATION", value_parser = run::lease, conflicts_with = "watch")]
    pub lease: Option<Duration>,

    /// Lead for at most this long, with no watchdog renewing the lease
    /// (as `run --fixed-lease`).
    #[arg(long, value_name = "DURATION", value_parser = run::lease, conflicts_with_all = ["lease", "watch"])]
    pub fixed_lease: Option<Duration>,

    /// Lead for at most this long, the lease renewed until then; then
    /// COMMAND is stopped and fairlock exits 70 (as `run --max-hold`).
    #[arg(long, value_name = "DURATION", value_parser = run::lease, conflicts_with_all = ["fixed_lease", "watch"])]
    pub max_hold: Option<Duration>,

    /// Exit code when --wait or -n runs out.
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = exit::TIMED_OUT, conflicts_with = "watch")]
    pub conflict_exit_code: u8,

    /// Stop COMMAND (SIGTERM, then SIGKILL 5 s later) as soon as the
    /// leadership is found lost, instead of letting it finish.
    #[arg(long, conflicts_with = "watch")]
    pub kill_on_loss: bool,

    /// The signal COMMAND gets when the leader is asked to step down
    /// (`fairlock revoke NAME --election`), as `fairlock run --on-revoke`:
    /// TERM by default; `none` lets it run.
    #[arg(long, value_name = "SIGNAL", default_value = "TERM", value_parser = run::on_revoke, conflicts_with = "watch")]
    pub on_revoke: OnRevoke,

    /// No live waiting line and no notice when --wait runs out.
    #[arg(short, long, conflicts_with = "watch")]
    pub quiet: bool,

    /// The command to run while leading, and its arguments (after `--`).
    #[arg(
        required_unless_present = "watch",
        conflicts_with = "watch",
        trailing_var_arg = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// Checks a value as the library will, so a bad one is a usage error.
fn value(text: &str) -> Result<String, String> {
    let printable = |b| (0x21..=0x7E).contains(&b);
    if (1..=MAX_ELECTION_VALUE_LEN).contains(&text.len()) && text.bytes().all(printable) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "a value must be 1 to {MAX_ELECTION_VALUE_LEN} bytes of printable ASCII without spaces"
        ))
    }
}

/// `HOST:PID`, the value of a candidate given none.
fn default_value() -> String {
    let host = identity::hostname()
        .filter(|host| value(host).is_ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Campaigns and runs the command while leading (saying when it leads
/// and resigned with `verbose`, the global -v), or watches.
pub fn exec(connection: &Connection, args: ElectArgs, verbose: bool) -> Result<i32, Failure> {
    if args.watch {
        return watch_leaders(connection, &args.name, args.json);
    }
    if args.json {
        let usage = anyhow!("--json goes with --watch (see fairlock elect --help)");
        return Err(Failure::new(exit::USAGE, usage));
    }
    let value = args.value.unwrap_or_else(default_value);
    let run = RunArgs {
        name: args.name,
        wait: args.wait,
        nonblock: args.nonblock,
        mutex: false,
        semaphore: None,
        read: false,
        write: false,
        lease: args.lease,
        fixed_lease: args.fixed_lease,
        max_hold: args.max_hold,
        conflict_exit_code: args.conflict_exit_code,
        kill_on_loss: args.kill_on_loss,
        on_revoke: args.on_revoke,
        quiet: args.quiet,
        command: args.command,
    };
    run::run_holding(connection, run, verbose, |client, run| {
        Lock::election(client, &run.name, &value, run.lease())
    })
}

/// Prints every change of the election's leader until a signal (exit 0)
/// or stdout closing (exit 0). Only a failure before the first line is an
/// error (69, 77 or 78, by its kind); later ones are tried again, the
/// first said on stderr, and so is Redis answering again.
fn watch_leaders(connection: &Connection, name: &str, json: bool) -> Result<i32, Failure> {
    watch::stop_on_signals().map_err(|err| {
        Failure::new(
            exit::UNAVAILABLE,
            anyhow!(err).context("cannot handle signals"),
        )
    })?;
    let client = connection.connect()?;
    let doing = || format!("watching the election {name:?} failed");
    let election = client.election(name);
    let mut watch = election
        .watch()
        .map_err(|err| Failure::redis(err, doing()))?;
    let mut printed = false;
    // Since when and how many times the watch failed: said once, and its end.
    let mut outage: Option<(Instant, u32)> = None;
    loop {
        // While failing, a short wait: an answer again ends the outage.
        let wait = if outage.is_some() {
            WATCH_RETRY
        } else {
            WATCH_WAIT
        };
        let asked = Instant::now();
        let event = match watch.next(wait) {
            Err(err) if !printed => return Err(Failure::redis(err, doing())),
            Err(err) => {
                let (_, failures) = outage.get_or_insert_with(|| {
                    eprintln!("fairlock: warning: {}: {err}; trying again", doing());
                    // Since the failed read began: one that timed out had
                    // waited its timeout (a pooled connection's or its
                    // reply's), within this call.
                    let now = Instant::now();
                    let waited = match err.is_timeout() {
                        true => connection.least_timeout(),
                        false => Duration::ZERO,
                    };
                    (now.checked_sub(waited).map_or(asked, |at| at.max(asked)), 0)
                });
                *failures += 1;
                std::thread::sleep(WATCH_RETRY);
                continue;
            }
            // A retry whose read (or subscription opened again) a stalled
            // server left unanswered by its deadline comes back empty, as
            // one that found no change does: Redis answers again only if
            // what the watch needs gets a reply now.
            Ok(None) if outage.is_some() && !answers(&election) => {
                if let Some((_, failures)) = outage.as_mut() {
                    *failures += 1;
                }
                std::thread::sleep(WATCH_RETRY);
                continue;
            }
            Ok(event) => {
                if let Some((since, failures)) = outage.take() {
                    let (after, failed) = (human(since.elapsed()), watch::failed_reads(failures));
                    eprintln!(
                        "fairlock: {name:?}: Redis answers again, after {after} and {failed}"
                    );
                }
                match event {
                    Some(event) => event,
                    None => continue,
                }
            }
        };
        let now = SystemTime::now();
        let line = if json {
            json_line(&event, now).to_string()
        } else {
            // Escaped: a value from Redis may hold any byte.
            format!("{} {}", watch::stamp(now), event.to_string().escape_debug())
        };
        // Locked per line: a signal's exit flushes stdout too.
        let mut out = std::io::stdout().lock();
        if let Err(err) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            // Nobody reads any more (or, but for a closed pipe, the exit
            // says it could not write: crate::output_failed).
            crate::output_failed(&err);
            return Ok(0);
        }
        printed = true;
    }
}

/// Whether Redis answers what a watch of `election` needs: a subscription
/// on a new connection (a watch of its own, dropped at once) and a read of
/// the election (on the pool's connections, which a server that answers
/// only the connections it has still answers).
fn answers(election: &Election) -> bool {
    election.watch().is_ok() && election.leader().is_ok()
}

/// One event as `--watch --json` prints it.
fn json_line(event: &LeaderEvent, at: SystemTime) -> Value {
    let time_ms = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    match event {
        LeaderEvent::Leads(leader) => json!({
            "event": "leader",
            "time_ms": time_ms,
            "term": leader.term,
            "value": leader.value,
            "owner": leader.who.to_string(),
            "client_id": leader.who.client_id(),
        }),
        LeaderEvent::Vacant { ended } => json!({
            "event": "vacant",
            "time_ms": time_ms,
            "ended_term": ended,
        }),
        LeaderEvent::Missed { after } => json!({
            "event": "missed",
            "time_ms": time_ms,
            "after_term": after,
        }),
        _ => json!({ "event": "other", "time_ms": time_ms, "text": event.to_string() }),
    }
}
