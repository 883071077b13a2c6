//! The one per-kind dispatch of the tests that do the same to every kind
//! of lock: a [`Kind`] of hold (a mutex's, a permit of a one-permit
//! semaphore, a read or a write of a rwlock) taken by [`take`], thread-bound
//! or not, with the lease settings a test asks for and any [`Wait`], as one
//! guard type ([`AnyGuard`]). What is done to a lock by kind and name (its
//! status, a force unlock, a revocation) is the library's own:
//! `Client::status`, `Client::force_unlock`, `Client::revoke`.

use std::time::Duration;

use fairlock::kind::Kind as LockType;
use fairlock::{AnyGuard, Bound, Client, FairLock, Guard, LockKind, Ownership, Unbound, Wait};

/// The permits of the semaphore [`Kind::Semaphore`] takes one of: a hold
/// excludes every other, as the other kinds' exclusive holds do.
pub const SEMAPHORE_PERMITS: u32 = 1;

/// A kind of hold a test takes, by what it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A mutex's hold.
    Mutex,
    /// A permit of a semaphore of [`SEMAPHORE_PERMITS`] (one).
    Semaphore,
    /// A read of a rwlock (shared with other reads).
    Read,
    /// A write of a rwlock.
    Write,
}

impl Kind {
    /// The kinds whose hold excludes every other hold of its lock, one per
    /// primitive: a test's loop over "every kind".
    pub const EXCLUSIVE: [Kind; 3] = [Kind::Mutex, Kind::Semaphore, Kind::Write];

    /// The lock it is a hold of, as fairlock names it.
    pub fn lock_kind(self) -> LockKind {
        match self {
            Kind::Mutex => LockKind::Mutex,
            Kind::Semaphore => LockKind::Semaphore,
            Kind::Read | Kind::Write => LockKind::RwLock,
        }
    }
}

/// The lease settings of the handle a [`take`] uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LeasePolicy {
    /// The client's lease, renewed by its watchdog (a handle as the client
    /// makes it).
    #[default]
    Client,
    /// Renewed for at most this long (`with_max_hold`).
    MaxHold(Duration),
    /// A fixed lease of this long, never renewed (`with_fixed_lease`).
    Fixed(Duration),
}

/// An ownership a test's handle can be given: [`Bound`] (the thread's,
/// the client's default) or [`Unbound`] (each acquisition its own owner).
pub trait Owner: Ownership + Sized {
    /// `lock` owned as `Self` says.
    fn own<K: LockType>(lock: &FairLock<K>) -> FairLock<K, Self>;
}

impl Owner for Bound {
    fn own<K: LockType>(lock: &FairLock<K>) -> FairLock<K, Bound> {
        lock.bound()
    }
}

impl Owner for Unbound {
    fn own<K: LockType>(lock: &FairLock<K>) -> FairLock<K, Unbound> {
        lock.unbound()
    }
}

/// `lock` with `lease`'s settings, owned as `O`.
fn handle<K: LockType, O: Owner>(lock: FairLock<K>, lease: LeasePolicy) -> FairLock<K, O> {
    let lock = match lease {
        LeasePolicy::Client => lock,
        LeasePolicy::MaxHold(max_hold) => lock.with_max_hold(max_hold),
        LeasePolicy::Fixed(lease) => lock.with_fixed_lease(lease),
    };
    O::own(&lock)
}

/// One acquisition of `kind` on `name` through `client`, owned as `O`
/// ([`Bound`] or [`Unbound`]), with `lease`'s settings, waiting as `wait`
/// says (a `Duration` is `Wait::at_most`): the guard (as the one guard
/// type of every kind), `None` when the wait ended without it.
///
/// ```no_run
/// use std::time::Duration;
/// use fairlock::Unbound;
/// use fairlock_test_support::{take, Kind, LeasePolicy};
/// # let client = fairlock::Client::open("redis://127.0.0.1:6379").unwrap();
/// for kind in Kind::EXCLUSIVE {
///     let guard = take::<Unbound>(&client, kind, "a", LeasePolicy::Client, Duration::from_secs(5))
///         .unwrap()
///         .expect("free");
///     std::thread::spawn(move || guard.unlock()).join().unwrap().unwrap();
/// }
/// ```
pub fn take<O: Owner>(
    client: &Client,
    kind: Kind,
    name: &str,
    lease: LeasePolicy,
    wait: impl Into<Wait>,
) -> fairlock::Result<Option<AnyGuard<O>>> {
    let wait = wait.into();
    Ok(match kind {
        Kind::Mutex => handle::<_, O>(client.fair_mutex(name), lease)
            .lock_with(wait)?
            .map(Guard::into_any),
        Kind::Semaphore => handle::<_, O>(client.fair_semaphore(name, SEMAPHORE_PERMITS), lease)
            .acquire_with(wait)?
            .map(Guard::into_any),
        Kind::Read => handle::<_, O>(client.fair_rwlock(name), lease)
            .read_with(wait)?
            .map(Guard::into_any),
        Kind::Write => handle::<_, O>(client.fair_rwlock(name), lease)
            .write_with(wait)?
            .map(Guard::into_any),
    })
}
