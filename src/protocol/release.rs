//! `release.lua`: give back one hold; at zero the lock goes to the next waiter.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{text, unexpected, Operation, Script};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseReply {
    /// Released (or released already by the same call); this many holds
    /// of the thread are left (0: the lock was freed).
    Left(u32),
    /// Released, and the lock went straight to the waiter named.
    HandedOver(HandedOver),
    /// The lock is not this hold's any more: nothing was changed.
    NotHeld,
}

/// The waiter a release handed the lock to, as its "G" message names it:
/// the releasing client may wake its own waiter from this reply at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedOver {
    /// The new holder's owner id.
    pub owner: String,
    /// The new holder's call.
    pub wait_id: u64,
    /// Its fencing token.
    pub token: u64,
    /// Its lease as set, in ms.
    pub ttl_ms: u64,
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
            Value::Array(items) => match items.as_slice() {
                [owner, Value::Int(wait_id), Value::Int(token), Value::Int(ttl)] => {
                    Ok(ReleaseReply::HandedOver(HandedOver {
                        owner: text(owner)?,
                        wait_id: *wait_id as u64,
                        token: *token as u64,
                        ttl_ms: *ttl as u64,
                    }))
                }
                _ => Err(unexpected(&items)),
            },
            Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
            other => Err(unexpected(&other)),
        }
    }
}
