//! How the queue stores one waiting call: its member in the queue's one
//! sorted set (scored by arrival, and again after a `~` by its liveness
//! deadline), which carries the grant the call gets, so a handoff reads
//! one member instead of three structures.

use std::fmt;
use std::sync::Arc;

use crate::protocol::{Ask, Lease, LockKeys};

/// The waiting call with id `call` of thread `owner`, asking for `ask`, to be
/// granted `lease`. Its text form,
/// `"<owner> <call id> <lease ms> <fixed 0|1>"`, is the queue member the
/// mutex's `acquire.lua` writes; a counted lock's call adds the units it
/// asks for as a fifth field (`counted/acquire.lua`'s member). Heartbeats,
/// cancels and abandons name the call by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueEntry<'a> {
    /// The waiting caller's owner id (see `Participant::owner`).
    pub owner: &'a str,
    /// The call's id inside its client.
    pub call: u64,
    /// The lease the call gets with the lock.
    pub lease: Lease,
    /// What the call asks for.
    pub ask: Ask,
}

impl fmt::Display for QueueEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [lease, fixed] = self.lease.args();
        write!(f, "{} {} {lease} {fixed}", self.owner, self.call)?;
        match self.ask {
            Ask::Mutex => Ok(()),
            ask => write!(f, " {}", ask.units()),
        }
    }
}

/// One acquire call on one lock, owned: the lock's keys and what the call's
/// queue entry names. A waiter, a hold and an abandon are each one call's
/// (a hold's release and renewal name it too).
#[derive(Debug, Clone)]
pub struct Call {
    /// The lock's keys.
    pub keys: Arc<LockKeys>,
    /// The calling thread's owner id, or the call's own (unbound); shared,
    /// as the call is copied into its waiter, its hold and its guard.
    pub owner: Arc<str>,
    /// The call's id inside its client.
    pub id: u64,
    /// The lease the call gets with the lock.
    pub lease: Lease,
    /// What the call asks for.
    pub ask: Ask,
}

impl Call {
    /// The call as the queue stores it (and heartbeats, cancels and
    /// abandons name it).
    pub fn entry(&self) -> QueueEntry<'_> {
        QueueEntry {
            owner: &self.owner,
            call: self.id,
            lease: self.lease,
            ask: self.ask,
        }
    }

    /// What a hold of the call is, for messages (see [`Ask::describe_on`]).
    pub fn describe(&self) -> String {
        self.ask.describe_on(self.keys.kind(), self.keys.name())
    }
}
