//! Calls whose outcome this client never learned, to be undone in Redis.
//!
//! A lock call that timed out or lost its connection mid-way may still run
//! in Redis (a paused server runs it when it resumes; a slow link delivers
//! it late), and a release that could not be sent leaves the hold behind.
//! Each such call is recorded here by its call id and given back by the
//! watchdog with `abandon.lua` (idempotent: exactly that call's hold count
//! or queue entry) as soon as Redis answers. An entry stays until a
//! give-back sent at least `linger` after the failure was confirmed, so a
//! copy of the call that reaches Redis late is undone too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::protocol::Call;

/// Most entries kept; past it the oldest is dropped (its lease and its
/// queue entry still run out by themselves).
const MAX_PENDING: usize = 10_000;

/// One call to give back.
pub(crate) struct GiveBack {
    pub(crate) call: Call,
    /// A confirmation counts only for a give-back sent from then on.
    retire_from: Instant,
}

/// The calls of one client still to give back.
#[derive(Default)]
pub(crate) struct GiveBacks {
    pending: Mutex<Vec<Arc<GiveBack>>>,
}

impl GiveBacks {
    /// Records `call`, failed just now.
    pub(crate) fn add(&self, call: Call, linger: Duration) {
        let retire_from = Instant::now() + linger;
        let mut pending = self.pending.lock();
        // A call failed twice (a request, then the leave after it) is one
        // give-back, counted from its last failure.
        let same = |given: &Arc<GiveBack>| {
            given.call.id == call.id && given.call.keys.lock() == call.keys.lock()
        };
        if let Some(given) = pending.iter_mut().find(|given| same(given)) {
            *given = Arc::new(GiveBack { call, retire_from });
            return;
        }
        if pending.len() >= MAX_PENDING {
            let dropped = pending.remove(0);
            log::warn!(
                "fairlock: too many calls to give back; dropped call {} on {:?}",
                dropped.call.id,
                dropped.call.keys.lock()
            );
        }
        pending.push(Arc::new(GiveBack { call, retire_from }));
    }

    /// Every call still to give back.
    pub(crate) fn snapshot(&self) -> Vec<Arc<GiveBack>> {
        self.pending.lock().clone()
    }

    /// Redis confirmed a give-back of `entry` sent at `sent`.
    pub(crate) fn confirmed(&self, entry: &Arc<GiveBack>, sent: Instant) {
        if sent >= entry.retire_from {
            self.forget(entry);
        }
    }

    /// Stops giving `entry` back (Redis refused it with an error).
    pub(crate) fn forget(&self, entry: &Arc<GiveBack>) {
        self.pending.lock().retain(|e| !Arc::ptr_eq(e, entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_retires_only_on_a_give_back_sent_after_its_linger() {
        let give_backs = GiveBacks::default();
        let before = Instant::now();
        let call = Call {
            keys: Arc::new(crate::protocol::LockKeys::mutex("p", "n").unwrap()),
            owner: "c:1".into(),
            id: 7,
            lease: crate::protocol::Lease::Renewed(Duration::from_secs(30)),
            ask: crate::protocol::Ask::Mutex,
        };
        give_backs.add(call, Duration::from_secs(60));
        let entry = give_backs.snapshot().pop().unwrap();
        give_backs.confirmed(&entry, before);
        assert_eq!(give_backs.snapshot().len(), 1, "too early to retire");
        give_backs.confirmed(&entry, Instant::now() + Duration::from_secs(61));
        assert!(give_backs.snapshot().is_empty());
    }
}
