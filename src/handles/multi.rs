//! All-or-nothing locks over several names. Every client takes the parts
//! of a multi-lock in one global order (by their keys), so no two
//! multi-locks, however their sets overlap and whatever order their
//! callers named them in, can each hold a part the other waits for: no
//! deadlock, and each name stays FIFO. A call that gives up (timeout,
//! cancellation, an error) releases what it took and leaves no queue entry.

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::handles::kind;
use crate::handles::lock::{forever, Guard, Settings};
use crate::handles::ownership::{Bound, Ownership, Unbound};
use crate::handles::semaphore::permits_ask;
use crate::handles::AnyGuard;
use crate::machinery::caller::call_hold::give_back;
use crate::machinery::caller::target::Target;
use crate::machinery::caller::wait::Wait;
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::protocol::{Access, Ask, LockKind};

/// Several locks taken together, all or none: mutexes by name, the reads
/// or writes of reader-writer locks, and permits of semaphores. Made by
/// [`Client::fair_multi_lock`](crate::Client::fair_multi_lock); cheap to
/// clone, `Send + Sync`. Unbound by [default](crate::Ownership#which-is-the-default), so its guard is `Send +
/// 'static`; [`bound`](Self::bound) takes every part for the calling
/// thread (re-entering what it holds). It shares only its lease settings
/// with the locks of one name ([`FairLock`](crate::FairLock)).
///
/// Deadlock-free between any number of clients taking overlapping sets in
/// any order: the parts are always taken in one order every client shares
/// (their keys'), each in its own FIFO queue. While it waits for a later
/// part, a call holds the earlier ones. On Redis Cluster the parts may live
/// on different masters. Every part is taken with this set's lease
/// settings ([`with_fixed_lease`](Self::with_fixed_lease),
/// [`with_max_hold`](Self::with_max_hold)).
///
/// Its methods: the set, [`and_mutex`](Self::and_mutex),
/// [`and_read`](Self::and_read), [`and_write`](Self::and_write),
/// [`and_permits`](Self::and_permits); the ways to take it,
/// [`lock`](Self::lock), [`try_lock`](Self::try_lock),
/// [`try_lock_for`](Self::try_lock_for), [`lock_with`](Self::lock_with);
/// its settings, [`with_fixed_lease`](Self::with_fixed_lease),
/// [`with_max_hold`](Self::with_max_hold), [`bound`](Self::bound),
/// [`unbound`](Self::unbound). Its guard is a [`MultiGuard`].
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let transfer = client
///     .fair_multi_lock(["account:17", "account:4"])
///     .and_read("rates");
/// if let Some(guard) = transfer.try_lock_for(Duration::from_secs(5))? {
///     for part in guard.parts() {
///         println!("{} with token {}", part.name(), part.fencing_token());
///     }
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FairMultiLock<O: Ownership = Unbound> {
    settings: Settings<O>,
    /// Each part, as its caller named it, with what it asks for.
    parts: Vec<(Target, Ask)>,
}

impl<O: Ownership> FairMultiLock<O> {
    pub(crate) fn new(settings: Settings<O>) -> Self {
        let parts = Vec::new();
        FairMultiLock { settings, parts }
    }

    /// The same set and the mutex `name`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let both = client.fair_multi_lock(["account:17"]).and_mutex("account:4");
    /// let guard = both.lock()?;
    /// assert!(guard.fencing_token("account:4").is_some());
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_mutex(self, name: &str) -> Self {
        self.and(name, Ask::Mutex)
    }

    /// The same set and a read of the reader-writer lock `name` (shared
    /// with other readers). A name both read and written is written.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.and_read("rates").lock()?; // rates shared with other readers
    /// assert_eq!(guard.parts().len(), 3);
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_read(self, name: &str) -> Self {
        self.and(name, Ask::RwLock(Access::Read))
    }

    /// The same set and a write of the reader-writer lock `name`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let rebuild = client.fair_multi_lock(["catalog-import"]).and_write("catalog");
    /// let guard = rebuild.lock()?; // the import alone, and catalog readers kept out
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_write(self, name: &str) -> Self {
        self.and(name, Ask::RwLock(Access::Write))
    }

    /// The same set and `n` permits of the semaphore `name` of `permits`
    /// (as [`fair_semaphore`](crate::Client::fair_semaphore)`(name,
    /// permits)`[`.acquire_many(n)`](crate::FairSemaphore::acquire_many) would take
    /// them, in its FIFO queue). A semaphore named twice is asked once for
    /// the sum. Its part's guard says how many it holds
    /// ([`num_permits`](Guard::num_permits)).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// // The dataset alone, and 2 of the 8 GPUs every job shares.
    /// let train = client.fair_multi_lock(["dataset:imagenet"]).and_permits("gpus", 8, 2);
    /// let guard = train.lock()?;
    /// assert!(guard.parts().iter().any(|part| part.num_permits() == 2));
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_permits(self, name: &str, permits: u32, n: u32) -> Self {
        self.and(name, Ask::Permits { n, of: permits })
    }

    fn and(mut self, name: &str, ask: Ask) -> Self {
        let target = Target::new(&self.settings.core.config().key_prefix, name, ask.kind());
        self.parts.push((target, ask));
        self
    }

    /// The same set, every part taken with a fixed `lease` that no watchdog
    /// renews (as [`FairLock::with_fixed_lease`](crate::FairLock::with_fixed_lease)
    /// for one lock).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let set = client.fair_multi_lock(["a", "b"]).with_fixed_lease(Duration::from_secs(60));
    /// let guard = set.lock()?; // both free themselves a minute after their grants
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn with_fixed_lease(&self, lease: Duration) -> Self {
        self.with(LeasePolicy::Fixed(lease))
    }

    /// The same set, every part renewed for at most `max_hold` from its
    /// grant (as [`FairLock::with_max_hold`](crate::FairLock::with_max_hold)
    /// for one lock).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let set = client.fair_multi_lock(["a", "b"]).with_max_hold(Duration::from_secs(600));
    /// let guard = set.lock()?; // each part passed on 10 min after its grant at the latest
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(&self, max_hold: Duration) -> Self {
        self.with(LeasePolicy::Renewed(Some(max_hold)))
    }

    /// The same set, its parts taken by calls that are not bound to a
    /// thread (the default): its guard may move to any thread (see
    /// [`Unbound`]).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_multi_lock(["a", "b"]).bound().unbound().lock()?;
    /// std::thread::spawn(move || guard.unlock()).join().expect("worker")?;
    /// # Ok(()) }
    /// ```
    pub fn unbound(&self) -> FairMultiLock<Unbound> {
        self.with(self.settings.policy)
    }

    /// The same set, its parts taken for the calling thread: re-entering
    /// what the thread holds, its guard staying on that thread (see
    /// [`Bound`]).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let outer = client.fair_mutex("a").lock()?;
    /// let both = client.fair_multi_lock(["a", "b"]).bound().lock()?; // "a" re-entered
    /// drop((both, outer));
    /// # Ok(()) }
    /// ```
    pub fn bound(&self) -> FairMultiLock<Bound> {
        self.with(self.settings.policy)
    }

    fn with<P: Ownership>(&self, policy: LeasePolicy) -> FairMultiLock<P> {
        let settings = self.settings.with(policy);
        let parts = self.parts.clone();
        FairMultiLock { settings, parts }
    }

    /// Waits as `wait` says, part after part in the shared order, for all
    /// the parts together: the general form of every way to lock a set.
    /// `Ok(None)` when the wait ended first: the parts taken so far are
    /// released and the waiting one leaves its queue before it returns,
    /// so nothing is left held or queued. A duration counts for the whole
    /// set, from the call's start; a wait that ends while a part's request
    /// is out asks for no later part (one that cannot wait at all, as
    /// `try_lock`'s, tries each part once).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) for an
    /// empty set (or a bad lease),
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName) for a bad
    /// name: both before any I/O.
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost), naming it,
    /// for a part lost while the set waited for a later one (a part taken
    /// before the client's connection to Redis came back from a gap, a
    /// restart say, is asked about before the call returns; a wait that
    /// gave up in an outage meanwhile is said with the loss): retryable
    /// ([`is_retryable`](crate::Error::is_retryable)), as every part is
    /// given back and taking the set again may succeed. Otherwise as
    /// [`FairMutex::lock_with`](crate::FairMutex::lock_with), and what a
    /// part's own call returns (a semaphore part's
    /// [`ErrorKind::PermitsMismatch`](crate::ErrorKind::PermitsMismatch) or
    /// [`ErrorKind::PermitsExceeded`](crate::ErrorKind::PermitsExceeded));
    /// the parts taken so far are released first.
    ///
    /// ```no_run
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let cancel = fairlock::WaitCanceller::new();
    /// let on_shutdown = cancel.clone();
    /// std::thread::spawn(move || on_shutdown.cancel());
    /// if let Some(guard) = transfer.lock_with(Wait::forever().cancelled_by(&cancel))? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_with(&self, wait: impl Into<Wait>) -> Result<Option<MultiGuard<O>>> {
        let parts = self.ordered()?;
        let (started, count) = (Instant::now(), parts.len());
        let wait = wait.into().fixed_from_now();
        let (end, could_wait) = (wait.ends_by(), wait.deadline().is_ok());
        let mut held = Vec::with_capacity(count);
        for (target, ask) in parts {
            // A wait that ended (its deadline, its cancel) while a part's
            // request was out asks for no later part: one try each is for a
            // set that could not wait from the start.
            if could_wait && !held.is_empty() && wait.deadline().is_err() {
                release_taken(held, &wait);
                return Ok(None);
            }
            match self.settings.request(target, ask, None, &wait) {
                Ok(Some(part)) => held.push(part),
                got => {
                    // A later part's request cut short by the set's end had
                    // only what was left of it: its figure says nothing of
                    // Redis.
                    let ended = end.is_some_and(|end| Instant::now() >= end);
                    let got = got.map_err(|err| match held.len() {
                        taken @ 1.. if ended && err.is_timeout() => {
                            err.without_its_figure().during(format_args!(
                                "acquire of a multi-lock of {count} parts: its wait ended {} ms \
                                 in while the request for part {} had no reply ({taken} taken \
                                 before it given back)",
                                end.map_or(0, |end| end.duration_since(started).as_millis()),
                                taken + 1
                            ))
                        }
                        _ => err,
                    });
                    // A part lost meanwhile is what the caller hears when
                    // the wait met an outage (as an upgrade's loss is), the
                    // outage said with it.
                    let got = got.map_err(|err| match held.iter().find(|p| p.is_lease_lost()) {
                        Some(lost) => part_lost(
                            (lost.hold).lost_meanwhile(err, "multi-lock's wait for a later part"),
                        ),
                        None => err,
                    });
                    release_taken(held, &wait);
                    return got.map(|_| None);
                }
            }
        }
        // A part taken before the client's connection to Redis came back
        // from a gap (a restart, a failover) and not confirmed since may
        // have been lost with the server's data: asked about now, not left
        // to the watchdog's check, which a set granted its last part at once
        // by the same server may beat.
        let gap = (held.iter()).find_map(|part| part.hold.check_after_gap(end).err());
        // Then a part lost while the set waited for a later one (its fixed
        // lease or maximum hold ran out, a force release, the server's data)
        // is not held: all or none. Either gives every part back.
        let lost = || held.iter().find(|part| part.is_lease_lost());
        if let Some(err) = gap.or_else(|| lost().map(|part| part_lost(part.hold.lost()))) {
            release_taken(held, &wait);
            return Err(err);
        }
        Ok(Some(MultiGuard { parts: held }))
    }

    /// Waits, part after part in the shared order, as long as it takes;
    /// returns once every part is held.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?; // both accounts, deadlock-free whatever order others name them in
    /// move_money(guard.fencing_token("account:17"), guard.fencing_token("account:4"));
    /// guard.unlock()?;
    /// # fn move_money(_: Option<u64>, _: Option<u64>) {}
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<MultiGuard<O>> {
        forever(self.lock_with(Wait::forever()))
    }

    /// Takes every part only if none needs waiting; otherwise releases
    /// what it took and returns `None`. Never joins a queue.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// match transfer.try_lock()? {
    ///     Some(guard) => guard.unlock()?,
    ///     None => println!("one of them is busy; nothing held, nothing queued"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<MultiGuard<O>>> {
        self.lock_with(Wait::not_at_all())
    }

    /// Waits at most `timeout` for all the parts together.
    ///
    /// # Errors
    /// As [`lock_with`](Self::lock_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// match transfer.try_lock_for(Duration::from_secs(5))? {
    ///     Some(guard) => guard.unlock()?,
    ///     None => println!("not all within 5 s; nothing held, nothing queued"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MultiGuard<O>>> {
        self.lock_with(Wait::at_most(timeout))
    }

    /// The parts in the order every client takes them: by key, each name
    /// once (a write over a read of the same rwlock; a semaphore's permits
    /// summed), each checked (a semaphore's permits and `n`, before any
    /// I/O).
    fn ordered(&self) -> Result<Vec<(&Target, Ask)>> {
        let empty = "a multi-lock needs at least one name";
        if self.parts.is_empty() {
            return Err(Error::invalid_config(empty));
        }
        let mut parts = (self.parts.iter())
            .map(|(target, ask)| Ok((target.keys_for("acquire")?.lock(), target, *ask)))
            .collect::<Result<Vec<_>>>()?;
        // Writes first among equal keys, so that each lock's first part is
        // the one kept.
        parts.sort_by_key(|&(key, _, ask)| (key, Reverse(ask.exclusive())));
        // Each lock once: a write is kept over a read; a semaphore's permits
        // add up, checked as one call's.
        (parts.chunk_by(|a, b| a.0 == b.0))
            .map(|same| match same[0] {
                (_, target, Ask::Permits { of, .. }) => {
                    // Named by its call and lock, as every call's error.
                    let named = |err| target.during("acquire", err);
                    let asks = same.iter().map(|part| part.2);
                    if let Some(other) = asks.clone().map(Ask::capacity).find(|&n| n != of) {
                        let message =
                            format!("named in the set with {of} and with {other} permits");
                        return Err(named(Error::invalid_config(message)));
                    }
                    let n = asks.map(Ask::permits).fold(0, u32::saturating_add);
                    let summed = |err: Error| match same.len() {
                        1 => err,
                        k => err.during(format_args!(
                            "its {k} parts in the set asked as one, for the sum"
                        )),
                    };
                    let ask = permits_ask(n, of).map_err(|err| named(summed(err)))?;
                    Ok((target, ask))
                }
                (_, target, ask) => Ok((target, ask)),
            })
            .collect()
    }
}

/// The error of a multi-lock's call that lost a part while it waited for a
/// later one, when `err` is that loss (`LeaseLost`, naming the part): said
/// of the set, and worth calling again, as every part is given back.
fn part_lost(err: Error) -> Error {
    if !err.is_lease_lost() {
        return err;
    }
    err.during(format_args!("acquire of a multi-lock"))
        .worth_calling_again()
}

/// Releases the parts a call took before it gave up or failed, the last
/// taken first, all by the wait's end (a cancel's: now), or now if that
/// has passed, and a round trip of each part's link beyond a leave's
/// grace (`call_hold::give_back`): on a slow link each release is
/// answered before the call returns; in a stall it still returns on time.
/// Without an end, all within one command timeout, as a guard's drop.
fn release_taken<O: Ownership>(mut held: Vec<AnyGuard<O>>, wait: &Wait) {
    let parts = held.iter_mut().rev().map(|part| &mut part.hold).collect();
    give_back(parts, wait.ends_by());
}

/// Every part of a [`FairMultiLock`], held together until
/// [`unlock`](Self::unlock)ed or dropped (every part released best effort,
/// all within one command timeout, as one guard's drop). `Send + Sync +
/// 'static`: it may be released on any thread.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_multi_lock(["account:17", "account:4"]).lock()?;
/// std::thread::spawn(move || {
///     // ... the transfer, on another thread ...
///     guard.unlock()
/// })
/// .join()
/// .expect("worker")?;
/// # Ok(()) }
/// ```
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::MultiGuard>();
/// ```
#[must_use = "if unused the locks are released immediately"]
#[derive(Debug)]
pub struct MultiGuard<O: Ownership = Unbound> {
    parts: Vec<AnyGuard<O>>,
}

impl<O: Ownership> MultiGuard<O> {
    /// The parts, in the order they were taken: each with its name, its
    /// fencing token, its lease signal and (for a rwlock) its access.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?;
    /// for part in guard.parts() {
    ///     println!("{}: token {}", part.name(), part.fencing_token()); // account:17 and account:4, in key order
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn parts(&self) -> &[AnyGuard<O>] {
        &self.parts
    }

    /// The fencing token of the part `name` (a mutex's, a rwlock's read or
    /// write, a semaphore's permits), if the set has one part of that
    /// name. `None` as well when it has several (the mutex and the rwlock
    /// of one name are two locks, each counting its own tokens): find each
    /// in [`parts`](Self::parts) by its [`lock_kind`](Guard::lock_kind).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?;
    /// assert!(guard.fencing_token("account:4").is_some());
    /// assert_eq!(guard.fencing_token("account:99"), None);
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self, name: &str) -> Option<u64> {
        let mut named = self.parts.iter().filter(|part| part.name() == name);
        let part = named.next()?;
        named.next().is_none().then(|| part.fencing_token())
    }

    /// True once any part's lease is known to be gone.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?;
    /// if guard.is_lease_lost() {
    ///     return Ok(()); // stop before writing either account
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.parts.iter().any(Guard::is_lease_lost)
    }

    /// True once someone asked any part to let go (a revocation of any of
    /// its names); each part's own is its
    /// [`revocation_signal`](Guard::revocation_signal).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_multi_lock(["account:17", "account:4"]).lock()?;
    /// if guard.is_revoked() {
    ///     guard.unlock()?; // someone needs one of them: let go early
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_revoked(&self) -> bool {
        self.parts.iter().any(Guard::is_revoked)
    }

    /// Releases every part, the last taken first, all within one command
    /// timeout (the watchdog gives back what is not released by then);
    /// reports the first error after trying them all.
    ///
    /// # Errors
    /// As [`Guard::unlock`], for any part.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// transfer.lock()?.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        self.release_parts().map_err(Error::of_a_consumed_guard)
    }

    /// Releases every part, the last taken first, all within one command
    /// timeout, as one guard; what is not released by then the watchdog
    /// gives back. The first error, after trying them all: a part sent
    /// after others and cut short by the timeout they share says so, not
    /// its own figure (what was left of it), which says nothing of Redis.
    fn release_parts(&mut self) -> Result<()> {
        let Some(first) = self.parts.first() else {
            return Ok(());
        };
        let (parts, timeout) = (self.parts.len(), first.hold.client.config().command_timeout);
        let end = Instant::now() + timeout;
        let (mut released, mut failed) = (0, None);
        for (tried, mut part) in self.parts.drain(..).rev().enumerate() {
            match part.hold.release_by(end) {
                Ok(()) => released += 1,
                Err(err) => failed = failed.or(Some((tried, err))),
            }
        }
        match failed {
            None => Ok(()),
            Some((tried, err)) if tried > 0 && err.is_timeout() && Instant::now() >= end => {
                Err(err.without_its_figure().during(format_args!(
                    "unlock of a multi-lock of {parts} parts: its releases had one command \
                     timeout ({timeout:?}) all told, {released} released by then, the watchdog \
                     gives back the rest once redis answers; the first not released"
                )))
            }
            Some((_, err)) => Err(err),
        }
    }
}

impl<O: Ownership> Guard<kind::Any, O> {
    /// The access of a reader-writer lock's hold (a read, an upgradable
    /// read or the write); `None` for a hold of another kind.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_multi_lock(["account:17"]).and_read("rates").lock()?;
    /// for part in guard.parts() {
    ///     println!("{}: {:?}", part.name(), part.access()); // None, then Some(Read)
    /// }
    /// # Ok(()) }
    /// ```
    pub fn access(&self) -> Option<Access> {
        self.hold.call.ask.access()
    }

    /// The kind of lock it holds: the parts of a multi-lock that names
    /// one name as locks of several kinds are told apart by it.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_multi_lock(["a"]).and_read("a").lock()?;
    /// for part in guard.parts() {
    ///     println!("{:?} a: token {}", part.lock_kind(), part.fencing_token());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_kind(&self) -> LockKind {
        self.hold.call.keys.kind()
    }

    /// The permits a semaphore's hold takes; 1 for a hold of another kind.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_multi_lock(["job:7"]).and_permits("gpus", 8, 2).lock()?;
    /// assert!(guard.parts().iter().any(|part| part.num_permits() == 2));
    /// # Ok(()) }
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.hold.call.ask.permits()
    }
}

impl<O: Ownership> Drop for MultiGuard<O> {
    /// As unlock does; an error is logged, but for a part found gone (its
    /// loss was logged).
    fn drop(&mut self) {
        let err = self.release_parts().err();
        if let Some(err) = err.filter(|err| !err.is_lease_lost()) {
            log::warn!("fairlock: releasing a multi-lock on drop failed: {err}");
        }
    }
}
