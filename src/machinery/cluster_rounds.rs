//! The watchdog's view of a Redis Cluster, shared with its renewal
//! threads: the slot map it groups renewals by, and which groups are still
//! running.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::connections::slot_map::{Address, SlotMap};

/// Renewals that run on one thread: a master's slots, or one slot whose
/// master the map does not know.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Group {
    Master(Address),
    Slot(u16),
}

/// The watchdog's view of a cluster, shared with its renewal threads.
#[derive(Default)]
pub(crate) struct ClusterRounds {
    /// Slot map used to group renewals by master.
    pub(crate) map: Mutex<Option<Arc<SlotMap>>>,
    /// Set when a node did not answer for its slots as the map said.
    pub(crate) map_stale: AtomicBool,
    pub(crate) refreshing: AtomicBool,
    /// Groups whose renewal thread is still running.
    pub(crate) in_flight: Mutex<HashSet<Group>>,
}
