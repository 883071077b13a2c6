//! `release.lua`: release one hold; the lock (or the units the hold
//! frees) goes on to the next waiters.

use std::time::Instant;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{count, refused, text, unexpected, words, Op, Operation};
use crate::protocol::owner;

/// The guard made by acquire call `call` of `owner` releases hold `token`.
pub struct Release<'a> {
    /// The holding thread's owner id.
    pub owner: &'a str,
    /// The hold's fencing token.
    pub token: u64,
    /// The id of the acquire call that made the guard.
    pub call: u64,
    /// Until when the caller vouches for the hold's lease at Redis, its
    /// reply's longest way back already taken off: a release sent before
    /// then lets the script free a hold it finds without reading its lease
    /// (no PTTL). `None`, or sent after it: the script checks the lease.
    /// Only for a hold whose lease is at most the fence life, so the freed
    /// key keeps at most two fence lives.
    pub vouched_until: Option<Instant>,
}

/// What a release came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseReply {
    /// Released (or released already by the same call), nobody admitted;
    /// this many holds of the thread are left (a mutex's re-entries; 0:
    /// the lock was freed, and always 0 for a counted lock).
    Released {
        /// The thread's holds left.
        left: u32,
    },
    /// Released, and the lock (or the units freed) went straight to the
    /// waiters named, in grant order.
    HandedOver(Vec<HandedOver>),
    /// The lock is not this hold's any more: nothing was changed.
    NotHeld,
    /// As `NotHeld`, the lock's key (a counted lock's meta) gone: the
    /// server lost it (a restart or a failover without its data, a flush,
    /// an eviction).
    Gone,
}

/// A waiter a release handed the lock to, as its "G" message names it:
/// the releasing client may wake its own waiter from this reply at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedOver {
    /// The new holder's owner id.
    pub owner: String,
    /// The new holder's call.
    pub call: u64,
    /// Its fencing token.
    pub token: u64,
    /// Its lease as set, in ms.
    pub ttl_ms: u64,
}

impl Operation for Release<'_> {
    type Reply = ReleaseReply;
    const OP: Op = Op::Release;

    /// The acquire call's key, `<owner>#<call>` (as the lock's value names
    /// its hold), then the token: the scripts' fast paths find that key as
    /// given, with no string to build of its parts. Then "check" unless
    /// the lease is vouched for now: packed as it is sent, each attempt
    /// decides anew.
    fn args(&self) -> Vec<String> {
        let check = self
            .vouched_until
            .is_none_or(|until| Instant::now() >= until);
        let key = owner::call_key(self.owner, self.call);
        let mut args = vec![key, self.token.to_string()];
        args.extend(check.then(|| "check".to_owned()));
        args
    }

    fn parse(&self, reply: Value) -> Result<ReleaseReply> {
        match words(reply) {
            Value::Int(left) if left >= 0 => Ok(ReleaseReply::Released {
                left: u32::try_from(left).unwrap_or(u32::MAX),
            }),
            Value::Int(-2) => Ok(ReleaseReply::Gone),
            Value::Int(_) => Ok(ReleaseReply::NotHeld),
            Value::Array(items) if !items.is_empty() && items.len().is_multiple_of(4) => {
                handed_over(&items).map(ReleaseReply::HandedOver)
            }
            other => Err(refused(other)),
        }
    }
}

/// The hold that acquire call `call` of `owner` made, with fencing token
/// `token`, as an upgrade and a downgrade name it: their first three ARGV
/// after the common ones.
pub(crate) fn hold_args(owner: &str, token: u64, call: u64) -> Vec<String> {
    vec![owner.to_owned(), token.to_string(), call.to_string()]
}

/// The grants a reply lists after its own fields, four items each (owner,
/// call id, token, ttl ms), as lua/lib/counted.lua's `with_grants` writes them: a
/// release's, a downgrade's, a change of permits'.
pub(crate) fn handed_over(items: &[Value]) -> Result<Vec<HandedOver>> {
    items
        .chunks(4)
        .map(|grant| match grant {
            [owner, call, token, ttl] => Ok(HandedOver {
                owner: text(owner)?,
                call: count(call)?,
                token: count(token)?,
                ttl_ms: count(ttl)?,
            }),
            _ => Err(unexpected(&grant)),
        })
        .collect()
}
