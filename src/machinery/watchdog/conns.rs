//! The watchdog's own connections (an
//! [`OwnConns`](crate::connections::own_conns::OwnConns)), outside the user pool,
//! so that user calls holding every pooled connection (a slow or stalled
//! server) never make a renewal wait for one: by cluster master (a plain
//! connection to that node), or `None` for the deployment's own kind (the
//! server, the Sentinels' master, the cluster), reused round after round.

use std::sync::atomic::Ordering;

use redis::ConnectionLike;

use crate::connections::slot_map::Address;
use crate::connections::{Backend, Listen, OwnConn};
use crate::error::{Result, Retry};
use crate::machinery::shared::Shared;
use crate::machinery::watchdog::Watchdog;

impl Watchdog {
    /// Runs `call` on one of its connections to `node` if given, or of the
    /// deployment's own kind when the node is unknown, unreachable, or
    /// says the slot is served elsewhere: then the slot map is stale
    /// (`map_stale` is set). A node that says it cannot serve for now
    /// ([`Error::is_not_serving`](crate::error::Error::is_not_serving): a
    /// cluster down, which the map, read again, finds failed over; its
    /// data loading, ...) was reached: its answer is the call's, and its
    /// connection kept.
    pub(super) fn with_conn<T>(
        &self,
        shared: &Shared,
        node: Option<&Address>,
        mut call: impl FnMut(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<T> {
        let (conns, backend) = (&self.conns, &shared.caller.backend);
        if node.is_some() {
            match conns.with(node.cloned(), open(backend, node), |conn| call(&mut **conn)) {
                Err(err) if err.is_not_serving() => {
                    self.map_stale.store(true, Ordering::Relaxed);
                    return Err(err);
                }
                Err(err) if err.retry() != Retry::No => {
                    log::debug!("fairlock: renewing through the cluster client: {err}");
                    self.map_stale.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        conns.with(None, open(backend, None), |conn| call(&mut **conn))
    }
}

/// Opens a connection to `node`, or of the deployment's own kind.
fn open<'a>(backend: &'a Backend, node: Option<&'a Address>) -> impl Fn() -> Result<OwnConn> + 'a {
    move || match node {
        Some(node) => Ok(Box::new(backend.connection(&Listen::Node(node.clone()))?)),
        None => backend.own_connection(),
    }
}
