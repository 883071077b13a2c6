//! `cancel.lua`: a waiting call gives up and leaves the queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int_list, unexpected, Op, Operation};
use crate::protocol::QueueEntry;

/// The call `entry` names leaves the queue; if the lock was handed to it
/// meanwhile, that hold is given back as its abandon would give it back
/// (the lock goes on to the next waiters): the wait is over, and a leave
/// may reach Redis after its caller stopped waiting for the reply (a
/// stalled link, a client gone), when nobody would take it.
pub struct Cancel<'a> {
    /// The call, as it is queued.
    pub entry: QueueEntry<'a>,
}

/// What leaving the queue came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReply {
    /// The lock had been handed to this call: it was given back.
    GivenBack,
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
        match int_list(reply)?.as_slice() {
            [1] => Ok(CancelReply::GivenBack),
            [0] => Ok(CancelReply::Left),
            items => Err(unexpected(&items)),
        }
    }
}
