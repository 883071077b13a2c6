//! What a pool's last attempt to open a connection came to, so that a
//! checkout that ran out of time tells a server that cannot be had (an
//! attempt failed, and none has succeeded since) from a pool that was busy
//! or only slow to open one (no attempt failed): at a call's deadline the
//! second is the deadline's doing, not an outage (docs/failures.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::Error;

/// Set by the pool when an attempt to open a connection fails, cleared when
/// one succeeds; its clones share it.
#[derive(Debug, Clone, Default)]
pub(super) struct LastOpen(Arc<AtomicBool>);

impl LastOpen {
    /// True when the pool's last attempt to open a connection failed.
    pub(super) fn failed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Told of each failed attempt (nothing is logged: a call that needed the
/// connection reports the cause).
impl r2d2::HandleError<Error> for LastOpen {
    fn handle_error(&self, _: Error) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Told of each connection opened.
impl<C> r2d2::CustomizeConnection<C, Error> for LastOpen {
    fn on_acquire(&self, _: &mut C) -> Result<(), Error> {
        self.0.store(false, Ordering::Relaxed);
        Ok(())
    }
}
