//! Locks this client holds, as seen by their guards and by the watchdog.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::keys::LockKeys;

/// One acquisition of one lock: shared by the guard and its re-entrant
/// guards (same token), and by the watchdog when the lease is renewed.
pub(crate) struct Hold {
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) owner: String,
    pub(crate) token: u64,
    lost: AtomicBool,
    /// Latest moment the lease is known to last until; pushed out by each
    /// renewal, measured from when the confirming request was sent.
    expires_at: Mutex<Instant>,
}

impl Hold {
    pub(crate) fn new(keys: Arc<LockKeys>, owner: String, token: u64, expires_at: Instant) -> Self {
        Hold {
            keys,
            owner,
            token,
            lost: AtomicBool::new(false),
            expires_at: Mutex::new(expires_at),
        }
    }

    /// Lost when Redis said so, or when no renewal confirmed it in time.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= *self.expires_at.lock()
    }

    pub(crate) fn mark_lost(&self) {
        if !self.lost.swap(true, Ordering::AcqRel) {
            log::warn!("fairlock: lease lost on a held lock (token {})", self.token);
        }
    }

    /// A renewal sent at `sent` succeeded for `lease`.
    pub(crate) fn renewed(&self, sent: Instant, lease: Duration) {
        let mut expires_at = self.expires_at.lock();
        *expires_at = (*expires_at).max(sent + lease);
    }
}

/// (lock key, token): one acquisition of one lock.
type HoldId = (String, u64);

/// Watchdog-renewed holds of one client, with how many guards share each.
#[derive(Default)]
pub(crate) struct Holds {
    by_lock: Mutex<HashMap<HoldId, (Arc<Hold>, usize)>>,
}

impl Holds {
    /// Registers a guard on `hold`; a re-entrant guard joins the existing
    /// hold of the same lock and token.
    pub(crate) fn register(&self, hold: Hold) -> Arc<Hold> {
        let mut by_lock = self.by_lock.lock();
        let entry = by_lock
            .entry((hold.keys.lock().to_owned(), hold.token))
            .or_insert_with(|| (Arc::new(hold), 0));
        entry.1 += 1;
        Arc::clone(&entry.0)
    }

    /// Drops one guard's registration; the watchdog stops renewing the hold
    /// once its last guard is gone.
    pub(crate) fn unregister(&self, hold: &Hold) {
        let mut by_lock = self.by_lock.lock();
        let key = (hold.keys.lock().to_owned(), hold.token);
        if let Some(entry) = by_lock.get_mut(&key) {
            entry.1 -= 1;
            if entry.1 == 0 {
                by_lock.remove(&key);
            }
        }
    }

    /// Every hold to renew now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Hold>> {
        self.by_lock
            .lock()
            .values()
            .map(|(hold, _)| Arc::clone(hold))
            .collect()
    }
}
