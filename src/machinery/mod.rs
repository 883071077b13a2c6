//! The client machinery layer: the engine every handle runs on (the
//! acquire algorithm, the guard core, changes of access, the admin calls,
//! the election's watch), and under it the shared state, background
//! threads, waiters, holds and give-backs.

mod access_change;
pub(crate) mod acquisition;
pub(crate) mod call_hold;
pub(crate) mod cancel;
mod cluster_rounds;
pub(crate) mod engine;
pub(crate) mod give_backs;
pub(crate) mod holds;
pub(crate) mod lease_policy;
pub(crate) mod observe;
mod own_conns;
mod owner;
mod permits_seen;
mod queue_wait;
mod renewal;
pub(crate) mod shared;
mod start;
pub(crate) mod subscriber;
pub(crate) mod target;
pub(crate) mod wait;
pub(crate) mod waiters;
pub(crate) mod watch;
pub(crate) mod watchdog;
