//! One server, or the master a set of Sentinels names: an r2d2 pool of
//! [`Steady`] connections to it. Behind Sentinel, each connection goes to
//! the master the Sentinels name when it is opened, and one to a master
//! demoted since is dropped from the pool, so the next ones reach its
//! successor.

use std::sync::Arc;

use parking_lot::Mutex;
use redis::sentinel::SentinelClient;

use crate::connections::config::Config;
use crate::error::{Error, Result, Retry};

use super::steady::Steady;
use super::{sentinel, Pool, Timeouts};

/// Where the connections of [`open`] go.
pub(super) enum Master {
    /// One server's address.
    Fixed(redis::Client),
    /// Whichever server the Sentinels name as master at each connect.
    Named(Mutex<SentinelClient>),
}

/// The pooled connections to one server, or to the master Sentinels name.
pub(super) fn open(config: &Config, master: Master) -> Pool<ServerManager> {
    let manager = ServerManager {
        master: Arc::new(master),
        timeouts: Timeouts::of(config),
    };
    Pool::open(config, manager)
}

/// Opens connections to the server (behind Sentinel, to the master of the
/// moment), with the command timeouts set.
#[derive(Clone)]
pub(crate) struct ServerManager {
    master: Arc<Master>,
    timeouts: Timeouts,
}

impl ServerManager {
    /// A new connection outside the pool, with the command timeouts set.
    pub(super) fn connection(&self) -> Result<Steady> {
        match &*self.master {
            Master::Fixed(client) => self.timeouts.connect(client),
            Master::Named(sentinels) => {
                let client = sentinel::master(sentinels, self.timeouts.connect)?;
                self.timeouts.connect(&client)
            }
        }
    }
}

/// A pooled connection; behind Sentinel, `demoted` once it answered
/// `READONLY` (its master became a replica), so the pool lets it go.
pub(crate) struct ServerConnection {
    pub(super) conn: Steady,
    /// `None` for one server's (a `READONLY` there demotes nothing).
    demoted: Option<bool>,
}

impl ServerConnection {
    /// Marks a connection behind Sentinel demoted if `err` is `READONLY`
    /// (see [`Conn::note`](super::Conn::note)); true when it is.
    pub(super) fn note(&mut self, err: &Error) -> bool {
        let Some(demoted) = &mut self.demoted else {
            return false;
        };
        *demoted |= err.retry() == Retry::DemotedMaster;
        *demoted
    }
}

impl r2d2::ManageConnection for ServerManager {
    type Connection = ServerConnection;
    type Error = Error;

    fn connect(&self) -> Result<ServerConnection> {
        Ok(ServerConnection {
            conn: self.connection()?,
            demoted: matches!(*self.master, Master::Named(_)).then_some(false),
        })
    }

    fn is_valid(&self, conn: &mut ServerConnection) -> Result<()> {
        redis::cmd("PING")
            .query(&mut conn.conn)
            .map_err(Error::from_redis)
    }

    fn has_broken(&self, conn: &mut ServerConnection) -> bool {
        conn.demoted == Some(true) || !redis::ConnectionLike::is_open(&conn.conn)
    }
}
