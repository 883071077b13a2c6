//! What a client found wrong with its servers as it started: kept as
//! values a program reads ([`Client::warnings`](crate::Client::warnings))
//! and logged once, so they reach a person whether or not the program
//! installed a logger.

use std::fmt;

/// The log target of every warning a client logs about its servers (at
/// `warn`, once, as it starts): a program that shows
/// [`Client::warnings`](crate::Client::warnings) itself can leave these
/// records out of its log.
pub const SERVER_WARNING_TARGET: &str = "fairlock::server_warning";

/// What is wrong with a server, as a value to branch on. Non-exhaustive: a
/// match needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerWarningKind {
    /// The server has a memory limit and a `maxmemory-policy` that may
    /// evict fairlock's keys (every one has a TTL, so `volatile-*`
    /// reaches them too): a held lock can vanish under memory pressure.
    MayEvict,
    /// The client's user may not read the eviction policy (its ACL denies
    /// `INFO memory`, or the server has no `INFO`), so whether the server
    /// may evict is unknown.
    EvictionUnknown,
}

/// Something a client found wrong with one of its servers as it started
/// (see [`Client::warnings`](crate::Client::warnings)). Its `Display` is
/// one line for a person: what is wrong, on which server, and what to
/// change.
///
/// ```no_run
/// use fairlock::ServerWarningKind;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// for warning in client.warnings() {
///     eprintln!("warning: {warning}");
///     if warning.kind() == ServerWarningKind::MayEvict {
///         // e.g. refuse to start in production
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerWarning {
    kind: ServerWarningKind,
    server: String,
    message: String,
}

impl ServerWarning {
    /// A warning of `kind` about `server` that says `message`, logged once
    /// (at `warn`, target [`SERVER_WARNING_TARGET`]).
    pub(crate) fn logged(kind: ServerWarningKind, server: &str, message: String) -> Self {
        log::warn!(target: SERVER_WARNING_TARGET, "fairlock: {message}");
        ServerWarning {
            kind,
            server: server.to_owned(),
            message,
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> ServerWarningKind {
        self.kind
    }

    /// The server it is about: a cluster master's address, else the
    /// client's target as its URL names it (the password redacted).
    pub fn server(&self) -> &str {
        &self.server
    }
}

/// One line: what is wrong, on which server, and what to change.
impl fmt::Display for ServerWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
