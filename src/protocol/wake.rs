//! The messages the scripts publish on a client's wake channel
//! (`<prefix>:wake:<client id>`: a grant, a place at the head of a queue,
//! a revocation, a force release), the one a client sends itself, and the
//! pub/sub commands a client sends: its subscriptions (the wake channel,
//! an election's) and that stop message.

use redis::Value;

use crate::error::{Error, Result};
use crate::protocol::unexpected;

/// One wake message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeMessage {
    /// `G <wait id> <token> <ttl ms>`: the lock was handed to that call.
    Granted {
        /// The call granted.
        wait_id: u64,
        /// Its fencing token.
        token: u64,
        /// Its lease as set, in ms.
        ttl_ms: u64,
    },
    /// `H <wait id> <pttl ms>`: that call heads the queue; the lock's lease
    /// runs out in `pttl_ms` (negative: no lease to wait for).
    Head {
        /// The call at the head.
        wait_id: u64,
        /// The lock's lease left, in ms.
        pttl_ms: i64,
    },
    /// `R <token> <lock key>`: this client's holds of that lock whose
    /// tokens are up to `up_to` are asked to let go (`revoke.lua`).
    Revoke {
        /// The largest token asked.
        up_to: u64,
        /// The lock's first key ([`LockKeys::lock`](crate::protocol::LockKeys::lock)).
        lock_key: String,
    },
    /// `L <token> <lock key>`: this client's holds of that lock whose
    /// tokens are up to `up_to` were freed (`force_release.lua`).
    Freed {
        /// The largest token freed.
        up_to: u64,
        /// The lock's first key, as in [`Revoke`](Self::Revoke).
        lock_key: String,
    },
    /// `S`: the client is stopping (sent by the client to its subscriber).
    Stop,
}

impl WakeMessage {
    /// The stop message's payload.
    pub const STOP: &'static str = "S";

    /// The `PUBLISH` of the stop message on a client's own wake `channel`,
    /// which gets its subscriber out of its blocking read at once.
    pub fn stop_command(channel: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(channel).arg(WakeMessage::STOP);
        cmd
    }

    /// Parses a payload; `None` for anything else.
    pub fn parse(payload: &[u8]) -> Option<WakeMessage> {
        let text = std::str::from_utf8(payload).ok()?;
        if let Some((what, news)) = text
            .split_once(' ')
            .filter(|(what, _)| ["R", "L"].contains(what))
        {
            // The lock key, last, may hold any character of a name.
            let (up_to, lock_key) = news.split_once(' ').filter(|(_, key)| !key.is_empty())?;
            let (up_to, lock_key) = (up_to.parse().ok()?, lock_key.to_owned());
            return Some(if what == "R" {
                WakeMessage::Revoke { up_to, lock_key }
            } else {
                WakeMessage::Freed { up_to, lock_key }
            });
        }
        let mut fields = text.split(' ');
        let kind = fields.next()?;
        let numbers: Vec<i64> = fields.map(|n| n.parse().ok()).collect::<Option<_>>()?;
        match (kind, numbers.as_slice()) {
            ("G", &[wait_id, token, ttl_ms]) => Some(WakeMessage::Granted {
                wait_id: u64::try_from(wait_id).ok()?,
                token: u64::try_from(token).ok()?,
                ttl_ms: u64::try_from(ttl_ms).unwrap_or(0),
            }),
            ("H", &[wait_id, pttl_ms]) => Some(WakeMessage::Head {
                wait_id: u64::try_from(wait_id).ok()?,
                pttl_ms,
            }),
            ("S", []) => Some(WakeMessage::Stop),
            _ => None,
        }
    }
}

/// The `SUBSCRIBE` to `channel` (a client's wake channel, an election's).
pub fn subscribe_command(channel: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("SUBSCRIBE");
    cmd.arg(channel);
    cmd
}

/// Checks the server's answer to a `SUBSCRIBE`, which the redis crate's
/// `PubSub::subscribe` drops: a refused subscription (an ACL user without
/// SUBSCRIBE or without the channel) would otherwise pass for a live one,
/// and nothing would try again until the connection broke.
pub fn check_subscribed(answer: Value) -> Result<()> {
    match &answer {
        Value::Array(items) if items.first() == Some(&Value::BulkString(b"subscribe".to_vec())) => {
            Ok(())
        }
        Value::ServerError(err) => Err(Error::from_server(err.clone())),
        _ => Err(unexpected(&answer)),
    }
}
