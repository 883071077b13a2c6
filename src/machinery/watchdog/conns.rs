//! The watchdog's own connections, outside the user pool, so that user
//! calls holding every pooled connection (a slow or stalled server) never
//! make a renewal wait for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use redis::ConnectionLike;

use crate::connections::slot_map::Address;
use crate::connections::{Backend, OwnConn};
use crate::error::{Error, Result, Retry};

/// Idle connections of the watchdog's own, reused round after round: by
/// cluster master (a plain connection to that node), or `None` for the
/// deployment's own kind (the server, the Sentinels' master, the cluster).
#[derive(Default)]
pub(crate) struct WatchdogConns {
    idle: Mutex<HashMap<Option<Address>, Vec<OwnConn>>>,
}

impl WatchdogConns {
    /// Runs `call` on an idle connection to `node`, or on a new one. A
    /// connection that failed is dropped; a reused one that the server
    /// closed while it sat idle (a restart), or whose server was demoted
    /// meanwhile (`READONLY`: a failover behind the same address), is
    /// replaced and the call sent again once.
    pub(crate) fn with<T>(
        &self,
        backend: &Backend,
        node: Option<&Address>,
        mut call: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let key = node.cloned();
        let open = || -> Result<OwnConn> {
            match node {
                Some(address) => Ok(Box::new(backend.node_connection(address)?)),
                None => backend.own_connection(),
            }
        };
        let idle = self.idle.lock().get_mut(&key).and_then(Vec::pop);
        let reused = idle.is_some();
        let mut conn = idle.map_or_else(open, Ok)?;
        let mut result = call(&mut *conn);
        let stale =
            |err: &Error| matches!(err.retry(), Retry::OtherConnection | Retry::DemotedMaster);
        if reused && result.as_ref().is_err_and(stale) {
            conn = open()?;
            result = call(&mut *conn);
        }
        if !matches!(&result, Err(err) if err.is_connection()) {
            self.idle.lock().entry(key).or_default().push(conn);
        }
        result
    }

    /// Runs `call` on `node` if given, or through the deployment's own
    /// connection when the node is unknown, unreachable, or says the slot
    /// is served elsewhere: then the slot map is stale, and `stale` is set.
    pub(crate) fn with_node_or_cluster<T>(
        &self,
        backend: &Backend,
        node: Option<&Address>,
        stale: &AtomicBool,
        mut call: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        if node.is_some() {
            match self.with(backend, node, &mut call) {
                Err(err) if err.retry() != Retry::No => {
                    log::debug!("fairlock: renewing through the cluster client: {err}");
                    stale.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        self.with(backend, None, call)
    }
}
