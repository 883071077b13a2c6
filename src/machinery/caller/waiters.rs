//! Threads blocked in `lock()`/`try_lock_for()`, and how they are woken.
//!
//! A waiting thread parks on its own [`Waiter`] (a parking_lot mutex and
//! condvar) and holds no connection. It is woken by the subscriber (the lock
//! was handed over, or it became head of the queue), by the watchdog's
//! heartbeat (same news, as a fallback for lost messages) or by its own poll
//! deadline (the head polls when the holder's lease would run out).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::Error;
use crate::protocol::Call;
use rustc_hash::FxBuildHasher;

/// The lock was handed to a waiter while it slept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) token: u64,
    /// The granted lease counts from here, as far as this process can tell
    /// (the send time of a request that ran before the handoff).
    pub(crate) since: Instant,
    /// Its length, as Redis set it.
    pub(crate) ttl: Duration,
    /// When this client learned of it (a push message, a release reply, a
    /// heartbeat): the waiter's handoff latency counts from here.
    pub(crate) delivered: Instant,
}

/// Why [`Waiter::sleep`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The lock is ours; no further round trip is needed.
    Granted(Grant),
    /// Time to ask Redis again (poll deadline, lost place, missed messages).
    Poll,
    /// The caller stops waiting: its deadline passed or its wait was
    /// cancelled.
    GaveUp,
}

#[derive(Debug, Default)]
struct WaitState {
    granted: Option<Grant>,
    /// When to poll Redis next (now or past: at once).
    poll_at: Option<Instant>,
    cancelled: bool,
    /// Send time of the latest request known to have found this waiter
    /// still queued (its first attempt, a later attempt, a heartbeat): any
    /// handoff to it happened after that request ran, so a lease handed
    /// over counts from here at the latest.
    queued_as_of: Option<Instant>,
    /// The last fencing token issued when such a request ran: a handoff
    /// message with a token up to it tells of a grant that is over.
    stale_up_to: u64,
    /// A force release freed the lock's holds up to this token; a
    /// revocation asked those up to this one to let go.
    freed_up_to: u64,
    revoked_up_to: u64,
    /// Send time of the first request that found this waiter queued: its
    /// place among this client's waiters of the lock, for a rejoin in
    /// order ([`Waiters::rejoin_in_order`]).
    joined: Option<Instant>,
    /// Requests of this wait answered so far (or failed).
    answers: u64,
    /// The quickest round trip of those Redis answered: the link to the
    /// lock's server as this call found it ([`Waiter::round_trip`]).
    round_trip: Option<Duration>,
    /// Its last request could not reach Redis: it asks again through a
    /// rejoin in order ([`Waiters::rejoin`]).
    unreached: bool,
    /// The wait is over (granted, given up, failed): a rejoin in order
    /// waits for it no longer.
    ended: bool,
    /// It gave up (its deadline, a cancel) and leaves the queue, or its
    /// deadline ended it with a request in flight: no more heartbeats, so
    /// that what
    /// the call may have left (a grant that raced its leave, a poll that
    /// took the lock after the wait ended) is undone by the watchdog's
    /// abandon at once, not behind them.
    leaving: bool,
    /// Send time of the first of the watchdog's heartbeats in a row that
    /// could not reach Redis (see [`Waiter::unheard`]).
    unheard_since: Option<Instant>,
    /// What Redis said to the last of those heartbeats it refused for a
    /// while (`OOM`): the outage's cause when the wait's own last request
    /// has no reply in time.
    refused_as: Option<Error>,
}

/// One blocked call waiting for one lock.
pub(crate) struct Waiter {
    /// The call: its id is unique inside the client (wake messages name
    /// it), its lease may be fixed (the watchdog must not extend it).
    pub(crate) call: Call,
    state: Mutex<WaitState>,
    /// Tells the waiting thread of a grant, a poll time or a cancel, and a
    /// rejoin in order that a request of this wait was answered or that
    /// the wait ended.
    changed: Condvar,
}

impl Waiter {
    pub(crate) fn new(call: Call) -> Self {
        Waiter {
            call,
            state: Mutex::new(WaitState::default()),
            changed: Condvar::new(),
        }
    }

    /// A request sent at `sent` found (or made) this waiter queued, when
    /// `last_token` was the last fencing token issued: any grant to it so
    /// far is over (it would hold the lock otherwise).
    pub(crate) fn saw_queued(&self, sent: Instant, last_token: u64) {
        let mut state = self.state.lock();
        (state.unheard_since, state.refused_as) = (None, None);
        state.queued_as_of = Some(state.queued_as_of.map_or(sent, |known| known.max(sent)));
        state.stale_up_to = state.stale_up_to.max(last_token);
        state.granted = state.granted.filter(|g| g.token > last_token);
    }

    /// A request sent at `sent` found this waiter at `position` in its
    /// queue, when `last_token` was the last fencing token issued and what
    /// holds the lock had `pttl_ms` of lease left. The head of the queue
    /// polls when that lease would run out, the others wait to be told; a
    /// poll time set meanwhile by a message stands (see [`poll_by`](Self::poll_by)).
    pub(crate) fn in_queue(&self, sent: Instant, position: u64, last_token: u64, pttl_ms: i64) {
        self.saw_queued(sent, last_token);
        // The first request that found it queued gives its place among the
        // client's waiters.
        self.state.lock().joined.get_or_insert(sent);
        if position == 0 {
            self.poll_by(poll_time(pttl_ms));
        }
    }

    /// One request of this wait came back (answered, or failed; `reached`:
    /// not for want of Redis), its answer from Redis `took` after it was
    /// sent if it had one.
    pub(crate) fn answered(&self, reached: bool, took: Option<Duration>) {
        let mut state = self.state.lock();
        state.answers += 1;
        state.unreached = !reached;
        state.round_trip = state.round_trip.into_iter().chain(took).min();
        drop(state);
        self.changed.notify_all();
    }

    /// The quickest of this wait's requests that Redis answered (`None`:
    /// none was): the round trip of the link to its lock's server as the
    /// call found it, which the requests that end the wait (its leave, the
    /// release of a hold a call gives back as it ends) are given beyond
    /// their grace (see `link_grace`).
    pub(crate) fn round_trip(&self) -> Option<Duration> {
        self.state.lock().round_trip
    }

    /// Its last request could not reach Redis, and its wait goes on.
    fn is_unreached(&self) -> bool {
        let state = self.state.lock();
        state.unreached && !state.ended
    }

    /// The wait is over.
    fn end(&self) {
        self.state.lock().ended = true;
        self.changed.notify_all();
    }

    /// Has this waiter poll at once, then waits until that poll was
    /// answered, the wait ended, or `step` passed; false then.
    fn repoll_and_wait(&self, step: Duration) -> bool {
        let mut state = self.state.lock();
        if state.ended {
            return true;
        }
        let before = state.answers;
        state.poll_at = Some(Instant::now());
        self.changed.notify_all();
        let waiting = |s: &mut WaitState| s.answers == before && !s.ended;
        let waited = self.changed.wait_while_for(&mut state, waiting, step);
        !waited.timed_out()
    }

    /// The lock was handed to this waiter with `token` for `ttl`, counted
    /// from `since` (a heartbeat's send time); wakes it. A handoff message's
    /// (`since`: `None`) counts from the last request that saw the waiter
    /// queued, not from now: a process that was paused with the message
    /// unread finds a grant that already ran out counted out (and asks Redis
    /// before it returns anything: `wait_in_queue`).
    pub(crate) fn grant(&self, token: u64, since: Option<Instant>, ttl: Duration) {
        let mut state = self.state.lock();
        if since.is_none() && token <= state.stale_up_to {
            return; // read after a request found that grant over
        }
        let since = since.or(state.queued_as_of).unwrap_or_else(Instant::now);
        state.granted = Some(Grant {
            token,
            since,
            ttl,
            delivered: Instant::now(),
        });
        drop(state);
        self.changed.notify_all();
    }

    /// A force release's message: the lock's holds with tokens up to
    /// `up_to` were freed. A grant up to it not taken yet is over (the
    /// waiter asks again); one taken is lost once its hold is registered
    /// ([`told`](Self::told)), whose holds the message may have missed.
    pub(crate) fn freed(&self, up_to: u64) {
        let mut state = self.state.lock();
        state.freed_up_to = state.freed_up_to.max(up_to);
        if state.granted.take_if(|g| g.token <= up_to).is_some() {
            drop(state);
            self.repoll();
        }
    }

    /// A revocation's message: the lock's holds with tokens up to `up_to`
    /// are asked to let go, one this call registers after it too.
    pub(crate) fn revoked(&self, up_to: u64) {
        let mut state = self.state.lock();
        state.revoked_up_to = state.revoked_up_to.max(up_to);
    }

    /// Whether a force release freed the hold `token` of this call, and
    /// whether a revocation asked it to let go.
    pub(crate) fn told(&self, token: u64) -> (bool, bool) {
        let state = self.state.lock();
        (token <= state.freed_up_to, token <= state.revoked_up_to)
    }

    /// Asks the waiter to poll Redis no later than `at`; an earlier poll
    /// time set meanwhile stands (a message read before an acquire reply
    /// came from a script that ran after that reply's).
    pub(crate) fn poll_by(&self, at: Instant) {
        let mut state = self.state.lock();
        if state.poll_at.is_none_or(|current| at < current) {
            state.poll_at = Some(at);
            drop(state);
            self.changed.notify_all();
        }
    }

    /// A heartbeat of this waiter sent at `sent` could not reach Redis,
    /// or was refused for a while (`err`). Once none has for `patience`
    /// (the waiter's own requests count from the first), it asks itself,
    /// so that a waiter told nothing (not the head of its queue) ends its
    /// wait too; before that it stays parked, and rejoins in order when
    /// Redis is back.
    pub(crate) fn unheard(&self, sent: Instant, patience: Duration, err: &Error) {
        let mut state = self.state.lock();
        let since = *state.unheard_since.get_or_insert(sent);
        if err.is_refused_for_now() {
            state.refused_as = Some(err.clone());
        }
        drop(state);
        if since.elapsed() >= patience {
            self.repoll();
        }
    }

    /// Since when Redis could not be reached for this waiter, as far as
    /// its heartbeats know.
    pub(crate) fn unheard_since(&self) -> Option<Instant> {
        self.state.lock().unheard_since
    }

    /// What Redis said to the last of its heartbeats since then that it
    /// refused (`OOM`), if it refused any.
    pub(crate) fn heartbeats_refused_as(&self) -> Option<Error> {
        self.state.lock().refused_as.clone()
    }

    /// Asks the waiter to poll Redis at once.
    pub(crate) fn repoll(&self) {
        self.poll_by(Instant::now());
    }

    /// The wait ends without what it asked for, its deadline past with a
    /// request in flight: it is heartbeaten no more (see `leaving`), before
    /// the watchdog is asked to abandon what the call may have left.
    pub(crate) fn give_up(&self) {
        self.state.lock().leaving = true;
    }

    /// Whether the wait was cancelled (see `WaitCanceller`).
    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.lock().cancelled
    }

    /// Ends the wait as if its deadline had passed (see `WaitCanceller`).
    pub(crate) fn cancel(&self) {
        self.state.lock().cancelled = true;
        self.changed.notify_all();
    }

    /// Sleeps until granted, asked to poll, or `deadline`. A cancel comes
    /// first: a grant this thread has not taken by then is left to the
    /// wait's leave, which gives it back to the next waiter.
    pub(crate) fn sleep(&self, deadline: Option<Instant>) -> Wake {
        let mut state = self.state.lock();
        loop {
            if state.cancelled {
                state.leaving = true;
                return Wake::GaveUp;
            }
            if let Some(grant) = state.granted.take() {
                return Wake::Granted(grant);
            }
            let now = Instant::now();
            if state.poll_at.is_some_and(|at| at <= now) {
                state.poll_at = None;
                return Wake::Poll;
            }
            if deadline.is_some_and(|at| at <= now) {
                state.leaving = true;
                return Wake::GaveUp;
            }
            match state.poll_at.into_iter().chain(deadline).min() {
                Some(at) => _ = self.changed.wait_until(&mut state, at),
                None => self.changed.wait(&mut state),
            }
        }
    }
}

/// How long the head of the queue waits before it asks again about a lock
/// whose key has no expiry (written by something other than fairlock):
/// its release still sends a message; this only bounds a missed one.
const NO_EXPIRY_POLL: Duration = Duration::from_secs(1);

/// When the head of the queue should poll, given the holder's lease left:
/// one millisecond after it runs out, so the server's expiry passes first;
/// at once when the lock is free (`-2`); after [`NO_EXPIRY_POLL`] when the
/// lock has no expiry (`-1`), never in a tight loop.
pub(crate) fn poll_time(pttl_ms: i64) -> Instant {
    let wait = match u64::try_from(pttl_ms) {
        Ok(ms) => Duration::from_millis(ms + 1),
        Err(_) if pttl_ms == -2 => Duration::ZERO,
        Err(_) => NO_EXPIRY_POLL,
    };
    Instant::now() + wait
}

/// Every waiter of one client, by call id.
#[derive(Default)]
pub(crate) struct Waiters {
    by_id: Mutex<HashMap<u64, Arc<Waiter>, FxBuildHasher>>,
    /// Waiters to rejoin in order and whether a thread is at it
    /// ([`rejoin_in_order`](Self::rejoin_in_order)).
    rejoins: Arc<Mutex<Rejoins>>,
}

/// The rejoin in order of one client: at most one thread at a time, which
/// ends when nothing is left to rejoin.
#[derive(Default)]
struct Rejoins {
    pending: Vec<Arc<Waiter>>,
    running: bool,
}

impl Rejoins {
    /// Has `waiters` rejoin, in their order, after those pending; each
    /// pending once.
    fn add(&mut self, waiters: Vec<Arc<Waiter>>) {
        for waiter in waiters {
            if !self.pending.iter().any(|p| p.call.id == waiter.call.id) {
                self.pending.push(waiter);
            }
        }
    }
}

impl Waiters {
    pub(crate) fn insert(&self, waiter: Arc<Waiter>) {
        self.by_id.lock().insert(waiter.call.id, waiter);
    }

    /// Forgets the waiter whose wait ended.
    pub(crate) fn remove(&self, id: u64) {
        if let Some(waiter) = self.by_id.lock().remove(&id) {
            waiter.end();
        }
    }

    pub(crate) fn get(&self, id: u64) -> Option<Arc<Waiter>> {
        self.by_id.lock().get(&id).cloned()
    }

    /// Every waiter of the lock `lock_key`.
    pub(crate) fn of_lock(&self, lock_key: &str) -> Vec<Arc<Waiter>> {
        self.all(|w| w.call.keys.lock() == lock_key)
    }

    /// Every waiter that `keep` keeps, taken out of the registry's lock.
    fn all(&self, keep: impl Fn(&Waiter) -> bool) -> Vec<Arc<Waiter>> {
        let by_id = self.by_id.lock();
        by_id.values().filter(|w| keep(w)).cloned().collect()
    }

    /// Wakes every waiter to poll: messages may have been missed, and
    /// queues may have been lost with the server's data (see
    /// [`rejoin_in_order`](Self::rejoin_in_order)).
    pub(crate) fn repoll_all(&self) {
        self.rejoin_in_order(self.all(|_| true));
    }

    /// Has `waiters` poll, those of one lock one after another in the order
    /// they joined its queue, each once the one before it was answered (or
    /// ended, or after [`REJOIN_STEP`]): a queue lost with the server's data
    /// (a restart, a failover) is joined again in the order this client's
    /// waiters had, not in the order their threads happen to run. A lock's
    /// lone waiter polls at once; the others are rejoined by one thread per
    /// client, started when there is work and ended when there is none.
    pub(crate) fn rejoin_in_order(&self, waiters: Vec<Arc<Waiter>>) {
        let mut ordered = Vec::new();
        for group in by_lock(waiters) {
            match group.as_slice() {
                [lone] => lone.repoll(),
                _ => ordered.extend(group),
            }
        }
        self.rejoin(ordered);
    }

    /// Has `ordered` poll through the rejoin in order, after those pending
    /// (one waiter whose poll could not reach Redis, for instance:
    /// `queue_wait`'s wait through an outage).
    pub(crate) fn rejoin(&self, ordered: Vec<Arc<Waiter>>) {
        let mut rejoins = self.rejoins.lock();
        rejoins.add(ordered);
        // Nothing to rejoin, or a thread at it already (pending work always has one).
        if rejoins.pending.is_empty() || rejoins.running {
            return;
        }
        let shared = Arc::clone(&self.rejoins);
        let spawned = std::thread::Builder::new()
            .name("fairlock-rejoin".to_owned())
            .spawn(move || rejoin_pending(&shared));
        match spawned {
            Ok(_) => rejoins.running = true,
            Err(err) => {
                log::warn!("fairlock: cannot start a thread to rejoin queues in order: {err}");
                // Rejoined in any order rather than not at all.
                for waiter in std::mem::take(&mut rejoins.pending) {
                    waiter.poll_by(Instant::now() + RETRY);
                }
            }
        }
    }

    /// Waiters grouped by lock (by the lock key), for one heartbeat per
    /// lock, each group in the order its waiters joined the queue. A waiter
    /// whose first request has not come back is left out: a heartbeat
    /// that ran before that request would find it not queued yet and have
    /// it ask again (and say it lost its place) for nothing. So is one
    /// that gave up and is leaving.
    pub(crate) fn by_lock(&self) -> Vec<Vec<Arc<Waiter>>> {
        by_lock(self.all(|w| {
            let state = w.state.lock();
            state.answers > 0 && !state.leaving
        }))
    }
}

/// The rejoin thread's work: each lock's pending waiters in order, until
/// none is left; a waiter that could not reach Redis, or whose poll got
/// no answer within [`REJOIN_STEP`], holds back the ones after it, and
/// they ask again in order, it first ([`RETRY`] later when it could not
/// reach Redis).
fn rejoin_pending(rejoins: &Mutex<Rejoins>) {
    loop {
        let batch = {
            let mut rejoins = rejoins.lock();
            if rejoins.pending.is_empty() {
                rejoins.running = false;
                return;
            }
            std::mem::take(&mut rejoins.pending)
        };
        if batch.iter().any(|waiter| waiter.is_unreached()) {
            std::thread::sleep(RETRY);
        }
        let mut held = Vec::new();
        for group in by_lock(batch) {
            let unreached = (group.iter())
                .position(|waiter| !waiter.repoll_and_wait(REJOIN_STEP) || waiter.is_unreached());
            // It and the ones after it (it may not have asked again yet).
            held.extend(unreached.map_or(&[][..], |at| &group[at..]).iter().cloned());
        }
        rejoins.lock().add(held);
    }
}

/// How long a waiter whose poll could not reach Redis waits before it
/// asks again: each failed poll already waited for a pooled connection
/// (which the pool gets within 100 ms of the server's return), so a longer
/// pause would only delay the recovery.
pub(crate) const RETRY: Duration = Duration::from_millis(100);

/// How long a rejoin in order waits for one waiter's poll to be answered
/// before it leaves that lock's waiters for its next pass: far above a
/// poll's round trip on a busy machine, short enough that a poll stuck on
/// a stalled server holds other locks' waiters back by no more than this.
const REJOIN_STEP: Duration = Duration::from_secs(1);

/// `all` grouped by lock, each group in the order its waiters joined the
/// queue (those that never saw themselves queued last, by call id).
fn by_lock(mut all: Vec<Arc<Waiter>>) -> Vec<Vec<Arc<Waiter>>> {
    all.sort_by_cached_key(|w| {
        let (lock, joined) = (Arc::clone(&w.call.keys.lock), w.state.lock().joined);
        (lock, joined.is_none(), joined, w.call.id)
    });
    let same_lock = |a: &Arc<Waiter>, b: &Arc<Waiter>| a.call.keys.lock() == b.call.keys.lock();
    all.chunk_by(same_lock).map(<[_]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::test_call as call;

    fn waiter() -> Arc<Waiter> {
        Arc::new(Waiter::new(call(1, "n")))
    }

    /// What `w`'s sleep of at most `ms` from now woke for.
    fn sleep_ms(w: &Waiter, ms: u64) -> Wake {
        w.sleep(Some(Instant::now() + Duration::from_millis(ms)))
    }

    #[test]
    fn a_grant_from_another_thread_wakes_the_sleeper() {
        let w = waiter();
        let granter = Arc::clone(&w);
        let handle = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            granter.grant(7, Some(Instant::now()), Duration::ZERO);
        });
        let woke = sleep_ms(&w, 10_000);
        handle.join().unwrap();
        assert!(matches!(woke, Wake::Granted(Grant { token: 7, .. })));
    }

    #[test]
    fn sleep_honours_the_deadline_and_the_poll_time() {
        let w = waiter();
        let start = Instant::now();
        assert_eq!(sleep_ms(&w, 30), Wake::GaveUp);
        assert!(start.elapsed() >= Duration::from_millis(30));
        w.poll_by(poll_time(20));
        assert_eq!(sleep_ms(&w, 10_000), Wake::Poll);
        w.repoll();
        assert_eq!(w.sleep(None), Wake::Poll);
    }

    #[test]
    fn waiters_of_one_lock_share_a_group_whatever_handle_they_came_through() {
        let waiters = Waiters::default();
        for (id, name) in [(1, "a"), (2, "b"), (3, "a"), (4, "a")] {
            let waiter = Arc::new(Waiter::new(call(id, name)));
            waiter.answered(true, None);
            waiters.insert(waiter);
        }
        let mut sizes: Vec<usize> = waiters.by_lock().iter().map(Vec::len).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [1, 3]);
    }

    #[test]
    fn a_waiter_is_heartbeaten_from_its_first_answer_until_it_gives_up() {
        let waiters = Waiters::default();
        let w = waiter();
        waiters.insert(Arc::clone(&w));
        assert!(waiters.by_lock().is_empty(), "heartbeaten before it asked");
        w.answered(false, None);
        assert_eq!(waiters.by_lock().len(), 1);
        // Given up (a cancel, a deadline), it leaves: no more heartbeats.
        w.cancel();
        assert_eq!(w.sleep(None), Wake::GaveUp);
        assert!(waiters.by_lock().is_empty(), "heartbeaten as it left");
        // So is one whose deadline ends it with a request out: no more
        // heartbeats from then.
        let other = Arc::new(Waiter::new(call(2, "b")));
        waiters.insert(Arc::clone(&other));
        other.answered(true, None);
        assert_eq!(waiters.by_lock().len(), 1);
        other.give_up();
        assert!(
            waiters.by_lock().is_empty(),
            "heartbeaten as its wait ended"
        );
    }

    /// Waits up to 5 s for `cond`.
    fn eventually(cond: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while !cond() {
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[test]
    fn a_rejoin_polls_one_waiter_after_another_and_its_thread_ends_with_the_work() {
        let waiters = Waiters::default();
        let polled = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        // Joined in the order 3, 1, 2: their place, not their id, decides.
        let base = Instant::now();
        for (id, joined_ms) in [(1, 10), (2, 20), (3, 0)] {
            let w = Arc::new(Waiter::new(call(id, "a")));
            w.state.lock().joined = Some(base + Duration::from_millis(joined_ms));
            waiters.insert(Arc::clone(&w));
            let polled = Arc::clone(&polled);
            threads.push(std::thread::spawn(move || {
                assert_eq!(w.sleep(None), Wake::Poll);
                // A poll slower than the others' would be: if the rejoin
                // did not wait for this answer, the next would poll first.
                std::thread::sleep(Duration::from_millis(30));
                polled.lock().push(w.call.id);
                w.answered(true, None);
            }));
        }
        waiters.repoll_all();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*polled.lock(), [3, 1, 2]);
        assert!(
            eventually(|| !waiters.rejoins.lock().running),
            "the rejoin thread still runs with nothing to do"
        );
    }

    #[test]
    fn a_rejoin_steps_past_a_waiter_whose_wait_ended_without_waiting_for_it() {
        let waiters = Waiters::default();
        let base = Instant::now();
        let first = Arc::new(Waiter::new(call(1, "a")));
        let second = Arc::new(Waiter::new(call(2, "a")));
        first.state.lock().joined = Some(base);
        second.state.lock().joined = Some(base + Duration::from_millis(1));
        waiters.insert(Arc::clone(&first));
        waiters.insert(Arc::clone(&second));
        // The first waiter's wait ends (granted by a message, say) and it
        // never polls: the second is asked at once, not after REJOIN_STEP.
        let started = Instant::now();
        waiters.repoll_all();
        waiters.remove(1);
        assert_eq!(second.sleep(Some(Instant::now() + REJOIN_STEP)), Wake::Poll);
        let took = started.elapsed();
        assert!(took < REJOIN_STEP / 2, "{took:?}");
        second.answered(true, None);
        assert!(eventually(|| !waiters.rejoins.lock().running));
    }

    #[test]
    fn a_locks_lone_waiter_polls_at_once_without_a_thread() {
        let waiters = Waiters::default();
        let lone = Arc::new(Waiter::new(call(1, "a")));
        waiters.insert(Arc::clone(&lone));
        waiters.repoll_all();
        assert!(!waiters.rejoins.lock().running);
        assert_eq!(sleep_ms(&lone, 0), Wake::Poll);
    }

    #[test]
    fn a_lock_without_expiry_is_not_polled_in_a_tight_loop() {
        let now = Instant::now();
        assert!(poll_time(-1) >= now + NO_EXPIRY_POLL);
        assert!(poll_time(-2) <= Instant::now());
        assert!(poll_time(5) >= now + Duration::from_millis(6));
    }

    #[test]
    fn a_grant_message_counts_from_the_last_request_that_saw_the_waiter_queued() {
        let w = waiter();
        let queued_at = Instant::now();
        w.saw_queued(queued_at, 3);
        w.saw_queued(queued_at - Duration::from_secs(5), 2); // an older reply, read late
        std::thread::sleep(Duration::from_millis(30));
        w.grant(9, None, Duration::from_millis(20));
        let woke = w.sleep(None);
        let Wake::Granted(grant) = woke else {
            panic!("{woke:?}");
        };
        assert_eq!(grant.since, queued_at);
        let lease_end = grant.since + grant.ttl;
        assert!(lease_end < Instant::now(), "read after the lease ran out");
    }

    #[test]
    fn a_cancel_before_a_grant_the_thread_has_not_taken_yet_ends_the_wait() {
        // Cancelled, then handed the lock before its thread ran again: the
        // wait ends without it (its leave gives the lock back).
        let w = waiter();
        w.saw_queued(Instant::now(), 0);
        w.cancel();
        w.grant(5, None, Duration::from_secs(10));
        assert_eq!(w.sleep(None), Wake::GaveUp);
    }

    #[test]
    fn a_grant_that_a_later_request_found_over_is_ignored() {
        let w = waiter();
        w.saw_queued(Instant::now(), 0);
        // Granted token 5, then a poll found the waiter queued again when
        // token 6 had been issued: grant 5 is over, read before or after.
        w.grant(5, None, Duration::from_secs(10));
        w.saw_queued(Instant::now(), 6);
        w.grant(5, None, Duration::from_secs(10));
        assert_eq!(sleep_ms(&w, 20), Wake::GaveUp);
        w.grant(7, None, Duration::from_secs(10));
        let woke = w.sleep(None);
        assert!(matches!(woke, Wake::Granted(Grant { token: 7, .. })));
    }
}
