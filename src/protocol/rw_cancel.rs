//! `rw_cancel.lua`: a call waiting for a read or write hold gives up and
//! leaves the queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{Cancel, CancelReply, LockKeys, QueueEntry};

/// The call `entry` names leaves the reader-writer lock's queue, leaving
/// nothing behind, and the waiters its leaving unblocks are admitted (a
/// writer gone from the head lets the readers behind it in); if a hold was
/// given to it meanwhile, it keeps it (with its lease, extended unless
/// fixed). Answers as the mutex's [`Cancel`]: [`CancelReply::Kept`] with
/// the hold's token and lease left, or [`CancelReply::Left`].
pub struct RwCancel<'a> {
    /// The call, as it is queued.
    pub entry: QueueEntry<'a>,
}

impl Operation for RwCancel<'_> {
    type Reply = CancelReply;
    const SCRIPT: Script = Script::RwCancel;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![self.entry.to_string()]
    }

    fn parse(&self, reply: Value) -> Result<CancelReply> {
        Cancel { entry: self.entry }.parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::Access;

    #[test]
    fn the_argument_is_the_entry_with_its_access_and_replies_parse_as_the_mutex_ones() {
        let op = RwCancel {
            entry: QueueEntry {
                owner: "c:1",
                wait_id: 4,
                lease: Duration::from_secs(2),
                fixed: false,
                access: Some(Access::Write),
            },
        };
        assert_eq!(op.args(), ["c:1 4 2000 0 w"]);
        let ints = |v: &[i64]| Value::Array(v.iter().map(|n| Value::Int(*n)).collect());
        assert_eq!(op.parse(ints(&[0])).unwrap(), CancelReply::Left);
        assert_eq!(
            op.parse(ints(&[1, 77, 2000])).unwrap(),
            CancelReply::Kept {
                token: 77,
                pttl_ms: 2000
            }
        );
        assert!(op.parse(ints(&[1, 77])).is_err());
    }
}
