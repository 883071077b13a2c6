//! # fairlock: fair distributed locks on Redis
//!
//! Threads in many processes, on many machines, take turns on named locks
//! **in the order their requests reached Redis**: first come, first served.
//! Every wait blocks without polling (a push message wakes the waiter) and
//! returns a guard that releases on drop. The API is synchronous: no async
//! runtime is involved.
//!
//! ## Which primitive
//!
//! Every primitive is made by a [`Client`], without I/O, from a name; the
//! same name in another primitive is another lock.
//!
//! | you need | use | made by |
//! |---|---|---|
//! | one holder at a time | [`FairMutex`] → [`FairMutexGuard`] | [`Client::fair_mutex`] |
//! | at most N holders at once, a call may take several | [`FairSemaphore`] → [`SemaphorePermit`] | [`Client::fair_semaphore`] |
//! | many readers or one writer | [`FairRwLock`] → [`ReadGuard`] / [`WriteGuard`], and [`UpgradableReadGuard`] to upgrade | [`Client::fair_rwlock`] |
//! | several locks together, all or none, without deadlock | [`FairMultiLock`] → [`MultiGuard`] | [`Client::fair_multi_lock`] |
//! | one leader among many candidates, and who it is | [`Election`] → [`Leadership`], [`LeaderWatch`] | [`Client::election`] |
//!
//! All of them share one fair queue per name: a newcomer never passes a
//! queued waiter, `try_*` calls never queue and never barge, and a timed-out
//! or [cancelled](WaitCanceller) wait leaves the queue before it returns.
//!
//! ## One surface: kinds, ways of waiting, owners
//! Every lock of one name is a [`FairLock<K, O>`](FairLock) and every
//! guard a [`Guard<K, O>`](Guard): `K` is the [kind] (the aliases above
//! name them, and each alias's page lists its methods), `O` who owns what a
//! call takes. What every lock has (lease settings, status, force unlock)
//! and what every guard has (fencing token, lease signal,
//! [`unlock`](Guard::unlock)) is written once, for all, and comes first on
//! each page; each kind's own methods follow, in one block per kind. A
//! [`FairMultiLock`] is a type of its own: it shares only the lease
//! settings.
//! - **Ways of waiting**: each request has one general method taking a
//!   [`Wait`] ([`lock_with`](FairMutex::lock_with),
//!   [`acquire_many_with`](FairSemaphore::acquire_many_with),
//!   [`read_with`](FairRwLock::read_with), [`write_with`](FairRwLock::write_with),
//!   [`campaign_with`](Election::campaign_with)): forever, not at all, at
//!   most a duration, until an instant, each also ending on a
//!   [`WaitCanceller`]. The short forms are that method with one of them:
//!   `lock`, `try_lock`, `try_lock_for` (and `acquire`, `read`, `write`,
//!   `campaign`, ...).
//! - **Owners**: [`Bound`] (the default of the mutex, the semaphore and the
//!   rwlock) has a thread own its holds, re-entrant where the kind is, its
//!   guards staying on the thread (moving one to another thread fails to
//!   compile, naming [`MoveOnlyWithUnbound`]); [`Unbound`] (any lock's
//!   [`unbound()`](FairLock::unbound), the default of elections and
//!   multi-locks) has each acquisition own itself, its guard `Send + Sync +
//!   'static`, released on any thread. One rule gives the defaults
//!   ([`Ownership`](Ownership#which-is-the-default)).
//!
//! ## The model
//! - A [`Client`] owns an r2d2 pool of Redis connections and two threads:
//!   the *watchdog* renews the leases of held locks and heartbeats this
//!   client's queued waiters; the *subscriber* listens on the client's own
//!   channel and wakes waiting threads. Waiting holds no connection.
//! - A lock's state lives in a few keys sharing one cluster hash slot: the
//!   holds (each with its fencing token and its lease as a TTL), the FIFO
//!   queue and each waiter's liveness deadline. Every step is one Lua script
//!   that does O(log N) work in the number of waiters and reads time only
//!   from the server.
//! - Releasing hands the lock **directly** to the first live waiter (for a
//!   semaphore or a rwlock, to as many at the head as fit) and publishes one
//!   message to that waiter's client: the waiter returns without another
//!   round trip. No herd, no polling.
//! - Waiters stay queued as long as their client heartbeats them, however
//!   long the holder keeps the lock; a waiter whose client went silent loses
//!   its place after [`waiter_timeout`](ClientBuilder::waiter_timeout). A
//!   holder that dies frees the lock when its [lease](ClientBuilder::lease)
//!   runs out, and the head of the queue, which knows the lease's end, takes
//!   it at once.
//! - Scale-out is Redis's own: the same client runs on Redis Cluster
//!   (`redis+cluster://...`, locks spread over the masters by name) and on a
//!   Sentinel-managed master (`redis+sentinel://.../master`, followed across
//!   failovers); [`ClientBuilder::sync_replicas`] makes each lock write wait
//!   for replica acknowledgements.
//!
//! ## Fencing tokens
//! Every hold of every primitive gets a fencing token
//! ([`FairMutexGuard::fencing_token`], [`Leadership::term`], ...) larger than
//! every earlier token of its name, across clients. A lease-based lock cannot
//! stop a paused process (GC, swap, SIGSTOP) from acting after its lease ran
//! out; the protected resource can, by rejecting a write whose token is
//! smaller than one it has already seen.
//!
//! ## Knowing when a hold ends: the lease signal and the maximum hold
//! Each guard gives a [`LeaseSignal`] another thread blocks on: it fires
//! with [`LeaseEnd::Lost`] the moment the lease is gone: for a holder cut
//! off from Redis (a partition, a stalled server), at its own end of the
//! lease, before any other client can take the lock; for a
//! [`force_unlock`](FairMutex::force_unlock), which hands the lock on in
//! the same step, at once, by a message to the holder's client. A
//! paused process learns it only once it runs again. A handle made
//! [`with_max_hold`](FairMutex::with_max_hold) is renewed for at most that
//! long, even if its thread hangs: the signal says [`LeaseEnd::MaxHold`]
//! and the lock passes on when the lease ends. [`with_fixed_lease`](FairMutex::with_fixed_lease)
//! gives a fixed lease that no watchdog renews.
//!
//! ## Asking the holders to let go: revocation
//! [`revoke`](FairLock::revoke), on any lock, asks every hold of it there
//! now to let go and takes nothing: each guard's [`RevocationSignal`]
//! fires (and [`Guard::is_revoked`] turns true) within a round trip and
//! the message's delivery, or at its next renewal if the message was lost,
//! and the holder releases when it is ready. Holds taken later are not
//! asked.
//!
//! ## Examples
//! Each example needs a Redis server; `examples/` in the repository has a
//! runnable program for each primitive (`cargo run --example semaphore`, ...).
//!
//! A mutex, with its fencing token, a timeout and a fixed lease:
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> fairlock::Result<()> {
//! let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let mutex = client.fair_mutex("invoices");
//! {
//!     let guard = mutex.lock()?;
//!     // ... critical section; pass guard.fencing_token() to the resource ...
//! } // released here, handed to the next waiter
//!
//! if let Some(guard) = mutex.try_lock_for(Duration::from_secs(5))? {
//!     guard.unlock()?; // reports what a drop can only log
//! } // else: busy for 5 s, and out of the queue
//!
//! // A fixed lease, no watchdog: frees itself 2 s after it was granted.
//! let short = mutex.with_fixed_lease(Duration::from_secs(2)).lock()?;
//! short.unlock()?;
//! # Ok(()) }
//! ```
//!
//! A semaphore: at most 16 cores in use, a job taking 4 at once (a large
//! request at the head of the queue is never passed by smaller ones):
//! ```no_run
//! # fn main() -> fairlock::Result<()> {
//! # let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let cores = client.fair_semaphore("build-cores", 16);
//! let permit = cores.acquire_many(4)?;
//! println!("{} cores free", cores.available()?);
//! permit.unlock()?;
//! # Ok(()) }
//! ```
//!
//! A reader-writer lock: readers share, a writer holds it alone, and a
//! reader arriving after a queued writer waits behind it, so nobody starves:
//! ```no_run
//! # fn main() -> fairlock::Result<()> {
//! # let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let catalog = client.fair_rwlock("catalog");
//! let read = catalog.read()?;
//! drop(read);
//! let write = catalog.write()?;
//! write.unlock()?;
//! # Ok(()) }
//! ```
//!
//! A guard that moves to another thread, and a hold that cannot outlive its
//! purpose:
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> fairlock::Result<()> {
//! # let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let export = client.fair_mutex("nightly-export").with_max_hold(Duration::from_secs(600));
//! let guard = export.unbound().lock()?; // Send + 'static
//! let signal = guard.lease_signal();
//! let worker = std::thread::spawn(move || {
//!     while signal.ended().is_none() {
//!         // ... one batch, with guard.fencing_token() ...
//! #       break;
//!     }
//!     guard.unlock() // released on the worker thread
//! });
//! worker.join().expect("worker")?;
//! # Ok(()) }
//! ```
//!
//! Two accounts locked together, whatever order other callers name them in:
//! ```no_run
//! # fn main() -> fairlock::Result<()> {
//! # let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let both = client.fair_multi_lock(["account:17", "account:4"]).lock()?;
//! println!("account:4 token {:?}", both.fencing_token("account:4"));
//! both.unlock()?;
//! # Ok(()) }
//! ```
//!
//! A leader election: candidates lead one at a time, in arrival order; the
//! term fences the leader's writes, and anyone can watch who leads:
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> fairlock::Result<()> {
//! # let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
//! let election = client.election("scheduler");
//! let leadership = election.with_value("node-1").campaign()?; // waits its turn
//! println!("leading, term {}", leadership.term());
//!
//! let mut watch = election.watch()?; // every new leader and vacancy, in order
//! if let Some(fairlock::LeaderEvent::Leads(leader)) = watch.next(Duration::from_secs(1))? {
//!     println!("{} leads", leader.value); // node-1
//! }
//! leadership.unlock()?; // resigns: the next candidate leads at once
//! # Ok(()) }
//! ```
//!
//! ## Operating it
//! Every primitive has one [`status`](FairLock::status) ([`Status`]: who
//! holds it, who waits, in order, what it admits), also readable by name
//! without a handle ([`Client::status`]), a
//! [`force_unlock`](FairLock::force_unlock) for a lock a stuck process
//! keeps renewing, and names its holders by the client's
//! [`identity`](ClientBuilder::identity) ([`Participant`]). Errors carry an
//! [`ErrorKind`] to branch on.
//!
//! ## Features
//! - `tls`: `rediss://` URLs through rustls,
//!   `ClientBuilder::tls_root_cert_pem` for a private CA and
//!   `ClientBuilder::tls_client_cert_pem` for mutual TLS.
//! - `metrics`: wait, hold and handoff times, counters and gauges through
//!   the `metrics` facade (see [`ClientBuilder::metrics_lock_names`]).
//!
//! The `fairlock` command (flock(1) for a fleet of machines) is a package
//! of its own, `fairlock-cli`.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod connections;
mod error;
mod handles;
mod machinery;
mod protocol;

pub use connections::config::{
    DEFAULT_FENCE_LIFE, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_LIFETIME, MAX_IDENTITY_LEN, MAX_LEASE,
    MAX_TIMEOUT, MIN_FENCE_LIFE, MIN_LEASE, MIN_POOL_DURATION,
};
pub use connections::topology::redact_url;
pub use connections::warning::{ServerWarning, ServerWarningKind, SERVER_WARNING_TARGET};
pub use error::{Error, ErrorKind, Result};
// The client, the handles, their guards and the kinds: handles/mod.rs's list.
pub use handles::*;
pub use machinery::caller::cancel::WaitCanceller;
pub use machinery::holds::{LeaseEnd, Revocation};
pub use protocol::keys::MAX_NAME_LEN;
pub use protocol::HISTORY_LEN as ELECTION_HISTORY_LEN;
pub use protocol::MAX_VALUE_LEN as MAX_ELECTION_VALUE_LEN;
pub use protocol::{Access, Capacity, LockKind, DATA_FORMAT};

/// The protocol layer, for fairlock's own tests and benches (their packages
/// drive the scripts with the library's own keys and arguments): not an API,
/// hidden from the docs, no stability promised, and it may change in any
/// release. Re-exports only: it adds no code to a user's build.
#[doc(hidden)]
pub mod __test_support {
    pub use crate::protocol::*;

    /// fairlock's Functions library as `FUNCTION LOAD` takes it.
    pub fn library_source() -> &'static str {
        &crate::connections::library::LIBRARY.source
    }

    /// The name of the library's function that runs `script`.
    pub fn function_name(script: Script) -> &'static str {
        crate::connections::library::LIBRARY.function(script)
    }

    /// What a redis error becomes in fairlock (`Error` has no `From` for it,
    /// which would put the redis crate's error type into the API).
    pub fn error_from_redis(err: redis::RedisError) -> crate::Error {
        crate::Error::from_redis(err)
    }

    /// `before`, then the command `args` (its name first) as a call packs it.
    pub fn packed_command(before: &[u8], args: &[&[u8]]) -> Vec<u8> {
        let mut out = before.to_vec();
        crate::connections::resp::write_command(&mut out, args.iter().copied());
        out
    }

    /// How many nodes a `CLUSTER SLOTS` reply names, and the master of
    /// each slot of `slots` it names.
    pub fn slot_masters(
        reply: redis::Value,
        slots: &[u16],
    ) -> crate::Result<(usize, Vec<Option<crate::connections::slot_map::Address>>)> {
        let map = crate::connections::slot_map::SlotMap::parse(reply)?;
        let masters = slots.iter().map(|&slot| map.master_of(slot).cloned());
        Ok((map.nodes().len(), masters.collect()))
    }

    /// Where the locks of `url` live, as `Debug` writes the parsed topology.
    pub fn topology_of(url: &str) -> crate::Result<String> {
        crate::connections::topology::Topology::parse(url).map(|t| format!("{t:?}"))
    }
}

// Compiles the examples of the README, docs/cluster-and-sentinel.md and
// docs/security.md as doctests, so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
#[doc = include_str!("../docs/cluster-and-sentinel.md")]
#[doc = include_str!("../docs/security.md")]
pub struct Doctests;
