//! The caller's side: what runs on the thread that calls `lock()` (or
//! `upgrade`, `unlock`, a cancel): one acquisition, its wait in the queue
//! parked on its own [`Waiter`](waiters::Waiter), a change of access, and
//! the hold a call returns ([`CallHold`](call_hold::CallHold)), which every
//! guard releases through.

pub(crate) mod acquisition;
pub(crate) mod call_hold;
pub(crate) mod cancel;
mod queue_wait;
pub(crate) mod target;
mod upgrade;
pub(crate) mod wait;
pub(crate) mod waiters;
