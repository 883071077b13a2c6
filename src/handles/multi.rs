//! All-or-nothing locks over several names. Every client takes the parts
//! of a multi-lock in one global order (by their keys), so no two
//! multi-locks, however their sets overlap and whatever order their
//! callers named them in, can each hold a part the other waits for: no
//! deadlock, and each name stays FIFO. A call that gives up (timeout,
//! cancellation, an error) releases what it took and leaves no queue entry.
//! Parts are unbound holds, so the guard is `Send + 'static`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::handles::cancel::WaitCanceller;
use crate::handles::handle::{Handle, Wait};
use crate::handles::mutex::FairMutex;
use crate::handles::rwlock::FairRwLock;
use crate::handles::unbound::UnboundGuard;
use crate::machinery::shared::ClientInner;
use crate::protocol::{Access, Ask};

/// Several locks taken together, all or none: mutexes by name, and the
/// reads or writes of reader-writer locks. Made by
/// [`Client::fair_multi_lock`](crate::Client::fair_multi_lock); cheap to
/// clone, `Send + Sync`.
///
/// Deadlock-free between any number of clients taking overlapping sets in
/// any order: the parts are always taken in one order every client shares
/// (their keys'), each in its own FIFO queue. While it waits for a later
/// part, a call holds the earlier ones. On Redis Cluster the parts may live
/// on different masters.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let transfer = client
///     .fair_multi_lock(["account:17", "account:4"])
///     .and_read("rates");
/// if let Some(guard) = transfer.try_lock_for(Duration::from_secs(5))? {
///     for part in guard.parts() {
///         println!("{} with token {}", part.name(), part.fencing_token());
///     }
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FairMultiLock {
    client: Arc<ClientInner>,
    /// Each part: its handle (unbound) and what it asks for.
    parts: Vec<(Handle, Ask)>,
    /// A fixed lease and a maximum hold for every part, when set.
    fixed_lease: Option<Duration>,
    max_hold: Option<Duration>,
}

impl FairMultiLock {
    pub(crate) fn new(client: Arc<ClientInner>) -> Self {
        FairMultiLock {
            client,
            parts: Vec::new(),
            fixed_lease: None,
            max_hold: None,
        }
    }

    /// The same set and the mutex `name`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let both = client.fair_multi_lock(["account:17"]).and_mutex("account:4");
    /// let guard = both.lock()?;
    /// assert!(guard.fencing_token("account:4").is_some());
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_mutex(mut self, name: &str) -> Self {
        let mutex = FairMutex::new(Arc::clone(&self.client), name);
        self.parts.push((mutex.handle, Ask::Mutex));
        self
    }

    /// The same set and a read of the reader-writer lock `name` (shared
    /// with other readers). A name both read and written is written.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.and_read("rates").lock()?; // rates shared with other readers
    /// assert_eq!(guard.parts().len(), 3);
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_read(mut self, name: &str) -> Self {
        let rwlock = FairRwLock::new(Arc::clone(&self.client), name);
        self.parts.push((rwlock.handle, Ask::RwLock(Access::Read)));
        self
    }

    /// The same set and a write of the reader-writer lock `name`.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let rebuild = client.fair_multi_lock(["catalog-import"]).and_write("catalog");
    /// let guard = rebuild.lock()?; // the import alone, and catalog readers kept out
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn and_write(mut self, name: &str) -> Self {
        let rwlock = FairRwLock::new(Arc::clone(&self.client), name);
        self.parts.push((rwlock.handle, Ask::RwLock(Access::Write)));
        self
    }

    /// The same set, every part taken with a fixed `lease` no watchdog
    /// renews (see [`FairMutex::with_lease`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.with_lease(Duration::from_secs(30)).lock()?; // every part frees itself after 30 s
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(&self, lease: Duration) -> Self {
        FairMultiLock {
            fixed_lease: Some(lease),
            ..self.clone()
        }
    }

    /// The same set, every part renewed for at most `max_hold` (see
    /// [`FairMutex::with_max_hold`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.with_max_hold(Duration::from_secs(300)).lock()?;
    /// let signal = guard.parts()[0].lease_signal(); // fires with LeaseEnd::MaxHold after 5 min
    /// # drop((signal, guard));
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(&self, max_hold: Duration) -> Self {
        FairMultiLock {
            max_hold: Some(max_hold),
            ..self.clone()
        }
    }

    /// Waits, part after part in the shared order, as long as it takes;
    /// returns once every part is held.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`] for an empty set (or a bad lease),
    /// [`ErrorKind::InvalidName`] for a bad name: both before any I/O.
    /// Otherwise as [`FairMutex::lock`]; the parts taken so far are
    /// released first.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?; // both accounts, deadlock-free whatever order others name them in
    /// move_money(guard.fencing_token("account:17"), guard.fencing_token("account:4"));
    /// guard.unlock()?;
    /// # fn move_money(_: Option<u64>, _: Option<u64>) {}
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<MultiGuard> {
        self.acquire(Wait::Forever)?
            .ok_or_else(Error::unbounded_wait_ended)
    }

    /// Takes every part only if none needs waiting; otherwise releases
    /// what it took and returns `None`. Never joins a queue.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// match transfer.try_lock()? {
    ///     Some(guard) => guard.unlock()?,
    ///     None => println!("one of them is busy; nothing held, nothing queued"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.acquire(Wait::Never)
    }

    /// Waits at most `timeout` for all the parts together. On timeout the
    /// parts taken so far are released and the waiting one leaves its
    /// queue before `Ok(None)`: nothing is left held or queued.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// match transfer.try_lock_for(Duration::from_secs(5))? {
    ///     Some(guard) => guard.unlock()?,
    ///     None => println!("not all within 5 s; nothing held, nothing queued"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(Wait::AtMost(Some(timeout), None))
    }

    /// As [`try_lock_for`](Self::try_lock_for) (`None`: no limit), and
    /// until `cancel` is cancelled from another thread.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let cancel = fairlock::WaitCanceller::new();
    /// let on_shutdown = cancel.clone();
    /// std::thread::spawn(move || on_shutdown.cancel());
    /// if let Some(guard) = transfer.lock_cancellable(None, &cancel)? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_cancellable(
        &self,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<MultiGuard>> {
        self.acquire(Wait::AtMost(timeout, Some(cancel)))
    }

    /// The parts in the order every client takes them: by key, each name
    /// once (a write over a read of the same rwlock), each unbound and
    /// with this set's lease and maximum hold.
    fn ordered(&self) -> Result<Vec<(Handle, Ask)>> {
        if self.parts.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "a multi-lock needs at least one name",
            ));
        }
        let mut parts = Vec::with_capacity(self.parts.len());
        for (handle, ask) in &self.parts {
            let mut handle = handle.unbound();
            if let Some(lease) = self.fixed_lease {
                handle = handle.with_lease(lease);
            }
            if let Some(max_hold) = self.max_hold {
                handle = handle.with_max_hold(max_hold);
            }
            let key = handle.keys()?.lock().to_owned();
            parts.push((key, handle, *ask));
        }
        // Writes first among equal keys, so the dedup below keeps them.
        parts.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.exclusive().cmp(&a.2.exclusive())));
        parts.dedup_by(|later, kept| later.0 == kept.0);
        Ok(parts.into_iter().map(|(_, h, a)| (h, a)).collect())
    }

    fn acquire(&self, wait: Wait<'_>) -> Result<Option<MultiGuard>> {
        let parts = self.ordered()?;
        let deadline = match wait {
            Wait::AtMost(Some(timeout), _) => Instant::now().checked_add(timeout),
            _ => None,
        };
        let mut held = Vec::with_capacity(parts.len());
        for (handle, ask) in &parts {
            let wait = match wait {
                Wait::AtMost(Some(_), cancel) => {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    Wait::AtMost(left, cancel)
                }
                other => other,
            };
            // An error or a give-up drops `held`: each part taken so far is
            // released (its drop bounded by one command timeout).
            match handle.acquire(Ok(*ask), wait)? {
                Some(hold) => held.push(UnboundGuard::new(hold)),
                None => return Ok(None),
            }
        }
        Ok(Some(MultiGuard { parts: held }))
    }
}

impl std::fmt::Debug for FairMultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.parts.iter().map(|(h, _)| h.name()).collect();
        f.debug_struct("FairMultiLock")
            .field("names", &names)
            .field("fixed_lease", &self.fixed_lease)
            .field("max_hold", &self.max_hold)
            .finish_non_exhaustive()
    }
}

/// Every part of a [`FairMultiLock`], held together until
/// [`unlock`](Self::unlock)ed or dropped (each part released best effort,
/// as a guard's drop). `Send + Sync + 'static`: it may be released on any
/// thread.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.fair_multi_lock(["account:17", "account:4"]).lock()?;
/// std::thread::spawn(move || {
///     // ... the transfer, on another thread ...
///     guard.unlock()
/// })
/// .join()
/// .expect("worker")?;
/// # Ok(()) }
/// ```
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::MultiGuard>();
/// ```
#[must_use = "if unused the locks are released immediately"]
#[derive(Debug)]
pub struct MultiGuard {
    parts: Vec<UnboundGuard>,
}

impl MultiGuard {
    /// The parts, in the order they were taken: each with its name, its
    /// fencing token, its lease signal and (for a rwlock) its access.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?;
    /// for part in guard.parts() {
    ///     println!("{}: token {}", part.name(), part.fencing_token()); // account:17 and account:4, in key order
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn parts(&self) -> &[UnboundGuard] {
        &self.parts
    }

    /// The fencing token of the part `name` (a mutex's, or a rwlock's
    /// read or write), if the set has one of that name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?;
    /// assert!(guard.fencing_token("account:4").is_some());
    /// assert_eq!(guard.fencing_token("account:99"), None);
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self, name: &str) -> Option<u64> {
        self.parts
            .iter()
            .find(|part| part.name() == name)
            .map(UnboundGuard::fencing_token)
    }

    /// True once any part's lease is known to be gone.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// let guard = transfer.lock()?;
    /// if guard.is_lease_lost() {
    ///     return Ok(()); // stop before writing either account
    /// }
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.parts.iter().any(UnboundGuard::is_lease_lost)
    }

    /// Releases every part, the last taken first; reports the first error
    /// after trying them all.
    ///
    /// # Errors
    /// As [`UnboundGuard::unlock`], for any part.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let transfer = client.fair_multi_lock(["account:17", "account:4"]);
    /// transfer.lock()?.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        let mut first_error = None;
        while let Some(part) = self.parts.pop() {
            if let Err(err) = part.unlock() {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        // The last taken first, as unlock does.
        while let Some(part) = self.parts.pop() {
            drop(part);
        }
    }
}
