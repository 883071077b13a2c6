//! Child processes of a test, and the line protocol between a test and
//! its children.
//!
//! A child is the `fairlock-test-child` binary (tests/support/child/) run
//! with a role (see [`roles`](crate::roles)), so a test can SIGKILL a real
//! process that holds or waits for a lock.
//!
//! Protocol: the parent writes commands to the child's stdin, one a line; the
//! child writes events to stdout as lines starting with "@@ ". A child exits
//! when its stdin closes (so it never outlives its parent) and after at most
//! two minutes in any case. [`HolderChild`] is the "holder" role, which
//! speaks no protocol: it prints its token once it holds.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One line a child printed after "@@ ", with when the parent read it.
#[derive(Debug, Clone)]
pub struct Event {
    pub child: usize,
    pub at: Instant,
    pub text: String,
}

impl Event {
    /// The words of the event.
    pub fn words(&self) -> Vec<&str> {
        self.text.split_whitespace().collect()
    }
}

struct Proc {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    reader: Option<JoinHandle<()>>,
    reaped: bool,
}

/// Child processes of one test; every one still running is SIGKILLed and
/// reaped on drop, also when the test fails.
pub struct Children {
    /// The child binary.
    program: PathBuf,
    procs: Vec<Proc>,
    tx: std::sync::mpsc::Sender<Event>,
    rx: std::sync::mpsc::Receiver<Event>,
    backlog: std::collections::VecDeque<Event>,
}

impl Children {
    /// Children run from `program`: for a test of the root package,
    /// `env!("CARGO_BIN_EXE_fairlock-test-child")`.
    pub fn new(program: impl Into<PathBuf>) -> Children {
        let (tx, rx) = std::sync::mpsc::channel();
        Children {
            program: program.into(),
            procs: Vec::new(),
            tx,
            rx,
            backlog: Default::default(),
        }
    }

    /// Starts a child in `role`, with `env` added; returns the child's index.
    pub fn spawn(&mut self, role: &str, env: &[(&str, String)]) -> usize {
        use std::io::BufRead;
        let index = self.procs.len();
        let mut child = Command::new(&self.program)
            .arg(role)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| panic!("spawn a child process {:?}: {err}", self.program));
        let stdout = child.stdout.take().expect("child stdout");
        let tx = self.tx.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                // A line without "@@ " is no event.
                if let Some((_, text)) = line.split_once("@@ ") {
                    let event = Event {
                        child: index,
                        at: Instant::now(),
                        text: text.trim().to_owned(),
                    };
                    if tx.send(event).is_err() {
                        break;
                    }
                }
            }
        });
        self.procs.push(Proc {
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
            reaped: false,
        });
        index
    }

    pub fn pid(&self, child: usize) -> u32 {
        self.procs[child].child.id()
    }

    /// Writes one command line to the child.
    pub fn send(&mut self, child: usize, command: &str) {
        use std::io::Write;
        let stdin = self.procs[child].stdin.as_mut().expect("child stdin open");
        writeln!(stdin, "{command}")
            .and_then(|_| stdin.flush())
            .unwrap_or_else(|err| panic!("child {child} is gone ({err}): cannot send {command:?}"));
    }

    /// The next event, oldest first, waiting up to `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Option<Event> {
        if let Some(event) = self.backlog.pop_front() {
            return Some(event);
        }
        self.rx.recv_timeout(timeout).ok()
    }

    /// Waits up to `timeout` for the first event `matches` accepts; events
    /// passed over are kept, in order, for later calls. Panics on timeout.
    pub fn expect(
        &mut self,
        timeout: Duration,
        what: &str,
        mut matches: impl FnMut(&Event) -> bool,
    ) -> Event {
        if let Some(i) = self.backlog.iter().position(&mut matches) {
            return self.backlog.remove(i).unwrap();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(event) if matches(&event) => return event,
                Ok(event) => self.backlog.push_back(event),
                Err(_) => panic!(
                    "no event {what} within {timeout:?}; unmatched: {:?}",
                    self.backlog
                ),
            }
        }
    }

    /// Waits for `text` exactly from `child`.
    pub fn expect_text(&mut self, child: usize, text: &str, timeout: Duration) -> Event {
        self.expect(timeout, &format!("{text:?} from child {child}"), |e| {
            e.child == child && e.text == text
        })
    }

    /// Waits for an event of `child` that starts with `prefix`.
    pub fn expect_prefix(&mut self, child: usize, prefix: &str, timeout: Duration) -> Event {
        self.expect(
            timeout,
            &format!("starting {prefix:?} from child {child}"),
            |e| e.child == child && e.text.starts_with(prefix),
        )
    }

    /// Events received so far (without waiting) that `matches` accepts;
    /// they are taken out, the others kept.
    pub fn take_ready(&mut self, mut matches: impl FnMut(&Event) -> bool) -> Vec<Event> {
        while let Ok(event) = self.rx.try_recv() {
            self.backlog.push_back(event);
        }
        let mut taken = Vec::new();
        for event in std::mem::take(&mut self.backlog) {
            if matches(&event) {
                taken.push(event);
            } else {
                self.backlog.push_back(event);
            }
        }
        taken
    }

    /// SIGKILLs the child and reaps it; returns when the signal was sent.
    pub fn kill(&mut self, child: usize) -> Instant {
        let proc = &mut self.procs[child];
        let at = Instant::now();
        let _ = proc.child.kill();
        let status = reap(&mut proc.child).expect("reap the child");
        proc.reaped = true;
        assert!(
            !status.success(),
            "child {child} exited by itself: {status}"
        );
        at
    }

    /// The child's exit status if it has exited (it is reaped then),
    /// `None` while it runs.
    pub fn exited(&mut self, child: usize) -> Option<std::process::ExitStatus> {
        let proc = &mut self.procs[child];
        let status = proc.child.try_wait().expect("wait for the child")?;
        remove_faketime_shm(proc.child.id());
        proc.reaped = true;
        Some(status)
    }

    /// Waits up to `timeout` for the child to exit by itself (after
    /// closing its stdin if `close_stdin`); SIGKILLs it and panics otherwise.
    pub fn wait_exit(
        &mut self,
        child: usize,
        timeout: Duration,
        close_stdin: bool,
    ) -> std::process::ExitStatus {
        let proc = &mut self.procs[child];
        if close_stdin {
            proc.stdin = None;
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = proc.child.try_wait().expect("wait for the child") {
                remove_faketime_shm(proc.child.id());
                proc.reaped = true;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = proc.child.kill();
                let _ = reap(&mut proc.child);
                proc.reaped = true;
                panic!("child {child} did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for proc in &mut self.procs {
            proc.stdin = None;
            if !proc.reaped {
                let _ = proc.child.kill();
                let _ = reap(&mut proc.child);
            }
            // The pipe closed with the process: the reader ends at once.
            if let Some(reader) = proc.reader.take() {
                let _ = reader.join();
            }
        }
    }
}

/// libfaketime's multi-threaded library, as installed by Debian's faketime
/// (scripts/ensure-redis installs it): `LD_PRELOAD` it into a child with
/// `FAKETIME` set to shift or slow down the child's clocks.
pub fn libfaketime() -> String {
    // What processes killed by SIGKILL left, in this run or an earlier one
    // (a test process killed, a child not reaped by this support): a
    // libfaketime process that is given one of their pids fails to start
    // ("shm_open failed: File exists"), once in a few CI runs with a few
    // hundred such files left.
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_faketime_shm_of_gone_processes);
    let mut candidates = vec![PathBuf::from("/usr/lib/faketime")];
    if let Ok(dirs) = std::fs::read_dir("/usr/lib") {
        candidates.extend(dirs.filter_map(|d| Some(d.ok()?.path().join("faketime"))));
    }
    candidates
        .iter()
        .map(|dir| dir.join("libfaketimeMT.so.1"))
        .find(|lib| lib.exists())
        .expect("libfaketime not found: scripts/ensure-redis installs Debian's faketime")
        .to_string_lossy()
        .into_owned()
}

/// Waits for `child` to end and reaps it, then removes what libfaketime
/// left for it (a child killed by SIGKILL leaves it: `remove_faketime_shm`).
fn reap(child: &mut Child) -> std::io::Result<std::process::ExitStatus> {
    let status = child.wait();
    remove_faketime_shm(child.id());
    status
}

/// Removes the shared memory and semaphore libfaketime keeps for process
/// `pid` (`/dev/shm/faketime_shm_<pid>`, `/dev/shm/sem.faketime_sem_<pid>`),
/// which a process that exits normally removes itself but a SIGKILLed one
/// leaves behind; a later process given the same pid would then fail in
/// libfaketime's start-up. Call it only once `pid` is reaped.
pub fn remove_faketime_shm(pid: u32) {
    for name in [
        format!("faketime_shm_{pid}"),
        format!("sem.faketime_sem_{pid}"),
    ] {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(name));
    }
}

/// Removes libfaketime's shared memory and semaphore of every process that
/// is gone (no /proc/<pid>): a process that exits removes its own, so those
/// are what a SIGKILL left behind.
fn remove_faketime_shm_of_gone_processes() {
    let Ok(files) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for file in files.filter_map(Result::ok) {
        let name = file.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("faketime_shm_")
            .or_else(|| name.strip_prefix("sem.faketime_sem_"))
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !std::path::Path::new("/proc").join(pid.to_string()).exists() {
                remove_faketime_shm(pid);
            }
        }
    }
}

/// Sends `signal` (a name kill(1) knows: "STOP", "CONT", ...) to the
/// process `pid`; panics if kill fails.
pub fn send_signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{signal} {pid}: {sent}");
}

/// What a [`HolderChild`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The mutex of the name.
    Mutex,
    /// A permit of the semaphore of the name with this many permits.
    Permit(u32),
    /// A read hold of the rwlock of the name.
    Read,
    /// A write hold of the rwlock of the name.
    Write,
}

/// A child process in the "holder" role (see
/// [`roles::holder`](crate::roles::holder)): it waits for what it is to
/// hold of a name ([`Held`]), reports its token once it holds, and holds
/// until killed. Queued behind others it is a waiter a test can SIGKILL.
/// SIGKILLed and reaped on drop.
pub struct HolderChild {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    reader: Option<JoinHandle<()>>,
}

impl HolderChild {
    /// Starts `program` (the `fairlock-test-child` binary) as a holder of
    /// `held` of `name` on the server at `url`, with `lease`.
    pub fn start(
        program: impl Into<PathBuf>,
        url: &str,
        name: &str,
        lease: Duration,
        held: Held,
    ) -> HolderChild {
        use crate::roles::holder::{ACCESS, LEASE_MS, NAME, PERMITS, URL};
        use std::io::BufRead;
        let program = program.into();
        let mut command = Command::new(&program);
        command
            .arg("holder")
            .env(URL, url)
            .env(NAME, name)
            .env(LEASE_MS, lease.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match held {
            Held::Mutex => {}
            Held::Permit(permits) => {
                command.env(PERMITS, permits.to_string());
            }
            Held::Read => {
                command.env(ACCESS, "read");
            }
            Held::Write => {
                command.env(ACCESS, "write");
            }
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|err| panic!("spawn a child process {program:?}: {err}"));
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        HolderChild {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits up to `timeout` for the child to report that it holds; its token.
    pub fn token_within(&self, timeout: Duration) -> u64 {
        use crate::roles::holder::LOCKED;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the child did not report holding within {timeout:?}"));
            if let Some((_, token)) = line.split_once(LOCKED) {
                return token.trim().parse().expect("the child's token");
            }
        }
    }

    /// True if the child reported holding (whatever it printed so far).
    pub fn has_held(&self) -> bool {
        use crate::roles::holder::LOCKED;
        self.lines.try_iter().any(|line| line.contains(LOCKED))
    }

    /// SIGKILLs the child and reaps it; returns when the signal was sent.
    pub fn kill(&mut self) -> Instant {
        let at = Instant::now();
        let _ = self.child.kill();
        let status = reap(&mut self.child).expect("reap the child");
        assert!(!status.success(), "the child exited by itself: {status}");
        if let Some(reader) = self.reader.take() {
            // The pipe closed with the process: the reader ends at once.
            let _ = reader.join();
        }
        at
    }
}

impl Drop for HolderChild {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = reap(&mut self.child);
            if let Some(reader) = self.reader.take() {
                let _ = reader.join();
            }
        }
    }
}
