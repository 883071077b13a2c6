//! `abandon.lua`: undo one call whose outcome its client never learned.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{coded, Op, Operation};
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

    /// 0: nothing to undo, 1: released, 2: left the queue.
    fn parse(&self, reply: Value) -> Result<AbandonReply> {
        use AbandonReply as R;
        coded(reply, [R::Nothing, R::Released, R::LeftQueue])
    }
}
