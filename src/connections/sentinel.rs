//! Sentinel: an r2d2 pool of connections to the master the Sentinels name
//! when each connection is opened; connections to a dead or demoted master
//! are dropped from the pool, so the next ones reach its successor.

use std::sync::Arc;

use parking_lot::Mutex;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::ConnectionLike;

use crate::connections::config::Config;
use crate::connections::topology::MasterNode;
use crate::error::{Error, ErrorKind, Result, Retry, SENTINEL_CREDENTIALS_REFUSED};

use super::steady::{self, Steady};
use super::{Pool, Timeouts};

/// The connections to the master a set of Sentinels names.
pub(super) struct Sentinel {
    pub(super) pool: Pool<SentinelManager>,
    /// For the subscriber's and the watchdog's own connections.
    pub(super) manager: SentinelManager,
}

impl Sentinel {
    /// Asks `sentinels` for `master`, reached as `node` says; the
    /// Sentinels with the client's `sentinel_username` and
    /// `sentinel_password`, if any, and every TLS connection with its
    /// certificates, if any.
    pub(super) fn open(
        config: &Config,
        sentinels: Vec<String>,
        master: String,
        node: MasterNode,
    ) -> Result<Sentinel> {
        #[cfg(feature = "tls")]
        let client = match config.tls_certificates()? {
            Some(certificates) => {
                with_certificates(config, &sentinels, &master, node, certificates)?
            }
            None => quiet_client(config, &sentinels, master, node)?,
        };
        #[cfg(not(feature = "tls"))]
        let client = quiet_client(config, &sentinels, master, node)?;
        let manager = SentinelManager {
            client: Arc::new(Mutex::new(client)),
            timeouts: Timeouts::of(config),
        };
        let pool = Pool::open(config, manager.clone());
        Ok(Sentinel { pool, manager })
    }
}

fn invalid_sentinel_url(err: redis::RedisError) -> Error {
    Error::with_source(ErrorKind::InvalidConfig, "invalid sentinel url", err)
}

/// The sentinel client when no TLS certificates are given: no connection
/// it opens, to a Sentinel or to the master, sends `CLIENT SETINFO` (see
/// `quiet`).
fn quiet_client(
    config: &Config,
    sentinels: &[String],
    master: String,
    node: MasterNode,
) -> Result<SentinelClient> {
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
            Ok(info.set_redis_settings(settings))
        })
        .collect::<Result<Vec<_>>>()?;
    SentinelClient::build(
        sentinels,
        master,
        Some(master_node(node)),
        SentinelServerType::Master,
    )
    .map_err(invalid_sentinel_url)
}

/// The sentinel client when TLS certificates are given (a private root, a
/// client certificate): the same certificates for the Sentinels and the
/// master. The `redis` crate takes certificates for the master only
/// through its `SentinelClientBuilder`, whose connections send `CLIENT
/// SETINFO`; the pool's connections to the master are opened again
/// without it (see [`SentinelManager::connect_master`]), but the one that
/// checks the master's `ROLE` at each lookup, and those to the Sentinels,
/// still send it (its answer is ignored; an ACL user without it sees a
/// denial in `ACL LOG`).
#[cfg(feature = "tls")]
fn with_certificates(
    config: &Config,
    sentinels: &[String],
    master: &str,
    node: MasterNode,
    certificates: redis::TlsCertificates,
) -> Result<SentinelClient> {
    use redis::IntoConnectionInfo;
    let addresses = sentinels
        .iter()
        .map(|url| {
            let info = url.as_str().into_connection_info();
            info.map(|info| info.addr().clone())
                .map_err(invalid_sentinel_url)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut builder =
        redis::sentinel::SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)
            .map_err(invalid_sentinel_url)?
            .set_client_to_sentinel_certificates(certificates.clone())
            .set_client_to_redis_certificates(certificates)
            .set_client_to_redis_db(node.db);
    if node.tls {
        builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
    }
    if let Some(username) = node.username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = node.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(username) = &config.sentinel_username {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = &config.sentinel_password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    builder.build().map_err(invalid_sentinel_url)
}

/// How to connect to the master (see [`MasterNode`]), without `CLIENT
/// SETINFO` (see `quiet`).
fn master_node(node: MasterNode) -> SentinelNodeConnectionInfo {
    let mut info = redis::RedisConnectionInfo::default()
        .set_db(node.db)
        .set_skip_set_lib_name();
    if let Some(username) = node.username {
        info = info.set_username(username);
    }
    if let Some(password) = node.password {
        info = info.set_password(password);
    }
    let info = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
    if node.tls {
        info.set_tls_mode(redis::TlsMode::Secure)
    } else {
        info
    }
}

/// Opens connections to whichever server the Sentinels name as master now.
#[derive(Clone)]
pub(crate) struct SentinelManager {
    client: Arc<Mutex<redis::sentinel::SentinelClient>>,
    timeouts: Timeouts,
}

impl SentinelManager {
    /// A new connection outside the pool to the master the Sentinels name
    /// now, with the command timeouts set.
    pub(super) fn connect_master(&self) -> Result<Steady> {
        // Ask the Sentinels for the master's address (no signal cutting
        // their answers short: `steady`), then connect to it, without
        // `CLIENT SETINFO` whichever way the client was built.
        let lookup = || self.client.lock().get_client();
        let master = steady::again(Some(self.timeouts.connect), lookup)
            .map_err(Error::from_redis)
            .map_err(|err| match err.kind() {
                ErrorKind::Auth => err.reworded(SENTINEL_CREDENTIALS_REFUSED),
                _ => err,
            })?;
        let info = super::quiet_info(master.get_connection_info().clone());
        self.timeouts
            .connect(&redis::Client::open(info).map_err(Error::from_redis)?)
    }
}

/// A connection to the master of the moment; `demoted` once it answered
/// `READONLY` (it became a replica), so the pool lets it go.
pub(crate) struct SentinelConnection {
    pub(super) conn: Steady,
    demoted: bool,
}

impl SentinelConnection {
    /// Marks the connection demoted if `err` is `READONLY` (see
    /// [`Conn::note`](super::Conn::note)); true when it is.
    pub(super) fn note(&mut self, err: &Error) -> bool {
        self.demoted |= err.retry() == Retry::DemotedMaster;
        self.demoted
    }
}

impl r2d2::ManageConnection for SentinelManager {
    type Connection = SentinelConnection;
    type Error = Error;

    fn connect(&self) -> Result<SentinelConnection> {
        Ok(SentinelConnection {
            conn: self.connect_master()?,
            demoted: false,
        })
    }

    fn is_valid(&self, conn: &mut SentinelConnection) -> Result<()> {
        redis::cmd("PING")
            .query(&mut conn.conn)
            .map_err(Error::from_redis)
    }

    fn has_broken(&self, conn: &mut SentinelConnection) -> bool {
        conn.demoted || !conn.conn.is_open()
    }
}
