//! One named lock of one kind as a handle names it: the name, and its keys
//! or why the name is invalid (every call reports it, before any I/O).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::protocol::{LockKeys, LockKind};

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
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format!("{:?}", self.name))
    }
}
