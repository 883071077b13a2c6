//! Running the protocol's operations on a connection: as `FCALL`s of
//! fairlock's Functions library where the server took it (Redis 7.0 and
//! later, Valkey: [`library`](super::library)), as EVALSHAs of each
//! script's SHA where it did not (Redis 6.2, a user whose ACL refuses
//! `FCALL`, or `FUNCTION LOAD` on a server without the library: a
//! client's start calls the library first, [`Scripts::find_or_load`],
//! and loads it only where it is missing); one reload path
//! when the server lost its scripts or its library (restart, failover, new
//! node, a flush); and the pipelines that carry a `WAIT` with a write.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use redis::{ConnectionLike, Script as RedisScript, Value};

use crate::connections::library::LIBRARY;
use crate::connections::resp::{self, Decimal};
use crate::error::Result;
use crate::protocol::{
    unexpected, CommonArgs, LockKeys, Operation, Route, Script, SyncReplicas, Written,
};

/// Every script of the crate with its SHA-1, hashed once per process (the
/// sources are the same for every client: a client's start, which tests
/// and short-lived commands do often, hashes nothing), in the order of
/// [`Script::ALL`]: a call finds its script by index, not by hashing it.
static HASHED: LazyLock<Vec<RedisScript>> = LazyLock::new(|| {
    Script::ALL
        .iter()
        .map(|kind| RedisScript::new(kind.source()))
        .collect()
});

/// The words of one script call, in the order the scripts read them.
struct ScriptCall<'a> {
    /// `FCALL` or `EVALSHA`.
    command: &'static [u8],
    /// The function's name, or the script's SHA-1.
    script: &'a str,
    key_count: Decimal,
    keys: &'a [String],
    /// `ARGV[1]`, the wake prefix as the route has it for the lock's slot.
    wake: std::borrow::Cow<'a, str>,
    /// `ARGV[2]` (see [`CommonArgs`]).
    fence: &'a str,
    /// The operation's own ARGV.
    args: Vec<String>,
}

impl ScriptCall<'_> {
    /// Its words, the command's name first.
    fn words(&self) -> impl Iterator<Item = &[u8]> + Clone {
        let head = [
            self.command,
            self.script.as_bytes(),
            self.key_count.as_bytes(),
        ];
        let common = [self.wake.as_bytes(), self.fence.as_bytes()];
        let keys = self.keys.iter().map(String::as_bytes);
        let args = self.args.iter().map(String::as_bytes);
        head.into_iter().chain(keys).chain(common).chain(args)
    }
}

/// The scripts as one client runs them (by their function names in the
/// library, or by their hashes, [`HASHED`]), with the two arguments every
/// call of this client starts with.
pub(crate) struct Scripts {
    /// `ARGV[1]`, `ARGV[2]` of every script (see [`CommonArgs`]).
    common: [String; 2],
    /// Told each time the scripts are loaded again (the client's metrics).
    reloaded: fn(),
    /// Whether calls go as `FCALL` (the server took the library when the
    /// scripts were last loaded) or as EVALSHA.
    functions: AtomicBool,
    /// How the scripts' messages travel ([`Route`]): set once at the
    /// client's start to sharded pub/sub, else classic.
    route: OnceLock<Route>,
}

impl Scripts {
    pub(crate) fn new(common: &CommonArgs, reloaded: fn()) -> Self {
        Scripts {
            common: common.args(),
            reloaded,
            functions: AtomicBool::new(false),
            route: OnceLock::new(),
        }
    }

    /// How the scripts' messages travel for this client.
    pub(crate) fn route(&self) -> Route {
        self.route.get().copied().unwrap_or(Route::Classic)
    }

    /// Has the scripts' messages go by sharded pub/sub: on a cluster whose
    /// server took the Functions library at the client's start (Redis 7.0
    /// and later, Valkey: the versions with `SPUBLISH`).
    pub(crate) fn use_sharded(&self) {
        let _ = self.route.set(Route::Sharded);
    }

    /// Whether this client calls the library's functions (FCALL) rather
    /// than EVALSHA.
    pub(crate) fn calls_functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }

    /// At a client's start: finds the library on the server, or loads
    /// what this client calls where it is missing. Whether the server has
    /// it already is found by calling its function that does nothing
    /// (`loaded`) on `conn`, so that a client of a server that has it sends
    /// nothing more (the library is 180 KB, and loading it takes the server
    /// about 2 ms, a write): where it is missing it is loaded
    /// ([`load_all`](Self::load_all)); where this client cannot call it
    /// (no `FCALL` before Redis 7.0, or an ACL user without it) the calls
    /// go by EVALSHA, their scripts loaded ([`load_scripts`](Self::load_scripts)).
    /// Any other error is the call's: `conn` answered already
    /// (a server with no `FCALL`, as before Redis 7.0, says so: `unknown
    /// command`; a read-only replica refuses the function, which Redis
    /// counts as a write: `READONLY`, the URL names a replica). Refusals
    /// that come once Redis has found the function say it is there: a
    /// write refused for now (`MISCONF`, `NOREPLICAS`), and on a cluster
    /// `READONLY` (a keyless call goes to any node, a replica among them,
    /// which has its master's library).
    pub(crate) fn find_or_load(
        &self,
        conn: &mut dyn ConnectionLike,
        on_cluster: bool,
    ) -> Result<()> {
        let called = redis::cmd("FCALL")
            .arg(&LIBRARY.loaded)
            .arg(0)
            .query::<i64>(conn);
        let found_then_refused =
            |code: &str| crate::error::refused_for_now(code) || (on_cluster && code == "READONLY");
        match called {
            Err(err) if err.code().is_some_and(|code| lost(code, err.detail())) => {
                // Calls call the library again if refused for now.
                self.functions
                    .fetch_or(self.load_all(conn)?, Ordering::Relaxed);
            }
            Err(err) if err.code() == Some("NOPERM") || crate::error::is_unknown_command(&err) => {
                log::debug!("fairlock: FCALL refused ({err}); calling scripts by EVALSHA");
                self.load_scripts(conn)?;
            }
            Err(err) if !err.code().is_some_and(found_then_refused) => {
                return Err(crate::Error::from_redis(err));
            }
            // Found (or found, then refused for now): the calls call it.
            _ => self.functions.store(true, Ordering::Relaxed),
        }
        Ok(())
    }

    /// Loads the scripts so that later calls find them: the library with
    /// `FUNCTION LOAD REPLACE` (the same text under the same name replaces
    /// nothing; a cluster client sends it to every master), or, where the
    /// server refuses it (no Functions before Redis 7.0, or an ACL user
    /// without `FUNCTION LOAD`), every script with `SCRIPT LOAD`, in one
    /// round trip on one server, one command each on a cluster connection
    /// (which the cluster client sends to every node). True when it refused
    /// the library for now (`OOM`, `NOREPLICAS`, `MISCONF`): the caller's
    /// own call goes by EVALSHA, and the later ones call the library again
    /// (the caller sets `functions`), which loads it once the server takes
    /// it. A refusal for now leaves the other threads' calls
    /// as they were: a reload by one thread (the watchdog's) that straddles
    /// the moment the server takes writes again must not send theirs by
    /// EVALSHA meanwhile. A read-only replica's refusal is an error: no call
    /// could write there.
    fn load_all(&self, conn: &mut dyn ConnectionLike) -> Result<bool> {
        let loaded = redis::cmd("FUNCTION")
            .arg(&["LOAD", "REPLACE", &LIBRARY.source])
            .query::<String>(conn);
        let later = match loaded {
            Ok(_) => {
                self.functions.store(true, Ordering::Relaxed);
                return Ok(false);
            }
            // A reply from the server: it has no Functions, or this user
            // may not load them, or not now (over its maxmemory, too few
            // replicas, a failed snapshot). Anything else (the connection, a read-only
            // replica, where no call could write) is an error.
            Err(err) if err.code().is_some_and(|code| code != "READONLY") => {
                log::debug!("fairlock: FUNCTION LOAD refused ({err}); calling scripts by EVALSHA");
                let for_now = err.code().is_some_and(crate::error::refused_for_now);
                // Calls go by EVALSHA from now on, unless refused for now.
                self.functions.fetch_and(for_now, Ordering::Relaxed);
                for_now
            }
            Err(err) => return Err(crate::Error::from_redis(err)),
        };
        self.load_scripts(conn).map(|()| later)
    }

    /// Loads every script with `SCRIPT LOAD`, for calls by EVALSHA: in one
    /// round trip on one server, one command each on a cluster connection
    /// (which the cluster client sends to every node).
    fn load_scripts(&self, conn: &mut dyn ConnectionLike) -> Result<()> {
        let mut pipe = redis::pipe();
        for kind in Script::ALL {
            pipe.cmd("SCRIPT").arg("LOAD").arg(kind.source()).ignore();
        }
        if conn.supports_pipelining() {
            return pipe.query::<()>(conn).map_err(crate::Error::from_redis);
        }
        let loaded = pipe.cmd_iter().try_for_each(|load| load.query(conn));
        loaded.map_err(crate::Error::from_redis)
    }

    /// The words of the call of `op` on the lock `lock` (the keys `op`
    /// names of it): an `FCALL` if `by_fcall`, else an EVALSHA. An attempt
    /// calls as the client does ([`calls_functions`](Self::calls_functions))
    /// but the one sent again after a reload the server refused for now,
    /// which goes by EVALSHA.
    fn call_words<'a, O: Operation>(
        &'a self,
        lock: &'a LockKeys,
        op: &O,
        by_fcall: bool,
    ) -> ScriptCall<'a> {
        let (script, args) = (op.script(lock), op.args_on(lock.kind()));
        let keys = op.keys(lock);
        let (command, script): (&'static [u8], &str) = if by_fcall {
            (b"FCALL", LIBRARY.function(script))
        } else {
            (b"EVALSHA", HASHED[script.index()].get_hash())
        };
        ScriptCall {
            command,
            script,
            key_count: Decimal::of(keys.len() as u64),
            keys,
            wake: self.route().wake_prefix(&self.common[0], lock.slot),
            fence: &self.common[1],
            args,
        }
    }

    /// The call of `op` on the lock `keys` as a command (for a pipeline of
    /// several calls: the watchdog's), by `FCALL` if `by_fcall`, as the
    /// attempt that builds it calls the scripts ([`query`](Self::query)).
    pub(crate) fn command<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        by_fcall: bool,
    ) -> redis::Cmd {
        let mut cmd = redis::Cmd::new();
        for word in self.call_words(keys, op, by_fcall).words() {
            cmd.arg(word);
        }
        cmd
    }

    /// Runs `op` in one round trip (with a `WAIT` for `sync` replicas in
    /// the same pipeline, if asked) and returns its reply, and with `sync`
    /// whether enough replicas acknowledged it. The call is packed straight
    /// into the bytes sent (see [`resp`]).
    pub(crate) fn run<O: Operation>(
        &self,
        conn: &mut dyn ConnectionLike,
        keys: &LockKeys,
        op: &O,
        sync: Option<SyncReplicas>,
    ) -> Result<Written<O::Reply>> {
        let packed = |by_fcall| {
            let mut packed = Vec::new();
            resp::write_command(&mut packed, self.call_words(keys, op, by_fcall).words());
            if let Some(sync) = sync {
                sync.wait_command().write_packed_command(&mut packed);
            }
            packed
        };
        let commands = 1 + usize::from(sync.is_some());
        let wait = sync.map_or(Duration::ZERO, |sync| sync.timeout);
        let replies = super::steady::waiting(wait, || self.query_packed(packed, commands, conn));
        let mut replies = replies?.into_iter();
        let reply = match replies.next() {
            Some(Value::ServerError(err)) => return Err(crate::Error::from_server(err)),
            Some(reply) => op.parse(reply)?,
            None => return Err(unexpected(&"no reply")),
        };
        let shortfall = sync.map(|sync| sync.shortfall(replies.next()));
        Ok(Written::new(reply, shortfall.transpose()?.flatten()))
    }

    /// Sends the pipeline `pipe` builds (by `FCALL` if told so) and returns its replies; if the
    /// server lost the scripts or the library, loads them again and sends
    /// it once more, built again (the reload may have changed how scripts
    /// are called: a server failed over to may refuse Functions; one that
    /// refuses the library for now takes this attempt by EVALSHA). A
    /// pipeline on a cluster connection goes to the node of its first
    /// command's slot: all of its commands must be for one slot.
    pub(crate) fn query(
        &self,
        pipe: impl Fn(bool) -> redis::Pipeline,
        conn: &mut dyn ConnectionLike,
    ) -> Result<Vec<Value>> {
        let commands = pipe(self.calls_functions()).len();
        self.query_packed(
            |by_fcall| pipe(by_fcall).get_packed_pipeline(),
            commands,
            conn,
        )
    }

    /// As [`query`](Self::query), for `commands` commands that `packed`
    /// packs (again after a reload).
    fn query_packed(
        &self,
        packed: impl Fn(bool) -> Vec<u8>,
        commands: usize,
        conn: &mut dyn ConnectionLike,
    ) -> Result<Vec<Value>> {
        // One write, all the replies read, errors included as values. Unlike
        // `Pipeline::query` this also works on a cluster connection, which
        // sends them whole to the node of the first command's slot (and turns
        // an error reply into an `Err`, so that it can follow a `MOVED` or
        // retry through a failover).
        let result = conn.req_packed_commands(&packed(self.calls_functions()), 0, commands);
        let lost_scripts = match &result {
            Ok(replies) => replies.iter().any(
                |reply| matches!(reply, Value::ServerError(err) if lost(err.code(), err.details())),
            ),
            Err(err) => lost(err.code().unwrap_or(""), err.detail()),
        };
        if !lost_scripts {
            return result.map_err(crate::Error::from_redis);
        }
        log::info!("fairlock: the server lost its scripts (restart, failover, SCRIPT or FUNCTION FLUSH); loading them again");
        (self.reloaded)();
        // A client that calls by EVALSHA stays there: its user may be
        // refused FCALL though not FUNCTION LOAD.
        let later = match self.calls_functions() {
            true => self.load_all(conn)?,
            false => self.load_scripts(conn).map(|()| false)?,
        };
        let by_fcall = !later && self.calls_functions();
        let sent = conn.req_packed_commands(&packed(by_fcall), 0, commands);
        self.functions.fetch_or(later, Ordering::Relaxed);
        sent.map_err(crate::Error::from_redis)
    }
}

/// Whether an error reply says the server does not have the script
/// (`NOSCRIPT`) or the library's function (`ERR Function not found`).
fn lost(code: &str, details: Option<&str>) -> bool {
    code == "NOSCRIPT"
        || (code == "ERR" && details.is_some_and(|d| d.starts_with("Function not found")))
}
