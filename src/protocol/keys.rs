//! Lock names and the Redis keys that hold one lock's state.

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};

/// Longest lock name accepted, in bytes (64 KiB).
///
/// ```
/// assert_eq!(fairlock::MAX_NAME_LEN, 64 * 1024);
/// // Any UTF-8 name up to that, braces and newlines included, is a lock of its own.
/// ```
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// Which primitive a family of keys belongs to. The mutex, the semaphore,
/// the reader-writer lock and the election of one name are separate locks
/// in separate keys, so a key of one kind never meets a script of another
/// engine; all kinds of one name share the `{tag}`, hence one cluster slot.
///
/// ```
/// use fairlock::LockKind;
/// assert_eq!(LockKind::Semaphore.label(), "semaphore");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A fair mutex: keys lock, queue (and revoked and forced, the revoke's
    /// and the force release's records).
    Mutex,
    /// A fair semaphore: keys holders, queue, meta (and semrevoked,
    /// semforced).
    Semaphore,
    /// A fair reader-writer lock: keys holders, queue, meta (and
    /// rwrevoked, rwforced), as a semaphore's: both run on the counted engine.
    RwLock,
    /// A leader election: a mutex's queue under keys of its own (elect,
    /// electq), run by the mutex's engine (its files assembled with
    /// the election's announcements: `Engine::Election`), and the history
    /// of its changes (electh; and electrevoked, electforced).
    Election,
}

impl LockKind {
    /// The kind as metrics, statuses and messages name it: `mutex`,
    /// `semaphore`, `rwlock`, `election`.
    ///
    /// ```
    /// assert_eq!(fairlock::LockKind::RwLock.label(), "rwlock");
    /// ```
    pub fn label(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Semaphore => "semaphore",
            LockKind::RwLock => "rwlock",
            LockKind::Election => "election",
        }
    }

    /// How every error message names the call `call` (`"acquire"`,
    /// `"release"`, `"renew"`, ...) on a lock of this kind, before the
    /// lock's name: `acquire of mutex`; an election's in the words its API
    /// says them in ([`act`](Self::act)): `campaign for election`,
    /// `resignation from election`, `renewal of the leadership of
    /// election`.
    pub(crate) fn call(self, call: &str) -> String {
        let act = self.act(call);
        let on = match act {
            "campaign" => "for",
            "resignation" => "from",
            _ => "of",
        };
        format!("{act} {on} {}", self.label())
    }

    /// The call `call` as this kind's own word for it: an election's
    /// acquire is a `campaign`, its release a `resignation`, its renew a
    /// `renewal of the leadership`; any other call, and every call of the
    /// other kinds, is its own word.
    pub(crate) fn act(self, call: &str) -> &str {
        match (self, call) {
            (LockKind::Election, "acquire") => "campaign",
            (LockKind::Election, "release") => "resignation",
            (LockKind::Election, "renew") => "renewal of the leadership",
            _ => call,
        }
    }

    /// What a hold's fencing token is called in messages: an election's
    /// is its leader's `term`, every other kind's a `token`.
    pub(crate) fn token_word(self) -> &'static str {
        match self {
            LockKind::Election => "term",
            _ => "token",
        }
    }
}

/// The keys of one lock, in the order every script of its kind expects them.
///
/// Layout: `<prefix>:{<tag>}:<kind>:<name>`. The tag is 16 hex digits of the
/// name's SHA-1, so all keys of a lock share one cluster hash slot whatever
/// braces the name contains, and different names spread over the slots. The
/// full name follows the fixed-width part, so distinct names never share keys.
///
/// A mutex has two keys (`lock`, `queue`). A semaphore and a reader-writer
/// lock have three each, laid out alike for the counted
/// engine: holders (zset, two members per hold when two or more hold:
/// `"<owner> <call> <units>"` -> lease end, server ms, and `"#<owner>
/// <call> <units>"` -> minus its fencing token), queue (entries as the
/// mutex's with the units asked for as a fifth field) and
/// meta (string `"<capacity>
/// <used> <last token>[ <mark>]"`, and with a lone hold `"<capacity>
/// <used> <last token> <mark or -> <token> <lease end> <owner> <call>
/// <units>"`: one hold lives in the meta alone, as a mutex's in its lock
/// key); a semaphore's are `sem`, `semq`, `semmeta`, a reader-writer
/// lock's `rw`, `rwq`, `rwmeta`.
/// An election is a mutex's queue in keys of its own: `elect`, `electq`,
/// laid out as the mutex's, and a third, `electh`, the list of its newest
/// changes (lua/lib/mutex.lua: ANNOUNCE), which its status reads too.
/// The queue (its entries in arrival order and their liveness deadlines,
/// one zset: lua/lib/queue.lua) is 2nd in every kind, so lua/lib/queue.lua's
/// steps serve both engines. Last, every kind has the record of its last
/// revoke (`revoked`, `semrevoked`, `rwrevoked`, `electrevoked`) and then
/// of its last force release (`forced`, `semforced`, `rwforced`,
/// `electforced`): the call's key and answer, kept a fence life at most,
/// so that the call delivered again answers the same and asks or frees
/// nobody; each is given to its own script only ([`LockKeys::common`] are
/// the others').
#[derive(Debug)]
pub struct LockKeys {
    /// Mutex and Election: lock (the hold, or the last token of a free
    /// lock), queue, and an election's history. Semaphore and RwLock:
    /// holders, queue, meta. Then the revoke's record and, last, the force
    /// release's.
    pub all: Vec<String>,
    /// The Redis Cluster slot of all of them (CRC16 of the tag, as Redis has it).
    pub slot: u16,
    kind: LockKind,
    /// The first of `all` ([`lock`](Self::lock)), shared: the holds
    /// registry keys its entries by it without copying it.
    pub(crate) lock: Arc<str>,
}

impl LockKeys {
    /// The keys of the `kind` of lock called `name` under `prefix`; an
    /// empty or oversized name is [`ErrorKind::InvalidName`].
    pub fn of_kind(prefix: &str, name: &str, kind: LockKind) -> Result<Self> {
        validate_name(name)?;
        let tag = &sha1_smol::Sha1::from(name).digest().to_string()[..16];
        let key = |kind: &str| format!("{prefix}:{{{tag}}}:{kind}:{name}");
        let kinds: &[&str] = match kind {
            LockKind::Mutex => &["lock", "queue", "revoked", "forced"],
            LockKind::Semaphore => &["sem", "semq", "semmeta", "semrevoked", "semforced"],
            LockKind::RwLock => &["rw", "rwq", "rwmeta", "rwrevoked", "rwforced"],
            LockKind::Election => &["elect", "electq", "electh", "electrevoked", "electforced"],
        };
        let all: Vec<String> = kinds.iter().map(|k| key(k)).collect();
        Ok(LockKeys {
            lock: all[0].as_str().into(),
            all,
            slot: hash_slot(tag),
            kind,
        })
    }

    /// The keys every script but the force release and the revoke takes:
    /// all but the last two, their records, which no fast path pays to send.
    pub fn common(&self) -> &[String] {
        &self.all[..self.all.len() - 2]
    }

    /// Which primitive these keys belong to.
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// The first key: the mutex's (or an election's) lock key (the only
    /// key its renew script needs), a semaphore's or a rwlock's holders.
    /// Unique per lock and kind, so the client's registries key their
    /// entries by it.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// The lock's name, as the keys end with it (after the tag's `}:` and
    /// the kind's key name), for messages.
    pub fn name(&self) -> &str {
        let (_, rest) = self.lock().split_once("}:").unwrap_or_default();
        rest.split_once(':').map_or(rest, |(_, name)| name)
    }
}

/// The Redis Cluster slot of a key or a shard channel: CRC16 of its hash
/// tag (what its first `{...}` holds, when not empty) or of the whole of it.
pub fn hash_slot(key: &str) -> u16 {
    let tag = key
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map_or(key, |(tag, _)| if tag.is_empty() { key } else { tag });
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % 16384
}

/// `name` quoted and escaped as every message shows a name, cut after 64
/// characters (an oversized one runs to 64 KiB).
pub(crate) fn shown(name: &str) -> String {
    let cut: String = name.chars().take(64).collect();
    let more = if cut.len() < name.len() { "..." } else { "" };
    format!("{cut:?}{more}")
}

fn validate_name(name: &str) -> Result<()> {
    let message = match name.len() {
        0 => "lock name is empty".to_owned(),
        len if len > MAX_NAME_LEN => {
            format!("lock name is {len} bytes long, more than the {MAX_NAME_LEN} allowed")
        }
        _ => return Ok(()),
    };
    Err(Error::new(ErrorKind::InvalidName, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message names a call `CALL of KIND`; an election's campaign,
    /// resignation and renewal in its own words.
    #[test]
    fn calls_are_named_in_each_kind_s_words() {
        use LockKind::{Election, Mutex, Semaphore};
        for (kind, call, named) in [
            (Mutex, "acquire", "acquire of mutex"),
            (Semaphore, "set permits", "set permits of semaphore"),
            (Election, "acquire", "campaign for election"),
            (Election, "release", "resignation from election"),
            (Election, "renew", "renewal of the leadership of election"),
            (Election, "heartbeat", "heartbeat of election"),
        ] {
            assert_eq!(kind.call(call), named);
        }
    }
}
