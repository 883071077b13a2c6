//! `sem_abandon.lua`: undo one semaphore call whose outcome its client
//! never learned.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{Abandon, AbandonReply, LockKeys, QueueEntry};

/// Gives back the permit the call `entry` names holds (handing it on), or
/// removes its queue entry, once. Answers as the mutex's [`Abandon`].
pub struct SemAbandon<'a> {
    /// The call, as its queue entry names it (its wait id is the call id).
    pub entry: QueueEntry<'a>,
}

impl Operation for SemAbandon<'_> {
    type Reply = AbandonReply;
    const SCRIPT: Script = Script::SemAbandon;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        Abandon { entry: self.entry }.args()
    }

    fn parse(&self, reply: Value) -> Result<AbandonReply> {
        Abandon { entry: self.entry }.parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_argument_is_the_entry_and_replies_parse_as_the_mutex_ones() {
        let op = SemAbandon {
            entry: QueueEntry {
                owner: "c:1",
                wait_id: 4,
                lease: Duration::from_secs(2),
                fixed: true,
                access: None,
            },
        };
        assert_eq!(op.args(), ["c:1 4 2000 1"]);
        assert_eq!(
            op.parse(Value::Int(1)).unwrap(),
            AbandonReply::HoldGivenBack
        );
        assert_eq!(op.parse(Value::Int(2)).unwrap(), AbandonReply::LeftQueue);
        assert_eq!(op.parse(Value::Int(0)).unwrap(), AbandonReply::Nothing);
        assert!(op.parse(Value::Int(3)).is_err());
    }
}
