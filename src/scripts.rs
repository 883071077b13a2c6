//! The Lua scripts, one per Redis-side operation, and their typed replies.
//!
//! Each script is `lua/lib.lua` (shared helpers) followed by the operation's
//! own file, embedded at compile time and run by SHA with EVALSHA; a server
//! that lost its script cache (restart, failover) gets it loaded again on
//! the NOSCRIPT reply.

use redis::{Connection, Script, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::keys::LockKeys;

/// One embedded script: its source and its SHA.
pub(crate) struct LuaScript {
    source: &'static str,
    script: Script,
}

impl LuaScript {
    fn new(source: &'static str) -> Self {
        LuaScript {
            source,
            script: Script::new(source),
        }
    }

    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }
}

macro_rules! lock_script {
    ($file:literal) => {
        LuaScript::new(concat!(
            include_str!("../lua/lib.lua"),
            include_str!(concat!("../lua/", $file))
        ))
    };
}

/// Every script of the crate, hashed once per client.
pub(crate) struct Scripts {
    pub(crate) acquire: LuaScript,
    pub(crate) release: LuaScript,
    pub(crate) renew: LuaScript,
    pub(crate) heartbeat: LuaScript,
    pub(crate) cancel: LuaScript,
    pub(crate) force_release: LuaScript,
    pub(crate) inspect: LuaScript,
    pub(crate) status: LuaScript,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: lock_script!("acquire.lua"),
            release: lock_script!("release.lua"),
            renew: lock_script!("renew.lua"),
            heartbeat: lock_script!("heartbeat.lua"),
            cancel: lock_script!("cancel.lua"),
            force_release: lock_script!("force_release.lua"),
            inspect: lock_script!("inspect.lua"),
            status: lock_script!("status.lua"),
        }
    }

    /// Loads every script in one round trip, so that later calls hit the cache.
    pub(crate) fn load_all(&self, conn: &mut Connection) -> Result<()> {
        let mut pipe = redis::pipe();
        for script in [
            &self.acquire,
            &self.release,
            &self.renew,
            &self.heartbeat,
            &self.cancel,
            &self.force_release,
            &self.inspect,
            &self.status,
        ] {
            pipe.cmd("SCRIPT").arg("LOAD").arg(script.source).ignore();
        }
        pipe.query::<()>(conn)?;
        Ok(())
    }
}

/// Builds the EVALSHA command of `script` for one lock, for use in a pipeline.
pub(crate) fn evalsha(script: &LuaScript, keys: &[&str], args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.hash()).arg(keys.len()).arg(keys).arg(args);
    cmd
}

/// Runs `script` by SHA on `conn` for one lock, loading it first if the
/// server lost it. Every lock script takes the wake channel prefix as
/// ARGV[1]; `args` follow it.
pub(crate) fn run(
    script: &LuaScript,
    conn: &mut Connection,
    keys: &LockKeys,
    wake_prefix: &str,
    args: &[&[u8]],
) -> Result<Value> {
    let mut invocation = script.script.prepare_invoke();
    for key in &keys.all {
        invocation.key(key.as_str());
    }
    invocation.arg(wake_prefix);
    for arg in args {
        invocation.arg(*arg);
    }
    Ok(invocation.invoke(conn)?)
}

/// What an acquire (or cancel) attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The caller holds the lock; `pttl_ms` is its lease left when answered.
    Acquired { token: u64, pttl_ms: i64 },
    /// Someone else holds it. `position` is the caller's place in the queue
    /// (0 = next), or `None` when it did not queue.
    Waiting { pttl_ms: i64, position: Option<u64> },
}

impl AcquireReply {
    pub(crate) fn parse(value: Value) -> Result<Self> {
        let items = int_list(value)?;
        match items.as_slice() {
            [1, token, pttl, ..] => Ok(AcquireReply::Acquired {
                token: *token as u64,
                pttl_ms: *pttl,
            }),
            [0, pttl, position] => Ok(AcquireReply::Waiting {
                pttl_ms: *pttl,
                position: u64::try_from(*position).ok(),
            }),
            [0] => Ok(AcquireReply::Waiting {
                pttl_ms: -2,
                position: None,
            }),
            _ => Err(unexpected(&items)),
        }
    }
}

/// A heartbeat's answer about one queued waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaiterStatus {
    /// Still queued at this position; its deadline was pushed out.
    Queued(u64),
    /// The lock was handed to it with this token.
    Owns(u64),
    /// It is neither queued nor holding: it lost its place.
    Gone,
}

/// Parses a heartbeat reply into the lock's pttl and one status per waiter.
pub(crate) fn parse_heartbeat(value: Value) -> Result<(i64, Vec<WaiterStatus>)> {
    let items = int_list(value)?;
    let (&pttl, rest) = items.split_first().ok_or_else(|| unexpected(&items))?;
    let statuses = rest
        .chunks(2)
        .map(|pair| match pair {
            [0, position] => WaiterStatus::Queued(*position as u64),
            [1, token] => WaiterStatus::Owns(*token as u64),
            _ => WaiterStatus::Gone,
        })
        .collect();
    Ok((pttl, statuses))
}

/// Parses a reply made only of integers.
pub(crate) fn int_list(value: Value) -> Result<Vec<i64>> {
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

pub(crate) fn unexpected(what: &dyn std::fmt::Debug) -> Error {
    Error::new(
        ErrorKind::Server,
        format!("unexpected reply from a fairlock script: {what:?}"),
    )
}
