//! `revoke.lua`: ask the holders of a lock to let go. Nothing is freed:
//! each holder decides when it releases.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{count, list, Op, Operation};
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
        let values = list(reply, |n| n == 2)?;
        Ok(Revoked {
            holds: count(&values[0])?,
            up_to: count(&values[1])?,
        })
    }
}
