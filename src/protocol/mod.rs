//! The bottom layer: what fairlock says to Redis about one lock (a mutex,
//! a semaphore or a reader-writer lock: [`LockKind`]), and nothing about
//! how it gets there. Key names and name validation; one typed value per Redis-side operation,
//! which owns its script, its KEYS and ARGV order and the parsing of its
//! reply; the wake messages the scripts publish; the replication check that
//! rides with every write.
//! Depends only on [`error`](crate::error).
//!
//! A new Redis-side operation is one Lua file in `lua/` plus one value
//! here implementing [`Operation`].

mod abandon;
mod acquire;
mod cancel;
mod force_release;
mod heartbeat;
pub mod keys;
mod operation;
mod queue_entry;
mod release;
mod renew;
mod replication;
// The rwlock's acquire, release, heartbeat, cancel, abandon and status have
// no client API yet: only the tests (the test-support feature) use them.
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
mod rw_abandon;
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
mod rw_acquire;
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
mod rw_cancel;
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
mod rw_heartbeat;
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
mod rw_release;
mod rw_renew;
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
mod rw_status;
mod sem_abandon;
mod sem_acquire;
mod sem_cancel;
mod sem_heartbeat;
mod sem_release;
mod sem_renew;
mod sem_status;
mod status;
mod wake;

pub use abandon::Abandon;
pub use abandon::AbandonReply;
pub use acquire::{Acquire, AcquireReply, Mode};
pub use cancel::{Cancel, CancelReply};
pub use force_release::ForceRelease;
pub use heartbeat::{Heartbeat, HeartbeatReply, WaiterStatus};
pub use keys::LockKeys;
pub use keys::LockKind;
pub use operation::{unexpected, CommonArgs, Operation, Script};
pub use queue_entry::QueueEntry;
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use release::{HandedOver, Release, ReleaseReply};
pub use renew::Renew;
pub use replication::SyncReplicas;
// The rwlock's protocol values have no client API yet: only the tests name
// them.
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use rw_abandon::RwAbandon;
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use rw_acquire::{Access, RwAcquire};
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use rw_cancel::RwCancel;
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use rw_heartbeat::RwHeartbeat;
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use rw_release::RwRelease;
pub use rw_renew::RwRenew;
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use rw_status::{RwHolder, RwStatus, RwStatusReply, RwWaiter};
pub use sem_abandon::SemAbandon;
pub use sem_acquire::SemAcquire;
pub use sem_cancel::SemCancel;
pub use sem_heartbeat::SemHeartbeat;
pub use sem_release::{SemRelease, SemReleaseReply};
pub use sem_renew::SemRenew;
// PermitHolder is named only by the test support (the library reads it
// through SemStatusReply).
#[cfg_attr(not(feature = "test-support"), allow(unused_imports))]
pub use sem_status::PermitHolder;
pub use sem_status::{SemStatus, SemStatusReply};
pub use status::{Status, StatusReply};
pub use wake::WakeMessage;
