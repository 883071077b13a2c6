//! `rw_release.lua`: give back one read or write hold; the lock goes on to
//! the head of the queue (a writer alone, or a run of readers).

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{LockKeys, SemRelease, SemReleaseReply};

/// The hold made by acquire call `call` of `owner`, token `token`, is given
/// back. The reply has the semaphore release's shapes: several waiters can
/// be admitted at once (consecutive readers).
pub struct RwRelease<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The hold's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the hold.
    pub call: u64,
}

impl Operation for RwRelease<'_> {
    type Reply = SemReleaseReply;
    const SCRIPT: Script = Script::RwRelease;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        self.as_sem().args()
    }

    fn parse(&self, reply: Value) -> Result<SemReleaseReply> {
        self.as_sem().parse(reply)
    }
}

impl RwRelease<'_> {
    /// The semaphore's release of the same hold: same ARGV, same replies.
    fn as_sem(&self) -> SemRelease<'_> {
        SemRelease {
            owner: self.owner,
            token: self.token,
            call: self.call,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::HandedOver;

    #[test]
    fn arguments_and_replies_are_the_semaphore_release_ones() {
        let op = RwRelease {
            owner: "c:1",
            token: 5,
            call: 2,
        };
        assert_eq!(op.args(), ["c:1", "5", "2"]);
        assert_eq!(op.parse(Value::Int(0)).unwrap(), SemReleaseReply::Released);
        assert_eq!(op.parse(Value::Int(-1)).unwrap(), SemReleaseReply::NotHeld);
        let reply = Value::Array(vec![
            Value::BulkString(b"a:1".to_vec()),
            Value::Int(3),
            Value::Int(11),
            Value::Int(500),
        ]);
        assert_eq!(
            op.parse(reply).unwrap(),
            SemReleaseReply::HandedOver(vec![HandedOver {
                owner: "a:1".into(),
                wait_id: 3,
                token: 11,
                ttl_ms: 500
            }])
        );
        assert!(op.parse(Value::Int(2)).is_err());
    }
}
