//! Bounded waiting and timing: polling a condition, joining a thread
//! within a bound, printing durations, and running timing-sensitive tests
//! of one binary one at a time.

use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the start-up of a topology (cluster, Sentinel) may take before
/// the test fails.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Polls `condition` every 5 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Joins `handle` if it finishes within `timeout`; panics otherwise (never hangs).
pub fn join_within<T>(handle: JoinHandle<T>, timeout: Duration, what: &str) -> T {
    assert!(
        wait_until(timeout, || handle.is_finished()),
        "{what} did not finish within {timeout:?}"
    );
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// A duration in (fractional) milliseconds, for printing measurements.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Timing-sensitive tests of one binary (in the suite: of every file of
/// tests/) take this to run one at a time: every thread and process shares
/// two noisy cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Polls `check` every `every` until it returns `Ok` or `timeout` passes;
/// returns the last error then.
pub(crate) fn poll(
    timeout: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let error = match check() {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        if Instant::now() >= deadline {
            return Err(error);
        }
        std::thread::sleep(every);
    }
}
