//! `status.lua`: the whole picture of one lock, read in one atomic step.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{count, int, list, text, unexpected, Engine, Op, Operation};
use crate::protocol::{Access, Ask, Change, LockKind};

/// Reads the status of a lock of `kind`, listing at most `waiters` queued
/// waiters and (a counted lock) `holders` holds.
pub struct Status {
    /// The kind of lock read: the engines answer in their own shapes.
    pub kind: LockKind,
    /// Most waiters to list, from the head of the queue.
    pub waiters: usize,
    /// Most holds to list, by lease end (the mutex has at most one).
    pub holders: usize,
}

/// The scripts' bound on what they list.
const MAX_LISTED: usize = 1_000_000_000;

/// What a lock admits at once, as a status reports it.
///
/// ```no_run
/// use fairlock::Capacity;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// match client.fair_semaphore("uploads", 4).status(0)?.capacity {
///     Capacity::Permits(n) => println!("{n} permits"),
///     Capacity::Unknown => println!("not in use: the first call sets the permits"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capacity {
    /// One holder at a time: a mutex, an election.
    One,
    /// A semaphore's number of permits.
    Permits(u32),
    /// Any number of readers, or one writer: a reader-writer lock.
    ReadersOrOneWriter,
    /// A semaphore nobody holds or waits for: its permits are recorded by
    /// the first call that uses it, and forgotten a fence life after the
    /// last holder and waiter.
    Unknown,
}

impl LockKind {
    /// What a hold or waiter of `units` on a lock of this kind is, as a
    /// status lists it: its access (a rwlock's; `None` for 0 units, a
    /// member fairlock did not write) and permits (a semaphore's; 1 for the
    /// other kinds, 0 for a foreign member).
    pub(crate) fn access_and_permits(self, units: u64) -> (Option<Access>, u32) {
        let ours = units > 0;
        match self {
            LockKind::RwLock => (ours.then(|| Ask::access_of(units)), u32::from(ours)),
            LockKind::Semaphore => (None, u32::try_from(units).unwrap_or(u32::MAX)),
            LockKind::Mutex | LockKind::Election => (None, u32::from(ours)),
        }
    }
}

/// A waiter of `units`, from its `owner` and its
/// liveness `left` as a status reply lists them.
fn waiter(owner: &Value, units: u64, left: &Value) -> Result<WaiterReply> {
    Ok(WaiterReply {
        owner: text(owner)?,
        units,
        liveness_left_ms: int(left)?,
    })
}

/// One hold, as a status lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderReply {
    /// The holding thread's owner id.
    pub owner: String,
    /// The acquire call that made it (a counted lock's; the mutex's hold
    /// is the thread's, whatever calls re-entered it).
    pub call: Option<u64>,
    /// The units it takes (a mutex's: 1; a write: the rwlock's capacity),
    /// from which a status works out its access and permits.
    pub units: u64,
    /// The thread's holds counted in it (a mutex's re-entries; 1 otherwise).
    pub count: u32,
    /// Its fencing token.
    pub token: u64,
    /// Its lease left in ms; `None` when the key has no expiry (never set
    /// by fairlock).
    pub lease_left_ms: Option<i64>,
}

/// One queued waiter, as a status lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaiterReply {
    /// The waiting thread's owner id (or the whole member, for one
    /// fairlock did not write).
    pub owner: String,
    /// The units it asks for (0 for a member fairlock did not write),
    /// from which a status works out what it waits for and the permits it
    /// asks for.
    pub units: u64,
    /// How long it keeps its place without a heartbeat, in ms (negative:
    /// a dead entry not dropped yet).
    pub liveness_left_ms: i64,
}

/// What a status read saw, the same shape for every kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReply {
    /// The units the lock has: 1 for a mutex; a counted lock's, or `None`
    /// when it is not in use (its meta gone a fence life after its last
    /// holder and waiter).
    pub capacity: Option<u64>,
    /// The kind of lock read.
    pub kind: LockKind,
    /// The units the live holds take.
    pub used: u64,
    /// Live holds in total (may exceed `holders.len()`).
    pub live_holds: u64,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub live_waiters: u64,
    /// The last fencing token issued, or 0.
    pub last_token: u64,
    /// The holds listed, by lease end.
    pub holders: Vec<HolderReply>,
    /// The waiters listed, in queue order.
    pub waiters: Vec<WaiterReply>,
    /// An election's history of changes, oldest first (entries fairlock
    /// did not write left out); empty for the other kinds.
    pub history: Vec<Change>,
}

impl StatusReply {
    /// What the lock admits at once, as users see it.
    pub fn admits(&self) -> Capacity {
        match (self.kind, self.capacity) {
            (LockKind::Mutex | LockKind::Election, _) => Capacity::One,
            (LockKind::RwLock, _) => Capacity::ReadersOrOneWriter,
            (LockKind::Semaphore, Some(n)) => Capacity::Permits(n.try_into().unwrap_or(u32::MAX)),
            (LockKind::Semaphore, None) => Capacity::Unknown,
        }
    }

    /// Whether a write holds it (a rwlock's: a write takes every unit,
    /// reads alone never reach that many).
    pub fn write_held(&self) -> bool {
        self.kind == LockKind::RwLock && Ask::access_of(self.used) == Access::Write
    }

    /// Free permits: a semaphore's, or a mutex's and an election's (0 or
    /// 1); `None` for a rwlock, and for a semaphore not in use.
    pub fn available(&self) -> Option<u32> {
        let free = |all: u32| all.saturating_sub(u32::try_from(self.used).unwrap_or(u32::MAX));
        match self.admits() {
            Capacity::One => Some(free(1)),
            Capacity::Permits(all) => Some(free(all)),
            _ => None,
        }
    }
}

impl Operation for Status {
    type Reply = StatusReply;
    const OP: Op = Op::Status;

    fn args(&self) -> Vec<String> {
        let mut args = vec![self.waiters.min(MAX_LISTED).to_string()];
        // The mutex's engine lists its one holder whatever was asked (cut
        // by `parse_mutex`).
        if Engine::of(self.kind) == Engine::Counted {
            args.push(self.holders.min(MAX_LISTED).to_string());
        }
        args
    }

    fn parse(&self, reply: Value) -> Result<StatusReply> {
        let items = list(reply, |n| n >= 6)?;
        match Engine::of(self.kind) {
            Engine::Mutex | Engine::Election => parse_mutex(&items, self.kind, self.holders),
            Engine::Counted => parse_counted(&items, self.kind, self.holders),
        }
    }
}

/// `counted/status.lua`'s reply, `asked` holds asked for: capacity, used,
/// live holds, live waiters, last token, holds listed, then the holds
/// (owner, call, units, token, lease left) and the waiters (owner, units,
/// left).
fn parse_counted(items: &[Value], kind: LockKind, asked: usize) -> Result<StatusReply> {
    // The sixth field is the number of holds listed (at most as many as
    // asked for), of five fields each; the waiters have three each.
    let listed = count(&items[5])? as usize;
    let rest = &items[6..];
    if listed > asked || rest.len() / 5 < listed || !(rest.len() - 5 * listed).is_multiple_of(3) {
        return Err(unexpected(&items));
    }
    let (holders, waiters) = rest.split_at(5 * listed);
    let holder = |h: &[Value]| {
        Ok(HolderReply {
            owner: text(&h[0])?,
            call: Some(count(&h[1])?),
            units: count(&h[2])?,
            count: 1,
            token: count(&h[3])?,
            lease_left_ms: Some(int(&h[4])?),
        })
    };
    let holders = holders.chunks(5).map(holder).collect::<Result<_>>()?;
    let waiters = waiters
        .chunks(3)
        .map(|w| waiter(&w[0], count(&w[1])?, &w[2]))
        .collect::<Result<_>>()?;
    Ok(StatusReply {
        capacity: Some(count(&items[0])?).filter(|&n| n > 0),
        kind,
        used: count(&items[1])?,
        live_holds: count(&items[2])?,
        live_waiters: count(&items[3])?,
        last_token: count(&items[4])?,
        holders,
        waiters,
        history: Vec::new(),
    })
}

/// The mutex's `status.lua` reply: holder (or ""), hold count, token, lease
/// left (-1: no expiry; -2: free), live waiters, last token, then the
/// waiters (owner, left); an election's ends with its history, newest
/// first; its holder listed when `asked` for one.
fn parse_mutex(items: &[Value], kind: LockKind, asked: usize) -> Result<StatusReply> {
    let (items, history) = match (kind, items.split_last()) {
        (LockKind::Election, Some((Value::Array(history), rest))) => (rest, history.as_slice()),
        _ => (items, &[][..]),
    };
    if !items.len().is_multiple_of(2) {
        return Err(unexpected(&items));
    }
    let history = (history.iter().rev())
        .filter_map(|entry| Change::parse(text(entry).ok()?.as_bytes()))
        .collect();
    let owner = text(&items[0])?;
    let held = u64::from(!owner.is_empty());
    let holders = if held == 0 || asked == 0 {
        Vec::new()
    } else {
        vec![HolderReply {
            owner,
            call: None,
            units: 1,
            count: u32::try_from(int(&items[1])?).unwrap_or(0),
            token: count(&items[2])?,
            lease_left_ms: Some(int(&items[3])?).filter(|&pttl| pttl != -1),
        }]
    };
    let waiters = items[6..]
        .chunks(2)
        .map(|pair| waiter(&pair[0], 1, &pair[1]))
        .collect::<Result<_>>()?;
    Ok(StatusReply {
        capacity: Some(1),
        kind,
        used: held,
        live_holds: held,
        live_waiters: count(&items[4])?,
        last_token: count(&items[5])?,
        holders,
        waiters,
        history,
    })
}
