//! One server: an r2d2 pool of `redis::Client` connections.

use std::time::Duration;

use crate::connections::config::Config;
use crate::error::Result;

use super::{open_info, pool_builder, set_timeouts, Timeouts};

/// The connections to one server.
pub(super) struct Single {
    pub(super) pool: r2d2::Pool<redis::Client>,
    /// For the subscriber's and the watchdog's own connections.
    client: redis::Client,
    timeouts: Timeouts,
}

impl Single {
    pub(super) fn open(config: &Config, info: redis::ConnectionInfo) -> Result<Single> {
        let client = open_info(config, info)?;
        let pool = pool_builder(config)
            .connection_customizer(Box::new(CommandTimeouts(config.command_timeout)))
            .build_unchecked(client.clone());
        Ok(Single {
            pool,
            client,
            timeouts: Timeouts::of(config),
        })
    }

    /// A new connection outside the pool, with the command timeouts set.
    pub(super) fn connection(&self) -> Result<redis::Connection> {
        self.timeouts.connect(&self.client)
    }
}

/// Sets the per-call timeouts on every pooled single-server connection.
#[derive(Debug)]
struct CommandTimeouts(Duration);

impl r2d2::CustomizeConnection<redis::Connection, redis::RedisError> for CommandTimeouts {
    fn on_acquire(
        &self,
        conn: &mut redis::Connection,
    ) -> std::result::Result<(), redis::RedisError> {
        set_timeouts(conn, self.0)
    }
}
