//! `fairlock status`: who holds the lock, who waits for it, the last token;
//! for the mutex of the name, and for its semaphore and its reader-writer
//! lock when those are in use.

use std::fmt::Write as _;
use std::time::Duration;

use clap::Args;
use fairlock::{Holder, LockStatus, Participant, QueuedWaiter, RwLockStatus, SemaphoreStatus};
use serde_json::{json, Value};

use super::lock_name;
use crate::duration::human;
use crate::kinds::access_word;
use crate::{watch, Connection, Failure};

/// Show who holds NAME, who waits for it in order, and the last token.
///
/// Shows NAME's mutex, and NAME's semaphore and reader-writer lock too
/// while they are in use (a holder or a waiter, or their state still
/// recorded): each holder with its lease left and token (and read or
/// write), the waiters in order.
///
/// With --watch, keeps showing it: redrawn in place on a terminal, else a
/// block (and NDJSON line with --json) each time it changes. Ctrl-C stops.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    /// List at most this many waiters from the head of each queue (and
    /// this many holders of a semaphore).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,

    /// Keep watching, reading every INTERVAL (100ms to 1h; default 1s): on
    /// a terminal the view is redrawn in place, with what changed; else a
    /// timestamped block is printed each time the holders or the queue
    /// change (with --json, one JSON object per line). SIGINT or SIGTERM
    /// stops it (exit 0).
    #[arg(
        long,
        value_name = "INTERVAL",
        num_args = 0..=1,
        default_missing_value = "1s",
        value_parser = watch::interval
    )]
    pub watch: Option<Duration>,

    /// With --watch: stop after printing N views.
    #[arg(long, value_name = "N", requires = "watch", value_parser = watch::count)]
    pub count: Option<u64>,
}

/// Everything `status` shows of one name.
pub struct Report {
    pub mutex: LockStatus,
    /// The semaphore of the name, when in use.
    pub semaphore: Option<SemaphoreStatus>,
    /// The reader-writer lock of the name, when in use.
    pub rwlock: Option<RwLockStatus>,
}

/// Prints the holders, the queues in order and the last tokens; exit code 0.
pub fn exec(connection: &Connection, args: StatusArgs) -> Result<i32, Failure> {
    let name = args.name.as_str();
    let client = connection.connect()?;
    if let Some(interval) = args.watch {
        let watch = watch::Watch {
            name,
            limit: args.limit,
            interval,
            json: args.json,
            count: args.count,
        };
        return watch::exec(&client, &watch);
    }
    let report = read(&client, name, args.limit)
        .map_err(|err| Failure::redis(err, format!("cannot read the status of {name:?}")))?;
    if args.json {
        println!("{}", to_json(name, &report));
    } else {
        print!("{}", to_text(name, &report));
    }
    Ok(0)
}

/// Reads the status of the name's mutex, and of its semaphore and rwlock.
pub fn read(client: &fairlock::Client, name: &str, limit: usize) -> fairlock::Result<Report> {
    let mutex = client.fair_mutex(name).status(limit)?;
    // The permits given here only matter to an acquire: the status
    // script reads the semaphore's own number from Redis.
    let semaphore = client.fair_semaphore(name, 1).status(limit)?;
    let rwlock = client.fair_rwlock(name).status(limit)?;
    Ok(Report {
        mutex,
        semaphore: Some(semaphore).filter(semaphore_in_use),
        rwlock: Some(rwlock).filter(rwlock_in_use),
    })
}

/// A semaphore is shown while it has a holder or a waiter, or its number
/// of permits is still recorded (a fence life after the last one left).
fn semaphore_in_use(status: &SemaphoreStatus) -> bool {
    status.permits.is_some() || status.holder_count > 0 || status.queue_len > 0
}

/// A reader-writer lock likewise, its last token standing for its state.
fn rwlock_in_use(status: &RwLockStatus) -> bool {
    status.last_fencing_token.is_some() || status.holder_count > 0 || status.queue_len > 0
}

/// Who a participant is, the way `status` and `unlock` name it.
pub fn who(p: &Participant) -> String {
    let id = match p.thread() {
        Some(thread) => format!("client {} thread {thread}", p.client_id()),
        None => format!("owner {}", p.owner()),
    };
    match p.identity() {
        Some(identity) => format!("{identity} ({id})"),
        None => id,
    }
}

/// What is left of a holder's lease, the way `status` and `unlock` say it.
pub fn lease_left(lease: Option<Duration>) -> String {
    match lease {
        Some(lease) => format!("lease {} left", human(lease)),
        None => "no lease expiry".to_owned(),
    }
}

fn holder_text(holder: &Holder) -> String {
    format!(
        "{}, hold count {}, {}, token {}",
        who(&holder.who),
        holder.hold_count,
        lease_left(holder.remaining_lease),
        holder.fencing_token
    )
}

/// The text form of `status`: the mutex as ever, then the semaphore and
/// the reader-writer lock if in use, their lines indented under a heading.
pub fn to_text(name: &str, report: &Report) -> String {
    let mut out = mutex_text(name, &report.mutex);
    if let Some(semaphore) = &report.semaphore {
        out.push_str(&semaphore_text(semaphore));
    }
    if let Some(rwlock) = &report.rwlock {
        out.push_str(&rwlock_text(rwlock));
    }
    out
}

fn mutex_text(name: &str, status: &LockStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "lock:       {name}");
    match &status.holder {
        Some(holder) => {
            let _ = writeln!(out, "holder:     {}", holder_text(holder));
        }
        None => {
            let _ = writeln!(out, "holder:     none (free)");
        }
    }
    queue_text(&mut out, "", &plain(&status.waiters), status.queue_len);
    last_token_text(&mut out, "", status.last_fencing_token);
    out
}

fn semaphore_text(status: &SemaphoreStatus) -> String {
    let mut out = String::new();
    let permits = status.permits.map_or_else(
        || "permits unknown".to_owned(),
        |n| match n {
            1 => "1 permit".to_owned(),
            n => format!("{n} permits"),
        },
    );
    let _ = writeln!(
        out,
        "semaphore:  {permits}, {} held, {} free",
        status.holder_count, status.available
    );
    if status.holders.is_empty() {
        let _ = writeln!(out, "  holders:  none");
    }
    for holder in &status.holders {
        // A hold of several permits (acquire_many) says how many.
        let permits = match holder.permits {
            1 => String::new(),
            n => format!("{n} permits, "),
        };
        let _ = writeln!(
            out,
            "  holder:   {}, {permits}{}, token {}",
            who(&holder.who),
            lease_left(holder.remaining_lease),
            holder.fencing_token
        );
    }
    more_holders_text(&mut out, status.holder_count, status.holders.len());
    queue_text(&mut out, "  ", &plain(&status.waiters), status.queue_len);
    last_token_text(&mut out, "  ", status.last_fencing_token);
    out
}

/// "... and N more" under the holders a status listed, when it could not
/// list them all.
fn more_holders_text(out: &mut String, holder_count: usize, listed: usize) {
    if holder_count > listed {
        let _ = writeln!(
            out,
            "            ... and {} more (see --limit)",
            holder_count - listed
        );
    }
}

fn rwlock_text(status: &RwLockStatus) -> String {
    let mut out = String::new();
    let state = match (status.holder_count, status.write_held) {
        (0, _) => "free".to_owned(),
        (_, true) => "held for writing".to_owned(),
        (1, false) => "held for reading by 1 reader".to_owned(),
        (n, false) => format!("held for reading by {n} readers"),
    };
    let _ = writeln!(out, "rwlock:     {state}");
    for holder in &status.holders {
        let _ = writeln!(
            out,
            "  holder:   {}, {}, {}, token {}",
            who(&holder.who),
            holder.access.map_or("", access_word),
            lease_left(holder.remaining_lease),
            holder.fencing_token
        );
    }
    more_holders_text(&mut out, status.holder_count, status.holders.len());
    let waiters: Vec<Waiting<'_>> = status.waiters.iter().map(Waiting::of_rwlock).collect();
    queue_text(&mut out, "  ", &waiters, status.queue_len);
    last_token_text(&mut out, "  ", status.last_fencing_token);
    out
}

/// A waiter as the queue lines show it, of any kind.
struct Waiting<'a> {
    who: &'a Participant,
    /// "read" or "write" for a reader-writer lock's waiter.
    access: Option<&'static str>,
    liveness_left: Option<Duration>,
}

impl<'a> Waiting<'a> {
    fn of_rwlock(waiter: &'a QueuedWaiter) -> Self {
        Waiting {
            who: &waiter.who,
            access: waiter.access.map(access_word),
            liveness_left: waiter.liveness_left,
        }
    }
}

/// The mutex's or a semaphore's waiters, which wait for one thing.
fn plain(waiters: &[QueuedWaiter]) -> Vec<Waiting<'_>> {
    waiters
        .iter()
        .map(|w| Waiting {
            who: &w.who,
            access: None,
            liveness_left: w.liveness_left,
        })
        .collect()
}

/// The queue lines, in order, each line after `indent`.
fn queue_text(out: &mut String, indent: &str, waiters: &[Waiting<'_>], queue_len: usize) {
    let label = format!("{indent}queue:");
    if queue_len == 0 && waiters.is_empty() {
        let _ = writeln!(out, "{label:<12}empty");
        return;
    }
    let _ = writeln!(out, "{label:<12}{queue_len} waiting");
    for (i, waiter) in waiters.iter().enumerate() {
        let liveness = match waiter.liveness_left {
            Some(left) => format!("keeps its place {} without a heartbeat", human(left)),
            None => "dead, not dropped yet".to_owned(),
        };
        let access = waiter
            .access
            .map_or_else(String::new, |access| format!(", {access}"));
        let _ = writeln!(
            out,
            "{indent}  {:>3}. {}{access} ({liveness})",
            i + 1,
            who(waiter.who)
        );
    }
    let listed_live = waiters.iter().filter(|w| w.liveness_left.is_some()).count();
    if queue_len > listed_live {
        let _ = writeln!(
            out,
            "{indent}       ... and {} more (see --limit)",
            queue_len - listed_live
        );
    }
}

fn last_token_text(out: &mut String, indent: &str, token: Option<u64>) {
    let label = format!("{indent}last token:");
    match token {
        Some(token) => {
            let _ = writeln!(out, "{label} {token}");
        }
        None => {
            let _ = writeln!(out, "{label} none recorded");
        }
    }
}

fn ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_millis() as u64))
}

/// The JSON form of `status`, one object:
/// `{"name", "holder": {"client_id", "thread", "hold_count",
/// "remaining_lease_ms", "fencing_token"} | null, "queue": [{"position",
/// "client_id", "thread", "liveness_left_ms"}], "queue_len",
/// "last_fencing_token"}` for the mutex, as ever, and `"semaphore"` (see
/// [`semaphore_json`]) and `"rwlock"` (see [`rwlock_json`]) only while
/// each is in use, so the mutex-only object stays what it was.
pub fn to_json(name: &str, report: &Report) -> Value {
    let mut out = mutex_json(name, &report.mutex);
    if let Some(semaphore) = &report.semaphore {
        out["semaphore"] = semaphore_json(semaphore);
    }
    if let Some(rwlock) = &report.rwlock {
        out["rwlock"] = rwlock_json(rwlock);
    }
    out
}

fn queue_json(waiters: &[QueuedWaiter]) -> Vec<Value> {
    waiters
        .iter()
        .enumerate()
        .map(|(i, w)| {
            json!({
                "position": i + 1,
                "client_id": w.who.client_id(),
                "thread": w.who.thread(),
                "identity": w.who.identity(),
                "liveness_left_ms": ms(w.liveness_left),
            })
        })
        .collect()
}

/// `{"permits": N | null, "holder_count", "available", "holders":
/// [{"client_id", "thread", "identity", "permits", "remaining_lease_ms",
/// "fencing_token"}] (by
/// lease end), "queue": [as the mutex's], "queue_len",
/// "last_fencing_token"}`.
fn semaphore_json(status: &SemaphoreStatus) -> Value {
    let holders: Vec<Value> = status
        .holders
        .iter()
        .map(|h| {
            json!({
                "client_id": h.who.client_id(),
                "thread": h.who.thread(),
                "identity": h.who.identity(),
                "permits": h.permits,
                "remaining_lease_ms": ms(h.remaining_lease),
                "fencing_token": h.fencing_token,
            })
        })
        .collect();
    json!({
        "permits": status.permits,
        "holder_count": status.holder_count,
        "available": status.available,
        "holders": holders,
        "queue": queue_json(&status.waiters),
        "queue_len": status.queue_len,
        "last_fencing_token": status.last_fencing_token,
    })
}

/// `{"write_held", "holder_count", "holders": [{"client_id", "thread", "identity",
/// "access": "read" | "write", "remaining_lease_ms", "fencing_token"}] (by
/// lease end), "queue": [{"position", "client_id", "thread", "identity", "access",
/// "liveness_left_ms"}], "queue_len", "last_fencing_token"}`.
fn rwlock_json(status: &RwLockStatus) -> Value {
    let holders: Vec<Value> = status
        .holders
        .iter()
        .map(|h| {
            json!({
                "client_id": h.who.client_id(),
                "thread": h.who.thread(),
                "identity": h.who.identity(),
                "access": h.access.map(access_word),
                "remaining_lease_ms": ms(h.remaining_lease),
                "fencing_token": h.fencing_token,
            })
        })
        .collect();
    let queue: Vec<Value> = status
        .waiters
        .iter()
        .enumerate()
        .map(|(i, w)| {
            json!({
                "position": i + 1,
                "client_id": w.who.client_id(),
                "thread": w.who.thread(),
                "identity": w.who.identity(),
                "access": w.access.map(access_word),
                "liveness_left_ms": ms(w.liveness_left),
            })
        })
        .collect();
    json!({
        "write_held": status.write_held,
        "holder_count": status.holder_count,
        "holders": holders,
        "queue": queue,
        "queue_len": status.queue_len,
        "last_fencing_token": status.last_fencing_token,
    })
}

fn mutex_json(name: &str, status: &LockStatus) -> Value {
    let holder = status.holder.as_ref().map_or(Value::Null, |h| {
        json!({
            "client_id": h.who.client_id(),
            "thread": h.who.thread(),
            "identity": h.who.identity(),
            "hold_count": h.hold_count,
            "remaining_lease_ms": ms(h.remaining_lease),
            "fencing_token": h.fencing_token,
        })
    });
    json!({
        "name": name,
        "holder": holder,
        "queue": queue_json(&status.waiters),
        "queue_len": status.queue_len,
        "last_fencing_token": status.last_fencing_token,
    })
}
