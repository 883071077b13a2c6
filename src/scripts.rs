//! The Lua scripts, one per Redis-side operation, and their typed replies.
//!
//! Each script is `lua/lib.lua` (shared helpers) followed by the operation's
//! own file, embedded at compile time and run by SHA with EVALSHA; a server
//! that lost its script cache (restart, failover) gets it loaded again on
//! the NOSCRIPT reply.

use redis::{ConnectionLike, Script, Value};

use crate::config::SyncReplicas;

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
    pub(crate) abandon: LuaScript,
    pub(crate) force_release: LuaScript,
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
            abandon: lock_script!("abandon.lua"),
            force_release: lock_script!("force_release.lua"),
            status: lock_script!("status.lua"),
        }
    }

    /// Loads every script so that later calls hit the cache: in one round
    /// trip on one server; on a cluster connection one `SCRIPT LOAD` each,
    /// which the cluster client sends to every node.
    pub(crate) fn load_all(&self, conn: &mut dyn ConnectionLike) -> Result<()> {
        let all = [
            &self.acquire,
            &self.release,
            &self.renew,
            &self.heartbeat,
            &self.cancel,
            &self.abandon,
            &self.force_release,
            &self.status,
        ];
        if !conn.supports_pipelining() {
            for script in all {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(script.source)
                    .query::<()>(conn)?;
            }
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for script in all {
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
    conn: &mut dyn ConnectionLike,
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

/// The `WAIT` that makes a write count only once `sync` replicas have it.
pub(crate) fn wait_for_replicas(sync: SyncReplicas) -> redis::Cmd {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(sync.replicas).arg(sync.timeout.as_millis() as u64);
    cmd
}

/// Sends `pipe` and returns its replies, loading the scripts and sending it
/// once more if the server lost them (restart, failover, new node).
/// A pipeline on a cluster connection goes to the node of its first
/// command's slot: all of its commands must be for one slot.
pub(crate) fn query_loading_scripts(
    scripts: &Scripts,
    pipe: &redis::Pipeline,
    conn: &mut dyn ConnectionLike,
) -> Result<Vec<Value>> {
    let result = send_pipeline(pipe, conn);
    let lost_scripts = match &result {
        Ok(replies) => replies.iter().any(is_noscript),
        Err(err) => err.code() == Some("NOSCRIPT"),
    };
    if !lost_scripts {
        return Ok(result?);
    }
    scripts.load_all(conn)?;
    Ok(send_pipeline(pipe, conn)?)
}

/// Sends a pipeline as one write and reads all its replies, errors
/// included as values. Unlike `Pipeline::query` this also works on a
/// cluster connection, which sends it whole to the node of the first
/// command's slot (and turns an error reply into an `Err`, so that it can
/// follow a `MOVED` or retry through a failover).
fn send_pipeline(
    pipe: &redis::Pipeline,
    conn: &mut dyn ConnectionLike,
) -> redis::RedisResult<Vec<Value>> {
    conn.req_packed_commands(&pipe.get_packed_pipeline(), 0, pipe.len())
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(err) if err.code() == "NOSCRIPT")
}

/// Runs `script` for one lock and a `WAIT` for `sync` replicas in one round
/// trip; returns the script's reply and how many replicas acknowledged it.
pub(crate) fn run_and_wait(
    scripts: &Scripts,
    script: &LuaScript,
    conn: &mut dyn ConnectionLike,
    keys: &LockKeys,
    wake_prefix: &str,
    args: &[&[u8]],
    sync: SyncReplicas,
) -> Result<(Value, i64)> {
    let mut all_args: Vec<&[u8]> = vec![wake_prefix.as_bytes()];
    all_args.extend_from_slice(args);
    let keys: Vec<&str> = keys.all.iter().map(String::as_str).collect();
    let mut pipe = redis::pipe();
    pipe.add_command(evalsha(script, &keys, &all_args));
    pipe.add_command(wait_for_replicas(sync));
    let replies = query_loading_scripts(scripts, &pipe, conn)?;
    match <[Value; 2]>::try_from(replies) {
        Ok([Value::ServerError(err), _]) => Err(redis::RedisError::from(err).into()),
        Ok([reply, Value::Int(acknowledged)]) => Ok((reply, acknowledged)),
        Ok([_, Value::ServerError(err)]) => Err(redis::RedisError::from(err).into()),
        Ok(other) => Err(unexpected(&other)),
        Err(other) => Err(unexpected(&other)),
    }
}

/// What an acquire (or cancel) attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// The caller holds the lock; `pttl_ms` is its lease left when answered.
    Acquired { token: u64, pttl_ms: i64 },
    /// Someone else holds it. `position` is the caller's place in the queue
    /// (0 = next), or `None` when it did not queue; `last_token` the last
    /// fencing token issued then (a grant to this call up to it is over).
    Waiting {
        pttl_ms: i64,
        position: Option<u64>,
        last_token: u64,
    },
}

impl AcquireReply {
    pub(crate) fn parse(value: Value) -> Result<Self> {
        let items = int_list(value)?;
        match items.as_slice() {
            [1, token, pttl, ..] => Ok(AcquireReply::Acquired {
                token: *token as u64,
                pttl_ms: *pttl,
            }),
            [0, pttl, position, last_token] => Ok(AcquireReply::Waiting {
                pttl_ms: *pttl,
                position: u64::try_from(*position).ok(),
                last_token: *last_token as u64,
            }),
            [0] => Ok(AcquireReply::Waiting {
                pttl_ms: -2,
                position: None,
                last_token: 0,
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

/// A heartbeat's answer about one lock.
pub(crate) struct Heartbeat {
    pub(crate) pttl_ms: i64,
    /// The last fencing token issued for the lock.
    pub(crate) last_token: u64,
    /// One status per waiter, in the order sent.
    pub(crate) statuses: Vec<WaiterStatus>,
}

/// Parses a heartbeat reply.
pub(crate) fn parse_heartbeat(value: Value) -> Result<Heartbeat> {
    let items = int_list(value)?;
    let [pttl_ms, last_token, rest @ ..] = items.as_slice() else {
        return Err(unexpected(&items));
    };
    let statuses = rest
        .chunks(2)
        .map(|pair| match pair {
            [0, position] => WaiterStatus::Queued(*position as u64),
            [1, token] => WaiterStatus::Owns(*token as u64),
            _ => WaiterStatus::Gone,
        })
        .collect();
    Ok(Heartbeat {
        pttl_ms: *pttl_ms,
        last_token: *last_token as u64,
        statuses,
    })
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
