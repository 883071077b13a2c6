//! `sem_acquire.lua`: take a permit of a semaphore, or join (and stay in)
//! its queue.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::keys::LockKind;
use crate::protocol::operation::{ms, Operation, Script};
use crate::protocol::{Acquire, AcquireReply, LockKeys, Mode};

/// One attempt of call `wait_id` of thread `owner` on a semaphore of
/// `permits` permits. Its replies have the mutex's shapes, so it answers in
/// [`AcquireReply`]: `pttl_ms` is the permit's lease left when acquired, and
/// while waiting the ms until the first live lease runs out (0: none).
pub struct SemAcquire<'a> {
    /// The calling thread's owner id, `<client id>:<thread number>`.
    pub owner: &'a str,
    /// The permit's lease when this call gets it.
    pub lease: Duration,
    /// A fixed lease (no watchdog renews it).
    pub fixed: bool,
    /// How long a queued entry stays without a heartbeat.
    pub waiter_timeout: Duration,
    /// What the attempt may do.
    pub mode: Mode,
    /// The call's id inside its client; the hold it makes is named by it.
    pub wait_id: u64,
    /// N, the most holders at once. Every client of one semaphore must send
    /// the same: the script refuses another N while the semaphore is in use
    /// (an error reply, nothing written), never admitting more holders.
    pub permits: u32,
}

impl Operation for SemAcquire<'_> {
    type Reply = AcquireReply;
    const SCRIPT: Script = Script::SemAcquire;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert_eq!(keys.kind(), LockKind::Semaphore);
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
            self.permits.to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<AcquireReply> {
        // The same shapes as acquire.lua's: parse them as the mutex's
        // attempt with this lease does.
        Acquire {
            owner: self.owner,
            lease: self.lease,
            fixed: self.fixed,
            waiter_timeout: self.waiter_timeout,
            mode: self.mode,
            wait_id: self.wait_id,
            live_token: 0,
        }
        .parse(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt() -> SemAcquire<'static> {
        SemAcquire {
            owner: "c:1",
            lease: Duration::from_secs(30),
            fixed: true,
            waiter_timeout: Duration::from_secs(10),
            mode: Mode::Try,
            wait_id: 7,
            permits: 3,
        }
    }

    #[test]
    fn arguments_follow_the_script_header() {
        assert_eq!(
            attempt().args(),
            ["c:1", "30000", "1", "10000", "try", "7", "3"]
        );
    }

    #[test]
    fn replies_parse_as_the_mutex_ones() {
        assert_eq!(
            attempt().parse(Value::Int(97)).unwrap(),
            AcquireReply::Acquired {
                token: 97,
                pttl_ms: 30_000
            }
        );
        let ints = |v: &[i64]| Value::Array(v.iter().map(|n| Value::Int(*n)).collect());
        assert_eq!(
            attempt().parse(ints(&[0, 0, -1, 98])).unwrap(),
            AcquireReply::Waiting {
                pttl_ms: 0,
                position: None,
                last_token: 98
            }
        );
    }
}
