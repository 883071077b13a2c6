//! The one error type of the crate, with a kind a caller can branch on.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// What went wrong, coarse enough to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The lock name is empty or longer than [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes.
    InvalidName,
    /// A client setting or URL was rejected before any I/O happened.
    InvalidConfig,
    /// Redis could not be reached, or did not answer within the configured timeouts.
    Connection,
    /// The hold this guard stood for is gone: its lease ran out or it was force-unlocked.
    LeaseLost,
    /// A key where this lock keeps its state holds someone else's data; it was left untouched.
    KeyConflict,
    /// Fewer replicas than [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas)
    /// asks for acknowledged a lock write in time. An acquisition is rolled
    /// back before this is reported; a release did happen on the master.
    NotReplicated,
    /// Redis answered with an error or a reply fairlock does not understand
    /// (for example, an ACL that forbids a needed command).
    Server,
    /// Not Redis's doing: the system refused fairlock something (a
    /// background thread could not start), or fairlock broke one of its own
    /// invariants (a bug worth reporting).
    Internal,
}

/// What a failed call's error says about sending it again: decided once,
/// when the error is made, from its cause (as redis-rs's `retry_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Redis answered, or the call was refused before any I/O: sending it
    /// again changes nothing.
    No,
    /// The connection was found closed by the server (reset, broken pipe,
    /// end of stream), not refused: the call may go out on another one.
    OtherConnection,
    /// The cluster slot of the call's keys was being moved between masters
    /// (`TRYAGAIN`, or an `ASK` or `MOVED` not yet followed): the command
    /// did not run, and can once the move ends.
    AfterSlotMove,
    /// A replica answered as if master (`READONLY`): this connection goes
    /// to a demoted master; a new one finds its successor.
    DemotedMaster,
    /// Redis is unreachable or stalled (a timeout, a refused connection, no
    /// pooled connection in time): a call that was sent may or may not have
    /// run; on a cluster a fresh slot map may find a promoted master.
    Unreachable,
}

impl Retry {
    /// The classification of an error whose cause says no more than its
    /// kind: a connection error may be retried, nothing else.
    fn of_kind(kind: ErrorKind) -> Retry {
        if kind == ErrorKind::Connection {
            Retry::Unreachable
        } else {
            Retry::No
        }
    }
}

/// The error type of every fallible fairlock call.
///
/// The underlying cause, when there is one (a `redis::RedisError`, an
/// `r2d2::Error`), is kept and exposed through [`source`](StdError::source).
/// Cheap to clone: the cause is shared.
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    retry: Retry,
    message: Cow<'static, str>,
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
}

/// `Result` with fairlock's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            kind,
            retry: Retry::of_kind(kind),
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn with_source(
        kind: ErrorKind,
        message: impl Into<Cow<'static, str>>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Error {
            kind,
            retry: Retry::of_kind(kind),
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True when Redis was unreachable or too slow: retrying later may succeed.
    pub fn is_connection(&self) -> bool {
        self.kind == ErrorKind::Connection
    }

    /// True when a Redis call ran out of time (a subset of [`is_connection`](Self::is_connection)).
    pub fn is_timeout(&self) -> bool {
        self.redis_error()
            .is_some_and(redis::RedisError::is_timeout)
            || self
                .source
                .as_deref()
                .is_some_and(|s| s.is::<r2d2::Error>())
    }

    /// The Redis error behind this one, if that is its cause.
    pub(crate) fn redis_error(&self) -> Option<&redis::RedisError> {
        self.source.as_deref()?.downcast_ref()
    }

    /// What this error says about sending the call again.
    pub(crate) fn retry(&self) -> Retry {
        self.retry
    }

    /// True when the connection was found closed by the server, not
    /// refused (see [`Retry::OtherConnection`]).
    pub(crate) fn is_dropped_connection(&self) -> bool {
        self.retry == Retry::OtherConnection
    }

    /// True when the call's cluster slot was being moved (see
    /// [`Retry::AfterSlotMove`]).
    pub(crate) fn is_slot_moving(&self) -> bool {
        self.retry == Retry::AfterSlotMove
    }

    /// The same error with its cause's text appended to the message, for
    /// r2d2, which keeps only the text of a failed connect (so a denied
    /// `ROLE` still says so in `build`'s error).
    pub(crate) fn spelled_out(self) -> Self {
        match &self.source {
            Some(source) => Error {
                message: format!("{}: {source}", self.message).into(),
                ..self
            },
            None => self,
        }
    }

    /// True when a guard's hold was lost before it was released.
    pub fn is_lease_lost(&self) -> bool {
        self.kind == ErrorKind::LeaseLost
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        use redis::{ErrorKind as K, ServerErrorKind as S};
        if err.code() == Some("WRONGTYPE") {
            // Scripts read every key before writing it, so they stopped here
            // before touching the foreign value.
            return Error::with_source(
                ErrorKind::KeyConflict,
                "a key of this lock holds data fairlock did not write; it was left untouched",
                err,
            );
        }
        let unavailable = err.is_io_error()
            || err.is_timeout()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || matches!(
                err.kind(),
                K::Server(
                    S::BusyLoading
                        | S::TryAgain
                        | S::ClusterDown
                        | S::MasterDown
                        | S::ReadOnly
                        | S::Moved
                        | S::Ask
                ) | K::ClusterConnectionNotFound
                    | K::MasterNameNotFoundBySentinel
            );
        if unavailable {
            let message = if err.is_timeout() {
                "redis call timed out"
            } else {
                "redis is unreachable"
            };
            let retry = if matches!(err.kind(), K::Server(S::TryAgain | S::Ask | S::Moved)) {
                Retry::AfterSlotMove
            } else if err.code() == Some("READONLY") {
                Retry::DemotedMaster
            } else if err.is_connection_dropped() && !err.is_connection_refusal() {
                Retry::OtherConnection
            } else {
                Retry::Unreachable
            };
            Error {
                retry,
                ..Error::with_source(ErrorKind::Connection, message, err)
            }
        } else {
            Error::with_source(ErrorKind::Server, "redis returned an error", err)
        }
    }
}

impl From<r2d2::Error> for Error {
    fn from(err: r2d2::Error) -> Self {
        Error::with_source(
            ErrorKind::Connection,
            "no redis connection could be had within the connect timeout",
            err,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_send_sync_static() {
        fn assert_bounds<T: StdError + Send + Sync + Clone + 'static>() {}
        assert_bounds::<Error>();
    }

    #[test]
    fn display_is_the_message_and_source_is_kept() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = Error::from(redis::RedisError::from(io));
        assert_eq!(err.kind(), ErrorKind::Connection);
        assert!(err.is_connection());
        assert_eq!(err.to_string(), "redis is unreachable");
        assert!(err.source().is_some());
    }
}
