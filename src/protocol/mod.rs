//! The bottom layer: what fairlock says to Redis about one lock (a mutex,
//! a semaphore, a reader-writer lock or an election: [`LockKind`]), and
//! nothing about how it gets there. Key names and name validation; what a
//! call asks for ([`Ask`]); one typed value per Redis-side operation, which
//! owns its KEYS and ARGV order and the parsing of its reply, its script
//! following from the lock's kind ([`Script::of`]: the mutex's engine, the
//! same with an election's announcements, or the counted one); the wake
//! messages the scripts publish; an election's values and the messages its
//! scripts publish on its channel; the replication check that
//! rides with every write. This is the only layer that looks at a lock's
//! kind. Depends only on [`error`](crate::error).
//!
//! A new Redis-side operation is one Lua file per engine in `lua/` plus
//! one value here implementing [`Operation`].

mod abandon;
mod acquire;
mod ask;
mod cancel;
mod downgrade;
mod election;
mod force_release;
mod format;
mod heartbeat;
pub mod keys;
mod lease;
mod operation;
pub(crate) mod owner;
mod queue_entry;
mod release;
mod renew;
mod replication;
mod revoke;
mod set_permits;
mod status;
mod upgrade;
mod wake;

pub use abandon::Abandon;
pub use acquire::{Acquire, AcquireReply, Mode};
pub use ask::{Access, Ask};
pub use cancel::{Cancel, CancelReply};
pub use downgrade::{Downgrade, DowngradeReply};
pub use election::{
    check_value, election_channel, Change, ElectionMessage, HISTORY_LEN, MAX_VALUE_LEN,
};
pub use force_release::{ForceRelease, Freed};
pub use format::DATA_FORMAT;
pub use heartbeat::{Heartbeat, HeartbeatReply, WaiterStatus};
pub use keys::{LockKeys, LockKind};
pub use lease::Lease;
pub use operation::{unexpected, words, CommonArgs, Operation, Script};
pub use queue_entry::{Call, QueueEntry};
pub use release::{Release, ReleaseReply};
pub use renew::{Renew, RenewReply};
pub use replication::{SyncReplicas, Written};
pub use revoke::{Revoke, Revoked};
pub use set_permits::{PermitsSet, SetPermits};
pub use status::{Capacity, HolderReply, Status, StatusReply, WaiterReply};
pub use upgrade::{Upgrade, UpgradeReply, UpgradeStep};
pub use wake::{check_subscribed, Push, Route, WakeMessage};
// Named by the tests and benches only, through `fairlock::__test_support`
// (the library reaches them through the values above).
pub use {
    abandon::AbandonReply,
    ask::{RW_CAPACITY, RW_UPGRADABLE, RW_UPGRADE_CLAIM},
    operation::{Engine, Op},
    release::HandedOver,
};
