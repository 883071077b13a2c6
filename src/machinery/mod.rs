//! The client machinery layer, grouped by the thread that runs the code:
//! the client's core and its entry points (`core`), the caller's side of a call
//! (`caller`: acquire, wait, upgrade, cancel, the hold it returns), the
//! registries of holds (`holds`), the two background threads (`watchdog`,
//! `subscriber`), the state they all share (`shared`) and what fairlock
//! reports about itself (`observe`).

pub(crate) mod caller;
pub(crate) mod core;
pub(crate) mod holds;
pub(crate) mod observe;
pub(crate) mod shared;
pub(crate) mod subscriber;
pub(crate) mod watchdog;
