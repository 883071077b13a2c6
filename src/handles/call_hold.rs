//! The one guard core: a hold made by one acquire call and given back by
//! naming that call, whatever the kind (a mutex's guard, a semaphore's
//! permit, a reader-writer lock's read or write guard). Every guard
//! releases, drops and gives back through it; the release reply is the
//! same shape for every kind ([`ReleaseReply`]).

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::handles::acquisition::Acquired;
use crate::handles::lease_signal::LeaseSignal;
use crate::machinery::holds::Hold;
use crate::machinery::shared::ClientInner;
use crate::protocol::{Ask, QueueEntry, Release, ReleaseReply};

/// One call's hold, released once: by [`release`](Self::release) or, best
/// effort, on drop.
pub(crate) struct CallHold {
    client: Arc<ClientInner>,
    /// The lock's name, for messages.
    name: Arc<str>,
    hold: Arc<Hold>,
    /// Id of the acquire call that made the hold: the release names it.
    call: u64,
    /// That call's lease and what it asked for (for a give-back of the call).
    lease: Duration,
    fixed: bool,
    ask: Ask,
    /// How long the acquire call waited.
    waited: Duration,
    released: bool,
}

impl CallHold {
    pub(crate) fn new(client: Arc<ClientInner>, name: Arc<str>, got: Acquired, ask: Ask) -> Self {
        CallHold {
            client,
            name,
            hold: got.hold,
            call: got.call,
            lease: got.lease,
            fixed: got.fixed,
            ask,
            waited: got.waited,
            released: false,
        }
    }

    pub(crate) fn fencing_token(&self) -> u64 {
        self.hold.token
    }

    pub(crate) fn waited(&self) -> Duration {
        self.waited
    }

    pub(crate) fn is_lease_lost(&self) -> bool {
        self.hold.is_lost()
    }

    pub(crate) fn lease_signal(&self) -> LeaseSignal {
        LeaseSignal::new(Arc::clone(&self.hold))
    }

    /// The units the hold takes (a semaphore's permits).
    pub(crate) fn units(&self) -> u32 {
        self.ask.units()
    }

    /// What the hold is, for messages: `semaphore "uploads" permit`.
    fn what(&self) -> String {
        self.ask.describe(&self.name)
    }

    /// The acquire call that made the hold, as a give-back names it.
    fn call_entry(&self) -> QueueEntry<'_> {
        QueueEntry {
            owner: &self.hold.owner,
            wait_id: self.call,
            lease: self.lease,
            fixed: self.fixed,
            ask: self.ask,
        }
    }

    /// Releases the hold (once; later calls do nothing). Waiters of this
    /// client that the release handed a hold to wake from its reply.
    pub(crate) fn release(&mut self) -> Result<()> {
        self.release_within(None)
    }

    /// As [`release`](Self::release); with a `budget`, the call goes out
    /// once and waits no longer than that, pool wait included (a drop).
    fn release_within(&mut self, budget: Option<Duration>) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let shared = &self.client.shared;
        shared.holds.unregister(&self.hold);
        let (owner, token, call) = (self.hold.owner.as_str(), self.hold.token, self.call);
        let keys = &self.hold.keys;
        let release = Release { owner, token, call };
        let sent = match budget {
            Some(budget) => shared.call_write_within(keys, &release, budget),
            None => shared.call_write(keys, &release),
        };
        let (reply, shortfall) = sent.inspect_err(|_| {
            // Not sent, or its reply lost: the watchdog gives the call back
            // once Redis answers, so the hold does not wait out its lease.
            shared.give_back_later(keys, self.call_entry());
        })?;
        match reply {
            ReleaseReply::Released { .. } => shortfall.map_or(Ok(()), Err),
            ReleaseReply::HandedOver(next) => {
                // Waiters of this client wake now rather than when their
                // handoff messages arrive (which then find them gone).
                for next in next.iter().filter(|next| shared.is_own(&next.owner)) {
                    shared.grant_waiter(next.wait_id, next.token, next.ttl_ms);
                }
                shortfall.map_or(Ok(()), Err)
            }
            ReleaseReply::NotHeld => {
                self.hold.mark_lost();
                Err(Error::new(
                    ErrorKind::LeaseLost,
                    format!(
                        "{} (token {}) was no longer held",
                        self.what(),
                        self.hold.token
                    ),
                ))
            }
        }
    }
}

impl Drop for CallHold {
    /// Releases within one command timeout, pool wait included; what did
    /// not go out by then the watchdog gives back.
    fn drop(&mut self) {
        let budget = self.client.shared.config.command_timeout;
        if let Err(err) = self.release_within(Some(budget)) {
            log::warn!(
                "fairlock: releasing a {} on drop failed: {err}",
                self.what()
            );
        }
    }
}
