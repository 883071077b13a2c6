//! `heartbeat.lua`: keep one client's queued waiters on one lock alive.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int_list, ms, unexpected, Op, Operation};
use crate::protocol::{Ask, QueueEntry};

/// The client's waiting calls on one lock (as queued) get a new liveness
/// deadline of `waiter_timeout` from now; a lock whose holder vanished goes
/// to its first live waiter. A call found holding the lock keeps its lease
/// unless that lease is fixed (the watchdog must not extend it).
pub struct Heartbeat<'a> {
    /// The new liveness deadline, from the server's now.
    pub waiter_timeout: Duration,
    /// The calls, as the queue stores them.
    pub waiters: Vec<QueueEntry<'a>>,
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
    /// The lock's lease left in ms (-1: no expiry, -2: free); for a
    /// semaphore, ms until the first live lease runs out (0: none live).
    pub pttl_ms: i64,
    /// The last fencing token issued for the lock.
    pub last_token: u64,
    /// One status per waiter, in the order sent.
    pub statuses: Vec<WaiterStatus>,
}

impl HeartbeatReply {
    /// The lease left of the hold `entry` was found to own
    /// ([`WaiterStatus::Owns`]), when the reply says it: a mutex's (or an
    /// election's) `pttl_ms` is its one hold's; a counted lock's is the
    /// first of its holds' leases to run out, maybe another's, so `None`
    /// (the call's own poll names its lease).
    pub fn lease_of(&self, entry: &QueueEntry) -> Option<Duration> {
        (entry.ask == Ask::Mutex)
            .then(|| Duration::from_millis(u64::try_from(self.pttl_ms).unwrap_or(0)))
    }
}

impl Operation for Heartbeat<'_> {
    type Reply = HeartbeatReply;
    const OP: Op = Op::Heartbeat;

    fn args(&self) -> Vec<String> {
        let mut args = vec![ms(self.waiter_timeout)];
        args.extend(self.waiters.iter().map(QueueEntry::to_string));
        args
    }

    fn parse(&self, reply: Value) -> Result<HeartbeatReply> {
        let items = int_list(reply)?;
        // Two fields, then two per waiter sent.
        let (pttl_ms, last_token, rest) = match items.as_slice() {
            [pttl, last, rest @ ..] if rest.len() == 2 * self.waiters.len() => (*pttl, *last, rest),
            _ => return Err(unexpected(&items)),
        };
        let statuses = rest
            .chunks(2)
            .map(|pair| match pair {
                [0, position] => WaiterStatus::Queued(*position as u64),
                [1, token] => WaiterStatus::Owns(*token as u64),
                _ => WaiterStatus::Gone,
            })
            .collect();
        Ok(HeartbeatReply {
            pttl_ms,
            last_token: last_token as u64,
            statuses,
        })
    }
}
