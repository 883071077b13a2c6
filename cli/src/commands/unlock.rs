//! `fairlock unlock --force`: free the lock (the mutex, or with
//! `--semaphore` or `--rwlock` that kind of lock of the name) whoever holds
//! it.

use std::fmt::Write as _;

use clap::Args;
use fairlock::{kind, FairLock, Status};

use super::lock_name;
use super::status::{lease_left, who};
use crate::{exit, Connection, Failure};

/// Free NAME whoever holds it (with --force), and say who held it.
///
/// The mutex NAME, or with --semaphore or --rwlock every permit or every
/// read and write hold of that lock of the name. The next waiters in line
/// get it at once. The old holders' commands keep running until their
/// fairlock notices the loss and reports it (exit 70, or killed with
/// --kill-on-loss).
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Required: unlocking frees the lock whoever holds it.
    #[arg(long)]
    pub force: bool,

    /// Free the semaphore NAME's permits (every holder's) instead of the
    /// mutex NAME.
    #[arg(long, conflicts_with = "rwlock")]
    pub semaphore: bool,

    /// Free the reader-writer lock NAME (every read and write hold)
    /// instead of the mutex NAME.
    #[arg(long)]
    pub rwlock: bool,
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
    if args.semaphore || args.rwlock {
        return unlock_counted(&client, name, args.semaphore).map_err(failed);
    }
    let mutex = client.fair_mutex(name);
    // Read just before, for the token and lease; who held it at the moment
    // it was freed comes from the freeing script itself.
    let before = mutex.status(1).map_err(failed)?;
    let Some(freed) = mutex.force_unlock_holder().map_err(failed)? else {
        println!("fairlock: {name:?} was not held; nothing to do");
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

/// Frees every hold of the semaphore (`semaphore`) or the reader-writer
/// lock NAME and says whose they were, as read just before.
fn unlock_counted(client: &fairlock::Client, name: &str, semaphore: bool) -> fairlock::Result<i32> {
    // Any number of permits names the semaphore: forcing needs none.
    let (before, freed) = if semaphore {
        free_every_hold(&client.fair_semaphore(name, 1))?
    } else {
        free_every_hold(&client.fair_rwlock(name))?
    };
    let kind = before.kind.label();
    if !freed {
        println!("fairlock: the {kind} {name:?} was not held; nothing to do");
        return Ok(0);
    }
    let holders: Vec<String> = before
        .holders
        .iter()
        .map(|holder| format!("{} (token {})", who(&holder.who), holder.fencing_token))
        .collect();
    println!(
        "fairlock: unlocked the {kind} {name:?}; it was held by {}",
        if holders.is_empty() {
            "a holder that came after the last read".to_owned()
        } else {
            holders.join(", ")
        }
    );
    Ok(0)
}

/// The status of `lock` just before every hold of it is freed, and
/// whether anything was.
fn free_every_hold<K: kind::Named>(lock: &FairLock<K>) -> fairlock::Result<(Status, bool)> {
    Ok((lock.status(LISTED)?, lock.force_unlock()?))
}

/// Most holders named.
const LISTED: usize = 100;
