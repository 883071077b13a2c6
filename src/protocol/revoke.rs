//! `revoke.lua`: ask the holders of a lock to let go. Nothing is freed:
//! each holder decides when it releases.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{count, refused, unexpected, Op, Operation};
use crate::protocol::LockKeys;

/// Asks every hold of the lock present now to let go: the request is
/// recorded beside the holds (up to the last token issued), each holder's
/// renewals report it, and each holding client is sent `R <token> <lock
/// key>` at once. `call_key` (`<client id>#<call id>`) makes a repeat of
/// the same call answer as the first did and ask nobody.
pub struct Revoke {
    /// This call's key.
    pub call_key: String,
}

/// What a revocation asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revoked {
    /// The live holds asked to let go (0: nobody held the lock).
    pub holds: u64,
    /// Holds whose tokens are up to this one are asked (0 when none).
    pub up_to: u64,
}

impl Operation for Revoke {
    type Reply = Revoked;
    const OP: Op = Op::Revoke;

    /// Its record too, the last key (the force release's left out).
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        &keys.all[..keys.all.len() - 1]
    }

    fn args(&self) -> Vec<String> {
        vec![self.call_key.clone()]
    }

    fn parse(&self, reply: Value) -> Result<Revoked> {
        let Value::Array(values) = reply else {
            return Err(refused(reply));
        };
        match values.as_slice() {
            [holds, up_to] => Ok(Revoked {
                holds: count(holds)?,
                up_to: count(up_to)?,
            }),
            _ => Err(unexpected(&values)),
        }
    }
}
