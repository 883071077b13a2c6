//! The replication check that rides with every lock write when the client
//! asks for `sync_replicas`: a `WAIT` in the same pipeline, and what its
//! answer means.

use std::time::Duration;

use crate::error::{Error, ErrorKind};

/// How many replicas must acknowledge each write, and for how long to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncReplicas {
    pub replicas: u32,
    pub timeout: Duration,
}

impl SyncReplicas {
    /// The `WAIT` that makes a write count only once enough replicas have it.
    pub fn wait_command(self) -> redis::Cmd {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(self.replicas).arg(self.timeout.as_millis() as u64);
        cmd
    }

    /// [`ErrorKind::NotReplicated`] when `acknowledged` falls short.
    pub fn shortfall(self, acknowledged: i64) -> Option<Error> {
        (acknowledged < i64::from(self.replicas)).then(|| {
            Error::new(
                ErrorKind::NotReplicated,
                format!(
                    "{acknowledged} of the {} replicas asked for acknowledged the write within {:?}",
                    self.replicas, self.timeout
                ),
            )
        })
    }
}
