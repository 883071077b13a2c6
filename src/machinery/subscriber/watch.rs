//! An election's watch as the core keeps it: a connection of its own
//! subscribed to the election's channel, opened again when it breaks,
//! which tells its reader when to read the election again.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connections::{self, Listen};
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
    /// When it was opened or last read something.
    heard: Instant,
}

impl Subscription {
    /// Subscribes to `channel` over `route` on a connection of its own.
    pub(crate) fn open(shared: &Arc<Shared>, route: Route, channel: String) -> Result<Self> {
        shared.caller.refuse_copy()?;
        let mut watch = Subscription {
            shared: Arc::clone(shared),
            channel,
            route,
            conn: None,
            heard: Instant::now(),
        };
        watch.conn = Some(watch.subscribe(None)?);
        watch.heard = Instant::now();
        Ok(watch)
    }

    /// A new connection of its own subscribed to its channel as its route
    /// says: a classic one on a seed node of a cluster (every node hears
    /// every message), on the master behind Sentinel; a shard channel at
    /// the master of its slot, as the cluster's slot map says now (read
    /// again and kept, the one slot map the client has). Opened and
    /// subscribed by `by` if given.
    fn subscribe(&self, by: Option<Instant>) -> Result<redis::Connection> {
        let at = match self.route {
            Route::Classic => Listen::Main,
            Route::Sharded => {
                let map = self.shared.refresh_slot_map(None, by)?.unwrap_or_default();
                let slot = crate::protocol::keys::hash_slot(&self.channel);
                let master = map.master_of(slot).ok_or_else(|| {
                    let message = format!("no master serves slot {slot} (try again)");
                    Error::new(crate::ErrorKind::Connection, message)
                })?;
                Listen::Shards(master.clone())
            }
        };
        (self.shared.caller.backend).subscription(&at, &self.channel, by)
    }

    /// Waits up to `wait` for a message, opening the subscription again
    /// first if it broke (by `by`, the caller's deadline). True when the
    /// election is to be read again: a message came, or messages may have
    /// been lost (the subscription was opened again, or broke). Quiet for
    /// a watchdog period, it has the server confirm the subscription (a
    /// subscription again, as the wake channel's does), within the command
    /// timeout and `by`: one whose link died without a word (a NAT that
    /// forgot it) is opened again.
    pub(crate) fn receive(&mut self, wait: Duration, by: Option<Instant>) -> Result<bool> {
        self.shared.caller.refuse_copy()?;
        let (conn, reopened) = match &mut self.conn {
            Some(conn) => (conn, false),
            None => {
                let conn = self.subscribe(by)?;
                self.heard = Instant::now();
                (self.conn.insert(conn), true)
            }
        };
        let (config, now) = (self.shared.config(), Instant::now());
        // Until the probe is due; once due, the probe's answer is waited for.
        let quiet = (self.heard + config.watchdog_period()).saturating_duration_since(now);
        let wait = match quiet.is_zero() {
            true => by.map_or(Duration::MAX, |by| by.saturating_duration_since(now)),
            false => wait.min(quiet),
        };
        let wait = wait.clamp(Duration::from_millis(1), config.command_timeout);
        (conn.set_read_timeout(Some(wait))).map_err(Error::from_redis)?;
        if quiet.is_zero() {
            // The server confirms the subscription (as it opened it), or the
            // connection is given up and opened again.
            let channel = &self.channel;
            if let Err(err) = connections::subscribe_on(conn, self.route, channel, Some(wait)) {
                log::info!("fairlock: the watch of {channel:?} was not confirmed: {err}");
                self.conn = None;
                return Ok(true);
            }
            self.heard = Instant::now();
            return Ok(reopened);
        }
        // A classic channel's connection (RESP2) is read as a `PubSub`, whose
        // drop is skipped (dropping one unsubscribes); a read of its own that
        // timed out would have the redis crate skip the next message. A
        // shard channel's (RESP3) is read as it comes: its `sunsubscribe`
        // says the slot moved.
        let read = subscriber::read(match self.route {
            Route::Classic => (ManuallyDrop::new(conn.as_pubsub()).get_message())
                .map(|msg| Push::Message(msg.get_payload_bytes().to_vec())),
            Route::Sharded => conn.recv_response().map(Push::parse),
        });
        if let Ok(Some(_)) = read {
            self.heard = Instant::now();
        }
        match read {
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
