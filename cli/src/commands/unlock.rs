//! `fairlock unlock --force`: free the lock (the mutex, or with
//! `--semaphore`, `--rwlock` or `--election` that kind of lock of the name)
//! whoever holds it.

use std::fmt::Write as _;

use clap::Args;
use fairlock::{Client, LockKind, Status};

use super::{held_besides, kind_of, lock_name};
use crate::kinds::{plural, Verbs};
use crate::report::{lease_left, lock_named, who};
use crate::{exit, Connection, Failure};

/// Free NAME whoever holds it (with --force), and say who held it.
///
/// The mutex NAME (--mutex, the default), or with --semaphore, --rwlock
/// or --election every permit, every read and write hold, or the
/// leadership of that lock of the name. The next waiters in line get it at once (an election's next
/// candidate leads). The old holders' commands keep running until their
/// fairlock notices the loss and reports it (exit 70, or killed with
/// --kill-on-loss).
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Free the mutex NAME (the default).
    #[arg(long, conflicts_with_all = ["semaphore", "rwlock", "election"])]
    pub mutex: bool,

    /// Required: unlocking frees the lock whoever holds it.
    #[arg(long)]
    pub force: bool,

    /// Free the semaphore NAME's permits (every holder's) instead of the
    /// mutex NAME.
    #[arg(long, conflicts_with_all = ["rwlock", "election"])]
    pub semaphore: bool,

    /// Free the reader-writer lock NAME (every read and write hold)
    /// instead of the mutex NAME.
    #[arg(long, conflicts_with = "election")]
    pub rwlock: bool,

    /// End the leadership of the election NAME: its leader is told at once
    /// (by a message; by its next renewal should that be lost), and the
    /// next candidate leads.
    #[arg(long)]
    pub election: bool,
}

/// Frees the lock whoever holds it (only with `--force`) and says who held
/// it; exit code 0.
pub fn exec(connection: &Connection, args: UnlockArgs) -> Result<i32, Failure> {
    let name = args.name.as_str();
    if !args.force {
        return Err(Failure::new(
            exit::USAGE,
            anyhow::anyhow!(
                "unlock frees {name:?} whoever holds it: add --force if that is what you want"
            ),
        ));
    }
    let client = connection.connect()?;
    let failed = |err| Failure::redis(err, format!("cannot unlock {name:?}"));
    let kind = kind_of(args.semaphore, args.rwlock, args.election);
    if kind != LockKind::Mutex {
        return unlock_every_hold(&client, kind, name);
    }
    let mutex = client.fair_mutex(name);
    // Read just before, for the token and lease; who held it at the moment
    // it was freed comes from the freeing script itself.
    let before = mutex.status(1).map_err(failed)?;
    let Some(freed) = mutex
        .force_unlock_holder()
        .map_err(|e| unsure(e, LockKind::Mutex, name))?
    else {
        println!("{}", not_held(&client, LockKind::Mutex, name, &before));
        return Ok(0);
    };
    let mut text = format!(
        "fairlock: unlocked {name:?}; it was held by {}",
        who(&freed)
    );
    if let Some(holder) = before.holder().filter(|h| h.who == freed) {
        let _ = write!(
            text,
            " (token {}, {})",
            holder.fencing_token,
            lease_left(holder.remaining_lease)
        );
    }
    // The lock goes to the next live waiter inside the same script.
    let now = mutex.status(1).ok();
    if let Some(next) = now.as_ref().and_then(Status::holder) {
        let _ = write!(text, "; now held by {}, next in line", who(&next.who));
    }
    println!("{text}");
    Ok(0)
}

/// Frees every hold of the `kind` of lock `name` (a semaphore's, a
/// reader-writer lock's, an election's) and says whose they were, as read
/// just before, in the kind's words (an election's leader and term).
fn unlock_every_hold(client: &Client, kind: LockKind, name: &str) -> Result<i32, Failure> {
    let verbs = Verbs::of(kind);
    let failed = |err| Failure::redis(err, format!("cannot {} {name:?}", verbs.unlock));
    let before = client.status(kind, name, LISTED).map_err(failed)?;
    let freed = (client.force_unlock(kind, name)).map_err(|e| unsure(e, kind, name))?;
    let lock = lock_named(&before, name);
    if !freed {
        println!("{}", not_held(client, kind, name, &before));
        return Ok(0);
    }
    let holders = holders(&before, verbs.token);
    println!(
        "fairlock: {} {lock}; it was {} {}",
        verbs.unlocked,
        verbs.held_by,
        if holders.is_empty() {
            format!("a {} that came after the last read", verbs.holder)
        } else {
            holders
        }
    );
    Ok(0)
}

/// What `unlock` says when the force release freed no hold of the `kind`
/// of lock `name`: nothing to do; or, when waiters were in line (`before`,
/// read just before: a lease had run out) and hold it now, that it handed
/// it on to them, as the force release does.
fn not_held(client: &Client, kind: LockKind, name: &str, before: &Status) -> String {
    let verbs = Verbs::of(kind);
    let lock = format!("{} {}", lock_named(before, name), verbs.was_not_held);
    match (client.status(kind, name, LISTED)).ok() {
        Some(now) if before.queue_len > 0 && now.holder_count > 0 => format!(
            "fairlock: {lock}, with {} in line; handed it on: now {} {}",
            plural(before.queue_len, verbs.waiter),
            verbs.held_by,
            holders(&now, verbs.token)
        ),
        _ => format!(
            "fairlock: {lock}; nothing to do{}",
            held_besides(client, kind, name)
        ),
    }
}

/// The holders of `status`, each with its token (an election's term), and
/// how many more hold it than it lists; "" when it lists none.
fn holders(status: &Status, token: &str) -> String {
    let mut holders: Vec<String> = (status.holders.iter())
        .map(|holder| format!("{} ({token} {})", who(&holder.who), holder.fencing_token))
        .collect();
    if (1..status.holder_count).contains(&holders.len()) {
        holders.push(format!("and {} more", status.holder_count - holders.len()));
    }
    holders.join(", ")
}

/// Most holders named.
const LISTED: usize = 100;

/// The force release's own failure: one whose reply never came may have
/// freed the lock (ended the leadership), and a repeat would free whoever
/// holds it next.
fn unsure(err: fairlock::Error, kind: LockKind, name: &str) -> Failure {
    let verbs = Verbs::of(kind);
    let doing = format!("cannot {} {name:?}", verbs.unlock);
    let mut failure = Failure::redis(err, &doing);
    if failure.code == exit::UNAVAILABLE {
        failure.error = anyhow::anyhow!(
            "{}; {} all the same: see `fairlock status {name:?}` before trying again",
            failure.error,
            verbs.may_be_freed
        );
    }
    failure
}
