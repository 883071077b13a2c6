//! The subcommands, one file each: its arguments and its `exec`.

pub mod elect;
pub mod permits;
pub mod revoke;
pub mod run;
pub mod status;
pub mod unlock;

use std::fmt::Write as _;

use fairlock::{Client, LockKind};

use crate::kinds::Verbs;

/// The lock of NAME an operator's command (`unlock`, `revoke`) is on: the
/// mutex, or the one its `--semaphore`, `--rwlock` or `--election` names
/// (clap lets at most one through).
pub fn kind_of(semaphore: bool, rwlock: bool, election: bool) -> LockKind {
    match (semaphore, rwlock, election) {
        (true, _, _) => LockKind::Semaphore,
        (_, true, _) => LockKind::RwLock,
        (_, _, true) => LockKind::Election,
        _ => LockKind::Mutex,
    }
}

/// What `unlock` and `revoke` add when the `kind` of lock of `name` is not
/// held: each other kind of the name that is, with its flag (`; the
/// semaphore "jobs" (2 permits) is held: --semaphore`; `; the election
/// "jobs" has a leader: --election`), so that a flag left out is not
/// taken for a free lock.
pub fn held_besides(client: &Client, kind: LockKind, name: &str) -> String {
    let mut text = String::new();
    for other in crate::report::KINDS
        .into_iter()
        .filter(|other| *other != kind)
    {
        if let Ok(held) = client.status(other, name, 0) {
            if held.holder_count > 0 {
                let lock = crate::report::lock_named(&held, name);
                let is_held = Verbs::of(other).is_held;
                let _ = write!(text, "; {lock} {is_held}: --{}", other.label());
            }
        }
    }
    text
}

/// Checks a lock name as the library will, so a bad one is a usage error.
pub fn lock_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        Err("the lock name is empty".to_owned())
    } else if name.len() > fairlock::MAX_NAME_LEN {
        Err(format!(
            "the lock name is {} bytes long, more than the {} allowed",
            name.len(),
            fairlock::MAX_NAME_LEN
        ))
    } else {
        Ok(name.to_owned())
    }
}
