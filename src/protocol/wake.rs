//! The messages the scripts publish on a client's wake channel
//! (`<prefix>:wake:<client id>`: a grant, a place at the head of a queue,
//! a revocation, a force release), the one a client sends itself, the
//! pub/sub commands a client sends: its subscriptions (the wake channel,
//! an election's) and that stop message, what a subscribed connection
//! reads ([`Push`]), and how the messages travel ([`Route`]: classic or
//! sharded pub/sub, and the channels each uses).

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::Value;

use crate::error::{Error, Result};
use crate::protocol::keys::hash_slot;
use crate::protocol::{unexpected, LockKeys};

/// How the scripts' messages reach a client. `Classic`: `PUBLISH` on
/// `<prefix>:wake:<client id>` (one server, Sentinel, Redis 6.2), which a
/// cluster copies to every node. `Sharded` (a Redis Cluster of 7.0 or
/// later, Valkey): `SPUBLISH`, which stays on the shard, on a channel in
/// the lock's own slot, `<prefix>:wake:{<slot tag>}:<client id>` (Redis
/// refuses a Function a shard channel of another slot, as it refuses a
/// key), so a client listens on each slot it uses, at its master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `PUBLISH` and `SUBSCRIBE`.
    Classic,
    /// `SPUBLISH` and `SSUBSCRIBE`, one channel per slot.
    Sharded,
}

impl Route {
    /// `ARGV[1]` of a call on a lock in `slot`: the wake channel prefix
    /// `prefix` (`<key prefix>:wake:`), sharded followed by the slot's hash
    /// tag, `{<tag>}:`, which has the scripts `SPUBLISH` (lua/lib/messages.lua:
    /// `PUBLISH`).
    pub fn wake_prefix(self, prefix: &str, slot: u16) -> Cow<'_, str> {
        match self {
            Route::Classic => Cow::Borrowed(prefix),
            Route::Sharded => Cow::Owned(format!("{prefix}{{{}}}:", SLOT_TAGS[usize::from(slot)])),
        }
    }

    /// The channel of client `client_id` for the locks of `slot`.
    pub fn wake_channel(self, prefix: &str, slot: u16, client_id: &str) -> String {
        format!("{}{client_id}", self.wake_prefix(prefix, slot))
    }

    /// The channel of the election of `keys` under the key prefix
    /// `prefix`: sharded, its lock key with `:elect:` made `:election:`
    /// (in the lock's slot); classic, [`election_channel`](crate::protocol::election_channel).
    pub fn election_channel(self, prefix: &str, keys: &LockKeys) -> String {
        match self {
            Route::Classic => crate::protocol::election_channel(prefix, keys.name()),
            Route::Sharded => keys.lock().replacen("}:elect:", "}:election:", 1),
        }
    }

    /// The subscription to `channel`.
    pub fn subscribe_command(self, channel: &str) -> redis::Cmd {
        let command = match self {
            Route::Classic => "SUBSCRIBE",
            Route::Sharded => "SSUBSCRIBE",
        };
        redis::cmd(command).arg(channel).take()
    }

    /// The publication of an empty message (no wake message: a subscriber
    /// ignores it) on `channel`, as the scripts publish there.
    pub fn publish_command(self, channel: &str) -> redis::Cmd {
        let command = match self {
            Route::Classic => "PUBLISH",
            Route::Sharded => "SPUBLISH",
        };
        redis::cmd(command).arg(channel).arg("").take()
    }
}

/// A hash tag of each slot (the shortest decimal number that hashes to
/// it), found once per process: about 170 000 CRC16s of a few bytes.
static SLOT_TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut tags = vec![String::new(); 16384];
    let mut missing = tags.len();
    for tag in (0u32..).map(|n| n.to_string()) {
        let slot = &mut tags[usize::from(hash_slot(&tag))];
        if slot.is_empty() {
            *slot = tag;
            missing -= 1;
            if missing == 0 {
                break;
            }
        }
    }
    tags
});

/// What a subscribed connection reads.
#[derive(Debug)]
pub enum Push {
    /// A message's payload (`message`, `smessage`).
    Message(Vec<u8>),
    /// A subscription confirmed (`subscribe`, `ssubscribe`): its channel.
    Subscribed(String),
    /// A shard channel left (`sunsubscribe`, which the server sends when
    /// the channel's slot moved to another node): its channel.
    Unsubscribed(String),
    /// An error reply (a `MOVED` for a slot served elsewhere).
    Refused(Error),
    /// Anything else.
    Other,
}

impl Push {
    /// Reads a reply or a push of a subscribed connection.
    pub fn parse(value: Value) -> Push {
        // RESP2 arrays start with the kind; RESP3 pushes carry it apart.
        let (kind, items) = match value {
            Value::Array(mut items) if !items.is_empty() => (items.remove(0), items),
            Value::Push { kind, data } => (Value::BulkString(kind.to_string().into()), data),
            Value::ServerError(err) => return Push::Refused(Error::from_server(err)),
            _ => return Push::Other,
        };
        let (Value::BulkString(kind), [Value::BulkString(channel), rest @ ..]) = (kind, &items[..])
        else {
            return Push::Other;
        };
        let channel = || String::from_utf8_lossy(channel).into_owned();
        match (&kind[..], rest) {
            (b"message" | b"smessage", [Value::BulkString(payload), ..]) => {
                Push::Message(payload.clone())
            }
            (b"subscribe" | b"ssubscribe", _) => Push::Subscribed(channel()),
            (b"sunsubscribe", _) => Push::Unsubscribed(channel()),
            _ => Push::Other,
        }
    }
}

/// One wake message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeMessage {
    /// `G <call id> <token> <ttl ms>`: the lock was handed to that call.
    Granted {
        /// The call granted.
        call: u64,
        /// Its fencing token.
        token: u64,
        /// Its lease as set, in ms.
        ttl_ms: u64,
    },
    /// `H <call id> <pttl ms>`: that call heads the queue; the lock's lease
    /// runs out in `pttl_ms` (negative: no lease to wait for).
    Head {
        /// The call at the head.
        call: u64,
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
        redis::Cmd::publish(channel, WakeMessage::STOP)
    }

    /// Parses a payload; `None` for anything else.
    pub fn parse(payload: &[u8]) -> Option<WakeMessage> {
        let text = std::str::from_utf8(payload).ok()?;
        let mut fields = text.split(' ');
        let kind = fields.next()?;
        if let "R" | "L" = kind {
            // The lock key, last, may hold any character of a name.
            let news = text.get(2..)?;
            let (up_to, lock_key) = news.split_once(' ').filter(|(_, key)| !key.is_empty())?;
            let (up_to, lock_key) = (up_to.parse().ok()?, lock_key.to_owned());
            return Some(if kind == "R" {
                WakeMessage::Revoke { up_to, lock_key }
            } else {
                WakeMessage::Freed { up_to, lock_key }
            });
        }
        let numbers: Vec<i64> = fields.map(|n| n.parse().ok()).collect::<Option<_>>()?;
        match (kind, numbers.as_slice()) {
            ("G", &[call, token, ttl_ms]) => Some(WakeMessage::Granted {
                call: u64::try_from(call).ok()?,
                token: u64::try_from(token).ok()?,
                ttl_ms: u64::try_from(ttl_ms).unwrap_or(0),
            }),
            ("H", &[call, pttl_ms]) => Some(WakeMessage::Head {
                call: u64::try_from(call).ok()?,
                pttl_ms,
            }),
            ("S", []) => Some(WakeMessage::Stop),
            _ => None,
        }
    }
}

/// Checks the server's answer to a `SUBSCRIBE` (an `SSUBSCRIBE`), which the redis crate's
/// `PubSub::subscribe` drops: a refused subscription (an ACL user without
/// SUBSCRIBE or without the channel) would otherwise pass for a live one,
/// and nothing would try again until the connection broke.
pub fn check_subscribed(answer: Value) -> Result<()> {
    match Push::parse(answer.clone()) {
        Push::Subscribed(_) => Ok(()),
        Push::Refused(err) => Err(err),
        _ => Err(unexpected(&answer)),
    }
}
