//! What an election says besides its queue (which is a mutex's, under
//! keys of its own: [`LockKind::Election`](crate::protocol::LockKind)):
//! the values candidates campaign with, which ride in their owner ids
//! (`<client id>:u<call>@<value>`), and the messages on the election's
//! channel, `<key prefix>:election:<name>` (with sharded pub/sub
//! `<key prefix>:{<tag>}:election:<name>`, in its keys' slot:
//! [`Route`](crate::protocol::Route)), which tell watchers to read the
//! leader again. The election's scripts publish them (lua/lib/mutex.lua:
//! `ANNOUNCE`), in the call that grants or frees the election's lock, and
//! keep the newest [`HISTORY_LEN`] of them in the election's history, each
//! with the last term issued before it ([`Change`]), which its status
//! returns.

use crate::error::{Error, Result};

/// Longest value a candidate may campaign with, in bytes (public as
/// `fairlock::MAX_ELECTION_VALUE_LEN`; see
/// [`Election::campaign_with`](crate::Election::campaign_with)).
///
/// ```
/// assert_eq!(fairlock::MAX_ELECTION_VALUE_LEN, 256);
/// // e.g. "10.0.0.7:8080" or "scheduler-1"; no spaces (0x21 to 0x7E only)
/// ```
pub const MAX_VALUE_LEN: usize = 256;

/// `Ok` when `value` is 1 to [`MAX_VALUE_LEN`] bytes of printable ASCII
/// without spaces (`!` to `~`, 0x21 to 0x7E): it rides in the owner id,
/// which the scripts keep in space-separated values and every status
/// prints.
pub fn check_value(value: &str) -> Result<()> {
    let printable = |b| (0x21..=0x7E).contains(&b);
    if (1..=MAX_VALUE_LEN).contains(&value.len()) && value.bytes().all(printable) {
        return Ok(());
    }
    let shown: String = value.chars().take(64).collect();
    Err(Error::invalid_config(format!(
        "an election value must be 1 to {MAX_VALUE_LEN} bytes of printable ASCII without \
         spaces (0x21 to 0x7E), got {} bytes: {shown:?}",
        value.len()
    )))
}

/// How many changes of its leader an election keeps in its history
/// (public as `fairlock::ELECTION_HISTORY_LEN`; lua/lua/lib/mutex.lua's `ANNOUNCE`
/// trims the list to it): a [`LeaderWatch`](crate::LeaderWatch) that lost
/// messages reports every change it missed as long as no more than this
/// many happened since the last one it saw, and says it missed some
/// otherwise. A change is a new leader or a term that ended with nobody
/// waiting.
///
/// ```
/// assert_eq!(fairlock::ELECTION_HISTORY_LEN, 16);
/// ```
pub const HISTORY_LEN: usize = 16;

/// The channel of the election `name` under the key prefix `prefix`.
pub fn election_channel(prefix: &str, name: &str) -> String {
    format!("{prefix}:election:{name}")
}

/// One message on an election's channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionMessage {
    /// `<term> <value> <owner>`: the candidate `owner` campaigning with
    /// `value` leads from `term` on (published by the call that made it
    /// leader: its campaign's, or the one that handed it the lock).
    Leads {
        /// The leader's term: its hold's fencing token.
        term: u64,
        /// Its value.
        value: String,
        /// Its owner id.
        owner: String,
    },
    /// `resigned <term>`: the leader of `term` no longer leads, and nobody
    /// was waiting to: it resigned, its campaign was abandoned, or the
    /// election was force-released.
    Resigned {
        /// The term that ended.
        term: u64,
    },
}

impl ElectionMessage {
    /// The message's payload.
    pub fn payload(&self) -> String {
        match self {
            ElectionMessage::Leads { term, value, owner } => format!("{term} {value} {owner}"),
            ElectionMessage::Resigned { term } => format!("resigned {term}"),
        }
    }

    /// Parses a payload; `None` for anything else.
    pub fn parse(payload: &[u8]) -> Option<ElectionMessage> {
        let text = std::str::from_utf8(payload).ok()?;
        match text.split(' ').collect::<Vec<_>>().as_slice() {
            ["resigned", term] => Some(ElectionMessage::Resigned {
                term: term.parse().ok()?,
            }),
            [term, value, owner] if !value.is_empty() && !owner.is_empty() => {
                Some(ElectionMessage::Leads {
                    term: term.parse().ok()?,
                    value: (*value).to_owned(),
                    owner: (*owner).to_owned(),
                })
            }
            _ => None,
        }
    }
}

/// One entry of an election's history: a message as it was published,
/// and the last term issued before it (0 when the election had none on
/// record: its lock key was gone), which links it to the change before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The last term issued before this change.
    pub after: u64,
    /// The change.
    pub message: ElectionMessage,
}

impl Change {
    /// Parses an entry, `"<last term> <message>"`; `None` for anything else.
    pub fn parse(entry: &[u8]) -> Option<Change> {
        let space = entry.iter().position(|&b| b == b' ')?;
        let after = std::str::from_utf8(&entry[..space]).ok()?.parse().ok()?;
        let message = ElectionMessage::parse(&entry[space + 1..])?;
        Some(Change { after, message })
    }
}
