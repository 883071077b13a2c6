//! One named lock of one kind as a handle names it: the name, and its keys
//! or why the name is invalid (every call reports it, before any I/O).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::machinery::shared::Shared;
use crate::protocol::{ForceRelease, Freed, LockKeys, LockKind, Revoke, Revoked};

/// A lock's name and keys. Cheap to clone: a handle, every guard and every
/// multi-lock part carry one.
#[derive(Clone)]
pub struct Target {
    name: Arc<str>,
    keys: std::result::Result<Arc<LockKeys>, Arc<Error>>,
}

impl Target {
    /// The `kind` of lock called `name`, its keys under `prefix`.
    pub(crate) fn new(prefix: &str, name: &str, kind: LockKind) -> Self {
        Target {
            name: name.into(),
            keys: LockKeys::of_kind(prefix, name, kind)
                .map(Arc::new)
                .map_err(Arc::new),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The keys, or why the name is invalid.
    pub(crate) fn keys(&self) -> Result<&Arc<LockKeys>> {
        self.keys.as_ref().map_err(|err| Error::clone(err))
    }

    /// Frees every hold of the lock, whoever holds it, and hands it on to
    /// the queue in the same step.
    pub(crate) fn force_release(&self, shared: &Shared) -> Result<Freed> {
        // A call key, so that the call delivered twice frees the lock once.
        let op = ForceRelease {
            call_key: format!("{}#{}", shared.client_id(), shared.next_wait_id()),
        };
        shared.call_write(self.keys()?, &op)?.replicated()
    }

    /// Asks every hold of the lock present now to let go; frees nothing.
    /// Returns how many holds it asked.
    pub(crate) fn revoke(&self, shared: &Shared) -> Result<usize> {
        let revoked: Revoked = shared.call_write(self.keys()?, &Revoke)?.replicated()?;
        Ok(usize::try_from(revoked.holds).unwrap_or(usize::MAX))
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format!("{:?}", self.name))
    }
}
