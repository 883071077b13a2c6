//! What every public lock handle is underneath: a client, a name, the
//! name's keys of one kind, and the lease its acquisitions take. The
//! mutex, the semaphore and the reader-writer lock are thin faces over it
//! (tokio's Mutex, RwLock and Semaphore over one batch semaphore), so a
//! capability written here works for all three.

use std::sync::Arc;
use std::time::Duration;

use crate::connections::config::check_lease;
use crate::error::{Error, Result};
use crate::handles::acquisition::Acquisition;
use crate::handles::call_hold::CallHold;
use crate::handles::cancel::WaitCanceller;
use crate::machinery::shared::{ClientInner, Shared};
use crate::protocol::{Ask, ForceRelease, Freed, LockKeys, LockKind, Status, StatusReply};

/// One named lock of one kind, as a handle holds it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Handle {
    client: Arc<ClientInner>,
    name: Arc<str>,
    /// The name's keys, or why the name is invalid (every call reports it;
    /// shared, so that a handle, which every guard and permit carries,
    /// stays small).
    keys: std::result::Result<Arc<LockKeys>, Arc<Error>>,
    /// A lease no watchdog renews, when set (`with_lease`).
    fixed_lease: Option<Duration>,
    /// The longest a hold is renewed for, when set (`with_max_hold`).
    max_hold: Option<Duration>,
    /// Whether each acquisition is its own owner, not the thread's
    /// (`unbound`): never re-entered, released from any thread.
    unbound: bool,
    /// What an unbound acquisition's owner id carries after `@` instead of
    /// the client's identity (`with_owner_tag`: an election candidate's
    /// value, checked by the election before any call).
    owner_tag: Option<Arc<str>>,
}

/// How long an acquire call may wait for the lock.
#[derive(Clone, Copy)]
pub(crate) enum Wait<'c> {
    /// As long as it takes (`lock`, `acquire`, `read`, `write`).
    Forever,
    /// One attempt that never queues (`try_*`).
    Never,
    /// Up to a timeout (`None`: no limit) or until a canceller fires.
    AtMost(Option<Duration>, Option<&'c WaitCanceller>),
}

impl Handle {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str, kind: LockKind) -> Self {
        let keys = LockKeys::of_kind(&client.shared.config.key_prefix, name, kind)
            .map(Arc::new)
            .map_err(Arc::new);
        Handle {
            client,
            name: name.into(),
            keys,
            fixed_lease: None,
            max_hold: None,
            unbound: false,
            owner_tag: None,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, acquired with a fixed `lease` (checked by each
    /// acquiring call, before any I/O).
    pub(crate) fn with_lease(&self, lease: Duration) -> Handle {
        Handle {
            fixed_lease: Some(lease),
            ..self.clone()
        }
    }

    pub(crate) fn fixed_lease(&self) -> Option<Duration> {
        self.fixed_lease
    }

    /// The same lock, each hold renewed for at most `max_hold` from its
    /// grant (checked by each acquiring call, before any I/O).
    pub(crate) fn with_max_hold(&self, max_hold: Duration) -> Handle {
        Handle {
            max_hold: Some(max_hold),
            ..self.clone()
        }
    }

    /// The same lock, each acquisition an owner of its own.
    pub(crate) fn unbound(&self) -> Handle {
        Handle {
            unbound: true,
            ..self.clone()
        }
    }

    /// The same lock, its unbound acquisitions' owner ids ending with
    /// `@<tag>` instead of `@<identity>` (elections only: a candidate's
    /// value rides where the identity does, so every status shows it).
    pub(crate) fn with_owner_tag(&self, tag: &str) -> Handle {
        Handle {
            owner_tag: Some(tag.into()),
            ..self.clone()
        }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.client.shared
    }

    pub(crate) fn keys(&self) -> Result<&Arc<LockKeys>> {
        self.keys.as_ref().map_err(|err| Error::clone(err))
    }

    /// (lease, fixed) of this handle's acquisitions: the client's lease,
    /// renewed by the watchdog, or the fixed one, checked.
    fn lease(&self) -> Result<(Duration, bool)> {
        match self.fixed_lease {
            None => Ok((self.shared().config.lease, false)),
            Some(lease) => {
                check_lease("a fixed lease", lease)?;
                let drift = &self.shared().config.clock_drift;
                drift.check_against("a fixed lease", lease)?;
                Ok((lease, true))
            }
        }
    }

    /// One acquire call through this handle asking for `ask` (see
    /// [`Acquisition`]); a bad name or lease is an error before any I/O.
    fn acquisition(&self, ask: Ask) -> Result<Acquisition<'_>> {
        let (lease, fixed) = self.lease()?;
        if let Some(max_hold) = self.max_hold {
            check_lease("a maximum hold", max_hold)?;
        }
        Ok(Acquisition {
            ask,
            shared: self.shared(),
            keys: self.keys()?,
            name: &self.name,
            lease,
            fixed,
            max_hold: self.max_hold,
            unbound: self.unbound,
            owner_tag: self.owner_tag.as_deref(),
        })
    }

    /// One acquire call asking for `ask` (a bad one, a bad name or lease
    /// is an error before any I/O), waiting as `wait` says; the hold it got
    /// in the one guard core every guard wraps.
    pub(crate) fn acquire(&self, ask: Result<Ask>, wait: Wait<'_>) -> Result<Option<CallHold>> {
        let ask = ask?;
        let acquisition = self.acquisition(ask)?;
        let got = match wait {
            Wait::Forever => Some(acquisition.wait_until_acquired()?),
            Wait::Never => acquisition.try_once()?,
            Wait::AtMost(timeout, cancel) => acquisition.wait_at_most(timeout, cancel)?,
        };
        Ok(
            got.map(|got| {
                CallHold::new(Arc::clone(&self.client), Arc::clone(&self.name), got, ask)
            }),
        )
    }

    /// The lock's status, listing at most `waiters` waiters and `holders`
    /// holds, in one atomic read.
    pub(crate) fn status(&self, waiters: usize, holders: usize) -> Result<StatusReply> {
        let keys = self.keys()?;
        let op = Status {
            kind: keys.kind(),
            waiters,
            holders,
        };
        self.shared().call(keys, &op)
    }

    /// Whether anyone holds the lock now.
    pub(crate) fn is_locked(&self) -> Result<bool> {
        Ok(self.status(0, 0)?.live_holds > 0)
    }

    /// Frees every hold of the lock, whoever holds it, and hands it on to
    /// the queue in the same step.
    pub(crate) fn force_release(&self) -> Result<Freed> {
        let shared = self.shared();
        // A call key, so that the call delivered twice frees the lock once.
        let op = ForceRelease {
            call_key: format!("{}#{}", shared.client_id, shared.next_wait_id()),
        };
        let (freed, shortfall) = shared.call_write(self.keys()?, &op)?;
        match shortfall {
            Some(shortfall) => Err(shortfall),
            None => Ok(freed),
        }
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name)
            .field("fixed_lease", &self.fixed_lease)
            .field("max_hold", &self.max_hold)
            .field("unbound", &self.unbound)
            .field("owner_tag", &self.owner_tag)
            .finish_non_exhaustive()
    }
}

/// The methods every lock handle has, written once over its `handle:
/// Handle` field: `$lock` is the type, `$make` an expression that makes
/// one in the examples.
macro_rules! handle_methods {
    ($lock:ident, $make:literal) => {
        impl $lock {
            /// The lock's name.
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let lock = ", $make, ";")]
            /// println!("{}", lock.name());
            /// # Ok(()) }
            /// ```
            pub fn name(&self) -> &str {
                self.handle.name()
            }

            /// The same lock, acquired with a fixed `lease` that no
            /// watchdog renews: each hold ends by itself `lease` after it
            /// was granted. A lease outside
            /// [`MIN_LEASE`](crate::MIN_LEASE)`..=`[`MAX_LEASE`](crate::MAX_LEASE)
            /// (30 ms to 365 days) is reported by the acquiring call as
            /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig),
            /// before any I/O.
            ///
            /// ```no_run
            /// use std::time::Duration;
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let lock = ", $make, ".with_lease(Duration::from_secs(60));")]
            /// # drop(lock);
            /// # Ok(()) }
            /// ```
            pub fn with_lease(&self, lease: std::time::Duration) -> Self {
                self.with_handle(self.handle.with_lease(lease))
            }

            /// The same lock, each hold renewed for at most `max_hold` from
            /// its grant: past it the watchdog stops renewing, the guard's
            /// [`LeaseSignal`](crate::LeaseSignal) fires with
            /// [`LeaseEnd::MaxHold`](crate::LeaseEnd::MaxHold), and the lock
            /// passes on when the lease ends (the last renewal asks for no
            /// more than is left of `max_hold`). A hold that cannot outlive
            /// its purpose, even if its thread hangs. Outside
            /// [`MIN_LEASE`](crate::MIN_LEASE)`..=`[`MAX_LEASE`](crate::MAX_LEASE),
            /// the acquiring call reports
            /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)
            /// before any I/O.
            ///
            /// ```no_run
            /// use std::time::Duration;
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let lock = ", $make, ".with_max_hold(Duration::from_secs(600));")]
            /// # drop(lock);
            /// # Ok(()) }
            /// ```
            pub fn with_max_hold(&self, max_hold: std::time::Duration) -> Self {
                self.with_handle(self.handle.with_max_hold(max_hold))
            }

            /// The same lock, acquired by calls that are not bound to a
            /// thread: each acquisition is an owner of its own, so its
            /// guard ([`UnboundGuard`](crate::UnboundGuard)) is
            /// `Send + 'static` and may be released or dropped on any
            /// thread, and it is never re-entered (the same thread asking
            /// again queues like any other caller, and waits for itself
            /// until its timeout). The watchdog renews it while the guard
            /// lives, wherever it is.
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let lock = ", $make, ".unbound();")]
            /// # drop(lock);
            /// # Ok(()) }
            /// ```
            pub fn unbound(&self) -> crate::Unbound<Self> {
                crate::Unbound::new(self.with_handle(self.handle.unbound()))
            }

            /// True when anyone, anywhere, holds the lock (any hold: the
            /// mutex's holder, a permit, a read or a write).
            ///
            /// # Errors
            /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName),
            /// [`ErrorKind::Connection`](crate::ErrorKind::Connection).
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("println!(\"held: {}\", ", $make, ".is_locked()?);")]
            /// # Ok(()) }
            /// ```
            pub fn is_locked(&self) -> crate::Result<bool> {
                self.handle.is_locked()
            }

            /// Frees every hold of the lock, whoever holds it, and hands it
            /// on to the queue in the same step (to as many waiters at its
            /// head as fit). Returns true if anything was held. Each old
            /// holder's guard reports a lost lease (its lease signal fires
            /// at its next renewal). Meant for operators clearing a lock a
            /// stuck process keeps renewing.
            ///
            /// # Errors
            /// As [`is_locked`](Self::is_locked).
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("if ", $make, ".force_unlock()? {")]
            ///     println!("freed what a stuck process held");
            /// }
            /// # Ok(()) }
            /// ```
            pub fn force_unlock(&self) -> crate::Result<bool> {
                Ok(self.handle.force_release()?.holds > 0)
            }

            /// This lock over `handle` (the same name, other settings).
            fn with_handle(&self, handle: $crate::handles::handle::Handle) -> Self {
                let mut lock = self.clone();
                lock.handle = handle;
                lock
            }
        }
    };
}
pub(crate) use handle_methods;
