//! `cancel.lua`: a waiting call gives up and leaves the queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int_list, unexpected, Op, Operation};
use crate::protocol::QueueEntry;

/// The call `entry` names leaves the queue; if the lock was handed to it
/// meanwhile, it keeps it (with its lease, extended unless fixed).
pub struct Cancel<'a> {
    /// The call, as it is queued.
    pub entry: QueueEntry<'a>,
}

/// What leaving the queue came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReply {
    /// The lock had been handed to this call: it holds it.
    Kept {
        /// The hold's fencing token.
        token: u64,
        /// Lease left in ms (-1: no expiry).
        pttl_ms: i64,
    },
    /// The call left the queue (or was not in it).
    Left,
}

impl Operation for Cancel<'_> {
    type Reply = CancelReply;
    const OP: Op = Op::Cancel;

    fn args(&self) -> Vec<String> {
        vec![self.entry.to_string()]
    }

    fn parse(&self, reply: Value) -> Result<CancelReply> {
        let items = int_list(reply)?;
        match items.as_slice() {
            [1, token, pttl] => Ok(CancelReply::Kept {
                token: *token as u64,
                pttl_ms: *pttl,
            }),
            [0] => Ok(CancelReply::Left),
            _ => Err(unexpected(&items)),
        }
    }
}
