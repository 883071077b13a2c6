//! A storm of signals on every thread of this process, so a test can show
//! that no call fails when a program's signal handlers interrupt its reads
//! and writes (Linux never restarts a socket read that has a timeout:
//! signal(7)). The handler is installed without `SA_RESTART`, the harshest
//! case, and only counts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Signals the handler saw, in this process.
static DELIVERED: AtomicU64 = AtomicU64::new(0);

extern "C" fn count(_: libc::c_int) {
    DELIVERED.fetch_add(1, Ordering::Relaxed);
}

/// A thread that sends `SIGUSR1` to every other thread of the process,
/// one sweep every `period`, until dropped.
pub struct SignalStorm {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SignalStorm {
    /// Installs the counting handler (no `SA_RESTART`) and starts the storm.
    pub fn start(period: Duration) -> SignalStorm {
        // SAFETY: a plain sigaction with a handler that only touches an
        // atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = count as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = 0;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
                0,
                "sigaction"
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("signal-storm".to_owned())
            .spawn({
                let stop = Arc::clone(&stop);
                move || storm(&stop, period)
            })
            .expect("spawn the signal storm");
        SignalStorm {
            stop,
            thread: Some(thread),
        }
    }

    /// Signals the handler has seen so far.
    pub fn delivered() -> u64 {
        DELIVERED.load(Ordering::Relaxed)
    }
}

impl Drop for SignalStorm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn storm(stop: &AtomicBool, period: Duration) {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, me) = unsafe { (libc::getpid(), libc::gettid()) };
    let mut threads = Vec::new();
    let mut listed = Instant::now() - Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        // The threads come and go (clients opened and dropped): list them
        // again every 10 ms.
        if listed.elapsed() >= Duration::from_millis(10) {
            listed = Instant::now();
            threads = std::fs::read_dir("/proc/self/task")
                .map(|dir| {
                    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                        .filter(|tid: &libc::pid_t| *tid != me)
                        .collect()
                })
                .unwrap_or_default();
        }
        for tid in &threads {
            // SAFETY: tgkill to a thread of this process; one that ended
            // since it was listed gives ESRCH, which is ignored.
            unsafe {
                libc::syscall(libc::SYS_tgkill, pid, *tid, libc::SIGUSR1);
            }
        }
        std::thread::sleep(period);
    }
}
