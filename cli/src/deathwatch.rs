//! On Linux, the command gets SIGTERM, once, if fairlock itself dies
//! (SIGKILL, the OOM killer): nobody renews or releases the lock any more,
//! so the command must not go on as if it held it.
//!
//! Not `PR_SET_PDEATHSIG` on the command: it fires when the *thread* that
//! spawned the command exits, and a dying fairlock (a dozen threads) may
//! hand the orphan to another of its threads first, each hand-over one
//! more SIGTERM: 5 `elect`s in 200 sent two, which a command that
//! reads a second SIGTERM as "quit now" turns into an unclean stop.
//! Instead a one-threaded watcher process, forked before the command,
//! holds one end of a socket pair whose other end only fairlock holds
//! (and the command, until it execs: it sends its pid through it first).
//! The watcher's read ends when fairlock is gone, however it died; unless
//! fairlock said "done" (the command was reaped), it sends the command
//! SIGTERM, through a pidfd taken while the command was fairlock's child.

use std::process::Command;

/// fairlock's end of the watcher's socket; dropped unsaid, the command
/// gets SIGTERM.
pub struct DeathWatch {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
    /// The watcher's: reaped by `done`, not left a zombie until fairlock exits.
    #[cfg(target_os = "linux")]
    pid: libc::pid_t,
}

impl DeathWatch {
    /// Forks the watcher and makes `command` send it its pid before it
    /// execs. Call it just before spawning `command`.
    #[cfg(target_os = "linux")]
    pub fn arm(command: &mut Command) -> std::io::Result<DeathWatch> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::process::CommandExt;

        let mut fds = [0; 2];
        let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
        // SAFETY: socketpair writes two new descriptors into `fds`.
        if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both are new descriptors nothing else owns.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the forked child runs only `watch`, which calls only
        // async-signal-safe functions and never returns.
        let pid = match unsafe { libc::fork() } {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => unsafe { watch(theirs.as_raw_fd(), ours.as_raw_fd()) },
            pid => pid,
        };
        drop(theirs);
        let fd = ours.as_raw_fd();
        // SAFETY: runs in the forked command before exec: getpid and send
        // are async-signal-safe; `fd` stays open in fairlock meanwhile.
        unsafe {
            command.pre_exec(move || {
                let pid = libc::getpid().to_ne_bytes();
                libc::send(fd, pid.as_ptr().cast(), pid.len(), libc::MSG_NOSIGNAL);
                Ok(())
            });
        }
        Ok(DeathWatch { fd: ours, pid })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn arm(_command: &mut Command) -> std::io::Result<DeathWatch> {
        Ok(DeathWatch {})
    }

    /// The command was reaped (or never started): the watcher leaves it be,
    /// and exits at once.
    pub fn done(self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a one-byte send on our own descriptor; a wait for
            // our own child, which exits on reading it.
            unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    [1u8].as_ptr().cast(),
                    1,
                    libc::MSG_NOSIGNAL,
                );
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            };
        }
    }
}

/// The watcher: reads the command's pid, then waits for fairlock's end of
/// the socket to close; SIGTERMs the command if fairlock did not say
/// "done" first. Never returns.
///
/// # Safety
/// Only in the child of a fork: it calls `_exit`.
#[cfg(target_os = "linux")]
unsafe fn watch(fd: libc::c_int, fairlocks: libc::c_int) -> ! {
    libc::close(fairlocks);
    // A Ctrl-C or a `kill` of the process group is fairlock's to handle.
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        libc::signal(signal, libc::SIG_IGN);
    }
    let read = |buf: &mut [u8]| loop {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        if n >= 0 || *libc::__errno_location() != libc::EINTR {
            return n;
        }
    };
    let mut pid = [0u8; 4];
    if read(&mut pid) != 4 {
        libc::_exit(0); // fairlock ended before the command began
    }
    let pid = libc::pid_t::from_ne_bytes(pid);
    let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
    if read(&mut [0u8; 1]) == 0 {
        if pidfd >= 0 {
            let none: *const libc::siginfo_t = std::ptr::null();
            libc::syscall(libc::SYS_pidfd_send_signal, pidfd, libc::SIGTERM, none, 0);
        } else {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    libc::_exit(0)
}
