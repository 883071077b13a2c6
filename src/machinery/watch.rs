//! An election's watch as the engine keeps it: a connection of its own
//! subscribed to the election's channel, opened again when it breaks,
//! which tells its reader when to read the election again.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::machinery::engine::Engine;
use crate::machinery::shared::Shared;
use crate::machinery::subscriber;
use crate::machinery::target::Target;
use crate::protocol::election_channel;

/// A subscription to one election's channel.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: String,
    /// `None` after it broke, until opened again.
    conn: Option<redis::Connection>,
}

impl Engine {
    /// Subscribes to the channel of the election `target` (on a cluster,
    /// on a seed node: every node hears every message; behind Sentinel, on
    /// the master), on a connection of its own.
    pub(crate) fn watch(&self, target: &Target) -> Result<Subscription> {
        let channel = election_channel(&self.config().key_prefix, target.name());
        let conn = self.shared.caller.subscription(&channel)?;
        Ok(Subscription {
            shared: Arc::clone(&self.shared),
            channel,
            conn: Some(conn),
        })
    }
}

impl Subscription {
    /// Waits up to `wait` for a message, opening the subscription again
    /// first if it broke. True when the election is to be read again: a
    /// message came, or messages may have been lost (the subscription was
    /// opened again, or broke).
    pub(crate) fn receive(&mut self, wait: Duration) -> Result<bool> {
        let (conn, reopened) = match &mut self.conn {
            Some(conn) => (conn, false),
            None => {
                let conn = self.shared.caller.subscription(&self.channel)?;
                (self.conn.insert(conn), true)
            }
        };
        conn.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(Error::from_redis)?;
        // Read as a `PubSub` whose drop is skipped: dropping one
        // unsubscribes, and this connection stays subscribed for the next
        // call. (It holds nothing else to drop: its message cache stays
        // empty, as the subscription was made without it.)
        let mut pubsub = ManuallyDrop::new(conn.as_pubsub());
        match pubsub.get_message() {
            Ok(_) => Ok(true),
            Err(err) if err.is_timeout() || subscriber::interrupted(&err) => Ok(reopened),
            Err(err) => {
                log::info!(
                    "fairlock: the watch of {:?} lost its subscription: {err}",
                    self.channel
                );
                self.conn = None;
                Ok(true)
            }
        }
    }
}
