//! A fork of this process, for a test of what a child does with a client
//! it inherited.

use std::time::{Duration, Instant};

/// Runs `child` in a fork of this process (only the calling thread is
/// copied), which then exits with the code `child` returns (101 if it
/// panics), and waits up to `timeout` for it: its exit code, or `None`
/// when it did not end in time (it is then SIGKILLed and reaped).
pub fn in_forked_child(timeout: Duration, child: impl FnOnce() -> i32) -> Option<i32> {
    // SAFETY: fork has no preconditions; the child runs `child` and leaves
    // with _exit, running no destructor of the parent's state but those
    // `child` runs.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let child = std::panic::AssertUnwindSafe(child);
        let code = std::panic::catch_unwind(child).unwrap_or(101);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) }
    }
    let until = Instant::now() + timeout;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child, without blocking.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        }
        if Instant::now() >= until {
            // SAFETY: our own child, killed and reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
