//! Leader election on the fair queue (etcd's `Election`, Curator's
//! `LeaderSelector`): an election is a mutex's FIFO queue under keys of its
//! own, each campaign an acquisition whose owner id carries the
//! candidate's value (`<client id>:u<call>@<value>`), the leader its
//! holder and the term its fencing token. Its scripts say on the
//! election's channel when a candidate leads and when a leader resigns,
//! for [watchers](crate::LeaderWatch), in the same call that made the
//! change.

use std::time::Duration;

use crate::error::Result;
use crate::handles::guard::Guard;
use crate::handles::kind;
use crate::handles::leader_watch::LeaderWatch;
use crate::handles::lock::{forever, FairLock};
use crate::handles::ownership::{Ownership, Unbound};
use crate::handles::status::{Holder, Participant};
use crate::machinery::caller::wait::Wait;
use crate::protocol::{check_value, owner, Ask};

/// A leader election named by a string: candidates
/// [campaign](FairLock::campaign) and lead one at a time, in the order
/// their campaigns reached Redis; a leader leads until it resigns
/// ([`unlock`](Guard::unlock)s or drops its [`Leadership`]) or loses its
/// lease (its process died or was cut off), and the next candidate in
/// arrival order leads at once. Each leader's [term](Guard::term) is larger
/// than every earlier leader's, a fencing token for what it does.
///
/// Made by [`Client::election`](crate::Client::election); cheap to clone,
/// `Send + Sync`. Unbound by [default](crate::Ownership#which-is-the-default): each campaign is a candidate of its
/// own, whatever thread makes it, and its leadership may move to any
/// thread; [`bound`](FairLock::bound) makes campaigns of one thread with
/// one [value](FairLock::with_value) one candidate (a second campaign of a
/// leading thread with its value leads at once, with the same term; with
/// another value it is another candidate, queued behind the first, so a
/// [`campaign`](FairLock::campaign) there waits for ever). The election of
/// a name is apart from the mutex, the semaphore and the reader-writer
/// lock of that name; what every lock has
/// ([`status`](FairLock::status), [`force_unlock`](FairLock::force_unlock),
/// [`with_max_hold`](FairLock::with_max_hold), ...) an election has too.
///
/// Its own methods: [`campaign`](FairLock::campaign),
/// [`try_campaign`](FairLock::try_campaign),
/// [`try_campaign_for`](FairLock::try_campaign_for),
/// [`campaign_with`](FairLock::campaign_with),
/// [`with_value`](FairLock::with_value), [`value`](FairLock::value),
/// [`leader`](FairLock::leader), [`watch`](FairLock::watch). Its guard is a
/// [`Leadership`].
///
/// What every lock has: [`name`](FairLock::name),
/// [`lock_kind`](FairLock::lock_kind), [`status`](FairLock::status),
/// [`is_locked`](FairLock::is_locked), [`queue_len`](FairLock::queue_len),
/// [`force_unlock`](FairLock::force_unlock), [`revoke`](FairLock::revoke); its
/// lease settings, [`with_fixed_lease`](FairLock::with_fixed_lease),
/// [`with_max_hold`](FairLock::with_max_hold); its ownership,
/// [`bound`](FairLock::bound), [`unbound`](FairLock::unbound).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::builder("redis://127.0.0.1:6379")
///     .identity("scheduler-1")
///     .build()?;
/// let election = client.election("scheduler");
/// let leadership = election.campaign()?; // waits its turn, as "scheduler-1"
/// println!("leading, term {}", leadership.term());
/// // ... lead, passing leadership.term() to what the leader writes ...
/// leadership.unlock()?; // resigns: the next candidate leads at once
/// # Ok(()) }
/// ```
pub type Election<O = Unbound> = FairLock<kind::Election, O>;

/// A candidate's leadership, from its campaign's return until it resigns
/// ([`unlock`](Guard::unlock), or a drop, best effort) or loses its lease.
/// The client's watchdog renews it wherever it is.
///
/// Its own methods: [`term`](#method.term), [`value`](#method.value).
///
/// What every guard has: [`name`](#method.name),
/// [`fencing_token`](#method.fencing_token), [`waited`](#method.waited),
/// [`is_lease_lost`](#method.is_lease_lost),
/// [`lease_signal`](#method.lease_signal), [`is_revoked`](#method.is_revoked),
/// [`revocation_signal`](#method.revocation_signal),
/// [`unlock`](#method.unlock), [`into_any`](#method.into_any),
/// [`lock_handle`](#method.lock_handle).
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let leadership: fairlock::Leadership = client.election("scheduler").campaign()?;
/// std::thread::spawn(move || leadership.unlock()).join().expect("resigner")?;
/// # Ok(()) }
/// ```
pub type Leadership<O = Unbound> = Guard<kind::Election, O>;

impl<O: Ownership> FairLock<kind::Election, O> {
    /// The same election, its candidates campaigning with `value`: it
    /// names the candidate wherever the leader is read
    /// ([`leader`](Self::leader), [`LeaderWatch`](crate::LeaderWatch),
    /// every status). Without it a candidate campaigns with the client's
    /// [identity](crate::ClientBuilder::identity), or its
    /// [id](crate::Client::id) when it has none. Checked by each campaign
    /// before any I/O: 1 to
    /// [`MAX_ELECTION_VALUE_LEN`](crate::MAX_ELECTION_VALUE_LEN) bytes of
    /// printable ASCII without spaces (0x21 to 0x7E).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").with_value("10.0.0.7:8080").campaign()?;
    /// assert_eq!(leadership.value(), "10.0.0.7:8080");
    /// # Ok(()) }
    /// ```
    pub fn with_value(&self, value: &str) -> Self {
        let mut election = self.clone();
        election.kind.value = Some(value.into());
        election
    }

    /// The value this handle's candidates campaign with (see
    /// [`with_value`](Self::with_value)).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.election("scheduler").value(), client.id());
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> String {
        let shared = self.core();
        let identity = shared.config().identity.as_deref();
        let value = self.kind.value.as_deref().or(identity);
        value.unwrap_or(shared.client_id()).to_owned()
    }

    /// Waits as `wait` says in the election's queue, and returns once this
    /// candidate leads: the general form of every way to campaign.
    /// Candidates lead in the order their campaigns reached Redis.
    /// `Ok(None)` when the wait ended first: the candidate left the queue
    /// before it returned, so nobody behind it waits for it (as
    /// [`FairMutex::lock_with`](crate::FairMutex::lock_with)). The call
    /// that makes a candidate leader says so on the election's channel in
    /// the same step, for [`LeaderWatch`](crate::LeaderWatch)es: a
    /// campaign is one round trip when nobody leads.
    ///
    /// The client's watchdog renews the leadership's lease while the
    /// [`Leadership`] lives; a leader whose process dies leads no longer
    /// than its lease.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) for a
    /// bad [value](Self::with_value) (or lease), before any I/O;
    /// otherwise as [`FairMutex::lock_with`](crate::FairMutex::lock_with)
    /// ([`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName) before any
    /// I/O, then `Connection`, `Auth`, `Permission`, `KeyConflict`,
    /// `FormatMismatch`, `Server`, `NotReplicated`, `Internal`).
    ///
    /// ```no_run
    /// use fairlock::Wait;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let election = client.election("scheduler").with_value("node-2");
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone(); // e.g. to a shutdown handler
    /// # drop(stopper);
    /// if let Some(leadership) = election.campaign_with(Wait::forever().cancelled_by(&cancel))? {
    ///     leadership.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn campaign_with(&self, wait: impl Into<Wait>) -> Result<Option<Leadership<O>>> {
        let value = self.value();
        check_value(&value).map_err(|err| self.named("acquire", err))?;
        self.settings
            .request(&self.target, Ask::Mutex, Some(&value), &wait.into())
    }

    /// Waits in the election's queue, as long as it takes, and returns once
    /// this candidate leads.
    ///
    /// # Errors
    /// As [`campaign_with`](Self::campaign_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// assert_eq!(leadership.value(), client.id());
    /// # Ok(()) }
    /// ```
    pub fn campaign(&self) -> Result<Leadership<O>> {
        forever(self.campaign_with(Wait::forever()))
    }

    /// Leads only if nobody leads or waits; never joins the queue.
    ///
    /// # Errors
    /// As [`campaign_with`](Self::campaign_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.election("scheduler").try_campaign()? {
    ///     Some(leadership) => println!("leading, term {}", leadership.term()),
    ///     None => println!("another leads or waits"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_campaign(&self) -> Result<Option<Leadership<O>>> {
        self.campaign_with(Wait::not_at_all())
    }

    /// Waits at most `timeout` in the election's queue.
    ///
    /// # Errors
    /// As [`campaign_with`](Self::campaign_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let election = client.election("scheduler").with_value("node-2");
    /// match election.try_campaign_for(Duration::from_secs(5))? {
    ///     Some(leadership) => println!("leading, term {}", leadership.term()),
    ///     None => println!("another leads; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_campaign_for(&self, timeout: Duration) -> Result<Option<Leadership<O>>> {
        self.campaign_with(Wait::at_most(timeout))
    }

    /// The leader now, if any: one status read, no campaign.
    ///
    /// # Errors
    /// As [`status`](crate::FairLock::status)
    /// ([`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName) before any
    /// I/O, then `Connection`, `Auth`, `Permission`, `KeyConflict`,
    /// `FormatMismatch`, `Server`).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// match client.election("scheduler").leader()? {
    ///     Some(leader) => println!("{} leads, term {}", leader.value, leader.term),
    ///     None => println!("nobody leads"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.status(1)?.holder().map(Leader::of))
    }

    /// Starts watching the election: opens a connection of the watch's
    /// own, subscribed to the election's channel, from which
    /// [`LeaderWatch::next`] learns of each change without polling Redis
    /// in a loop. On Redis Cluster it listens on a seed node (every node
    /// hears every message); behind Sentinel, on the master.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName) for a bad
    /// name, before any I/O;
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when the
    /// subscription cannot be opened; otherwise as
    /// [`leader`](Self::leader) (`Auth`, `Permission`, `KeyConflict`,
    /// `FormatMismatch`, `Server`), and
    /// [`ErrorKind::Internal`](crate::ErrorKind::Internal) when the
    /// subscriber thread cannot start.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::LeaderEvent;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mut watch = client.election("scheduler").watch()?;
    /// loop {
    ///     // `None`: no change within 60 s; the watch goes on.
    ///     let Some(event) = watch.next(Duration::from_secs(60))? else { continue };
    ///     match event {
    ///         LeaderEvent::Leads(leader) => println!("{} leads from term {}", leader.value, leader.term),
    ///         LeaderEvent::Vacant { .. } => println!("nobody leads"),
    ///         _ => println!("{event}"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(&self) -> Result<LeaderWatch> {
        LeaderWatch::start(self.unbound())
    }
}

impl<O: Ownership> Guard<kind::Election, O> {
    /// The leader's term: its hold's fencing token, larger than every
    /// earlier leader's term of this election. Pass it to what the leader
    /// writes, and have that reject a term smaller than one it has seen.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// assert_eq!(leadership.term(), leadership.fencing_token());
    /// # Ok(()) }
    /// ```
    pub fn term(&self) -> u64 {
        self.fencing_token()
    }

    /// The value this candidate campaigned with.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").with_value("node-1").campaign()?;
    /// assert_eq!(leadership.value(), "node-1");
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> &str {
        owner::caller_of(&self.hold.call.owner).1.unwrap_or("")
    }
}

/// An election's leader, as [`Election::leader`] and [`LeaderWatch::next`](crate::LeaderWatch::next)
/// read it.
///
/// ```no_run
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// if let Some(leader) = client.election("scheduler").leader()? {
///     println!("{} (client {}) leads, term {}", leader.value, leader.who.client_id(), leader.term);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Leader {
    /// The value it campaigned with.
    pub value: String,
    /// Its term: the fencing token of its leadership.
    pub term: u64,
    /// Who it is: its owner id, `<client id>:u<call>@<value>`.
    pub who: Participant,
    /// Lease left on its leadership when read; `None` for a leader a watch
    /// knew only from its message (it led no more when the watch read the
    /// election).
    pub remaining_lease: Option<Duration>,
}

impl Leader {
    /// The leader an election's holder is.
    pub(crate) fn of(holder: &Holder) -> Leader {
        Leader {
            value: holder.who.identity().unwrap_or_default().to_owned(),
            term: holder.fencing_token,
            remaining_lease: holder.remaining_lease,
            who: holder.who.clone(),
        }
    }
}
