//! One server, or the master a set of Sentinels names: [`Steady`]
//! connections to it, pooled ([`pool`](super::pool)) or not. Behind
//! Sentinel, each connection goes to the master the Sentinels name when it
//! is opened, and one to a master demoted since is dropped from the pool,
//! so the next ones reach its successor.

use std::sync::Arc;

use parking_lot::Mutex;
use redis::sentinel::SentinelClient;

use crate::connections::config::Config;
use crate::error::Result;

use super::steady::Steady;
use super::{sentinel, Timeouts};

/// Where a [`ServerManager`]'s connections go.
pub(super) enum Master {
    /// One server's address.
    Fixed(redis::Client),
    /// Whichever server the Sentinels name as master at each connect.
    Named(Mutex<SentinelClient>),
}

/// Opens connections to the server (behind Sentinel, to the master of the
/// moment), with the command timeouts set.
#[derive(Clone)]
pub(crate) struct ServerManager {
    master: Arc<Master>,
    timeouts: Timeouts,
}

impl ServerManager {
    pub(super) fn new(config: &Config, master: Master) -> ServerManager {
        ServerManager {
            master: Arc::new(master),
            timeouts: Timeouts::of(config),
        }
    }

    /// True behind Sentinel, where a connection can meet a demoted master.
    pub(super) fn behind_sentinel(&self) -> bool {
        matches!(*self.master, Master::Named(_))
    }

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
