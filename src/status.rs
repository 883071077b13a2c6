//! A snapshot of one lock for operators: who holds it, who waits, in order.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::scripts;

/// One participant of a lock: a thread of some client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// The owner id, `<client id>:<thread number>`.
    pub owner: String,
}

impl Participant {
    /// The id of the client (see [`Client::id`](crate::Client::id)).
    pub fn client_id(&self) -> &str {
        self.owner
            .split_once(':')
            .map_or(&self.owner, |(client, _)| client)
    }

    /// The thread's number inside its process.
    pub fn thread(&self) -> Option<u64> {
        self.owner
            .rsplit_once(':')
            .and_then(|(_, n)| n.parse().ok())
    }
}

/// The current holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Who holds it.
    pub who: Participant,
    /// Re-entrant holds of that thread.
    pub hold_count: u32,
    /// Fencing token of the hold.
    pub fencing_token: u64,
    /// Lease left; `None` if the key has no expiry (never set by fairlock).
    pub remaining_lease: Option<Duration>,
}

/// A queued waiter, in queue order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedWaiter {
    /// Who waits.
    pub who: Participant,
    /// How long it keeps its place without another heartbeat from its
    /// client; `None` for a dead entry not yet dropped.
    pub liveness_left: Option<Duration>,
}

/// What [`FairMutex::status`](crate::FairMutex::status) saw, in one atomic read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The holder, if the lock is held.
    pub holder: Option<Holder>,
    /// The first queued waiters, in the order they will get the lock.
    pub waiters: Vec<QueuedWaiter>,
    /// Live waiters queued in total (may exceed `waiters.len()`).
    pub queue_len: usize,
    /// The last fencing token issued for this name, if still recorded.
    pub last_fencing_token: Option<u64>,
}

impl LockStatus {
    pub(crate) fn parse(value: Value) -> Result<Self> {
        let Value::Array(items) = value else {
            return Err(scripts::unexpected(&value));
        };
        if items.len() < 6 || items.len() % 2 != 0 {
            return Err(scripts::unexpected(&items));
        }
        let text = |v: &Value| -> Result<String> {
            redis::from_redis_value_ref(v).map_err(|_| scripts::unexpected(v))
        };
        let int = |v: &Value| -> Result<i64> {
            redis::from_redis_value_ref(v).map_err(|_| scripts::unexpected(v))
        };
        let owner = text(&items[0])?;
        let holder = (!owner.is_empty()).then(|| -> Result<Holder> {
            Ok(Holder {
                who: Participant { owner },
                hold_count: u32::try_from(int(&items[1])?).unwrap_or(0),
                fencing_token: u64::try_from(int(&items[2])?).unwrap_or(0),
                remaining_lease: u64::try_from(int(&items[3])?)
                    .ok()
                    .map(Duration::from_millis),
            })
        });
        let waiters = items[6..]
            .chunks(2)
            .map(|pair| -> Result<QueuedWaiter> {
                Ok(QueuedWaiter {
                    who: Participant {
                        owner: text(&pair[0])?,
                    },
                    liveness_left: u64::try_from(int(&pair[1])?)
                        .ok()
                        .map(Duration::from_millis),
                })
            })
            .collect::<Result<_>>()?;
        let last = u64::try_from(int(&items[5])?).unwrap_or(0);
        Ok(LockStatus {
            holder: holder.transpose()?,
            waiters,
            queue_len: usize::try_from(int(&items[4])?).unwrap_or(0),
            last_fencing_token: (last > 0).then_some(last),
        })
    }
}
