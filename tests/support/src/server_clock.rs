//! A redis-server whose wall clock a test can step, as an NTP step would:
//! the server runs under libfaketime, which reads its offset from a file
//! on every clock call, so a test moves TIME (and with it every expiry the
//! server counts) mid-run. The monotonic clock is left alone.
//!
//! Debian's redis-server 7.0 (linked against the system's unprefixed
//! jemalloc) deadlocks in its start-up under libfaketime 0.9.10: jemalloc's
//! first allocation reads the clock, libfaketime's first clock call looks
//! up symbols, and that lookup allocates. So the server binary is
//! [`server_binary`] when it starts under libfaketime, else the Redis 6.2
//! or Valkey 8.1 that `scripts/ensure-servers` puts under `target/servers/`
//! (both built with libc's malloc); see [`clock_server_binary`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{
    libfaketime, private_dir, remove_faketime_shm, server_binary, wait_until, RedisServer,
};

/// A [`RedisServer`] under libfaketime, with the file that sets its clock.
pub struct ClockedServer {
    pub server: RedisServer,
    /// libfaketime's FAKETIME_TIMESTAMP_FILE: one line, e.g. "-5s".
    file: PathBuf,
    dir: PathBuf,
    /// The offset in the file, in seconds.
    offset: i64,
}

/// Starts [`clock_server_binary`] under libfaketime, its wall clock as
/// `file` says (libfaketime's FAKETIME_TIMESTAMP_FILE: an offset such as
/// "-5s", or an absolute time that stands still), read on every clock
/// call; its monotonic clock is left alone.
pub fn start_under_faketime(file: &Path) -> RedisServer {
    let env = [
        ("LD_PRELOAD", libfaketime()),
        (
            "FAKETIME_TIMESTAMP_FILE",
            file.to_string_lossy().into_owned(),
        ),
        // Read the file on every clock call, not every 10 s.
        ("FAKETIME_NO_CACHE", "1".to_owned()),
        // An NTP step moves the wall clock only; the server's timers
        // (its monotonic clock) keep running.
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
        // An absolute time in the file is read as UTC.
        ("TZ", "UTC".to_owned()),
    ];
    RedisServer::start_binary_with_env(clock_server_binary(), &[], &env)
}

impl ClockedServer {
    /// Starts [`clock_server_binary`] under libfaketime, its clock at
    /// offset 0 (checked against this machine's clock).
    pub fn start() -> ClockedServer {
        let dir = private_dir("clock").expect("a temporary directory");
        let file = dir.join("faketime");
        write_offset(&file, 0);
        let server = start_under_faketime(&file);
        let mut clocked = ClockedServer {
            server,
            file,
            dir,
            offset: 0,
        };
        clocked.set_offset(0);
        clocked
    }

    /// Sets the server's clock to this machine's clock plus `secs` seconds
    /// (negative: behind), from its next clock read on; returns once the
    /// server's TIME shows it (within 1 s, waiting up to 5 s).
    pub fn set_offset(&mut self, secs: i64) {
        write_offset(&self.file, secs);
        self.offset = secs;
        let mut conn = self.server.conn();
        let mut seen = 0;
        let applied = wait_until(Duration::from_secs(5), || {
            seen = server_time_us(&mut conn) - wall_clock_us();
            (seen - secs * 1_000_000).abs() < 1_000_000
        });
        assert!(
            applied,
            "the server's clock is {seen} µs off this machine's, not {secs} s: \
             libfaketime does not move it"
        );
    }

    /// Steps the server's clock back by `by` whole seconds from where it is.
    pub fn step_back(&mut self, by: Duration) {
        self.set_offset(self.offset - by.as_secs() as i64);
    }
}

impl Drop for ClockedServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server's clock (TIME) in microseconds: what the scripts read.
pub fn server_time_us(conn: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(conn).expect("TIME");
    secs * 1_000_000 + micros
}

/// This machine's wall clock in microseconds.
pub fn wall_clock_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i64
}

/// Writes the offset line, whole (a rename), so that a clock read never
/// sees half a line.
fn write_offset(file: &Path, secs: i64) {
    let next = file.with_extension("next");
    std::fs::write(&next, format!("{secs:+}s\n")).expect("write the faketime file");
    std::fs::rename(&next, file).expect("replace the faketime file");
}

/// The server binary a [`ClockedServer`] runs: [`server_binary`] if it
/// starts under libfaketime, else the first of `target/servers/`'s Redis
/// 6.2 and Valkey 8.1 that does (announced on stderr); panics when none
/// does. Decided once per test process.
pub fn clock_server_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let configured = server_binary();
        if runs_under_faketime(&configured) {
            return configured;
        }
        let servers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/servers");
        let fallbacks = [
            servers.join("redis-6.2/redis-server"),
            servers.join("valkey-8.1/valkey-server"),
        ];
        let chosen = fallbacks
            .into_iter()
            .filter_map(|binary| binary.canonicalize().ok())
            .find(|binary| runs_under_faketime(binary))
            .unwrap_or_else(|| {
                panic!(
                    "{} does not start under libfaketime (a system jemalloc deadlocks \
                     with it), and neither target/servers/ binary is there: run \
                     scripts/ensure-servers, or point {} at a server built with \
                     libc's malloc or a bundled jemalloc",
                    configured.display(),
                    crate::SERVER_ENV
                )
            });
        eprintln!(
            "{} does not start under libfaketime; the clock tests run {}",
            configured.display(),
            chosen.display()
        );
        chosen
    })
}

/// Whether `binary --version` finishes within 3 s under libfaketime.
fn runs_under_faketime(binary: &Path) -> bool {
    let Ok(mut child) = Command::new(binary)
        .arg("--version")
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", "+0s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let pid = child.id();
    let mut status = None;
    wait_until(Duration::from_secs(3), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    remove_faketime_shm(pid);
    status.is_some_and(|s| s.success())
}
