//! What a test and its child process agree on. The child process is the
//! `fairlock-test-child` binary (tests/support/child/), run with a role as
//! its one argument and the role's variables in its environment; this
//! module names the variables, the keys a role writes and the settings of
//! a role's client, for both sides, the random generator whose seed the
//! test hands its children, and the two facts about a process that both
//! sides read: its wall clock and its thread count. The binary uses it
//! from this crate, as the tests do.

/// The "holder" role of tests/liveness.rs: it connects (waiter timeout
/// 1 s, the lease in [`LEASE_MS`]), blocks in `lock()`, prints
/// `FAIRLOCK_CHILD_LOCKED <token>` once it holds the lock, and keeps holding
/// until killed (at most a minute, so that a child whose parent died goes
/// away on its own). With [`PERMITS`](holder::PERMITS) set it takes a
/// permit of the semaphore of that name instead (tests/semaphore.rs), and
/// with [`ACCESS`](holder::ACCESS) a read or write hold of the rwlock of
/// that name (tests/rwlock.rs).
pub mod holder {
    pub const URL: &str = "FAIRLOCK_CHILD_URL";
    pub const NAME: &str = "FAIRLOCK_CHILD_NAME";
    pub const LEASE_MS: &str = "FAIRLOCK_CHILD_LEASE_MS";
    /// Optional: the semaphore's permits; the holder then holds a permit.
    pub const PERMITS: &str = "FAIRLOCK_CHILD_PERMITS";
    /// Optional: "read" or "write"; the holder then holds the rwlock so.
    pub const ACCESS: &str = "FAIRLOCK_CHILD_ACCESS";
    /// Starts the line the holder prints, with its token, once it holds.
    pub const LOCKED: &str = "FAIRLOCK_CHILD_LOCKED";
}

/// The "lease_holder" role of tests/partitions.rs: a client (through
/// [`URL`](lease_holder::URL), typically a relay the test can cut) that
/// takes locks on command and reports when its lease signal fires, so a
/// test can run the holder with slowed clocks (libfaketime).
///
/// Commands: `lock <name>` → `locked <token>`; `permit <name> <permits>`
/// → `locked <token>` (a permit of that semaphore, a fixed lease of
/// LEASE_MS); `lost?` → `lost true|false`
/// (the guard's `is_lease_lost()` at that moment); `unlock` →
/// `unlocked ok|<error kind>`; `revoke <name>` → `asked <holds>|<error
/// kind>` (the mutex's `revoke()`). Whenever a held lease's signal fires, the
/// child says `ended lost|released <token>` from the signal's own thread,
/// and `revoked <token>` when a revocation asks its hold to let go
/// (tests/revoke.rs).
pub mod lease_holder {
    pub const URL: &str = "LEASE_HOLDER_URL";
    pub const LEASE_MS: &str = "LEASE_HOLDER_LEASE_MS";
    /// "1": locks take a fixed lease of LEASE_MS (no watchdog).
    pub const FIXED: &str = "LEASE_HOLDER_FIXED";
    /// "default", or "none" for `clock_drift(0.0, 0)` (a run that shows
    /// what the allowance buys).
    pub const DRIFT: &str = "LEASE_HOLDER_DRIFT";

    /// The variables of a lease holder connected to `url` whose locks take
    /// a lease of `lease_ms` (`fixed`: a fixed one), with the default
    /// drift allowance.
    pub fn vars(url: &str, lease_ms: u128, fixed: bool) -> Vec<(&'static str, String)> {
        vec![
            (URL, url.to_owned()),
            (LEASE_MS, lease_ms.to_string()),
            (FIXED, if fixed { "1" } else { "0" }.to_owned()),
            (DRIFT, "default".to_owned()),
        ]
    }
}

/// The "candidate" role of tests/election.rs (tests/support/child/candidate.rs):
/// a client (lease [`LEASE_MS`](candidate::LEASE_MS), waiter timeout
/// [`WAITER_TIMEOUT_MS`](candidate::WAITER_TIMEOUT_MS)) that campaigns in the
/// election [`NAME`](candidate::NAME) with [`VALUE`](candidate::VALUE).
///
/// Events: `ready` once connected, `leads <term> <value>` once its
/// campaign returned. Commands: `resign` → `resigned ok|<error kind>`.
pub mod candidate {
    pub const URL: &str = "CANDIDATE_URL";
    pub const NAME: &str = "CANDIDATE_NAME";
    pub const VALUE: &str = "CANDIDATE_VALUE";
    pub const LEASE_MS: &str = "CANDIDATE_LEASE_MS";
    /// With the lease, sets how often the candidate's watchdog runs
    /// (`min(lease, waiter timeout)/3`), its heartbeat included.
    pub const WAITER_TIMEOUT_MS: &str = "CANDIDATE_WAITER_TIMEOUT_MS";
}

/// The roles of tests/faults.rs ("worker", "churn", "leak",
/// "paused_waiter"); see tests/support/child/faults.rs.
pub mod faults {
    use std::time::Duration;

    use fairlock::{Client, ClientBuilder};

    pub const URL: &str = "FAULTS_URL";
    pub const NAME: &str = "FAULTS_NAME";
    pub const THREADS: &str = "FAULTS_THREADS";
    pub const DURATION_MS: &str = "FAULTS_DURATION_MS";
    pub const SEED: &str = "FAULTS_SEED";
    /// The "paused_waiter" child's fixed lease and its client's waiter
    /// timeout, in ms, where a test sets them (else [`PAUSED_WAITER_LEASE`]
    /// and [`WAITER_TIMEOUT`]).
    pub const FIXED_LEASE_MS: &str = "FAULTS_FIXED_LEASE_MS";
    pub const WAITER_TIMEOUT_MS: &str = "FAULTS_WAITER_TIMEOUT_MS";

    /// Lease and waiter timeout of every client in these tests.
    pub const LEASE: Duration = Duration::from_secs(1);
    pub const WAITER_TIMEOUT: Duration = Duration::from_secs(1);

    pub fn fast(url: &str) -> ClientBuilder {
        Client::builder(url)
            .lease(LEASE)
            .waiter_timeout(WAITER_TIMEOUT)
            .connect_timeout(Duration::from_secs(2))
    }

    pub fn counter_key(name: &str) -> String {
        format!("faults:{name}:counter")
    }

    pub fn log_key(name: &str) -> String {
        format!("faults:{name}:log")
    }

    /// Fixed lease of the "paused_waiter" child's lock call: no watchdog renews
    /// it, so nothing but the grant's own time decides whether it still holds.
    pub const PAUSED_WAITER_LEASE: Duration = Duration::from_millis(600);
}

/// The "soak" role of tests/soak.rs (tests/support/child/soak.rs): a
/// process of SOAK_THREADS threads that lock SOAK_NAMES (comma-separated)
/// at random until told `stop`, and report every protected write to the
/// test's resource and every acquisition on stdout.
///
/// Lines to the resource (TCP, one a line, each answered `ok` or `stale`):
/// `W <name> <token> <worker> <thread> <t0> <t1> <t>`: a write by the
/// holder of `token`, whose acquire call started at `t0` and returned at
/// `t1`, which found the hold not lost (`is_lease_lost()` false) just
/// after `t` and then did some work before writing.
/// Events on stdout: `ready <pid>`, then per acquire call `acq <thread>
/// <name> <mode> <t0> <t1> <outcome> <token or -> <lost 0|1> <tq or ->`
/// once it is over (modes `lock`, `try`, `cancel`; outcomes `ok`,
/// `timeout`, `cancelled` or an error kind; `tq`: when its first request's
/// reply said Redis had queued it, `-` if none did), and `done <calls>`
/// when it stops. All times are [`mono_ns`].
pub mod soak {
    use std::time::Duration;

    use fairlock::{Client, ClientBuilder};

    pub const URL: &str = "SOAK_URL";
    pub const NAMES: &str = "SOAK_NAMES";
    pub const THREADS: &str = "SOAK_THREADS";
    pub const SEED: &str = "SOAK_SEED";
    /// This process's index among the test's workers.
    pub const WORKER: &str = "SOAK_WORKER";
    /// The resource's loopback port.
    pub const RESOURCE: &str = "SOAK_RESOURCE";
    /// The child exits (status 3) after this long whatever happens.
    pub const MAX_LIFE_MS: &str = "SOAK_MAX_LIFE_MS";

    /// Short, so that partitions and restarts lose leases within a minute.
    pub const LEASE: Duration = Duration::from_secs(1);
    pub const WAITER_TIMEOUT: Duration = Duration::from_secs(1);
    /// Holds last 0 to this many milliseconds.
    pub const MAX_HOLD_MS: u64 = 30;

    pub fn builder(url: &str) -> ClientBuilder {
        Client::builder(url)
            .lease(LEASE)
            .waiter_timeout(WAITER_TIMEOUT)
            .connect_timeout(Duration::from_secs(1))
            .command_timeout(Duration::from_secs(1))
            .pool_size(4)
    }

    /// Nanoseconds of CLOCK_MONOTONIC: one clock for every process of the
    /// machine, which no wall-clock step moves.
    pub fn mono_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// A small deterministic generator (xorshift*), seeded by the parent so a
/// failing run can be told apart by its printed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }

    pub fn millis(&mut self, from: u64, to: u64) -> std::time::Duration {
        std::time::Duration::from_millis(from + self.below(to - from + 1))
    }
}

/// Milliseconds since the Unix epoch by this process's wall clock.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_else(|e| -(e.duration().as_millis() as i64))
}

/// Threads of this process, from /proc.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The "signal_storm" role of tests/signals.rs
/// (tests/support/child/signal_storm.rs): a process whose every thread gets
/// a `SIGUSR1` from a handler without `SA_RESTART` every [`PERIOD_US`](signals::PERIOD_US)
/// while it makes every kind of call for [`DURATION_MS`](signals::DURATION_MS):
/// clients opened, each kind of lock taken and released (a mutex contended
/// by a second thread, so handoffs and wake-ups run), an election, a
/// multi-lock, the admin calls, with short leases so the watchdog renews
/// meanwhile. Events: `error <message>` for each call that failed (the
/// first 20), then `done <calls> <errors> <signals delivered>`.
pub mod signals {
    use std::time::Duration;

    use fairlock::{Client, ClientBuilder};

    pub const URL: &str = "SIGNALS_URL";
    pub const DURATION_MS: &str = "SIGNALS_DURATION_MS";
    pub const PERIOD_US: &str = "SIGNALS_PERIOD_US";

    /// Short, so that the watchdog renews and heartbeats during the storm.
    pub const LEASE: Duration = Duration::from_millis(600);

    pub fn builder(url: &str) -> ClientBuilder {
        Client::builder(url)
            .lease(LEASE)
            .waiter_timeout(LEASE)
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Duration::from_secs(2))
    }
}
