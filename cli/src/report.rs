//! What `status` shows of a name, read once and written as text or JSON:
//! the holders, the queue in order and the last token of each kind of
//! lock in use (or asked for), in the words `unlock`, `revoke` and
//! `status --watch` use too.

use std::fmt::Write as _;
use std::time::Duration;

use fairlock::{Capacity, Holder, LockKind, Participant, QueuedWaiter, Status};
use serde_json::{json, Value};

use crate::duration::human;
use crate::kinds::{access_word, Verbs};

/// Every kind of lock of a name, in the order `status` shows them.
pub const KINDS: [LockKind; 4] = [
    LockKind::Mutex,
    LockKind::Semaphore,
    LockKind::RwLock,
    LockKind::Election,
];

/// Everything `status` shows of one name.
pub struct Report {
    /// The status of each kind shown, in the order of [`KINDS`].
    pub locks: Vec<Status>,
}

/// Reads the kinds `asked` of the name, or (none asked) every kind and
/// keeps those in use, or the mutex when none is; each listing at most
/// `limit` holders and `limit` waiters.
pub fn read(
    client: &fairlock::Client,
    name: &str,
    asked: &[LockKind],
    limit: usize,
) -> fairlock::Result<Report> {
    let kinds = KINDS
        .into_iter()
        .filter(|kind| asked.is_empty() || asked.contains(kind));
    let mut locks = Vec::new();
    for kind in kinds {
        locks.push(client.status(kind, name, limit)?);
    }
    if asked.is_empty() {
        let mutex = locks[0].clone();
        locks.retain(in_use);
        if locks.is_empty() {
            locks.push(mutex);
        }
    }
    Ok(Report { locks })
}

/// A lock is in use while it has a holder or a waiter, or its last token
/// (or a semaphore's number of permits) is still recorded: a fence life
/// after the last one left.
pub fn in_use(status: &Status) -> bool {
    status.holder_count > 0
        || status.queue_len > 0
        || status.last_fencing_token.is_some()
        || matches!(status.capacity, Capacity::Permits(_))
}

/// Who a participant is, the way `status` and `unlock` name it; what
/// Redis holds escaped (an owner id fairlock did not write may hold any
/// byte).
pub fn who(p: &Participant) -> String {
    let id = match p.thread() {
        Some(thread) => format!("client {} thread {thread}", p.client_id()),
        None => format!("owner {}", p.owner()),
    };
    match p.identity() {
        Some(identity) => format!("{identity} ({id})"),
        None => id,
    }
    .escape_debug()
    .to_string()
}

/// A lock of the name as `unlock` and `revoke` say it: `the mutex
/// "deploy"`; a semaphore with its permits in force, as its status read
/// them, `the semaphore "jobs" (4 permits)`.
pub fn lock_named(status: &Status, name: &str) -> String {
    let label = status.kind.label();
    match status.capacity {
        Capacity::Permits(permits) => format!(
            "the {label} {name:?} ({})",
            crate::kinds::permits_text(permits, permits)
        ),
        _ => format!("the {label} {name:?}"),
    }
}

/// What is left of a holder's lease, the way `status` and `unlock` say it.
pub fn lease_left(lease: Option<Duration>) -> String {
    match lease {
        Some(lease) => format!("lease {} left", human(lease)),
        None => "no lease expiry".to_owned(),
    }
}

/// What a hold is beyond who holds it, the way `status` and `--watch`
/// say it: a reader-writer lock's read or write, a hold of several
/// permits, a mutex's hold count (its re-entries); "" when nothing.
pub fn hold_detail(kind: LockKind, holder: &Holder) -> String {
    let mut detail = Vec::new();
    if let Some(access) = holder.access {
        detail.push(access_word(access).to_owned());
    }
    if holder.permits != 1 {
        detail.push(format!("{} permits", holder.permits));
    }
    if kind == LockKind::Mutex || holder.hold_count != 1 {
        detail.push(format!("hold count {}", holder.hold_count));
    }
    detail.join(", ")
}

/// Who waits and for what, the way `status` and `--watch` say it: with
/// a reader-writer lock's read or write, or the permits it asks for when
/// more than one.
pub fn waiter_text(waiter: &QueuedWaiter) -> String {
    let mut text = who(&waiter.who);
    if let Some(access) = waiter.access {
        let _ = write!(text, ", {}", access_word(access));
    }
    if waiter.permits > 1 {
        let _ = write!(text, ", {} permits", waiter.permits);
    }
    text
}

/// The text form of `status`: the name, then each lock shown under a
/// line saying what it is and its state, its holders, queue and last
/// token indented below.
pub fn to_text(name: &str, report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "lock:       {name:?}");
    for status in &report.locks {
        lock_text(&mut out, status);
    }
    out
}

/// One lock of the name, any kind, in its words (an election's leader
/// and term: [`Verbs`]).
fn lock_text(out: &mut String, status: &Status) {
    let verbs = Verbs::of(status.kind);
    let label = format!("{}:", status.kind.label());
    let _ = writeln!(out, "{label:<12}{}", state_text(status, &verbs));
    let holder = format!("  {}:", verbs.holder);
    for h in &status.holders {
        let detail = hold_detail(status.kind, h);
        let _ = writeln!(
            out,
            "{holder:<12}{}{}{}, {}, {} {}",
            who(&h.who),
            if detail.is_empty() { "" } else { ", " },
            detail,
            lease_left(h.remaining_lease),
            verbs.token,
            h.fencing_token
        );
    }
    if status.holder_count > status.holders.len() {
        let _ = writeln!(
            out,
            "            ... and {} more (see --limit)",
            status.holder_count - status.holders.len()
        );
    }
    queue_text(out, "  ", &status.waiters, status.queue_len);
    last_token_text(out, "  ", verbs.token, status.last_fencing_token);
}

/// What a lock admits and how much of it is taken: "free" or "held" (a
/// lock of one holder; an election "vacant" or "led"), "2 permits, 1
/// held, 1 free", "held for reading by 3 readers".
fn state_text(status: &Status, verbs: &Verbs) -> String {
    let held = status.holder_count;
    match status.capacity {
        Capacity::Permits(permits) => format!(
            "{permits} permit{}, {held} held, {} free",
            if permits == 1 { "" } else { "s" },
            status.available().unwrap_or(0)
        ),
        Capacity::Unknown => format!("permits unknown, {held} held"),
        Capacity::ReadersOrOneWriter => match (held, status.is_write_held()) {
            (0, _) => "free".to_owned(),
            (_, true) => "held for writing".to_owned(),
            (1, false) => "held for reading by 1 reader".to_owned(),
            (n, false) => format!("held for reading by {n} readers"),
        },
        _ if held == 0 => verbs.free.to_owned(),
        _ => verbs.held.to_owned(),
    }
}

/// The queue lines, in order, each line after `indent`.
fn queue_text(out: &mut String, indent: &str, waiters: &[QueuedWaiter], queue_len: usize) {
    let label = format!("{indent}queue:");
    if queue_len == 0 && waiters.is_empty() {
        let _ = writeln!(out, "{label:<12}empty");
        return;
    }
    let _ = writeln!(out, "{label:<12}{queue_len} waiting");
    // Only the live are in line: a dead entry is shown, not numbered.
    let mut listed_live = 0;
    for waiter in waiters {
        let (place, liveness) = match waiter.liveness_left {
            Some(left) => {
                listed_live += 1;
                let keeps = format!("keeps its place {} without a heartbeat", human(left));
                (format!("{listed_live}."), keeps)
            }
            None => ("-".to_owned(), "dead, not dropped yet".to_owned()),
        };
        let _ = writeln!(
            out,
            "{indent}  {place:>4} {} ({liveness})",
            waiter_text(waiter)
        );
    }
    if queue_len > listed_live {
        let _ = writeln!(
            out,
            "{indent}       ... and {} more (see --limit)",
            queue_len - listed_live
        );
    }
}

/// "last token: N" ("last term: N", an election's).
fn last_token_text(out: &mut String, indent: &str, token_word: &str, token: Option<u64>) {
    let label = format!("{indent}last {token_word}:");
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

/// The JSON form of `status`, one object: `"name"`, and for each lock
/// shown its object (see [`lock_json`]) under its kind, `"mutex"`,
/// `"semaphore"`, `"rwlock"` or `"election"`; a kind not shown has no
/// key. docs/cli.md shows it.
pub fn to_json(name: &str, report: &Report) -> Value {
    let mut out = json!({ "name": name });
    for status in &report.locks {
        out[status.kind.label()] = lock_json(status);
    }
    out
}

/// One lock, with the keys of its kind only (docs/cli.md lists them):
/// every kind `{"holder_count", "holders": [{"client_id", "thread",
/// "identity", "remaining_lease_ms", "fencing_token"}] (by lease end),
/// "queue_len", "queue": [{"position", "client_id", "thread",
/// "identity", "liveness_left_ms"}], "last_fencing_token"}`; a mutex's
/// holders add `"hold_count"`; a semaphore adds `"permits"` and
/// `"available"` (`null` while its N is unknown), and `"permits"` to
/// each holder and waiter; a reader-writer lock adds `"write_held"`, and
/// `"access"` to each holder and waiter; an election adds nothing.
fn lock_json(status: &Status) -> Value {
    let kind = status.kind;
    let holders: Vec<Value> = status
        .holders
        .iter()
        .map(|h| {
            let mut holder = json!({
                "client_id": h.who.client_id(),
                "thread": h.who.thread(),
                "identity": h.who.identity(),
                "remaining_lease_ms": ms(h.remaining_lease),
                "fencing_token": h.fencing_token,
            });
            match kind {
                LockKind::Mutex => holder["hold_count"] = json!(h.hold_count),
                LockKind::Semaphore => holder["permits"] = json!(h.permits),
                LockKind::RwLock => holder["access"] = json!(h.access.map(access_word)),
                _ => {}
            }
            holder
        })
        .collect();
    let mut live = 0;
    let queue: Vec<Value> = status
        .waiters
        .iter()
        .map(|w| {
            live += usize::from(w.liveness_left.is_some());
            let mut waiter = json!({
                "position": w.liveness_left.map(|_| live),
                "client_id": w.who.client_id(),
                "thread": w.who.thread(),
                "identity": w.who.identity(),
                "liveness_left_ms": ms(w.liveness_left),
            });
            match kind {
                LockKind::Semaphore => waiter["permits"] = json!(w.permits),
                LockKind::RwLock => waiter["access"] = json!(w.access.map(access_word)),
                _ => {}
            }
            waiter
        })
        .collect();
    let mut lock = json!({
        "holder_count": status.holder_count,
        "holders": holders,
        "queue_len": status.queue_len,
        "queue": queue,
        "last_fencing_token": status.last_fencing_token,
    });
    match (kind, status.capacity) {
        (LockKind::Semaphore, Capacity::Permits(permits)) => {
            lock["permits"] = json!(permits);
            lock["available"] = json!(status.available());
        }
        (LockKind::Semaphore, _) => {
            lock["permits"] = Value::Null;
            lock["available"] = Value::Null;
        }
        (LockKind::RwLock, _) => lock["write_held"] = json!(status.is_write_held()),
        _ => {}
    }
    lock
}
