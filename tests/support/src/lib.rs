//! Test support for fairlock's integration tests and benches (a dev-only
//! crate of the workspace, never published): real redis-servers, Redis
//! Cluster and Sentinel topologies, child processes, lock threads, a TCP
//! relay for network faults, and the Lua scripts driven directly. One
//! module per concern; everything is also re-exported here, so
//! `use fairlock_test_support::*` brings in all of it.

pub mod children;
pub mod cluster;
pub mod fake_queue;
pub mod info;
pub mod lock_threads;
pub mod relay;
pub mod sentinel;
pub mod server;
pub mod timing;
pub mod tls;

pub use children::*;
pub use cluster::*;
pub use fake_queue::*;
pub use info::*;
pub use lock_threads::*;
pub use relay::*;
pub use sentinel::*;
pub use server::*;
pub use timing::*;
pub use tls::*;
