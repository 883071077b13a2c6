//! The shape every Redis-side operation shares, and the scripts behind them.

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{LockKeys, LockKind};

/// Which family of scripts runs a kind of lock: the mutex keeps its own
/// single-key engine (its hold is one string, the fastest path fairlock
/// has); an election's queue runs the same files assembled with the
/// election's definition of lib.lua's `ANNOUNCE` (its scripts say on its
/// channel who leads and who resigned, the mutex's pay nothing for it);
/// the semaphore and the reader-writer lock share the counted engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// `lua/mutex/`: one holder, re-entrant, in one string key.
    Mutex,
    /// `lua/counted/`: holds that each take some units of a capacity.
    Counted,
    /// `lua/mutex/` again, announcing on the election's channel each
    /// holder it grants the lock to and each release that frees it.
    Election,
}

impl Engine {
    /// The engine that runs a lock of `kind`.
    pub fn of(kind: LockKind) -> Engine {
        match kind {
            LockKind::Mutex => Engine::Mutex,
            LockKind::Election => Engine::Election,
            LockKind::Semaphore | LockKind::RwLock => Engine::Counted,
        }
    }
}

impl Engine {
    /// Its scripts' folder of OUT_DIR, as build.rs names it (and the
    /// family's part of its functions' names in the library).
    pub fn folder(self) -> &'static str {
        match self {
            Engine::Mutex => "mutex",
            Engine::Counted => "counted",
            Engine::Election => "election",
        }
    }
}

/// A Redis-side operation, whatever the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
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
    /// `revoke.lua`
    Revoke,
    /// `counted/upgrade.lua` (the counted engine's only: a reader-writer
    /// lock's).
    Upgrade,
    /// `counted/downgrade.lua` (the counted engine's only).
    Downgrade,
    /// `counted/set_permits.lua` (the counted engine's only: a
    /// semaphore's).
    SetPermits,
}

impl Op {
    /// Its file's name in each engine's folder, without `.lua`.
    pub fn file(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Renew => "renew",
            Op::Heartbeat => "heartbeat",
            Op::Cancel => "cancel",
            Op::Abandon => "abandon",
            Op::ForceRelease => "force_release",
            Op::Status => "status",
            Op::Revoke => "revoke",
            Op::Upgrade => "upgrade",
            Op::Downgrade => "downgrade",
            Op::SetPermits => "set_permits",
        }
    }
}

/// The Lua scripts, one per operation and engine: the operation's own file
/// preceded by only the helpers of `lua/lib.lua` it uses, picked by
/// `build.rs` (Redis reruns a script's every definition on each call) and
/// embedded here; the election's are the mutex's files with the election's
/// `ANNOUNCE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Script {
    /// The engine (its folder: the election's is the mutex's).
    pub engine: Engine,
    /// The operation's file in it.
    pub op: Op,
}

/// One engine's assembled scripts (the folder `build.rs` wrote them to
/// in OUT_DIR), in the order of [`Op`]'s variants.
macro_rules! family {
    ($folder:literal) => {
        [
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/acquire.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/release.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/renew.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/heartbeat.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/cancel.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/abandon.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/force_release.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/status.lua")),
            include_str!(concat!(env!("OUT_DIR"), "/", $folder, "/revoke.lua")),
        ]
    };
}

/// Every script's source, by engine then operation, in the order of
/// [`Engine`]'s and [`Op`]'s variants (the election's folder holds the
/// mutex's files assembled with the election's `ANNOUNCE`).
const SOURCES: [[&str; EVERY_ENGINE]; 3] =
    [family!("mutex"), family!("counted"), family!("election")];

/// How many operations every engine has: the first variants of [`Op`].
const EVERY_ENGINE: usize = 9;

/// The sources of the operations only the counted engine has, in the order
/// of their [`Op`] variants (after the ones every engine has).
const COUNTED_ONLY: [&str; 3] = [
    include_str!(concat!(env!("OUT_DIR"), "/counted/upgrade.lua")),
    include_str!(concat!(env!("OUT_DIR"), "/counted/downgrade.lua")),
    include_str!(concat!(env!("OUT_DIR"), "/counted/set_permits.lua")),
];

/// The first [`Op`] only the counted engine has.
const FIRST_COUNTED_ONLY: usize = Op::Upgrade as usize;

impl Script {
    /// Every script, e.g. to load them all at once: each engine's nine,
    /// then the counted engine's own (upgrade, downgrade, set_permits).
    pub const ALL: [Script; 3 * EVERY_ENGINE + COUNTED_ONLY.len()] = {
        const OPS: [Op; EVERY_ENGINE] = [
            Op::Acquire,
            Op::Release,
            Op::Renew,
            Op::Heartbeat,
            Op::Cancel,
            Op::Abandon,
            Op::ForceRelease,
            Op::Status,
            Op::Revoke,
        ];
        const ENGINES: [Engine; 3] = [Engine::Mutex, Engine::Counted, Engine::Election];
        let mut all = [Script {
            engine: Engine::Counted,
            op: Op::Upgrade,
        }; 3 * EVERY_ENGINE + COUNTED_ONLY.len()];
        all[3 * EVERY_ENGINE + 1].op = Op::Downgrade;
        all[3 * EVERY_ENGINE + 2].op = Op::SetPermits;
        let mut i = 0;
        while i < 3 * EVERY_ENGINE {
            all[i] = Script {
                engine: ENGINES[i / EVERY_ENGINE],
                op: OPS[i % EVERY_ENGINE],
            };
            i += 1;
        }
        all
    };

    /// Its place in [`Script::ALL`].
    pub fn index(self) -> usize {
        match self.op as usize {
            op if op >= FIRST_COUNTED_ONLY => 3 * EVERY_ENGINE + op - FIRST_COUNTED_ONLY,
            op => self.engine as usize * EVERY_ENGINE + op,
        }
    }

    /// The script of `op` for a lock of `kind`.
    pub fn of(kind: LockKind, op: Op) -> Script {
        Script {
            engine: Engine::of(kind),
            op,
        }
    }

    /// The script's whole source, the helpers it uses included.
    pub fn source(self) -> &'static str {
        match self.op as usize {
            op if op >= FIRST_COUNTED_ONLY => COUNTED_ONLY[op - FIRST_COUNTED_ONLY],
            op => SOURCES[self.engine as usize][op],
        }
    }
}

/// The two arguments every script takes first, the same for every call of
/// one client: `ARGV[1]` the wake channel prefix (a client's channel is it
/// followed by the client id), `ARGV[2]` how long a free lock's key (its
/// last fencing token) outlives the release that freed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonArgs {
    /// `<key prefix>:wake:`.
    pub wake_prefix: String,
    /// How long a free lock's key outlives its release.
    pub fence_life: std::time::Duration,
}

impl CommonArgs {
    /// `ARGV[1]` and `ARGV[2]`.
    pub fn args(&self) -> [String; 2] {
        [self.wake_prefix.clone(), ms(self.fence_life)]
    }
}

/// One Redis-side operation on one lock: which script it runs, with which
/// KEYS and ARGV (after the [`CommonArgs`] every script takes), and what its
/// reply means. The order of both lives here only.
pub trait Operation {
    /// The reply, parsed.
    type Reply;

    /// The operation, whose script follows from the lock's kind.
    const OP: Op;

    /// The script it runs on the lock `keys`.
    fn script(&self, keys: &LockKeys) -> Script {
        Script::of(keys.kind(), Self::OP)
    }

    /// KEYS: all the lock's keys unless the script needs fewer.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        &keys.all
    }

    /// ARGV after the common arguments, in the script's order.
    fn args(&self) -> Vec<String>;

    /// ARGV after the common arguments on a lock of `kind`: [`args`](Self::args)
    /// unless the kind's script takes fewer.
    fn args_on(&self, kind: LockKind) -> Vec<String> {
        let _ = kind;
        self.args()
    }

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
        Value::ServerError(err) => Err(Error::from_server(err)),
        other => Err(unexpected(&other)),
    }
}

/// A string in a script's reply.
pub fn text(value: &Value) -> Result<String> {
    redis::from_redis_value_ref(value).map_err(|_| unexpected(value))
}

/// An integer in a script's reply.
pub fn int(value: &Value) -> Result<i64> {
    redis::from_redis_value_ref(value).map_err(|_| unexpected(value))
}

/// A count, token or call id in a script's reply: a non-negative integer.
pub fn count(value: &Value) -> Result<u64> {
    u64::try_from(int(value)?).map_err(|_| unexpected(value))
}

/// A duration as whole milliseconds, for ARGV.
pub fn ms(duration: std::time::Duration) -> String {
    duration.as_millis().to_string()
}
