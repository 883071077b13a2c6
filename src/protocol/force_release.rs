//! `force_release.lua`: free every hold of a lock, whoever holds it, and
//! hand it on to the queue.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{text, unexpected, Op, Operation};

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

    fn args(&self) -> Vec<String> {
        vec![self.call_key.clone()]
    }

    fn parse(&self, reply: Value) -> Result<Freed> {
        match reply {
            Value::Nil => Ok(Freed {
                holds: 0,
                holder: None,
            }),
            Value::Int(holds) if holds >= 0 => Ok(Freed {
                holds: holds as u64,
                holder: None,
            }),
            Value::ServerError(err) => Err(crate::Error::from_server(err)),
            other => text(&other)
                .map(|owner| Freed {
                    holds: 1,
                    holder: Some(owner),
                })
                .map_err(|_| unexpected(&other)),
        }
    }
}
