//! The one guard core: a hold made by one acquire call and given back by
//! naming that call, whatever the kind (a mutex's guard, a semaphore's
//! permit, a reader-writer lock's read or write guard). Every guard
//! releases, drops and gives back through it; the release reply is the
//! same shape for every kind ([`ReleaseReply`]).

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::handles::acquisition::Acquired;
use crate::handles::lease_signal::LeaseSignal;
use crate::machinery::holds::Hold;
use crate::machinery::shared::ClientInner;
use crate::protocol::{Ask, QueueEntry, Release, ReleaseReply};

/// One call's hold, released once: by [`release`](Self::release) or, best
/// effort, on drop.
pub(crate) struct CallHold {
    client: Arc<ClientInner>,
    /// The lock's name, for messages.
    name: Arc<str>,
    hold: Arc<Hold>,
    /// Id of the acquire call that made the hold: the release names it.
    call: u64,
    /// That call's lease and what it asked for (for a give-back of the call).
    lease: Duration,
    fixed: bool,
    ask: Ask,
    /// How long the acquire call waited.
    waited: Duration,
    released: bool,
}

impl CallHold {
    pub(crate) fn new(client: Arc<ClientInner>, name: Arc<str>, got: Acquired, ask: Ask) -> Self {
        CallHold {
            client,
            name,
            hold: got.hold,
            call: got.call,
            lease: got.lease,
            fixed: got.fixed,
            ask,
            waited: got.waited,
            released: false,
        }
    }

    /// The lock's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn fencing_token(&self) -> u64 {
        self.hold.token
    }

    pub(crate) fn waited(&self) -> Duration {
        self.waited
    }

    pub(crate) fn is_lease_lost(&self) -> bool {
        self.hold.is_lost()
    }

    pub(crate) fn lease_signal(&self) -> LeaseSignal {
        LeaseSignal::new(Arc::clone(&self.hold))
    }

    /// A reader-writer lock's hold: read or write.
    pub(crate) fn access(&self) -> Option<crate::protocol::Access> {
        match self.ask {
            crate::protocol::Ask::RwLock(access) => Some(access),
            _ => None,
        }
    }

    /// The units the hold takes (a semaphore's permits).
    pub(crate) fn units(&self) -> u32 {
        self.ask.units()
    }

    /// What the hold is, for messages: `semaphore "uploads" permit`,
    /// `election "scheduler" leadership`.
    fn what(&self) -> String {
        self.ask.describe_on(self.hold.keys.kind(), &self.name)
    }

    /// The acquire call that made the hold, as a give-back names it.
    fn call_entry(&self) -> QueueEntry<'_> {
        QueueEntry {
            owner: &self.hold.owner,
            wait_id: self.call,
            lease: self.lease,
            fixed: self.fixed,
            ask: self.ask,
        }
    }

    /// Releases the hold (once; later calls do nothing). Waiters of this
    /// client that the release handed a hold to wake from its reply.
    pub(crate) fn release(&mut self) -> Result<()> {
        self.release_within(None)
    }

    /// As [`release`](Self::release); with a `budget`, the call goes out
    /// once and waits no longer than that, pool wait included (a drop).
    fn release_within(&mut self, budget: Option<Duration>) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let shared = &self.client.shared;
        shared.holds.unregister(&self.hold);
        let (owner, token, call) = (self.hold.owner.as_str(), self.hold.token, self.call);
        let keys = &self.hold.keys;
        let release = Release { owner, token, call };
        let sent = match budget {
            Some(budget) => shared.call_write_within(keys, &release, budget),
            None => shared.call_write(keys, &release),
        };
        let (reply, shortfall) = sent.inspect_err(|_| {
            // Not sent, or its reply lost: the watchdog gives the call back
            // once Redis answers, so the hold does not wait out its lease.
            shared.give_back_later(keys, self.call_entry());
        })?;
        match reply {
            ReleaseReply::Released { .. } => shortfall.map_or(Ok(()), Err),
            ReleaseReply::HandedOver(next) => {
                // Waiters of this client wake now rather than when their
                // handoff messages arrive (which then find them gone).
                for next in next.iter().filter(|next| shared.is_own(&next.owner)) {
                    shared.grant_waiter(next.wait_id, next.token, next.ttl_ms);
                }
                shortfall.map_or(Ok(()), Err)
            }
            ReleaseReply::NotHeld => {
                self.hold.mark_lost();
                Err(Error::new(
                    ErrorKind::LeaseLost,
                    format!(
                        "{} (token {}) was no longer held",
                        self.what(),
                        self.hold.token
                    ),
                ))
            }
        }
    }
}

impl Drop for CallHold {
    /// Releases within one command timeout, pool wait included; what did
    /// not go out by then the watchdog gives back.
    fn drop(&mut self) {
        let budget = self.client.shared.config.command_timeout;
        if let Err(err) = self.release_within(Some(budget)) {
            log::warn!(
                "fairlock: releasing a {} on drop failed: {err}",
                self.what()
            );
        }
    }
}

/// The methods every guard has, written once over its `hold: CallHold`
/// field: `$guard` is the type, `$what` what it holds (for the docs),
/// `$take` an expression that makes one in the examples, `$release` the
/// name of its consuming release (`unlock`, or a permit's `release`).
macro_rules! guard_methods {
    ($guard:ident, $what:literal, $take:literal, $release:ident) => {
        impl $guard {
            #[doc = concat!("The fencing token of this ", $what, ": larger than the token of every")]
            /// earlier hold of this name, by any client, even across a Redis
            /// restart that lost its data (re-entrant guards of a thread
            /// share their outer guard's). Pass it to the resource you
            /// protect and have it reject writes carrying a smaller token
            /// than one it has seen.
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let guard = ", $take, "?;")]
            /// assert!(guard.fencing_token() > 0);
            /// # Ok(()) }
            /// ```
            pub fn fencing_token(&self) -> u64 {
                self.hold.fencing_token()
            }

            #[doc = concat!("How long the call that made this ", $what, " waited, from its start")]
            /// to its return: its queueing time plus its round trips.
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let guard = ", $take, "?;")]
            /// println!("waited {:?}", guard.waited());
            /// # Ok(()) }
            /// ```
            pub fn waited(&self) -> std::time::Duration {
                self.hold.waited()
            }

            #[doc = concat!("True once the ", $what, " is known to be gone: Redis said the lock")]
            /// is no longer this hold's (expired, force-unlocked), no renewal
            /// confirmed the lease before it ran out, or a fixed lease ran
            /// out. Whatever this says, only a fencing token makes a
            /// protected write safe.
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let guard = ", $take, "?;")]
            /// if guard.is_lease_lost() {
            ///     return Ok(()); // stop side effects
            /// }
            /// # Ok(()) }
            /// ```
            pub fn is_lease_lost(&self) -> bool {
                self.hold.is_lease_lost()
            }

            #[doc = concat!("A signal another thread can block on to learn the moment this ", $what, "'s")]
            /// lease is lost, its maximum hold is reached, or it was released
            /// first. See [`LeaseSignal`](crate::LeaseSignal) for when it fires.
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!("let guard = ", $take, "?;")]
            /// let signal = guard.lease_signal();
            /// std::thread::spawn(move || println!("ended: {:?}", signal.wait()));
            /// # Ok(()) }
            /// ```
            pub fn lease_signal(&self) -> crate::LeaseSignal {
                self.hold.lease_signal()
            }

            #[doc = concat!("Releases the ", $what, " and reports how that went; the waiters it")]
            /// unblocks get the lock at once (a mutex's only at the thread's
            /// last re-entrant guard). Dropping the guard releases it too,
            /// best effort: errors are logged, and the drop waits at most one
            /// command timeout before leaving the release to the watchdog.
            ///
            /// # Errors
            /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the
            /// lock was no longer this hold's (nothing was changed: another
            /// holder's lock is never touched);
            /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when
            /// Redis could not be reached (the client's watchdog gives the
            /// hold back as soon as Redis answers, or the lease runs out
            /// first); with [`sync_replicas`](crate::ClientBuilder::sync_replicas),
            /// [`ErrorKind::NotReplicated`](crate::ErrorKind::NotReplicated)
            /// when the release happened on the master but too few replicas
            /// acknowledged it (after a failover the lock may then stay taken
            /// until this hold's lease runs out).
            ///
            /// ```no_run
            /// # fn main() -> fairlock::Result<()> {
            /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
            #[doc = concat!($take, "?.", stringify!($release), "()?;")]
            /// # Ok(()) }
            /// ```
            pub fn $release(mut self) -> crate::Result<()> {
                self.hold.release()
            }
        }

        impl std::fmt::Debug for $guard {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($guard))
                    .field("name", &self.hold.name())
                    .field("fencing_token", &self.fencing_token())
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use guard_methods;
