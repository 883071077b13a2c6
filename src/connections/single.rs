//! One server: an r2d2 pool of [`Steady`] connections to it.

use crate::connections::config::Config;
use crate::error::{Error, Result};

use super::steady::Steady;
use super::{open_info, Pool, Timeouts};

/// The connections to one server.
pub(super) struct Single {
    pub(super) pool: Pool<SingleManager>,
    /// For the subscriber's and the watchdog's own connections.
    manager: SingleManager,
}

impl Single {
    pub(super) fn open(config: &Config, info: redis::ConnectionInfo) -> Result<Single> {
        let manager = SingleManager {
            client: open_info(config, info)?,
            timeouts: Timeouts::of(config),
        };
        let pool = Pool::open(config, manager.clone());
        Ok(Single { pool, manager })
    }

    /// A new connection outside the pool, with the command timeouts set.
    pub(super) fn connection(&self) -> Result<Steady> {
        self.manager.timeouts.connect(&self.manager.client)
    }
}

/// Opens the pool's connections to the server, with the command timeouts
/// set.
#[derive(Clone)]
pub(crate) struct SingleManager {
    client: redis::Client,
    timeouts: Timeouts,
}

impl r2d2::ManageConnection for SingleManager {
    type Connection = Steady;
    type Error = Error;

    fn connect(&self) -> Result<Steady> {
        self.timeouts.connect(&self.client)
    }

    fn is_valid(&self, conn: &mut Steady) -> Result<()> {
        redis::cmd("PING").query(conn).map_err(Error::from_redis)
    }

    fn has_broken(&self, conn: &mut Steady) -> bool {
        !redis::ConnectionLike::is_open(conn)
    }
}
