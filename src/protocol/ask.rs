//! What one call asks of its lock: the kind of lock, and for a counted lock
//! how many of its units. The one place that says what a semaphore's
//! permits, a read and a write are to the counted engine.

use crate::protocol::LockKind;

/// How a reader-writer lock is held: shared (read) or exclusive (write), as
/// statuses ([`Holder::access`](crate::Holder::access)) and guards
/// ([`Guard::access`](crate::Guard::access)) report it.
///
/// ```no_run
/// use fairlock::Access;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// for holder in client.fair_rwlock("catalog").status(10)?.holders {
///     match holder.access {
///         Some(Access::Write) => println!("{} writes", holder.who),
///         Some(Access::Read) => println!("{} reads", holder.who),
///         _ => {} // not a rwlock's hold, or an access added later
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// Shared with other readers.
    Read,
    /// Alone.
    Write,
    /// Shared with readers, but not with writers or another upgradable
    /// read: one that can become the write without letting anyone write
    /// in between ([`UpgradableReadGuard::upgrade`](crate::UpgradableReadGuard::upgrade)).
    UpgradableRead,
}

/// The units of a reader-writer lock: a read takes one, a write all of
/// them, so a write waits for every read and excludes every other hold
/// (tokio's RwLock on its batch semaphore does the same with `MAX_READS`).
pub const RW_CAPACITY: u32 = u32::MAX;

/// The units of a reader-writer lock's upgradable read: more than half of
/// [`RW_CAPACITY`], so that it fits beside reads (up to 2^31 - 1 of them)
/// but not beside a write or a second upgradable read, and the admission
/// test stays a number test (the only place where the two counted
/// kinds differ).
pub const RW_UPGRADABLE: u32 = RW_CAPACITY / 2 + 1;

/// The units an upgrade claims (its queue entry's): what a write takes
/// beyond the upgradable read it holds, so the claim fits, by the same
/// number test, once no read granted before it is left.
pub const RW_UPGRADE_CLAIM: u32 = RW_CAPACITY - RW_UPGRADABLE;

/// What one acquire call asks for. The protocol value of every step
/// follows from it; the client machinery never looks inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ask {
    /// A mutex's hold, re-entrant per thread.
    Mutex,
    /// `n` of a semaphore's `of` permits; each call is a hold of its own.
    Permits {
        /// The permits this call takes.
        n: u32,
        /// The semaphore's permits.
        of: u32,
    },
    /// A reader-writer lock's read, upgradable read or write hold,
    /// re-entrant per thread through its live guards.
    RwLock(Access),
    /// A reader-writer lock's upgrade: the claim of the upgradable read
    /// a call holds to become the write (`upgrade.lua`), waiting as a
    /// queue entry of [`RW_UPGRADE_CLAIM`] units under that call's id.
    Upgrade,
}

impl Ask {
    /// The kind of lock asked of.
    pub fn kind(self) -> LockKind {
        match self {
            Ask::Mutex => LockKind::Mutex,
            Ask::Permits { .. } => LockKind::Semaphore,
            Ask::RwLock(_) | Ask::Upgrade => LockKind::RwLock,
        }
    }

    /// Whether a lock of `kind` takes this ask: a mutex's ask is also an
    /// election's (an election is a mutex's queue in keys of its own).
    pub fn fits(self, kind: LockKind) -> bool {
        kind == self.kind() || (self == Ask::Mutex && kind == LockKind::Election)
    }

    /// The units the lock has (the counted engine's capacity).
    pub fn capacity(self) -> u32 {
        match self {
            Ask::Mutex => 1,
            Ask::Permits { of, .. } => of,
            Ask::RwLock(_) | Ask::Upgrade => RW_CAPACITY,
        }
    }

    /// The units this call takes.
    pub fn units(self) -> u32 {
        match self {
            Ask::Mutex | Ask::RwLock(Access::Read) => 1,
            Ask::Permits { n, .. } => n,
            Ask::RwLock(Access::Write) => RW_CAPACITY,
            Ask::RwLock(Access::UpgradableRead) => RW_UPGRADABLE,
            Ask::Upgrade => RW_UPGRADE_CLAIM,
        }
    }

    /// A reader-writer lock's access (read or write); `None` for the
    /// other kinds.
    pub fn access(self) -> Option<Access> {
        match self {
            Ask::RwLock(access) => Some(access),
            Ask::Upgrade => Some(Access::Write),
            _ => None,
        }
    }

    /// The permits a hold of this call takes: a semaphore's `n`; 1 for the
    /// other kinds (a write takes every unit, but one hold).
    pub fn permits(self) -> u32 {
        match self {
            Ask::Permits { n, .. } => n,
            _ => 1,
        }
    }

    /// Whether a hold excludes every other (a mutex's, a write): a thread
    /// re-enters through such a hold first.
    pub fn exclusive(self) -> bool {
        matches!(self, Ask::Mutex | Ask::RwLock(Access::Write))
    }

    /// Whether a thread holding the lock may take it again through its live
    /// guard (a mutex, a reader-writer lock), rather than every call being
    /// a hold of its own (a semaphore).
    pub fn reentrant(self) -> bool {
        !matches!(self, Ask::Permits { .. })
    }

    /// What a hold of this call on a lock of `kind` is, for messages:
    /// "mutex \"name\"", "semaphore \"name\" permit", "rwlock \"name\" read
    /// hold", ..., and an election's "election \"name\" leadership".
    pub fn describe_on(self, kind: LockKind, name: &str) -> String {
        let rwlock = |hold| format!("rwlock {name:?} {hold}");
        match (kind, self) {
            (LockKind::Election, _) => format!("the leadership of election {name:?}"),
            (_, Ask::Mutex) => format!("mutex {name:?}"),
            (_, Ask::Permits { n: 1, .. }) => format!("semaphore {name:?} permit"),
            (_, Ask::Permits { n, .. }) => format!("semaphore {name:?} {n} permits"),
            (_, Ask::RwLock(Access::Read)) => rwlock("read hold"),
            (_, Ask::RwLock(Access::Write)) => rwlock("write hold"),
            (_, Ask::RwLock(Access::UpgradableRead)) => rwlock("upgradable read hold"),
            (_, Ask::Upgrade) => rwlock("upgrade"),
        }
    }

    /// A reader-writer lock's access of a hold or waiter of `units` (an
    /// upgrade's claim waits to write).
    pub fn access_of(units: u64) -> Access {
        match units {
            u if u >= u64::from(RW_CAPACITY) || u == u64::from(RW_UPGRADE_CLAIM) => Access::Write,
            u if u == u64::from(RW_UPGRADABLE) => Access::UpgradableRead,
            _ => Access::Read,
        }
    }
}
