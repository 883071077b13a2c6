//! `upgrade.lua`: a reader-writer lock's upgradable read becomes its write,
//! in place: at once when no read granted before it is left, else through
//! its claim at the head of the queue (one round trip per attempt).

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::acquire::{standing, AcquireReply};
use crate::protocol::operation::{int_list, ms, unexpected, Op, Operation};
use crate::protocol::release::hold_args;
use crate::protocol::{Lease, LockKind, Mode};

/// What one upgrade attempt may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeStep {
    /// Upgrade, claiming the head of the queue when reads are still held
    /// (not with [`Mode::Try`]), or find the claim queued or settled.
    Attempt(Mode),
    /// Withdraw the claim (a wait that ended): the waiters it held back
    /// are admitted; a claim settled meanwhile answers as upgraded.
    Withdraw,
}

/// Upgrade the upgradable read `token` that acquire call `call` of `owner`
/// made (granted with `lease`); its claim lives `waiter_timeout` without a
/// heartbeat.
pub struct Upgrade<'a> {
    /// The holding owner id.
    pub owner: &'a str,
    /// The upgradable read's fencing token.
    pub token: u64,
    /// The call that made it (the hold's name and the claim's call id).
    pub call: u64,
    /// That call's lease (part of the claim's queue entry).
    pub lease: Lease,
    /// How long the claim stays without a heartbeat.
    pub waiter_timeout: Duration,
    /// What the attempt may do.
    pub step: UpgradeStep,
}

/// What an upgrade attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeReply {
    /// The call holds the write, with a new token.
    Upgraded {
        /// The write's fencing token.
        token: u64,
        /// Its lease left, in ms.
        pttl_ms: i64,
    },
    /// Still the upgradable read; `position` 0 when its claim heads the
    /// queue, `None` when not queued (a try, a withdrawal).
    Waiting {
        /// The first live lease's ms left.
        pttl_ms: i64,
        /// The claim's place, if queued.
        position: Option<u64>,
        /// The last fencing token issued.
        last_token: u64,
    },
    /// The call holds nothing live any more: lease lost, force unlocked.
    Lost,
}

impl Operation for Upgrade<'_> {
    type Reply = UpgradeReply;
    const OP: Op = Op::Upgrade;
    const ONLY_ON: Option<LockKind> = Some(LockKind::RwLock);

    fn args(&self) -> Vec<String> {
        let [lease, fixed] = self.lease.args();
        let mode = match self.step {
            UpgradeStep::Attempt(mode) => mode.as_arg(),
            UpgradeStep::Withdraw => "cancel",
        };
        let mut args = hold_args(self.owner, self.token, self.call);
        args.extend([lease, fixed, ms(self.waiter_timeout), mode.to_owned()]);
        args
    }

    fn parse(&self, reply: Value) -> Result<UpgradeReply> {
        use AcquireReply as A;
        if let Value::Int(-1) = reply {
            return Ok(UpgradeReply::Lost);
        }
        let items = int_list(reply)?;
        Ok(match standing(&items).ok_or_else(|| unexpected(&items))? {
            A::Acquired { token, pttl_ms, .. } => UpgradeReply::Upgraded { token, pttl_ms },
            A::Waiting {
                pttl_ms,
                position,
                last_token,
                ..
            } => UpgradeReply::Waiting {
                pttl_ms,
                position,
                last_token,
            },
        })
    }
}
