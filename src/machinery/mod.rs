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

/// Call `id` of the owner `c:<id>` on the mutex `name`, for unit tests.
#[cfg(test)]
pub(crate) fn test_call(id: u64, name: &str) -> crate::protocol::Call {
    use crate::protocol::{Ask, Call, Lease, LockKeys, LockKind};
    Call {
        keys: std::sync::Arc::new(LockKeys::of_kind("p", name, LockKind::Mutex).unwrap()),
        owner: format!("c:{id}").into(),
        id,
        lease: Lease::Fixed(std::time::Duration::from_secs(1)),
        ask: Ask::Mutex,
    }
}
