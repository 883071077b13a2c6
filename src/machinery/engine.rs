//! The engine every handle runs on, and its narrow interface: acquire with
//! a wait, the admin calls (status, force release, revoke, a semaphore's
//! number of permits), the thread's own hold of a lock and the election's
//! watch; a hold it returns
//! ([`CallHold`](crate::machinery::caller::call_hold::CallHold)) is released and
//! changes access through its own methods. The handles only type it (lock_api's
//! `Mutex<R, T>` over a raw lock, Curator's recipes over `LockInternals`):
//! they send no protocol operation and hold no connection.

use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::connections::config::Config;
use crate::connections::warning::ServerWarning;
use crate::error::Result;
use crate::machinery::caller::target::Target;
use crate::machinery::shared::Shared;
use crate::protocol::{
    ForceRelease, Freed, LockKeys, PermitsSet, Revoke, Revoked, SetPermits, Status, StatusReply,
};

/// A client's engine: its shared state and its background threads, which
/// stop when it is dropped (with the client's last handle).
pub(crate) struct Engine {
    pub(super) shared: Arc<Shared>,
    /// Joined when the client is dropped.
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
    /// What the start found wrong with the servers; never changed after.
    pub(super) warnings: Vec<ServerWarning>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.stop();
        let mut threads: Vec<JoinHandle<()>> = self.threads.get_mut().drain(..).collect();
        // A listener may start one for a node that joined the cluster
        // until it sees the client stopping: joined until none is left.
        while !threads.is_empty() {
            for handle in threads.drain(..) {
                if handle.join().is_err() {
                    log::error!("fairlock: a background thread panicked");
                }
            }
            threads = self.shared.shards.take_threads();
        }
    }
}

impl Engine {
    /// What the client's start found wrong with its servers.
    pub(crate) fn warnings(&self) -> &[ServerWarning] {
        &self.warnings
    }

    /// The client's settings.
    pub(crate) fn config(&self) -> &Config {
        self.shared.config()
    }

    /// The client's random id.
    pub(crate) fn client_id(&self) -> &str {
        self.shared.client_id()
    }

    /// The calling thread's owner id and the token of its hold of `keys`
    /// that a live guard stands for (0: none).
    pub(crate) fn thread_hold(&self, keys: &LockKeys) -> (Arc<str>, u64) {
        let owner = self.shared.owner_id(None, None);
        let live = self.shared.holds.live_token(keys.lock(), &owner);
        (owner, live)
    }

    /// Reads `target`'s status, listing at most `holders` holders and
    /// `waiters` waiters (an election's history with it).
    pub(crate) fn status(
        &self,
        target: &Target,
        holders: usize,
        waiters: usize,
    ) -> Result<StatusReply> {
        let keys = target.keys()?;
        let kind = keys.kind();
        let op = Status {
            kind,
            waiters,
            holders,
        };
        self.shared.caller.call(keys, &op)
    }

    /// Frees every hold of the lock, whoever holds it, and hands it on to
    /// the queue in the same step.
    pub(crate) fn force_release(&self, target: &Target) -> Result<Freed> {
        // A call key, so that the call delivered twice frees the lock once.
        let shared = &self.shared;
        let call_key = format!("{}#{}", shared.client_id(), shared.next_wait_id());
        let op = ForceRelease { call_key };
        shared.caller.call_write(target.keys()?, &op)?.replicated()
    }

    /// Asks every hold of the lock present now to let go; frees nothing.
    /// Returns how many holds it asked.
    pub(crate) fn revoke(&self, target: &Target) -> Result<usize> {
        let written = self.shared.caller.call_write(target.keys()?, &Revoke)?;
        let revoked: Revoked = written.replicated()?;
        Ok(usize::try_from(revoked.holds).unwrap_or(usize::MAX))
    }

    /// The number of permits in force on the semaphore `target` as this
    /// client's last acquire call on it saw it, if any call found another
    /// than its own.
    pub(crate) fn permits_in_force(&self, target: &Target) -> Option<u32> {
        self.shared.permits_seen.get(target.keys().ok()?)
    }

    /// Sets a semaphore's number of permits for every client; this
    /// client's waiters it admits wake from the reply.
    pub(crate) fn set_permits(&self, target: &Target, permits: u32) -> Result<PermitsSet> {
        let op = SetPermits { permits };
        let written = self.shared.caller.call_write(target.keys()?, &op)?;
        let (set, replicated) = written.into_parts();
        self.shared.grant_own(&set.admitted);
        replicated.map(|()| set)
    }
}
