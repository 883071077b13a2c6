//! What every public lock handle is underneath: a client, a name, the
//! name's keys of one kind, and the lease its acquisitions take. The
//! mutex, the semaphore and the reader-writer lock are thin faces over it
//! (tokio's Mutex, RwLock and Semaphore over one batch semaphore), so a
//! capability written here works for all three.

use std::sync::Arc;
use std::time::Duration;

use crate::connections::config::check_lease;
use crate::error::{Error, Result};
use crate::handles::acquisition::{Acquired, Acquisition};
use crate::handles::call_hold::CallHold;
use crate::machinery::shared::{ClientInner, Shared};
use crate::protocol::{Ask, ForceRelease, Freed, LockKeys, LockKind, Status, StatusReply};

/// One named lock of one kind, as a handle holds it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Handle {
    client: Arc<ClientInner>,
    name: Arc<str>,
    /// The name's keys, or why the name is invalid (every call reports it).
    keys: Result<Arc<LockKeys>>,
    /// A lease no watchdog renews, when set (`with_lease`).
    fixed_lease: Option<Duration>,
}

impl Handle {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str, kind: LockKind) -> Self {
        let keys = LockKeys::of_kind(&client.shared.config.key_prefix, name, kind).map(Arc::new);
        Handle {
            client,
            name: name.into(),
            keys,
            fixed_lease: None,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, acquired with a fixed `lease` (checked by each
    /// acquiring call, before any I/O).
    pub(crate) fn with_lease(&self, lease: Duration) -> Handle {
        Handle {
            fixed_lease: Some(lease),
            ..self.clone()
        }
    }

    pub(crate) fn fixed_lease(&self) -> Option<Duration> {
        self.fixed_lease
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.client.shared
    }

    pub(crate) fn keys(&self) -> Result<&Arc<LockKeys>> {
        self.keys.as_ref().map_err(Error::clone)
    }

    /// (lease, fixed) of this handle's acquisitions: the client's lease,
    /// renewed by the watchdog, or the fixed one, checked.
    fn lease(&self) -> Result<(Duration, bool)> {
        match self.fixed_lease {
            None => Ok((self.shared().config.lease, false)),
            Some(lease) => {
                check_lease("a fixed lease", lease)?;
                let drift = &self.shared().config.clock_drift;
                drift.check_against("a fixed lease", lease)?;
                Ok((lease, true))
            }
        }
    }

    /// One acquire call through this handle asking for `ask` (see
    /// [`Acquisition`]); a bad name or lease is an error before any I/O.
    pub(crate) fn acquisition(&self, ask: Ask) -> Result<Acquisition<'_>> {
        let (lease, fixed) = self.lease()?;
        Ok(Acquisition {
            ask,
            shared: self.shared(),
            keys: self.keys()?,
            name: &self.name,
            lease,
            fixed,
        })
    }

    /// The one release, drop and give-back path of a hold an acquire call
    /// of this handle got.
    pub(crate) fn call_hold(&self, got: Acquired, ask: Ask) -> CallHold {
        CallHold::new(Arc::clone(&self.client), Arc::clone(&self.name), got, ask)
    }

    /// The lock's status, listing at most `waiters` waiters and `holders`
    /// holds, in one atomic read.
    pub(crate) fn status(&self, waiters: usize, holders: usize) -> Result<StatusReply> {
        let keys = self.keys()?;
        let op = Status {
            kind: keys.kind(),
            waiters,
            holders,
        };
        self.shared().call(keys, &op)
    }

    /// Whether anyone holds the lock now.
    pub(crate) fn is_locked(&self) -> Result<bool> {
        Ok(self.status(0, 0)?.live_holds > 0)
    }

    /// Frees every hold of the lock, whoever holds it, and hands it on to
    /// the queue in the same step.
    pub(crate) fn force_release(&self) -> Result<Freed> {
        let shared = self.shared();
        // A call key, so that the call delivered twice frees the lock once.
        let op = ForceRelease {
            call_key: format!("{}#{}", shared.client_id, shared.next_wait_id()),
        };
        let (freed, shortfall) = shared.call_write(self.keys()?, &op)?;
        match shortfall {
            Some(shortfall) => Err(shortfall),
            None => Ok(freed),
        }
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name)
            .field("fixed_lease", &self.fixed_lease)
            .finish_non_exhaustive()
    }
}
