//! # fairlock: a fair distributed mutex on Redis
//!
//! Threads in many processes, on many machines, take turns on one named
//! lock **in the order their requests reached Redis**. `lock()` blocks
//! without polling and returns a guard that releases on drop.
//!
//! ## The model
//! - A [`Client`] owns an r2d2 pool of Redis connections and two threads:
//!   the *watchdog* renews the leases of held locks and heartbeats this
//!   client's queued waiters; the *subscriber* listens on the client's own
//!   channel and wakes waiting threads. Waiting holds no connection.
//! - A [`FairMutex`] names one lock. Its state lives in three keys sharing
//!   one cluster hash slot: the lock (the holder's fencing token, owner id
//!   and the calls counted in the hold, its TTL the lease; once free, the
//!   last token for a while), the FIFO queue (each entry names the waiting
//!   call and the lease it gets), and each waiter's liveness deadline. Every step is one Lua script that
//!   does O(log N) work in the number of waiters and reads time only from
//!   the server.
//! - Releasing hands the lock **directly** to the first live waiter and
//!   publishes one message to that waiter's client: the waiter returns
//!   without another round trip. No herd, no polling.
//! - Waiters stay queued as long as their client heartbeats them, however
//!   long the holder keeps the lock; a waiter whose client went silent loses
//!   its place after `waiter_timeout`. A holder that dies frees the lock when
//!   its lease runs out, and the head of the queue, which knows the lease's
//!   end, takes it at once.
//! - Every acquisition gets a [fencing token](FairMutexGuard::fencing_token)
//!   larger than all before it. A lease-based lock cannot stop a paused
//!   process from acting after its lease ran out; the protected resource
//!   must check the token for that.
//! - Scale-out is Redis's own: the same client runs on Redis Cluster
//!   (`redis+cluster://...`, locks spread over the masters by name) and on
//!   a Sentinel-managed master (`redis+sentinel://.../master`, followed across
//!   failovers); [`ClientBuilder::sync_replicas`] makes each lock write wait
//!   for replica acknowledgements.
//!
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> fairlock::Result<()> {
//! let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let mutex = client.fair_mutex("invoices");
//! {
//!     let guard = mutex.lock()?;
//!     // ... critical section; pass guard.fencing_token() to the resource ...
//! } // released here, handed to the next waiter
//!
//! // A fixed lease, no watchdog: frees itself 2 s after it was granted.
//! let short = mutex.with_lease(Duration::from_secs(2)).lock()?;
//! short.unlock()?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod connections;
mod error;
mod handles;
mod machinery;
mod protocol;

pub use connections::config::{
    DEFAULT_FENCE_LIFE, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_LIFETIME, MAX_IDENTITY_LEN, MAX_LEASE,
    MAX_TIMEOUT, MIN_FENCE_LIFE, MIN_LEASE, MIN_POOL_DURATION,
};
pub use connections::topology::redact_url;
pub use error::{Error, ErrorKind, Result};
pub use handles::builder::ClientBuilder;
pub use handles::cancel::WaitCanceller;
pub use handles::client::Client;
pub use handles::election::{Election, Leader, LeaderWatch, Leadership};
pub use handles::guard::FairMutexGuard;
pub use handles::lease_signal::LeaseSignal;
pub use handles::multi::{FairMultiLock, MultiGuard};
pub use handles::mutex::FairMutex;
pub use handles::rwlock::{FairRwLock, ReadGuard, WriteGuard};
pub use handles::semaphore::{FairSemaphore, SemaphorePermit, MAX_PERMITS};
pub use handles::status::{
    Holder, LockStatus, Participant, QueuedWaiter, RwLockStatus, SemaphoreStatus,
};
pub use handles::unbound::{Unbound, UnboundGuard};
pub use machinery::holds::LeaseEnd;
pub use protocol::keys::MAX_NAME_LEN;
pub use protocol::Access;
pub use protocol::MAX_VALUE_LEN as MAX_ELECTION_VALUE_LEN;

/// The protocol layer, for fairlock's own test support only: not an API,
/// no stability promised (feature `test-support`).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod test_support {
    pub use crate::protocol::{
        check_value, election_channel, Abandon, AbandonReply, Access, Acquire, AcquireReply, Ask,
        Cancel, CancelReply, CommonArgs, ElectionMessage, Engine, ForceRelease, Freed, HandedOver,
        Heartbeat, HeartbeatReply, HolderReply, LockKeys, LockKind, Mode, Op, Operation,
        QueueEntry, Release, ReleaseReply, Renew, Script, Status, StatusReply, WaiterReply,
        WaiterStatus, WakeMessage, RW_CAPACITY,
    };
}

/// Compiles the README's examples as doctests, so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
