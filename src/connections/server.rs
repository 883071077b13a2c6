//! One server, or the master a set of Sentinels names: [`Steady`]
//! connections to it, pooled ([`pool`](super::pool)) or not. Behind
//! Sentinel, each connection goes to the master the Sentinels name when it
//! is opened, and one to a master demoted since is dropped from the pool,
//! so the next ones reach its successor.

use parking_lot::Mutex;
use redis::sentinel::SentinelClient;

use crate::error::Result;

use super::steady::Steady;
use super::{sentinel, Timeouts};

/// Where the connections to one server go.
pub(super) enum Master {
    /// One server's address.
    Fixed(redis::Client),
    /// Whichever server the Sentinels name as master at each connect.
    Named(Mutex<SentinelClient>),
}

impl Master {
    /// A new connection to the server (behind Sentinel, to the master of
    /// the moment) within `timeouts`, with the command timeouts set.
    pub(super) fn connect(&self, timeouts: Timeouts) -> Result<Steady> {
        match self {
            Master::Fixed(client) => timeouts.connect(client),
            Master::Named(sentinels) => {
                timeouts.connect(&sentinel::master(sentinels, timeouts.connect)?)
            }
        }
    }
}
