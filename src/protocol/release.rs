//! `release.lua`: give back one hold; at zero the lock goes to the next waiter.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{unexpected, Operation, Script};

/// The guard made by acquire call `call` of `owner` releases hold `token`.
pub struct Release<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The hold's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the guard.
    pub call: u64,
}

/// What a release came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReply {
    /// Released (or released already by the same call); this many holds
    /// of the thread are left (0: the lock was handed on or freed).
    Left(u32),
    /// The lock is not this hold's any more: nothing was changed.
    NotHeld,
}

impl Operation for Release<'_> {
    type Reply = ReleaseReply;
    const SCRIPT: Script = Script::Release;

    fn args(&self) -> Vec<String> {
        vec![
            self.owner.to_owned(),
            self.token.to_string(),
            self.call.to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<ReleaseReply> {
        match reply {
            Value::Int(left) if left >= 0 => {
                Ok(ReleaseReply::Left(u32::try_from(left).unwrap_or(u32::MAX)))
            }
            Value::Int(_) => Ok(ReleaseReply::NotHeld),
            Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
            other => Err(unexpected(&other)),
        }
    }
}
