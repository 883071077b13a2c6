//! `rw_renew.lua`: extend a read or write hold's lease, only if it is
//! still ours.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{LockKeys, SemRenew};

/// The hold `token` of acquire call `call` of `owner` gets `lease` from
/// now; `None` leaves the lease as it is and only writes the hold again (as
/// [`SemRenew`], whose arguments and replies it shares).
pub struct RwRenew<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The hold's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the hold.
    pub call: u64,
    /// The lease from now, or `None` to leave it.
    pub lease: Option<Duration>,
}

impl RwRenew<'_> {
    fn as_sem(&self) -> SemRenew<'_> {
        SemRenew {
            owner: self.owner,
            token: self.token,
            call: self.call,
            lease: self.lease,
        }
    }
}

impl Operation for RwRenew<'_> {
    /// True when renewed; false when this hold is no longer held.
    type Reply = bool;
    const SCRIPT: Script = Script::RwRenew;

    /// All six (the queue keys unused): the ones used are not contiguous,
    /// and all share one slot.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        self.as_sem().args()
    }

    fn parse(&self, reply: Value) -> Result<bool> {
        self.as_sem().parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_replies_are_the_semaphore_renew_ones() {
        let op = RwRenew {
            owner: "c:1",
            token: 9,
            call: 4,
            lease: Some(Duration::from_millis(1500)),
        };
        assert_eq!(op.args(), ["c:1", "9", "4", "1500"]);
        let keep = RwRenew { lease: None, ..op };
        assert_eq!(keep.args(), ["c:1", "9", "4", "0"]);
        assert!(keep.parse(Value::Int(1)).unwrap());
        assert!(!keep.parse(Value::Int(0)).unwrap());
        assert!(keep.parse(Value::Int(2)).is_err());
    }
}
