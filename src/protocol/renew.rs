//! `renew.lua`: extend a held lease, only if the hold is still ours.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{ms, unexpected, Operation, Script};
use crate::protocol::LockKeys;

/// Hold `token` of `owner` gets `lease` from now; `None` leaves the lease
/// as it is and only writes the hold again (so that a `WAIT` after it
/// covers the handoff that made it: `sync_replicas` with a fixed lease).
pub struct Renew<'a> {
    pub owner: &'a str,
    pub token: u64,
    pub lease: Option<Duration>,
}

impl Operation for Renew<'_> {
    /// True when renewed; false when the lock is no longer this hold's.
    type Reply = bool;
    const SCRIPT: Script = Script::Renew;

    /// Only the lock key.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        &keys.all[..1]
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.owner.to_owned(),
            self.token.to_string(),
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
