//! What the tests of the `fairlock` command share: the built binary run
//! against a test server, a child process killed and reaped on drop, its
//! output, scratch directories.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use fairlock_test_support::{wait_until, RedisServer};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_fairlock");
/// Upper bound on anything that should be quick.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A `fairlock` command against `server`, not reading the caller's environment.
pub fn fairlock(server: &RedisServer) -> Command {
    fairlock_at(&server.url())
}

/// `fairlock --url URL` (a relay's, say), as [`fairlock`].
pub fn fairlock_at(url: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("REDIS_URL")
        .arg("--url")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A client whose holds and queued calls outlast a loaded machine's
/// pauses (a 30 s lease, a 10 s waiter timeout; the tests' others are 2 s
/// and 1 s), for a test whose subject is the command's waiting on them,
/// not their leases: a hold lost to a starved watchdog lets a command in
/// that the test expects to wait.
pub fn steady_client(server: &RedisServer) -> fairlock::Client {
    (server.builder())
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(10))
        .build()
        .expect("client connects to the test server")
}

/// A running `fairlock`, killed and reaped on drop.
pub struct Proc {
    child: Option<Child>,
}

impl Proc {
    /// With SIGINT, SIGQUIT, SIGTERM and SIGHUP at their defaults, however
    /// the tests were started (a background job's SIGINT and SIGQUIT are
    /// ignored, and so would be the child's): a test that wants one
    /// ignored says so in its command (`trap ''`).
    pub fn spawn(cmd: &mut Command) -> Proc {
        use std::os::unix::process::CommandExt;
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(|| {
                for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(signal, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        Proc {
            child: Some(cmd.spawn().expect("fairlock starts")),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn has_exited(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_some()
    }

    /// Waits (at most `timeout`, else panics) and collects the output.
    pub fn finish(mut self, timeout: Duration) -> Output {
        assert!(
            wait_until(timeout, || self.has_exited()),
            "fairlock did not exit within {timeout:?}"
        );
        self.child.take().unwrap().wait_with_output().unwrap()
    }

    /// Its stderr, line by line as it writes them (the output
    /// [`finish`](Self::finish) collects has none then).
    pub fn stderr_lines(&mut self) -> std::sync::mpsc::Receiver<String> {
        use std::io::BufRead;
        let stderr = self.child.as_mut().unwrap().stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs to completion within `timeout`.
pub fn output(cmd: &mut Command, timeout: Duration) -> Output {
    Proc::spawn(cmd).finish(timeout)
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("fairlock exits, it is not killed")
}

/// A scratch directory removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("fairlock-cli-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn status_json(server: &RedisServer, name: &str) -> Value {
    let out = output(fairlock(server).args(["status", name, "--json"]), PATIENCE);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("status --json prints JSON")
}

pub fn sh(script: &str) -> [&str; 4] {
    ["--", "sh", "-c", script]
}

pub fn read_pid(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

pub fn assert_one_line_error(out: &Output, exit_code: i32, what: &str) {
    let err = stderr(out);
    assert_eq!(code(out), exit_code, "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err:?}");
    assert!(err.starts_with("fairlock: error: "), "{what}: {err:?}");
}

/// A FIFO given to a `fairlock` as its stderr, full before it writes: its
/// first line (`-v`'s "acquired" or "leads") blocks it past the grant and
/// before the command starts, until [`read_all`](Self::read_all) reads.
#[cfg(target_os = "linux")]
pub struct FullPipe {
    path: PathBuf,
    reader: std::fs::File,
    /// The bytes written before, not fairlock's.
    filled: usize,
}

#[cfg(target_os = "linux")]
impl FullPipe {
    pub fn new(scratch: &Scratch) -> FullPipe {
        use std::io::Write;
        let path = scratch.path("stderr");
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a new FIFO at a path of our own.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let reader = FullPipe::open(&path, false, libc::O_NONBLOCK);
        // Filled through an open file of its own, not blocking, so that
        // fairlock's (blocking) finds the pipe full and waits in its write.
        let mut filler = FullPipe::open(&path, true, libc::O_NONBLOCK);
        let mut filled = 0;
        loop {
            match filler.write(&[b'.'; 4096]) {
                Ok(n) => filled += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(err) => panic!("filling the pipe: {err}"),
            }
        }
        FullPipe {
            path,
            reader,
            filled,
        }
    }

    fn open(path: &Path, write: bool, flags: i32) -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt;
        (std::fs::OpenOptions::new().read(!write).write(write))
            .custom_flags(flags)
            .open(path)
            .unwrap()
    }

    /// A blocking end to write to: the child's stderr.
    pub fn writer(&self) -> Stdio {
        Stdio::from(FullPipe::open(&self.path, true, 0))
    }

    /// Whether `pid`'s main thread is blocked writing to a full pipe.
    pub fn blocks(pid: u32) -> bool {
        let wchan = format!("/proc/{pid}/task/{pid}/wchan");
        std::fs::read_to_string(wchan).is_ok_and(|w| w.contains("pipe_write"))
    }

    /// How many times `pid`'s signal thread (`fairlock-signals`) went to
    /// sleep: once more than before a signal, it has handled it (a thread
    /// that wakes runs its handling through before it sleeps again).
    pub fn signal_thread_sleeps(pid: u32) -> u64 {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.starts_with("fairlock-signal") {
                let status = std::fs::read_to_string(task.path().join("status")).unwrap();
                let line = (status.lines())
                    .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
                    .expect("a thread's status counts its sleeps");
                return line.trim().parse().unwrap();
            }
        }
        panic!("fairlock {pid} has no signal thread");
    }

    /// Once `run`'s main thread is blocked writing to this pipe (past its
    /// grant, its command not started), sends it `signal` and waits until
    /// its signal thread has handled it (a busy machine may run that thread
    /// late), before the pipe drains and the command would start.
    pub fn signal_while_blocked(&self, run: &Proc, signal: &str) {
        let blocked = || FullPipe::blocks(run.pid());
        assert!(wait_until(PATIENCE, blocked), "blocked writing its -v line");
        let sleeps = FullPipe::signal_thread_sleeps(run.pid());
        run.signal(signal);
        let handled = || FullPipe::signal_thread_sleeps(run.pid()) > sleeps;
        assert!(wait_until(PATIENCE, handled), "the signal handled");
    }

    /// Reads on a thread until every writer is gone; what they wrote.
    pub fn read_all(self) -> std::thread::JoinHandle<String> {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let FullPipe {
            mut reader, filled, ..
        } = self;
        // SAFETY: clears O_NONBLOCK on our own descriptor: reads wait now.
        unsafe {
            let flags = libc::fcntl(reader.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(reader.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
        std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            String::from_utf8_lossy(&all[filled..]).into_owned()
        })
    }
}

/// `sh -c inner` run on a terminal of its own (script(1) from util-linux),
/// what it wrote there (its stdout) and its exit code; `None`, said on
/// stderr, where script(1) is missing.
pub fn on_a_terminal(inner: &str) -> Option<Output> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: script(1) from util-linux is needed for a terminal");
        return None;
    }
    let out = output(
        Command::new("script")
            .args(["-qfec", inner, "/dev/null"])
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        PATIENCE,
    );
    Some(out)
}
