//! `status.lua`: the whole picture of one lock, read in one atomic step.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int, text, unexpected, Operation, Script};

/// Reads the holder, the queue's length, the last token and the first
/// `limit` waiters in order.
pub struct Status {
    pub limit: usize,
}

/// Most waiters listed: more than any queue Redis holds in memory, so any
/// larger bound lists the whole queue.
const MAX_LISTED: usize = 1_000_000_000;

/// The holder as the lock hash records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderReply {
    pub owner: String,
    pub count: i64,
    pub token: i64,
    /// Lease left in ms; -1 when the key has no expiry.
    pub pttl_ms: i64,
}

/// What `status.lua` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReply {
    pub holder: Option<HolderReply>,
    /// Live waiters queued in total.
    pub live_waiters: i64,
    /// The last fencing token issued, or 0.
    pub last_token: i64,
    /// Listed waiters in order, with ms of liveness left (negative: dead).
    pub waiters: Vec<(String, i64)>,
}

impl Operation for Status {
    type Reply = StatusReply;
    const SCRIPT: Script = Script::Status;

    fn args(&self) -> Vec<String> {
        vec![self.limit.min(MAX_LISTED).to_string()]
    }

    fn parse(&self, reply: Value) -> Result<StatusReply> {
        let items = match reply {
            Value::Array(items) if items.len() >= 6 && items.len() % 2 == 0 => items,
            Value::ServerError(err) => return Err(redis::RedisError::from(err).into()),
            other => return Err(unexpected(&other)),
        };
        let owner = text(&items[0])?;
        let holder = if owner.is_empty() {
            None
        } else {
            Some(HolderReply {
                owner,
                count: int(&items[1])?,
                token: int(&items[2])?,
                pttl_ms: int(&items[3])?,
            })
        };
        let waiters = items[6..]
            .chunks(2)
            .map(|pair| Ok((text(&pair[0])?, int(&pair[1])?)))
            .collect::<Result<_>>()?;
        Ok(StatusReply {
            holder,
            live_waiters: int(&items[4])?,
            last_token: int(&items[5])?,
            waiters,
        })
    }
}
