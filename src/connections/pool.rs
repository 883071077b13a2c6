//! A deployment's r2d2 pool of connections, with what its last attempt to
//! open one came to: a checkout that runs out of time tells a server that
//! cannot be had (an attempt failed, and none has succeeded since) from a
//! pool that was busy or only slow to open one (no attempt failed), which
//! at a call's deadline is the deadline's doing, not an outage
//! (docs/failures.md).
//!
//! Whatever the deployment, a pooled connection is a [`Pooled`], which a
//! failed call may leave stale so that the pool lets it go: one that met a
//! demoted master; behind Sentinel, every one opened before a call timed
//! out (only its own when the call's deadline cut its wait short) or they
//! named another master; on a cluster, every one opened before a node was
//! found unreachable (not one that only stalled) or a slot map named
//! another master.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::ConnectionLike;

use crate::connections::config::Config;
use crate::error::{Error, Result, Retry};

use super::{Backend, Deployment, Listen, OwnConn, Timeouts};

/// A pooled connection of any deployment; back to the pool on drop.
pub(crate) type Conn = r2d2::PooledConnection<Manager>;

impl Backend {
    /// The connections of `deployment`, opened as `config` says: a pool,
    /// none of its connections yet (the first checkouts open them), and
    /// its manager for the connections opened outside it.
    pub(super) fn pooled(config: &Config, deployment: Deployment) -> Backend {
        // Behind Sentinel, also moved on whenever they name another master.
        let generation = match &deployment {
            Deployment::Sentinel(sentinels) => Arc::clone(&sentinels.generation),
            _ => Arc::default(),
        };
        let manager = Manager {
            deployment: Arc::new(deployment),
            timeouts: Timeouts {
                connect: config.connect_timeout,
                command: config.command_timeout,
            },
            generation,
            stalled: Arc::default(),
            open_failed: Arc::default(),
        };
        let maintenance = scheduled_thread_pool::ScheduledThreadPool::builder()
            .num_threads(1)
            .thread_name_pattern("fairlock-pool")
            // Exit with the pool instead of lingering until the next reaper run.
            .on_drop_behavior(scheduled_thread_pool::OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        let pool = r2d2::Pool::builder()
            .max_size(config.pool_size)
            .min_idle(config.min_idle)
            .max_lifetime(config.max_lifetime)
            .idle_timeout(config.idle_timeout)
            // A PING per checkout would double the round trips of every call;
            // broken connections are caught by has_broken and by the error path.
            .test_on_check_out(false)
            // Every checkout passes its own timeout; r2d2 reads this one only
            // as twice its longest pause between connect attempts to a server
            // that refused one (200 ms doubling up to 2.5 s with the default
            // connect timeout, the lag after an outage): a pool with no live
            // connection tries again every 100 ms, so a call waiting for one
            // gets it within 100 ms of the server's return.
            .connection_timeout(Duration::from_millis(200))
            // Nothing logged for each failed attempt (a call that needed one
            // reports the cause); whether the last one failed is kept
            // (`Manager::open_failed`).
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .thread_pool(Arc::new(maintenance))
            .build_unchecked(manager.clone());
        Backend {
            pool,
            manager,
            map_reader: Default::default(),
        }
    }

    /// A pooled connection within `timeout` or the connect timeout,
    /// whichever is shorter, or the pool's error. Stale idle connections
    /// go back (and are dropped) until a current one turns up, each wait
    /// for one within what is left of that time (a stale one handed over
    /// after a wait does not start the count again); a new one reads a
    /// cluster's slot map afresh.
    pub(crate) fn checkout(&self, timeout: Duration) -> Result<Conn> {
        let end = Instant::now() + timeout.min(self.manager.timeouts.connect);
        let left = || end.saturating_duration_since(Instant::now());
        for _ in 0..self.pool.max_size() {
            let conn = self.get(left())?;
            if !conn.is_stale() {
                return Ok(conn);
            }
        }
        self.get(left())
    }

    /// Makes every connection opened so far stale (a slot map that names
    /// another master than before: one that stalled was failed over).
    pub(crate) fn renew_all(&self) {
        self.manager.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a cluster call timed out since last asked: the slot map is
    /// to be read again, in case a stalled master was failed over.
    pub(crate) fn stalled(&self) -> bool {
        self.manager.stalled.swap(false, Ordering::Relaxed)
    }

    fn get(&self, timeout: Duration) -> Result<Conn> {
        self.pool.get_timeout(timeout).map_err(|err| {
            // Busy: every connection the pool may open is open and in use,
            // or none of its attempts to open one failed (it was still
            // opening one: a loaded machine, a slow handshake, not an
            // outage).
            let failed = self.manager.open_failed.lock().clone();
            match failed {
                // What the server said (credentials refused), unless it
                // only could not be reached.
                Some(cause) if !cause.is_connection() => {
                    cause.during(format_args!("opening a redis connection"))
                }
                _ => {
                    let busy = self.pool.state().connections == self.pool.max_size();
                    Error::from_pool(err, busy || failed.is_none())
                }
            }
        })
    }
}

/// Opens a deployment's pooled connections: to the server (behind
/// Sentinel, the master of the moment), or cluster connections, each with
/// the slot map of its opening.
#[derive(Clone)]
pub(crate) struct Manager {
    pub(super) deployment: Arc<Deployment>,
    pub(super) timeouts: Timeouts,
    /// Connections opened before this generation are stale (see
    /// [`Pooled::note`]): on a cluster, after a node could not be reached;
    /// behind Sentinel, after a master did not answer in time, or once they
    /// name another master.
    generation: Arc<AtomicU64>,
    /// Set when a cluster call timed out, for the watchdog to read the
    /// slot map again ([`Backend::stalled`]).
    stalled: Arc<AtomicBool>,
    /// The error of the pool's last attempt to open a connection, if it
    /// failed (set when one fails, cleared when one succeeds).
    open_failed: Arc<Mutex<Option<Error>>>,
}

impl Manager {
    /// A new connection outside the pool, with the command timeouts set:
    /// to the server, to the master the Sentinels name now, or to the
    /// cluster (with its own slot map).
    pub(super) fn open(&self) -> Result<OwnConn> {
        Ok(match &*self.deployment {
            Deployment::Cluster(cluster) => {
                let conn = cluster.client().get_generic_connection();
                Box::new(conn.map_err(Error::from_redis)?)
            }
            server => Box::new(server.connect(&Listen::Main, self.timeouts)?),
        })
    }
}

/// A pooled connection, its manager, the generation it was opened in, and
/// whether it is stale of itself (it met a demoted master, or timed out
/// behind Sentinel within a call's deadline).
pub(crate) struct Pooled {
    link: OwnConn,
    manager: Manager,
    born: u64,
    stale: bool,
}

impl Pooled {
    pub(crate) fn get(&mut self) -> &mut dyn ConnectionLike {
        &mut *self.link
    }

    /// Sets how long this connection waits to send a command and for its
    /// reply: a guard's Drop caps it at what is left of its budget, then
    /// puts back the command timeout before the connection goes back to the
    /// pool.
    pub(crate) fn set_command_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.link.set_timeouts(timeout).map_err(Error::from_redis)
    }

    /// Looks at the outcome of a call. A connection that met a demoted
    /// master (`READONLY`) is marked so the pool drops it instead of
    /// handing it out again, whatever the deployment: behind Sentinel, and
    /// behind one address that a failover moved (a managed Redis's DNS
    /// name), where the old master, now a replica, closes nothing. Behind
    /// Sentinel a call that got no reply within the command timeout makes
    /// every connection opened so far stale: the master may have stopped
    /// answering and been failed over, and nothing else would ever close a
    /// connection to it (a stopped master sends no `READONLY`), so the next
    /// ones ask the Sentinels again. One whose wait its deadline `cut`
    /// short may have met a master only busy for a moment: only its own
    /// connection goes (the next one opened asks the Sentinels). A cluster
    /// call that could not reach a node makes every cluster connection
    /// opened so far stale: their slot maps may point at a dead master, and
    /// the `redis` crate refreshes a map only on a redirection, which a dead
    /// node never sends (a slot being moved is no sign of a stale map). One
    /// that timed out makes none stale: a new one would wait for the
    /// stalled node too (the `redis` crate pings every node as it opens
    /// one), longer than a call waits for one, so the
    /// calls on the other masters would fail; the watchdog reads the slot
    /// map again instead, and one that names another master makes them all
    /// stale ([`Backend::renew_all`]).
    ///
    /// True when the call failed because of this connection and may go out
    /// again on another: the server closed it (restart, failover), or it
    /// reaches a master demoted since (the script stopped at its first
    /// write; a new connection finds the successor).
    pub(crate) fn note<T>(&mut self, result: &Result<T>, cut: bool) -> bool {
        let Err(err) = result else {
            return false;
        };
        let demoted = err.retry() == Retry::DemotedMaster;
        self.stale |= demoted;
        match &*self.manager.deployment {
            Deployment::Sentinel(_) if err.retry() == Retry::Unreachable && err.is_timeout() => {
                if cut {
                    self.stale = true;
                } else {
                    (self.manager.generation).fetch_max(self.born + 1, Ordering::Relaxed);
                }
            }
            // A node that stalled keeps them (a new one waits for it too)
            // until a slot map names another master ([`Backend::renew_all`]).
            Deployment::Cluster(_) if err.is_timeout() => {
                self.manager.stalled.store(true, Ordering::Relaxed);
            }
            // (A node that says it cannot serve for now was reached:
            // `Error::is_not_serving`.)
            Deployment::Cluster(_)
                if err.is_connection() && !err.is_slot_moving() && !err.is_not_serving() =>
            {
                (self.manager.generation).fetch_max(self.born + 1, Ordering::Relaxed);
            }
            _ => {}
        }
        demoted || err.retry() == Retry::OtherConnection
    }

    /// Stale of itself, or opened before the pool's generation.
    fn is_stale(&self) -> bool {
        self.stale || self.born < self.manager.generation.load(Ordering::Relaxed)
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Pooled;
    type Error = Error;

    fn connect(&self) -> Result<Pooled> {
        let born = self.generation.load(Ordering::Relaxed);
        let link = self.open();
        *self.open_failed.lock() = link.as_ref().err().cloned();
        Ok(Pooled {
            link: link?,
            manager: self.clone(),
            born,
            stale: false,
        })
    }

    fn is_valid(&self, conn: &mut Pooled) -> Result<()> {
        redis::cmd("PING")
            .query(conn.get())
            .map_err(Error::from_redis)
    }

    fn has_broken(&self, conn: &mut Pooled) -> bool {
        conn.is_stale() || !conn.link.is_open()
    }
}
