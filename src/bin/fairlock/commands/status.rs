//! `fairlock status`: who holds the lock, who waits for it, the last token.

use std::fmt::Write as _;
use std::time::Duration;

use clap::Args;
use fairlock::{Holder, LockStatus, Participant};
use serde_json::{json, Value};

use super::lock_name;
use crate::duration::human;
use crate::{Connection, Failure};

/// Show who holds NAME, who waits for it in order, and the last token.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    /// List at most this many waiters from the head of the queue.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,
}

/// Prints the holder, the queue in order and the last token; exit code 0.
pub fn exec(connection: &Connection, args: StatusArgs) -> Result<i32, Failure> {
    let name = args.name.as_str();
    let client = connection.connect()?;
    let status = client
        .fair_mutex(name)
        .status(args.limit)
        .map_err(|err| Failure::redis(err, format!("cannot read the status of {name:?}")))?;
    if args.json {
        println!("{}", to_json(name, &status));
    } else {
        print!("{}", to_text(name, &status));
    }
    Ok(0)
}

/// Who a participant is, the way `status` and `unlock` name it.
pub fn who(p: &Participant) -> String {
    match p.thread() {
        Some(thread) => format!("client {} thread {thread}", p.client_id()),
        None => format!("owner {}", p.owner),
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

/// The text form of `status`.
pub fn to_text(name: &str, status: &LockStatus) -> String {
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
    if status.queue_len == 0 && status.waiters.is_empty() {
        let _ = writeln!(out, "queue:      empty");
    } else {
        let _ = writeln!(out, "queue:      {} waiting", status.queue_len);
        for (i, waiter) in status.waiters.iter().enumerate() {
            let liveness = match waiter.liveness_left {
                Some(left) => format!("keeps its place {} without a heartbeat", human(left)),
                None => "dead, not dropped yet".to_owned(),
            };
            let _ = writeln!(out, "  {:>3}. {} ({liveness})", i + 1, who(&waiter.who));
        }
        let listed_live = status
            .waiters
            .iter()
            .filter(|w| w.liveness_left.is_some())
            .count();
        if status.queue_len > listed_live {
            let _ = writeln!(
                out,
                "       ... and {} more (see --limit)",
                status.queue_len - listed_live
            );
        }
    }
    match status.last_fencing_token {
        Some(token) => {
            let _ = writeln!(out, "last token: {token}");
        }
        None => {
            let _ = writeln!(out, "last token: none recorded");
        }
    }
    out
}

fn ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_millis() as u64))
}

/// The JSON form of `status`, one object:
/// `{"name", "holder": {"client_id", "thread", "hold_count",
/// "remaining_lease_ms", "fencing_token"} | null, "queue": [{"position",
/// "client_id", "thread", "liveness_left_ms"}], "queue_len",
/// "last_fencing_token"}`.
pub fn to_json(name: &str, status: &LockStatus) -> Value {
    let holder = status.holder.as_ref().map_or(Value::Null, |h| {
        json!({
            "client_id": h.who.client_id(),
            "thread": h.who.thread(),
            "hold_count": h.hold_count,
            "remaining_lease_ms": ms(h.remaining_lease),
            "fencing_token": h.fencing_token,
        })
    });
    let queue: Vec<Value> = status
        .waiters
        .iter()
        .enumerate()
        .map(|(i, w)| {
            json!({
                "position": i + 1,
                "client_id": w.who.client_id(),
                "thread": w.who.thread(),
                "liveness_left_ms": ms(w.liveness_left),
            })
        })
        .collect();
    json!({
        "name": name,
        "holder": holder,
        "queue": queue,
        "queue_len": status.queue_len,
        "last_fencing_token": status.last_fencing_token,
    })
}
