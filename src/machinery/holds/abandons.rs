//! Calls whose outcome this client never learned, to be undone in Redis.
//!
//! A lock call that timed out or lost its connection mid-way may still run
//! in Redis (a paused server runs it when it resumes; a slow link delivers
//! it late), and a release that could not be sent leaves the hold behind.
//! Each such call is recorded here by its call id and abandoned by the
//! watchdog with `abandon.lua` (idempotent: exactly that call's hold count
//! or queue entry) as soon as Redis answers. An entry stays until an
//! abandon sent at least `linger` after the failure was confirmed, and
//! after the first abandon Redis answered, is answered: a copy of the call
//! that reaches Redis late (sent before the failure, held by a slow link,
//! or by a stall that ends as Redis answers again) is undone too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::protocol::Call;

/// Most entries kept; past it the oldest is dropped (its lease and its
/// queue entry still run out by themselves).
const MAX_PENDING: usize = 10_000;

/// One call to abandon.
pub(crate) struct ToAbandon {
    pub(crate) call: Call,
    linger: Duration,
    /// A confirmation counts only for an abandon sent from then on; moved
    /// to a linger past the first abandon answered, if later (`answered`).
    retire_from: Mutex<(Instant, bool)>,
}

impl ToAbandon {
    fn new(call: Call, linger: Duration) -> Arc<ToAbandon> {
        let retire_from = Mutex::new((Instant::now() + linger, false));
        Arc::new(ToAbandon {
            call,
            linger,
            retire_from,
        })
    }
}

/// The calls of one client still to abandon.
#[derive(Default)]
pub(crate) struct Abandons {
    pending: Mutex<Vec<Arc<ToAbandon>>>,
}

impl Abandons {
    /// Records `call`, failed just now.
    pub(crate) fn add(&self, call: Call, linger: Duration) {
        let mut pending = self.pending.lock();
        // A call failed twice (a request, then the leave after it) is one
        // abandon, counted from its last failure. The same call asking for
        // something else is another: an upgrade leaves its claim, the write
        // it may have become and the read it came from, each an entry or a
        // hold of its own in Redis.
        let same = |given: &Arc<ToAbandon>| {
            given.call.entry() == call.entry() && given.call.keys.lock() == call.keys.lock()
        };
        if let Some(given) = pending.iter_mut().find(|given| same(given)) {
            *given = ToAbandon::new(call, linger);
            return;
        }
        if pending.len() >= MAX_PENDING {
            let dropped = pending.remove(0);
            let (id, key) = (dropped.call.id, dropped.call.keys.lock());
            log::warn!("fairlock: too many calls to abandon; dropped call {id} on {key:?}");
        }
        pending.push(ToAbandon::new(call, linger));
    }

    /// Every call still to abandon.
    pub(crate) fn snapshot(&self) -> Vec<Arc<ToAbandon>> {
        self.pending.lock().clone()
    }

    /// Redis answered an abandon of `entry` sent at `sent`: it retires if
    /// it was `refused` (an error: it is dropped), or if an abandon before
    /// it was answered and it was sent a linger after both the failure and
    /// that first abandon. The first answer never retires it, however long
    /// ago the call failed: copies of the call that a stall or an outage
    /// held reach Redis as it answers again, maybe just after that abandon
    /// (a queued call's last poll, delivered late, takes a lock come free).
    pub(crate) fn answered(&self, entry: &Arc<ToAbandon>, sent: Instant, refused: bool) {
        let mut retire_from = entry.retire_from.lock();
        match *retire_from {
            (from, answered) if refused || answered && sent >= from => {
                drop(retire_from);
                self.pending.lock().retain(|e| !Arc::ptr_eq(e, entry));
            }
            (from, false) => *retire_from = (from.max(sent + entry.linger), true),
            (_, true) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry holding one call to abandon, failed just now, lingering
    /// `linger`, and its entry.
    fn one(linger: Duration) -> (Abandons, Arc<ToAbandon>) {
        let abandons = Abandons::default();
        abandons.add(crate::machinery::test_call(7, "n"), linger);
        let entry = abandons.snapshot().pop().unwrap();
        (abandons, entry)
    }

    /// How many calls are still to abandon.
    fn left(abandons: &Abandons) -> usize {
        abandons.snapshot().len()
    }

    #[test]
    fn an_entry_retires_only_on_an_abandon_sent_after_its_linger() {
        let before = Instant::now();
        let (abandons, entry) = one(Duration::from_secs(60));
        abandons.answered(&entry, before, false);
        assert_eq!(left(&abandons), 1, "too early to retire");
        abandons.answered(&entry, Instant::now() + Duration::from_secs(61), false);
        assert!(abandons.snapshot().is_empty());
    }

    #[test]
    fn the_first_answer_never_retires_an_entry() {
        let linger = Duration::from_secs(60);
        let (abandons, entry) = one(linger);
        // Redis answers for the first time past the linger (a stall longer
        // than it): the call's last request, held by the same stall, may
        // reach Redis just after this abandon, so it is abandoned again a
        // linger later.
        let first = Instant::now() + Duration::from_secs(90);
        abandons.answered(&entry, first, false);
        assert_eq!(left(&abandons), 1, "retired on its first answer");
        abandons.answered(&entry, first + Duration::from_secs(59), false);
        assert_eq!(left(&abandons), 1, "retired within a linger of it");
        abandons.answered(&entry, first + linger, false);
        assert!(abandons.snapshot().is_empty());
    }

    #[test]
    fn a_refused_abandon_drops_its_entry_at_once() {
        let (abandons, entry) = one(Duration::from_secs(60));
        abandons.answered(&entry, Instant::now(), true);
        assert!(abandons.snapshot().is_empty());
    }

    #[test]
    fn the_first_answer_too_early_to_retire_an_entry_counts_its_linger_again() {
        let linger = Duration::from_secs(60);
        let (abandons, entry) = one(linger);
        // Redis answers for the first time 50 s in (an outage): a copy of
        // the call held meanwhile may still reach it, so one more abandon
        // a linger later retires it, not the next one.
        let first = Instant::now() + Duration::from_secs(50);
        abandons.answered(&entry, first, false);
        abandons.answered(&entry, first + Duration::from_secs(20), false);
        assert_eq!(
            left(&abandons),
            1,
            "retired within a linger of the first answer"
        );
        // Later answers move it no further.
        abandons.answered(&entry, first + linger, false);
        assert!(abandons.snapshot().is_empty());
    }

    #[test]
    fn a_call_is_abandoned_once_for_each_thing_it_asked_for() {
        use crate::protocol::{Access, Ask, Call};
        let abandons = Abandons::default();
        let read = crate::machinery::test_call(7, "n");
        let asking = |ask| Call {
            ask,
            ..read.clone()
        };
        let linger = Duration::from_secs(60);
        abandons.add(asking(Ask::RwLock(Access::UpgradableRead)), linger);
        abandons.add(asking(Ask::RwLock(Access::Write)), linger);
        abandons.add(asking(Ask::RwLock(Access::UpgradableRead)), linger);
        let asked: Vec<Ask> = abandons.snapshot().iter().map(|e| e.call.ask).collect();
        let expected = [Access::UpgradableRead, Access::Write].map(Ask::RwLock);
        assert_eq!(
            asked, expected,
            "one abandon per ask, the repeat counted once"
        );
    }
}
