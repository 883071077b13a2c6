//! `rw_heartbeat.lua`: keep one client's queued waiters on one
//! reader-writer lock alive.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{ms, Operation, Script};
use crate::protocol::{Heartbeat, HeartbeatReply, LockKeys, QueueEntry};

/// The client's waiting calls on one reader-writer lock (as queued, with
/// their access) get a new liveness deadline of `waiter_timeout` from now;
/// the live waiters at the head that the lock can take (expired holds
/// dropped) are admitted: a writer alone, or a run of readers. A call found
/// holding keeps its lease unless that lease is fixed. The replies have the
/// mutex's [`Heartbeat`] shapes: in the [`HeartbeatReply`], `pttl_ms` is
/// the ms until the first live lease runs out (0: none live) and
/// [`WaiterStatus::Owns`](crate::protocol::WaiterStatus::Owns) carries the
/// hold's token.
pub struct RwHeartbeat<'a> {
    /// The waiters' new liveness deadline, from now.
    pub waiter_timeout: Duration,
    /// The waiting calls, as queued.
    pub waiters: Vec<QueueEntry<'a>>,
}

impl Operation for RwHeartbeat<'_> {
    type Reply = HeartbeatReply;
    const SCRIPT: Script = Script::RwHeartbeat;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![ms(self.waiter_timeout)];
        args.extend(self.waiters.iter().map(QueueEntry::to_string));
        args
    }

    fn parse(&self, reply: Value) -> Result<HeartbeatReply> {
        // One status per waiter, as the mutex's heartbeat reads them.
        Heartbeat {
            waiter_timeout: self.waiter_timeout,
            waiters: self.waiters.clone(),
        }
        .parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Access, WaiterStatus};

    #[test]
    fn arguments_are_the_timeout_then_queue_entries_and_statuses_follow_their_order() {
        let beat = RwHeartbeat {
            waiter_timeout: Duration::from_secs(1),
            waiters: vec![
                QueueEntry {
                    owner: "c:1",
                    wait_id: 4,
                    lease: Duration::from_secs(2),
                    fixed: false,
                    access: Some(Access::Read),
                },
                QueueEntry {
                    owner: "c:2",
                    wait_id: 5,
                    lease: Duration::from_secs(3),
                    fixed: true,
                    access: Some(Access::Write),
                },
            ],
        };
        assert_eq!(beat.args(), ["1000", "c:1 4 2000 0 r", "c:2 5 3000 1 w"]);
        let reply = Value::Array([0, 9, 1, 9, -1, 0].map(Value::Int).to_vec());
        let parsed = beat.parse(reply).unwrap();
        assert_eq!(parsed.statuses, [WaiterStatus::Owns(9), WaiterStatus::Gone]);
        assert_eq!((parsed.pttl_ms, parsed.last_token), (0, 9));
        // One status per waiter sent, no more, no fewer.
        let short = Value::Array([0, 9, 0, 1].map(Value::Int).to_vec());
        assert!(beat.parse(short).is_err());
    }
}
