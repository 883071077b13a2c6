//! A master with one replica watched by three Sentinels for tests
//! ([`SentinelSet`], of [`Sentinel`]s), the Sentinels with a password of
//! their own if asked ([`SentinelSet::start_with_password`]). Every process is a child of the
//! test, SIGKILLed and reaped on drop (also when the test panics, when the
//! logs are printed). Only plain single-node connections of the `redis`
//! crate are used here, never its sentinel client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::info::{field, info_replication, replica_acknowledges};
use crate::timing::{poll, START_TIMEOUT};
use crate::{kill_and_reap, on_a_free_port, private_dir, try_conn_as, Dial, RedisServer, TlsFiles};

const MASTER_NAME: &str = "fairlock-master";

/// One `redis-server <conf> --sentinel` process, killed and reaped on drop.
pub struct Sentinel {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Its `requirepass`, if any (also what it tells the other Sentinels).
    password: Option<String>,
}

impl Sentinel {
    /// Starts a sentinel monitoring `master_port` (quorum 2) on a free
    /// port and waits until it answers PING; with `password`, it requires
    /// it (`requirepass`) and gives it to the other Sentinels (`sentinel
    /// sentinel-pass`, which they all share).
    fn start(master_port: u16, password: Option<&str>) -> Sentinel {
        on_a_free_port("a sentinel", |port| {
            Self::spawn(port, master_port, 2, password, None)
        })
    }

    /// A lone sentinel (quorum 1) that speaks only TLS, with the server
    /// certificate of `tls`, and asks its clients for a certificate of the
    /// same CA (`tls-auth-clients yes`); it reaches the TLS-only master on
    /// `master_port` (see
    /// [`RedisServer::start_tls_auth`](crate::RedisServer::start_tls_auth))
    /// over TLS, presenting the client certificate of `tls`. With
    /// `password`, it requires it. Its [`url`](Self::url) is a `redis://`
    /// one all the same; a test writes its own `rediss+sentinel://` URL.
    /// Ready once its log says so; the test support's own connections
    /// (plain) do not reach it.
    pub fn start_tls(master_port: u16, tls: &TlsFiles, password: Option<&str>) -> Sentinel {
        on_a_free_port("a TLS sentinel", |port| {
            Self::spawn(port, master_port, 1, password, Some(tls))
        })
    }

    fn spawn(
        port: u16,
        master_port: u16,
        quorum: u32,
        password: Option<&str>,
        tls: Option<&TlsFiles>,
    ) -> Result<Sentinel, String> {
        let dir = private_dir(&format!("sentinel-{port}"))?;
        let mut sentinel = Sentinel {
            child: None,
            port,
            dir,
            password: password.map(str::to_owned),
        };
        let auth = match password {
            Some(password) => {
                format!("requirepass {password}\nsentinel sentinel-pass {password}\n")
            }
            None => String::new(),
        };
        let listen = match tls {
            None => format!("port {port}\n"),
            Some(tls) => {
                let path = |p: &std::path::Path| p.display().to_string();
                format!(
                    "port 0\n\
                     tls-port {port}\n\
                     tls-cert-file {}\n\
                     tls-key-file {}\n\
                     tls-ca-cert-file {}\n\
                     tls-client-cert-file {}\n\
                     tls-client-key-file {}\n\
                     tls-auth-clients yes\n\
                     tls-replication yes\n",
                    path(&tls.server_cert),
                    path(&tls.server_key),
                    path(&tls.ca_cert),
                    path(&tls.client_cert),
                    path(&tls.client_key),
                )
            }
        };
        let dir = sentinel.dir.display();
        let conf = format!(
            "{listen}\
             bind 127.0.0.1\n\
             protected-mode no\n\
             dir {dir}\n\
             logfile {dir}/sentinel.log\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 5000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n\
             {auth}"
        );
        let conf_path = sentinel.dir.join("sentinel.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let child = Command::new(crate::server_binary())
            .arg(&conf_path)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server --sentinel not runnable: {e}"))?;
        sentinel.child = Some(child);
        let log = sentinel.dir.join("sentinel.log");
        let password = sentinel.password.clone();
        let tls = tls.is_some();
        crate::await_start("sentinel", &mut sentinel.child, &log, || {
            if tls {
                // No TLS client here: the port accepts and the log says the
                // master is monitored (a Sentinel logs no "Ready to accept").
                let listening = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
                return listening && crate::read_log(&log).contains("+monitor master");
            }
            try_conn_as(port, password.as_deref())
                .and_then(|mut conn| {
                    redis::cmd("PING")
                        .query::<String>(&mut conn)
                        .map_err(|e| e.to_string())
                })
                .is_ok()
        })?;
        Ok(sentinel)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain connection to the sentinel (authenticated if it has a
    /// password).
    pub fn conn(&self) -> redis::Connection {
        self.try_conn().unwrap_or_else(|e| panic!("sentinel: {e}"))
    }

    fn try_conn(&self) -> Result<redis::Connection, String> {
        try_conn_as(self.port, self.password.as_deref())
    }

    /// SIGKILLs the sentinel and reaps it.
    pub fn kill(&mut self) {
        kill_and_reap(&mut self.child);
    }

    pub fn log(&self) -> String {
        crate::read_log(&self.dir.join("sentinel.log"))
    }

    /// The master's port this sentinel reports (`SENTINEL
    /// GET-MASTER-ADDR-BY-NAME`).
    fn reported_master(&self) -> Result<u16, String> {
        let mut conn = self.try_conn()?;
        let addr: Vec<String> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .map_err(|e| format!("sentinel {}: {e}", self.port))?;
        addr.get(1)
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("sentinel {} reports master {addr:?}", self.port))
    }

    /// `SENTINEL <what> fairlock-master`: one field map per entry.
    fn entries(&self, what: &str) -> Result<Vec<HashMap<String, String>>, String> {
        let mut conn = self.try_conn()?;
        let entries: Vec<Vec<String>> = redis::cmd("SENTINEL")
            .arg(what)
            .arg(MASTER_NAME)
            .query(&mut conn)
            .map_err(|e| format!("SENTINEL {what} on {}: {e}", self.port))?;
        Ok(entries
            .into_iter()
            .map(|flat| {
                flat.chunks(2)
                    .filter_map(|kv| Some((kv.first()?.clone(), kv.get(1)?.clone())))
                    .collect()
            })
            .collect())
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "---- sentinel log (port {}) ----\n{}",
                self.port,
                self.log()
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A master and its replica, watched by three sentinels (quorum 2) under
/// the name `fairlock-master`.
pub struct SentinelSet {
    sentinels: Vec<Sentinel>,
    /// The first started as master, the second as its replica.
    servers: Vec<RedisServer>,
}

impl SentinelSet {
    /// Starts the master, the replica and three sentinels, and waits until
    /// the replica's link is up and every sentinel knows the master, the
    /// replica (healthy) and the two other sentinels.
    pub fn start() -> SentinelSet {
        Self::start_inner(None)
    }

    /// As [`start`](Self::start), with Sentinels that require `password`
    /// (`requirepass`, and `sentinel sentinel-pass` between them). The
    /// master and the replica keep no password: a test gives their users
    /// passwords of their own with ACL rules (the Sentinels would need
    /// `sentinel auth-pass` for a `requirepass` on them).
    pub fn start_with_password(password: &str) -> SentinelSet {
        Self::start_inner(Some(password))
    }

    fn start_inner(password: Option<&str>) -> SentinelSet {
        let started = Instant::now();
        // The delay is the master's (whoever is master) before it syncs a
        // replica: by default 5 s.
        let fast_sync = [
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ];
        let master = RedisServer::start_with(&fast_sync);
        let master_port = master.port().to_string();
        let mut replica_args = vec!["--replicaof", "127.0.0.1", &master_port];
        replica_args.extend(fast_sync);
        let replica = RedisServer::start_with(&replica_args);
        let mut set = SentinelSet {
            sentinels: Vec::new(),
            servers: vec![master, replica],
        };
        for _ in 0..3 {
            let sentinel = Sentinel::start(set.servers[0].port(), password);
            set.sentinels.push(sentinel);
        }
        if let Err(error) = poll(START_TIMEOUT, Duration::from_millis(50), || {
            set.check_ready()
        }) {
            panic!("the sentinel set was not ready within {START_TIMEOUT:?}: {error}");
        }
        eprintln!(
            "sentinel set: started in {:.0} ms",
            crate::ms(started.elapsed())
        );
        set
    }

    fn check_ready(&self) -> Result<(), String> {
        let master = self.servers[0].port();
        let replica = self.servers[1].port();
        let info = info_replication(&Dial::default(), replica)?;
        let link = field(&info, "master_link_status").unwrap_or("(missing)");
        if link != "up" {
            return Err(format!("replica {replica}: master_link_status:{link}"));
        }
        replica_acknowledges(&Dial::default(), master, replica)?;
        for sentinel in &self.sentinels {
            let s = sentinel.port;
            let reported = sentinel.reported_master()?;
            if reported != master {
                return Err(format!("sentinel {s} reports master {reported}"));
            }
            let replicas = sentinel.entries("REPLICAS")?;
            let healthy = |r: &HashMap<String, String>| {
                r.get("port").map(String::as_str) == Some(replica.to_string().as_str())
                    && r.get("flags").map(String::as_str) == Some("slave")
                    && r.get("master-link-status").map(String::as_str) == Some("ok")
            };
            if replicas.len() != 1 || !healthy(&replicas[0]) {
                return Err(format!("sentinel {s}: replicas {replicas:?}"));
            }
            let others = sentinel.entries("SENTINELS")?;
            if others.len() != 2 {
                return Err(format!(
                    "sentinel {s} knows {} other sentinels",
                    others.len()
                ));
            }
        }
        Ok(())
    }

    /// `fairlock-master`.
    pub fn master_name() -> &'static str {
        MASTER_NAME
    }

    /// `redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/fairlock-master`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// `redis://127.0.0.1:<port>` for each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Sentinel::url).collect()
    }

    pub fn sentinels(&self) -> &[Sentinel] {
        &self.sentinels
    }

    pub fn sentinels_mut(&mut self) -> &mut [Sentinel] {
        &mut self.sentinels
    }

    /// The two data servers (the first started as master).
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// The master's port as most live sentinels report it (ties: the first
    /// in start order).
    pub fn master_port(&self) -> u16 {
        let mut votes: Vec<(u16, usize)> = Vec::new();
        let mut errors = Vec::new();
        for sentinel in self.sentinels.iter().filter(|s| s.child.is_some()) {
            match sentinel.reported_master() {
                Ok(port) => match votes.iter_mut().find(|(p, _)| *p == port) {
                    Some((_, n)) => *n += 1,
                    None => votes.push((port, 1)),
                },
                Err(error) => errors.push(error),
            }
        }
        // max_by_key keeps the last of equal maxima: look from the back.
        votes
            .iter()
            .rev()
            .max_by_key(|(_, n)| *n)
            .map(|(port, _)| *port)
            .unwrap_or_else(|| panic!("no sentinel reports the master: {errors:?}"))
    }

    /// A plain connection to the server (or sentinel) on `port`.
    pub fn conn_to(&self, port: u16) -> redis::Connection {
        let password = self
            .sentinels
            .iter()
            .find(|s| s.port == port)
            .and_then(|s| s.password.as_deref());
        try_conn_as(port, password).unwrap_or_else(|e| panic!("{e}"))
    }

    /// SIGKILLs the server the sentinels report as master (and reaps it);
    /// returns its port and when it was killed.
    pub fn kill_master(&mut self) -> (u16, Instant) {
        let port = self.master_port();
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("the reported master {port} is none of the servers"));
        let at = Instant::now();
        server.kill();
        (port, at)
    }

    /// Stops the master (`SIGSTOP`: it keeps its connections open and
    /// answers nothing, as a hung host does) until the returned guard is
    /// dropped, which continues it; returns its port too.
    pub fn stop_master(&self) -> (u16, StoppedMaster) {
        let port = self.master_port();
        let server = (self.servers.iter())
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("the reported master {port} is none of the servers"));
        let pid = server.pid().expect("the master's pid");
        crate::send_signal(pid, "STOP");
        (port, StoppedMaster(pid))
    }

    /// Waits until every live sentinel reports the other server as master
    /// and that server says `role:master`; returns the time this took from
    /// the call. Panics past `timeout` with the sentinels' logs.
    pub fn wait_for_failover(&self, old_master_port: u16, timeout: Duration) -> Duration {
        let called = Instant::now();
        let new = self
            .servers
            .iter()
            .map(RedisServer::port)
            .find(|&p| p != old_master_port)
            .expect("two servers");
        let result = poll(timeout, Duration::from_millis(20), || {
            for sentinel in self.sentinels.iter().filter(|s| s.child.is_some()) {
                let reported = sentinel.reported_master()?;
                if reported != new {
                    return Err(format!(
                        "sentinel {} reports master {reported}",
                        sentinel.port
                    ));
                }
            }
            let info = info_replication(&Dial::default(), new)?;
            let role = field(&info, "role").unwrap_or("(missing)");
            if role != "master" {
                return Err(format!("server {new} is role:{role}"));
            }
            Ok(())
        });
        if let Err(error) = result {
            let logs: Vec<String> = self
                .sentinels
                .iter()
                .map(|s| format!("---- sentinel log (port {}) ----\n{}", s.port, s.log()))
                .collect();
            panic!(
                "no failover from {old_master_port} to {new} within {timeout:?}: {error}\n{}",
                logs.join("\n")
            );
        }
        called.elapsed()
    }
}

/// A master [`SentinelSet::stop_master`] stopped: continued (`SIGCONT`)
/// when dropped, a test's panic included.
pub struct StoppedMaster(u32);

impl Drop for StoppedMaster {
    fn drop(&mut self) {
        crate::send_signal(self.0, "CONT");
    }
}
