//! `force_release.lua`: free every hold of a lock, whoever holds it, and
//! hand it on to the queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{refused, text, Op, Operation};
use crate::protocol::LockKeys;

/// Frees the lock; `call_key` (`<client id>#<call id>`) makes a repeat of
/// the same call answer as the first did.
pub struct ForceRelease {
    /// This call's key.
    pub call_key: String,
}

/// What a forced release freed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freed {
    /// How many holds it freed (a mutex's: at most 1, however many times its
    /// holder re-entered it).
    pub holds: u64,
    /// The mutex's holder's owner id, when there was one.
    pub holder: Option<String>,
}

impl Operation for ForceRelease {
    type Reply = Freed;
    const OP: Op = Op::ForceRelease;

    /// Its record too, the last key.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![self.call_key.clone()]
    }

    fn parse(&self, reply: Value) -> Result<Freed> {
        let (holds, holder) = match reply {
            Value::Nil => (0, None),
            Value::Int(holds) if holds >= 0 => (holds as u64, None),
            Value::ServerError(_) => return Err(refused(reply)),
            other => (1, Some(text(&other)?)),
        };
        Ok(Freed { holds, holder })
    }
}
