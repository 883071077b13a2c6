//! `sem_status.lua`: the whole picture of one semaphore, read in one
//! atomic step.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{count, int, listed_parts, text, unexpected, Operation, Script};
use crate::protocol::LockKeys;

/// Reads N, the live holders (the first `holders` by lease end listed),
/// the available permits, the queue's length, the last token and the first
/// `waiters` waiters in order.
pub struct SemStatus {
    /// Most waiters listed, from the head of the queue.
    pub waiters: usize,
    /// Most holders listed, by lease end.
    pub holders: usize,
}

/// Most entries listed: more than Redis holds in memory, so any larger
/// bound lists them all.
pub(super) const MAX_LISTED: usize = 1_000_000_000;

/// One live holder of a permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitHolder {
    /// The holding thread's owner id.
    pub owner: String,
    /// The id of the acquire call that made the hold.
    pub call: u64,
    /// The permit's fencing token.
    pub token: u64,
    /// Lease left in ms.
    pub lease_left_ms: i64,
}

/// What `sem_status.lua` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemStatusReply {
    /// N, or `None` when the semaphore's meta is gone (unused for a fence
    /// life).
    pub permits: Option<u64>,
    /// Live holders in total.
    pub live_holders: u64,
    /// N - live holders.
    pub available: u64,
    /// Live waiters queued in total.
    pub live_waiters: u64,
    /// The last fencing token issued, or 0.
    pub last_token: u64,
    /// Listed holders, by lease end.
    pub holders: Vec<PermitHolder>,
    /// Listed waiters in order, with ms of liveness left (negative: dead).
    pub waiters: Vec<(String, i64)>,
}

impl Operation for SemStatus {
    type Reply = SemStatusReply;
    const SCRIPT: Script = Script::SemStatus;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.waiters.min(MAX_LISTED).to_string(),
            self.holders.min(MAX_LISTED).to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<SemStatusReply> {
        let items = match reply {
            Value::Array(items) if items.len() >= 6 => items,
            Value::ServerError(err) => return Err(redis::RedisError::from(err).into()),
            other => return Err(unexpected(&other)),
        };
        let (holders, waiters) = listed_parts(&items, 6, self.holders, 4, 2)?;
        let holders = holders
            .chunks(4)
            .map(|h| {
                Ok(PermitHolder {
                    owner: text(&h[0])?,
                    call: count(&h[1])?,
                    token: count(&h[2])?,
                    lease_left_ms: int(&h[3])?,
                })
            })
            .collect::<Result<_>>()?;
        let waiters = waiters
            .chunks(2)
            .map(|pair| Ok((text(&pair[0])?, int(&pair[1])?)))
            .collect::<Result<_>>()?;
        let permits = count(&items[0])?;
        Ok(SemStatusReply {
            permits: (permits > 0).then_some(permits),
            live_holders: count(&items[1])?,
            available: count(&items[2])?,
            live_waiters: count(&items[3])?,
            last_token: count(&items[4])?,
            holders,
            waiters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn arguments_are_the_bounds_and_the_reply_splits_into_holders_and_waiters() {
        let op = SemStatus {
            waiters: 5,
            holders: usize::MAX,
        };
        assert_eq!(op.args(), ["5", "1000000000"]);
        let mut reply = [3, 2, 1, 1, 42, 2].map(Value::Int).to_vec();
        reply.extend([bulk("a:1"), Value::Int(7), Value::Int(41), Value::Int(900)]);
        reply.extend([bulk("b:1"), Value::Int(8), Value::Int(42), Value::Int(950)]);
        reply.extend([bulk("w:1"), Value::Int(5000)]);
        let parsed = op.parse(Value::Array(reply.clone())).unwrap();
        assert_eq!(parsed.permits, Some(3));
        assert_eq!(
            (
                parsed.live_holders,
                parsed.available,
                parsed.live_waiters,
                parsed.last_token
            ),
            (2, 1, 1, 42)
        );
        assert_eq!(
            parsed.holders[1],
            PermitHolder {
                owner: "b:1".into(),
                call: 8,
                token: 42,
                lease_left_ms: 950
            }
        );
        assert_eq!(parsed.waiters, [("w:1".to_owned(), 5000)]);
        // A holder cut short, or a waiter without its time, is no reply of
        // this script.
        assert!(op
            .parse(Value::Array(reply[..reply.len() - 1].to_vec()))
            .is_err());
        assert!(op.parse(Value::Array(reply[..9].to_vec())).is_err());
        // The meta gone: no N.
        let gone = op
            .parse(Value::Array([0, 0, 0, 0, 0, 0].map(Value::Int).to_vec()))
            .unwrap();
        assert_eq!((gone.permits, gone.holders.len()), (None, 0));
    }
}
