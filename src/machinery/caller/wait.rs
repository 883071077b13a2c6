//! `Wait`: how long an acquire call may wait, as one value (etcd's
//! `Lock(ctx)`: the context carries the deadline and the cancellation), so
//! that every request has every way of waiting without a method for each.

use std::time::{Duration, Instant};

use crate::machinery::caller::cancel::WaitCanceller;

/// How long an acquire call may wait for its turn: [forever](Self::forever),
/// [not at all](Self::not_at_all), [at most](Self::at_most) a duration or
/// [until](Self::until) an instant, each of them also ending early when a
/// [`WaitCanceller`] it was given is [cancelled](Self::cancelled_by).
///
/// Every request takes one, through its general method
/// ([`FairMutex::lock_with`](crate::FairMutex::lock_with),
/// [`FairSemaphore::acquire_many_with`](crate::FairSemaphore::acquire_many_with),
/// [`FairRwLock::read_with`](crate::FairRwLock::read_with) and
/// [`write_with`](crate::FairRwLock::write_with),
/// [`FairMultiLock::lock_with`](crate::FairMultiLock::lock_with),
/// [`Election::campaign_with`](crate::Election::campaign_with)), which
/// returns `Ok(None)` when the wait ended without the lock, having left
/// the queue first (and given back the lock if it was handed over in that
/// last instant). The short forms (`lock`, `try_lock`, `try_lock_for`, ...) are
/// those methods with [`forever`](Self::forever),
/// [`not_at_all`](Self::not_at_all) and [`at_most`](Self::at_most).
/// A `Duration` or an `Instant` converts into a wait by itself.
///
/// A wait that cannot wait at all (no time left, or a canceller cancelled
/// already) still makes one attempt that never queues, as `try_lock` does.
/// Cheap to clone; `Send + Sync`.
///
/// ```no_run
/// use std::time::Duration;
/// use fairlock::Wait;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let shutdown = fairlock::WaitCanceller::new();
/// let report = client.fair_mutex("nightly-report");
/// // At most a minute, and not past a shutdown:
/// let wait = Wait::at_most(Duration::from_secs(60)).cancelled_by(&shutdown);
/// match report.lock_with(wait)? {
///     Some(guard) => guard.unlock()?,
///     None => println!("no turn within a minute, or shutting down; out of the queue"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Wait {
    limit: Limit,
    cancel: Vec<WaitCanceller>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Limit {
    #[default]
    Forever,
    NotAtAll,
    For(Duration),
    Until(Instant),
}

impl Wait {
    /// As long as it takes (the default).
    ///
    /// ```no_run
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_mutex("nightly-report").lock_with(Wait::forever())?;
    /// assert!(guard.is_some()); // a wait without an end returns only with the lock
    /// # Ok(()) }
    /// ```
    pub fn forever() -> Wait {
        Wait::default()
    }

    /// Not at all: one attempt that takes the lock only if that needs no
    /// waiting (it is free and nobody is queued for it), and never queues.
    ///
    /// ```no_run
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// if let Some(read) = client.fair_rwlock("catalog").read_with(Wait::not_at_all())? {
    ///     read.unlock()?;
    /// } // else: a writer holds it or someone waits; nothing queued
    /// # Ok(()) }
    /// ```
    pub fn not_at_all() -> Wait {
        Wait::limited(Limit::NotAtAll)
    }

    /// At most `timeout`, counted from the start of the call it is given to
    /// (`Duration::ZERO` is [`not_at_all`](Self::not_at_all)).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let cores = client.fair_semaphore("build-cores", 16);
    /// if let Some(permits) = cores.acquire_many_with(4, Wait::at_most(Duration::from_secs(5)))? {
    ///     permits.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn at_most(timeout: Duration) -> Wait {
        Wait::limited(Limit::For(timeout))
    }

    /// Until `deadline` (one in the past is [`not_at_all`](Self::not_at_all)):
    /// several calls, one after another, can share one deadline.
    ///
    /// ```no_run
    /// use std::time::{Duration, Instant};
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let deadline = Instant::now() + Duration::from_secs(30); // for both calls together
    /// let read = client.fair_rwlock("catalog").read_with(Wait::until(deadline))?;
    /// let import = client.fair_mutex("import").lock_with(Wait::until(deadline))?;
    /// # drop((read, import));
    /// # Ok(()) }
    /// ```
    pub fn until(deadline: Instant) -> Wait {
        Wait::limited(Limit::Until(deadline))
    }

    /// The same wait, also ended by `cancel` (from any thread, now or
    /// later; a wait whose canceller is cancelled already makes one
    /// attempt that never queues), and still by any canceller given
    /// before. One canceller may end many waits.
    ///
    /// ```no_run
    /// use fairlock::{Wait, WaitCanceller};
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let shutdown = WaitCanceller::new();
    /// let wait = Wait::forever().cancelled_by(&shutdown);
    /// match client.election("scheduler").campaign_with(wait)? {
    ///     Some(leadership) => leadership.unlock()?,
    ///     None => println!("shutting down before this candidate led"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn cancelled_by(mut self, cancel: &WaitCanceller) -> Wait {
        self.cancel.push(cancel.clone());
        self
    }

    /// A wait limited as `limit` says, no canceller.
    fn limited(limit: Limit) -> Wait {
        Wait {
            limit,
            cancel: Vec::new(),
        }
    }

    /// Its cancellers.
    pub(crate) fn cancellers(&self) -> &[WaitCanceller] {
        &self.cancel
    }

    /// Whether one of its cancellers was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.iter().any(WaitCanceller::is_cancelled)
    }

    /// The wait of a call starting now: its deadline (`None`: none), or
    /// [`NoWait`] when it cannot wait at all.
    pub(crate) fn deadline(&self) -> Result<Option<Instant>, NoWait> {
        match self.limit {
            _ if self.is_cancelled() => Err(NoWait),
            Limit::NotAtAll | Limit::For(Duration::ZERO) => Err(NoWait),
            Limit::Until(deadline) if deadline <= Instant::now() => Err(NoWait),
            _ => Ok(self.ends_by()),
        }
    }

    /// When a call with this wait gives up at the latest: its deadline,
    /// passed or not, or now once its canceller is cancelled (a cancel is
    /// the deadline come early); `None` when it has neither (a deadline
    /// within [`NO_LIMIT_WITHIN`] of the last an Instant holds, or a
    /// timeout past it, is no limit).
    pub(crate) fn ends_by(&self) -> Option<Instant> {
        if self.is_cancelled() {
            return Some(Instant::now());
        }
        let end = match self.limit {
            Limit::Until(deadline) => Some(deadline),
            Limit::For(timeout) => Instant::now().checked_add(timeout),
            Limit::Forever | Limit::NotAtAll => None,
        };
        end.filter(|end| end.checked_add(NO_LIMIT_WITHIN).is_some())
    }

    /// The same wait with its duration turned into a deadline from now, so
    /// that calls made one after another share it (a multi-lock's parts).
    pub(crate) fn fixed_from_now(&self) -> Wait {
        let limit = match self.limit {
            Limit::For(timeout) if !timeout.is_zero() => Instant::now()
                .checked_add(timeout)
                .map_or(Limit::Forever, Limit::Until),
            other => other,
        };
        Wait {
            limit,
            cancel: self.cancel.clone(),
        }
    }
}

/// How far a deadline must be from the last instant an `Instant` holds to
/// be one: the graces added to a deadline (a reply's, a leave's) overflowed
/// a deadline closer to it (a panic).
const NO_LIMIT_WITHIN: Duration = Duration::from_secs(365 * 24 * 3600);

/// A wait that cannot wait at all: the call makes one attempt that never
/// queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoWait;

impl From<Duration> for Wait {
    /// [`Wait::at_most`].
    fn from(timeout: Duration) -> Wait {
        Wait::at_most(timeout)
    }
}

impl From<Instant> for Wait {
    /// [`Wait::until`].
    fn from(deadline: Instant) -> Wait {
        Wait::until(deadline)
    }
}
