//! `rw_abandon.lua`: undo one reader-writer lock call whose outcome its
//! client never learned.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{Abandon, AbandonReply, LockKeys, QueueEntry};

/// Gives back the read or write hold the call `entry` names (admitting the
/// waiters it blocked), or removes its queue entry, once. Answers as the
/// mutex's [`Abandon`].
pub struct RwAbandon<'a> {
    /// The call, as its queue entry names it (its wait id is the call id,
    /// its access the hold's).
    pub entry: QueueEntry<'a>,
}

impl Operation for RwAbandon<'_> {
    type Reply = AbandonReply;
    const SCRIPT: Script = Script::RwAbandon;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![self.entry.to_string()]
    }

    fn parse(&self, reply: Value) -> Result<AbandonReply> {
        Abandon { entry: self.entry }.parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::Access;

    #[test]
    fn the_argument_is_the_entry_with_its_access_and_replies_parse_as_the_mutex_ones() {
        let op = RwAbandon {
            entry: QueueEntry {
                owner: "c:1",
                wait_id: 4,
                lease: Duration::from_secs(2),
                fixed: true,
                access: Some(Access::Read),
            },
        };
        assert_eq!(op.args(), ["c:1 4 2000 1 r"]);
        assert_eq!(
            op.parse(Value::Int(1)).unwrap(),
            AbandonReply::HoldGivenBack
        );
        assert_eq!(op.parse(Value::Int(2)).unwrap(), AbandonReply::LeftQueue);
        assert_eq!(op.parse(Value::Int(0)).unwrap(), AbandonReply::Nothing);
        assert!(op.parse(Value::Int(3)).is_err());
    }
}
