//! A snapshot of one lock of any kind, for operators: who holds it, who
//! waits, in order, and what it admits (Curator's one
//! `getParticipantNodes` for every lock type); and who each of them is
//! (`Participant`: its owner id, taken apart by
//! [`protocol::owner`](crate::protocol::owner)).

use std::time::Duration;

use crate::error::Result;
use crate::machinery::caller::target::Target;
use crate::machinery::core::Core;
use crate::protocol::{owner, Access, Capacity, HolderReply, LockKind, StatusReply, WaiterReply};

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

/// What a status read saw, in one atomic read, whatever the kind: a mutex,
/// a semaphore, a reader-writer lock, an election (its leader as the
/// holder, its candidates as the waiters). Made by
/// [`FairLock::status`](crate::FairLock::status) and
/// [`Client::status`](crate::Client::status).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let status = client.fair_semaphore("uploads", 4).status(10)?;
/// println!(
///     "{:?}: {:?} free, {} holds, {} waiting, last token {:?}",
///     status.capacity,
///     status.available(),
///     status.holder_count,
///     status.queue_len,
///     status.last_fencing_token
/// );
/// for holder in &status.holders {
///     println!("{} holds {} permit(s)", holder.who, holder.permits);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// Which primitive was read.
    pub kind: LockKind,
    /// What it admits at once: one holder, a semaphore's permits (unknown
    /// while nobody uses it), or readers or one writer.
    pub capacity: Capacity,
    /// The holds now, by lease end (at most the number asked for), each
    /// with what it takes.
    pub holders: Vec<Holder>,
    /// Live holds in total (may exceed `holders.len()`).
    pub holder_count: usize,
    /// The first queued waiters, in the order they will get the lock, and
    /// among them, where it is, any dead entry not yet dropped (its
    /// `liveness_left` `None`), which will not.
    pub waiters: Vec<QueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
    available: Option<u32>,
    write_held: bool,
}

impl Status {
    /// Reads the status of `target`, listing at most `max` holders and
    /// `max` waiters.
    pub(crate) fn read(core: &Core, target: &Target, max: usize) -> Result<Status> {
        Ok(Status::from_reply(core.status_by(target, max, max, None)?))
    }

    /// The first holder by lease end (a mutex's or an election's only
    /// one), if any was listed.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.fair_mutex("nightly-report").status(1)?.holder() {
    ///     Some(holder) => println!("held by {} for {:?} more", holder.who, holder.remaining_lease),
    ///     None => println!("free"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn holder(&self) -> Option<&Holder> {
        self.holders.first()
    }

    /// Permits free now: a semaphore's, or a mutex's and an election's (0
    /// or 1); `None` for a reader-writer lock, and for a semaphore nobody
    /// uses (whose permits are [`Capacity::Unknown`]).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.fair_semaphore("uploads", 4).status(0)?;
    /// println!("{} free", status.available().unwrap_or(4));
    /// # Ok(()) }
    /// ```
    pub fn available(&self) -> Option<u32> {
        self.available
    }

    /// Whether a writer holds it (a reader-writer lock's; false for the
    /// other kinds).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.fair_rwlock("catalog").status(10)?;
    /// if status.is_write_held() {
    ///     println!("a writer holds it; {} waiting", status.queue_len);
    /// } else {
    ///     println!("{} reader(s) hold it", status.holder_count);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_write_held(&self) -> bool {
        self.write_held
    }

    /// The public form of what a `status` script returned.
    pub(crate) fn from_reply(reply: StatusReply) -> Self {
        let kind = reply.kind;
        let holder = |holder: HolderReply| {
            let (access, permits) = kind.access_and_permits(holder.units);
            Holder {
                who: Participant::new(holder.owner),
                access,
                permits,
                hold_count: holder.count,
                fencing_token: holder.token,
                remaining_lease: holder.lease_left_ms.and_then(millis),
            }
        };
        let waiter = |waiter: WaiterReply| {
            let (access, permits) = kind.access_and_permits(waiter.units);
            QueuedWaiter {
                who: Participant::new(waiter.owner),
                access,
                permits,
                liveness_left: millis(waiter.liveness_left_ms),
            }
        };
        Status {
            kind,
            capacity: reply.admits(),
            available: reply.available(),
            write_held: reply.write_held(),
            holder_count: count(reply.live_holds),
            queue_len: count(reply.live_waiters),
            last_fencing_token: Some(reply.last_token).filter(|&token| token > 0),
            holders: reply.holders.into_iter().map(holder).collect(),
            waiters: reply.waiters.into_iter().map(waiter).collect(),
        }
    }
}

/// A count of a status reply as a `usize`.
fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A duration of `ms` when not negative.
fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

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
        let owner = owner.into();
        Participant { owner }
    }

    /// The owner id as Redis keeps it: `<client id>:<thread number>` for a
    /// thread's acquisitions, `<client id>:u<call>` for an
    /// [unbound](crate::FairMutex::unbound) one, then `@<identity>` when
    /// the client has one; an [election](crate::Election)'s candidate is
    /// `<client id>:u<call>@<value>` (a [bound](crate::FairLock::bound)
    /// one's `<client id>:<thread number>@<value>`).
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
        owner::client_of(&self.owner).unwrap_or(&self.owner)
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
        owner::caller_of(&self.owner).0.parse().ok()
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
        owner::caller_of(&self.owner).1
    }
}
