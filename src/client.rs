//! The client: a connection pool, two background threads, and the state
//! they share with every mutex handle and guard.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::config::{ClientBuilder, Config};
use crate::error::{Error, ErrorKind, Result};
use crate::holds::Holds;
use crate::keys::LockKeys;
use crate::mutex::FairMutex;
use crate::scripts::{self, LuaScript, Scripts};
use crate::waiters::Waiters;
use crate::{subscriber, watchdog};

/// A handle to Redis that hands out [`FairMutex`]es.
///
/// Cloning is cheap and shares one pool and one pair of background threads:
/// a watchdog (`fairlock-watchdog`) that renews held leases and keeps this
/// client's queued waiters alive, and a subscriber (`fairlock-subscriber`)
/// on its own connection that wakes waiting threads. Both stop, and are
/// joined, when the last `Client`, `FairMutex` and guard of it are dropped.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let orders = client.fair_mutex("orders:42");
/// let guard = orders.lock()?;
/// // ... only one thread in the fleet runs this at a time, in arrival order ...
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

/// Owns the threads; dropping it stops them.
pub(crate) struct ClientInner {
    pub(crate) shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// State shared by the handles and the background threads. The threads hold
/// only this, never a [`ClientInner`], so they never keep the client alive.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) redis: redis::Client,
    pub(crate) pool: r2d2::Pool<redis::Client>,
    pub(crate) scripts: Scripts,
    /// Random id of this client; owner ids are `<client id>:<thread number>`.
    pub(crate) client_id: String,
    /// Channel prefix every script publishes wake-ups under.
    pub(crate) wake_prefix: String,
    pub(crate) waiters: Waiters,
    pub(crate) holds: Holds,
    next_wait_id: AtomicU64,
    stopping: Mutex<bool>,
    stop_signal: Condvar,
}

/// Sets the per-call timeouts on every pooled connection.
#[derive(Debug)]
struct CommandTimeouts(Duration);

impl r2d2::CustomizeConnection<redis::Connection, redis::RedisError> for CommandTimeouts {
    fn on_acquire(
        &self,
        conn: &mut redis::Connection,
    ) -> std::result::Result<(), redis::RedisError> {
        conn.set_read_timeout(Some(self.0))?;
        conn.set_write_timeout(Some(self.0))
    }
}

impl Client {
    /// Connects with every setting at its default.
    ///
    /// # Errors
    /// See [`ClientBuilder::build`].
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Starts a builder for a client of the Redis server at `url`
    /// (`redis://[user:password@]host:port[/db]`).
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// A handle to the lock called `name`. No I/O happens here; an invalid
    /// name is reported by the first call on the handle as
    /// [`ErrorKind::InvalidName`].
    pub fn fair_mutex(&self, name: &str) -> FairMutex {
        FairMutex::new(Arc::clone(&self.inner), name)
    }

    /// This client's random id, the first part of every owner id it uses.
    pub fn id(&self) -> &str {
        &self.inner.shared.client_id
    }

    pub(crate) fn start(config: Config) -> Result<Client> {
        let redis = open_redis(&config)?;
        let maintenance = scheduled_thread_pool::ScheduledThreadPool::builder()
            .num_threads(1)
            .thread_name_pattern("fairlock-pool")
            // Exit with the pool instead of lingering until the next reaper run.
            .on_drop_behavior(scheduled_thread_pool::OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        let pool = r2d2::Pool::builder()
            .max_size(config.pool_size)
            .min_idle(Some(1))
            // A PING per checkout would double the round trips of every call;
            // broken connections are caught by has_broken and by the error path.
            .test_on_check_out(false)
            .connection_timeout(config.connect_timeout)
            .thread_pool(Arc::new(maintenance))
            .connection_customizer(Box::new(CommandTimeouts(config.command_timeout)))
            .build(redis.clone())?;

        let scripts = Scripts::new();
        scripts.load_all(&mut *pool.get()?)?;

        let client_id = uuid::Uuid::new_v4().simple().to_string();
        let wake_prefix = format!("{}:wake:", config.key_prefix);
        let shared = Arc::new(Shared {
            config,
            redis,
            pool,
            scripts,
            client_id,
            wake_prefix,
            waiters: Waiters::default(),
            holds: Holds::default(),
            next_wait_id: AtomicU64::new(1),
            stopping: Mutex::new(false),
            stop_signal: Condvar::new(),
        });

        // The subscription must be live before any waiter can queue, or the
        // first handoff message could be missed.
        let (ready_tx, ready_rx) = mpsc::channel();
        let subscriber = spawn_named("fairlock-subscriber", &shared, move |shared| {
            subscriber::run(shared, ready_tx)
        })?;
        let inner = ClientInner {
            shared: Arc::clone(&shared),
            threads: Mutex::new(vec![subscriber]),
        };
        let ready = ready_rx
            .recv_timeout(shared.config.connect_timeout + shared.config.command_timeout)
            .unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorKind::Connection,
                    "timed out subscribing to the wake-up channel",
                ))
            });
        ready?; // on error, dropping `inner` stops and joins the subscriber
        let watchdog = spawn_named("fairlock-watchdog", &shared, watchdog::run)?;
        inner.threads.lock().push(watchdog);
        Ok(Client {
            inner: Arc::new(inner),
        })
    }
}

/// Starts a named background thread that holds only the shared state.
fn spawn_named(
    name: &str,
    shared: &Arc<Shared>,
    body: impl FnOnce(&Shared) + Send + 'static,
) -> Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || body(&shared))
        .map_err(|err| Error::with_source(ErrorKind::Server, "cannot start a thread", err))
}

/// The `redis::Client` of the URL; the pool and the subscriber both connect
/// through it, so a TLS root given to the builder covers both.
fn open_redis(config: &Config) -> Result<redis::Client> {
    let invalid = |err| Error::with_source(ErrorKind::InvalidConfig, "invalid redis url", err);
    #[cfg(feature = "tls")]
    if let Some(root) = &config.tls_root_cert {
        if !root
            .windows(27)
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
        {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "tls_root_cert_pem holds no PEM certificate",
            ));
        }
        let certificates = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root.clone()),
        };
        return redis::Client::build_with_tls(config.url.as_str(), certificates).map_err(invalid);
    }
    redis::Client::open(config.url.as_str()).map_err(invalid)
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.shared.client_id)
            .field("key_prefix", &self.inner.shared.config.key_prefix)
            .finish_non_exhaustive()
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.shared.stop();
        for handle in self.threads.get_mut().drain(..) {
            if handle.join().is_err() {
                log::error!("fairlock: a background thread panicked");
            }
        }
    }
}

thread_local! {
    /// Number of the current thread inside this process, for owner ids.
    static THREAD_NUMBER: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

impl Shared {
    /// Owner id of the calling thread: re-entrancy is per (client, thread).
    pub(crate) fn owner_id(&self) -> String {
        THREAD_NUMBER.with(|n| format!("{}:{n}", self.client_id))
    }

    pub(crate) fn wake_channel(&self) -> String {
        format!("{}{}", self.wake_prefix, self.client_id)
    }

    pub(crate) fn next_wait_id(&self) -> u64 {
        self.next_wait_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn connection(&self) -> Result<r2d2::PooledConnection<redis::Client>> {
        Ok(self.pool.get()?)
    }

    /// Runs one lock script on a pooled connection: one round trip.
    pub(crate) fn run_script(
        &self,
        script: &LuaScript,
        keys: &LockKeys,
        args: &[&[u8]],
    ) -> Result<redis::Value> {
        scripts::run(
            script,
            &mut *self.connection()?,
            keys,
            &self.wake_prefix,
            args,
        )
    }

    pub(crate) fn is_stopping(&self) -> bool {
        *self.stopping.lock()
    }

    /// Sleeps up to `timeout`; returns true when the client is stopping.
    pub(crate) fn sleep_unless_stopping(&self, timeout: Duration) -> bool {
        let mut stopping = self.stopping.lock();
        if !*stopping {
            self.stop_signal.wait_for(&mut stopping, timeout);
        }
        *stopping
    }

    fn stop(&self) {
        *self.stopping.lock() = true;
        self.stop_signal.notify_all();
        // Wakes the subscriber out of its blocking read at once; if Redis is
        // gone, its read timeout gets it out instead.
        if let Ok(mut conn) = self.pool.get_timeout(Duration::from_millis(200)) {
            let _: redis::RedisResult<i64> = redis::cmd("PUBLISH")
                .arg(self.wake_channel())
                .arg("S")
                .query(&mut *conn);
        }
    }
}
