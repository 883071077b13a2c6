//! `fairlock unlock --force`: free the lock whoever holds it.

use std::fmt::Write as _;

use clap::Args;

use super::lock_name;
use super::status::{lease_left, who};
use crate::{exit, Connection, Failure};

/// Free NAME whoever holds it (with --force), and say who held it.
///
/// The next waiter in line gets the lock at once. The old holder's
/// command keeps running until its fairlock notices the loss and
/// reports it (exit 70, or killed with --kill-on-loss).
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Required: unlocking frees the lock whoever holds it.
    #[arg(long)]
    pub force: bool,
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
