//! The public handles layer: the client, one generic lock handle
//! ([`FairLock`]) and one generic guard ([`Guard`]) over the kinds, each
//! kind's requests in a file of its own, the election's watch and the status
//! every kind shares: types over the machinery's core, which runs them.

mod client;
pub mod kind;
mod signals;
mod status;

// Rustdoc lists a type's `impl` blocks in the order of these modules: what
// every lock and every guard has first, then each kind's own, in the order
// a reader looks for them (mutex, semaphore, reader-writer lock, election),
// then the multi-lock's. One module a group (blank lines between), as
// rustfmt sorts a group by name.
mod lock;

mod ownership;

mod mutex;

mod semaphore;

mod rwlock;

mod election;

mod multi;

// What the crate exports of this layer (lib.rs re-exports all of it).
pub use crate::machinery::caller::wait::Wait;
pub use client::{Client, ClientBuilder};
pub use election::{Election, Leader, LeaderEvent, LeaderWatch, Leadership};
pub use lock::{FairLock, Guard};
pub use multi::{FairMultiLock, MultiGuard};
pub use mutex::{FairMutex, FairMutexGuard};
pub use ownership::{Bound, MoveOnlyWithUnbound, Ownership, Unbound};
pub use rwlock::{FairRwLock, ReadGuard, UpgradableReadGuard, WriteGuard};
pub use semaphore::{FairSemaphore, PermitsChange, SemaphorePermit, MAX_PERMITS};
pub use signals::{LeaseSignal, RevocationSignal};
pub use status::{Holder, Participant, QueuedWaiter, Status};

/// A guard of any kind of hold: a multi-lock's parts, or any guard made
/// into one with [`Guard::into_any`].
///
/// Its own methods: [`access`](#method.access),
/// [`num_permits`](#method.num_permits), [`lock_kind`](#method.lock_kind).
///
/// What every guard has: [`name`](#method.name),
/// [`fencing_token`](#method.fencing_token), [`waited`](#method.waited),
/// [`is_lease_lost`](#method.is_lease_lost),
/// [`lease_signal`](#method.lease_signal), [`is_revoked`](#method.is_revoked),
/// [`revocation_signal`](#method.revocation_signal),
/// [`unlock`](#method.unlock), [`into_any`](#method.into_any).
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::AnyGuard<fairlock::Unbound>>();
/// ```
pub type AnyGuard<O = Bound> = Guard<kind::Any, O>;
