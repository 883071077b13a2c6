//! `downgrade.lua`: a reader-writer lock's write becomes a read or an
//! upgradable read (or an upgradable read a read), in place and in one
//! atomic step with the admission of the waiters it lets in: one round
//! trip.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{count, int, list, Op, Operation};
use crate::protocol::release::{handed_over, hold_args};
use crate::protocol::{Access, Ask, HandedOver, LockKind};

/// Downgrade hold `token` that acquire call `call` of `owner` made, to
/// `to` (a read or an upgradable read, less than it is).
pub struct Downgrade<'a> {
    /// The holding owner id.
    pub owner: &'a str,
    /// The hold's fencing token.
    pub token: u64,
    /// The call that made it.
    pub call: u64,
    /// What it becomes.
    pub to: Access,
}

/// What a downgrade came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DowngradeReply {
    /// Done: the hold's new token and lease left, and the waiters admitted
    /// in the same step, in grant order.
    Downgraded {
        /// The hold's new fencing token.
        token: u64,
        /// Its lease left, in ms.
        pttl_ms: i64,
        /// The waiters admitted.
        handed: Vec<HandedOver>,
    },
    /// The call holds nothing live any more: nothing was changed.
    Lost,
}

impl Operation for Downgrade<'_> {
    type Reply = DowngradeReply;
    const OP: Op = Op::Downgrade;
    const ONLY_ON: Option<LockKind> = Some(LockKind::RwLock);

    fn args(&self) -> Vec<String> {
        let mut args = hold_args(self.owner, self.token, self.call);
        args.push(Ask::RwLock(self.to).units().to_string());
        args
    }

    fn parse(&self, reply: Value) -> Result<DowngradeReply> {
        if let Value::Int(-1) = reply {
            return Ok(DowngradeReply::Lost);
        }
        let items = list(reply, |n| n >= 2 && n % 4 == 2)?;
        Ok(DowngradeReply::Downgraded {
            token: count(&items[0])?,
            pttl_ms: int(&items[1])?,
            handed: handed_over(&items[2..])?,
        })
    }
}
