//! The bottom layer: what fairlock says to Redis about one lock, and
//! nothing about how it gets there. Key names and name validation; one
//! typed value per Redis-side operation, which owns its script, its KEYS
//! and ARGV order and the parsing of its reply; the wake messages the
//! scripts publish; the replication check that rides with every write.
//! Depends only on [`error`](crate::error).
//!
//! A new Redis-side operation is one Lua file in `lua/` plus one value
//! here implementing [`Operation`].

mod abandon;
mod acquire;
mod cancel;
mod force_release;
mod heartbeat;
pub(crate) mod keys;
mod operation;
mod release;
mod renew;
mod replication;
mod status;
mod wake;

pub(crate) use abandon::Abandon;
pub(crate) use acquire::{Acquire, AcquireReply, Mode};
pub(crate) use cancel::{Cancel, CancelReply};
pub(crate) use force_release::ForceRelease;
pub(crate) use heartbeat::{Heartbeat, HeartbeatReply, WaiterBeat, WaiterStatus};
pub(crate) use keys::LockKeys;
pub(crate) use operation::{unexpected, Operation, Script};
pub(crate) use release::{Release, ReleaseReply};
pub(crate) use renew::Renew;
pub(crate) use replication::SyncReplicas;
pub(crate) use status::{Status, StatusReply};
pub(crate) use wake::WakeMessage;
