//! `renew.lua`: extend a held lease (the watchdog), only if the hold is
//! still this call's.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{coded, ms, Engine, Op, Operation};
use crate::protocol::{LockKeys, LockKind};

/// Renew hold `token` of `owner`, made by acquire call `call` (a counted
/// lock names a hold by its call; the mutex by its owner and token, and
/// is not sent the call).
pub struct Renew<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The hold's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the hold.
    pub call: u64,
    /// The token the hold was granted with (`token` until a change of its
    /// access): a revocation up to it asks the hold.
    pub first: u64,
    /// The lease to set; `None` writes the hold again as it is, so that a
    /// `WAIT` after it covers the handoff that made it.
    pub lease: Option<Duration>,
}

/// What a renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewReply {
    /// The hold was still this call's, and is renewed.
    Renewed,
    /// Renewed, and a revocation (`revoke.lua`) asks the hold to let go.
    Revoked,
    /// The hold is no longer this call's: the lease is lost.
    Lost,
    /// Lost, and the lock's mark says a force release freed it.
    ForceReleased,
    /// Lost, the lock's key (a counted lock's meta) gone: the server lost
    /// it (a restart or a failover without its data, a flush).
    Gone,
}

impl RenewReply {
    /// Whether the hold was still this call's (and is renewed).
    pub fn is_held(self) -> bool {
        matches!(self, RenewReply::Renewed | RenewReply::Revoked)
    }
}

impl Operation for Renew<'_> {
    type Reply = RenewReply;
    const OP: Op = Op::Renew;

    /// The mutex's renewal (an election's too) needs its lock key only.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        match Engine::of(keys.kind()) {
            Engine::Mutex | Engine::Election => &keys.all[..1],
            Engine::Counted => keys.common(),
        }
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![
            self.owner.to_owned(),
            self.token.to_string(),
            self.lease.map_or_else(|| "0".to_owned(), ms),
            self.call.to_string(),
        ];
        // (Only a counted hold changes its token: a mutex's never sends it.)
        args.extend((self.first != self.token).then(|| self.first.to_string()));
        args
    }

    /// The mutex's renewal (an election's too) names the hold by its
    /// owner and token: it takes no call id.
    fn args_on(&self, kind: LockKind) -> Vec<String> {
        let mut args = self.args();
        if Engine::of(kind) != Engine::Counted {
            args.pop();
        }
        args
    }

    /// 0: lost, 1: renewed, 2: revoked, 3: force-released, 4: gone.
    fn parse(&self, reply: Value) -> Result<RenewReply> {
        use RenewReply as R;
        coded(
            reply,
            [R::Lost, R::Renewed, R::Revoked, R::ForceReleased, R::Gone],
        )
    }
}
