//! The one error type of the crate, with a kind a caller can branch on.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod not_within;
mod server_codes;

use server_codes::code_of;
pub(crate) use server_codes::{is_unknown_command, refused_for_now, SENTINEL_CREDENTIALS_REFUSED};

/// What went wrong, coarse enough to branch on. Non-exhaustive: a match
/// needs a `_` arm.
///
/// ```no_run
/// use fairlock::ErrorKind;
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// match client.fair_mutex("nightly-report").try_lock_for(Duration::from_secs(5)) {
///     Ok(Some(guard)) => guard.unlock()?,
///     Ok(None) => println!("busy"),
///     Err(err) if err.is_retryable() => println!("retry later: {err}"), // Redis down, replicas behind
///     Err(err) if err.kind() == ErrorKind::Auth => return Err(err), // fix the credentials
///     Err(err) => return Err(err), // a bad name, an ACL, a foreign key, ...: not worth retrying
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The lock name is empty or longer than [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes.
    InvalidName,
    /// A client setting or URL was rejected: before any I/O (a scheme that
    /// is not Redis's, a bad setting), or at the first connection (a
    /// database number the server does not have, or something other than
    /// Redis answering at the URL's address, a plain Redis where a
    /// `redis+sentinel` URL names a Sentinel, a server not in cluster mode
    /// where a `redis+cluster` URL names a cluster node), or at a call (a
    /// cluster node answering `MOVED` to a plain URL), or the server's
    /// own settings are ones the client was told to refuse (an evicting
    /// `maxmemory-policy` with
    /// [`require_noeviction`](crate::ClientBuilder::require_noeviction)).
    /// Retrying cannot help.
    InvalidConfig,
    /// Redis could not be reached, or did not answer within the configured
    /// timeouts, or answered that it cannot serve now (`LOADING` its data,
    /// `BUSY` running a long script, a new connection over its
    /// `maxclients`): retrying later may succeed.
    Connection,
    /// Redis refused this client's credentials: a wrong user or password
    /// (`WRONGPASS`), or none given where the server asks for one
    /// (`NOAUTH`). Retrying cannot help: fix the URL's credentials.
    Auth,
    /// Redis's ACL denies this client's user a command, key or channel
    /// fairlock needs (`NOPERM`; docs/security.md lists them). Retrying
    /// cannot help: grant them.
    Permission,
    /// The hold this guard stood for is gone: its lease ran out, it was
    /// force-unlocked, or the server lost it (a restart, a failover); the
    /// message says which when the client knows.
    LeaseLost,
    /// A key where this lock keeps its state holds someone else's data; it was left untouched.
    KeyConflict,
    /// Fewer replicas than [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas)
    /// asks for acknowledged a lock write in time. An acquisition is rolled
    /// back before this is reported; a release did happen on the master,
    /// and so did a force unlock or a revocation (which are then not
    /// retryable).
    NotReplicated,
    /// Two clients disagree on the number of permits of one semaphore: this
    /// call's N is not the one the semaphore was created with (kept while it
    /// is in use, and a fence life after). Nothing was written; the
    /// message names the semaphore, both numbers, how long the semaphore's
    /// lasts and how to change it.
    PermitsMismatch,
    /// A call asks for more permits than its semaphore has now, since
    /// [`FairSemaphore::set_permits`](crate::FairSemaphore::set_permits)
    /// changed their number: it could never be admitted, so it is refused
    /// (a call already queued is taken out of the queue and told, even
    /// when the number was raised again before it heard). Nothing is held;
    /// the message names both numbers (or, for a call refused while queued,
    /// the permits it asked for).
    PermitsExceeded,
    /// A thread that holds a reader-writer lock for reading (and not for
    /// writing) asked to write it (or, holding a read, for an upgradable
    /// read; or asked to upgrade while it holds other guards of the lock):
    /// waiting would deadlock the thread on itself, so the call is refused.
    /// Nothing was written; release the read guards first.
    UpgradeRefused,
    /// The lock's data in Redis is of another data format than this build
    /// reads and writes ([`DATA_FORMAT`](crate::DATA_FORMAT)): another
    /// fairlock version, of another layout, uses the lock (or one from
    /// before data formats). Nothing was read or written, and retrying
    /// changes nothing; the message names the lock and both formats. Every
    /// client of one lock must use builds of one format (docs/compatibility.md).
    FormatMismatch,
    /// Redis answered with an error fairlock has no kind for (an `OOM`
    /// refusal, retryable, a script's error), or with a reply it cannot read; the
    /// message carries the server's words. An ACL's refusal is
    /// [`Permission`](Self::Permission), something other than Redis at the
    /// address [`InvalidConfig`](Self::InvalidConfig).
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
    /// No pooled connection was free in time, and none failed to open:
    /// the pool had every connection it may open, all busy with this
    /// client's other calls, or it was still opening one (a loaded
    /// machine, a slow handshake). Nothing was sent; at a call's deadline
    /// that is the deadline's doing, not an outage's.
    PoolBusy,
    /// The call failed with nothing held or queued, and the same call may
    /// succeed now: a multi-lock's part lost while the set waited.
    Call,
    /// The call's change was made on the master, too few replicas saw it,
    /// or may have been made (its reply never came): sent again, it would
    /// act anew on whoever holds the lock then (a force release would free
    /// the next holder).
    Made,
}

/// What a refusal that passes (`Error::is_refused_for_now`) says of its
/// call, but for one that consumed its guard (`Error::of_a_consumed_guard`).
const TRY_AGAIN: &str = "nothing changed (try again once this passes)";

/// The error type of every fallible fairlock call.
///
/// The underlying cause, when there is one (a `redis::RedisError`, an
/// `r2d2::Error`), is kept and exposed through [`source`](StdError::source),
/// and its text ends the `Display`, a one-line message for a log (left out
/// where the message says it better: a reply not in Redis's protocol, a
/// first connection's timeout). Cheap to
/// clone: the cause is shared. [`kind`](Self::kind) is what to branch on.
///
/// ```
/// use fairlock::{Client, ErrorKind};
/// // A bad setting fails before any I/O, so this runs without a server.
/// let err = Client::builder("redis://127.0.0.1:6379").pool_size(0).build().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidConfig);
/// assert!(!err.is_retryable());
/// println!("{err}"); // says which setting
/// ```
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    retry: Retry,
    message: Cow<'static, str>,
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
    /// The message says all the source's text would (a reply that is not
    /// Redis's protocol, over several lines): `Display` leaves it out,
    /// `source()` still gives it.
    source_said: bool,
}

/// `Result` with fairlock's [`Error`].
///
/// ```no_run
/// fn nightly_report(client: &fairlock::Client) -> fairlock::Result<u64> {
///     let guard = client.fair_mutex("nightly-report").lock()?;
///     Ok(guard.fencing_token())
/// }
/// # fn main() -> fairlock::Result<()> {
/// # let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// # nightly_report(&client)?;
/// # Ok(()) }
/// ```
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A setting, a URL or an argument refused before any I/O
    /// ([`ErrorKind::InvalidConfig`]).
    pub(crate) fn invalid_config(message: impl Into<Cow<'static, str>>) -> Self {
        Error::new(ErrorKind::InvalidConfig, message)
    }

    pub(crate) fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        // A cause that says no more than its kind: a connection error may be
        // retried, nothing else.
        let retry = match kind {
            ErrorKind::Connection => Retry::Unreachable,
            _ => Retry::No,
        };
        Error {
            kind,
            retry,
            message: message.into(),
            source: None,
            source_said: false,
        }
    }

    pub(crate) fn with_source(
        kind: ErrorKind,
        message: impl Into<Cow<'static, str>>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Error {
            source: Some(Arc::new(source)),
            ..Error::new(kind, message)
        }
    }

    /// The kind of failure.
    ///
    /// ```
    /// let err = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .key_prefix("has{braces}")
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), fairlock::ErrorKind::InvalidConfig);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True when the same call, sent again later, may succeed: Redis was
    /// unreachable or too slow ([`ErrorKind::Connection`]), or too few
    /// replicas acknowledged a write in time ([`ErrorKind::NotReplicated`]:
    /// nothing is held, and the replicas may catch up; not a force unlock's
    /// or a revocation's, made on the master all the same, which sent
    /// again would free or ask whoever holds the lock then), or Redis refused
    /// it before running it for a reason that passes (a
    /// [`Server`](ErrorKind::Server) error of code `OOM`, `MISCONF` or
    /// `NOREPLICAS`: nothing changed). False for what
    /// retrying cannot mend: refused credentials ([`ErrorKind::Auth`]), a
    /// denied command ([`ErrorKind::Permission`]), a bad URL, database or
    /// something other than Redis at the address
    /// ([`ErrorKind::InvalidConfig`]), a lost hold
    /// ([`ErrorKind::LeaseLost`], but for a multi-lock's part lost while
    /// the set waited: the call gave back every part), another build's data
    /// ([`ErrorKind::FormatMismatch`]), and every other kind.
    ///
    /// The predicate to branch a retry on; [`is_connection`](Self::is_connection)
    /// says only whether Redis could be had.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mutex = client.fair_mutex("nightly-report");
    /// let guard = loop {
    ///     match mutex.lock() {
    ///         Ok(guard) => break guard,
    ///         Err(err) if err.is_retryable() => std::thread::sleep(Duration::from_secs(1)), // try again
    ///         Err(err) => return Err(err), // fix something first
    ///     }
    /// };
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn is_retryable(&self) -> bool {
        (matches!(self.kind, ErrorKind::Connection | ErrorKind::NotReplicated)
            && self.retry != Retry::Made)
            || self.retry == Retry::Call
            || self.is_refused_for_now()
    }

    /// True when Redis could not be reached, or did not answer in time
    /// ([`ErrorKind::Connection`]): what happened, where
    /// [`is_retryable`](Self::is_retryable) says what to do about it (it is
    /// true for these and for [`ErrorKind::NotReplicated`] as well).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Err(err) = client.fair_mutex("nightly-report").is_locked() {
    ///     if err.is_connection() {
    ///         eprintln!("Redis is away: {err}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_connection(&self) -> bool {
        self.kind == ErrorKind::Connection
    }

    /// True when a Redis call ran out of time (a subset of [`is_connection`](Self::is_connection)).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.fair_mutex("nightly-report").is_locked() {
    ///     Err(err) if err.is_timeout() => eprintln!("Redis too slow: {err}"),
    ///     other => println!("{:?}", other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_timeout(&self) -> bool {
        // A Redis call that timed out, or no pooled connection in time.
        self.is_reply_timeout()
            || self.is_pool_busy()
            || (self.source.as_deref()).is_some_and(|s| s.is::<r2d2::Error>())
    }

    /// True when Redis refused the call before running any of it, for a
    /// reason that passes: `OOM` (over its `maxmemory`), `NOREPLICAS`
    /// (fewer replicas than `min-replicas-to-write`) or `MISCONF` (its last
    /// snapshot failed, `stop-writes-on-bgsave-error`). The call changed
    /// nothing and may be sent again later (`is_retryable`); the kind stays
    /// [`Server`](ErrorKind::Server), as a lock call refused so fails at once
    /// (a queued call's poll rides it out as an outage, queue_wait.rs).
    pub(crate) fn is_refused_for_now(&self) -> bool {
        (self.redis_error().and_then(code_of)).is_some_and(refused_for_now)
    }

    /// True when a cluster node answered that the cluster is down
    /// (`CLUSTERDOWN`): nothing ran, the node was reached, and the call can
    /// go again once a failover has the cluster up.
    pub(crate) fn is_cluster_down(&self) -> bool {
        self.redis_error().and_then(code_of) == Some("CLUSTERDOWN")
    }

    /// True when a node answered that it cannot run the call for now: the
    /// cluster is down (`CLUSTERDOWN`), the node is loading its data
    /// (`LOADING`) or running someone's long script (`BUSY`), or it takes
    /// no more connections (its `maxclients`). Nothing ran, and the node
    /// was reached: the connections that reach it are sound, and no slot
    /// map is to blame.
    pub(crate) fn is_not_serving(&self) -> bool {
        let err = self.redis_error();
        matches!(
            err.and_then(code_of),
            Some("CLUSTERDOWN" | "LOADING" | "BUSY")
        ) || err.is_some_and(server_codes::is_at_maxclients)
    }

    /// True when a request went out and its reply did not come in time
    /// (a stalled or slow server), not when no connection could be had.
    pub(crate) fn is_reply_timeout(&self) -> bool {
        self.redis_error().is_some_and(|err| err.is_timeout())
    }

    /// The TLS refusal of a certificate, when that is what failed, said
    /// after "redis at <server>": this client's of the server's (an
    /// unknown issuer, expired, another host's), or the server's of this
    /// client's (none given, another CA's: its alert). The same server
    /// refuses the same again.
    #[cfg(feature = "tls")]
    pub(crate) fn refused_certificate(&self) -> Option<String> {
        use rustls::{AlertDescription as A, Error as Tls};
        let tls = not_within::io_error(self.redis_error()?)?.get_ref()?;
        match tls.downcast_ref()? {
            tls @ Tls::InvalidCertificate(_) => Some(format!(
                "showed a TLS certificate this client refuses ({tls}): check the server's \
                 certificate, the URL's host and tls_root_cert_pem"
            )),
            tls @ Tls::AlertReceived(
                A::CertificateRequired
                | A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA,
            ) => Some(format!(
                "refused this client's TLS certificate ({tls}): check tls_client_cert_pem"
            )),
            _ => None,
        }
    }

    /// Without TLS, no certificate.
    #[cfg(not(feature = "tls"))]
    pub(crate) fn refused_certificate(&self) -> Option<String> {
        None
    }

    /// The cause, when it is a redis error.
    fn redis_error(&self) -> Option<&redis::RedisError> {
        self.source.as_deref()?.downcast_ref()
    }

    /// True when no pooled connection was free in time and none failed to
    /// open ([`Retry::PoolBusy`]).
    pub(crate) fn is_pool_busy(&self) -> bool {
        self.retry == Retry::PoolBusy
    }

    /// What this error says about sending the call again.
    pub(crate) fn retry(&self) -> Retry {
        self.retry
    }

    /// True when the call's cluster slot was being moved (see
    /// [`Retry::AfterSlotMove`]).
    pub(crate) fn is_slot_moving(&self) -> bool {
        self.retry == Retry::AfterSlotMove
    }

    /// The same error, its message naming the call it came from (`release
    /// of mutex "jobs": redis is unreachable: ...`).
    pub(crate) fn during(self, call: fmt::Arguments<'_>) -> Self {
        let message = format!("{call}: {}", self.message);
        self.reworded(message)
    }

    /// The same error, its call named `now` where it said `was` (a step
    /// taken for another call: a handoff's confirming renewal).
    pub(crate) fn renamed(self, was: &str, now: &str) -> Self {
        let message = self.message.replacen(was, now, 1);
        self.reworded(message)
    }

    /// The same error, from a call that holds nothing: the call may be
    /// made again ([`is_retryable`](Self::is_retryable)).
    pub(crate) fn worth_calling_again(self) -> Self {
        self.retried(Retry::Call)
    }

    /// The same error, of a write not to be sent again (`Retry::Made`) when
    /// it was made on the master all the same (`NotReplicated`) or may have
    /// been (sent, its reply never came); one refused before it ran keeps
    /// its retry.
    pub(crate) fn made_all_the_same(self) -> Self {
        let may_have_run = matches!(self.retry, Retry::Unreachable | Retry::OtherConnection);
        match self.kind == ErrorKind::NotReplicated || may_have_run {
            true => self.retried(Retry::Made),
            false => self,
        }
    }

    /// The same error, whose call sent again does what `retry` says.
    fn retried(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// The same error, its source's words left out (`source()` still
    /// gives them): a timeout's figure that says nothing of Redis (a
    /// request given only what was left of its call's time).
    pub(crate) fn without_its_figure(mut self) -> Self {
        self.source_said = true;
        self
    }

    /// The same error, of a call that consumed its guard (an unlock, a
    /// change of access): a refusal that passes changed nothing at Redis,
    /// yet there is no call left to send again, and the hold is given back
    /// all the same (`Guard::unlock`'s errors).
    pub(crate) fn of_a_consumed_guard(self) -> Self {
        let given_back = "nothing changed yet, the guard is consumed and its hold given back \
                          all the same (by the watchdog once redis accepts it, or at its \
                          lease's end)";
        self.renamed(TRY_AGAIN, given_back)
    }

    /// The same error saying `message` instead (the kind, the source and
    /// what a retry does stay).
    pub(crate) fn reworded(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.message = message.into();
        self
    }

    /// The error of a client's first connection to `server` (or of its
    /// first request), as a newcomer reads it: something that
    /// answers but not in Redis's protocol is
    /// [`ErrorKind::InvalidConfig`] (the URL names the wrong port: retrying
    /// the same address meets the same service), in one line, as is one
    /// that does not know a command of the start (a Sentinel, or a data
    /// server where the URL says Sentinel); a timeout
    /// says which step got no reply and within how long: a reply's
    /// (`not_within::NotWithin`), the connect timeout's or the command
    /// timeout's as its timeout is, else the connect's. Any other
    /// error says it was met connecting to `server`.
    pub(crate) fn at_first_contact(
        self,
        server: &str,
        connect: Duration,
        command: Duration,
    ) -> Self {
        let redis_err = self.redis_error();
        let tls = server.starts_with("rediss") || server.starts_with("valkeys");
        let not_redis = redis_err.is_some_and(|err| err.kind() == redis::ErrorKind::Parse);
        // A Sentinel at a `redis://` URL, a data server at a Sentinel one.
        let unknown = redis_err
            .filter(|err| server_codes::is_unknown_command(err))
            .and_then(redis::RedisError::detail);
        let message = if not_redis {
            format!(
                "what answers at {server} is not a redis server (its reply is not in \
                 redis's protocol): check the URL's host and port"
            )
        } else if let Some(detail) = unknown {
            format!(
                "what answers at {server} is not the server the URL says ({}): check the \
                 URL's scheme and port (redis+sentinel:// for Sentinels)",
                detail.trim_end_matches([' ', ',', ':'])
            )
        } else if let Some(refused) = self.refused_certificate() {
            format!("redis at {server} {refused}")
        } else if self.kind == ErrorKind::Connection && self.is_timeout() {
            let waited = redis_err.and_then(not_within::not_within_of);
            let replied = "accepted the connection and sent no reply";
            let unanswered = "did not answer the connect or its handshake";
            let (step, within, setting) = match waited.filter(|waited| waited.reply) {
                Some(waited) if waited.timeout == command => (replied, command, "command_timeout"),
                Some(_) => (replied, connect, "connect_timeout"),
                None => (unanswered, connect, "connect_timeout"),
            };
            let within = within.as_millis();
            // A TLS client's handshake is read by a plain port as a command never ended.
            let plain = if tls {
                " (or the port does not speak TLS)"
            } else {
                ""
            };
            let message =
                format!("redis at {server} {step}{plain} within {within} ms (the {setting})");
            return self.reworded(message).without_its_figure();
        } else {
            // A TLS port resets a plaintext client at its first request.
            let reset = (redis_err.and_then(not_within::io_error))
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionReset);
            let err = match reset && !tls && !server.contains("unix") {
                true => self.renamed(
                    "redis is unreachable",
                    "redis reset the connection (or the port speaks TLS only: rediss://)",
                ),
                false => self,
            };
            return err.during(format_args!("connecting to {server}"));
        };
        // Retrying the same address meets the same service.
        Error {
            source: self.source,
            ..Error::invalid_config(message).without_its_figure()
        }
    }

    /// True when a guard's hold was lost before it was released.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock()?;
    /// // ... a long pause: the lease ran out, someone else may hold the lock ...
    /// if let Err(err) = guard.unlock() {
    ///     if err.is_lease_lost() {
    ///         eprintln!("our writes after the lease ran out must be undone: {err}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.kind == ErrorKind::LeaseLost
    }

    /// What a redis error means to a lock call. Not a `From` impl, so that
    /// the redis crate's error type stays out of fairlock's API.
    pub(crate) fn from_redis(err: redis::RedisError) -> Self {
        use redis::{ErrorKind as K, ServerErrorKind as S};
        if let Some((kind, message)) = server_codes::known(&err) {
            return Error::with_source(kind, message, err);
        }
        // Refused by the redis crate before anything was sent (a TLS
        // setting it cannot honour, such as a URL's `#insecure`).
        if err.kind() == K::InvalidClientConfig {
            return Error::with_source(ErrorKind::InvalidConfig, "invalid redis settings", err);
        }
        // What a retry does and what to say, decided together.
        let (retry, message) = if server_codes::is_slot_moving(&err) {
            let message = "the lock's cluster slot is being moved between masters (nothing \
                           ran; it can once the move ends)";
            (Retry::AfterSlotMove, message)
        } else if code_of(&err) == Some("READONLY") {
            let message = "redis answered as a read-only replica (a master demoted by a \
                           failover, or a URL that names a replica: fairlock writes, so it \
                           needs the master's address)";
            (Retry::DemotedMaster, message)
        } else if err.is_connection_dropped() && !err.is_connection_refusal() {
            (Retry::OtherConnection, "redis is unreachable")
        } else if err.is_timeout() {
            (Retry::Unreachable, "redis call timed out")
        } else if code_of(&err) == Some("CLUSTERDOWN") {
            let message = "the redis cluster is down (nothing ran; it can once the cluster \
                           serves every slot again: a lost master failed over)";
            (Retry::Unreachable, message)
        } else if server_codes::is_at_maxclients(&err) {
            let message =
                "redis has all the clients its maxclients allows (try again once some leave)";
            (Retry::Unreachable, message)
        } else if code_of(&err) == Some("LOADING") {
            let message = "redis is loading its data (nothing ran; it can once the data is in)";
            (Retry::Unreachable, message)
        } else if code_of(&err) == Some("BUSY") {
            // Someone's long script: as a stalled server, which times out
            // until it replies `BUSY`.
            let message = "redis is busy running a script (nothing ran; it can once the script \
                           ends or is killed)";
            (Retry::Unreachable, message)
        } else if err.is_io_error()
            || err.is_connection_refusal()
            || matches!(
                err.kind(),
                K::Server(S::MasterDown)
                    | K::ClusterConnectionNotFound
                    | K::MasterNameNotFoundBySentinel
            )
        {
            (Retry::Unreachable, "redis is unreachable")
        } else {
            let message: Cow<_> = if code_of(&err).is_some_and(refused_for_now) {
                format!("redis refused the call before running it, {TRY_AGAIN}").into()
            } else {
                "redis returned an error".into()
            };
            return Error::with_source(ErrorKind::Server, message, err);
        };
        Error::with_source(ErrorKind::Connection, message, err).retried(retry)
    }

    /// An error reply of the server (a script's error, `NOSCRIPT`, ...), as
    /// [`from_redis`](Self::from_redis) reads it.
    pub(crate) fn from_server(err: redis::ServerError) -> Self {
        Self::from_redis(err.into())
    }

    /// A pooled connection had only once the call's time was up: as a
    /// pool wait that ran out ([`Retry::PoolBusy`]), and nothing was sent.
    pub(crate) fn connection_too_late() -> Self {
        let message = "no redis connection could be had in time (one came only once the \
                       call's time was up; nothing was sent)";
        Error::new(ErrorKind::Connection, message).retried(Retry::PoolBusy)
    }

    /// No pooled connection in time; `busy`: none failed to open (see
    /// [`Retry::PoolBusy`]). Not a `From`
    /// impl, so that r2d2's error type stays out of fairlock's API.
    pub(crate) fn from_pool(err: r2d2::Error, busy: bool) -> Self {
        let message = "no redis connection could be had in time";
        let err = Error::with_source(ErrorKind::Connection, message, err);
        // Unreachable, as any connection error, unless the pool was busy.
        let retry = if busy { Retry::PoolBusy } else { err.retry };
        err.retried(retry)
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

/// The message, then the cause's text when there is one (r2d2 keeps only
/// the text of a failed connect; a log line says what happened), unless
/// the message already says all of it in fewer lines (`source_said`).
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.source {
            Some(source) if !self.source_said => write!(f, ": {source}"),
            _ => Ok(()),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.source.as_deref()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error reply `resp` (without its `-` and CRLF) as fairlock's error.
    fn from_reply(resp: &str) -> Error {
        match redis::parse_redis_value(format!("-{resp}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(err)) => Error::from_server(err),
            other => panic!("not an error reply: {other:?}"),
        }
    }

    #[test]
    fn only_what_a_later_retry_may_mend_is_retryable() {
        use ErrorKind as K;
        // Exhaustive: a new kind must say whether it is retryable.
        let retryable = |kind: K| match kind {
            K::Connection | K::NotReplicated => true,
            K::InvalidName
            | K::InvalidConfig
            | K::Auth
            | K::Permission
            | K::LeaseLost
            | K::KeyConflict
            | K::PermitsMismatch
            | K::PermitsExceeded
            | K::UpgradeRefused
            | K::FormatMismatch
            | K::Server
            | K::Internal => false,
        };
        for kind in [
            K::InvalidName,
            K::InvalidConfig,
            K::Connection,
            K::Auth,
            K::Permission,
            K::LeaseLost,
            K::KeyConflict,
            K::NotReplicated,
            K::PermitsMismatch,
            K::PermitsExceeded,
            K::UpgradeRefused,
            K::FormatMismatch,
            K::Server,
            K::Internal,
        ] {
            let err = Error::new(kind, "a test");
            assert_eq!(err.is_retryable(), retryable(kind), "{kind:?}");
            assert_eq!(err.is_connection(), kind == K::Connection, "{kind:?}");
        }
        // From the server's own words (more in tests/api_values.rs).
        let busy = from_reply(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN \
             NOSAVE.",
        );
        assert!(busy.is_retryable() && busy.retry() == Retry::Unreachable);
    }
}
