//! `fairlock status NAME --watch [INTERVAL]`: the status read again every
//! INTERVAL, for an operator chasing a stuck job.
//!
//! - On a terminal (stdout is one; not with `--json`) the view is redrawn in place every
//!   INTERVAL, under a header saying when and what last changed, so the
//!   leases and liveness can be seen ticking down.
//! - Elsewhere (a pipe, a log file) a timestamped block is printed only
//!   when something changed (a holder, the queue, the last token): a log
//!   of a quiet lock stays short. With `--json`, one object per line
//!   (a terminal too).
//! - A failed read says so once (in the frame on a terminal, else one line
//!   on stderr), retries with a growing delay, and says when it is back.
//!   Only the very first read failing is an error (69, 77 or 78), as for
//!   `status`: a watch that never saw the lock is most likely a wrong URL.
//! - `--count N` ends it after N reads (one every INTERVAL), whatever they
//!   printed: a quiet lock's watch into a pipe ends too.
//! - SIGINT or SIGTERM (or SIGHUP, SIGQUIT) ends it with exit 0 at once,
//!   even in the middle of a read, the cursor shown again.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fairlock::{Client, LockKind};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::changes::Shape;
use crate::duration::{self, human};
use crate::report::{read, to_json, to_text, Report};
use crate::terminal::{self, fit};
use crate::{exit_now, Failure};

/// Shortest refresh accepted: each one is four status scripts (one a
/// kind asked for).
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest refresh accepted: beyond it this is not watching.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// Longest wait between retries while Redis fails (or the interval if
/// that is longer).
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// ANSI: hide the cursor, home, clear the screen (the first frame).
const FIRST_FRAME: &str = "\x1b[?25l\x1b[H\x1b[2J";
/// ANSI: cursor home (every later frame overwrites the last one).
const HOME: &str = "\x1b[H";
/// ANSI: clear to the end of the line, of the screen; show the cursor.
const CLEAR_LINE: &str = "\x1b[K";
const CLEAR_BELOW: &str = "\x1b[J";
const SHOW_CURSOR: &str = "\x1b[?25h";

/// Held while a frame, a notice or the last words are written, so a
/// signal never cuts a frame in half. True once the cursor is hidden.
static OUTPUT: Mutex<bool> = Mutex::new(false);

/// Parses `--watch`'s INTERVAL: a duration as `run --wait` takes them,
/// within 100ms..=1h.
pub fn interval(text: &str) -> Result<Duration, String> {
    let interval = duration::parse(text)?;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&interval) {
        return Err(format!(
            "the watch interval must be from {} to {}",
            human(MIN_INTERVAL),
            human(MAX_INTERVAL)
        ));
    }
    Ok(interval)
}

/// Parses `--count`: a whole number from 1 to `u64::MAX` (a larger one
/// is refused as out of range, not as no number).
pub fn count(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "the count must be a whole number from 1 to {}",
            u64::MAX
        )),
    }
}

/// What to watch and how.
pub struct Watch<'a> {
    pub name: &'a str,
    /// The kinds asked for (`--mutex`, ...); empty: those in use.
    pub asked: &'a [LockKind],
    /// `--limit`: waiters (and holders) listed per lock.
    pub limit: usize,
    pub interval: Duration,
    pub json: bool,
    /// `--count`: stop after this many reads (as `top -n`), printed or
    /// not, failed or not.
    pub count: Option<u64>,
}

/// The last change seen: when, and what (empty for the first read).
struct Change {
    at: SystemTime,
    /// The same moment on the monotonic clock, for "how long ago".
    seen: Instant,
    what: Vec<String>,
}

/// Reads that keep failing, since the first of them.
struct Outage {
    since: SystemTime,
    began: Instant,
    failures: u32,
    error: String,
}

impl Outage {
    /// Delay before the next try: the interval, doubling per failure, up
    /// to [`MAX_BACKOFF`] (or the interval, if longer).
    fn backoff(&self, interval: Duration) -> Duration {
        let doubled = interval.saturating_mul(1 << self.failures.min(16).saturating_sub(1));
        doubled.min(MAX_BACKOFF.max(interval))
    }
}

/// Watches until a signal, `--count` reads, or stdout's reader going away
/// (seen at once: [`stop_on_signals`]); exit code 0.
pub fn exec(client: &Client, watch: &Watch<'_>) -> Result<i32, Failure> {
    let name = watch.name;
    // --json is JSON wherever it goes, a terminal too.
    let on_terminal = std::io::stdout().is_terminal() && !watch.json;
    let first = read(client, name, watch.asked, watch.limit)
        .map_err(|err| Failure::redis(err, format!("cannot read the status of {name:?}")))?;
    let mut pending = Some(first);
    // The last good read, shown under the error while reads fail.
    let mut last_good: Option<(SystemTime, Report)> = None;
    let mut seen: Option<Shape> = None;
    let mut change = Change {
        at: SystemTime::now(),
        seen: Instant::now(),
        what: Vec::new(),
    };
    let mut outage: Option<Outage> = None;
    let mut reads = 0u64;
    loop {
        let now = SystemTime::now();
        let started = Instant::now();
        let read = pending
            .take()
            .map_or_else(|| read(client, name, watch.asked, watch.limit), Ok);
        let (text, pause) = match read {
            Ok(report) => {
                let shape = Shape::of(&report);
                let mut what = seen
                    .as_ref()
                    .map_or_else(Vec::new, |seen| shape.changes_since(seen));
                let changed = seen.is_none() || !what.is_empty();
                if let Some(gone) = outage.take() {
                    let back = format!(
                        "Redis answers again, after {} and {}",
                        human(gone.began.elapsed()),
                        failed_reads(gone.failures)
                    );
                    if on_terminal {
                        what.insert(0, back);
                    } else {
                        notice(&format!("fairlock: {name:?}: {back}"));
                    }
                }
                if changed || !what.is_empty() {
                    change = Change {
                        at: now,
                        seen: Instant::now(),
                        what,
                    };
                }
                let text = if on_terminal {
                    Some(frame(watch, now, &change, &report))
                } else if changed && watch.json {
                    Some(json_line(name, now, &report))
                } else if changed {
                    Some(block(watch.name, now, &change, &report))
                } else {
                    None
                };
                seen = Some(shape);
                last_good = Some((now, report));
                (text, watch.interval)
            }
            Err(err) => {
                let error = err.to_string().replace(['\n', '\r'], " ");
                let outage = outage.get_or_insert_with(|| Outage {
                    since: now,
                    began: started,
                    failures: 0,
                    error: String::new(),
                });
                outage.failures += 1;
                outage.error = error;
                let pause = outage.backoff(watch.interval);
                let text = if on_terminal {
                    Some(stale_frame(watch, now, outage, pause, last_good.as_ref()))
                } else {
                    if outage.failures == 1 {
                        notice(&format!(
                            "fairlock: cannot read the status of {name:?}: {}; retrying",
                            outage.error
                        ));
                    }
                    None
                };
                (text, pause)
            }
        };
        if let Some(text) = text {
            if let Err(err) = show(&text, on_terminal) {
                // Nobody is watching any more (or, but for a closed pipe,
                // the exit says it could not write: crate::output_failed).
                crate::output_failed(&err);
                break;
            }
        }
        reads += 1;
        if watch.count.is_some_and(|count| reads >= count) {
            break;
        }
        std::thread::sleep(pause);
    }
    restore_terminal();
    Ok(0)
}

pub(crate) fn failed_reads(n: u32) -> String {
    match n {
        1 => "1 failed read".to_owned(),
        n => format!("{n} failed reads"),
    }
}

/// One terminal frame: header, what last changed, the status text.
fn frame(watch: &Watch<'_>, now: SystemTime, change: &Change, report: &Report) -> String {
    let mut out = header(watch, now);
    if change.what.is_empty() {
        let _ = writeln!(out, "no change since {}", clock(change.at));
    } else {
        let ago = change.seen.elapsed();
        let _ = writeln!(
            out,
            "changed at {} ({} ago): {}",
            clock(change.at),
            human(ago),
            change.what.join("; ")
        );
    }
    out.push('\n');
    out.push_str(&to_text(watch.name, report));
    out
}

fn header(watch: &Watch<'_>, now: SystemTime) -> String {
    format!(
        "fairlock status {:?} at {}, every {}; Ctrl-C to stop\n",
        watch.name,
        clock(now),
        human(watch.interval)
    )
}

/// A terminal frame while reads fail: the error, then the last view read
/// (its leases as they were then).
fn stale_frame(
    watch: &Watch<'_>,
    now: SystemTime,
    outage: &Outage,
    retry: Duration,
    last_good: Option<&(SystemTime, Report)>,
) -> String {
    let mut out = header(watch, now);
    let _ = writeln!(
        out,
        "cannot read the status since {} ({}, next try in {}): {}",
        clock(outage.since),
        failed_reads(outage.failures),
        human(retry),
        outage.error
    );
    if let Some((at, report)) = last_good {
        let _ = writeln!(out, "\nas read at {}:", clock(*at));
        out.push_str(&to_text(watch.name, report));
    }
    out
}

/// One block for a log: a timestamp line, what changed, the status text.
fn block(name: &str, now: SystemTime, change: &Change, report: &Report) -> String {
    let mut out = format!("--- {}\n", stamp(now));
    if !change.what.is_empty() {
        let _ = writeln!(out, "changed: {}", change.what.join("; "));
    }
    out.push_str(&to_text(name, report));
    out
}

/// One NDJSON line: `status --json`'s object plus `time_ms`, the Unix
/// time of the read in milliseconds.
fn json_line(name: &str, now: SystemTime, report: &Report) -> String {
    let mut object = to_json(name, report);
    let ms = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    object["time_ms"] = ms.into();
    format!("{object}\n")
}

/// Writes `text` to stdout: on a terminal, over the last frame, each line
/// cut to the width and the frame to the height.
fn show(text: &str, on_terminal: bool) -> std::io::Result<()> {
    let mut cursor_hidden = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = std::io::stdout().lock();
    if !on_terminal {
        out.write_all(text.as_bytes())?;
        return out.flush();
    }
    let (columns, rows) = terminal::size(libc::STDOUT_FILENO).unwrap_or((usize::MAX, usize::MAX));
    let mut screen = String::from(if *cursor_hidden { HOME } else { FIRST_FRAME });
    *cursor_hidden = true;
    let lines: Vec<&str> = text.lines().collect();
    // The last row stays free: a line written there would scroll.
    let room = rows.saturating_sub(1).max(1);
    let (shown, cut) = if lines.len() > room {
        (&lines[..room - 1], lines.len() - (room - 1))
    } else {
        (&lines[..], 0)
    };
    for line in shown {
        let _ = writeln!(screen, "{}{CLEAR_LINE}", fit(line, columns));
    }
    if cut > 0 {
        let more = format!("… {cut} more lines (a taller terminal, or --limit, shows them)");
        let _ = writeln!(screen, "{}{CLEAR_LINE}", fit(&more, columns));
    }
    screen.push_str(CLEAR_BELOW);
    out.write_all(screen.as_bytes())?;
    out.flush()
}

/// A line on stderr, between frames.
fn notice(line: &str) {
    let _only_one = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
    eprintln!("{line}");
}

/// Shows the cursor again if a frame hid it.
fn restore_terminal() {
    let mut cursor_hidden = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
    if std::mem::take(&mut *cursor_hidden) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(SHOW_CURSOR.as_bytes());
        let _ = out.flush();
    }
}

/// SIGINT and SIGTERM (SIGHUP and SIGQUIT too, as `run` takes them) end
/// the watch at once, with exit 0, the cursor shown again: the main thread
/// may be blocked in a read of an unreachable Redis, or in a write to a
/// reader that stopped reading. So does stdout's reader going away (`|
/// head -1`), though a quiet lock gives the watch nothing to write.
pub(crate) fn stop_on_signals() -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("fairlock-reader".into())
        .spawn(|| {
            // Only an error or a hang-up is asked for: what poll says of a
            // pipe whose reader closed it (a file or /dev/null: never).
            let mut out = libc::pollfd {
                fd: libc::STDOUT_FILENO,
                events: 0,
                revents: 0,
            };
            // SAFETY: one pollfd, owned here.
            while unsafe { libc::poll(&mut out, 1, -1) } < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
            if out.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                exit_now(0);
            }
        })?;
    let ends = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];
    let mut signals = Signals::new(crate::signals::not_ignored(&ends))?;
    std::thread::Builder::new()
        .name("fairlock-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                // Only a terminal has a cursor to show; elsewhere a write
                // blocked on a full pipe may hold OUTPUT.
                if std::io::stdout().is_terminal() {
                    restore_terminal();
                }
                exit_now(0);
            }
        })?;
    Ok(())
}

/// Local time of day, `14:03:22`.
fn clock(t: SystemTime) -> String {
    let tm = local(t);
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Local date and time to the millisecond with the UTC offset, for logs:
/// `2025-06-01 14:03:22.123 +0200`.
pub(crate) fn stamp(t: SystemTime) -> String {
    let tm = local(t);
    let ms = t
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_millis();
    let offset = tm.tm_gmtoff / 60;
    format!(
        "{}-{:02}-{:02} {:02}:{:02}:{:02}.{ms:03} {}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        if offset < 0 { '-' } else { '+' },
        offset.abs() / 60,
        offset.abs() % 60
    )
}

fn local(t: SystemTime) -> libc::tm {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as libc::time_t;
    // SAFETY: localtime_r only writes the tm it is given; on failure it
    // stays zeroed, which prints as a wrong but harmless time.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    tm
}
