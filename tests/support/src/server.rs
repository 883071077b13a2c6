//! Test support: a private redis-server per test, started on a free port
//! with persistence off, killed and reaped on Drop. When a test fails
//! (panics), the server's log is printed. Also the pieces other processes
//! of a test reuse: free ports, private directories, start-up checks,
//! kill and reap, log files, and a plain connection to a loopback port.
//!
//! The server binary is `redis-server` on PATH unless
//! `FAIRLOCK_TEST_REDIS_SERVER` names another (a path; e.g. the Redis 6.2
//! or Valkey 8.1 that `scripts/ensure-servers` puts under
//! `target/servers/`), for single servers, clusters and Sentinels alike.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder};

use crate::{remove_faketime_shm, TlsFiles};

/// The environment variable naming the server binary the tests run (a
/// path, or a name looked up on PATH); `redis-server` when unset.
pub const SERVER_ENV: &str = "FAIRLOCK_TEST_REDIS_SERVER";

/// The server binary the tests run (see [`SERVER_ENV`]).
pub fn server_binary() -> PathBuf {
    match std::env::var_os(SERVER_ENV) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from("redis-server"),
    }
}

/// The version `binary --version` reports (`v=X.Y.Z`: Redis's own, or
/// Valkey's), as (major, minor, patch).
pub fn binary_version(binary: &Path) -> Result<(u32, u32, u32), String> {
    let out = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} not runnable (is it installed?): {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .ok_or_else(|| format!("{} --version says {text:?}", binary.display()))?;
    let mut parts = version.split('.').map(|n| n.parse::<u32>());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(a)), Some(Ok(b)), Some(Ok(c))) => Ok((a, b, c)),
        _ => Err(format!("{} --version says {text:?}", binary.display())),
    }
}

/// The version of [`server_binary`], asked once per test process.
pub fn server_version() -> (u32, u32, u32) {
    static VERSION: OnceLock<(u32, u32, u32)> = OnceLock::new();
    *VERSION.get_or_init(|| binary_version(&server_binary()).unwrap_or_else(|e| panic!("{e}")))
}

/// True when the server binary is Valkey rather than Redis.
pub fn server_is_valkey() -> bool {
    static VALKEY: OnceLock<bool> = OnceLock::new();
    *VALKEY.get_or_init(|| {
        Command::new(server_binary())
            .arg("--version")
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).starts_with("Valkey"))
    })
}

/// Arguments that have a server load each key of its data 100 µs (see
/// [`RedisServer::save_a_slow_snapshot`]).
pub const SLOW_LOADING: [&str; 2] = ["--key-load-delay", "100"];

/// A redis-server owned by one test.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// The server binary, kept for a restart.
    binary: PathBuf,
    dir: PathBuf,
    /// Extra arguments, kept for a restart; `{port}` stands for the port,
    /// `{dir}` for the server's private directory.
    extra: Vec<String>,
    /// Listens for TLS only (see [`start_tls`](Self::start_tls)).
    tls: bool,
    /// Extra environment variables, kept for a restart.
    env: Vec<(String, String)>,
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
        Self::start_tls_auth(tls, false)
    }

    /// As [`start_tls`](Self::start_tls), and clients must present a
    /// certificate signed by the CA of `tls` (`tls-auth-clients yes`:
    /// mutual TLS) when `auth_clients`.
    pub fn start_tls_auth(tls: &TlsFiles, auth_clients: bool) -> RedisServer {
        let args = tls.server_args(auth_clients);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self::start_configured(&args, true)
    }

    /// As [`start_with`](Self::start_with), running `binary` instead of
    /// [`server_binary`] (a test that compares server versions).
    pub fn start_binary(binary: &Path, extra: &[&str]) -> RedisServer {
        Self::start_binary_with_env(binary, extra, &[])
    }

    /// A server that also listens on a Unix socket in its private directory
    /// (mode 700), beside its loopback port, with extra arguments `extra`
    /// (see [`unix_socket`](Self::unix_socket) and
    /// [`unix_url`](Self::unix_url)).
    pub fn start_unix(extra: &[&str]) -> RedisServer {
        let mut args = vec![
            "--unixsocket",
            "{dir}/redis.sock",
            "--unixsocketperm",
            "700",
        ];
        args.extend(extra);
        Self::start_with(&args)
    }

    /// The Unix socket of a server started with
    /// [`start_unix`](Self::start_unix).
    pub fn unix_socket(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    /// `redis+unix://<socket>` (see [`start_unix`](Self::start_unix)).
    pub fn unix_url(&self) -> String {
        format!("redis+unix://{}", self.unix_socket().display())
    }

    /// As [`start_binary`](Self::start_binary), with `env` added to the
    /// server's environment (kept for a [`restart`](Self::restart)): e.g.
    /// `LD_PRELOAD` of [`libfaketime`](crate::libfaketime) and its
    /// settings, to move the server's clock (see
    /// [`ClockedServer`](crate::ClockedServer)). When `LD_PRELOAD` names
    /// libfaketime, [`kill`](Self::kill) also removes the shared memory
    /// libfaketime leaves behind a SIGKILLed process.
    pub fn start_binary_with_env(
        binary: &Path,
        extra: &[&str],
        env: &[(&str, String)],
    ) -> RedisServer {
        on_a_free_port("redis-server", |port| {
            Self::spawn(binary, port, extra, false, env)
        })
    }

    /// As [`start_with`](Self::start_with), on a port whose port + 10000
    /// is free too: the cluster bus port of a server that has no
    /// `--cluster-port` (Redis before 7.0).
    pub fn start_with_bus(extra: &[&str]) -> RedisServer {
        let binary = server_binary();
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port_with_bus();
            match Self::spawn(&binary, port, extra, false, &[]) {
                Ok(started) => return started,
                Err(err) => last_error = err,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// As [`start_with`](Self::start_with); a `tls` server is checked for
    /// readiness without a TLS client (see `launch`) and has `rediss` URLs.
    pub(crate) fn start_configured(extra: &[&str], tls: bool) -> RedisServer {
        on_a_free_port("redis-server", |port| Self::try_start_on(port, extra, tls))
    }

    /// One attempt of [`start_configured`](Self::start_configured) on `port`.
    pub(crate) fn try_start_on(
        port: u16,
        extra: &[&str],
        tls: bool,
    ) -> Result<RedisServer, String> {
        Self::spawn(&server_binary(), port, extra, tls, &[])
    }

    /// Starts a server on `port` (e.g. again after [`kill`](Self::kill)).
    fn spawn(
        binary: &Path,
        port: u16,
        extra: &[&str],
        tls: bool,
        env: &[(&str, String)],
    ) -> Result<RedisServer, String> {
        let dir = private_dir(&format!("test-{port}"))?;
        let mut server = RedisServer {
            child: None,
            port,
            binary: binary.to_owned(),
            dir,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            tls,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let extra: Vec<String> = self
            .extra
            .iter()
            .map(|a| {
                a.replace("{port}", &port)
                    .replace("{dir}", self.dir.to_str().expect("utf-8 temp path"))
            })
            .collect();
        let child = Command::new(&self.binary)
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
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "{} not runnable (is it installed?): {e}",
                    self.binary.display()
                )
            })?;
        self.child = Some(child);
        let (tls, port, url) = (self.tls, self.port, self.url());
        let log = self.dir.join("redis.log");
        // This process's own line (a restart appends to the log of the one
        // before): an answer on the port alone may come from a process
        // that took the port first, this one then failing to bind it.
        let ready_before = ready_lines(&log);
        await_start("redis-server", &mut self.child, &log, || {
            if ready_lines(&log) == ready_before {
                false
            } else if tls {
                // No TLS client here: the port accepts and the log says ready.
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            } else {
                // A server with `requirepass` answers NOAUTH: it is up too.
                match redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                    .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn))
                {
                    Ok(_) => true,
                    Err(err) => err.code() == Some("NOAUTH"),
                }
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

    /// A client for a test that holds the server back: the test timings
    /// with a 1 s command timeout, and a 30 s lease that no stall runs out.
    pub fn stall_client(&self) -> Client {
        self.builder()
            .command_timeout(Duration::from_secs(1))
            .lease(Duration::from_secs(30))
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

    /// Sets the server's memory limit (`maxmemory`, e.g. "100mb", "0" for
    /// none) and its `maxmemory-policy`.
    /// One setting a `CONFIG SET`, as Redis 6.2 takes them.
    pub fn set_eviction(&self, maxmemory: &str, policy: &str) {
        let mut conn = self.conn();
        for (name, value) in [("maxmemory-policy", policy), ("maxmemory", maxmemory)] {
            let () = (redis::cmd("CONFIG").arg("SET").arg(name).arg(value))
                .query(&mut conn)
                .expect("CONFIG SET maxmemory");
        }
    }

    /// A server to restart: with `loading`, one that loads a snapshot for
    /// about 1 s on its next start ([`SLOW_LOADING`],
    /// [`save_a_slow_snapshot`](Self::save_a_slow_snapshot)), as a server
    /// with a real dataset does; else a plain one, back at once.
    pub fn start_to_restart(loading: bool) -> RedisServer {
        if !loading {
            return RedisServer::start();
        }
        let server = RedisServer::start_with(&SLOW_LOADING);
        server.save_a_slow_snapshot();
        server
    }

    /// Writes 10 000 keys of 1 KiB that do not compress and saves them
    /// (`SAVE`): a server started with [`SLOW_LOADING`] loads them for about
    /// 1 s on its next start, answering `LOADING` meanwhile (it serves
    /// clients every 2 MiB loaded), as a server with a real dataset does.
    pub fn save_a_slow_snapshot(&self) {
        let mut fill = redis::pipe();
        let mut x = 1u64;
        for i in 0..10_000 {
            let value: String = (0..64)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    format!("{:016x}", x >> 1)
                })
                .collect();
            fill.set(format!("other:{i}"), value).ignore();
        }
        let () = fill.query(&mut self.conn()).unwrap();
        let () = redis::cmd("SAVE").query(&mut self.conn()).unwrap();
    }

    /// Kills the server (SIGKILL) and waits for it; its data is lost.
    pub fn kill(&mut self) {
        let pid = self.pid();
        kill_and_reap(&mut self.child);
        let faketime = self
            .env
            .iter()
            .any(|(k, v)| k == "LD_PRELOAD" && v.contains("faketime"));
        if let (Some(pid), true) = (pid, faketime) {
            remove_faketime_shm(pid);
        }
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

    /// Kills the server, leaves its port closed for `outage` (clients find
    /// it gone meanwhile) and starts it again on the same port, empty
    /// unless its persistence kept the data.
    pub fn restart_after(&mut self, outage: std::time::Duration) {
        self.kill();
        std::thread::sleep(outage);
        self.start_again();
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

/// How many times the server logging to `log` said it was ready.
fn ready_lines(log: &Path) -> usize {
    read_log(log).matches("Ready to accept connections").count()
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

/// A free loopback port whose port + 10000 (a cluster bus port) is free
/// too and below 65536.
pub fn free_port_with_bus() -> u16 {
    loop {
        // Held while the bus port is probed, so the two differ.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("local address").port();
        if port <= 55535 && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}

/// A loopback port that refuses every connection for as long as this
/// lives: a TCP socket is bound to it and never listens, so no server or
/// relay another test starts meanwhile can take the port (a port from
/// [`free_port`] is free only until somebody binds it, and a test that
/// counts on a refusal then meets a server, or a stopped one that never
/// answers).
pub struct RefusedPort {
    _bound: socket2::Socket,
    port: u16,
}

impl RefusedPort {
    /// Binds a fresh ephemeral loopback port without listening on it.
    pub fn new() -> RefusedPort {
        use socket2::{Domain, Socket, Type};
        let bound = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a TCP socket");
        bound
            .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .expect("bind an ephemeral port");
        let port = bound
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .expect("the bound address")
            .port();
        RefusedPort {
            _bound: bound,
            port,
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Default for RefusedPort {
    fn default() -> Self {
        RefusedPort::new()
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// A plain connection to one loopback port, with 5 s read/write timeouts.
pub fn try_conn(port: u16) -> Result<redis::Connection, String> {
    try_conn_as(port, None)
}

/// As [`try_conn`], authenticated with `password` (for the `default`
/// user) if any.
pub fn try_conn_as(port: u16, password: Option<&str>) -> Result<redis::Connection, String> {
    let mut info = redis::RedisConnectionInfo::default();
    if let Some(password) = password {
        info = info.set_password(password);
    }
    let info = redis::IntoConnectionInfo::into_connection_info(("127.0.0.1", port))
        .map_err(|e| format!("port {port}: {e}"))?
        .set_redis_settings(info);
    let client = redis::Client::open(info).map_err(|e| format!("port {port}: {e}"))?;
    connect_with_timeouts(&client, port)
}

/// A connection of `client` (to `port`) within 1 s, with 5 s read/write
/// timeouts.
fn connect_with_timeouts(client: &redis::Client, port: u16) -> Result<redis::Connection, String> {
    let conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .map_err(|e| format!("connect to port {port}: {e}"))?;
    let timeout = Some(Duration::from_secs(5));
    conn.set_read_timeout(timeout)
        .and_then(|()| conn.set_write_timeout(timeout))
        .map_err(|e| format!("port {port}: {e}"))?;
    Ok(conn)
}

/// How the support's own connections reach a loopback server: plain TCP
/// ([`Dial::default`], as [`try_conn`]), or, with the `tls` feature, TLS
/// presenting the client certificate of a [`TlsFiles`] ([`Dial::tls`]).
#[derive(Clone, Default)]
pub struct Dial {
    #[cfg(feature = "tls")]
    tls: Option<TlsDial>,
}

/// The certificates of a TLS [`Dial`], for the `redis` crate and as
/// `redis-cli` options.
#[cfg(feature = "tls")]
#[derive(Clone)]
struct TlsDial {
    certificates: redis::TlsCertificates,
    cli_args: Vec<String>,
}

impl Dial {
    /// TLS to `rediss://127.0.0.1:<port>`, trusting the CA of `files` and
    /// presenting its client certificate (which a server with
    /// `tls-auth-clients yes` requires).
    #[cfg(feature = "tls")]
    pub fn tls(files: &TlsFiles) -> Dial {
        Dial {
            tls: Some(TlsDial {
                certificates: redis::TlsCertificates {
                    client_tls: Some(redis::ClientTlsConfig {
                        client_cert: files.client_cert_pem(),
                        client_key: files.client_key_pem(),
                    }),
                    root_cert: Some(files.ca_pem()),
                },
                cli_args: vec![
                    "--tls".to_owned(),
                    "--cacert".to_owned(),
                    crate::tls::path_arg(&files.ca_cert),
                    "--cert".to_owned(),
                    crate::tls::path_arg(&files.client_cert),
                    "--key".to_owned(),
                    crate::tls::path_arg(&files.client_key),
                ],
            }),
        }
    }

    /// True for a TLS dial.
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// The `redis-cli` options that connect the same way (none for plain
    /// TCP; `--tls --cacert ... --cert ... --key ...` for TLS).
    pub fn cli_args(&self) -> Vec<String> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return tls.cli_args.clone();
        }
        Vec::new()
    }

    /// A connection to `port`, with 5 s read/write timeouts.
    pub fn conn(&self, port: u16) -> Result<redis::Connection, String> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let url = format!("rediss://127.0.0.1:{port}");
            let client = redis::Client::build_with_tls(url, tls.certificates.clone())
                .map_err(|e| format!("port {port}: {e}"))?;
            return connect_with_timeouts(&client, port);
        }
        try_conn(port)
    }
}
