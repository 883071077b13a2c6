//! `sem_heartbeat.lua`: keep one client's queued waiters on one semaphore
//! alive.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{Operation, Script};
use crate::protocol::{Heartbeat, HeartbeatReply, LockKeys, QueueEntry};

/// The client's waiting calls on one semaphore (as queued) get a new
/// liveness deadline of `waiter_timeout` from now; free permits (expired
/// holds dropped) go to the first live waiters. A call found holding a
/// permit keeps its lease unless that lease is fixed. The arguments and
/// replies have the mutex's [`Heartbeat`] shapes: in the
/// [`HeartbeatReply`], `pttl_ms` is the ms until the first live lease runs
/// out (0: none live) and [`WaiterStatus::Owns`](crate::protocol::WaiterStatus::Owns)
/// carries the permit's token.
pub struct SemHeartbeat<'a> {
    /// The waiters' new liveness deadline, from now.
    pub waiter_timeout: Duration,
    /// The waiting calls, as queued.
    pub waiters: Vec<QueueEntry<'a>>,
}

impl SemHeartbeat<'_> {
    /// The mutex's heartbeat of the same waiters, whose order and parsing
    /// this one shares.
    fn as_mutex(&self) -> Heartbeat<'_> {
        Heartbeat {
            waiter_timeout: self.waiter_timeout,
            waiters: self.waiters.clone(),
        }
    }
}

impl Operation for SemHeartbeat<'_> {
    type Reply = HeartbeatReply;
    const SCRIPT: Script = Script::SemHeartbeat;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        self.as_mutex().args()
    }

    fn parse(&self, reply: Value) -> Result<HeartbeatReply> {
        self.as_mutex().parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::WaiterStatus;

    #[test]
    fn arguments_are_the_timeout_then_queue_entries_and_statuses_follow_their_order() {
        let beat = SemHeartbeat {
            waiter_timeout: Duration::from_secs(1),
            waiters: vec![
                QueueEntry {
                    owner: "c:1",
                    wait_id: 4,
                    lease: Duration::from_secs(2),
                    fixed: false,
                    access: None,
                },
                QueueEntry {
                    owner: "c:2",
                    wait_id: 5,
                    lease: Duration::from_secs(3),
                    fixed: true,
                    access: None,
                },
            ],
        };
        assert_eq!(beat.args(), ["1000", "c:1 4 2000 0", "c:2 5 3000 1"]);
        let reply = Value::Array([0, 9, 1, 9, -1, 0].map(Value::Int).to_vec());
        let parsed = beat.parse(reply).unwrap();
        assert_eq!(parsed.statuses, [WaiterStatus::Owns(9), WaiterStatus::Gone]);
        assert_eq!((parsed.pttl_ms, parsed.last_token), (0, 9));
        // One status per waiter sent, no more, no fewer.
        let short = Value::Array([0, 9, 0, 1].map(Value::Int).to_vec());
        assert!(beat.parse(short).is_err());
    }
}
