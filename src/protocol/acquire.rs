//! `acquire.lua`: take the lock (or units of it), re-enter it, or join (and
//! stay in) its queue.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int_list, ms, unexpected, Op, Operation};
use crate::protocol::{Ask, Lease, LockKeys};

/// What one acquire attempt asks of the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Never queue (`try_lock`).
    Try,
    /// First attempt of a waiting call: re-enter or queue.
    First,
    /// Later attempt of a queued call.
    Poll,
}

impl Mode {
    pub(crate) fn as_arg(self) -> &'static str {
        match self {
            Mode::Try => "try",
            Mode::First => "first",
            Mode::Poll => "poll",
        }
    }
}

/// One attempt of the call with id `call` of thread `owner` on a lock, asking for
/// `ask`: the mutex's script, or the counted engine's with the lock's
/// capacity and the call's units.
pub struct Acquire<'a> {
    /// What the call asks for.
    pub ask: Ask,
    /// The caller's owner id (see `Participant::owner`).
    pub owner: &'a str,
    /// The lease the lock gets when this owner takes it.
    pub lease: Lease,
    /// How long a queued entry stays without a heartbeat.
    pub waiter_timeout: Duration,
    /// What the attempt may do.
    pub mode: Mode,
    /// The call's id inside its client.
    pub call: u64,
    /// The token of the hold this thread has a live guard of on this lock,
    /// or 0: only that hold can be re-entered (always 0 for a semaphore).
    pub live_token: u64,
}

/// What an acquire attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireReply {
    /// The caller holds the lock; `pttl_ms` is its lease left when answered.
    Acquired {
        /// The hold's fencing token.
        token: u64,
        /// Its lease left, in ms.
        pttl_ms: i64,
        /// A semaphore's number of permits in force when it is not the
        /// call's own (`set_permits` set another); `None` otherwise.
        in_force: Option<u32>,
    },
    /// Someone else holds it. `position` is the caller's place in the queue
    /// (0 = next), or `None` when it did not queue; `last_token` the last
    /// fencing token issued then (a grant to this call up to it is over).
    Waiting {
        /// The holder's lease left, in ms (a semaphore: the first live one's).
        pttl_ms: i64,
        /// The caller's place in the queue, if it queued.
        position: Option<u64>,
        /// The last fencing token issued.
        last_token: u64,
        /// As [`Acquired`](Self::Acquired)'s.
        in_force: Option<u32>,
    },
}

impl AcquireReply {
    /// A semaphore's number of permits in force, when it is not the call's.
    pub fn in_force(self) -> Option<u32> {
        match self {
            Self::Acquired { in_force, .. } | Self::Waiting { in_force, .. } => in_force,
        }
    }
}

impl Operation for Acquire<'_> {
    type Reply = AcquireReply;
    const OP: Op = Op::Acquire;

    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        debug_assert!(self.ask.fits(keys.kind()), "an ask of another kind of lock");
        keys.common()
    }

    fn args(&self) -> Vec<String> {
        let [lease, fixed] = self.lease.args();
        // A take of a free lock reads only the owner, call and lease (and
        // a counted lock's capacity and units); the rest travels as one
        // string, read when the lock is held or someone waits
        // (lua/mutex/acquire.lua, lua/counted/acquire.lua).
        let (timeout, mode) = (ms(self.waiter_timeout), self.mode.as_arg());
        let rest = format!("{fixed} {timeout} {mode} {}", self.live_token);
        let mut args = vec![self.owner.to_owned(), self.call.to_string(), lease];
        if self.ask != Ask::Mutex {
            args.extend([self.ask.capacity(), self.ask.units()].map(|n| n.to_string()));
        }
        args.push(rest);
        args
    }

    fn parse(&self, reply: Value) -> Result<AcquireReply> {
        if let Value::Int(token) = reply {
            // A free lock taken with the lease asked for.
            return Ok(AcquireReply::Acquired {
                token: token as u64,
                pttl_ms: i64::try_from(self.lease.duration().as_millis()).unwrap_or(i64::MAX),
                in_force: None,
            });
        }
        let items = int_list(reply)?;
        standing(&items).ok_or_else(|| unexpected(&items))
    }
}

/// A call's standing as an acquire script (or an upgrade's, which waits
/// as a call does) lists it: `{1, token, lease ms left}` when it holds,
/// `{0, holder's lease ms left, position or -1, last token issued}` when it
/// waits, either ending in a semaphore's number of permits in force when
/// it is not the call's own; `None` for any other list.
pub(crate) fn standing(items: &[i64]) -> Option<AcquireReply> {
    let in_force = |rest: &[i64]| match rest {
        [] => Some(None),
        [n] => u32::try_from(*n).ok().map(Some),
        _ => None,
    };
    match items {
        [1, token, pttl, rest @ ..] => Some(AcquireReply::Acquired {
            token: *token as u64,
            pttl_ms: *pttl,
            in_force: in_force(rest)?,
        }),
        [0, pttl, position, last_token, rest @ ..] => Some(AcquireReply::Waiting {
            pttl_ms: *pttl,
            position: u64::try_from(*position).ok(),
            last_token: *last_token as u64,
            in_force: in_force(rest)?,
        }),
        _ => None,
    }
}
