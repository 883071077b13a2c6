//! `FairMutex`: a handle to one named lock, and the acquire algorithm.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::WaitCanceller;
use crate::config::check_lease;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::FairMutexGuard;
use crate::holds::Hold;
use crate::protocol::{
    Acquire, AcquireReply, Cancel, CancelReply, ForceRelease, LockKeys, Mode, Renew, Status,
};
use crate::shared::{ClientInner, Shared};
use crate::status::{LockStatus, Participant};
use crate::waiters::{Waiter, Wake};

/// A fair (first come, first served) mutex named by a string, shared by
/// every thread of every process that uses the same Redis and key prefix.
///
/// Cheap to clone; `Send + Sync`. Made by [`Client::fair_mutex`](crate::Client::fair_mutex).
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mutex = client.fair_mutex("nightly-report");
/// match mutex.try_lock_for(Duration::from_secs(5))? {
///     Some(guard) => println!("got it, token {}", guard.fencing_token()),
///     None => println!("still busy after 5 s; left the queue"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FairMutex {
    client: Arc<ClientInner>,
    name: Arc<str>,
    /// The name's keys, or why the name is invalid (every call reports it).
    keys: Result<Arc<LockKeys>>,
    fixed_lease: Option<Duration>,
}

/// Consecutive connection failures of one waiting call.
#[derive(Default)]
struct Outage {
    since: Option<Instant>,
    failures: u32,
}

impl Outage {
    /// When to try again after one more failure, or `None` once the outage
    /// has lasted `patience`. Backs off from 50 ms to 1 s.
    fn retry_at(&mut self, patience: Duration) -> Option<Instant> {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= patience {
            return None;
        }
        let backoff = Duration::from_millis(50 << self.failures.min(5)).min(Duration::from_secs(1));
        self.failures += 1;
        Some(now + backoff)
    }
}

impl FairMutex {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> Self {
        let keys = LockKeys::new(&client.shared.config.key_prefix, name).map(Arc::new);
        FairMutex {
            client,
            name: name.into(),
            keys,
            fixed_lease: None,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, acquired with a fixed `lease` that no watchdog renews:
    /// the lock frees by itself `lease` after it was granted. A lease
    /// outside [`MIN_LEASE`](crate::MIN_LEASE)`..=`[`MAX_LEASE`](crate::MAX_LEASE)
    /// (30 ms to 365 days) is reported by the acquiring call as
    /// [`ErrorKind::InvalidConfig`], before any I/O.
    pub fn with_lease(&self, lease: Duration) -> FairMutex {
        FairMutex {
            fixed_lease: Some(lease),
            ..self.clone()
        }
    }

    /// Waits in FIFO order, as long as it takes, and returns the guard.
    /// A thread that already holds the lock gets a second guard at once.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`], [`ErrorKind::InvalidConfig`] (bad fixed
    /// lease), [`ErrorKind::Connection`] when Redis fails while waiting,
    /// [`ErrorKind::KeyConflict`]. A call that fails after it was sent may
    /// still have taken effect in Redis (a timeout, a connection lost
    /// mid-call): whatever it took or queued is given back by the client
    /// as soon as Redis answers again, never left as a hold nobody releases.
    pub fn lock(&self) -> Result<FairMutexGuard> {
        self.wait(None, None)?.ok_or_else(|| {
            Error::new(
                ErrorKind::Server,
                "an unbounded wait ended without the lock",
            )
        })
    }

    /// Takes the lock only if that needs no waiting: it is free and nobody
    /// is queued for it (never ahead of a queued waiter), or this thread
    /// already holds it. Never joins the queue.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<FairMutexGuard>> {
        let waiter = self.waiter()?;
        let (lease, fixed) = self.lease()?;
        self.attempt(&waiter, Mode::Try, lease, fixed)
            .inspect_err(|_| self.give_back_later(&waiter))
    }

    /// Waits in FIFO order for at most `timeout`. On timeout the queue entry
    /// is removed before returning `Ok(None)`, so nobody behind is delayed;
    /// if the lock was handed over in that last instant, the guard is
    /// returned instead.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<FairMutexGuard>> {
        self.wait_at_most(Some(timeout), None)
    }

    /// Waits in FIFO order until the lock is ours, `timeout` passes (`None`:
    /// no limit) or `cancel` is cancelled from another thread. On timeout or
    /// cancellation the queue entry is removed before returning `Ok(None)`,
    /// as with [`try_lock_for`](Self::try_lock_for); if the lock was handed
    /// over in that last instant, the guard is returned instead.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    pub fn lock_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<FairMutexGuard>> {
        self.wait_at_most(timeout, Some(cancel))
    }

    /// A wait bounded by `timeout` (`None`: none) and `cancel`; one that
    /// could not wait at all is a plain `try_lock`, which never queues.
    fn wait_at_most(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&WaitCanceller>,
    ) -> Result<Option<FairMutexGuard>> {
        if timeout == Some(Duration::ZERO) || cancel.is_some_and(WaitCanceller::is_cancelled) {
            return self.try_lock();
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        self.wait(deadline, cancel)
    }

    /// True when some thread, anywhere, holds the lock.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`], [`ErrorKind::Connection`].
    pub fn is_locked(&self) -> Result<bool> {
        Ok(self.status(0)?.holder.is_some())
    }

    /// True when the calling thread (through this client) holds the lock.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many guards the calling thread holds on this lock (0 if none).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn hold_count(&self) -> Result<u32> {
        let shared = self.shared();
        let owner = shared.owner_id();
        // Only a hold this thread has a live guard of counts as its own.
        let live = shared.holds.live_token(self.keys()?.lock(), &owner);
        Ok(match self.status(0)?.holder {
            Some(holder) if holder.who.owner == owner && holder.fencing_token == live => {
                holder.hold_count
            }
            _ => 0,
        })
    }

    /// Lease left on the current hold, whoever holds it; `None` when free.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        Ok(self.status(0)?.holder.and_then(|h| h.remaining_lease))
    }

    /// Number of live waiters queued (dead ones not yet removed are not counted).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn queue_len(&self) -> Result<usize> {
        Ok(self.status(0)?.queue_len)
    }

    /// Everything about the lock in one atomic read: the holder (owner id,
    /// hold count, token, lease left), the first `max_waiters` queued
    /// waiters in order with the liveness each has left, the live queue
    /// length and the last fencing token. Costs O(log N + max_waiters).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn status(&self, max_waiters: usize) -> Result<LockStatus> {
        let limit = Status { limit: max_waiters };
        Ok(LockStatus::from_reply(
            self.shared().call(self.keys()?, &limit)?,
        ))
    }

    /// Frees the lock whoever holds it and hands it to the next waiter.
    /// Returns true if it was held. The old holder's guard then reports a
    /// lost lease. Meant for operators clearing a stuck lock.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn force_unlock(&self) -> Result<bool> {
        Ok(self.force_unlock_holder()?.is_some())
    }

    /// As [`force_unlock`](Self::force_unlock), and says who held the lock
    /// at the moment it was freed (read in the same atomic step).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    pub fn force_unlock_holder(&self) -> Result<Option<Participant>> {
        let shared = self.shared();
        // A call key, so that the call delivered twice frees the lock once.
        let op = ForceRelease {
            call_key: format!("{}#{}", shared.client_id, shared.next_wait_id()),
        };
        let (holder, shortfall) = shared.call_write(self.keys()?, &op)?;
        match shortfall {
            Some(shortfall) => Err(shortfall),
            None => Ok(holder.map(|owner| Participant { owner })),
        }
    }

    fn shared(&self) -> &Shared {
        &self.client.shared
    }

    fn keys(&self) -> Result<&Arc<LockKeys>> {
        self.keys.as_ref().map_err(Error::clone)
    }

    /// (lease, fixed) of this handle's acquisitions.
    fn lease(&self) -> Result<(Duration, bool)> {
        match self.fixed_lease {
            None => Ok((self.shared().config.lease, false)),
            Some(lease) => check_lease("a fixed lease", lease).map(|()| (lease, true)),
        }
    }

    /// A new call of this thread on this lock, with its own wait id.
    fn waiter(&self) -> Result<Arc<Waiter>> {
        let keys = Arc::clone(self.keys()?);
        let (lease, fixed) = self.lease()?;
        let shared = self.shared();
        Ok(Arc::new(Waiter::new(
            shared.next_wait_id(),
            keys,
            shared.owner_id(),
            (!fixed).then_some(lease),
        )))
    }

    /// Waits in the queue until `deadline` (`None`: no limit) or `cancel`.
    fn wait(
        &self,
        deadline: Option<Instant>,
        cancel: Option<&WaitCanceller>,
    ) -> Result<Option<FairMutexGuard>> {
        let waiter = self.waiter()?;
        let (lease, fixed) = self.lease()?;
        let shared = self.shared();
        // Registered before the first attempt reaches Redis, so that no
        // handoff message can arrive for an id nobody listens to.
        shared.waiters.insert(Arc::clone(&waiter));
        if let Some(cancel) = cancel {
            cancel.watch(&waiter);
        }
        let result = self.wait_in_queue(&waiter, deadline, lease, fixed);
        shared.waiters.remove(waiter.id);
        result
    }

    fn wait_in_queue(
        &self,
        waiter: &Waiter,
        deadline: Option<Instant>,
        lease: Duration,
        fixed: bool,
    ) -> Result<Option<FairMutexGuard>> {
        let mut mode = Mode::First;
        let mut outage = Outage::default();
        loop {
            match self.attempt(waiter, mode, lease, fixed) {
                Ok(Some(guard)) => return Ok(Some(guard)),
                Ok(None) => outage = Outage::default(),
                Err(err) if err.is_connection() => {
                    // Redis is unreachable or stalled. A first attempt says
                    // so at once; a queued call rides out a restart or a
                    // failover for a while, as its place (or a new one) is
                    // still there when Redis is back. A cleanup call would
                    // only wait out the same timeout: without this client's
                    // heartbeat the entry lapses within waiter_timeout.
                    let patience = self.shared().config.outage_patience();
                    match outage.retry_at(patience) {
                        Some(at) if mode == Mode::Poll => {
                            log::debug!("fairlock: waiting through an outage: {err}");
                            waiter.poll_by(at);
                        }
                        _ => {
                            // The call may still run (or have run) in
                            // Redis: whatever it took or queued goes back
                            // once Redis answers.
                            self.give_back_later(waiter);
                            return Err(err);
                        }
                    }
                }
                Err(err) => {
                    // Leave nothing behind (Redis answered, with an error).
                    return match self.leave_queue(waiter, lease, fixed) {
                        Ok(Some(guard)) => Ok(Some(guard)),
                        _ => Err(err),
                    };
                }
            }
            mode = Mode::Poll;
            match waiter.sleep(deadline) {
                Wake::Granted(grant) => {
                    if let Err(err) = self.confirm_handoff(waiter, grant.token, lease, fixed) {
                        if !err.is_lease_lost() {
                            self.give_back_later(waiter);
                        }
                        return Err(err);
                    }
                    return Ok(Some(self.guard(waiter, grant.token, grant.expires_at)));
                }
                Wake::Poll => {}
                Wake::TimedOut => return self.leave_queue(waiter, lease, fixed),
            }
        }
    }

    /// One run of the acquire script. Returns the guard when acquired;
    /// otherwise schedules the waiter's next poll.
    fn attempt(
        &self,
        waiter: &Waiter,
        mode: Mode,
        lease: Duration,
        fixed: bool,
    ) -> Result<Option<FairMutexGuard>> {
        let shared = self.shared();
        let op = Acquire {
            owner: &waiter.owner,
            lease,
            fixed,
            waiter_timeout: shared.config.waiter_timeout,
            mode,
            wait_id: waiter.id,
            // Re-entry needs a live guard of the hold in this client.
            live_token: shared.holds.live_token(waiter.keys.lock(), &waiter.owner),
        };
        let sent = Instant::now();
        if mode == Mode::First {
            // Any handoff comes after this request has queued the waiter.
            waiter.saw_queued(sent, 0);
        }
        match shared.call_write(&waiter.keys, &op)? {
            (AcquireReply::Acquired { token, pttl_ms }, shortfall) => self
                .acquired(waiter, token, pttl_ms, sent, shortfall)
                .map(Some),
            // A queue entry too few replicas saw costs at most its place
            // after a failover; the wait goes on.
            (
                AcquireReply::Waiting {
                    pttl_ms,
                    position,
                    last_token,
                },
                _,
            ) => {
                if position.is_some() {
                    waiter.saw_queued(sent, last_token);
                }
                waiter.schedule_after_reply(position, pttl_ms);
                Ok(None)
            }
        }
    }

    /// The guard of a hold this call was answered with (the request sent
    /// at `sent`, `pttl_ms` of lease left then), unless too few replicas
    /// saw it: then it is given back.
    fn acquired(
        &self,
        waiter: &Waiter,
        token: u64,
        pttl_ms: i64,
        sent: Instant,
        shortfall: Option<Error>,
    ) -> Result<FairMutexGuard> {
        if let Some(shortfall) = shortfall {
            self.roll_back(waiter);
            return Err(shortfall);
        }
        let lease_left = Duration::from_millis(u64::try_from(pttl_ms).unwrap_or(0));
        Ok(self.guard(waiter, token, sent + lease_left))
    }

    /// Removes the waiter's queue entry; returns the guard instead if the
    /// lock had been handed over already. If that fails, the watchdog gives
    /// the call back later (it may have been handed the lock meanwhile).
    fn leave_queue(
        &self,
        waiter: &Waiter,
        lease: Duration,
        fixed: bool,
    ) -> Result<Option<FairMutexGuard>> {
        let op = Cancel {
            owner: &waiter.owner,
            lease,
            fixed,
            wait_id: waiter.id,
        };
        let sent = Instant::now();
        match self.shared().call_write(&waiter.keys, &op) {
            Ok((CancelReply::Kept { token, pttl_ms }, shortfall)) => self
                .acquired(waiter, token, pttl_ms, sent, shortfall)
                .map(Some),
            Ok((CancelReply::Left, _)) => Ok(None),
            Err(err) => {
                self.give_back_later(waiter);
                Err(err)
            }
        }
    }

    /// Has the watchdog give back whatever this waiter's call holds or
    /// queued, once Redis answers (see [`GiveBacks`](crate::give_backs)).
    fn give_back_later(&self, waiter: &Waiter) {
        self.shared()
            .give_back_later(&waiter.keys, &waiter.owner, waiter.id);
    }

    /// With `sync_replicas`, makes sure enough replicas saw the handoff that
    /// granted `token` before the waiter returns: one renewal (a write,
    /// which leaves a fixed lease as it is) and a `WAIT`, in one round trip.
    /// On a shortfall the lock is given back.
    fn confirm_handoff(
        &self,
        waiter: &Waiter,
        token: u64,
        lease: Duration,
        fixed: bool,
    ) -> Result<()> {
        let shared = self.shared();
        if shared.config.sync_replicas.is_none() {
            return Ok(());
        }
        let op = Renew {
            owner: &waiter.owner,
            token,
            lease: (!fixed).then_some(lease),
        };
        let (renewed, shortfall) = shared.call_write(&waiter.keys, &op)?;
        if !renewed {
            return Err(Error::new(
                ErrorKind::LeaseLost,
                format!(
                    "lock {:?} was handed over but lost before it was confirmed",
                    self.name
                ),
            ));
        }
        match shortfall {
            None => Ok(()),
            Some(shortfall) => {
                self.roll_back(waiter);
                Err(shortfall)
            }
        }
    }

    /// Gives back the hold this waiter's call took, which is not to be used
    /// (now, or through the watchdog if Redis fails meanwhile).
    fn roll_back(&self, waiter: &Waiter) {
        self.shared()
            .give_back_now(&waiter.keys, &waiter.owner, waiter.id);
    }

    fn guard(&self, waiter: &Waiter, token: u64, expires_at: Instant) -> FairMutexGuard {
        let hold = Hold::new(
            Arc::clone(&waiter.keys),
            waiter.owner.clone(),
            token,
            expires_at,
        );
        let shared = self.shared();
        let renewed = self.renewed_by_watchdog();
        let hold = shared.holds.register(hold, renewed);
        if renewed && expires_at < Instant::now() + 2 * shared.config.watchdog_period() {
            shared.nudge_watchdog();
        }
        FairMutexGuard::new(self.clone(), hold, waiter.id)
    }

    /// True when this handle's holds are renewed by the watchdog (and so
    /// registered with it), false for a fixed lease.
    pub(crate) fn renewed_by_watchdog(&self) -> bool {
        self.fixed_lease.is_none()
    }

    pub(crate) fn client(&self) -> &Arc<ClientInner> {
        &self.client
    }
}

impl std::fmt::Debug for FairMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairMutex")
            .field("name", &self.name)
            .field("fixed_lease", &self.fixed_lease)
            .finish_non_exhaustive()
    }
}
