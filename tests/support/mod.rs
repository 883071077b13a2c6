//! Test support: a private redis-server per test, started on a free port
//! with persistence off, killed and reaped on Drop. When a test fails
//! (panics), the server's log is printed.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder};
pub mod relay;
pub mod topology;

/// A redis-server owned by one test.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Extra arguments, kept for a restart; `{port}` stands for the port.
    extra: Vec<String>,
    /// Listens for TLS only (see [`start_tls`](Self::start_tls)).
    tls: bool,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// As [`start`](Self::start), with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        Self::start_configured(extra, false)
    }

    /// A server that speaks only TLS, with the certificate and key in
    /// `tls` (see [`TlsFiles`]); clients need not present a certificate.
    /// Its [`url`](Self::url) is `rediss://127.0.0.1:<port>`.
    pub fn start_tls(tls: &TlsFiles) -> RedisServer {
        let path = |p: &Path| p.to_str().expect("utf-8 temp path").to_owned();
        let args = [
            "--port".to_owned(),
            "0".to_owned(),
            "--tls-port".to_owned(),
            "{port}".to_owned(),
            "--tls-cert-file".to_owned(),
            path(&tls.server_cert),
            "--tls-key-file".to_owned(),
            path(&tls.server_key),
            "--tls-ca-cert-file".to_owned(),
            path(&tls.ca_cert),
            "--tls-auth-clients".to_owned(),
            "no".to_owned(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::start_configured(&args, true)
    }

    fn start_configured(extra: &[&str], tls: bool) -> RedisServer {
        on_a_free_port("redis-server", |port| Self::spawn(port, extra, tls))
    }

    /// Starts a server on `port` (e.g. again after [`kill`](Self::kill)).
    fn spawn(port: u16, extra: &[&str], tls: bool) -> Result<RedisServer, String> {
        let dir = private_dir(&format!("test-{port}"))?;
        let mut server = RedisServer {
            child: None,
            port,
            dir,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            tls,
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let extra: Vec<String> = self
            .extra
            .iter()
            .map(|a| a.replace("{port}", &port))
            .collect();
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
            .args(&extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server not runnable (is it installed?): {e}"))?;
        self.child = Some(child);
        let (tls, port, url) = (self.tls, self.port, self.url());
        let log = self.dir.join("redis.log");
        await_start("redis-server", &mut self.child, &log, || {
            if tls {
                // No TLS client here: the port accepts and the log says ready.
                let listening = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
                listening && read_log(&log).contains("Ready to accept connections")
            } else {
                redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                    .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn))
                    .is_ok()
            }
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The URL with `user:password@` in it.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{user}:{password}@127.0.0.1:{}", self.port)
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
        kill_and_reap(&mut self.child);
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// Starts a [`kill`](Self::kill)ed server again on its port, empty, with
    /// the arguments it was first started with.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is still running");
        self.launch().expect("redis-server restarts on its port");
    }

    /// Process id of the running server.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        read_log(&self.dir.join("redis.log"))
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

/// Runs `spawn` on fresh free ports until it starts (5 tries): another
/// process may take a port between the probe and the bind.
pub fn on_a_free_port<T>(what: &str, mut spawn: impl FnMut(u16) -> Result<T, String>) -> T {
    let mut last_error = String::new();
    for _ in 0..5 {
        match spawn(free_port()) {
            Ok(started) => return started,
            Err(err) => last_error = err,
        }
    }
    panic!("could not start {what}: {last_error}");
}

/// A new, empty temporary directory of this test run, named after `label`.
pub fn private_dir(label: &str) -> Result<PathBuf, String> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fairlock-{label}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// SIGKILLs the child, if any, and reaps it.
pub fn kill_and_reap(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Calls `f` until Redis answers (bounded at 15 s, e.g. through a
/// failover); any other error fails the test.
pub fn retry_while_unreachable<T>(mut f: impl FnMut() -> fairlock::Result<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match f() {
            Ok(value) => return value,
            Err(err) if err.is_connection() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(err) => panic!("{err:?}"),
        }
    }
}

/// The text of a server's log file, or "" before it exists.
pub fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits up to 10 s for a just-spawned `what` in `child` to be `ready`.
/// If it exits first, `child` is cleared; either failure carries the log
/// at `log`.
pub fn await_start(
    what: &str,
    child: &mut Option<Child>,
    log: &Path,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(status) = child.as_mut().unwrap().try_wait().unwrap() {
            *child = None;
            return Err(format!("{what} exited with {status}: {}", read_log(log)));
        }
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{what} did not answer within 10 s: {}",
        read_log(log)
    ))
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

/// A throwaway CA and a server certificate for 127.0.0.1 signed by it, made
/// with the `openssl` command line in a fresh temporary directory (removed
/// on drop).
pub struct TlsFiles {
    pub dir: PathBuf,
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

impl TlsFiles {
    pub fn generate() -> TlsFiles {
        let dir = private_dir("tls").expect("create the certificate directory");
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .stdin(Stdio::null())
                .output()
                .expect("openssl runs (scripts/ensure-redis installs it)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
        let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=fairlock test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&ca);
        let mut csr = vec!["req", "-nodes"];
        csr.extend(ec);
        csr.extend([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        openssl(&csr);
        std::fs::write(
            dir.join("server.ext"),
            "basicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\n\
             subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]);
        TlsFiles {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
            dir,
        }
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(&self.ca_cert).unwrap()
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One numeric field of `INFO <section>`.
pub fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// `connected_clients` from `INFO clients`.
pub fn connected_clients(conn: &mut redis::Connection) -> i64 {
    info_field(conn, "clients", "connected_clients")
}

/// Threads of this process, from /proc.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Every key under `pattern` that has no TTL.
pub fn keys_without_ttl(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn).unwrap();
    keys.into_iter()
        .filter(|k| redis::cmd("PTTL").arg(k).query::<i64>(conn).unwrap() == -1)
        .collect()
}

// ---------------------------------------------------------------------------
// Child processes: the test binary re-executes itself to run one test (the
// child's entry point, which does nothing without its environment), so a
// test can SIGKILL a real process that holds or waits for a lock.
//
// Protocol: the parent writes commands to the child's stdin, one a line; the
// child writes events to stdout as lines starting with "@@ ". A child exits
// when its stdin closes (so it never outlives its parent) and after at most
// CHILD_MAX_LIFE in any case.

/// The most a child process lives, whatever happens to its parent.
pub const CHILD_MAX_LIFE: Duration = Duration::from_secs(120);

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
    procs: Vec<Proc>,
    tx: std::sync::mpsc::Sender<Event>,
    rx: std::sync::mpsc::Receiver<Event>,
    backlog: std::collections::VecDeque<Event>,
}

impl Default for Children {
    fn default() -> Self {
        Self::new()
    }
}

impl Children {
    pub fn new() -> Children {
        let (tx, rx) = std::sync::mpsc::channel();
        Children {
            procs: Vec::new(),
            tx,
            rx,
            backlog: Default::default(),
        }
    }

    /// Starts this test binary running only the test `entry`, with `env`
    /// added; returns the child's index.
    pub fn spawn(&mut self, entry: &str, env: &[(&str, String)]) -> usize {
        use std::io::BufRead;
        let index = self.procs.len();
        let mut child = Command::new(std::env::current_exe().expect("test binary path"))
            .args(["--exact", entry, "--nocapture", "--test-threads=1"])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a child process");
        let stdout = child.stdout.take().expect("child stdout");
        let tx = self.tx.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                // The harness's "test <name> ... " may precede it on the line.
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
        let status = proc.child.wait().expect("reap the child");
        proc.reaped = true;
        assert!(
            !status.success(),
            "child {child} exited by itself: {status}"
        );
        at
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
                proc.reaped = true;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = proc.child.kill();
                let _ = proc.child.wait();
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
                let _ = proc.child.wait();
            }
            // The pipe closed with the process: the reader ends at once.
            if let Some(reader) = proc.reader.take() {
                let _ = reader.join();
            }
        }
    }
}

/// In a child: the value of `name`, or None in a normal test run.
pub fn child_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// In a child: a required variable, parsed.
pub fn child_arg<T: std::str::FromStr>(name: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    std::env::var(name)
        .unwrap_or_else(|_| panic!("child: {name} is not set"))
        .parse()
        .unwrap_or_else(|err| panic!("child: {name}: {err:?}"))
}

/// In a child: prints one event line for the parent.
pub fn say(text: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {text}");
    let _ = out.flush();
}

/// In a child: the parent's command lines. The process exits (status 0)
/// when stdin closes, and with status 3 after [`CHILD_MAX_LIFE`].
pub fn child_commands() -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_MAX_LIFE);
        eprintln!("child: lived {CHILD_MAX_LIFE:?}, exiting");
        std::process::exit(3);
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
        std::process::exit(0);
    });
    rx
}

/// Milliseconds since the Unix epoch by this process's wall clock.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_else(|e| -(e.duration().as_millis() as i64))
}

/// A thread that locks a mutex and keeps the guard until told to unlock.
pub struct LockThread {
    granted: std::sync::mpsc::Receiver<Result<(Instant, u64), fairlock::Error>>,
    release: std::sync::mpsc::Sender<()>,
    handle: Option<JoinHandle<Result<Instant, String>>>,
}

impl LockThread {
    /// Spawns a thread that calls `mutex.lock()`.
    pub fn lock(mutex: fairlock::FairMutex) -> LockThread {
        let (granted_tx, granted) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let guard = match mutex.lock() {
                Ok(guard) => guard,
                Err(err) => {
                    let message = format!("lock failed: {err:?}");
                    let _ = granted_tx.send(Err(err));
                    return Err(message);
                }
            };
            let _ = granted_tx.send(Ok((Instant::now(), guard.fencing_token())));
            let _ = release_rx.recv_timeout(Duration::from_secs(60));
            let at = Instant::now();
            guard
                .unlock()
                .map(|()| at)
                .map_err(|err| format!("{err:?}"))
        });
        LockThread {
            granted,
            release,
            handle: Some(handle),
        }
    }

    /// Waits for the grant: (when, token). Panics on timeout or error.
    pub fn granted_within(&self, timeout: Duration, what: &str) -> (Instant, u64) {
        match self.granted.recv_timeout(timeout) {
            Ok(Ok(grant)) => grant,
            Ok(Err(err)) => panic!("{what}: lock failed: {err:?}"),
            Err(_) => panic!("{what} was not granted within {timeout:?}"),
        }
    }

    /// True if granted within `timeout` (the grant is consumed).
    pub fn is_granted_within(&self, timeout: Duration) -> bool {
        matches!(self.granted.recv_timeout(timeout), Ok(Ok(_)))
    }

    /// Tells the thread to unlock; returns when it started to, once it did.
    pub fn release(mut self, what: &str) -> Instant {
        let _ = self.release.send(());
        let handle = self.handle.take().unwrap();
        join_within(handle, Duration::from_secs(10), what)
            .unwrap_or_else(|err| panic!("{what} failed to unlock: {err}"))
    }
}

impl Drop for LockThread {
    fn drop(&mut self) {
        let _ = self.release.send(());
        if let Some(handle) = self.handle.take() {
            // Bounded: the thread is either blocked in lock() on a live
            // client (then it gets the lock or an error) or about to unlock.
            let _ = wait_until(Duration::from_secs(10), || handle.is_finished());
        }
    }
}

/// Connections subscribed to at least one channel (`CLIENT LIST`).
pub fn pubsub_clients(conn: &mut redis::Connection) -> usize {
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    clients.lines().filter(|l| l.contains(" sub=1 ")).count()
}

/// Cuts every subscribed connection (`CLIENT KILL TYPE pubsub`); returns how many.
pub fn kill_subscribers(conn: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(conn)
        .unwrap()
}
