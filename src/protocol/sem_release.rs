//! `sem_release.lua`: give back one permit; free permits go to the live
//! waiters at the head of the queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{text, unexpected, Operation, Script};
use crate::protocol::{HandedOver, LockKeys};

/// The permit made by acquire call `call` of `owner`, token `token`, is
/// given back.
pub struct SemRelease<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The permit's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the permit.
    pub call: u64,
}

/// What a semaphore release came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SemReleaseReply {
    /// Released (or released already by the same call); nobody was handed
    /// a permit.
    Released,
    /// Released, and the freed permits (usually one; more when expired
    /// holds were dropped on the way) went straight to these waiters, in
    /// queue order: the releasing client may wake its own at once.
    HandedOver(Vec<HandedOver>),
    /// This call holds no live permit with that token: nothing was changed.
    NotHeld,
}

impl Operation for SemRelease<'_> {
    type Reply = SemReleaseReply;
    const SCRIPT: Script = Script::SemRelease;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.owner.to_owned(),
            self.token.to_string(),
            self.call.to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<SemReleaseReply> {
        match reply {
            Value::Int(0) => Ok(SemReleaseReply::Released),
            Value::Int(-1) => Ok(SemReleaseReply::NotHeld),
            Value::Array(items) if !items.is_empty() && items.len() % 4 == 0 => items
                .chunks(4)
                .map(|grant| match grant {
                    [owner, Value::Int(wait_id), Value::Int(token), Value::Int(ttl)] => {
                        Ok(HandedOver {
                            owner: text(owner)?,
                            wait_id: *wait_id as u64,
                            token: *token as u64,
                            ttl_ms: *ttl as u64,
                        })
                    }
                    _ => Err(unexpected(&grant)),
                })
                .collect::<Result<Vec<_>>>()
                .map(SemReleaseReply::HandedOver),
            Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
            other => Err(unexpected(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_into_released_handed_over_or_not_held() {
        let op = SemRelease {
            owner: "c:1",
            token: 5,
            call: 2,
        };
        assert_eq!(op.args(), ["c:1", "5", "2"]);
        assert_eq!(op.parse(Value::Int(0)).unwrap(), SemReleaseReply::Released);
        assert_eq!(op.parse(Value::Int(-1)).unwrap(), SemReleaseReply::NotHeld);
        let grant = |owner: &str, id: i64| {
            [
                Value::BulkString(owner.as_bytes().to_vec()),
                Value::Int(id),
                Value::Int(10 + id),
                Value::Int(500),
            ]
        };
        let two: Vec<Value> = grant("a:1", 1).into_iter().chain(grant("b:1", 2)).collect();
        assert_eq!(
            op.parse(Value::Array(two)).unwrap(),
            SemReleaseReply::HandedOver(vec![
                HandedOver {
                    owner: "a:1".into(),
                    wait_id: 1,
                    token: 11,
                    ttl_ms: 500
                },
                HandedOver {
                    owner: "b:1".into(),
                    wait_id: 2,
                    token: 12,
                    ttl_ms: 500
                },
            ])
        );
        assert!(op.parse(Value::Array(vec![Value::Int(1)])).is_err());
        assert!(op.parse(Value::Int(3)).is_err());
    }
}
