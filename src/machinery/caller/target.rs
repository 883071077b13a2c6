//! One named lock of one kind as a handle names it: the name, and its keys
//! or why the name is invalid (every call reports it, before any I/O).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::protocol::keys::shown;
use crate::protocol::{LockKeys, LockKind};

/// A lock's name and keys. Cheap to clone: a handle, every guard and every
/// multi-lock part carry one.
#[derive(Clone)]
pub struct Target {
    name: Arc<str>,
    kind: LockKind,
    keys: std::result::Result<Arc<LockKeys>, Arc<Error>>,
}

impl Target {
    /// The `kind` of lock called `name`, its keys under `prefix`.
    pub(crate) fn new(prefix: &str, name: &str, kind: LockKind) -> Self {
        let keys = LockKeys::of_kind(prefix, name, kind);
        Target {
            name: name.into(),
            kind,
            keys: keys.map(Arc::new).map_err(Arc::new),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The keys, or why the name is invalid.
    pub(crate) fn keys(&self) -> Result<&Arc<LockKeys>> {
        self.keys.as_ref().map_err(|err| Error::clone(err))
    }

    /// As [`keys`](Self::keys), an invalid name told as `call` of this
    /// lock: `acquire of mutex "": lock name is empty`.
    pub(crate) fn keys_for(&self, call: &str) -> Result<&Arc<LockKeys>> {
        self.keys().map_err(|err| self.during(call, err))
    }

    /// `err` told as the error of `call` of this lock: `acquire of
    /// semaphore "pool": a call may take ...` (an election's in its words:
    /// [`LockKind::call`]).
    pub(crate) fn during(&self, call: &str, err: Error) -> Error {
        let (call, name) = (self.kind.call(call), shown(&self.name));
        err.during(format_args!("{call} {name}"))
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format!("{:?}", self.name))
    }
}
