//! `set_permits.lua`: set a semaphore's number of permits, admitting the
//! waiters that now fit and refusing the queued calls that ask for more.

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{count, list, unexpected, Op, Operation};
use crate::protocol::release::handed_over;
use crate::protocol::{HandedOver, LockKind};

/// Sets the semaphore's permits to `permits` (one round trip).
pub struct SetPermits {
    /// The new number, from 1 to `MAX_PERMITS` (the caller checks).
    pub permits: u32,
}

/// What setting the permits came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitsSet {
    /// The number before (`None`: none was recorded, the semaphore was not
    /// in use).
    pub previous: Option<u32>,
    /// The permits the live holds take now (more than the new number after
    /// a shrink below them: holders keep theirs).
    pub in_use: u64,
    /// Queued calls that asked for more than the new number, taken out of
    /// the queue (each polls and gets the error).
    pub refused: u64,
    /// The waiters admitted, in grant order.
    pub admitted: Vec<HandedOver>,
}

impl Operation for SetPermits {
    type Reply = PermitsSet;
    const OP: Op = Op::SetPermits;
    const ONLY_ON: Option<LockKind> = Some(LockKind::Semaphore);

    fn args(&self) -> Vec<String> {
        vec![self.permits.to_string()]
    }

    fn parse(&self, reply: Value) -> Result<PermitsSet> {
        let items = list(reply, |n| n >= 3 && n % 4 == 3)?;
        let previous = u32::try_from(count(&items[0])?).map_err(|_| unexpected(&items[0]))?;
        Ok(PermitsSet {
            previous: (previous > 0).then_some(previous),
            in_use: count(&items[1])?,
            refused: count(&items[2])?,
            admitted: handed_over(&items[3..])?,
        })
    }
}
