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
    let mut cmd = Command::new(BIN);
    cmd.env_remove("REDIS_URL")
        .arg("--url")
        .arg(server.url())
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
