//! `ClientBuilder`: every setting of a client, with its default.

use std::time::Duration;

use crate::connections::config::{ClockDrift, Config, Endpoint, Hidden};
use crate::error::Result;
use crate::handles::client::Client;
use crate::protocol::SyncReplicas;

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
    /// The builder with one setting changed by `set`.
    fn with(mut self, set: impl FnOnce(&mut Config)) -> Self {
        set(&mut self.config);
        self
    }

    /// The defaults, connecting to `target`.
    pub(crate) fn of(target: Endpoint) -> Self {
        let config = Config::default();
        ClientBuilder { config }.with(|config| config.target = target)
    }

    /// Lease of a lock held through the watchdog: if this client stops renewing
    /// (process killed, network cut), the lock frees this long after the last
    /// renewal. Renewed every third of `min(lease, waiter_timeout)`. Defaults
    /// to 30 s; from [`MIN_LEASE`](crate::MIN_LEASE) (30 ms) to
    /// [`MAX_LEASE`](crate::MAX_LEASE) (365 days), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .lease(Duration::from_secs(10)) // a dead holder frees the lock within 10 s
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn lease(self, lease: Duration) -> Self {
        self.with(|config| config.lease = lease)
    }

    /// How long a queued waiter keeps its place after its client went
    /// silent. Live waiters are heartbeated by the watchdog and never lose
    /// their place, however long they wait. Defaults to 10 s; from
    /// [`MIN_LEASE`](crate::MIN_LEASE) (30 ms) to [`MAX_LEASE`](crate::MAX_LEASE) (365 days).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .waiter_timeout(Duration::from_secs(3)) // a dead waiter's place goes after 3 s
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn waiter_timeout(self, waiter_timeout: Duration) -> Self {
        self.with(|config| config.waiter_timeout = waiter_timeout)
    }

    /// Most pooled connections open at once. Waiting threads hold none. A call
    /// waits for a pooled connection at most the
    /// [connect timeout](Self::connect_timeout): with every one in use that
    /// long, it fails, [`ErrorKind::Connection`](crate::ErrorKind::Connection), "no
    /// redis connection could be had in time", nothing sent (retryable); a
    /// timed wait whose deadline comes first is not acquired. Defaults to 16;
    /// from 1 to 10 000 (Redis's default `maxclients`), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build), before any I/O.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .pool_size(4)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn pool_size(self, pool_size: u32) -> Self {
        self.with(|config| config.pool_size = pool_size)
    }

    /// Idle connections the pool keeps open, opened in the background from when
    /// the client is built (`build` waits for the first connection only) and
    /// again whenever fewer are open (as r2d2's `min_idle`). `None` keeps
    /// [`pool_size`](Self::pool_size) connections open. Defaults to `Some(1)`;
    /// more than `pool_size` is
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build), before any I/O.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// // Four connections kept ready, opened as the client starts.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .pool_size(8)
    ///     .min_idle(Some(4))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn min_idle(self, min_idle: Option<u32>) -> Self {
        self.with(|config| config.min_idle = min_idle)
    }

    /// How long a pooled connection lives at most: older ones are closed (and
    /// replaced up to [`min_idle`](Self::min_idle)) when the pool next looks,
    /// every 30 s; a connection in use is closed once it is back. `None` keeps
    /// them for ever. Defaults to
    /// [`DEFAULT_MAX_LIFETIME`](crate::DEFAULT_MAX_LIFETIME) (30 minutes,
    /// r2d2's); from [`MIN_POOL_DURATION`](crate::MIN_POOL_DURATION) (1 s) to
    /// [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// // Reconnect every 5 minutes, e.g. to follow a load balancer.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .max_lifetime(Some(Duration::from_secs(300)))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn max_lifetime(self, max_lifetime: Option<Duration>) -> Self {
        self.with(|config| config.max_lifetime = max_lifetime)
    }

    /// How long a pooled connection may stay idle: idle longer, it is closed
    /// (and replaced up to [`min_idle`](Self::min_idle)) when the pool next
    /// looks, every 30 s. `None` keeps idle connections open. Defaults to
    /// [`DEFAULT_IDLE_TIMEOUT`](crate::DEFAULT_IDLE_TIMEOUT) (10 minutes,
    /// r2d2's); from [`MIN_POOL_DURATION`](crate::MIN_POOL_DURATION) (1 s) to
    /// [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// // Let a burst's extra connections go after a minute.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .idle_timeout(Some(Duration::from_secs(60)))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn idle_timeout(self, idle_timeout: Option<Duration>) -> Self {
        self.with(|config| config.idle_timeout = idle_timeout)
    }

    /// Start of every key and channel this client uses, e.g. for an ACL rule
    /// `~fairlock:* &fairlock:*`. 1 to 256 bytes, without `{` or `}`, else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) at
    /// [`build`](Self::build). Defaults to `"fairlock"`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .key_prefix("billing-locks") // keys billing-locks:{...}:...
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn key_prefix(self, key_prefix: impl Into<String>) -> Self {
        self.with(|config| config.key_prefix = key_prefix.into())
    }

    /// How long to wait for a connection to Redis. Defaults to 5 s; above
    /// zero and at most [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .connect_timeout(Duration::from_secs(2))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn connect_timeout(self, connect_timeout: Duration) -> Self {
        self.with(|config| config.connect_timeout = connect_timeout)
    }

    /// How long one Redis call may take before it fails as
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection). On a cluster, a
    /// lock call whose slot is being moved to another master is retried for
    /// this long too. A call that fails this way may still run in Redis later
    /// (a paused server resumes it); the client then abandons whatever it took
    /// or queued as soon as Redis answers again (see docs/failures.md).
    /// Defaults to 5 s; above zero and at most
    /// [`MAX_TIMEOUT`](crate::MAX_TIMEOUT) (24 hours).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .command_timeout(Duration::from_millis(500))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn command_timeout(self, command_timeout: Duration) -> Self {
        self.with(|config| config.command_timeout = command_timeout)
    }

    /// Trusts only the PEM root certificate(s) in `pem` for a `rediss://`
    /// server, e.g. a private CA: the one server, every node of a cluster,
    /// and behind Sentinel the Sentinels and the master alike. Defaults to
    /// the system roots. Needs the `tls` feature.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, when `pem` holds no PEM certificate or the URL does not use
    /// TLS.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let private_ca = std::fs::read("/etc/redis/ca.pem")?;
    /// let client = fairlock::Client::builder("rediss://redis.internal:6380")
    ///     .tls_root_cert_pem(private_ca)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_cert_pem(self, pem: impl Into<Vec<u8>>) -> Self {
        self.with(|config| config.tls_root_cert = Hidden(Some(pem.into())))
    }

    /// Presents the PEM certificate (chain) `cert` and its PEM private key
    /// `key` to `rediss://` servers that ask for a client certificate
    /// (mutual TLS, Redis's `tls-auth-clients yes`). Every TLS connection
    /// of the client presents it: to the one server, to every node of a
    /// cluster, and behind Sentinel to the Sentinels and the master, as
    /// the root of [`tls_root_cert_pem`](Self::tls_root_cert_pem) covers
    /// them all. Off by default. Needs the `tls` feature.
    ///
    /// Behind Sentinel with any certificate set, the `redis` crate's own
    /// connections to the Sentinels, and the one that checks the master's
    /// `ROLE` at each lookup, send `CLIENT SETINFO` (an ACL user without
    /// it sees a denial in `ACL LOG`); the pool's connections do not.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, when `cert` holds no PEM certificate, `key` no PEM private key,
    /// or the URL does not use TLS.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = fairlock::Client::builder("rediss://redis.internal:6380")
    ///     .tls_root_cert_pem(std::fs::read("/etc/redis/ca.pem")?)
    ///     .tls_client_cert_pem(
    ///         std::fs::read("/etc/fairlock/client.pem")?,
    ///         std::fs::read("/etc/fairlock/client.key")?,
    ///     )
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_cert_pem(self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.with(|config| {
            config.tls_client_cert = Hidden(Some(crate::connections::config::ClientTlsConfig {
                client_cert: cert.into(),
                client_key: key.into(),
            }))
        })
    }

    /// The password the Sentinels themselves require (their `requirepass`,
    /// or an ACL user's with [`sentinel_username`](Self::sentinel_username)),
    /// sent to every Sentinel of a `redis+sentinel://` URL. The master and
    /// its successors keep the credentials of the URL (before the first
    /// host); neither is sent to the other. Off by default.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, for an empty password or a URL other than `redis+sentinel://`
    /// (or `rediss+sentinel://`). A wrong or missing password fails the build
    /// at once with [`ErrorKind::Auth`](crate::ErrorKind::Auth), its message
    /// naming the Sentinel's refusal.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// // The master takes "data-pw"; the Sentinels require "sentinel-pw".
    /// let client = fairlock::Client::builder(
    ///     "redis+sentinel://:data-pw@10.0.0.1:26379,10.0.0.2:26379/orders",
    /// )
    /// .sentinel_password("sentinel-pw")
    /// .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn sentinel_password(self, password: impl Into<String>) -> Self {
        self.with(|config| config.sentinel_password = Hidden(Some(password.into())))
    }

    /// The ACL user the Sentinels themselves are asked for, with
    /// [`sentinel_password`](Self::sentinel_password) (which it needs).
    /// Without it, the password goes to the Sentinels' `default` user.
    ///
    /// # Errors
    /// [`build`](Self::build) returns
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), before
    /// any I/O, for an empty user, a user without a
    /// [`sentinel_password`](Self::sentinel_password), or a URL other than
    /// `redis+sentinel://`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis+sentinel://10.0.0.1:26379/orders")
    ///     .sentinel_username("fairlock-sentinel")
    ///     .sentinel_password("sentinel-pw")
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn sentinel_username(self, username: impl Into<String>) -> Self {
        self.with(|config| config.sentinel_username = Some(username.into()))
    }

    /// Makes every lock write (acquire, renew, release, cancel, force unlock)
    /// wait until at least `replicas` replicas of the master that ran it
    /// acknowledged it (Redis `WAIT`, in the same round trip), for at most
    /// `timeout`. A shortfall is a failure: an acquisition is rolled back and
    /// reported as
    /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated), a renewal
    /// does not count, a release reports it. So a failover right after `lock()`
    /// returned cannot promote a replica that never saw the acquisition.
    ///
    /// This is not consensus: a write acknowledged by a replica can still be
    /// lost if that replica is not the one promoted, and Redis replication
    /// stays asynchronous for everything else. `timeout` must be below the
    /// command timeout. A write's reply is waited for a command timeout,
    /// its `WAIT`'s `timeout` more (within a call's deadline): a shortfall
    /// over a slow link is still `NotReplicated`, not `Connection`. Off by
    /// default.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     // every lock write waits for 1 replica, at most 100 ms
    ///     .sync_replicas(1, Duration::from_millis(100))
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn sync_replicas(self, replicas: u32, timeout: Duration) -> Self {
        self.with(|config| config.sync_replicas = Some(SyncReplicas { replicas, timeout }))
    }

    /// How much of every lease the client keeps in reserve against clocks that
    /// drift apart: a guard counts its lease as over `rate` of it plus `margin`
    /// before the time Redis was asked to keep it. On one machine a holder cut
    /// off from Redis already learns of the loss before anyone else can take
    /// the lock (the lease counts from when the confirming request was sent);
    /// the allowance keeps that true when the holder's clock runs up to `rate`
    /// slower than the server's, as between machines. Defaults to 1% + 2 ms
    /// (Redlock's figures); `rate` may be 0 to 0.25, and the allowance must
    /// leave two thirds of the lease (and of any fixed lease), else
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// // Hosts without NTP: allow 5% drift, plus 10 ms of timer slack.
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .clock_drift(0.05, Duration::from_millis(10))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn clock_drift(self, rate: f64, margin: Duration) -> Self {
        self.with(|config| config.clock_drift = ClockDrift { rate, margin })
    }

    /// How long a lock's fence key, which keeps its last fencing token,
    /// outlives its last write (a take or a release). Tokens are the larger of
    /// the last one + 1 and the server clock in microseconds, so once the fence
    /// is gone the clock alone keeps them increasing; the fence covers a server
    /// clock that steps back (or a failover to a server whose clock is behind)
    /// by less than this. Each name locked in the last `fence_life` keeps one
    /// small key (about 244 bytes, as measured in BENCHMARKS.md: some 41 MB for
    /// a million distinct names an hour at the default). Defaults to
    /// [`DEFAULT_FENCE_LIFE`](crate::DEFAULT_FENCE_LIFE) (10 minutes); from
    /// [`MIN_FENCE_LIFE`](crate::MIN_FENCE_LIFE) (1 s) to
    /// [`MAX_LEASE`](crate::MAX_LEASE) (365 days).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .fence_life(Duration::from_secs(3600)) // covers a clock step back of up to 1 h
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn fence_life(self, fence_life: Duration) -> Self {
        self.with(|config| config.fence_life = fence_life)
    }

    /// With the `metrics` feature, label every lock's metrics with its
    /// name as well as its primitive (see docs/observing.md).
    /// Off by default: a service that makes a name per job or per customer
    /// would make a time series per name. Without the feature it changes
    /// nothing.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .metrics_lock_names(true)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn metrics_lock_names(self, on: bool) -> Self {
        self.with(|config| config.metrics_lock_names = on)
    }

    /// Names this client as its user sees it, e.g. `"web-3/worker-7"`: 1 to
    /// [`MAX_IDENTITY_LEN`](crate::MAX_IDENTITY_LEN) bytes of ASCII
    /// letters, digits and `. _ - / @ : +`. Every status then shows it with
    /// each of the client's holds and waits
    /// ([`Participant::identity`](crate::Participant::identity)), as does
    /// `fairlock status`. Without one, holders show by client id and
    /// thread only.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .identity("web-3/worker-7")
    ///     .build()?;
    /// let status = client.fair_mutex("nightly-report").status(10)?;
    /// if let Some(holder) = status.holder() {
    ///     println!("held by {}", holder.who.identity().unwrap_or("an unnamed client"));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn identity(self, identity: impl Into<String>) -> Self {
        self.with(|config| config.identity = Some(identity.into()))
    }

    /// Refuses to start against a server that may evict fairlock's keys:
    /// `build` fails with
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) when the
    /// server has a memory limit (`maxmemory`) and a `maxmemory-policy` other
    /// than `noeviction` (every fairlock key has a TTL, so the `volatile-*`
    /// policies reach them too: under memory pressure a held lock can vanish
    /// and another client take it). Without it (the default) the client logs a
    /// warning once at start instead. Either way the policy is read once, at
    /// start, with `INFO memory` (docs/security.md's ACL line grants it); on a
    /// cluster, from every master. A user whose ACL does not grant it skips the
    /// check, or with this setting fails with
    /// [`ErrorKind::Permission`](crate::ErrorKind::Permission).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
    ///     .require_noeviction(true)
    ///     .build()?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn require_noeviction(self, on: bool) -> Self {
        self.with(|config| config.require_noeviction = on)
    }

    /// Checks the settings, connects, and starts the client's watchdog and
    /// subscriber threads.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) for a bad
    /// setting or URL, a database the server does not have, or, with
    /// [`require_noeviction`](Self::require_noeviction), a server that may
    /// evict; [`ErrorKind::Auth`](crate::ErrorKind::Auth) for refused
    /// credentials, [`ErrorKind::Permission`](crate::ErrorKind::Permission) for
    /// a command the user's ACL denies;
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// cannot be reached within the connect timeout, or does not answer within
    /// the command timeout (the message names the one);
    /// [`ErrorKind::Server`](crate::ErrorKind::Server) for a refusal fairlock
    /// has no kind for; [`ErrorKind::Internal`](crate::ErrorKind::Internal)
    /// when a thread cannot start. The first connection is opened directly, so
    /// each is reported as soon as it is known (a refused port at once), its
    /// cause in the message.
    ///
    /// A bad setting is refused before any I/O (this runs without a server):
    ///
    /// ```
    /// # fn main() -> fairlock::Result<()> {
    /// match fairlock::Client::builder("redis://127.0.0.1:6379").pool_size(0).build() {
    ///     Err(err) => assert_eq!(err.kind(), fairlock::ErrorKind::InvalidConfig),
    ///     Ok(_) => unreachable!("a pool of 0 connections is refused before any I/O"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn build(self) -> Result<Client> {
        let topology = self.config.validate()?;
        Client::start(self.config, topology)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let url = Endpoint::Url("redis://x".to_owned());
        ClientBuilder::of(url).config.validate().unwrap();
        let period = Config::default().watchdog_period();
        assert_eq!(period, Duration::from_secs(10) / 3);
    }
}
