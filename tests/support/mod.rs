//! Test support: a private redis-server per test, started on a free port
//! with persistence off, killed and reaped on Drop. When a test fails
//! (panics), the server's log is printed.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder};

/// A redis-server owned by one test.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// As [`start`](Self::start), with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match Self::spawn(port, extra) {
                Ok(server) => return server,
                Err(err) => last_error = err,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// Starts a server on `port` (e.g. again after [`kill`](Self::kill)).
    fn spawn(port: u16, extra: &[&str]) -> Result<RedisServer, String> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fairlock-test-{}-{}-{}",
            std::process::id(),
            port,
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut server = RedisServer {
            child: None,
            port,
            dir,
        };
        server.launch(extra)?;
        Ok(server)
    }

    fn launch(&mut self, extra: &[&str]) -> Result<(), String> {
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server not runnable (is it installed?): {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("redis-server exited with {status}: {}", self.log()));
            }
            if let Ok(mut conn) = self.try_conn() {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server did not answer within 10 s: {}",
            self.log()
        ))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A builder with short test timings (lease 2 s, waiter timeout 1 s).
    pub fn builder(&self) -> ClientBuilder {
        Client::builder(&self.url())
            .lease(Duration::from_secs(2))
            .waiter_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_secs(2))
    }

    /// A client with the short test timings.
    pub fn client(&self) -> Client {
        self.builder()
            .build()
            .expect("client connects to the test server")
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(1))
    }

    /// A plain connection, for looking at the keys the library left.
    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect to the test server")
    }

    /// Kills the server (SIGKILL) and waits for it; its data is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.launch(&[]).expect("redis-server restarts on its port");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "---- redis-server log (port {}) ----\n{}",
                self.port,
                self.log()
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

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

/// Timing-sensitive tests of one binary take this to run one at a time:
/// every thread and process shares two noisy cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
