//! How the queue stores one waiting call: its member in both queue sorted
//! sets, which carries the grant the call gets, so a handoff reads one
//! member instead of three structures.

use std::fmt;
use std::time::Duration;

use crate::protocol::Access;

/// Waiting call `wait_id` of thread `owner`, to be granted `lease` (fixed,
/// or renewed by the watchdog). Its text form,
/// `"<owner> <wait id> <lease ms> <fixed 0|1>"`, is the queue member
/// `acquire.lua` writes; heartbeats, cancels and give-backs name the call
/// by it. A reader-writer lock's call adds what it asks for, `" r"` or
/// `" w"` (`rw_acquire.lua`'s member).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueEntry<'a> {
    /// The waiting thread's owner id, `<client id>:<thread number>`.
    pub owner: &'a str,
    /// The call's id inside its client.
    pub wait_id: u64,
    /// The lease the call gets with the lock.
    pub lease: Duration,
    /// A fixed lease (no watchdog renews it).
    pub fixed: bool,
    /// A reader-writer lock's call: read or write. `None` for the other
    /// kinds, whose members have four fields.
    pub access: Option<Access>,
}

impl fmt::Display for QueueEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.owner,
            self.wait_id,
            self.lease.as_millis(),
            u8::from(self.fixed)
        )?;
        match self.access {
            Some(access) => write!(f, " {}", access.as_arg()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_member_names_the_call_and_its_grant() {
        let entry = QueueEntry {
            owner: "c1:7",
            wait_id: 42,
            lease: Duration::from_millis(30_000),
            fixed: true,
            access: None,
        };
        assert_eq!(entry.to_string(), "c1:7 42 30000 1");
        let write = QueueEntry {
            access: Some(Access::Write),
            ..entry
        };
        assert_eq!(write.to_string(), "c1:7 42 30000 1 w");
    }
}
