//! Client settings: the builder, its defaults and their validation.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::SyncReplicas;

/// Settings of one [`Client`], fixed when it is built.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) url: String,
    /// Seed node URLs given to [`Client::cluster_builder`] (then `url` is empty).
    pub(crate) cluster_nodes: Option<Vec<String>>,
    pub(crate) lease: Duration,
    pub(crate) waiter_timeout: Duration,
    pub(crate) pool_size: u32,
    pub(crate) key_prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// PEM root certificate(s) that `rediss://` servers must chain to;
    /// `None` means the system's roots.
    #[cfg(feature = "tls")]
    pub(crate) tls_root_cert: Option<Vec<u8>>,
    /// Replicas that must acknowledge every lock write (`WAIT`), if any.
    pub(crate) sync_replicas: Option<SyncReplicas>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            url: String::new(),
            cluster_nodes: None,
            lease: Duration::from_secs(30),
            waiter_timeout: Duration::from_secs(10),
            pool_size: 16,
            key_prefix: "fairlock".to_owned(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            #[cfg(feature = "tls")]
            tls_root_cert: None,
            sync_replicas: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact_password(&self.url))
            .field(
                "cluster_nodes",
                &self
                    .cluster_nodes
                    .as_ref()
                    .map(|nodes| nodes.iter().map(|n| redact_password(n)).collect::<Vec<_>>()),
            )
            .field("lease", &self.lease)
            .field("waiter_timeout", &self.waiter_timeout)
            .field("pool_size", &self.pool_size)
            .field("key_prefix", &self.key_prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("sync_replicas", &self.sync_replicas)
            .finish_non_exhaustive()
    }
}

/// The URL with any password replaced, fit for logs and `Debug` output.
pub(crate) fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
        None if userinfo.is_empty() => url.to_owned(),
        // redis://secret@host: a lone userinfo is taken as the password.
        None => format!("{scheme}://***@{host}"),
    }
}

/// The shortest lease or waiter timeout accepted: the watchdog renews every
/// third of it, and anything shorter is below scheduling noise.
pub const MIN_LEASE: Duration = Duration::from_millis(30);

/// The longest lease (watchdog or fixed) or waiter timeout accepted: 365
/// days. Longer ones are [`ErrorKind::InvalidConfig`] before any I/O; the
/// scripts check the same bound before they write anything.
pub const MAX_LEASE: Duration = Duration::from_secs(365 * 24 * 3600);

/// The longest connect or command timeout accepted: 24 hours.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// `Ok` when `value` is a lease or waiter timeout in `MIN_LEASE..=MAX_LEASE`.
pub(crate) fn check_lease(what: &str, value: Duration) -> Result<()> {
    if (MIN_LEASE..=MAX_LEASE).contains(&value) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidConfig,
        format!("{what} must be from {MIN_LEASE:?} to {MAX_LEASE:?}, got {value:?}"),
    ))
}

impl Config {
    /// How often the watchdog renews leases and heartbeats queued waiters:
    /// a third of the shorter of the two, so two renewals can fail before
    /// anything expires.
    pub(crate) fn watchdog_period(&self) -> Duration {
        self.lease.min(self.waiter_timeout) / 3
    }

    /// How long a waiting call keeps retrying while Redis is unreachable
    /// (a restart, a failover) before it reports [`ErrorKind::Connection`]:
    /// by then its queue entry has lapsed anyway.
    pub(crate) fn outage_patience(&self) -> Duration {
        self.waiter_timeout + self.connect_timeout
    }

    fn validate(&self) -> Result<()> {
        let invalid = |message: String| Err(Error::new(ErrorKind::InvalidConfig, message));
        check_lease("lease", self.lease)?;
        check_lease("waiter_timeout", self.waiter_timeout)?;
        if self.pool_size == 0 {
            return invalid("pool_size must be at least 1".to_owned());
        }
        for (what, value) in [
            ("connect_timeout", self.connect_timeout),
            ("command_timeout", self.command_timeout),
        ] {
            if value.is_zero() || value > MAX_TIMEOUT {
                return invalid(format!(
                    "{what} must be above zero and at most {MAX_TIMEOUT:?}, got {value:?}"
                ));
            }
        }
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
        crate::topology::Topology::of(self)?;
        let prefix = &self.key_prefix;
        if prefix.is_empty() || prefix.len() > 256 {
            return invalid("key_prefix must be 1 to 256 bytes long".to_owned());
        }
        if prefix.contains(['{', '}']) {
            // A brace would become the cluster hash tag and split a lock's keys over slots.
            return invalid(format!(
                "key_prefix must not contain '{{' or '}}': {prefix:?}"
            ));
        }
        Ok(())
    }
}

/// Builds a [`Client`]; every setting has a default.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
///     .lease(Duration::from_secs(10))
///     .waiter_timeout(Duration::from_secs(5))
///     .key_prefix("billing-locks")
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ClientBuilder {
    config: Config,
}

impl ClientBuilder {
    pub(crate) fn new(url: &str) -> Self {
        ClientBuilder {
            config: Config {
                url: url.to_owned(),
                ..Config::default()
            },
        }
    }

    pub(crate) fn cluster(nodes: Vec<String>) -> Self {
        ClientBuilder {
            config: Config {
                cluster_nodes: Some(nodes),
                ..Config::default()
            },
        }
    }

    /// Lease of a lock held through the watchdog: if this client stops
    /// renewing (process killed, network cut), the lock frees this long after
    /// the last renewal. Renewed every third of `min(lease, waiter_timeout)`.
    /// Defaults to 30 s; at least 30 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// How long a queued waiter keeps its place after its client went
    /// silent. Live waiters are heartbeated by the watchdog and never lose
    /// their place, however long they wait. Defaults to 10 s; from
    /// [`MIN_LEASE`] (30 ms) to [`MAX_LEASE`] (365 days).
    pub fn waiter_timeout(mut self, waiter_timeout: Duration) -> Self {
        self.config.waiter_timeout = waiter_timeout;
        self
    }

    /// Most pooled connections open at once. Waiting threads hold none.
    /// Defaults to 16.
    pub fn pool_size(mut self, pool_size: u32) -> Self {
        self.config.pool_size = pool_size;
        self
    }

    /// Start of every key and channel this client uses, e.g. for an ACL rule
    /// `~fairlock:* &fairlock:*`. Must not contain `{` or `}`.
    /// Defaults to `"fairlock"`.
    pub fn key_prefix(mut self, key_prefix: impl Into<String>) -> Self {
        self.config.key_prefix = key_prefix.into();
        self
    }

    /// How long to wait for a connection to Redis. Defaults to 5 s; at most
    /// [`MAX_TIMEOUT`] (24 hours).
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.config.connect_timeout = connect_timeout;
        self
    }

    /// How long one Redis call may take before it fails as
    /// [`ErrorKind::Connection`]. On a cluster, a lock call whose slot is
    /// being moved to another master is retried for this long too.
    /// A call that fails this way may still run in Redis later (a paused
    /// server resumes it); the client then gives back whatever it took or
    /// queued as soon as Redis answers again (see the README's failure
    /// table). Defaults to 5 s; at most [`MAX_TIMEOUT`] (24 hours).
    pub fn command_timeout(mut self, command_timeout: Duration) -> Self {
        self.config.command_timeout = command_timeout;
        self
    }

    /// Trusts only the PEM root certificate(s) in `pem` for a `rediss://`
    /// server, e.g. a private CA. Defaults to the system roots.
    /// Needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls_root_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.config.tls_root_cert = Some(pem.into());
        self
    }

    /// Makes every lock write (acquire, renew, release, cancel, force
    /// unlock) wait until at least `replicas` replicas of the master that
    /// ran it acknowledged it (Redis `WAIT`, in the same round trip), for at
    /// most `timeout`. A shortfall is a failure: an acquisition is rolled
    /// back and reported as [`ErrorKind::NotReplicated`], a renewal does not
    /// count, a release reports it. So a failover right after `lock()`
    /// returned cannot promote a replica that never saw the acquisition.
    ///
    /// This is not consensus: a write acknowledged by a replica can still be
    /// lost if that replica is not the one promoted, and Redis replication
    /// stays asynchronous for everything else. `timeout` must be below the
    /// command timeout. Off by default.
    pub fn sync_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.config.sync_replicas = Some(SyncReplicas { replicas, timeout });
        self
    }

    /// Checks the settings, connects, and starts the client's watchdog and
    /// subscriber threads.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`] for a bad setting or URL,
    /// [`ErrorKind::Connection`] when Redis cannot be reached within the
    /// connect timeout.
    pub fn build(self) -> Result<Client> {
        self.config.validate()?;
        Client::start(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(builder: ClientBuilder) -> Error {
        builder.config.validate().unwrap_err()
    }

    #[test]
    fn passwords_never_reach_debug_output() {
        assert_eq!(
            redact_password("redis://u:p%40ss@h:1/0"),
            "redis://u:***@h:1/0"
        );
        assert_eq!(redact_password("redis://:pw@h"), "redis://:***@h");
        assert_eq!(redact_password("redis://pw@h"), "redis://***@h");
        assert_eq!(redact_password("redis://h:6379"), "redis://h:6379");
        let debug = format!(
            "{:?}",
            ClientBuilder::new("rediss://user:hunter2@host:6380")
        );
        assert!(!debug.contains("hunter2"), "{debug}");
    }

    #[test]
    fn defaults_are_valid() {
        ClientBuilder::new("redis://x").config.validate().unwrap();
        assert_eq!(
            Config::default().watchdog_period(),
            Duration::from_secs(10) / 3
        );
    }

    #[test]
    fn bad_settings_are_invalid_config() {
        let b = || ClientBuilder::new("redis://x");
        for err in [
            rejected(b().lease(Duration::ZERO)),
            rejected(b().waiter_timeout(Duration::ZERO)),
            rejected(b().lease(Duration::from_millis(29))),
            rejected(b().lease(MAX_LEASE + Duration::from_millis(1))),
            rejected(b().lease(Duration::MAX)),
            rejected(b().waiter_timeout(Duration::MAX)),
            rejected(b().command_timeout(Duration::MAX)),
            rejected(b().connect_timeout(MAX_TIMEOUT + Duration::from_millis(1))),
            rejected(b().pool_size(0)),
            rejected(b().key_prefix("")),
            rejected(b().key_prefix("a{b")),
            rejected(b().connect_timeout(Duration::ZERO)),
            rejected(b().command_timeout(Duration::ZERO)),
            rejected(b().sync_replicas(0, Duration::from_millis(100))),
            rejected(b().sync_replicas(1, Duration::ZERO)),
            rejected(b().sync_replicas(1, Duration::from_secs(5))),
            rejected(ClientBuilder::new("redis+cluster://a")),
        ] {
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
        }
    }
}
