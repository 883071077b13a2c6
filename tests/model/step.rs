//! What the model test does in one step: an operation of a virtual client
//! (its call named by an id that also fixes its owner, lease and units),
//! or a step of the server's clock. Tokens are named, not written, so a
//! sequence still means the same after the shrinker deleted steps from it.

use std::time::Duration;

use fairlock::__test_support::{Access, Ask, Lease, LockKind, Mode, QueueEntry, RW_UPGRADABLE};

/// Virtual clients: owner ids "c0:1" .. "c3:1".
pub const CLIENTS: u64 = 4;

/// One acquire call: its id fixes its client, lease and what it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: u64,
    pub ask: Ask,
}

impl Call {
    /// Call `id` asking for `units` of a lock of `kind` (of `capacity`).
    pub fn new(id: u64, kind: LockKind, units: u32, capacity: u32) -> Call {
        let ask = match kind {
            LockKind::Semaphore => Ask::Permits {
                n: units,
                of: capacity,
            },
            LockKind::RwLock if units == RW_UPGRADABLE => Ask::RwLock(Access::UpgradableRead),
            LockKind::RwLock if units > 1 => Ask::RwLock(Access::Write),
            LockKind::RwLock => Ask::RwLock(Access::Read),
            _ => Ask::Mutex,
        };
        Call { id, ask }
    }

    pub fn owner(&self) -> String {
        format!("c{}:1", self.id % CLIENTS)
    }

    /// The lease, ms: four kinds of call, by id.
    pub fn lease(&self) -> i64 {
        [1000, 2500, 1500, 4000][(self.id / CLIENTS % 4) as usize]
    }

    /// Whether the lease is fixed (no watchdog).
    pub fn fixed(&self) -> bool {
        (self.id / CLIENTS).is_multiple_of(2)
    }

    pub fn lease_arg(&self) -> Lease {
        let d = Duration::from_millis(self.lease() as u64);
        if self.fixed() {
            Lease::Fixed(d)
        } else {
            Lease::Renewed(d)
        }
    }

    pub fn units(&self) -> u32 {
        match self.ask {
            Ask::Mutex => 1,
            ask => ask.units(),
        }
    }

    /// The capacity the call says the lock has.
    pub fn ask_capacity(&self) -> u32 {
        match self.ask {
            Ask::Mutex => 1,
            ask => ask.capacity(),
        }
    }

    /// Its queue entry, as the scripts write it.
    pub fn entry(&self) -> String {
        let owner = self.owner();
        QueueEntry {
            owner: &owner,
            call: self.id,
            lease: self.lease_arg(),
            ask: self.ask,
        }
        .to_string()
    }
}

/// A token a step sends, named: none, the live hold's (of `call`'s
/// owner or any, as the model sees it), or one issued `n` tokens back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    Zero,
    Held,
    Back(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Acquire {
        call: Call,
        mode: Mode,
        guard: Token,
        timeout: i64,
    },
    Release {
        call: Call,
        token: Token,
    },
    Renew {
        call: Call,
        token: Token,
        lease: Option<i64>,
    },
    Heartbeat {
        calls: Vec<Call>,
        timeout: i64,
    },
    Cancel(Call),
    Abandon(Call),
    ForceRelease(u64),
    Revoke(u64),
    SetPermits(u32),
    /// An upgrade of `call`'s upgradable read: an attempt in `mode`, or
    /// (None) the claim withdrawn.
    Upgrade {
        call: Call,
        token: Token,
        mode: Option<Mode>,
        timeout: i64,
    },
    /// `call`'s hold down to a read or an upgradable read.
    Downgrade {
        call: Call,
        token: Token,
        to: Access,
    },
    /// The server's clock moves on by this many ms.
    Clock(i64),
}
