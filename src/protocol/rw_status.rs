//! `rw_status.lua`: the whole picture of one reader-writer lock, read in
//! one atomic step.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{count, int, listed_parts, text, unexpected, Operation, Script};
use crate::protocol::sem_status::MAX_LISTED;
use crate::protocol::{Access, LockKeys};

/// Reads the live holds (the first `holders` by lease end listed, each with
/// its access), whether a writer holds, the queue's length, the last token
/// and the first `waiters` waiters in order with the access each waits for.
pub struct RwStatus {
    /// Most waiters listed, from the head of the queue.
    pub waiters: usize,
    /// Most holders listed, by lease end.
    pub holders: usize,
}

/// One live read or write hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwHolder {
    /// The holding thread's owner id.
    pub owner: String,
    /// The id of the acquire call that made the hold.
    pub call: u64,
    /// Read or write.
    pub access: Access,
    /// The hold's fencing token.
    pub token: u64,
    /// Lease left in ms.
    pub lease_left_ms: i64,
}

/// One queued waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwWaiter {
    /// The waiting thread's owner id (the whole member when fairlock did
    /// not write it).
    pub owner: String,
    /// What it waits for; `None` for a member fairlock did not write (the
    /// next call that reaches it drops it).
    pub access: Option<Access>,
    /// Ms of liveness left (negative: dead, not dropped yet).
    pub liveness_left_ms: i64,
}

/// What `rw_status.lua` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwStatusReply {
    /// Live holds in total, read and write.
    pub live_holders: u64,
    /// Whether a live write hold is among them (then every live hold is
    /// that writer's: write in write, read in write).
    pub writer_holds: bool,
    /// Live waiters queued in total: the queue's length.
    pub live_waiters: u64,
    /// The last fencing token issued, or 0.
    pub last_token: u64,
    /// Listed holders, by lease end.
    pub holders: Vec<RwHolder>,
    /// Listed waiters, in order.
    pub waiters: Vec<RwWaiter>,
}

impl Operation for RwStatus {
    type Reply = RwStatusReply;
    const SCRIPT: Script = Script::RwStatus;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.waiters.min(MAX_LISTED).to_string(),
            self.holders.min(MAX_LISTED).to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<RwStatusReply> {
        let items = match reply {
            Value::Array(items) if items.len() >= 5 => items,
            Value::ServerError(err) => return Err(redis::RedisError::from(err).into()),
            other => return Err(unexpected(&other)),
        };
        let (holders, waiters) = listed_parts(&items, 5, self.holders, 5, 3)?;
        let holders = holders
            .chunks(5)
            .map(|h| {
                Ok(RwHolder {
                    owner: text(&h[0])?,
                    call: count(&h[1])?,
                    access: Access::from_arg(&text(&h[2])?).ok_or_else(|| unexpected(&h[2]))?,
                    token: count(&h[3])?,
                    lease_left_ms: int(&h[4])?,
                })
            })
            .collect::<Result<_>>()?;
        let waiters = waiters
            .chunks(3)
            .map(|w| {
                Ok(RwWaiter {
                    owner: text(&w[0])?,
                    access: Access::from_arg(&text(&w[1])?),
                    liveness_left_ms: int(&w[2])?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(RwStatusReply {
            live_holders: count(&items[0])?,
            writer_holds: count(&items[1])? > 0,
            live_waiters: count(&items[2])?,
            last_token: count(&items[3])?,
            holders,
            waiters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn arguments_are_the_bounds_and_the_reply_splits_into_holders_and_waiters() {
        let op = RwStatus {
            waiters: 5,
            holders: usize::MAX,
        };
        assert_eq!(op.args(), ["5", "1000000000"]);
        let mut reply = [2, 0, 2, 42, 2].map(Value::Int).to_vec();
        reply.extend([bulk("a:1"), Value::Int(7), bulk("r")]);
        reply.extend([Value::Int(41), Value::Int(900)]);
        reply.extend([bulk("b:1"), Value::Int(8), bulk("r")]);
        reply.extend([Value::Int(42), Value::Int(950)]);
        reply.extend([bulk("w:1"), bulk("w"), Value::Int(5000)]);
        reply.extend([bulk("junk"), bulk(""), Value::Int(-3)]);
        let parsed = op.parse(Value::Array(reply.clone())).unwrap();
        assert_eq!(
            (
                parsed.live_holders,
                parsed.writer_holds,
                parsed.live_waiters,
                parsed.last_token
            ),
            (2, false, 2, 42)
        );
        assert_eq!(
            parsed.holders[1],
            RwHolder {
                owner: "b:1".into(),
                call: 8,
                access: Access::Read,
                token: 42,
                lease_left_ms: 950
            }
        );
        assert_eq!(
            parsed.waiters,
            [
                RwWaiter {
                    owner: "w:1".into(),
                    access: Some(Access::Write),
                    liveness_left_ms: 5000
                },
                RwWaiter {
                    owner: "junk".into(),
                    access: None,
                    liveness_left_ms: -3
                }
            ]
        );
        // A waiter without its time, or a holder cut short, is no reply of
        // this script; nor is a holder of no access.
        assert!(op
            .parse(Value::Array(reply[..reply.len() - 1].to_vec()))
            .is_err());
        assert!(op.parse(Value::Array(reply[..9].to_vec())).is_err());
        let mut odd = reply.clone();
        odd[7] = bulk("x");
        assert!(op.parse(Value::Array(odd)).is_err());
        // A writer holds.
        let one = op
            .parse(Value::Array([1, 1, 0, 9, 0].map(Value::Int).to_vec()))
            .unwrap();
        assert!(one.writer_holds && one.holders.is_empty());
    }
}
