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
    /// The master's name.
    name: String,
    /// How to connect to the master once a Sentinel names its address: as
    /// to the Sentinels (TLS or not), with the URL's credentials and
    /// database.
    master: redis::ConnectionInfo,
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

/// The Sentinels `sentinels` (their URLs, one at least, as the URL's
/// parse makes sure), asked for the master `node` names, reached as `node`
/// says; the Sentinels with the client's `sentinel_username` and
/// `sentinel_password`, if any, and every TLS connection with its
/// certificates, if any. No connection to a Sentinel or to the master
/// sends `CLIENT SETINFO` (see `quiet`).
pub(super) fn client(
    config: &Config,
    sentinels: Vec<String>,
    node: MasterNode,
) -> Result<Sentinels> {
    let infos = (sentinels.iter().map(|url| super::quiet(url))).collect::<Result<Vec<_>>>()?;
    let settings = redis::RedisConnectionInfo::default().set_db(node.db);
    let master = infos[0].clone().set_redis_settings(settings);
    let master = with_credentials(master, &node.username, &node.password);
    let (username, password) = (&config.sentinel_username, &config.sentinel_password.0);
    let sentinels = (infos.into_iter())
        .map(|info| super::open_info(config, with_credentials(info, username, password)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Sentinels {
        sentinels,
        name: node.name,
        master,
        config: config.clone(),
        first: AtomicUsize::new(0),
        named: Mutex::default(),
        moves: AtomicU64::new(0),
        generation: Arc::default(),
    })
}

/// `info` with the user and the password given, if any.
fn with_credentials(
    info: redis::ConnectionInfo,
    username: &Option<String>,
    password: &Option<String>,
) -> redis::ConnectionInfo {
    let mut settings = info.redis_settings().clone();
    if let Some(username) = username {
        settings = settings.set_username(username);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    info.set_redis_settings(settings)
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
        // The masters asked so far in this lookup.
        let mut asked = Vec::new();
        for at in (first..first + count).map(|i| i % count) {
            let sentinel = &self.sentinels[at];
            let masters = ask(sentinel, timeouts, redis::cmd("SENTINEL").arg("MASTERS"));
            match masters.map(|masters| self.valid_master(masters, timeouts, &mut asked)) {
                Err(err) => {
                    let addr = sentinel.get_connection_info().addr();
                    let err =
                        sentinels_error(err).during(format_args!("asking the sentinel at {addr}"));
                    // One not reached says less than one that refused the client.
                    if !err.is_connection() || last_err.as_ref().is_none_or(Error::is_connection) {
                        last_err = Some(err);
                    }
                }
                Ok(Ok(Some(master))) => {
                    self.first.store(at, Ordering::Relaxed);
                    let addr = master.get_connection_info().addr().to_string();
                    let before = self.named.lock().replace(addr.clone());
                    if before.is_some_and(|was| was != addr) {
                        self.moves.fetch_add(1, Ordering::Relaxed);
                        self.generation.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(master);
                }
                Ok(Ok(None)) => {
                    let unknown = (
                        redis::ErrorKind::MasterNameNotFoundBySentinel,
                        "Master with given name not found in sentinel",
                    );
                    last_err = Some(Error::from_redis(unknown.into()));
                }
                Ok(Err(err)) => master_err = Some(sentinels_error(err)),
            }
        }
        Err(master_err.or(last_err).expect("at least one sentinel"))
    }

    /// The master of `masters` (a Sentinel's `SENTINEL MASTERS`) that has
    /// the name, if it is not flagged down and says it is master (`ROLE`);
    /// `None` if none has the name; an error saying which when it is
    /// flagged down or answers as a replica (a failover under way). A
    /// master already `asked` in this lookup is not asked again (`None`):
    /// its error is the one to report, and one that stalled would cost
    /// each Sentinel naming it a command timeout.
    fn valid_master(
        &self,
        masters: Vec<std::collections::HashMap<String, String>>,
        timeouts: Timeouts,
        asked: &mut Vec<(String, u16)>,
    ) -> Result<Option<redis::Client>> {
        let Some(master) = (masters.iter()).find(|m| m.get("name") == Some(&self.name)) else {
            return Ok(None);
        };
        let field = |name: &str| master.get(name).map_or("", String::as_str);
        let (ip, flags) = (field("ip"), field("flags"));
        let Ok(port) = field("port").parse() else {
            return Ok(None);
        };
        let unusable = |why: String| {
            let message = format!(
                "the master the sentinels name, {ip}:{port}, {why} (a failover may be under way)"
            );
            Err(Error::new(ErrorKind::Connection, message))
        };
        if !flags.contains("master") || flags.contains("s_down") || flags.contains("o_down") {
            return unusable(format!("is flagged down by them ({flags})"));
        }
        if asked.contains(&(ip.to_owned(), port)) {
            return Ok(None);
        }
        asked.push((ip.to_owned(), port));
        let info = super::at_address(self.master.clone(), ip.to_owned(), port);
        let client = super::open_info(&self.config, info)?;
        match ask::<redis::Role>(&client, timeouts, &redis::cmd("ROLE"))? {
            redis::Role::Primary { .. } => Ok(Some(client)),
            _ => unusable("answers as a replica".to_owned()),
        }
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
