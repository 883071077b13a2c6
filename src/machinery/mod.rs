//! The client machinery layer: shared state, background threads, waiters, holds, give-backs.

mod cluster_rounds;
mod fx_hash;
pub(crate) mod give_backs;
pub(crate) mod holds;
pub(crate) mod observe;
mod own_conns;
mod renewal;
pub(crate) mod shared;
mod start;
pub(crate) mod subscriber;
pub(crate) mod waiters;
pub(crate) mod watchdog;
