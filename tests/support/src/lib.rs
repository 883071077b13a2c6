//! Test support for fairlock's integration tests and benches (a dev-only
//! crate of the workspace, never published): real redis-servers, Redis
//! Cluster and Sentinel topologies, child processes and what they agree on
//! with their test, a fork of the test's own process, lock threads, a storm of signals, a TCP relay for network faults (which
//! also records the commands its clients send), the Lua scripts driven directly, a
//! server whose clock a test steps, the ACL user of docs/security.md, the
//! one per-kind dispatch of the tests that do the same to every kind of
//! lock, the one overlap checker, and a seeded random generator. One module per concern; the items of
//! each are also re-exported here (of `roles`, only the wall clock and the
//! thread count), so `use fairlock_test_support::*` brings them all in.
pub mod acl;
pub mod busy;
pub mod children;
pub mod cluster;
pub mod commands;
pub mod fake_queue;
pub mod fork;
pub mod info;
pub mod kinds;
pub mod lock_threads;
pub mod overlap;
pub mod random;
pub mod refusals;
pub mod relay;
pub mod roles;
pub mod sentinel;
pub mod server;
pub mod server_clock;
pub mod signals;
pub mod timing;
pub mod tls;

pub use acl::*;
pub use busy::*;
pub use children::*;
pub use cluster::*;
pub use fake_queue::*;
pub use fork::*;
pub use info::*;
pub use kinds::*;
pub use lock_threads::*;
pub use overlap::*;
pub use random::Lcg;
pub use refusals::*;
pub use relay::*;
pub use roles::{thread_count, wall_clock_ms};
pub use sentinel::*;
pub use server::*;
pub use server_clock::*;
pub use signals::*;
pub use timing::*;
pub use tls::*;
