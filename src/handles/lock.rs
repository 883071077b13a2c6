//! `FairLock<K, O>`: every lock of one name, written once. The kind `K`
//! says what the lock is (its own requests are an `impl` block of its own,
//! one file per kind), the ownership `O` who owns what its calls take; what
//! every lock has (its lease settings, its ownership, its name, status,
//! force unlock and revocation) is here, in the one block that comes first
//! on its page; with the settings a multi-lock shares.
//!
//! Then `Guard<K, O>`: proof of one hold, of any kind, released on drop. What
//! every guard has is written here once; a kind's own methods (a permit's
//! number, a rwlock hold's access and its upgrade or downgrade, a
//! leadership's term and value) live beside that kind's requests, each on
//! the guards it means something for.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::handles::kind::{self, HoldKind, Kind, OneLock};
use crate::handles::ownership::{Bound, Ownership, Unbound};
use crate::handles::signals::{LeaseSignal, RevocationSignal};
use crate::handles::status::Status;
use crate::machinery::caller::call_hold::CallHold;
use crate::machinery::caller::target::Target;
use crate::machinery::caller::wait::Wait;
use crate::machinery::core::Core;
use crate::machinery::holds::lease_policy::LeasePolicy;
use crate::protocol::{Ask, LockKind};

/// A fair lock of kind `K`, whose acquisitions are owned as `O` says: a
/// handle made by a [`Client`](crate::Client) without I/O, cheap to clone,
/// `Send + Sync`.
///
/// The everyday names are its aliases: [`FairMutex`](crate::FairMutex),
/// [`FairSemaphore`](crate::FairSemaphore), [`FairRwLock`](crate::FairRwLock)
/// and [`Election`](crate::Election); several locks taken together are a
/// [`FairMultiLock`](crate::FairMultiLock), a type of its own. Its methods
/// come in the order a reader looks for them: first what every lock has
/// (the lease settings, the ownership, the name, status, force unlock and
/// revocation), then one block per kind: the mutex's, the semaphore's, the
/// reader-writer lock's and the election's, each with every way of waiting
/// ([`Wait`]) in both ownership modes ([`Bound`], [`Unbound`]).
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let export = client
///     .fair_mutex("nightly-export")
///     .with_max_hold(Duration::from_secs(600)) // renewed for at most 10 min
///     .unbound(); // guards that move to other threads
/// let guard = export.lock()?;
/// std::thread::spawn(move || guard.unlock()).join().expect("worker")?;
/// println!("{} waiting", export.queue_len()?);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FairLock<K: Kind, O: Ownership = <K as Kind>::Owner> {
    pub(crate) settings: Settings<O>,
    /// The lock's name and keys.
    pub(crate) target: Target,
    pub(crate) kind: K,
}

impl<K: Kind, O: Ownership> FairLock<K, O> {
    pub(crate) fn new(settings: Settings<O>, target: Target, kind: K) -> Self {
        FairLock {
            settings,
            target,
            kind,
        }
    }

    /// The same lock, its holds taken with a fixed `lease` that no watchdog
    /// renews: each ends by itself `lease` after it was granted (it may be
    /// released before). It replaces a [maximum hold](Self::with_max_hold)
    /// set before (a fixed lease is its own maximum); a `with_max_hold`
    /// after it goes back to a renewed lease. Outside
    /// [`MIN_LEASE`](crate::MIN_LEASE)`..=`[`MAX_LEASE`](crate::MAX_LEASE)
    /// (30 ms to 365 days), each acquiring call reports
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) before
    /// any I/O. A call that waited in the queue counts the lease of the
    /// grant handed to it from the last request that saw it queued (the
    /// watchdog heartbeats it every third of `min(lease, waiter_timeout)`
    /// of the client; a call whose fixed lease is shorter than that asks
    /// again itself every third of its lease), so at least about two
    /// thirds of the lease are left when the grant arrives.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cron = client.fair_mutex("cron:cleanup").with_fixed_lease(Duration::from_secs(60));
    /// let guard = cron.lock()?; // frees itself a minute after the grant, renewed or not
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn with_fixed_lease(&self, lease: Duration) -> Self {
        self.with(LeasePolicy::Fixed(lease))
    }

    /// The same lock, each hold renewed for at most `max_hold` from its
    /// grant: past it the watchdog stops renewing, the guard's
    /// [`LeaseSignal`](crate::LeaseSignal) fires with
    /// [`LeaseEnd::MaxHold`](crate::LeaseEnd::MaxHold), and the lock passes
    /// on when the lease ends (the last renewal asks for no more than is
    /// left of `max_hold`, and the grant itself for no more than
    /// `max_hold` and a watchdog period). A hold that cannot outlive its
    /// purpose, even if its thread hangs. A thread's re-entry of its mutex
    /// joins the hold it re-enters and keeps that hold's maximum: through
    /// this handle, a re-entry of a hold taken without one is not capped.
    /// It replaces a [fixed lease](Self::with_fixed_lease)
    /// set before. Outside [`MIN_LEASE`](crate::MIN_LEASE)`..=`[`MAX_LEASE`](crate::MAX_LEASE),
    /// each acquiring call reports
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) before
    /// any I/O.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let export = client.fair_mutex("nightly-export").with_max_hold(Duration::from_secs(600));
    /// let guard = export.lock()?; // passed on 10 min after the grant at the latest
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(&self, max_hold: Duration) -> Self {
        self.with(LeasePolicy::Renewed(Some(max_hold)))
    }

    /// The same lock, acquired by calls that are not bound to a thread:
    /// each acquisition is an owner of its own, so its guard is `Send +
    /// Sync + 'static` and may be released or dropped on any thread, and it
    /// is never re-entered (the same thread asking again queues like any
    /// other caller, and waits for itself until its timeout). The watchdog
    /// renews it while the guard lives, wherever it is.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").unbound().write()?;
    /// std::thread::spawn(move || guard.unlock()).join().expect("worker")?;
    /// # Ok(()) }
    /// ```
    pub fn unbound(&self) -> FairLock<K, Unbound> {
        self.with(self.settings.policy)
    }

    /// The same lock, acquired by calls bound to their thread: re-entrant
    /// where the kind is, each guard staying on its thread (see [`Bound`]).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let reports = client.fair_mutex("nightly-report").unbound();
    /// let outer = reports.bound().lock()?;
    /// let inner = reports.bound().lock()?; // this thread's: re-entered at once
    /// drop((inner, outer));
    /// # Ok(()) }
    /// ```
    pub fn bound(&self) -> FairLock<K, Bound> {
        self.with(self.settings.policy)
    }

    fn with<P: Ownership>(&self, policy: LeasePolicy) -> FairLock<K, P> {
        let settings = self.settings.with(policy);
        FairLock::new(settings, self.target.clone(), self.kind.clone())
    }

    pub(crate) fn core(&self) -> &Core {
        &self.settings.core
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.fair_semaphore("uploads", 4).name(), "uploads");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.target.name()
    }

    /// Which primitive it is: the mutex, the semaphore, the reader-writer
    /// lock and the election of one name are four locks, in keys of their
    /// own.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.fair_rwlock("catalog").lock_kind(), fairlock::LockKind::RwLock);
    /// # Ok(()) }
    /// ```
    pub fn lock_kind(&self) -> LockKind {
        <K as kind::sealed::Kind>::KIND
    }

    /// Everything about the lock in one atomic read, whatever its kind:
    /// the first `max` holders (by lease end) and the first `max` queued
    /// waiters (in the order they will get it), the totals, its capacity
    /// and the last fencing token. Writes nothing; O(log N + max).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName) for an
    /// empty or oversized name, before any I/O; then what any call that
    /// reaches Redis may return:
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) (retryable)
    /// when Redis cannot be reached, does not answer in time or cannot
    /// serve now; [`ErrorKind::Auth`](crate::ErrorKind::Auth) when a new
    /// connection's credentials are refused;
    /// [`ErrorKind::Permission`](crate::ErrorKind::Permission) when an ACL
    /// denies a command, key or channel;
    /// [`ErrorKind::KeyConflict`](crate::ErrorKind::KeyConflict) and
    /// [`ErrorKind::FormatMismatch`](crate::ErrorKind::FormatMismatch) for
    /// someone else's data, or another build's, at the lock's keys;
    /// [`ErrorKind::Server`](crate::ErrorKind::Server) for a refusal
    /// fairlock has no kind for (`OOM`, `MISCONF`, a script's error).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.fair_mutex("nightly-report").status(10)?;
    /// if let Some(holder) = status.holder() {
    ///     println!("held by {} (token {})", holder.who, holder.fencing_token);
    /// }
    /// for (place, waiter) in status.waiters.iter().enumerate() {
    ///     println!("{place}: {}", waiter.who);
    /// }
    /// println!("{} waiting in all", status.queue_len);
    /// # Ok(()) }
    /// ```
    pub fn status(&self, max: usize) -> Result<Status> {
        Status::read(self.core(), &self.target, max)
    }

    /// True when anyone, anywhere, holds the lock (any hold: the mutex's
    /// holder, a permit, a read or a write, a leader).
    ///
    /// # Errors
    /// As [`status`](Self::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("held: {}", client.fair_rwlock("catalog").is_locked()?);
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        Ok(self.status(0)?.holder_count > 0)
    }

    /// Number of live waiters queued (dead ones not yet removed are not
    /// counted).
    ///
    /// # Errors
    /// As [`status`](Self::status).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// println!("{} waiting", client.fair_semaphore("uploads", 4).queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn queue_len(&self) -> Result<usize> {
        Ok(self.status(0)?.queue_len)
    }

    /// Frees every hold of the lock, whoever holds it, and hands it on to
    /// the queue in the same step (to as many waiters at its head as fit).
    /// Returns true if anything was held. Each old holder's guard reports a
    /// lost lease at once: its client is told by a message (its lease
    /// signal fired 0.3–0.5 ms after the call on loopback in
    /// `tests/revoke.rs`), or, should that message be lost, by its next
    /// renewal. Meant for
    /// operators clearing a lock a stuck process keeps renewing.
    ///
    /// # Errors
    /// As [`status`](Self::status); with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) when
    /// the change was made on the master but too few replicas saw it (not
    /// [retryable](crate::Error::is_retryable): sent again, it would act on
    /// whoever holds the lock then); nor is an
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) whose reply
    /// never came, as the change may have been made (read
    /// [`status`](Self::status) before sending it again).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if client.fair_mutex("nightly-report").force_unlock()? {
    ///     println!("freed what a stuck process held");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        Ok(self.core().force_release(&self.target)?.holds > 0)
    }

    /// Asks every current holder of the lock to let go, and returns how
    /// many holds it asked (0 when nobody held it). It frees nothing: each
    /// holder's [`RevocationSignal`](crate::RevocationSignal) fires (and
    /// [`Guard::is_revoked`](crate::Guard::is_revoked) turns true), and
    /// the holder releases when it is ready; one that never looks keeps
    /// the lock. Curator's revocation, for every kind: the mutex's holder,
    /// every permit and every read and write hold, the leader.
    ///
    /// The request covers the holds present when it reaches Redis (those
    /// whose fencing tokens are up to the last one issued, also after an
    /// upgrade or downgrade gives one a larger token), never a later one: it is recorded beside them, and each holder hears of it from
    /// a push message to its client (one round trip after this call, plus
    /// delivery) or, if that is lost, from its next renewal's reply. One
    /// round trip; it adds none to any other call. The request sent again
    /// (its reply lost, the process stopped and continued) answers as it
    /// first did and asks nobody else.
    ///
    /// # Errors
    /// As [`status`](Self::status); with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) when
    /// the change was made on the master but too few replicas saw it (not
    /// [retryable](crate::Error::is_retryable): sent again, it would act on
    /// whoever holds the lock then); nor is an
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) whose reply
    /// never came, as the change may have been made (read
    /// [`status`](Self::status) before sending it again).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let asked = client.fair_semaphore("gpu", 4).revoke()?;
    /// println!("asked {asked} holders to let go");
    /// # Ok(()) }
    /// ```
    pub fn revoke(&self) -> Result<usize> {
        self.core().revoke(&self.target)
    }
}

/// What every lock handle has, a multi-lock's too: the client's core,
/// the lease settings and the ownership `O` its acquisitions are taken
/// with. [`FairLock`] and [`FairMultiLock`](crate::FairMultiLock) share
/// nothing else, so this is their one common core.
#[derive(Clone)]
pub(crate) struct Settings<O> {
    pub(crate) core: Arc<Core>,
    pub(crate) policy: LeasePolicy,
    owner: PhantomData<O>,
}

impl<O: Ownership> Settings<O> {
    pub(crate) fn new(core: Arc<Core>, policy: LeasePolicy) -> Self {
        Settings {
            core,
            policy,
            owner: PhantomData,
        }
    }

    /// The same client's settings, with `policy`, owned as `P`.
    pub(crate) fn with<P: Ownership>(&self, policy: LeasePolicy) -> Settings<P> {
        Settings::new(Arc::clone(&self.core), policy)
    }

    /// One acquire call on `target` asking for `ask` under these settings,
    /// its unbound owner id tagged with `tag` (an election's value),
    /// waiting as `wait` says; the guard of what it got.
    pub(crate) fn request<H: HoldKind>(
        &self,
        target: &Target,
        ask: Ask,
        tag: Option<&str>,
        wait: &Wait,
    ) -> Result<Option<Guard<H, O>>> {
        let got = (self.core).acquire(target, ask, self.policy, O::UNBOUND, tag, wait)?;
        Ok(got.map(Guard::new))
    }
}

impl<O: Ownership> std::fmt::Debug for Settings<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("lease", &self.policy)
            .field("unbound", &O::UNBOUND)
            .finish()
    }
}

/// The guard of a wait that ends only with the lock (every way to wait
/// as long as it takes, an upgrade's too); one that returned without it
/// is a bug, an [`ErrorKind::Internal`].
pub(crate) fn forever<T>(got: Result<Option<T>>) -> Result<T> {
    let ended = "a wait without a limit ended without the lock";
    got?.ok_or_else(|| Error::new(ErrorKind::Internal, ended))
}

/// One hold of kind `K` ([`kind::Mutex`], [`kind::Semaphore`]'s permits,
/// [`kind::Read`], [`kind::Write`], [`kind::Election`]'s leadership, or
/// [`kind::Any`]), owned as `O` says, held until [`unlock`](Self::unlock)ed
/// or dropped. Its everyday names are its aliases:
/// [`FairMutexGuard`](crate::FairMutexGuard),
/// [`SemaphorePermit`](crate::SemaphorePermit),
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard),
/// [`Leadership`](crate::Leadership), [`AnyGuard`](crate::AnyGuard).
///
/// Dropping it releases the hold best-effort (errors are logged, never
/// panicked on, and the drop waits at most one command timeout before
/// leaving the release to the watchdog; the last guard of a client whose
/// handles are gone stops the client too, about one more while Redis does
/// not answer: see [`Client`](crate::Client)); `unlock` reports what a
/// drop cannot. The waiters a release admits get the lock at once. With
/// re-entry, a thread's mutex is free only when every guard of the thread
/// is gone. A guard never dropped (`std::mem::forget`, a reference cycle)
/// keeps its hold, and its client, as a forgotten `std::sync::MutexGuard`
/// keeps its mutex: the watchdog renews it for as long as the process
/// runs; [`force_unlock`](crate::FairLock::force_unlock) frees it.
///
/// A thread-bound ([`Bound`](crate::Bound)) guard of a re-entrant hold (a mutex's, a
/// read, a write, a leadership) is `Sync` but not `Send`: it stays on the
/// thread that took it, like `std::sync::MutexGuard`. A semaphore's permit
/// and every [`Unbound`](crate::Unbound) guard are `Send + Sync + 'static`.
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::SemaphorePermit>();
/// assert_send_sync_static::<fairlock::WriteGuard<fairlock::Unbound>>();
/// assert_send_sync_static::<fairlock::Leadership>();
/// ```
///
/// ```compile_fail,E0277
/// fn assert_send<T: Send>() {}
/// assert_send::<fairlock::ReadGuard>();
/// ```
#[must_use = "if unused the hold is released immediately"]
pub struct Guard<K: HoldKind, O: Ownership = <K as HoldKind>::Owner> {
    pub(crate) hold: CallHold,
    kind: PhantomData<Marks<K, O>>,
}

/// What a guard's type says beyond its hold: its kind, and what ties it to
/// its thread (see [`HoldKind::Tie`]).
type Marks<K, O> = (fn() -> K, <K as HoldKind>::Tie<O>);

impl<K: HoldKind, O: Ownership> Guard<K, O> {
    pub(crate) fn new(hold: CallHold) -> Self {
        let kind = PhantomData;
        Guard { hold, kind }
    }

    /// The name of the lock it holds.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// assert_eq!(guard.name(), "nightly-report");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.hold.target.name()
    }

    /// The fencing token of this hold: larger than the token of every
    /// earlier hold of this name, by any client, even across a Redis
    /// restart that lost all its data, but not one that brought back older
    /// data (docs/guarantees.md; a mutex's re-entrant guards of a thread
    /// share their outer guard's, a reader-writer lock's re-entry is a hold
    /// of its own, with a larger token). Pass it to the resource you
    /// protect and have it reject writes carrying a smaller token than one
    /// it has seen.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let permit = client.fair_semaphore("db-migrations", 3).acquire()?;
    /// assert!(permit.fencing_token() > 0);
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.hold.hold.token()
    }

    /// How long the call that made this hold waited, from its start to its
    /// return: its queueing time plus its round trips.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_rwlock("catalog").read()?;
    /// println!("waited {:?}", guard.waited());
    /// # Ok(()) }
    /// ```
    pub fn waited(&self) -> Duration {
        self.hold.waited
    }

    /// True once the hold is known to be gone: Redis said the lock is no
    /// longer this hold's (expired, force-unlocked), no renewal confirmed
    /// the lease before it ran out, or a fixed lease ran out. Whatever this
    /// says, only a fencing token makes a protected write safe.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// if guard.is_lease_lost() {
    ///     return Ok(()); // stop side effects
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.hold.hold.is_lost()
    }

    /// A signal another thread can block on to learn the moment this
    /// hold's lease is lost, its maximum hold is reached, or it was
    /// released first. See [`LeaseSignal`] for when it fires.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// let signal = guard.lease_signal();
    /// std::thread::spawn(move || println!("ended: {:?}", signal.wait()));
    /// # Ok(()) }
    /// ```
    pub fn lease_signal(&self) -> LeaseSignal {
        let hold = Arc::clone(&self.hold.hold);
        LeaseSignal { hold }
    }

    /// True once someone asked this hold to let go
    /// ([`FairLock::revoke`](crate::FairLock::revoke), `fairlock revoke`):
    /// release it when you can. The hold is still yours until then.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// if guard.is_revoked() {
    ///     guard.unlock()?; // someone needs it: let go early
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_revoked(&self) -> bool {
        self.hold.hold.is_revoked()
    }

    /// A signal another thread can wait on (or poll) to learn that
    /// someone asked this hold to let go. See [`RevocationSignal`] for
    /// when it fires.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-export").lock()?;
    /// let revoked = guard.revocation_signal();
    /// std::thread::spawn(move || println!("{:?}", revoked.wait()));
    /// # Ok(()) }
    /// ```
    pub fn revocation_signal(&self) -> RevocationSignal {
        let hold = Arc::clone(&self.hold.hold);
        RevocationSignal { hold }
    }

    /// Releases the hold and reports how that went; the waiters it admits
    /// get the lock at once (a mutex's only at the thread's last
    /// re-entrant guard). Dropping the guard releases it too, best effort.
    /// The one release of every guard, a leadership's included (its
    /// resignation).
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the lock
    /// was no longer this hold's (nothing was changed: another holder's
    /// lock is never touched), or when this client had counted the hold
    /// lost ([`is_lease_lost`](Self::is_lease_lost): its count ends before
    /// Redis's, so what Redis still had of it is released; also when that
    /// release meets an outage, and the watchdog then retries it);
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// could not be reached (the client's watchdog gives the hold back as
    /// soon as Redis answers, or the lease runs out first); with
    /// [`sync_replicas`](crate::ClientBuilder::sync_replicas),
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated) when the
    /// release happened on the master but too few replicas acknowledged it
    /// (after a failover the lock may then stay taken until this hold's
    /// lease runs out); otherwise the kinds of
    /// [`status`](crate::FairLock::status) (`Auth`, `Permission`,
    /// `KeyConflict`, `FormatMismatch`, `Server`). A release Redis refused
    /// for a reason that passes (`OOM`, `MISCONF`, `NOREPLICAS`) changed
    /// nothing yet; the watchdog gives the hold back once Redis accepts it,
    /// as after a connection error.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// client.fair_semaphore("db-migrations", 3).acquire()?.unlock()?;
    /// client.election("scheduler").campaign()?.unlock()?; // resigns
    /// # Ok(()) }
    /// ```
    #[doc(alias = "release")]
    #[doc(alias = "resign")]
    pub fn unlock(mut self) -> Result<()> {
        self.hold.release().map_err(Error::of_a_consumed_guard)
    }

    /// The same hold as a guard of [`kind::Any`], to keep guards of several
    /// kinds together (a multi-lock's parts are such guards).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let held: Vec<fairlock::AnyGuard> = vec![
    ///     client.fair_mutex("a").lock()?.into_any(),
    ///     client.fair_rwlock("b").read()?.into_any(),
    /// ];
    /// assert_eq!(held[1].access(), Some(fairlock::Access::Read));
    /// # Ok(()) }
    /// ```
    pub fn into_any(self) -> Guard<kind::Any, O> {
        Guard::new(self.hold)
    }
}

// `L`, not `K`: an alias's page (rustdoc sorts its blocks by their
// headers) then lists what every guard has first.
impl<L: OneLock, O: Ownership> Guard<L, O> {
    /// The lock this guard holds, as the handle that took it (the same
    /// name, lease settings and ownership).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// assert_eq!(guard.lock_handle().name(), "nightly-report");
    /// println!("{} waiting behind us", guard.lock_handle().queue_len()?);
    /// # Ok(()) }
    /// ```
    pub fn lock_handle(&self) -> FairLock<L::Lock, O> {
        let (hold, call) = (&self.hold, &self.hold.call);
        let kind = <L::Lock as kind::sealed::Kind>::of_hold(call.ask, &call.owner);
        let settings = Settings::new(hold.client.clone(), hold.policy);
        FairLock::new(settings, hold.target.clone(), kind)
    }
}

impl<K: HoldKind, O: Ownership> std::fmt::Debug for Guard<K, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.name())
            .field("fencing_token", &self.fencing_token())
            .field("access", &self.hold.call.ask.access())
            .field("permits", &self.hold.call.ask.permits())
            .finish_non_exhaustive()
    }
}
