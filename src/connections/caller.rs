//! The one call path every operation takes to Redis: a pooled connection,
//! retried on a connection the server closed, on a stale cluster slot map
//! and while a slot moves or the cluster is down, within a call's deadline
//! if it has one.

use std::time::{Duration, Instant};

use crate::connections::config::Config;
use crate::connections::scripts::Scripts;
use crate::connections::steady;
use crate::connections::Backend;
use crate::error::{Error, Result, Retry};
use crate::protocol::{Abandon, Call, LockKeys, Operation, SyncReplicas, Written};

/// Pause between calls on a cluster slot that is being moved, or on a
/// cluster that is down.
const SLOT_MOVE_RETRY_WAIT: Duration = Duration::from_millis(50);

/// How long one call may take, for a call with a deadline: its wait for
/// a pooled connection and its command timeout, each capped by the time
/// left. The default has no limit but the client's timeouts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Limit {
    checkout_by: Option<Instant>,
    reply_by: Option<Instant>,
}

/// How long past a call's deadline its reply is still waited for: a
/// request the server answers in time is not thrown away (and its
/// connection with it) for a few ms of scheduling on a busy machine.
const REPLY_GRACE: Duration = Duration::from_millis(50);

impl Limit {
    /// The pool wait by `deadline`, if any, and the reply by then plus
    /// [`REPLY_GRACE`] (a waiting call's request).
    pub(crate) fn by(deadline: Option<Instant>) -> Limit {
        Limit {
            checkout_by: deadline,
            reply_by: deadline.map(|at| at + REPLY_GRACE),
        }
    }

    /// The pool wait and the reply both by `at` (a waiting call leaving
    /// the queue once its deadline passed: what is not done by then is
    /// abandoned later, so the call returns on time however slow or
    /// stalled the server is).
    pub(crate) fn within(at: Instant) -> Limit {
        Limit {
            checkout_by: Some(at),
            reply_by: Some(at),
        }
    }
}

/// A client's settings, connections and scripts, and the call path over
/// them.
pub(crate) struct Caller {
    pub(crate) config: Config,
    pub(crate) backend: Backend,
    pub(crate) scripts: Scripts,
    /// Told of each call sent again on another pooled connection (for the
    /// machinery's metrics).
    pub(crate) reconnected: fn(),
    /// The process that built the client (`std::process::id`): a child
    /// forked since has a copy of it, whose connections are its parent's
    /// sockets ([`Caller::is_copy`]).
    pub(crate) pid: u32,
}

impl Caller {
    /// Whether this is a forked child's copy of its parent's client: its
    /// pooled connections are the parent's sockets (a request sent on one
    /// would mix with the parent's), its threads are not in this process,
    /// its holds are the parent's.
    pub(crate) fn is_copy(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Refuses a forked child's copy ([`is_copy`](Self::is_copy)) any
    /// use of its connections, pooled or its own (an election watch's).
    pub(crate) fn refuse_copy(&self) -> Result<()> {
        if self.is_copy() {
            return Err(Error::invalid_config(format!(
                "this client was built by process {}, and this is a child it forked: its \
                 connections are the parent's; build a client of the child's own",
                self.pid
            )));
        }
        Ok(())
    }

    /// Runs `call` on a pooled connection. A connection the server closed
    /// while it sat in the pool (restart, failover), or one to a master
    /// demoted since (`READONLY`), fails at once and leaves the pool (see
    /// [`Pooled::note`](crate::connections::pool::Pooled::note)); the call then goes out again on another one, at
    /// most once per pooled connection plus one.
    /// On a cluster, a call that could not reach a node (not one that timed
    /// out) goes out once more on a connection with a fresh slot map (see
    /// [`Pooled::note`](crate::connections::pool::Pooled::note)), so the
    /// first call after a failover finds the promoted replica.
    /// While its lock's cluster slot is being moved between masters, the
    /// call goes out again, for up to `command_timeout`: the script did not
    /// run, and a move usually ends within the cluster client's own
    /// retries (about 0.3-4 s of waits). The watchdog does not wait here:
    /// it renews again next period, and must not hold back other slots.
    /// The scripts make a call delivered twice count once (call ids).
    /// With a [`Limit`], each pool wait and command timeout is capped by
    /// the time left.
    fn with_connection<T>(
        &self,
        limit: Limit,
        mut call: impl FnMut(&mut dyn redis::ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        self.refuse_copy()?;
        let left = |at: Instant| at.saturating_duration_since(Instant::now());
        let began = Instant::now();
        let give_up = began + self.config.command_timeout;
        let give_up = limit.reply_by.map_or(give_up, |at| at.min(give_up));
        // Counted afresh after each wait for a slot move, as for a new call.
        let retries = || (self.config.pool_size + 1, true);
        let (mut stale_retries, mut fresh_map_retry) = retries();
        loop {
            let mut conn =
                (self.backend).checkout(limit.checkout_by.map_or(Duration::MAX, left))?;
            // Had only once the call's time was up, which it was not when
            // the call began (a checkout woken late on a busy machine): a
            // request sent now has no time for its reply, and its timeout
            // would say nothing of Redis. Nothing is sent, as when the pool
            // wait runs out. (A call given no time at all, a release's last
            // try, still goes out with 1 ms.)
            if (limit.reply_by).is_some_and(|at| at > began && Instant::now() >= at) {
                return Err(Error::connection_too_late());
            }
            let timeout = self.config.command_timeout;
            let capped = (limit.reply_by.map(left)).filter(|left| *left < timeout);
            if let Some(left) = capped {
                conn.set_command_timeout(left.max(Duration::from_millis(1)))?;
            }
            let result = call(conn.get());
            let stale = conn.note(&result, capped.is_some());
            if capped.is_some() && !stale {
                // Back to the pool with the client's own timeout (a
                // connection that timed out is closed, and the pool drops it).
                let _ = conn.set_command_timeout(timeout);
            }
            drop(conn);
            match result {
                Err(err) if stale_retries > 0 && stale => {
                    stale_retries -= 1;
                    log::debug!("fairlock: retrying on another connection: {err}");
                    (self.reconnected)();
                }
                // (Not after a timeout: the node stalled, and no map is made stale.)
                Err(err)
                    if fresh_map_retry
                        && err.retry() != Retry::No
                        && !err.is_timeout()
                        && !err.is_not_serving()
                        && self.backend.is_cluster() =>
                {
                    fresh_map_retry = false;
                    log::debug!("fairlock: retrying with a fresh cluster slot map: {err}");
                }
                // Off a cluster, a `MOVED` is a URL that names a cluster node.
                Err(err) if err.is_slot_moving() && !self.backend.is_cluster() => {
                    let said = std::error::Error::source(&err).map(ToString::to_string);
                    return Err(Error::invalid_config(format!(
                        "the URL names a Redis Cluster node ({}): use a redis+cluster:// URL",
                        said.unwrap_or_else(|| err.to_string())
                    )));
                }
                // A slot being moved, or a cluster down until a failover:
                // asked again within the call's time, not the cluster
                // client's (100 ms to 1 s apart whatever that time).
                Err(err)
                    if (err.is_slot_moving() || err.is_cluster_down())
                        && Instant::now() < give_up =>
                {
                    log::debug!("fairlock: retrying: {err}");
                    std::thread::sleep(SLOT_MOVE_RETRY_WAIT.min(left(give_up)));
                    // No time left to ask again: what Redis said is the
                    // answer (nothing ran), not an unsent request's timeout.
                    if Instant::now() >= give_up {
                        return Err(err);
                    }
                    (stale_retries, fresh_map_retry) = retries();
                }
                other => return other,
            }
        }
    }

    /// Runs `op` on the lock `keys` on a pooled connection, one round
    /// trip, within `limit` (an election watch's read, kept to the watch's
    /// timeout; an abandon, to a wait's deadline).
    pub(crate) fn call_limited<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        limit: Limit,
    ) -> Result<O::Reply> {
        self.call_with(keys, op, None, limit)?.replicated()
    }

    /// Runs a writing `op`, still in one round trip: with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas) set, a `WAIT` rides
    /// in the same pipeline and a shortfall ([`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated))
    /// comes back with the reply. Within `limit` (a waiting call's request
    /// kept to its deadline; a guard's drop, which never holds its thread
    /// longer than one command timeout, pool waits included, and on any
    /// error hands the call to the watchdog; the default: the client's
    /// timeouts).
    pub(crate) fn call_write<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        limit: Limit,
    ) -> Result<Written<O::Reply>> {
        self.call_with(keys, op, self.config.sync_replicas, limit)
    }

    fn call_with<O: Operation>(
        &self,
        keys: &LockKeys,
        op: &O,
        sync: Option<SyncReplicas>,
        limit: Limit,
    ) -> Result<Written<O::Reply>> {
        let named = |err| during::<O>(err, keys);
        // On a cluster, the client's own retries of a request that timed
        // out keep to the deadline, and go not past a command timeout (and
        // the `WAIT`'s) without one.
        let cap = self.config.command_timeout + sync.map_or(Duration::ZERO, |sync| sync.timeout);
        let by =
            || (limit.reply_by).or_else(|| self.backend.is_cluster().then(|| Instant::now() + cap));
        let written = self.with_connection(limit, |conn| {
            steady::replied_by(by(), || self.scripts.run(conn, keys, op, sync))
        });
        written.map(|written| written.named(named)).map_err(named)
    }

    /// Abandons `call` (`Abandon`) on a pooled connection, within `limit`;
    /// an error names the lock, as every call's does.
    pub(crate) fn abandon(&self, call: &Call, limit: Limit) -> Result<()> {
        let entry = call.entry();
        self.call_limited(&call.keys, &Abandon { entry }, limit)
            .map(drop)
    }
}

/// `err` naming the operation `O` on the lock `keys` it came from: `release
/// of mutex "jobs": ...` (`resignation from election "leader": ...`:
/// [`LockKind::call`](crate::LockKind)), the name quoted as every message
/// quotes one.
pub(crate) fn during<O: Operation>(err: Error, keys: &LockKeys) -> Error {
    let op = keys.kind().call(&O::OP.file().replace('_', " "));
    err.during(format_args!("{op} {:?}", keys.name()))
}
