//! A snapshot of one lock, semaphore or reader-writer lock for operators:
//! who holds it, who waits, in order. One holder type and one waiter type
//! serve the three kinds.

use std::time::Duration;

use crate::protocol::{Access, Ask, HolderReply, StatusReply, WaiterReply};

/// One participant of a lock: a thread of some client, an unbound call
/// of it, or an election's candidate. [`owner`](Self::owner) is the id
/// Redis keeps, and what `Display` prints; the other methods take it apart.
///
/// ```
/// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:7@web-3");
/// assert_eq!(who.client_id(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b");
/// assert_eq!(who.thread(), Some(7));
/// assert_eq!(who.identity(), Some("web-3"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Participant {
    /// Private, so that its format may grow without breaking anyone: the
    /// methods are the way to read it.
    owner: String,
}

impl std::fmt::Display for Participant {
    /// The owner id.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.owner)
    }
}

impl Participant {
    /// The participant whose owner id is `owner`, as a status reports it
    /// (for code that reads statuses, and its tests).
    ///
    /// ```
    /// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:7");
    /// assert_eq!(who.owner(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:7");
    /// assert_eq!(who.to_string(), who.owner());
    /// ```
    pub fn new(owner: impl Into<String>) -> Self {
        Participant {
            owner: owner.into(),
        }
    }

    /// The owner id as Redis keeps it: `<client id>:<thread number>` for a
    /// thread's acquisitions, `<client id>:u<call>` for an
    /// [unbound](crate::FairMutex::unbound) one, then `@<identity>` when
    /// the client has one; an [election](crate::Election)'s candidate is
    /// `<client id>:u<call>@<value>`.
    ///
    /// ```
    /// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12@web-3");
    /// assert_eq!(who.owner(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12@web-3");
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The id of the client (see [`Client::id`](crate::Client::id)).
    ///
    /// ```
    /// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12");
    /// assert_eq!(who.client_id(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b");
    /// ```
    pub fn client_id(&self) -> &str {
        self.owner
            .split_once(':')
            .map_or(&self.owner, |(client, _)| client)
    }

    /// What follows the client id: the thread (or unbound call) part, and
    /// the identity if any.
    fn parts(&self) -> (&str, Option<&str>) {
        let rest = self.owner.split_once(':').map_or("", |(_, rest)| rest);
        match rest.split_once('@') {
            Some((slot, identity)) => (slot, Some(identity)),
            None => (rest, None),
        }
    }

    /// The thread's number inside its process; `None` for an
    /// [unbound](crate::FairMutex::unbound) acquisition, which no thread
    /// owns.
    ///
    /// ```
    /// let thread = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:3");
    /// assert_eq!(thread.thread(), Some(3));
    /// let unbound = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12");
    /// assert_eq!(unbound.thread(), None);
    /// ```
    pub fn thread(&self) -> Option<u64> {
        self.parts().0.parse().ok()
    }

    /// The identity its client was built with
    /// ([`ClientBuilder::identity`](crate::ClientBuilder::identity)), if
    /// any; for an [election](crate::Election)'s candidate, the value it
    /// campaigns with.
    ///
    /// ```
    /// let named = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:3@web-3/worker-7");
    /// assert_eq!(named.identity(), Some("web-3/worker-7"));
    /// let unnamed = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:3");
    /// assert_eq!(unnamed.identity(), None);
    /// ```
    pub fn identity(&self) -> Option<&str> {
        self.parts().1
    }
}

/// One hold of a lock, as a status lists it, whatever the kind: the
/// mutex's holder, a semaphore's permits, a reader-writer lock's read or
/// write.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// for holder in client.fair_semaphore("uploads", 4).status(10)?.holders {
///     println!(
///         "{} holds {} permit(s), token {}, lease left {:?}",
///         holder.who.identity().unwrap_or(holder.who.owner()),
///         holder.permits,
///         holder.fencing_token,
///         holder.remaining_lease,
///     );
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// Who holds it.
    pub who: Participant,
    /// A reader-writer lock's hold: read (shared) or write (alone); `None`
    /// for the other kinds.
    pub access: Option<Access>,
    /// The permits the hold takes: a semaphore's `acquire_many(n)`'s `n`;
    /// 1 for the other kinds.
    pub permits: u32,
    /// The guards of the holding thread counted in it: a mutex's
    /// re-entries; 1 for the other kinds, whose every guard is a hold of
    /// its own.
    pub hold_count: u32,
    /// Fencing token of the hold.
    pub fencing_token: u64,
    /// Lease left, on every kind; `None` when the hold has no expiry (its
    /// key was written without one, never by fairlock). A hold whose lease
    /// ran out is not listed.
    pub remaining_lease: Option<Duration>,
}

/// A queued waiter, in queue order, whatever the kind.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// for (place, waiter) in client.fair_rwlock("catalog").status(10)?.waiters.iter().enumerate() {
///     println!("{place}: {} wants {:?}", waiter.who, waiter.access);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// Who waits.
    pub who: Participant,
    /// What a reader-writer lock's waiter waits for; `None` for the other
    /// kinds (and for an entry fairlock did not write).
    pub access: Option<Access>,
    /// The permits it asks for: a semaphore's `n`; 1 for the other kinds
    /// (0 for an entry fairlock did not write).
    pub permits: u32,
    /// How long it keeps its place without another heartbeat from its
    /// client; `None` for a dead entry not yet dropped.
    pub liveness_left: Option<Duration>,
}

/// What [`FairMutex::status`](crate::FairMutex::status) saw, in one atomic
/// read (also what [`Election::status`](crate::Election::status) returns:
/// the leader as the holder, the candidates as the waiters).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let status = client.fair_mutex("nightly-report").status(5)?;
/// match &status.holder {
///     Some(holder) => println!("held by {} for {:?} more", holder.who, holder.remaining_lease),
///     None => println!("free"),
/// }
/// println!("{} waiting; last token {:?}", status.queue_len, status.last_fencing_token);
/// # Ok(()) }
/// ```
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
            queue_len: count(reply.live_waiters),
            last_fencing_token: last_token(&reply),
            holder: holders(reply.holders, Ask::Mutex).into_iter().next(),
            waiters: queued(reply.waiters, Ask::Mutex),
        }
    }
}

/// What [`FairSemaphore::status`](crate::FairSemaphore::status) saw, in one
/// atomic read.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let status = client.fair_semaphore("uploads", 4).status(10)?;
/// println!(
///     "{} of {:?} permits free, {} holds, {} waiting",
///     status.available, status.permits, status.holder_count, status.queue_len
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreStatus {
    /// The number of permits the semaphore was made with, or `None` when it
    /// is not in use (no holder or waiter for a fence life).
    pub permits: Option<u32>,
    /// The holds now, by lease end (at most the number asked for), each
    /// with the permits it takes.
    pub holders: Vec<Holder>,
    /// Live holds in total (may exceed `holders.len()`).
    pub holder_count: usize,
    /// Permits free now (0 when `permits` is `None`).
    pub available: u32,
    /// The first queued waiters, in the order they will get their permits.
    pub waiters: Vec<QueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
}

impl SemaphoreStatus {
    /// The public form of what `counted/status.lua` returned.
    pub(crate) fn from_reply(reply: StatusReply) -> Self {
        let kind = Ask::Permits { n: 1, of: 1 };
        let available = reply.capacity.map_or(0, |n| n.saturating_sub(reply.used));
        SemaphoreStatus {
            permits: reply.capacity.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            available: u32::try_from(available).unwrap_or(u32::MAX),
            holder_count: count(reply.live_holds),
            queue_len: count(reply.live_waiters),
            last_fencing_token: last_token(&reply),
            holders: holders(reply.holders, kind),
            waiters: queued(reply.waiters, kind),
        }
    }
}

/// What [`FairRwLock::status`](crate::FairRwLock::status) saw, in one
/// atomic read.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let status = client.fair_rwlock("catalog").status(10)?;
/// if status.write_held {
///     println!("a writer holds it; {} waiting", status.queue_len);
/// } else {
///     println!("{} reader(s) hold it", status.holder_count);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwLockStatus {
    /// The holds now, by lease end (at most the number asked for): one
    /// write hold (or several of one thread, re-entered), or readers.
    pub holders: Vec<Holder>,
    /// Live holds in total (may exceed `holders.len()`).
    pub holder_count: usize,
    /// Whether a writer holds it.
    pub write_held: bool,
    /// The first queued waiters, in the order they will get the lock.
    pub waiters: Vec<QueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
}

impl RwLockStatus {
    /// The public form of what `counted/status.lua` returned.
    pub(crate) fn from_reply(reply: StatusReply) -> Self {
        let kind = Ask::RwLock(Access::Read);
        RwLockStatus {
            // A write takes every unit; reads alone never reach that many.
            write_held: Ask::access_of(reply.used) == Access::Write,
            holder_count: count(reply.live_holds),
            queue_len: count(reply.live_waiters),
            last_fencing_token: last_token(&reply),
            holders: holders(reply.holders, kind),
            waiters: queued(reply.waiters, kind),
        }
    }
}

/// A count of a status reply as a `usize`.
fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The last fencing token of a status reply, if any was recorded.
fn last_token(reply: &StatusReply) -> Option<u64> {
    Some(reply.last_token).filter(|&token| token > 0)
}

/// A duration of `ms` when not negative.
fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// What a hold or waiter of `units` of a lock asked of like `kind` is: its
/// access (a rwlock's; `None` for 0 units, a member fairlock did not write)
/// and permits (a semaphore's; 1 for the other kinds, 0 for a foreign
/// member).
fn shape(kind: Ask, units: u64) -> (Option<Access>, u32) {
    match kind {
        Ask::RwLock(_) => (
            (units > 0).then(|| Ask::access_of(units)),
            u32::from(units > 0),
        ),
        Ask::Permits { .. } => (None, u32::try_from(units).unwrap_or(u32::MAX)),
        Ask::Mutex => (None, 1),
    }
}

/// The holds of a status reply on a lock like `kind`, by lease end.
fn holders(holders: Vec<HolderReply>, kind: Ask) -> Vec<Holder> {
    holders
        .into_iter()
        .map(|holder| {
            let (access, permits) = shape(kind, holder.units);
            Holder {
                who: Participant {
                    owner: holder.owner,
                },
                access,
                permits,
                hold_count: holder.count,
                fencing_token: holder.token,
                remaining_lease: holder.lease_left_ms.and_then(millis),
            }
        })
        .collect()
}

/// The waiters of a status reply on a lock like `kind`, in queue order.
fn queued(waiters: Vec<WaiterReply>, kind: Ask) -> Vec<QueuedWaiter> {
    waiters
        .into_iter()
        .map(|waiter| {
            let (access, permits) = shape(kind, waiter.units);
            QueuedWaiter {
                who: Participant {
                    owner: waiter.owner,
                },
                access,
                permits,
                liveness_left: millis(waiter.liveness_left_ms),
            }
        })
        .collect()
}
