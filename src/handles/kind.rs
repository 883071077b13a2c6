//! The kinds of lock and of hold, as types: the first parameter of
//! [`FairLock`](crate::FairLock) and of [`Guard`](crate::Guard). Each
//! capability is one `impl` block over these parameters (lock_api's
//! `Mutex<R, T>` over its raw locks), so it is written once for every kind
//! it fits, and a kind's own requests are one block of their own.
//!
//! Users name these types only to write code generic over the kinds;
//! [`FairMutex`](crate::FairMutex), [`FairSemaphore`](crate::FairSemaphore),
//! [`FairRwLock`](crate::FairRwLock), [`Election`](crate::Election) and
//! their guards' aliases are the everyday names.
//!
//! ```
//! use fairlock::{kind, FairLock, Guard, Ownership};
//!
//! /// Any lock of one name, thread-bound or not: its name and status.
//! fn describe<K: kind::Kind, O: Ownership>(lock: &FairLock<K, O>) -> String {
//!     format!("{} ({:?})", lock.name(), lock.lock_kind())
//! }
//!
//! /// Any guard: its fencing token, whatever it holds.
//! fn token<K: kind::HoldKind, O: Ownership>(guard: &Guard<K, O>) -> u64 {
//!     guard.fencing_token()
//! }
//! # let _ = (describe::<kind::Mutex, fairlock::Bound>, token::<kind::Any, fairlock::Unbound>);
//! ```

use std::sync::Arc;

use crate::handles::ownership::{Bound, Ownership, Unbound};

/// The kinds of lock a [`FairLock`](crate::FairLock) can be, each a lock
/// of one name: [`Mutex`], [`Semaphore`], [`RwLock`], [`Election`]. Every
/// one has a name, a status, lease settings, and can be force-unlocked and
/// revoked. Sealed: fairlock's own kinds only. (Several locks taken
/// together are a [`FairMultiLock`](crate::FairMultiLock), not a kind.)
///
/// ```no_run
/// use fairlock::{kind, FairLock, Ownership};
/// fn waiting<K: kind::Kind, O: Ownership>(lock: &FairLock<K, O>) -> fairlock::Result<usize> {
///     Ok(lock.status(0)?.queue_len)
/// }
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// println!("{} waiting", waiting(&client.fair_rwlock("catalog"))?);
/// # Ok(()) }
/// ```
pub trait Kind: sealed::Kind + Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The ownership of a lock of this kind whose type names none
    /// (`FairLock<K>`): [`Unbound`](crate::Unbound) for an [`Election`],
    /// [`Bound`](crate::Bound) for the others, by the one rule of
    /// [`Ownership`](crate::Ownership#which-is-the-default). So
    /// `FairLock<kind::Election>` is [`Election`](crate::Election).
    ///
    /// ```
    /// fn same<T>(_: Option<T>, _: Option<T>) {}
    /// same(None::<fairlock::FairLock<fairlock::kind::Election>>, None::<fairlock::Election>);
    /// same(None::<fairlock::FairLock<fairlock::kind::Mutex>>, None::<fairlock::FairMutex>);
    /// ```
    type Owner: Ownership;
}

/// What a [`Guard`](crate::Guard) holds: a [`Mutex`]'s hold, a
/// [`Semaphore`]'s permits, a [`Read`] or a [`Write`] of a reader-writer
/// lock, an [`Election`]'s leadership, or [`Any`] of them (a multi-lock's
/// parts). Sealed.
///
/// ```
/// use fairlock::{kind, Guard, Ownership};
/// fn token_of<K: kind::HoldKind, O: Ownership>(guard: &Guard<K, O>) -> u64 {
///     guard.fencing_token()
/// }
/// # let _ = token_of::<kind::Write, fairlock::Bound>;
/// ```
pub trait HoldKind: sealed::Sealed + 'static {
    /// The ownership of a guard of this hold whose type names none
    /// (`Guard<K>`): its lock's ([`Kind::Owner`]), and
    /// [`Bound`](crate::Bound) for [`Any`].
    ///
    /// ```
    /// fn same<T>(_: Option<T>, _: Option<T>) {}
    /// same(None::<fairlock::Guard<fairlock::kind::Election>>, None::<fairlock::Leadership>);
    /// same(None::<fairlock::Guard<fairlock::kind::Read>>, None::<fairlock::ReadGuard>);
    /// ```
    type Owner: Ownership;

    /// What ties a guard of this hold to its thread: a re-entrant hold
    /// taken by a thread (a mutex's, a read, a write, a leadership taken
    /// thread-bound) stays on that thread, as `std::sync::MutexGuard`
    /// does ([`MoveOnlyWithUnbound`](crate::MoveOnlyWithUnbound)); a
    /// semaphore's permit, never re-entered, is `Send` either way.
    #[doc(hidden)]
    type Tie<O: Ownership>: Sync + 'static;
}

/// A hold of one lock of one name ([`Mutex`], [`Semaphore`], [`Read`],
/// [`Write`], [`Election`]: every [`HoldKind`] but [`Any`]), whose guard
/// returns the handle that took it
/// ([`Guard::lock_handle`](crate::Guard::lock_handle)).
///
/// ```
/// use fairlock::{kind, kind::OneLock, FairLock, Guard, Ownership};
/// fn handle_of<K: OneLock, O: Ownership>(guard: &Guard<K, O>) -> FairLock<K::Lock, O> {
///     guard.lock_handle()
/// }
/// # let _ = handle_of::<kind::Read, fairlock::Bound>;
/// ```
pub trait OneLock: HoldKind {
    /// The kind of the lock it is a hold of: a read's and a write's is
    /// [`RwLock`].
    ///
    /// ```
    /// use fairlock::kind::{self, OneLock};
    /// fn same<T>(_: std::marker::PhantomData<T>, _: std::marker::PhantomData<T>) {}
    /// same(std::marker::PhantomData::<<kind::Write as OneLock>::Lock>, std::marker::PhantomData::<kind::RwLock>);
    /// ```
    type Lock: Kind;
}

/// A fair mutex: one holder at a time, re-entrant per thread when
/// thread-bound. [`FairMutex`](crate::FairMutex) is `FairLock<Mutex>`,
/// [`FairMutexGuard`](crate::FairMutexGuard) is `Guard<Mutex>`.
///
/// ```
/// let _: Option<fairlock::FairLock<fairlock::kind::Mutex>> = None::<fairlock::FairMutex>;
/// ```
#[derive(Clone, Debug)]
pub struct Mutex(pub(crate) ());

/// A fair semaphore of a number of permits, a call taking one or several.
/// [`FairSemaphore`](crate::FairSemaphore) is `FairLock<Semaphore>`,
/// [`SemaphorePermit`](crate::SemaphorePermit) is `Guard<Semaphore>`.
///
/// ```
/// let _: Option<fairlock::Guard<fairlock::kind::Semaphore>> = None::<fairlock::SemaphorePermit>;
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    pub(crate) permits: u32,
}

/// A fair reader-writer lock. [`FairRwLock`](crate::FairRwLock) is
/// `FairLock<RwLock>`; its guards are `Guard<`[`Read`]`>` and
/// `Guard<`[`Write`]`>`.
///
/// ```
/// let _: Option<fairlock::FairLock<fairlock::kind::RwLock>> = None::<fairlock::FairRwLock>;
/// ```
#[derive(Clone, Debug)]
pub struct RwLock(pub(crate) ());

/// A leader election: candidates lead one at a time, in arrival order.
/// [`Election`](crate::Election) is `FairLock<kind::Election>`,
/// [`Leadership`](crate::Leadership) is `Guard<kind::Election>`, both
/// [`Unbound`](crate::Unbound) unless named otherwise.
///
/// ```
/// use fairlock::{kind, FairLock, Unbound};
/// let _: Option<FairLock<kind::Election>> = None::<fairlock::Election>;
/// let _: Option<FairLock<kind::Election, Unbound>> = None::<fairlock::Election>;
/// ```
#[derive(Clone, Debug)]
pub struct Election {
    /// The value candidates of this handle campaign with (`with_value`);
    /// `None`: the client's identity, or its id.
    pub(crate) value: Option<Arc<str>>,
}

/// A reader-writer lock's read hold, shared with other readers
/// ([`ReadGuard`](crate::ReadGuard) is `Guard<Read>`).
///
/// ```
/// let _: Option<fairlock::Guard<fairlock::kind::Read>> = None::<fairlock::ReadGuard>;
/// ```
#[derive(Debug)]
pub enum Read {}

/// A reader-writer lock's upgradable read: shared with readers, not with
/// writers or another upgradable read, and able to become the write
/// without anyone writing in between
/// ([`UpgradableReadGuard`](crate::UpgradableReadGuard) is
/// `Guard<UpgradableRead>`).
///
/// ```
/// let _: Option<fairlock::Guard<fairlock::kind::UpgradableRead>> =
///     None::<fairlock::UpgradableReadGuard>;
/// ```
#[derive(Debug)]
pub enum UpgradableRead {}

/// A reader-writer lock's write hold, alone
/// ([`WriteGuard`](crate::WriteGuard) is `Guard<Write>`).
///
/// ```
/// let _: Option<fairlock::Guard<fairlock::kind::Write>> = None::<fairlock::WriteGuard>;
/// ```
#[derive(Debug)]
pub enum Write {}

/// A hold of any kind: a multi-lock's parts, or any guard made into one
/// with [`Guard::into_any`](crate::Guard::into_any) (to keep guards of
/// several kinds in one collection). [`AnyGuard`](crate::AnyGuard) is
/// `Guard<Any>`.
///
/// ```
/// let _: Option<fairlock::Guard<fairlock::kind::Any>> = None::<fairlock::AnyGuard>;
/// ```
#[derive(Debug)]
pub enum Any {}

// A kind that is also a hold (a mutex, a semaphore, an election) is owned
// by default as its guards are; a rwlock is thread-bound.
impl<K: sealed::Kind + HoldKind + Clone + std::fmt::Debug + Send + Sync> Kind for K {
    type Owner = <K as HoldKind>::Owner;
}
impl Kind for RwLock {
    type Owner = Bound;
}

// A kind that is also a hold (a mutex's, a semaphore's, an election's) is
// a hold of its own kind of lock; a rwlock's holds are reads and writes.
impl<K: Kind + HoldKind> OneLock for K {
    type Lock = K;
}
impl OneLock for Read {
    type Lock = RwLock;
}
impl OneLock for Write {
    type Lock = RwLock;
}
impl OneLock for UpgradableRead {
    type Lock = RwLock;
}

impl HoldKind for Mutex {
    type Owner = Bound;
    type Tie<O: Ownership> = O::Tie;
}
impl HoldKind for Semaphore {
    type Owner = Bound;
    type Tie<O: Ownership> = ();
}
impl HoldKind for Read {
    type Owner = Bound;
    type Tie<O: Ownership> = O::Tie;
}
impl HoldKind for Write {
    type Owner = Bound;
    type Tie<O: Ownership> = O::Tie;
}
impl HoldKind for UpgradableRead {
    type Owner = Bound;
    type Tie<O: Ownership> = O::Tie;
}
impl HoldKind for Election {
    type Owner = Unbound;
    type Tie<O: Ownership> = O::Tie;
}
impl HoldKind for Any {
    type Owner = Bound;
    type Tie<O: Ownership> = O::Tie;
}

/// What the kinds are to the rest of the crate, out of users' reach.
pub(crate) mod sealed {
    use crate::protocol::{Ask, LockKind};

    /// Implemented by fairlock's own kinds only: every public trait of
    /// [`kind`](super) requires it, so no other type can be one.
    pub trait Sealed {}

    pub trait Kind: Sealed {
        /// The primitive, as the protocol names it.
        const KIND: LockKind;
        /// The kind of the lock a hold of acquire call `ask` by `owner` is
        /// of (what a guard's `lock_handle` returns).
        fn of_hold(ask: Ask, owner: &str) -> Self;
    }

    impl Sealed for super::Mutex {}
    impl Sealed for super::Semaphore {}
    impl Sealed for super::RwLock {}
    impl Sealed for super::Election {}
    impl Sealed for super::Read {}
    impl Sealed for super::Write {}
    impl Sealed for super::UpgradableRead {}
    impl Sealed for super::Any {}

    impl Kind for super::Mutex {
        const KIND: LockKind = LockKind::Mutex;
        fn of_hold(_: Ask, _: &str) -> Self {
            super::Mutex(())
        }
    }
    impl Kind for super::Semaphore {
        const KIND: LockKind = LockKind::Semaphore;
        fn of_hold(ask: Ask, _: &str) -> Self {
            let permits = ask.capacity();
            super::Semaphore { permits }
        }
    }
    impl Kind for super::RwLock {
        const KIND: LockKind = LockKind::RwLock;
        fn of_hold(_: Ask, _: &str) -> Self {
            super::RwLock(())
        }
    }
    impl Kind for super::Election {
        const KIND: LockKind = LockKind::Election;
        fn of_hold(_: Ask, owner: &str) -> Self {
            let value = crate::Participant::new(owner).identity().map(Into::into);
            super::Election { value }
        }
    }
}
