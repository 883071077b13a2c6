//! `fairlock permits NAME N`: set the number of permits of the semaphore
//! NAME (the library's `FairSemaphore::set_permits`).

use std::fmt::Write as _;

use clap::Args;
use fairlock::PermitsChange;

use super::lock_name;
use super::run::permits;
use crate::kinds::plural;
use crate::{Connection, Failure};

/// Set the number of permits of the semaphore NAME to N, for every user.
///
/// In one atomic step: a grow admits at once, in arrival order, the
/// waiters that now fit; a shrink takes nothing from holders (nobody is
/// admitted until the holds fit under N), and every queued call that asks
/// for more than N is refused. From then on N is the semaphore's number
/// whatever `run --semaphore` says (no exit 78), while the semaphore is in
/// use and a fence life after (10 minutes by default); then the next
/// user's --semaphore N starts it again.
#[derive(Debug, Args)]
pub struct PermitsArgs {
    /// Name of the semaphore.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// The new number of permits, from 1 to 1000000.
    #[arg(value_name = "N", value_parser = permits)]
    pub permits: u32,
}

/// Sets the permits and says what changed; exit code 0.
pub fn exec(connection: &Connection, args: PermitsArgs) -> Result<i32, Failure> {
    let name = args.name.as_str();
    let client = connection.connect()?;
    let change = client
        .fair_semaphore(name, args.permits)
        .set_permits(args.permits)
        .map_err(|err| Failure::redis(err, format!("cannot set the permits of {name:?}")))?;
    println!("{}", describe(name, &change));
    Ok(0)
}

/// One line: the number now and before, the permits held, and the waiters
/// admitted and refused.
fn describe(name: &str, change: &PermitsChange) -> String {
    let permits = change.permits;
    let mut text = format!(
        "fairlock: the semaphore {name:?} has {} now",
        plural(permits as usize, "permit")
    );
    match change.previous {
        Some(before) if before == permits => text.push_str(" (unchanged)"),
        Some(before) => {
            let _ = write!(text, " (it had {before})");
        }
        None => text.push_str(" (it was not in use)"),
    }
    let _ = write!(text, "; {} held", change.in_use);
    if change.in_use > permits {
        text.push_str(" (holders keep theirs: nobody is admitted until they fit)");
    }
    if change.admitted > 0 {
        let _ = write!(
            text,
            "; admitted {}",
            plural(change.admitted, "waiting call")
        );
    }
    if change.refused > 0 {
        let _ = write!(
            text,
            "; refused {} that asked for more",
            plural(change.refused, "waiting call")
        );
    }
    text
}
