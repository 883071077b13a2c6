//! Who owns an acquisition: its thread ([`Bound`]) or the acquisition
//! itself ([`Unbound`]). The second parameter of every lock and guard, so
//! that each request is written once for both.

use std::marker::PhantomData;

/// Who owns the holds a lock's acquisitions take: [`Bound`] (the thread
/// that asked: re-entrant where the kind is, its guard stays on that
/// thread) or [`Unbound`] (each acquisition owns itself: never re-entered,
/// its guard `Send + Sync + 'static`). Sealed.
///
/// # Which is the default
/// One rule, for every lock and guard whose type names no ownership: a
/// hold a thread takes for its own work is the thread's, as std's locks
/// are, so the mutex, the semaphore, the reader-writer lock and their
/// guards are [`Bound`]; a hold that stands for more than the call that
/// took it (an election's leadership, a process's role; a multi-lock's set,
/// often handed to a worker) is [`Unbound`]. Each kind carries its default
/// ([`Kind::Owner`](crate::kind::Kind::Owner),
/// [`HoldKind::Owner`](crate::kind::HoldKind::Owner)), so the generic types
/// and the aliases agree: `FairLock<kind::Election>` is
/// [`Election`](crate::Election), `Guard<kind::Read>` is
/// [`ReadGuard`](crate::ReadGuard). Any lock's
/// [`bound`](crate::FairLock::bound) and [`unbound`](crate::FairLock::unbound)
/// give the other.
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::FairMutexGuard<fairlock::Unbound>>();
/// assert_send_sync_static::<fairlock::ReadGuard<fairlock::Unbound>>();
/// ```
///
/// ```compile_fail,E0277
/// fn assert_send<T: Send>() {}
/// assert_send::<fairlock::FairMutexGuard<fairlock::Bound>>();
/// ```
pub trait Ownership: sealed::Sealed + Clone + Send + Sync + std::fmt::Debug + 'static {
    /// Whether each acquisition is an owner of its own.
    #[doc(hidden)]
    const UNBOUND: bool;
    /// What a re-entrant guard of this ownership carries to be `Send` or
    /// not: [`Bound`]'s names [`MoveOnlyWithUnbound`].
    #[doc(hidden)]
    type Tie: Sync + 'static;
}

/// Acquisitions owned by the thread that makes them: a thread that holds a
/// mutex or a reader-writer lock takes it again at once (a mutex's: a second
/// guard of the same hold, with its token; a reader-writer lock's: a hold of
/// its own beside it, with a larger token), and such guards stay on their
/// thread (`Sync`, not `Send`: [`MoveOnlyWithUnbound`]), as `std::sync::MutexGuard` does. The default of the mutex, the
/// semaphore and the reader-writer lock (see [which is the
/// default](Ownership#which-is-the-default)).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mutex: fairlock::FairMutex<fairlock::Bound> = client.fair_mutex("nightly-report");
/// let outer = mutex.lock()?;
/// let inner = mutex.lock()?; // this thread's: re-entered at once
/// assert_eq!(inner.fencing_token(), outer.fencing_token());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub enum Bound {}

/// Acquisitions that own themselves (`<client id>:u<call>`): never
/// re-entered (the same thread asking again queues like anyone else), and
/// their guards are `Send + Sync + 'static`, released or dropped on any
/// thread. The default of elections and multi-locks (see [which is the
/// default](Ownership#which-is-the-default)); any lock's
/// [`unbound`](crate::FairLock::unbound) gives it.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mutex: fairlock::FairMutex<fairlock::Unbound> = client.fair_mutex("nightly-report").unbound();
/// let guard = mutex.lock()?;
/// std::thread::spawn(move || guard.unlock()).join().expect("worker")?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub enum Unbound {}

/// Why a thread-bound guard does not move to another thread, named where
/// the compiler says it: a [`Bound`] guard of a re-entrant hold (a mutex's,
/// a read, a write, a leadership) is not `Send`, and moving one into
/// another thread fails with "`MutexGuard<'static, MoveOnlyWithUnbound>`
/// cannot be sent between threads safely" (error E0277). Its hold is its
/// thread's, and the thread re-enters it, so it must be released there. To
/// hold a lock on one thread and release it on another, take it from the
/// lock's [`unbound`](crate::FairLock::unbound) handle: each such
/// acquisition is an owner of its own, and its guard is `Send + Sync +
/// 'static`. Never a value: a type only.
///
/// ```compile_fail,E0277
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_mutex("nightly-report").lock()?; // thread-bound
/// std::thread::spawn(move || guard.unlock()); // E0277: ... MoveOnlyWithUnbound ...
/// # Ok(()) }
/// ```
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_mutex("nightly-report").unbound().lock()?;
/// std::thread::spawn(move || guard.unlock()).join().expect("worker")?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub enum MoveOnlyWithUnbound {}

impl Ownership for Bound {
    const UNBOUND: bool = false;
    type Tie = PhantomData<std::sync::MutexGuard<'static, MoveOnlyWithUnbound>>;
}

impl Ownership for Unbound {
    const UNBOUND: bool = true;
    type Tie = ();
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Bound {}
    impl Sealed for super::Unbound {}
}
