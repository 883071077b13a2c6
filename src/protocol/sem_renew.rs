//! `sem_renew.lua`: extend a held permit's lease, only if it is still ours.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{ms, unexpected, Operation, Script};
use crate::protocol::LockKeys;

/// The permit `token` of acquire call `call` of `owner` gets `lease` from
/// now; `None` leaves the lease as it is and only writes the hold again
/// (so that a `WAIT` after it covers the handoff that made it, as
/// the mutex's `Renew`). Unlike the mutex's renew it names
/// the call: a semaphore's holds are kept per call.
pub struct SemRenew<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The permit's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the permit.
    pub call: u64,
    /// The lease from now, or `None` to leave it.
    pub lease: Option<Duration>,
}

impl Operation for SemRenew<'_> {
    /// True when renewed; false when this permit is no longer held.
    type Reply = bool;
    const SCRIPT: Script = Script::SemRenew;

    /// All five (the queue keys unused): the ones used are not contiguous,
    /// and all share one slot.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.owner.to_owned(),
            self.token.to_string(),
            self.call.to_string(),
            self.lease.map_or_else(|| "0".to_owned(), ms),
        ]
    }

    fn parse(&self, reply: Value) -> Result<bool> {
        match reply {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
            other => Err(unexpected(&other)),
        }
    }
}
