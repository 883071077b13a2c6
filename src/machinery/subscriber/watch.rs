//! An election's watch as the core keeps it: a connection of its own
//! subscribed to the election's channel, opened again when it breaks,
//! which tells its reader when to read the election again.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::machinery::shared::Shared;
use crate::machinery::subscriber;
use crate::protocol::{Push, Route};

/// A subscription to one election's channel.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: String,
    route: Route,
    /// `None` after it broke, until opened again.
    conn: Option<redis::Connection>,
}

impl Subscription {
    /// Subscribes to `channel` over `route` on a connection of its own.
    pub(crate) fn open(shared: &Arc<Shared>, route: Route, channel: String) -> Result<Self> {
        let conn = shared.caller.subscription(route, &channel, None)?;
        Ok(Subscription {
            shared: Arc::clone(shared),
            channel,
            route,
            conn: Some(conn),
        })
    }

    /// Waits up to `wait` for a message, opening the subscription again
    /// first if it broke (by `by`, the caller's deadline). True when the
    /// election is to be read again: a message came, or messages may have
    /// been lost (the subscription was opened again, or broke).
    pub(crate) fn receive(&mut self, wait: Duration, by: Option<Instant>) -> Result<bool> {
        let (conn, reopened) = match &mut self.conn {
            Some(conn) => (conn, false),
            None => {
                let conn = (self.shared.caller).subscription(self.route, &self.channel, by)?;
                (self.conn.insert(conn), true)
            }
        };
        conn.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(Error::from_redis)?;
        // A classic channel's connection (RESP2) is read as a `PubSub`, whose
        // drop is skipped (dropping one unsubscribes); a read of its own that
        // timed out would have the redis crate skip the next message. A
        // shard channel's (RESP3) is read as it comes: its `sunsubscribe`
        // says the slot moved.
        let read = match self.route {
            Route::Classic => (ManuallyDrop::new(conn.as_pubsub()).get_message())
                .map(|msg| Push::Message(msg.get_payload_bytes().to_vec())),
            Route::Sharded => conn.recv_response().map(Push::parse),
        };
        match subscriber::read(read) {
            Ok(Some(Push::Message(_))) => return Ok(true),
            // A shard channel's slot moved: subscribe at its new master.
            Ok(Some(Push::Unsubscribed(_))) => {}
            Ok(_) => return Ok(reopened),
            Err(err) => {
                let channel = &self.channel;
                log::info!("fairlock: the watch of {channel:?} lost its subscription: {err}");
            }
        }
        self.conn = None;
        Ok(true)
    }
}
