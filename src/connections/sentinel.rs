//! Sentinel: an r2d2 pool of connections to the master the Sentinels name
//! when each connection is opened; connections to a dead or demoted master
//! are dropped from the pool, so the next ones reach its successor.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::sentinel::SentinelNodeConnectionInfo;
use redis::ConnectionLike;

use crate::connections::config::Config;
use crate::error::{Error, ErrorKind, Result, Retry};

use super::{pool_builder, Timeouts};

/// The connections to the master a set of Sentinels names.
pub(super) struct Sentinel {
    pool: r2d2::Pool<SentinelManager>,
    /// For the subscriber's and the watchdog's own connections.
    manager: SentinelManager,
}

impl Sentinel {
    /// Asks `sentinels` for `master`, reached as `node` says (see
    /// [`master_node`]).
    pub(super) fn open(
        config: &Config,
        sentinels: Vec<String>,
        master: String,
        node: SentinelNodeConnectionInfo,
    ) -> Result<Sentinel> {
        // Sentinels get no `CLIENT SETINFO` either (see `quiet`).
        let sentinels = sentinels
            .iter()
            .map(|url| super::quiet(url))
            .collect::<Result<Vec<_>>>()?;
        let client = redis::sentinel::SentinelClient::build(
            sentinels,
            master,
            Some(node),
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(|err| Error::with_source(ErrorKind::InvalidConfig, "invalid sentinel url", err))?;
        let manager = SentinelManager {
            client: Arc::new(Mutex::new(client)),
            timeouts: Timeouts::of(config),
        };
        let pool = pool_builder(config).build(manager.clone())?;
        Ok(Sentinel { pool, manager })
    }

    /// A pooled connection within `timeout`.
    pub(super) fn checkout(
        &self,
        timeout: Duration,
    ) -> Result<r2d2::PooledConnection<SentinelManager>> {
        Ok(self.pool.get_timeout(timeout)?)
    }

    /// A new connection outside the pool to the master the Sentinels name
    /// now, with the command timeouts set.
    pub(super) fn connect_master(&self) -> Result<redis::Connection> {
        self.manager.connect_master()
    }
}

/// How to connect to the master: with TLS if `tls`, the credentials and
/// the database `db`.
pub(super) fn master_node(
    tls: bool,
    username: Option<String>,
    password: Option<String>,
    db: i64,
) -> SentinelNodeConnectionInfo {
    // No `CLIENT SETINFO` at connect (see `quiet`).
    let mut node = redis::RedisConnectionInfo::default()
        .set_db(db)
        .set_skip_set_lib_name();
    if let Some(username) = username {
        node = node.set_username(username);
    }
    if let Some(password) = password {
        node = node.set_password(password);
    }
    let info = SentinelNodeConnectionInfo::default().set_redis_connection_info(node);
    if tls {
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
    fn connect_master(&self) -> Result<redis::Connection> {
        // Ask the Sentinels for the master's address, then connect to it.
        let master = self.client.lock().get_client()?;
        self.timeouts.connect(&master)
    }
}

/// A connection to the master of the moment; `demoted` once it answered
/// `READONLY` (it became a replica), so the pool lets it go.
pub(crate) struct SentinelConnection {
    conn: redis::Connection,
    demoted: bool,
}

impl SentinelConnection {
    pub(super) fn get(&mut self) -> &mut dyn ConnectionLike {
        &mut self.conn
    }

    pub(super) fn set_timeouts(&self, timeout: Duration) -> Result<()> {
        Ok(super::set_timeouts(&self.conn, timeout)?)
    }

    /// Marks the connection demoted if `err` is `READONLY` (see
    /// [`Conn::note`](super::Conn::note)); true when it is.
    pub(super) fn note(&mut self, err: &Error) -> bool {
        if err.retry() == Retry::DemotedMaster {
            self.demoted = true;
        }
        self.demoted
    }
}

impl r2d2::ManageConnection for SentinelManager {
    type Connection = SentinelConnection;
    type Error = Error;

    fn connect(&self) -> Result<SentinelConnection> {
        Ok(SentinelConnection {
            conn: self.connect_master().map_err(Error::spelled_out)?,
            demoted: false,
        })
    }

    fn is_valid(&self, conn: &mut SentinelConnection) -> Result<()> {
        redis::cmd("PING").query::<()>(&mut conn.conn)?;
        Ok(())
    }

    fn has_broken(&self, conn: &mut SentinelConnection) -> bool {
        conn.demoted || !conn.conn.is_open()
    }
}
