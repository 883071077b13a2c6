//! Connections of the client's own, outside the pool, kept idle by node
//! between uses: the watchdog's (so that user calls holding every pooled
//! connection never make a renewal wait for one) and the slot map
//! reader's (so that a map read sent to a stalled node holds no pooled
//! connection).

use std::collections::HashMap;
use std::hash::Hash;

use parking_lot::Mutex;

use crate::error::{Error, Result, Retry};

/// Idle connections `C`, by where they lead `K` (its users': a cluster node,
/// or `None` for one that is not a node's: the deployment's own kind, or
/// a seed): each taken out for a use, so that users never wait for each
/// other (one that finds none opens its own).
pub(crate) struct OwnConns<K, C> {
    idle: Mutex<HashMap<K, Vec<C>>>,
}

impl<K, C> Default for OwnConns<K, C> {
    fn default() -> Self {
        OwnConns {
            idle: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone, C> OwnConns<K, C> {
    /// Runs `call` on an idle connection kept for `key`, or on a new one
    /// that `open` makes. A connection that failed is dropped (not one
    /// whose node answered that it cannot serve for now,
    /// [`Error::is_not_serving`]: it was reached, and a new one would hear
    /// the same); a reused
    /// one that the server closed while it sat idle (a restart), or whose
    /// server was demoted meanwhile (`READONLY`: a failover behind the
    /// same address), is replaced and the call sent again once.
    pub(crate) fn with<T>(
        &self,
        key: K,
        open: impl Fn() -> Result<C>,
        mut call: impl FnMut(&mut C) -> Result<T>,
    ) -> Result<T> {
        let idle = self.idle.lock().get_mut(&key).and_then(Vec::pop);
        let reused = idle.is_some();
        let mut conn = idle.map_or_else(&open, Ok)?;
        let mut result = call(&mut conn);
        let stale =
            |err: &Error| matches!(err.retry(), Retry::OtherConnection | Retry::DemotedMaster);
        if reused && result.as_ref().is_err_and(stale) {
            conn = open()?;
            result = call(&mut conn);
        }
        if !matches!(&result, Err(err) if err.is_connection() && !err.is_not_serving()) {
            self.idle.lock().entry(key).or_default().push(conn);
        }
        result
    }

    /// Drops the idle connections of the keys that `keep` refuses (nodes
    /// a slot map no longer names).
    pub(crate) fn retain(&self, keep: impl Fn(&K) -> bool) {
        self.idle.lock().retain(|key, _| keep(key));
    }
}
