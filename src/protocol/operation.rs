//! The shape every Redis-side operation shares, and the scripts behind them.

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{LockKeys, LockKind};

/// Which family of scripts runs a kind of lock: the mutex keeps its own
/// single-key engine (its hold is one string, the fastest path fairlock
/// has); an election's queue runs the same files assembled with the
/// election's definition of lua/lib/mutex.lua's `ANNOUNCE` (its scripts say on its
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

    /// Its scripts' folder of OUT_DIR, as build.rs names it (and the
    /// family's part of its functions' names in the library).
    pub fn folder(self) -> &'static str {
        FOLDERS[self as usize]
    }
}

/// The Lua scripts, one per operation and engine: the operation's own file
/// preceded by only the helpers of `lua/lib/` it uses, picked by
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

// `Op`, its files' names, the engines' folders, `Script::ALL` and the
// scripts' sources, which build.rs derives from the files of lua/ (and its
// `FAMILIES`): every engine's operations (the first `EVERY` of `Op`) for
// each engine of `FOLDERS`, in `Engine`'s order, then the counted engine's own. Generated, and checked
// in beside this file (the test below keeps it current).
include!("operations.rs");

impl Op {
    /// Its file's name in each engine's folder, without `.lua`.
    pub fn file(self) -> &'static str {
        FILES[self as usize]
    }
}

impl Script {
    /// The script of `op` for a lock of `kind`.
    pub fn of(kind: LockKind, op: Op) -> Script {
        let engine = Engine::of(kind);
        Script { engine, op }
    }

    /// Its place in [`Script::ALL`]: an operation only the counted engine
    /// has is its script whatever the engine asked.
    pub fn index(self) -> usize {
        match self.op as usize {
            op if op < EVERY => self.engine as usize * EVERY + op,
            op => FOLDERS.len() * EVERY + (op - EVERY),
        }
    }

    /// The script's whole source, the helpers it uses included.
    pub fn source(self) -> &'static str {
        SOURCES[self.index()]
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

    /// The one kind of lock the operation is for (one of the counted
    /// engine's own), checked in debug builds; `None`: every kind.
    const ONLY_ON: Option<LockKind> = None;

    /// The script it runs on the lock `keys`.
    fn script(&self, keys: &LockKeys) -> Script {
        Script::of(keys.kind(), Self::OP)
    }

    /// KEYS: the lock's keys every script takes unless the script needs
    /// fewer (or more: the force release).
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert!(Self::ONLY_ON.is_none_or(|only| only == keys.kind()));
        keys.common()
    }

    /// ARGV after the common arguments, in the script's order.
    fn args(&self) -> Vec<String>;

    /// ARGV after the common arguments on a lock of `kind`: [`args`](Self::args)
    /// unless the kind's script takes fewer.
    fn args_on(&self, _kind: LockKind) -> Vec<String> {
        self.args()
    }

    /// The script's reply, typed.
    fn parse(&self, reply: Value) -> Result<Self::Reply>;
}

/// A reply no fairlock script gives.
pub fn unexpected(what: &dyn std::fmt::Debug) -> Error {
    let message = format!("unexpected reply from a fairlock script: {what:?}");
    Error::new(ErrorKind::Server, message)
}

/// A reply no fairlock script gives, or the error an error reply is.
pub(crate) fn refused(reply: Value) -> Error {
    match reply {
        Value::ServerError(err) => Error::from_server(err),
        other => unexpected(&other),
    }
}

/// A reply that is a list whose length `fits` (an error reply is the
/// error).
pub(crate) fn list(reply: Value, fits: impl Fn(usize) -> bool) -> Result<Vec<Value>> {
    match reply {
        Value::Array(items) if fits(items.len()) => Ok(items),
        other => Err(refused(other)),
    }
}

/// A reply that is one of a script's codes, 0 to N - 1, read as `meanings`
/// names them in order (an error reply is the error).
pub(crate) fn coded<T: Copy, const N: usize>(reply: Value, meanings: [T; N]) -> Result<T> {
    match reply {
        Value::Int(code) if (0..N as i64).contains(&code) => Ok(meanings[code as usize]),
        other => Err(refused(other)),
    }
}

/// A reply made only of integers (an error reply is the error): a list,
/// or one string of them separated by spaces ([`words`]). A fencing token
/// may come as the digits a script read from the lock: a Lua string costs
/// the server less to reply with than a Lua number made of it.
pub fn int_list(value: Value) -> Result<Vec<i64>> {
    list(words(value), |_| true)?.iter().map(int).collect()
}

/// A reply a script made one string of space-separated words, as the list
/// of those words; any other reply as it is. A string of four short words
/// costs the server about half of what a list of four does (Redis checks
/// a Lua table reply for its special fields before it reads its items),
/// so the replies of a handoff's two calls are strings.
pub fn words(value: Value) -> Value {
    match value {
        Value::BulkString(bytes) => Value::Array(
            bytes
                .split(|&b| b == b' ')
                .map(|word| Value::BulkString(word.to_vec()))
                .collect(),
        ),
        other => other,
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

#[cfg(test)]
mod tests {
    /// What build.rs generates from the files of lua/ this build.
    const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/operations.rs"));

    #[test]
    fn the_checked_in_script_table_is_the_one_build_rs_generates() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/protocol/operations.rs");
        if std::env::var_os("FAIRLOCK_BLESS").is_some() {
            std::fs::write(path, GENERATED).expect("writing src/protocol/operations.rs");
        }
        assert!(
            include_str!("operations.rs") == GENERATED,
            "src/protocol/operations.rs is not what build.rs generates from lua/ now: \
             FAIRLOCK_BLESS=1 cargo test --lib script_table writes it anew"
        );
    }
}
