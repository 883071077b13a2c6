//! Running the protocol's operations on a connection: each script's SHA,
//! EVALSHA with one reload path when the server lost its script cache
//! (restart, failover, new node), and the pipelines that carry a `WAIT`
//! with a write.

use std::sync::LazyLock;

use redis::{ConnectionLike, Script as RedisScript, Value};

use crate::connections::resp::{self, Decimal};
use crate::error::Result;
use crate::protocol::{
    unexpected, Abandon, Call, CommonArgs, LockKeys, Operation, Script, SyncReplicas, Written,
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

/// The words of one EVALSHA, in the order the scripts read them.
struct EvalSha<'a> {
    sha: &'a str,
    key_count: Decimal,
    keys: &'a [String],
    /// ARGV[1], ARGV[2] (see [`CommonArgs`]).
    common: &'a [String],
    /// The operation's own ARGV.
    args: Vec<String>,
}

impl EvalSha<'_> {
    /// Its words, the command's name first.
    fn words(&self) -> impl Iterator<Item = &[u8]> + Clone {
        let head = [
            b"EVALSHA".as_slice(),
            self.sha.as_bytes(),
            self.key_count.as_bytes(),
        ];
        let tail = self.keys.iter().chain(self.common).chain(&self.args);
        head.into_iter().chain(tail.map(String::as_bytes))
    }
}

/// The scripts as one client runs them (by their hashes, [`HASHED`]), with
/// the two arguments every call of this client starts with.
pub(crate) struct Scripts {
    /// ARGV[1], ARGV[2] of every script (see [`CommonArgs`]).
    common: [String; 2],
    /// Told each time the scripts are loaded again (the client's metrics).
    reloaded: fn(),
}

impl Scripts {
    pub(crate) fn new(common: &CommonArgs, reloaded: fn()) -> Self {
        Scripts {
            common: common.args(),
            reloaded,
        }
    }

    /// Loads every script so that later calls hit the cache: in one round
    /// trip on one server; on a cluster connection one `SCRIPT LOAD` each,
    /// which the cluster client sends to every node.
    pub(crate) fn load_all(&self, conn: &mut dyn ConnectionLike) -> Result<()> {
        if !conn.supports_pipelining() {
            for kind in Script::ALL {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(kind.source())
                    .query::<()>(conn)
                    .map_err(crate::Error::from_redis)?;
            }
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for kind in Script::ALL {
            pipe.cmd("SCRIPT").arg("LOAD").arg(kind.source()).ignore();
        }
        pipe.query::<()>(conn).map_err(crate::Error::from_redis)?;
        Ok(())
    }

    /// The words of the EVALSHA of `op` on the lock `keys`.
    fn evalsha_words<'a, O: Operation>(&'a self, keys: &'a LockKeys, op: &O) -> EvalSha<'a> {
        let script = op.script(keys);
        let keys = op.keys(keys);
        EvalSha {
            sha: HASHED[script.index()].get_hash(),
            key_count: Decimal::of(keys.len() as u64),
            keys,
            common: &self.common,
            args: op.args(),
        }
    }

    /// The EVALSHA of `op` on the lock `keys`, after the common arguments
    /// (for a pipeline of several calls: the watchdog's).
    pub(crate) fn evalsha<O: Operation>(&self, keys: &LockKeys, op: &O) -> redis::Cmd {
        let evalsha = self.evalsha_words(keys, op);
        let mut words = evalsha.words();
        let mut cmd = redis::cmd("EVALSHA");
        words.next();
        for word in words {
            cmd.arg(word);
        }
        cmd
    }

    /// Runs `op` in one round trip (with a `WAIT` for `sync` replicas in
    /// the same pipeline, if asked) and returns its reply, and with `sync`
    /// whether enough replicas acknowledged it. The EVALSHA is packed
    /// straight into the bytes sent (see [`resp`]).
    pub(crate) fn run<O: Operation>(
        &self,
        conn: &mut dyn ConnectionLike,
        keys: &LockKeys,
        op: &O,
        sync: Option<SyncReplicas>,
    ) -> Result<Written<O::Reply>> {
        let mut packed = Vec::new();
        resp::write_command(&mut packed, self.evalsha_words(keys, op).words());
        if let Some(sync) = sync {
            sync.wait_command().write_packed_command(&mut packed);
        }
        let commands = 1 + usize::from(sync.is_some());
        let mut replies = self.query_packed(&packed, commands, conn)?.into_iter();
        let reply = match replies.next() {
            Some(Value::ServerError(err)) => return Err(crate::Error::from_server(err)),
            Some(reply) => op.parse(reply)?,
            None => return Err(unexpected(&"no reply")),
        };
        let shortfall = match (sync, replies.next()) {
            (None, _) => None,
            (Some(sync), Some(Value::Int(acknowledged))) => sync.shortfall(acknowledged),
            (Some(_), Some(Value::ServerError(err))) => return Err(crate::Error::from_server(err)),
            (Some(_), other) => return Err(unexpected(&other)),
        };
        Ok(Written::new(reply, shortfall))
    }

    /// Gives back `call` (idempotent: exactly that call's hold or queue
    /// entry, once).
    pub(crate) fn abandon(&self, conn: &mut dyn ConnectionLike, call: &Call) -> Result<()> {
        let entry = call.entry();
        self.run(conn, &call.keys, &Abandon { entry }, None)
            .map(drop)
    }

    /// Sends `pipe` and returns its replies, loading the scripts and sending
    /// it once more if the server lost them. A pipeline on a cluster
    /// connection goes to the node of its first command's slot: all of its
    /// commands must be for one slot.
    pub(crate) fn query(
        &self,
        pipe: &redis::Pipeline,
        conn: &mut dyn ConnectionLike,
    ) -> Result<Vec<Value>> {
        self.query_packed(&pipe.get_packed_pipeline(), pipe.len(), conn)
    }

    /// As [`query`](Self::query), for `commands` commands already packed.
    fn query_packed(
        &self,
        packed: &[u8],
        commands: usize,
        conn: &mut dyn ConnectionLike,
    ) -> Result<Vec<Value>> {
        let result = send_packed(packed, commands, conn);
        let lost_scripts = match &result {
            Ok(replies) => replies.iter().any(is_noscript),
            Err(err) => err.code() == Some("NOSCRIPT"),
        };
        if !lost_scripts {
            return result.map_err(crate::Error::from_redis);
        }
        log::info!("fairlock: the server lost its scripts (restart, failover, SCRIPT FLUSH); loading them again");
        (self.reloaded)();
        self.load_all(conn)?;
        send_packed(packed, commands, conn).map_err(crate::Error::from_redis)
    }
}

/// Sends `commands` packed commands as one write and reads all their
/// replies, errors included as values. Unlike `Pipeline::query` this also
/// works on a cluster connection, which sends them whole to the node of the
/// first command's slot (and turns an error reply into an `Err`, so that it
/// can follow a `MOVED` or retry through a failover).
fn send_packed(
    packed: &[u8],
    commands: usize,
    conn: &mut dyn ConnectionLike,
) -> redis::RedisResult<Vec<Value>> {
    conn.req_packed_commands(packed, 0, commands)
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(err) if err.code() == "NOSCRIPT")
}
