//! `heartbeat.lua`: keep one client's queued waiters on one lock alive.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int_list, ms, unexpected, Operation, Script};

/// One waiting call of the heartbeating client.
pub struct WaiterBeat<'a> {
    pub owner: &'a str,
    pub wait_id: u64,
    /// The lease to keep if the lock was handed to this call; `None` for a
    /// fixed lease, which the watchdog must not extend.
    pub lease: Option<Duration>,
}

/// The client's waiters on one lock get a new liveness deadline of
/// `waiter_timeout` from now; a lock whose holder vanished goes to its
/// first live waiter.
pub struct Heartbeat<'a> {
    pub waiter_timeout: Duration,
    pub waiters: Vec<WaiterBeat<'a>>,
}

/// A heartbeat's answer about one waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaiterStatus {
    /// Still queued at this position; its deadline was pushed out.
    Queued(u64),
    /// The lock was handed to this call with this token.
    Owns(u64),
    /// Neither queued nor holding: it lost its place.
    Gone,
}

/// A heartbeat's answer about one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatReply {
    pub pttl_ms: i64,
    /// The last fencing token issued for the lock.
    pub last_token: u64,
    /// One status per waiter, in the order sent.
    pub statuses: Vec<WaiterStatus>,
}

impl Operation for Heartbeat<'_> {
    type Reply = HeartbeatReply;
    const SCRIPT: Script = Script::Heartbeat;

    fn args(&self) -> Vec<String> {
        let mut args = vec![ms(self.waiter_timeout)];
        for waiter in &self.waiters {
            args.push(waiter.owner.to_owned());
            args.push(waiter.wait_id.to_string());
            args.push(waiter.lease.map_or_else(|| "0".to_owned(), ms));
        }
        args
    }

    fn parse(&self, reply: Value) -> Result<HeartbeatReply> {
        let items = int_list(reply)?;
        let [pttl_ms, last_token, rest @ ..] = items.as_slice() else {
            return Err(unexpected(&items));
        };
        if rest.len() != 2 * self.waiters.len() {
            return Err(unexpected(&items));
        }
        let statuses = rest
            .chunks(2)
            .map(|pair| match pair {
                [0, position] => WaiterStatus::Queued(*position as u64),
                [1, token] => WaiterStatus::Owns(*token as u64),
                _ => WaiterStatus::Gone,
            })
            .collect();
        Ok(HeartbeatReply {
            pttl_ms: *pttl_ms,
            last_token: *last_token as u64,
            statuses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_triples_and_statuses_follow_their_order() {
        let beat = Heartbeat {
            waiter_timeout: Duration::from_secs(1),
            waiters: vec![
                WaiterBeat {
                    owner: "c:1",
                    wait_id: 4,
                    lease: Some(Duration::from_secs(2)),
                },
                WaiterBeat {
                    owner: "c:2",
                    wait_id: 5,
                    lease: None,
                },
            ],
        };
        assert_eq!(beat.args(), ["1000", "c:1", "4", "2000", "c:2", "5", "0"]);
        let reply = Value::Array([300, 9, 0, 2, 1, 9].map(Value::Int).to_vec());
        let parsed = beat.parse(reply).unwrap();
        assert_eq!(
            parsed.statuses,
            [WaiterStatus::Queued(2), WaiterStatus::Owns(9)]
        );
        assert_eq!((parsed.pttl_ms, parsed.last_token), (300, 9));
    }
}
