//! `sem_cancel.lua`: a call waiting for a permit gives up and leaves the
//! queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{Cancel, CancelReply, LockKeys, QueueEntry};

/// The call `entry` names leaves the semaphore's queue, leaving nothing
/// behind; if a permit was handed to it meanwhile, it keeps it (with its
/// lease, extended unless fixed). Answers as the mutex's [`Cancel`]:
/// [`CancelReply::Kept`] with the permit's token and lease left, or
/// [`CancelReply::Left`].
pub struct SemCancel<'a> {
    /// The call, as it is queued.
    pub entry: QueueEntry<'a>,
}

impl Operation for SemCancel<'_> {
    type Reply = CancelReply;
    const SCRIPT: Script = Script::SemCancel;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        Cancel { entry: self.entry }.args()
    }

    fn parse(&self, reply: Value) -> Result<CancelReply> {
        Cancel { entry: self.entry }.parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_argument_is_the_entry_and_replies_parse_as_the_mutex_ones() {
        let op = SemCancel {
            entry: QueueEntry {
                owner: "c:1",
                wait_id: 4,
                lease: Duration::from_secs(2),
                fixed: false,
                access: None,
            },
        };
        assert_eq!(op.args(), ["c:1 4 2000 0"]);
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
