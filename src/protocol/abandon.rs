//! `abandon.lua`: undo one call whose outcome its client never learned.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{refused, Op, Operation};
use crate::protocol::QueueEntry;

/// Undoes whatever the call `entry` names holds or queued, once: its hold
/// released, or its queue entry removed.
pub struct Abandon<'a> {
    /// The call, as its queue entry names it.
    pub entry: QueueEntry<'a>,
}

/// What an abandon found to undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbandonReply {
    /// One count of its hold was released.
    Released,
    /// Its queue entry was removed.
    LeftQueue,
    /// It left nothing behind (or was undone already).
    Nothing,
}

impl Operation for Abandon<'_> {
    type Reply = AbandonReply;
    const OP: Op = Op::Abandon;

    fn args(&self) -> Vec<String> {
        vec![self.entry.to_string()]
    }

    fn parse(&self, reply: Value) -> Result<AbandonReply> {
        match reply {
            Value::Int(1) => Ok(AbandonReply::Released),
            Value::Int(2) => Ok(AbandonReply::LeftQueue),
            Value::Int(0) => Ok(AbandonReply::Nothing),
            other => Err(refused(other)),
        }
    }
}
