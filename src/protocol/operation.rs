//! The shape every Redis-side operation shares, and the scripts behind them.

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::LockKeys;

/// The Lua scripts, one per operation: `lua/lib.lua` (the shared steps)
/// followed by the operation's own file, embedded at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// `acquire.lua`
    Acquire,
    /// `release.lua`
    Release,
    /// `renew.lua`
    Renew,
    /// `heartbeat.lua`
    Heartbeat,
    /// `cancel.lua`
    Cancel,
    /// `abandon.lua`
    Abandon,
    /// `force_release.lua`
    ForceRelease,
    /// `status.lua`
    Status,
}

macro_rules! with_lib {
    ($file:literal) => {
        concat!(
            include_str!("../../lua/lib.lua"),
            include_str!(concat!("../../lua/", $file))
        )
    };
}

impl Script {
    /// Every script, e.g. to load them all at once.
    pub const ALL: [Script; 8] = [
        Script::Acquire,
        Script::Release,
        Script::Renew,
        Script::Heartbeat,
        Script::Cancel,
        Script::Abandon,
        Script::ForceRelease,
        Script::Status,
    ];

    /// The script's whole source, shared steps included.
    pub fn source(self) -> &'static str {
        match self {
            Script::Acquire => with_lib!("acquire.lua"),
            Script::Release => with_lib!("release.lua"),
            Script::Renew => with_lib!("renew.lua"),
            Script::Heartbeat => with_lib!("heartbeat.lua"),
            Script::Cancel => with_lib!("cancel.lua"),
            Script::Abandon => with_lib!("abandon.lua"),
            Script::ForceRelease => with_lib!("force_release.lua"),
            Script::Status => with_lib!("status.lua"),
        }
    }
}

/// One Redis-side operation on one lock: which script it runs, with which
/// KEYS and ARGV (after ARGV[1], the wake channel prefix every script
/// takes), and what its reply means. The order of both lives here only.
pub trait Operation {
    /// The reply, parsed.
    type Reply;

    /// The script it runs.
    const SCRIPT: Script;

    /// KEYS: all five keys of the lock unless the script needs fewer.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        &keys.all
    }

    /// ARGV after the wake channel prefix, in the script's order.
    fn args(&self) -> Vec<String>;

    /// The script's reply, typed.
    fn parse(&self, reply: Value) -> Result<Self::Reply>;
}

/// A reply no fairlock script gives.
pub fn unexpected(what: &dyn std::fmt::Debug) -> Error {
    Error::new(
        ErrorKind::Server,
        format!("unexpected reply from a fairlock script: {what:?}"),
    )
}

/// A reply made only of integers (an error reply is the error).
pub fn int_list(value: Value) -> Result<Vec<i64>> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Int(n) => Ok(n),
                other => Err(unexpected(&other)),
            })
            .collect(),
        Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
        other => Err(unexpected(&other)),
    }
}

/// A duration as whole milliseconds, for ARGV.
pub fn ms(duration: std::time::Duration) -> String {
    duration.as_millis().to_string()
}
