//! The public handles layer: the client, the three locks and the
//! multi-lock, their guards, the election and the acquire algorithm.

mod acquisition;
pub(crate) mod builder;
mod call_hold;
pub(crate) mod cancel;
pub(crate) mod client;
pub(crate) mod election;
pub(crate) mod guard;
mod handle;
pub(crate) mod lease_signal;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod status;
pub(crate) mod unbound;
