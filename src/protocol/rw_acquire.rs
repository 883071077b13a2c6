//! `rw_acquire.lua`: take a read or write hold of a reader-writer lock,
//! re-enter it, or join (and stay in) its queue.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{ms, Operation, Script};
use crate::protocol::{Acquire, AcquireReply, LockKeys, Mode};

/// What a reader-writer lock's hold allows (see
/// [`FairRwLock`](crate::FairRwLock)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Shared with other readers.
    Read,
    /// Exclusive.
    Write,
}

impl Access {
    /// The script's word for it (ARGV, the holders member, queue entries).
    /// Protocol detail, not part of the public API.
    #[doc(hidden)]
    pub fn as_arg(self) -> &'static str {
        match self {
            Access::Read => "r",
            Access::Write => "w",
        }
    }

    /// The access the script's word names, if it names one. Protocol
    /// detail, not part of the public API.
    #[doc(hidden)]
    pub fn from_arg(word: &str) -> Option<Access> {
        match word {
            "r" => Some(Access::Read),
            "w" => Some(Access::Write),
            _ => None,
        }
    }
}

/// One attempt of call `wait_id` of thread `owner` on a reader-writer lock.
/// Its replies have the mutex's shapes, so it answers in [`AcquireReply`]:
/// `pttl_ms` is the hold's lease left when acquired, and while waiting the
/// ms until the first live lease runs out (0: none).
///
/// A write asked with `live_token` naming a read hold of this owner is
/// refused by the script with an error reply ("read -> write upgrade
/// refused"), nothing written; it surfaces as
/// [`ErrorKind::UpgradeRefused`](crate::ErrorKind::UpgradeRefused).
pub struct RwAcquire<'a> {
    /// The calling thread's owner id, `<client id>:<thread number>`.
    pub owner: &'a str,
    /// The hold's lease when this call gets it.
    pub lease: Duration,
    /// A fixed lease (no watchdog renews it).
    pub fixed: bool,
    /// How long a queued entry stays without a heartbeat.
    pub waiter_timeout: Duration,
    /// What the attempt may do.
    pub mode: Mode,
    /// The call's id inside its client; the hold it makes is named by it.
    pub wait_id: u64,
    /// Read or write.
    pub access: Access,
    /// The token of a live guard this thread has of this lock (its write
    /// guard if it has one), or 0: re-entry is granted only through it.
    pub live_token: u64,
}

impl Operation for RwAcquire<'_> {
    type Reply = AcquireReply;
    const SCRIPT: Script = Script::RwAcquire;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::RwLock);
        &keys.all
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.owner.to_owned(),
            ms(self.lease),
            if self.fixed { "1" } else { "0" }.to_owned(),
            ms(self.waiter_timeout),
            self.mode.as_arg().to_owned(),
            self.wait_id.to_string(),
            self.access.as_arg().to_owned(),
            self.live_token.to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<AcquireReply> {
        // The same shapes as acquire.lua's.
        Acquire {
            owner: self.owner,
            lease: self.lease,
            fixed: self.fixed,
            waiter_timeout: self.waiter_timeout,
            mode: self.mode,
            wait_id: self.wait_id,
            live_token: self.live_token,
        }
        .parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(access: Access, live_token: u64) -> RwAcquire<'static> {
        RwAcquire {
            owner: "c:1",
            lease: Duration::from_secs(30),
            fixed: false,
            waiter_timeout: Duration::from_secs(10),
            mode: Mode::First,
            wait_id: 7,
            access,
            live_token,
        }
    }

    #[test]
    fn arguments_follow_the_script_header() {
        assert_eq!(
            attempt(Access::Read, 0).args(),
            ["c:1", "30000", "0", "10000", "first", "7", "r", "0"]
        );
        assert_eq!(
            attempt(Access::Write, 42).args(),
            ["c:1", "30000", "0", "10000", "first", "7", "w", "42"]
        );
    }

    #[test]
    fn replies_parse_as_the_mutex_ones() {
        let op = attempt(Access::Write, 0);
        assert_eq!(
            op.parse(Value::Int(97)).unwrap(),
            AcquireReply::Acquired {
                token: 97,
                pttl_ms: 30_000
            }
        );
        let ints = |v: &[i64]| Value::Array(v.iter().map(|n| Value::Int(*n)).collect());
        assert_eq!(
            op.parse(ints(&[0, 5, 2, 98])).unwrap(),
            AcquireReply::Waiting {
                pttl_ms: 5,
                position: Some(2),
                last_token: 98
            }
        );
        assert!(op.parse(Value::Nil).is_err());
    }
}
