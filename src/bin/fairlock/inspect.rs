//! `fairlock status` and `fairlock unlock --force`.

use std::fmt::Write as _;
use std::time::Duration;

use fairlock::{Holder, LockStatus, Participant};
use serde_json::{json, Value};

use crate::duration::human;
use crate::{Connection, Failure};

/// Prints the holder, the queue in order and the last token; exit code 0.
pub fn status(
    connection: &Connection,
    name: &str,
    as_json: bool,
    limit: usize,
) -> Result<i32, Failure> {
    let client = connection.connect()?;
    let status = client
        .fair_mutex(name)
        .status(limit)
        .map_err(|err| Failure::redis(err, format!("cannot read the status of {name:?}")))?;
    if as_json {
        println!("{}", to_json(name, &status));
    } else {
        print!("{}", to_text(name, &status));
    }
    Ok(0)
}

/// Frees the lock whoever holds it and says who held it; exit code 0.
pub fn unlock(connection: &Connection, name: &str) -> Result<i32, Failure> {
    let client = connection.connect()?;
    let mutex = client.fair_mutex(name);
    let failed = |err| Failure::redis(err, format!("cannot unlock {name:?}"));
    // Read just before, for the token and lease; who held it at the moment
    // it was freed comes from the freeing script itself.
    let before = mutex.status(0).map_err(failed)?;
    let Some(freed) = mutex.force_unlock_holder().map_err(failed)? else {
        println!("fairlock: {name:?} was not held; nothing to do");
        return Ok(0);
    };
    let mut text = format!(
        "fairlock: unlocked {name:?}; it was held by {}",
        who(&freed)
    );
    if let Some(holder) = before.holder.filter(|h| h.who == freed) {
        let _ = write!(
            text,
            " (token {}, {})",
            holder.fencing_token,
            lease_left(holder.remaining_lease)
        );
    }
    // The lock goes to the next live waiter inside the same script.
    if let Some(next) = mutex.status(0).ok().and_then(|s| s.holder) {
        let _ = write!(text, "; now held by {}, next in line", who(&next.who));
    }
    println!("{text}");
    Ok(0)
}

fn who(p: &Participant) -> String {
    match p.thread() {
        Some(thread) => format!("client {} thread {thread}", p.client_id()),
        None => format!("owner {}", p.owner),
    }
}

fn lease_left(lease: Option<Duration>) -> String {
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
