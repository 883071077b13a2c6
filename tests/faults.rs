//! Faults, for every kind of lock where the fault applies, against real
//! redis-servers and real processes; every wait is bounded, and each test
//! prints what it measured.
//!
//! - faults/mutex.rs, the mutex (the election runs its engine): killed
//!   holders and waiters, long holds, skewed client clocks, a Redis
//!   restart that loses its data, a killed subscription, a stalled server,
//!   an unreachable server, mutual exclusion under churn with a killed
//!   process, no leaks, and a waiter that reads its handoff only after the
//!   lease it was handed ran out;
//! - faults/counted.rs, the counted engine's kinds, each test on a
//!   semaphore and on a rwlock's writes: killed waiter processes, a hold
//!   whose link went dark or that was removed from Redis, timeouts and
//!   cancellations under contention.
//!
//! The same faults on other deployments: tests/partitions.rs (links cut
//! and stalled), tests/cluster.rs and tests/sentinel.rs (failovers).

#[path = "faults/counted.rs"]
mod counted;
#[path = "faults/mutex.rs"]
mod mutex;
