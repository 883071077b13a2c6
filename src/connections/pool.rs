//! A deployment's r2d2 pool of connections, with what its last attempt to
//! open one came to: a checkout that runs out of time tells a server that
//! cannot be had (an attempt failed, and none has succeeded since) from a
//! pool that was busy or only slow to open one (no attempt failed), which
//! at a call's deadline is the deadline's doing, not an outage
//! (docs/failures.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::connections::config::Config;
use crate::error::{Error, Result};

/// The pooled connections of one deployment (one server, a cluster, the
/// master Sentinels name).
pub(super) struct Pool<M: r2d2::ManageConnection> {
    pool: r2d2::Pool<M>,
    /// The pool's manager, for the connections opened outside it (the
    /// subscribers', the watchdog's).
    pub(super) manager: M,
    /// Whether the pool's last attempt to open a connection failed.
    last_open: LastOpen,
}

impl<M: r2d2::ManageConnection<Error = Error> + Clone> Pool<M> {
    /// A pool of `manager`'s connections, opened as `config` says, none of
    /// them yet (the first checkouts open them).
    pub(super) fn open(config: &Config, manager: M) -> Pool<M> {
        let maintenance = scheduled_thread_pool::ScheduledThreadPool::builder()
            .num_threads(1)
            .thread_name_pattern("fairlock-pool")
            // Exit with the pool instead of lingering until the next reaper run.
            .on_drop_behavior(scheduled_thread_pool::OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        let last_open = LastOpen::default();
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
            // reports the cause); whether the last one failed is kept.
            .error_handler(Box::new(last_open.clone()))
            .connection_customizer(Box::new(last_open.clone()))
            .thread_pool(Arc::new(maintenance))
            .build_unchecked(manager.clone());
        Pool {
            pool,
            manager,
            last_open,
        }
    }

    /// A connection within `timeout`, or the pool's error.
    pub(super) fn checkout(&self, timeout: Duration) -> Result<r2d2::PooledConnection<M>> {
        self.pool.get_timeout(timeout).map_err(|err| {
            // Busy: every connection the pool may open is open and in use,
            // or none of its attempts to open one failed (it was still
            // opening one: a loaded machine, a slow handshake, not an
            // outage).
            let busy =
                self.pool.state().connections == self.pool.max_size() || !self.last_open.failed();
            Error::from_pool(err, busy)
        })
    }

    /// The most connections the pool opens.
    pub(super) fn max_size(&self) -> u32 {
        self.pool.max_size()
    }
}

/// Set by the pool when an attempt to open a connection fails, cleared when
/// one succeeds; its clones share it.
#[derive(Debug, Clone, Default)]
struct LastOpen(Arc<AtomicBool>);

impl LastOpen {
    /// True when the pool's last attempt to open a connection failed.
    fn failed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Told of each failed attempt (nothing is logged: a call that needed the
/// connection reports the cause).
impl r2d2::HandleError<Error> for LastOpen {
    fn handle_error(&self, _: Error) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Told of each connection opened.
impl<C> r2d2::CustomizeConnection<C, Error> for LastOpen {
    fn on_acquire(&self, _: &mut C) -> Result<()> {
        self.0.store(false, Ordering::Relaxed);
        Ok(())
    }
}
