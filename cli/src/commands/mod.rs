//! The subcommands, one file each: its arguments and its `exec`.

pub mod elect;
pub mod permits;
pub mod revoke;
pub mod run;
pub mod status;
pub mod unlock;

use fairlock::LockKind;

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
