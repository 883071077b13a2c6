//! The semaphores on which this client's acquire calls found another
//! number of permits in force than their own (`set_permits` set it), and
//! that number as the last call saw it: what a handle's `permits_in_force`
//! reads, and the one log line per semaphore that tells of it (a line per
//! call would drown the log of a busy service).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::protocol::LockKeys;

/// By lock key, the number in force as this client's last acquire call on
/// it saw it, for each semaphore where a call saw another than its own.
#[derive(Default)]
pub(crate) struct PermitsSeen {
    /// Set with the first entry: until then a call that found its own
    /// number in force (every call of a client that never met
    /// `set_permits`) takes no lock here.
    any: AtomicBool,
    seen: Mutex<FxHashMap<Box<str>, u32>>,
}

impl PermitsSeen {
    /// Notes what an acquire reply on `keys` said: `in_force`, the number
    /// in force when it is not the call's `own`; `None`, the call's own.
    /// The first time a semaphore's differs, says so in the log.
    pub(crate) fn note(&self, keys: &LockKeys, own: u32, in_force: Option<u32>, fence: Duration) {
        if in_force.is_none() && !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut seen = self.seen.lock();
        if let Some(last) = seen.get_mut(keys.lock()) {
            *last = in_force.unwrap_or(own);
        } else if let Some(n) = in_force {
            seen.insert(keys.lock().into(), n);
            self.any.store(true, Ordering::Relaxed);
            log::warn!(
                "fairlock: semaphore {:?}: {n} permit{} in force (set with set_permits), this \
                 handle says {own}; the set number rules for every client while the semaphore is \
                 in use and for {fence:?} (the fence life) after its last use, and a handle's \
                 own only bounds what one call may ask for; permits_in_force() reads it (said \
                 once per semaphore)",
                keys.name(),
                if n == 1 { "" } else { "s" }
            );
        }
    }

    /// The number in force on `keys` as this client's last acquire call
    /// saw it, if any call ever found another than its own.
    pub(crate) fn get(&self, keys: &LockKeys) -> Option<u32> {
        self.seen.lock().get(keys.lock()).copied()
    }
}
