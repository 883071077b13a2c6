//! SIGINT, SIGTERM, SIGHUP and SIGQUIT for `fairlock run`, handled on a thread of
//! their own (`fairlock-signals`), whatever the main thread is doing.
//!
//! - Connecting: exit at once with 128+N.
//! - Waiting (the main thread is blocked in its request, whose `Wait` this
//!   thread's `WaitCanceller` ends): the wait is cancelled, which removes
//!   the queue entry (or, when Redis cannot be told, leaves it for Redis to
//!   drop within the waiter timeout, as the message says); the main thread
//!   then exits with 128+N and runs nothing (releasing the lock first if it was handed over in that very
//!   moment). A second signal exits at once.
//! - Holding, before the command started: the command is not started; the
//!   lock is released; exit with 128+N.
//! - Running: the signal is passed on to the command, unless the kernel
//!   sent it (Ctrl-C, a terminal hangup), because the kernel sent it to the
//!   whole foreground process group, the command included; but a hangup
//!   reaches a session's leader alone, so it is passed on when fairlock
//!   leads its session. fairlock then
//!   waits for the command, releases the lock and exits with its status.
//! - Releasing (after the command, or instead of it): a signal that is not
//!   the first exits at once with 128+N (of the first), saying what
//!   becomes of the lock; the first may be the Ctrl-C that ended the
//!   command, so the release it starts is not cut short by it. A release
//!   Redis does not answer (a stall) takes up to two command timeouts.
//!
//! SIGCHLD only wakes the main thread, which then reaps the command at once.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fairlock::WaitCanceller;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

use crate::{exit, exit_now, progress};

/// What the main thread is doing, as far as signals care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Waiting,
    /// A signal came while waiting; the process is on its way out.
    Abandoning,
    Holding,
    Running(libc::pid_t),
    Finishing,
}

struct State {
    phase: Phase,
    /// The first of SIGINT, SIGTERM, SIGHUP, SIGQUIT received.
    signal: Option<i32>,
    /// A SIGCHLD came since the main thread last looked.
    child_changed: bool,
    /// The lease signal said the lock was lost.
    lease_lost: bool,
    /// The revocation signal said someone asked the holders to let go,
    /// and the main thread has not acted on it yet.
    revoked: bool,
    /// While the main thread releases the lock: what a signal that ends
    /// the release says ("while ..."; [`Control::releasing`]).
    releasing: Option<String>,
    /// Redis confirmed the release: nothing is left to give back, nor
    /// for a signal to cut short ([`Control::released`]).
    released: bool,
}

/// Shared by the main thread and the signal thread.
pub struct Control {
    state: Mutex<State>,
    changed: Condvar,
    canceller: WaitCanceller,
}

/// Why the command was not started.
pub enum SpawnError {
    Interrupted(i32),
    Io(std::io::Error),
}

impl Control {
    /// Takes over SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD and starts the thread
    /// that handles them.
    pub fn install() -> std::io::Result<Arc<Control>> {
        let control = Arc::new(Control {
            state: Mutex::new(State {
                phase: Phase::Connecting,
                signal: None,
                child_changed: false,
                lease_lost: false,
                revoked: false,
                releasing: None,
                released: false,
            }),
            changed: Condvar::new(),
            canceller: WaitCanceller::new(),
        });
        let handled = not_ignored(&[SIGINT, SIGTERM, SIGHUP, SIGQUIT]);
        let mut signals = SignalsInfo::<WithOrigin>::new(handled.into_iter().chain([SIGCHLD]))?;
        let handler = Arc::clone(&control);
        std::thread::Builder::new()
            .name("fairlock-signals".into())
            .spawn(move || {
                for origin in signals.forever() {
                    let from_kernel = matches!(origin.cause, Cause::Kernel);
                    handler.on_signal(origin.signal, from_kernel);
                }
            })?;
        Ok(control)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn on_signal(&self, signal: i32, from_kernel: bool) {
        let mut state = self.state();
        if signal == SIGCHLD {
            state.child_changed = true;
            self.changed.notify_all();
            return;
        }
        let again = state.signal.is_some();
        let first = *state.signal.get_or_insert(signal);
        match state.phase {
            Phase::Connecting => {
                drop(state);
                progress::clear_any();
                eprintln!(
                    "fairlock: interrupted by {} while connecting; nothing was run",
                    name(signal)
                );
                exit_now(exit::SIGNAL_BASE + signal);
            }
            Phase::Waiting => {
                state.phase = Phase::Abandoning;
                // The main thread leaves the queue and returns from its wait.
                self.canceller.cancel();
            }
            Phase::Abandoning => exit_again(state, signal, first),
            Phase::Holding | Phase::Finishing if again && state.releasing.is_some() => {
                exit_again(state, signal, first)
            }
            // A terminal's hangup goes to the leader of its session alone.
            Phase::Running(pid) if !from_kernel || (signal == SIGHUP && leads_session()) => {
                // SAFETY: plain syscall; `pid` is our unreaped child while the
                // phase says Running (reaping changes the phase under this lock).
                unsafe { libc::kill(pid, signal) };
            }
            Phase::Running(_) | Phase::Holding | Phase::Finishing => {}
        }
        self.changed.notify_all();
    }

    /// The main thread is about to block in a wait cancelled by
    /// [`canceller`](Self::canceller).
    pub fn waiting(&self) {
        self.state().phase = Phase::Waiting;
    }

    /// Cancelled by the first SIGINT, SIGTERM, SIGHUP or SIGQUIT while waiting.
    pub fn canceller(&self) -> &WaitCanceller {
        &self.canceller
    }

    /// The main thread releases the lock from now on; a signal that is
    /// not the first exits at once, saying `while` (what it was doing and
    /// what becomes of the lock: "while trying to release ...").
    pub fn releasing(&self, while_: String) {
        self.state().releasing = Some(while_);
    }

    /// Redis confirmed the release: a signal from now on cuts nothing
    /// short (fairlock exits within a moment, as it would have), and says
    /// nothing of a release (one that comes while abandoning a wait exits
    /// at once, as ever).
    pub fn released(&self) {
        let mut state = self.state();
        state.releasing = None;
        state.released = true;
    }

    /// Whether [`released`](Self::released) was called: the exit has
    /// nothing to wait for.
    pub fn has_released(&self) -> bool {
        self.state().released
    }

    /// The main thread got the lock. Returns the signal to exit with when
    /// one came while waiting (the lock must then be released, nothing run).
    pub fn acquired(&self) -> Option<i32> {
        let mut state = self.state();
        if state.phase != Phase::Abandoning {
            state.phase = Phase::Holding;
        }
        state.signal
    }

    /// Starts the command unless a signal came first.
    pub fn spawn(
        &self,
        command: &mut std::process::Command,
    ) -> Result<std::process::Child, SpawnError> {
        let mut state = self.state();
        if let Some(signal) = state.signal {
            return Err(SpawnError::Interrupted(signal));
        }
        let child = command.spawn().map_err(SpawnError::Io)?;
        state.phase = Phase::Running(child.id() as libc::pid_t);
        Ok(child)
    }

    /// Reaps the command if it ended; signals stop going to it then.
    pub fn try_wait(
        &self,
        child: &mut std::process::Child,
    ) -> std::io::Result<Option<std::process::ExitStatus>> {
        let mut state = self.state();
        let status = child.try_wait()?;
        if status.is_some() {
            state.phase = Phase::Finishing;
        }
        Ok(status)
    }

    /// Sends `signal` to the command if it still runs.
    pub fn kill_child(&self, signal: i32) {
        let state = self.state();
        if let Phase::Running(pid) = state.phase {
            // SAFETY: as in on_signal.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// Sleeps until the command may have changed state (SIGCHLD), a
    /// signal came, the lock was lost, or `timeout` passed.
    pub fn sleep(&self, timeout: Duration) {
        let state = self.state();
        let (mut state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| {
                !s.child_changed && !s.lease_lost && !s.revoked
            })
            .unwrap_or_else(|p| p.into_inner());
        state.child_changed = false;
    }

    /// Called from the thread that waits on the lease signal: the lock is
    /// lost; wakes the main thread at once.
    pub fn lease_lost(&self) {
        self.state().lease_lost = true;
        self.changed.notify_all();
    }

    /// Whether [`lease_lost`](Self::lease_lost) was called since the last
    /// time this said so (a flag left set would end every sleep at once).
    pub fn take_lease_lost(&self) -> bool {
        std::mem::take(&mut self.state().lease_lost)
    }

    /// Called from the thread that waits on the revocation signal: someone
    /// asked the holders to let go; wakes the main thread at once.
    pub fn revoked(&self) {
        self.state().revoked = true;
        self.changed.notify_all();
    }

    /// Whether [`revoked`](Self::revoked) was called since the last time
    /// this said so.
    pub fn take_revocation(&self) -> bool {
        std::mem::take(&mut self.state().revoked)
    }
}

/// Exits at once with 128 + the `first` signal, on `signal` that came
/// after it, saying what the main thread was releasing, if it was.
fn exit_again(state: MutexGuard<'_, State>, signal: i32, first: i32) -> ! {
    let releasing = state.releasing.clone();
    drop(state);
    if let Some(while_) = releasing {
        progress::clear_any();
        eprintln!("fairlock: interrupted again by {} {while_}", name(signal));
    }
    exit_now(exit::SIGNAL_BASE + first)
}

/// Those of `signals` not ignored when fairlock started: one ignored then
/// (`nohup`'s SIGHUP, a background job's SIGINT and SIGQUIT) stays so, for
/// fairlock and for the command, which inherits an ignored signal (a
/// handled one goes back to its default at exec).
pub fn not_ignored(signals: &[i32]) -> Vec<i32> {
    let ignored = |signal| {
        // SAFETY: reads the signal's action, changes nothing.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        let read = unsafe { libc::sigaction(signal, std::ptr::null(), &mut action) };
        read == 0 && action.sa_sigaction == libc::SIG_IGN
    };
    signals
        .iter()
        .copied()
        .filter(|&signal| !ignored(signal))
        .collect()
}

/// Whether fairlock leads its session (`ssh -t host fairlock ...`, `setsid`).
fn leads_session() -> bool {
    // SAFETY: plain syscalls.
    unsafe { libc::getsid(0) == libc::getpid() }
}

/// A signal as `--on-revoke` takes it: a name (`TERM`, `SIGTERM`, `INT`,
/// `HUP`, `USR1`, `USR2`, `QUIT`, `KILL`), a number from 1 to 64, or `none`
/// (no signal: `None`).
pub fn parse(text: &str) -> Result<Option<i32>, String> {
    let upper = text.to_ascii_uppercase();
    let signal = match upper.strip_prefix("SIG").unwrap_or(&upper) {
        "NONE" => return Ok(None),
        "TERM" => SIGTERM,
        "INT" => SIGINT,
        "HUP" => SIGHUP,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        number => match number.parse::<i32>() {
            Ok(n) if (1..=64).contains(&n) => n,
            _ => {
                return Err(format!(
                    "{text:?} is no signal: give TERM, INT, HUP, USR1, USR2, QUIT, KILL, a number from 1 to 64, or none"
                ))
            }
        },
    };
    Ok(Some(signal))
}

/// The usual name of a signal fairlock handles.
pub fn name(signal: i32) -> String {
    match signal {
        SIGINT => "SIGINT".to_owned(),
        SIGTERM => "SIGTERM".to_owned(),
        SIGHUP => "SIGHUP".to_owned(),
        libc::SIGKILL => "SIGKILL".to_owned(),
        libc::SIGUSR1 => "SIGUSR1".to_owned(),
        libc::SIGUSR2 => "SIGUSR2".to_owned(),
        libc::SIGQUIT => "SIGQUIT".to_owned(),
        other => format!("signal {other}"),
    }
}
