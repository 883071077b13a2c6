//! The replication check that rides with every lock write when the client
//! asks for `sync_replicas`: a `WAIT` in the same pipeline, and what its
//! answer means.

use std::time::Duration;

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::unexpected;

/// How many replicas must acknowledge each write, and for how long to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncReplicas {
    /// The replicas that must acknowledge each write.
    pub replicas: u32,
    /// How long a write waits for them.
    pub timeout: Duration,
}

impl SyncReplicas {
    /// The `WAIT` that makes a write count only once enough replicas have it.
    /// Redis counts its timeout in whole milliseconds, and reads 0 as "for
    /// ever": a timeout under 1 ms (above zero, as the builder checks) waits
    /// 1 ms.
    pub fn wait_command(self) -> redis::Cmd {
        let timeout_ms = (self.timeout.as_millis() as u64).max(1);
        redis::cmd("WAIT").arg(self.replicas).arg(timeout_ms).take()
    }

    /// [`ErrorKind::NotReplicated`] when the number its `WAIT` answered
    /// (`reply`) falls short; the error Redis answered instead, or one for
    /// a reply that is no number (or none).
    pub fn shortfall(self, reply: Option<Value>) -> Result<Option<Error>> {
        let acknowledged = match reply {
            Some(Value::Int(acknowledged)) => acknowledged,
            Some(Value::ServerError(err)) => return Err(Error::from_server(err)),
            other => return Err(unexpected(&other)),
        };
        let SyncReplicas { replicas, timeout } = self;
        Ok((acknowledged < i64::from(replicas)).then(|| {
            let message = format!(
                "{acknowledged} of the {replicas} replicas asked for acknowledged the write within {timeout:?}"
            );
            Error::new(ErrorKind::NotReplicated, message)
        }))
    }
}

/// A write's reply, and whether enough replicas acknowledged it. The
/// write happened on the master either way, so a caller that acts on the
/// reply (wakes the waiters a release admitted, abandons a hold too few
/// replicas saw) takes both apart; [`replicated`](Self::replicated) makes
/// a shortfall the error.
#[must_use = "a write too few replicas acknowledged is an error to report"]
#[derive(Debug)]
pub struct Written<R> {
    reply: R,
    replicated: crate::error::Result<()>,
}

impl<R> Written<R> {
    /// `reply`, acknowledged by too few replicas when `shortfall` says so.
    pub fn new(reply: R, shortfall: Option<Error>) -> Self {
        let replicated = shortfall.map_or(Ok(()), Err);
        Written { reply, replicated }
    }

    /// The reply, or [`ErrorKind::NotReplicated`] when too few replicas
    /// acknowledged the write.
    pub fn replicated(self) -> crate::error::Result<R> {
        self.replicated.map(|()| self.reply)
    }

    /// The same, a shortfall's error as `named` words it (naming the call).
    pub fn named(self, named: impl FnOnce(Error) -> Error) -> Self {
        let replicated = self.replicated.map_err(named);
        Written { replicated, ..self }
    }

    /// The reply, and whether the write was replicated as asked.
    pub fn into_parts(self) -> (R, crate::error::Result<()>) {
        (self.reply, self.replicated)
    }
}
