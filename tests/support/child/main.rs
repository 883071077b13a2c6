//! `fairlock-test-child`: the child process of the integration tests, so a
//! test can SIGKILL (or SIGSTOP) a real process that holds or waits for a
//! lock. Run as `fairlock-test-child <role>` with the role's variables set
//! (named in tests/support/src/roles.rs): "holder" (holder.rs, for
//! tests/liveness.rs), "worker", "churn", "leak" and "paused_waiter"
//! (faults.rs, for tests/faults.rs), "lease_holder" (lease_holder.rs, for
//! tests/partitions.rs), "soak" (soak.rs, for tests/soak.rs), "candidate"
//! (candidate.rs, for tests/election.rs), "signal_storm" (signal_storm.rs,
//! for tests/signals.rs).
//!
//! A binary of the tests' own package (tests/Cargo.toml, never published),
//! so that `cargo test` builds it and the tests find it by
//! `env!("CARGO_BIN_EXE_fairlock-test-child")`.
//!
//! Protocol of the faults roles (see `Children` in tests/support): the
//! parent writes commands to stdin, one a line; the child writes events to
//! stdout as lines starting with "@@ ". The child exits when its stdin
//! closes (so it never outlives its parent) and after at most
//! [`CHILD_MAX_LIFE`] in any case.

mod candidate;
mod faults;
mod holder;
mod lease_holder;
mod signal_storm;
mod soak;

use fairlock_test_support::{roles, timing};

use std::time::Duration;

/// The most a child process lives, whatever happens to its parent.
const CHILD_MAX_LIFE: Duration = Duration::from_secs(120);

fn main() {
    let role = std::env::args().nth(1).expect("child: a role argument");
    match role.as_str() {
        "holder" => holder::holder(),
        "lease_holder" => lease_holder::lease_holder(),
        "worker" => faults::worker(),
        "churn" => faults::churn(),
        "leak" => faults::leak(),
        "paused_waiter" => faults::paused_waiter(),
        "soak" => soak::soak(),
        "candidate" => candidate::candidate(),
        "signal_storm" => signal_storm::signal_storm(),
        other => panic!("child: unknown role {other:?}"),
    }
}

/// A required variable, parsed.
fn child_arg<T: std::str::FromStr>(name: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    std::env::var(name)
        .unwrap_or_else(|_| panic!("child: {name} is not set"))
        .parse()
        .unwrap_or_else(|err| panic!("child: {name}: {err:?}"))
}

/// Prints one event line for the parent.
fn say(text: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {text}");
    let _ = out.flush();
}

/// The parent's command lines. The process exits (status 0) when stdin
/// closes, and with status 3 after [`CHILD_MAX_LIFE`].
fn child_commands() -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_MAX_LIFE);
        eprintln!("child: lived {CHILD_MAX_LIFE:?}, exiting");
        std::process::exit(3);
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
        std::process::exit(0);
    });
    rx
}
