//! fairlock's integration tests, linked into one binary as cargo's own
//! tests/testsuite is: each file of tests/ is a module here, so a test's
//! name starts with its file's (`fairness::...`, `protocol::mutex::...`)
//! and `cargo test --test suite -- fairness::` runs one file's tests.
//! One binary links fairlock, the support crate and redis once, where a
//! binary per file linked them 39 times.
//!
//! Two files are binaries of their own (tests/Cargo.toml), because they
//! look at the whole process: `lifecycle.rs` counts its threads and
//! `metrics.rs` installs its one metrics recorder. Everything else the
//! modules share in this process is shared on purpose: the support's
//! `serial()` now runs the timing-sensitive tests of every module one at a
//! time, and each test still starts its own servers. `manifest.rs` checks
//! that every file of tests/ is declared here or there.

mod api_values;
mod bad_input;
mod cancel;
mod cluster;
mod connections;
mod cost;
mod deadlines;
mod doc_links;
mod election;
mod examples;
mod fairness;
mod faults;
mod fence;
mod first_contact;
mod formats;
mod identity;
mod lease_signal;
mod leftovers;
mod liveness;
mod lua_helpers;
mod manifest;
mod max_hold;
mod model;
mod multi_lock;
mod partitions;
mod protocol;
mod protocol_values;
mod reentry;
mod revoke;
mod rwlock;
mod script_cache;
mod security;
mod semaphore;
mod sentinel;
mod servers;
mod signals;
mod soak;
mod status;
mod surface;
mod test_support;
mod unbound;
mod wakeup;
