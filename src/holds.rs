//! Locks this client holds, as seen by their guards and by the watchdog.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::protocol::LockKeys;

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

/// One hold with live guards: how many share it, and whether the watchdog
/// renews it (a fixed lease is not renewed).
struct Registered {
    hold: Arc<Hold>,
    guards: usize,
    renewed: bool,
}

/// The holds of one client that have live guards, by lock key. They are
/// what the watchdog renews, and the only holds a thread may re-enter: a
/// hold in Redis with no live guard here is an orphan (see acquire.lua).
#[derive(Default)]
pub(crate) struct Holds {
    by_lock: Mutex<HashMap<String, Vec<Registered>>>,
}

impl Holds {
    /// Registers a guard on `hold`; a re-entrant guard joins the existing
    /// hold of the same lock and token.
    pub(crate) fn register(&self, hold: Hold, renewed: bool) -> Arc<Hold> {
        let mut by_lock = self.by_lock.lock();
        if !by_lock.contains_key(hold.keys.lock()) {
            by_lock.insert(hold.keys.lock().to_owned(), Vec::new());
        }
        let holds = by_lock
            .get_mut(hold.keys.lock())
            .expect("inserted just above");
        if let Some(known) = holds.iter_mut().find(|r| r.hold.token == hold.token) {
            known.guards += 1;
            return Arc::clone(&known.hold);
        }
        let hold = Arc::new(hold);
        holds.push(Registered {
            hold: Arc::clone(&hold),
            guards: 1,
            renewed,
        });
        hold
    }

    /// Drops one guard's registration; the watchdog stops renewing the hold
    /// once its last guard is gone.
    pub(crate) fn unregister(&self, hold: &Hold) {
        let mut by_lock = self.by_lock.lock();
        let Some(holds) = by_lock.get_mut(hold.keys.lock()) else {
            return;
        };
        if let Some(at) = holds.iter().position(|r| r.hold.token == hold.token) {
            holds[at].guards -= 1;
            if holds[at].guards == 0 {
                holds.swap_remove(at);
            }
        }
        if holds.is_empty() {
            by_lock.remove(hold.keys.lock());
        }
    }

    /// The token of the newest hold of `lock_key` by `owner` that has a live
    /// guard, or 0 (no token is 0).
    pub(crate) fn live_token(&self, lock_key: &str, owner: &str) -> u64 {
        self.by_lock.lock().get(lock_key).map_or(0, |holds| {
            holds
                .iter()
                .filter(|r| r.hold.owner == owner)
                .map(|r| r.hold.token)
                .max()
                .unwrap_or(0)
        })
    }

    /// Every hold to renew now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Hold>> {
        self.by_lock
            .lock()
            .values()
            .flatten()
            .filter(|r| r.renewed)
            .map(|r| Arc::clone(&r.hold))
            .collect()
    }
}
