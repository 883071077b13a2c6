//! Client settings: their defaults, their bounds and their validation.

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// The certificate and key a client presents, as the redis crate takes them.
#[cfg(feature = "tls")]
pub(crate) use redis::ClientTlsConfig;

use crate::connections::topology::{redact_url, Topology};
use crate::error::{Error, Result};
use crate::protocol::{CommonArgs, SyncReplicas};

/// Where the client was told to connect, as given.
#[derive(Clone)]
pub(crate) enum Endpoint {
    /// A URL of any form `Client::builder` takes.
    Url(String),
    /// Seed node URLs given to `Client::cluster_builder`.
    ClusterNodes(Vec<String>),
    /// One server's connection settings given to `Client::builder_from`,
    /// or why they could not be had (reported by `build`, before any I/O).
    Info(std::result::Result<Box<redis::ConnectionInfo>, String>),
}

impl Endpoint {
    /// Where the client connects, for messages: the URLs without their
    /// passwords, or the address.
    pub(crate) fn describe(&self) -> String {
        match self {
            Endpoint::Url(url) => redact_url(url),
            Endpoint::ClusterNodes(nodes) => redact_urls(nodes).join(","),
            Endpoint::Info(Ok(info)) => info.addr().to_string(),
            Endpoint::Info(Err(why)) => why.clone(),
        }
    }
}

/// Each of `urls` without its password.
fn redact_urls(urls: &[String]) -> Vec<String> {
    urls.iter().map(|url| redact_url(url)).collect()
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Url(url) => f.debug_tuple("Url").field(&redact_url(url)).finish(),
            Endpoint::ClusterNodes(nodes) => f
                .debug_tuple("ClusterNodes")
                .field(&redact_urls(nodes))
                .finish(),
            Endpoint::Info(Ok(info)) => {
                let settings = info.redis_settings();
                f.debug_struct("Info")
                    .field("addr", &info.addr().to_string())
                    .field("db", &settings.db())
                    .field("username", &settings.username())
                    .field("password", &settings.password().map(|_| "***"))
                    .finish()
            }
            Endpoint::Info(Err(why)) => f.debug_tuple("Info").field(why).finish(),
        }
    }
}

/// A setting that `Debug` shows as `Some(***)` or `None`: a password, or a
/// PEM certificate or key (bytes no one reads in a log, a key no one should).
#[derive(Clone)]
pub(crate) struct Hidden<T>(pub(crate) Option<T>);

impl<T> Debug for Hidden<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_ref().map_or("None", |_| "Some(***)"))
    }
}

/// Settings of one client, fixed when it is built; its `Debug` hides the
/// secrets ([`Hidden`], [`Endpoint`]'s).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) target: Endpoint,
    pub(crate) lease: Duration,
    pub(crate) waiter_timeout: Duration,
    pub(crate) pool_size: u32,
    /// Idle connections the pool keeps open (`None`: `pool_size`).
    pub(crate) min_idle: Option<u32>,
    /// How long a pooled connection lives at most (`None`: for ever).
    pub(crate) max_lifetime: Option<Duration>,
    /// How long a pooled connection may stay idle (`None`: for ever).
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) key_prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// PEM root certificate(s) that `rediss://` servers must chain to;
    /// `None` means the system's roots.
    #[cfg(feature = "tls")]
    pub(crate) tls_root_cert: Hidden<Vec<u8>>,
    /// PEM certificate (chain) and private key this client presents to
    /// `rediss://` servers that ask for one (mutual TLS).
    #[cfg(feature = "tls")]
    pub(crate) tls_client_cert: Hidden<ClientTlsConfig>,
    /// The user the Sentinels themselves are asked for (`AUTH`), if any.
    pub(crate) sentinel_username: Option<String>,
    /// The password the Sentinels themselves require (`requirepass`), if
    /// any; the master's own credentials come from the URL.
    pub(crate) sentinel_password: Hidden<String>,
    /// Replicas that must acknowledge every lock write (`WAIT`), if any.
    pub(crate) sync_replicas: Option<SyncReplicas>,
    /// How much sooner than Redis this client counts a lease as over.
    pub(crate) clock_drift: ClockDrift,
    /// How long a lock's fence key outlives its last write.
    pub(crate) fence_life: Duration,
    /// Whether metrics carry each lock's name as a label (`metrics`
    /// feature; names can be unbounded, so off by default).
    pub(crate) metrics_lock_names: bool,
    /// Who this client is, as its user names it (`identity`): shown with
    /// each of its holds and waits in every status.
    pub(crate) identity: Option<String>,
    /// Whether a server that may evict keys fails `build` (else a warning).
    pub(crate) require_noeviction: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            target: Endpoint::Url(String::new()),
            lease: Duration::from_secs(30),
            waiter_timeout: Duration::from_secs(10),
            pool_size: 16,
            min_idle: Some(1),
            max_lifetime: Some(DEFAULT_MAX_LIFETIME),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            key_prefix: "fairlock".to_owned(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            #[cfg(feature = "tls")]
            tls_root_cert: Hidden(None),
            #[cfg(feature = "tls")]
            tls_client_cert: Hidden(None),
            sentinel_username: None,
            sentinel_password: Hidden(None),
            sync_replicas: None,
            clock_drift: ClockDrift::default(),
            fence_life: DEFAULT_FENCE_LIFE,
            metrics_lock_names: false,
            identity: None,
            require_noeviction: false,
        }
    }
}

/// The shortest lease or waiter timeout accepted: the watchdog renews every
/// third of it, and anything shorter is below scheduling noise.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::MIN_LEASE, Duration::from_millis(30));
/// ```
pub const MIN_LEASE: Duration = Duration::from_millis(30);

/// The longest lease (watchdog or fixed) or waiter timeout accepted: 365
/// days. Longer ones are
/// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) before any
/// I/O; the scripts check the same bound before they write anything.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::MAX_LEASE, Duration::from_secs(365 * 24 * 3600));
/// let err = fairlock::Client::builder("redis://127.0.0.1:6379")
///     .lease(fairlock::MAX_LEASE + Duration::from_secs(1))
///     .build()
///     .unwrap_err(); // refused before any I/O
/// assert_eq!(err.kind(), fairlock::ErrorKind::InvalidConfig);
/// ```
pub const MAX_LEASE: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a lock's fence key (its last fencing token) outlives its last
/// write by default: 10 minutes (see [`ClientBuilder::fence_life`]).
///
/// [`ClientBuilder::fence_life`]: crate::ClientBuilder::fence_life
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::DEFAULT_FENCE_LIFE, Duration::from_secs(600));
/// ```
pub const DEFAULT_FENCE_LIFE: Duration = Duration::from_secs(600);

/// The shortest fence life accepted: 1 s, which still covers a call
/// delivered twice (the fence also remembers the call that last freed the
/// lock, so that its repeat answers as the first did).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::MIN_FENCE_LIFE, Duration::from_secs(1));
/// ```
pub const MIN_FENCE_LIFE: Duration = Duration::from_secs(1);

/// The longest connect or command timeout accepted: 24 hours.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::MAX_TIMEOUT, Duration::from_secs(24 * 3600));
/// ```
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// How long a pooled connection lives by default: 30 minutes (r2d2's
/// default; see [`ClientBuilder::max_lifetime`]).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::DEFAULT_MAX_LIFETIME, Duration::from_secs(30 * 60));
/// ```
///
/// [`ClientBuilder::max_lifetime`]: crate::ClientBuilder::max_lifetime
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// How long a pooled connection may stay idle by default: 10 minutes
/// (r2d2's default; see [`ClientBuilder::idle_timeout`]).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fairlock::DEFAULT_IDLE_TIMEOUT, Duration::from_secs(10 * 60));
/// ```
///
/// [`ClientBuilder::idle_timeout`]: crate::ClientBuilder::idle_timeout
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The shortest `max_lifetime` or `idle_timeout` accepted: 1 s. The pool
/// looks for connections past either every 30 s, so shorter ones would
/// change nothing but churn.
///
/// ```
/// # fn main() -> fairlock::Result<()> {
/// // Shorter than the minimum: refused before any I/O.
/// let err = fairlock::Client::builder("redis://127.0.0.1:6379")
///     .idle_timeout(Some(fairlock::MIN_POOL_DURATION / 2))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.kind(), fairlock::ErrorKind::InvalidConfig);
/// # Ok(()) }
/// ```
pub const MIN_POOL_DURATION: Duration = Duration::from_secs(1);

/// The longest client identity accepted, in bytes.
///
/// ```
/// let too_long = "w".repeat(fairlock::MAX_IDENTITY_LEN + 1);
/// let err = fairlock::Client::builder("redis://127.0.0.1:6379")
///     .identity(too_long)
///     .build()
///     .unwrap_err(); // refused before any I/O
/// assert_eq!(err.kind(), fairlock::ErrorKind::InvalidConfig);
/// ```
pub const MAX_IDENTITY_LEN: usize = 64;

/// `Ok` when `identity` is 1 to [`MAX_IDENTITY_LEN`] bytes of ASCII
/// letters, digits and `. _ - / @ : +`: it rides in every owner id, which
/// the scripts keep in space-separated values and print in status.
pub(crate) fn check_identity(identity: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-/@:+".contains(c);
    if (1..=MAX_IDENTITY_LEN).contains(&identity.len()) && identity.chars().all(allowed) {
        return Ok(());
    }
    Err(Error::invalid_config(format!(
        "identity must be 1 to {MAX_IDENTITY_LEN} bytes of ASCII letters, digits and \
         . _ - / @ : +, got {identity:?}"
    )))
}

/// `Ok` when `value` is a lease or waiter timeout in `MIN_LEASE..=MAX_LEASE`.
pub(crate) fn check_lease(what: &str, value: Duration) -> Result<()> {
    check_range(what, value, MIN_LEASE, MAX_LEASE)
}

/// `Ok` when `value` is in `min..=max`.
fn check_range<T: PartialOrd + Debug>(what: &str, value: T, min: T, max: T) -> Result<()> {
    if min <= value && value <= max {
        return Ok(());
    }
    Err(Error::invalid_config(format!(
        "{what} must be from {min:?} to {max:?}, got {value:?}"
    )))
}

/// The allowance a client subtracts from every lease before it trusts it:
/// `rate` of the lease plus `margin`. A guard counts its lease from the
/// moment the confirming request was sent, so on one machine the client
/// learns of the end before Redis frees the lock; between machines, the
/// holder's clock may run slower than the server's. The allowance covers a
/// holder clock up to `rate` slower than the server's over the lease, and
/// `margin` covers the millisecond rounding of Redis expiries and timer
/// slack. Redlock's figures are the defaults: 1% and 2 ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ClockDrift {
    pub(crate) rate: f64,
    pub(crate) margin: Duration,
}

impl Default for ClockDrift {
    fn default() -> Self {
        ClockDrift {
            rate: 0.01,
            margin: Duration::from_millis(2),
        }
    }
}

/// The largest clock-drift rate accepted: beyond a quarter of the lease the
/// watchdog, renewing every third of it, could not keep a hold alive.
pub(crate) const MAX_DRIFT_RATE: f64 = 0.25;

impl ClockDrift {
    /// What is taken off a lease of `length`.
    pub(crate) fn allowance(&self, length: Duration) -> Duration {
        length.mul_f64(self.rate) + self.margin
    }

    /// When this process counts a lease of `length`, counted from `since`,
    /// as over: never later than Redis frees the lock, if the clocks drift
    /// apart by less than the allowance.
    pub(crate) fn local_end(&self, since: Instant, length: Duration) -> Instant {
        since + length.saturating_sub(self.allowance(length))
    }

    /// Whether a lease of `length` from `since` is over by this process's
    /// count already: a hold counted out on arrival (a reply that came
    /// late), which is never handed to a caller.
    pub(crate) fn is_over(&self, since: Instant, length: Duration) -> bool {
        self.local_end(since, length) <= Instant::now()
    }

    /// The shortest lease this process counts as lasting at least `local`:
    /// what a renewal asks for so that the guard's own count reaches a
    /// moment `local` away (see [`local_end`](Self::local_end)).
    pub(crate) fn lease_lasting(&self, local: Duration) -> Duration {
        let scaled = (local + self.margin).as_secs_f64() / (1.0 - self.rate);
        Duration::from_secs_f64(scaled) + Duration::from_millis(1)
    }

    /// `Ok` when a lease of `length` outlives its allowance by enough for
    /// a hold to be usable: at least two thirds of it is left.
    pub(crate) fn check_against(&self, what: &str, length: Duration) -> Result<()> {
        let allowance = self.allowance(length);
        if allowance.saturating_mul(3) <= length {
            return Ok(());
        }
        Err(Error::invalid_config(format!(
            "{what} of {length:?} is too short for the clock-drift allowance of \
             {allowance:?} ({}% + {:?}): the allowance may take at most a third of it",
            self.rate * 100.0,
            self.margin
        )))
    }
}

impl Config {
    /// The certificates a client's TLS connections use: the root(s) servers
    /// must chain to and the certificate and key this client presents, each
    /// checked here, before any I/O (`None` when neither was given: the
    /// system's roots, no client certificate).
    #[cfg(feature = "tls")]
    pub(crate) fn tls_certificates(&self) -> Result<Option<redis::TlsCertificates>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let invalid = |message: &'static str| Err(Error::invalid_config(message));
        let (Hidden(root), Hidden(client)) = (&self.tls_root_cert, &self.tls_client_cert);
        if root.is_none() && client.is_none() {
            return Ok(None);
        }
        // Every root as the connections take it: a trust anchor.
        let no_root = |pem: &[u8]| {
            let certs = CertificateDer::pem_slice_iter(pem).collect::<std::result::Result<_, _>>();
            !certs.is_ok_and(|certs: Vec<_>| {
                let (added, ignored) =
                    rustls::RootCertStore::empty().add_parsable_certificates(certs);
                added > 0 && ignored == 0
            })
        };
        if root.as_deref().is_some_and(no_root) {
            return invalid("tls_root_cert_pem must hold PEM certificates, each usable as a root");
        }
        if let Some(client) = client {
            let chain = CertificateDer::pem_slice_iter(&client.client_cert)
                .collect::<std::result::Result<Vec<_>, _>>();
            if !chain.is_ok_and(|chain| !chain.is_empty()) {
                return invalid("tls_client_cert_pem: the certificate holds no PEM certificate");
            }
            if PrivateKeyDer::from_pem_slice(&client.client_key).is_err() {
                return invalid("tls_client_cert_pem: the key holds no PEM private key");
            }
        }
        Ok(Some(redis::TlsCertificates {
            client_tls: client.clone(),
            root_cert: root.clone(),
        }))
    }

    /// `Ok` when the Sentinels' credentials, if any, are usable: a
    /// password that is not empty, a user only beside a password, and
    /// both only for a `redis+sentinel://` URL (where else would they go).
    fn check_sentinel_auth(&self, topology: &Topology) -> Result<()> {
        let why = match (&self.sentinel_username, &self.sentinel_password.0) {
            (None, None) => return Ok(()),
            _ if !matches!(topology, Topology::Sentinel { .. }) => {
                "sentinel_password and sentinel_username need a redis+sentinel:// url"
            }
            (_, Some(password)) if password.is_empty() => "sentinel_password must not be empty",
            (Some(username), _) if username.is_empty() => "sentinel_username must not be empty",
            (Some(_), None) => "sentinel_username needs a sentinel_password too",
            _ => return Ok(()),
        };
        Err(Error::invalid_config(why))
    }

    /// How often the watchdog renews leases and heartbeats queued waiters:
    /// a third of the shorter of the two, so two renewals can fail before
    /// anything expires.
    pub(crate) fn watchdog_period(&self) -> Duration {
        self.lease.min(self.waiter_timeout) / 3
    }

    /// How long a waiting call keeps retrying while Redis is unreachable
    /// (a restart, a failover) before it reports
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection): by then its
    /// queue entry has lapsed anyway.
    pub(crate) fn outage_patience(&self) -> Duration {
        self.waiter_timeout + self.connect_timeout
    }

    /// The arguments every script call of this client starts with.
    pub(crate) fn common_args(&self) -> CommonArgs {
        CommonArgs {
            wake_prefix: self.wake_prefix(),
            fence_life: self.fence_life,
        }
    }

    /// The start of every wake channel: a client's is this and its id.
    pub(crate) fn wake_prefix(&self) -> String {
        format!("{}:wake:", self.key_prefix)
    }

    /// Checks every setting; returns where the locks live, parsed from the
    /// URL (or seed nodes) once.
    pub(crate) fn validate(&self) -> Result<Topology> {
        let invalid = |message: String| Err(Error::invalid_config(message));
        check_lease("lease", self.lease)?;
        check_lease("waiter_timeout", self.waiter_timeout)?;
        let ClockDrift { rate, margin } = self.clock_drift;
        // NaN and the infinities fall outside the range too.
        check_range("clock_drift rate", rate, 0.0, MAX_DRIFT_RATE)?;
        check_range("clock_drift margin", margin, Duration::ZERO, MAX_TIMEOUT)?;
        self.clock_drift.check_against("lease", self.lease)?;
        check_range("fence_life", self.fence_life, MIN_FENCE_LIFE, MAX_LEASE)?;
        // r2d2 reserves room for the whole pool as it is made: a size no
        // server takes (Redis's default `maxclients`) could abort the process.
        check_range("pool_size", self.pool_size, 1, 10_000)?;
        if let Some(min_idle) = self.min_idle {
            check_range("min_idle (at most pool_size)", min_idle, 0, self.pool_size)?;
        }
        for (what, value) in [
            ("max_lifetime (or None)", self.max_lifetime),
            ("idle_timeout (or None)", self.idle_timeout),
        ] {
            if let Some(value) = value {
                check_range(what, value, MIN_POOL_DURATION, MAX_TIMEOUT)?;
            }
        }
        let least = Duration::from_nanos(1);
        check_range("connect_timeout", self.connect_timeout, least, MAX_TIMEOUT)?;
        check_range("command_timeout", self.command_timeout, least, MAX_TIMEOUT)?;
        if let Some(sync) = self.sync_replicas {
            if sync.replicas == 0 {
                return invalid("sync_replicas needs at least 1 replica".to_owned());
            }
            if sync.timeout.is_zero() || sync.timeout >= self.command_timeout {
                return invalid(format!(
                    "sync_replicas timeout must be above zero and below command_timeout \
                     ({:?}), got {:?}",
                    self.command_timeout, sync.timeout
                ));
            }
        }
        let topology = match &self.target {
            Endpoint::Url(url) => Topology::parse(url)?,
            Endpoint::ClusterNodes(nodes) => Topology::of_cluster_nodes(nodes)?,
            Endpoint::Info(Ok(info)) => Topology::of_info(info)?,
            Endpoint::Info(Err(why)) => {
                return invalid(format!("invalid redis connection info: {why}"));
            }
        };
        self.identity.as_deref().map_or(Ok(()), check_identity)?;
        self.check_sentinel_auth(&topology)?;
        // The TLS certificates given, if any, parse (a root certificate, a
        // client certificate with its key), and the URL uses TLS (`rediss`).
        #[cfg(feature = "tls")]
        if self.tls_certificates()?.is_some() && !topology.uses_tls() {
            return Err(Error::invalid_config(
                "TLS certificates need a rediss:// url (a plain redis:// one would not use them)",
            ));
        }
        let prefix = &self.key_prefix;
        check_range("key_prefix's length in bytes", prefix.len(), 1, 256)?;
        if prefix.contains(['{', '}']) {
            // A brace would become the cluster hash tag and split a lock's keys over slots.
            return invalid(format!(
                "key_prefix must not contain '{{' or '}}': {prefix:?}"
            ));
        }
        Ok(topology)
    }
}
