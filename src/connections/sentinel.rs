//! Sentinel: the Sentinels asked which server is the master (with their
//! own credentials, and the TLS certificates for them and the master), at
//! each connect (see [`Deployment::Sentinel`](super::Deployment::Sentinel)),
//! each of them and the master they name within the client's timeouts.
//!
//! The redis crate's Sentinel client opens its connections to the
//! Sentinels and to the master with no timeout at all: a Sentinel or a
//! master that accepts and never answers (a stopped process, a stalled
//! link) held the lookup, and every connect waiting for it (the first
//! one, the pool's, the watchdog's and the subscribers'), forever. So the
//! question is asked here, as the redis crate asked it (`SENTINEL
//! MASTERS`, then the named master's `ROLE`), on connections that keep
//! the timeouts.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use redis::{ConnectionAddr, IntoConnectionInfo};

use crate::connections::config::Config;
use crate::connections::topology::MasterNode;
use crate::error::{Error, ErrorKind, Result, SENTINEL_CREDENTIALS_REFUSED};

use super::Timeouts;

/// The Sentinels of a deployment and how to reach the master they name.
pub(super) struct Sentinels {
    /// One client for each Sentinel, in the URL's order, with the
    /// Sentinels' credentials (`sentinel_username`, `sentinel_password`)
    /// and the TLS certificates, if any; none sends `CLIENT SETINFO`.
    sentinels: Vec<redis::Client>,
    /// The master's name, and how to connect to it (TLS, credentials,
    /// database) once a Sentinel names its address.
    node: MasterNode,
    /// For the master's TLS certificates.
    config: Config,
    /// The Sentinel asked first: the last one that named the master, so
    /// that a dead or stalled one ahead of it in the URL is passed over
    /// once, not at every connect.
    first: AtomicUsize,
    /// The master named last, and how many times another was named since
    /// the first; the pool's generation, moved on with it (connections to
    /// the one before are stale).
    named: Mutex<Option<String>>,
    pub(super) moves: AtomicU64,
    pub(super) generation: Arc<AtomicU64>,
}

/// The Sentinels `sentinels` (their URLs), asked for the master `node`
/// names, reached as `node` says; the Sentinels with the client's
/// `sentinel_username` and `sentinel_password`, if any, and every TLS
/// connection with its certificates, if any. No connection to a Sentinel
/// or to the master sends `CLIENT SETINFO` (see `quiet`).
pub(super) fn client(
    config: &Config,
    sentinels: Vec<String>,
    node: MasterNode,
) -> Result<Sentinels> {
    let sentinels = sentinels
        .iter()
        .map(|url| {
            let info = super::quiet(url)?;
            let mut settings = info.redis_settings().clone();
            if let Some(username) = &config.sentinel_username {
                settings = settings.set_username(username);
            }
            if let Some(password) = &config.sentinel_password {
                settings = settings.set_password(password);
            }
            super::open_info(config, info.set_redis_settings(settings))
        })
        .collect::<Result<Vec<_>>>()?;
    if sentinels.is_empty() {
        return Err(Error::invalid_config("a sentinel url names no sentinel"));
    }
    Ok(Sentinels {
        sentinels,
        node,
        config: config.clone(),
        first: AtomicUsize::new(0),
        named: Mutex::default(),
        moves: AtomicU64::new(0),
        generation: Arc::default(),
    })
}

impl Sentinels {
    /// The master the Sentinels name now, to connect to without `CLIENT
    /// SETINFO`: each Sentinel asked in turn (from the last one that
    /// named it) until one names a master that says it is one (`ROLE`),
    /// as the redis crate's Sentinel client asks. Each connection, to a
    /// Sentinel or to the master, is opened within the connect timeout
    /// and waits for each reply no longer than the command timeout, with
    /// no signal cutting them short (`steady`): a Sentinel that does not
    /// answer in time is passed over for the next one.
    pub(super) fn master(&self, timeouts: Timeouts) -> Result<redis::Client> {
        let count = self.sentinels.len();
        let first = self.first.load(Ordering::Relaxed);
        // An error met on a master a Sentinel named is the one to report,
        // rather than another Sentinel's failure or not knowing the name.
        let (mut master_err, mut last_err) = (None, None);
        for at in (first..first + count).map(|i| i % count) {
            let masters_command = redis::cmd("SENTINEL").arg("MASTERS").clone();
            let masters = match ask(&self.sentinels[at], timeouts, &masters_command) {
                Ok(masters) => masters,
                Err(err) => {
                    last_err = Some(sentinels_error(err));
                    continue;
                }
            };
            match self.valid_master(masters, timeouts) {
                Ok(Some(master)) => {
                    self.first.store(at, Ordering::Relaxed);
                    let addr = master.get_connection_info().addr().to_string();
                    let before = self.named.lock().replace(addr.clone());
                    if before.is_some_and(|was| was != addr) {
                        self.moves.fetch_add(1, Ordering::Relaxed);
                        self.generation.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(master);
                }
                Ok(None) => {
                    let unknown = (
                        redis::ErrorKind::MasterNameNotFoundBySentinel,
                        "Master with given name not found in sentinel",
                    );
                    last_err = Some(Error::from_redis(unknown.into()));
                }
                Err(err) => master_err = Some(sentinels_error(err)),
            }
        }
        Err(master_err.or(last_err).expect("at least one sentinel"))
    }

    /// The first master of `masters` (a Sentinel's `SENTINEL MASTERS`)
    /// that has the name, is not flagged down, and says it is master
    /// (`ROLE`); `None` if none does.
    fn valid_master(
        &self,
        masters: Vec<std::collections::HashMap<String, String>>,
        timeouts: Timeouts,
    ) -> Result<Option<redis::Client>> {
        for master in masters {
            let field = |name: &str| master.get(name).map(String::as_str);
            let flags = field("flags").unwrap_or_default();
            let named = field("name") == Some(self.node.name.as_str())
                && flags.contains("master")
                && !flags.contains("s_down")
                && !flags.contains("o_down");
            let (Some(ip), Some(Ok(port))) = (field("ip"), field("port").map(str::parse)) else {
                continue;
            };
            if !named {
                continue;
            }
            let client = super::open_info(&self.config, self.master_info(ip.to_owned(), port))?;
            let role = ask::<redis::Role>(&client, timeouts, &redis::cmd("ROLE"));
            if let redis::Role::Primary { .. } = role? {
                return Ok(Some(client));
            }
        }
        Ok(None)
    }

    /// How to connect to the master at `host`:`port`, as the URL says
    /// (TLS, credentials, database), without `CLIENT SETINFO`.
    fn master_info(&self, host: String, port: u16) -> redis::ConnectionInfo {
        let node = &self.node;
        let addr = match node.tls {
            true => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            },
            false => ConnectionAddr::Tcp(host, port),
        };
        let mut settings = redis::RedisConnectionInfo::default()
            .set_db(node.db)
            .set_skip_set_lib_name();
        if let Some(username) = &node.username {
            settings = settings.set_username(username);
        }
        if let Some(password) = &node.password {
            settings = settings.set_password(password);
        }
        let info = addr
            .into_connection_info()
            .expect("an address is connection info");
        info.set_redis_settings(settings)
    }
}

/// A refusal of the lookup's credentials named as such: the Sentinels',
/// or the master's.
fn sentinels_error(err: Error) -> Error {
    match err.kind() {
        ErrorKind::Auth => err.reworded(SENTINEL_CREDENTIALS_REFUSED),
        _ => err,
    }
}

/// `command`'s reply from the server `client` reaches, on a connection of
/// its own opened within the connect timeout, the reply waited for no
/// longer than the command timeout.
fn ask<T: redis::FromRedisValue>(
    client: &redis::Client,
    timeouts: Timeouts,
    command: &redis::Cmd,
) -> Result<T> {
    let mut conn = timeouts.connect(client)?;
    command.query(&mut conn).map_err(Error::from_redis)
}
