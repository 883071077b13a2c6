//! `Guard<K, O>`: proof of one hold, of any kind, released on drop. What
//! every guard has is written here once; a kind's own methods (a permit's
//! number, a rwlock hold's access and its upgrade or downgrade, a
//! leadership's term and value) live beside that kind's requests, each on
//! the guards it means something for.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::handles::kind::{self, HoldKind, OneLock};
use crate::handles::lock::{FairLock, Settings};
use crate::handles::ownership::Ownership;
use crate::handles::signals::{LeaseSignal, RevocationSignal};
use crate::machinery::caller::call_hold::CallHold;

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
    /// data (docs/guarantees.md; re-entrant guards of a thread share
    /// their outer guard's). Pass it to the resource you protect and have
    /// it reject writes carrying a smaller token than one it has seen.
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
        self.hold.release(None).map_err(Error::of_a_consumed_guard)
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
