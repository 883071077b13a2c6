//! A snapshot of one lock, semaphore or reader-writer lock for operators:
//! who holds it, who waits, in order.

use std::time::Duration;

use crate::protocol::{Access, Ask, StatusReply, WaiterReply};

/// One participant of a lock: a thread of some client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// The owner id, `<client id>:<thread number>`.
    pub owner: String,
}

impl Participant {
    /// The id of the client (see [`Client::id`](crate::Client::id)).
    pub fn client_id(&self) -> &str {
        self.owner
            .split_once(':')
            .map_or(&self.owner, |(client, _)| client)
    }

    /// The thread's number inside its process.
    pub fn thread(&self) -> Option<u64> {
        self.owner
            .rsplit_once(':')
            .and_then(|(_, n)| n.parse().ok())
    }
}

/// The current holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Who holds it.
    pub who: Participant,
    /// Re-entrant holds of that thread.
    pub hold_count: u32,
    /// Fencing token of the hold.
    pub fencing_token: u64,
    /// Lease left; `None` if the key has no expiry (never set by fairlock).
    pub remaining_lease: Option<Duration>,
}

/// A queued waiter, in queue order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedWaiter {
    /// Who waits.
    pub who: Participant,
    /// How long it keeps its place without another heartbeat from its
    /// client; `None` for a dead entry not yet dropped.
    pub liveness_left: Option<Duration>,
}

/// What [`FairMutex::status`](crate::FairMutex::status) saw, in one atomic read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The holder, if the lock is held.
    pub holder: Option<Holder>,
    /// The first queued waiters, in the order they will get the lock.
    pub waiters: Vec<QueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
}

impl LockStatus {
    /// The public form of what the mutex's `status.lua` returned.
    pub(crate) fn from_reply(reply: StatusReply) -> Self {
        LockStatus {
            holder: reply.holders.into_iter().next().map(|holder| Holder {
                who: Participant {
                    owner: holder.owner,
                },
                hold_count: holder.count,
                fencing_token: holder.token,
                remaining_lease: holder.lease_left_ms.and_then(millis),
            }),
            waiters: queued(reply.waiters),
            queue_len: usize::try_from(reply.live_waiters).unwrap_or(usize::MAX),
            last_fencing_token: Some(reply.last_token).filter(|&token| token > 0),
        }
    }
}

/// A duration of `ms` when not negative.
fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// The waiters of a status reply, in queue order.
fn queued(waiters: Vec<WaiterReply>) -> Vec<QueuedWaiter> {
    waiters
        .into_iter()
        .map(|waiter| QueuedWaiter {
            who: Participant {
                owner: waiter.owner,
            },
            liveness_left: millis(waiter.liveness_left_ms),
        })
        .collect()
}

/// One permit of a semaphore, as [`SemaphoreStatus`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitHolding {
    /// Who holds it.
    pub who: Participant,
    /// How many permits the hold takes (`acquire_many`'s `n`).
    pub permits: u32,
    /// Fencing token of the permit.
    pub fencing_token: u64,
    /// Lease left (`None` once it has run out; such a permit is free).
    pub remaining_lease: Option<Duration>,
}

/// What [`FairSemaphore::status`](crate::FairSemaphore::status) saw, in one
/// atomic read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreStatus {
    /// The number of permits the semaphore was made with, or `None` when it
    /// is not in use (no holder or waiter for a fence life).
    pub permits: Option<u32>,
    /// The permits held now, by lease end (at most the number asked for).
    pub holders: Vec<PermitHolding>,
    /// Live holders in total (may exceed `holders.len()`).
    pub holder_count: usize,
    /// Permits free now (0 when `permits` is `None`).
    pub available: u32,
    /// The first queued waiters, in the order they will get a permit.
    pub waiters: Vec<QueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
}

impl SemaphoreStatus {
    /// The public form of what `counted/status.lua` returned.
    pub(crate) fn from_reply(reply: StatusReply) -> Self {
        let permits = reply.capacity.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        let available = reply.capacity.map_or(0, |n| n.saturating_sub(reply.used));
        SemaphoreStatus {
            permits,
            holders: reply
                .holders
                .into_iter()
                .map(|holder| PermitHolding {
                    who: Participant {
                        owner: holder.owner,
                    },
                    permits: u32::try_from(holder.units).unwrap_or(u32::MAX),
                    fencing_token: holder.token,
                    remaining_lease: holder.lease_left_ms.and_then(millis),
                })
                .collect(),
            holder_count: usize::try_from(reply.live_holds).unwrap_or(usize::MAX),
            available: u32::try_from(available).unwrap_or(u32::MAX),
            waiters: queued(reply.waiters),
            queue_len: usize::try_from(reply.live_waiters).unwrap_or(usize::MAX),
            last_fencing_token: Some(reply.last_token).filter(|&token| token > 0),
        }
    }
}

/// One hold of a reader-writer lock, as [`RwLockStatus`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwHolding {
    /// Who holds it.
    pub who: Participant,
    /// Read (shared) or write (alone).
    pub access: Access,
    /// Fencing token of the hold.
    pub fencing_token: u64,
    /// Lease left (`None` once it has run out; such a hold is gone).
    pub remaining_lease: Option<Duration>,
}

/// A queued waiter of a reader-writer lock, in queue order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwQueuedWaiter {
    /// Who waits.
    pub who: Participant,
    /// What it waits for (`None` for an entry fairlock did not write).
    pub access: Option<Access>,
    /// How long it keeps its place without another heartbeat from its
    /// client; `None` for a dead entry not yet dropped.
    pub liveness_left: Option<Duration>,
}

/// What [`FairRwLock::status`](crate::FairRwLock::status) saw, in one
/// atomic read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwLockStatus {
    /// The holds now, by lease end (at most the number asked for): one
    /// write hold (or several of one thread, re-entered), or readers.
    pub holders: Vec<RwHolding>,
    /// Live holds in total (may exceed `holders.len()`).
    pub holder_count: usize,
    /// Whether a writer holds it.
    pub write_held: bool,
    /// The first queued waiters, in the order they will get the lock.
    pub waiters: Vec<RwQueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
}

impl RwLockStatus {
    /// The public form of what `counted/status.lua` returned.
    pub(crate) fn from_reply(reply: StatusReply) -> Self {
        // A write takes every unit; reads alone never reach that many.
        let write_held = Ask::access_of(reply.used) == Access::Write;
        RwLockStatus {
            holders: reply
                .holders
                .into_iter()
                .map(|holder| RwHolding {
                    who: Participant {
                        owner: holder.owner,
                    },
                    access: Ask::access_of(holder.units),
                    fencing_token: holder.token,
                    remaining_lease: holder.lease_left_ms.and_then(millis),
                })
                .collect(),
            holder_count: usize::try_from(reply.live_holds).unwrap_or(usize::MAX),
            write_held,
            waiters: reply
                .waiters
                .into_iter()
                .map(|waiter| RwQueuedWaiter {
                    who: Participant {
                        owner: waiter.owner,
                    },
                    access: (waiter.units > 0).then(|| Ask::access_of(waiter.units)),
                    liveness_left: millis(waiter.liveness_left_ms),
                })
                .collect(),
            queue_len: usize::try_from(reply.live_waiters).unwrap_or(usize::MAX),
            last_fencing_token: Some(reply.last_token).filter(|&token| token > 0),
        }
    }
}
