//! `force_release.lua`: free the lock whoever holds it (operators).

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{unexpected, Operation, Script};

/// Frees the lock; `call_key` ("<client id>#<call id>") makes the same call
/// delivered twice free it once.
pub struct ForceRelease {
    pub call_key: String,
}

impl Operation for ForceRelease {
    /// The owner id that held the lock, or `None` when it was free.
    type Reply = Option<String>;
    const SCRIPT: Script = Script::ForceRelease;

    fn args(&self) -> Vec<String> {
        vec![self.call_key.clone()]
    }

    fn parse(&self, reply: Value) -> Result<Option<String>> {
        match reply {
            Value::Nil => Ok(None),
            Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
            other => redis::from_redis_value(other.clone())
                .map(Some)
                .map_err(|_| unexpected(&other)),
        }
    }
}
