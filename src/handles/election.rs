//! Leader election on the fair queue (etcd's `Election`, Curator's
//! `LeaderSelector`): an election is a mutex's FIFO queue under keys of its
//! own, each campaign an acquisition whose owner id carries the
//! candidate's value (`<client id>:u<call>@<value>`), the leader its
//! holder and the term its fencing token. Its scripts say on the
//! election's channel when a candidate leads and when a leader resigns,
//! for [watchers](crate::LeaderWatch), in the same call that made the
//! change.
//!
//! Then `LeaderWatch`: every change of an election's leader (each new
//! leader, each vacancy), in order, from the election's history of changes
//! and its state, read in one step whenever a message on its channel says
//! it changed, just after the leader's lease would run out, and at least
//! every `min(lease, timeout)` (a lease that ran out says nothing). The
//! history (lua/lib/mutex.lua: `ANNOUNCE`) links each change to the last
//! term before it, so a watch that lost messages knows what it missed, and
//! when it cannot know, says so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::handles::kind;
use crate::handles::lock::{forever, FairLock, Guard};
use crate::handles::ownership::{Ownership, Unbound};
use crate::handles::status::{Holder, Participant, Status};
use crate::machinery::caller::wait::Wait;
use crate::machinery::subscriber::watch::Subscription;
use crate::protocol::{check_value, owner, Ask, Change, ElectionMessage, HISTORY_LEN};

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
    /// let stopper = cancel.clone(); // e.g. to the thread that waits for SIGTERM
    /// # drop(stopper);
    /// if let Some(leadership) = election.campaign_with(Wait::forever().cancelled_by(&cancel))? {
    ///     leadership.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn campaign_with(&self, wait: impl Into<Wait>) -> Result<Option<Leadership<O>>> {
        let value = self.value();
        check_value(&value).map_err(|err| self.target.during("acquire", err))?;
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
    /// in a loop. On a Redis Cluster of 7.0 or later (or Valkey) it
    /// listens at the master of the election's slot, by sharded pub/sub,
    /// and again there after a move; on an older cluster on a seed node
    /// (every node hears every message); behind Sentinel, on the master.
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
    /// Who it is: its owner id, `<client id>:u<call>@<value>`
    /// (`<client id>:<thread number>@<value>` for a
    /// [bound](crate::FairLock::bound) campaign).
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

/// How long after the leader's lease would run out a watch reads the
/// election again, to see the vacancy a lease that ran out leaves.
const LEASE_END_MARGIN: Duration = Duration::from_millis(10);

/// One change of an election's leader, as a [`LeaderWatch`] reports it.
/// Displayed as one line: `leader <value> term <term> (<owner id>)`,
/// `vacant after term <term>` (or `vacant`), `missed changes after term
/// <term>`.
///
/// ```no_run
/// use std::time::Duration;
/// use fairlock::LeaderEvent;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mut watch = client.election("scheduler").watch()?;
/// match watch.next(Duration::from_secs(5))? {
///     Some(LeaderEvent::Leads(leader)) => println!("{} leads", leader.value),
///     Some(LeaderEvent::Vacant { ended }) => println!("nobody leads (last term {ended:?})"),
///     Some(LeaderEvent::Missed { after }) => println!("lost track after term {after}"),
///     Some(other) => println!("{other}"),
///     None => println!("no change in 5 s"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LeaderEvent {
    /// A candidate leads, from its term on.
    Leads(Leader),
    /// Nobody leads: the leader of term `ended` resigned, its call was
    /// abandoned or it was force-released with nobody waiting, or its lease
    /// ran out.
    /// `None` when the election has no term on record (nobody led it
    /// within the [fence life](crate::ClientBuilder::fence_life), or Redis
    /// lost its data): only as a watch's first event, or right after a
    /// [`Missed`](Self::Missed) that found it so.
    Vacant {
        /// The term that ended.
        ended: Option<u64>,
    },
    /// The watch could not read every change after term `after`: more
    /// than [`ELECTION_HISTORY_LEN`](crate::ELECTION_HISTORY_LEN) changes
    /// happened while it could not read the election (its connection
    /// lost, its caller away; or exactly that many after the leader of
    /// `after`, the oldest the history holds being the next leader: a
    /// handover, or a vacancy between that the history dropped, which the
    /// watch cannot tell apart), or it was away longer than half the fence
    /// life across a vacancy longer than the fence life (its own client's
    /// [`fence_life`](crate::ClientBuilder::fence_life): a watch whose
    /// client's is longer than a candidate's may take such an absence for
    /// a vacancy the keys outlived, and miss a leader unsaid), or Redis lost its
    /// data since the watch last read a leader, or the election's terms
    /// went back below `after` (Redis came back with older data: a
    /// restart from an older snapshot, a failover to a replica that
    /// lagged). Leaders may have come and gone unreported; the events that
    /// follow go on from what it read.
    Missed {
        /// The newest term the watch knew of before the gap.
        after: u64,
    },
}

impl std::fmt::Display for LeaderEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaderEvent::Leads(l) => write!(f, "leader {} term {} ({})", l.value, l.term, l.who),
            LeaderEvent::Vacant { ended: Some(term) } => write!(f, "vacant after term {term}"),
            LeaderEvent::Vacant { ended: None } => write!(f, "vacant"),
            LeaderEvent::Missed { after } => write!(f, "missed changes after term {after}"),
        }
    }
}

/// Where an event stands in an election's order of changes: its term,
/// then a gap before it, the leader of that term, the vacancy after it.
/// (After the vacancy: a gap the watch found after the newest term it
/// knew, with the election's lock key gone, and the vacancy it read then.)
type Order = (u64, u8);
const GAP: u8 = 0;
const LEADS: u8 = 1;
const VACANT: u8 = 2;
const GAP_AFTER: u8 = 3;
const VACANT_AFTER: u8 = 4;

impl LeaderEvent {
    /// An entry of the election's history as an event.
    fn of_change(change: &Change) -> (Order, LeaderEvent) {
        match &change.message {
            ElectionMessage::Leads { term, value, owner } => (
                (*term, LEADS),
                LeaderEvent::Leads(Leader {
                    value: value.clone(),
                    term: *term,
                    who: Participant::new(owner.clone()),
                    remaining_lease: None,
                }),
            ),
            ElectionMessage::Resigned { term } => {
                ((*term, VACANT), LeaderEvent::Vacant { ended: Some(*term) })
            }
        }
    }
}

/// A watch on an election's leaders, made by [`Election::watch`]: each
/// [`next`](Self::next) returns the next change, a [`LeaderEvent`], in
/// the order of terms. It reads the election (its state and its history
/// of changes, in one step) when a message on the election's channel says
/// it changed, just after the leader's lease would run out, and at least
/// every `min(lease, timeout)` of its call in any case, so that a change
/// that said nothing (a leader whose lease ran out, a message lost) is
/// still seen; the history gives it the leaders that
/// came and went between two reads, and tells it when it cannot have them
/// all ([`LeaderEvent::Missed`]). Its connection closes when it is
/// dropped.
///
/// It misses nothing while at most
/// [`ELECTION_HISTORY_LEN`](crate::ELECTION_HISTORY_LEN) changes happen
/// between two of its reads: a lost subscription is opened again by the
/// next call, which reads the election at once. A vacancy that no script
/// saw (a lease that ran out) is reported when a read finds it; a watch
/// that did not read while it lasted reports the next leader after the
/// last one.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mut watch = client.election("scheduler").watch()?;
/// if let Some(event) = watch.next(Duration::from_secs(5))? {
///     println!("{event}");
/// }
/// # Ok(()) }
/// ```
pub struct LeaderWatch {
    election: Election,
    /// The election's channel, which says when to read it again.
    subscription: Subscription,
    /// The newest change learned of, returned or pending; `None` before
    /// the first read.
    known: Option<Order>,
    /// Events learned of and not returned yet, in order.
    pending: BTreeMap<Order, LeaderEvent>,
    /// Read the election before waiting again (first call, a message, a
    /// subscription opened again, a read Redis did not answer).
    read_now: bool,
    next_read: Instant,
    /// When the last read that succeeded was sent, and whether it read a
    /// leader (whose lock key then lives a fence life at least).
    last_read: Option<(Instant, bool)>,
}

/// `err` of a watch of `election`, saying so.
fn watching(election: &Election, err: Error) -> Error {
    election.target.during("watch", err)
}

impl LeaderWatch {
    /// A watch of `election`, subscribed to its channel (see
    /// [`Election::watch`](crate::FairLock::watch)).
    pub(crate) fn start(election: Election) -> Result<LeaderWatch> {
        let subscription = election.core().watch(&election.target);
        Ok(LeaderWatch {
            subscription: subscription.map_err(|err| watching(&election, err))?,
            election,
            known: None,
            pending: BTreeMap::new(),
            read_now: true,
            next_read: Instant::now(),
            last_read: None,
        })
    }

    /// Returns the next change: a new leader, a vacancy, or a gap the
    /// watch could not fill (the first call: the state now, its leader or
    /// its vacancy), waiting up to `timeout` for one; `None` at timeout.
    /// Changes come in order, each once: a watch that missed messages, or
    /// whose caller was busy, returns every change since, in order, from
    /// the election's history.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// cannot be read or the subscription cannot be opened again (a later
    /// call tries again, and misses nothing within the bound above);
    /// otherwise the kinds of
    /// [`status`](crate::FairLock::status) (`Auth`, `Permission`,
    /// `KeyConflict`, `FormatMismatch`, `Server`). A
    /// read, or a subscription opened again, that a stalled server has not
    /// answered by the timeout (and 50 ms of grace) is given up: `None`,
    /// and the next call tries again and reads first.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use fairlock::LeaderEvent;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mut watch = client.election("scheduler").watch()?;
    /// loop {
    ///     match watch.next(Duration::from_secs(30))? {
    ///         Some(LeaderEvent::Leads(leader)) => println!("term {}: {}", leader.term, leader.value),
    ///         Some(event) => println!("{event}"),
    ///         None => println!("no change in 30 s"),
    ///     }
    /// #   break;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn next(&mut self, timeout: Duration) -> Result<Option<LeaderEvent>> {
        let started = Instant::now();
        // As a lock's wait counts it (a timeout that ends too near the
        // last Instant is none).
        let deadline = Wait::at_most(timeout).ends_by();
        let every = self.election.core().config().lease.min(timeout);
        self.next_read = self.next_read.min(started + every);
        // Not answered by the timeout (a stalled or slow server; the
        // client's connections busy): nothing seen in time, as a lock's
        // wait that runs out. Redis unreachable is an error, as before.
        let given_up = |err: &Error| {
            (err.is_reply_timeout() || err.is_pool_busy())
                && deadline.is_some_and(|at| Instant::now() >= at)
        };
        loop {
            // What it learned comes first, whatever Redis does meanwhile.
            let now = Instant::now();
            if self.pending.is_empty() && (self.read_now || now >= self.next_read) {
                self.read_now = false;
                self.next_read = now + every;
                // Unanswered or unreachable (given up too): the next call
                // reads first.
                if let Err(err) = self.read(deadline) {
                    self.read_now = err.is_connection();
                    if !given_up(&err) {
                        return Err(watching(&self.election, err));
                    }
                }
            }
            if let Some((_, event)) = self.pending.pop_first() {
                return Ok(Some(event));
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(None);
            }
            let until = deadline.map_or(self.next_read, |d| d.min(self.next_read));
            let wait = until.saturating_duration_since(now);
            // A subscription not opened again in time is opened by the
            // next call, which then reads first.
            match self.subscription.receive(wait, deadline) {
                Err(err) if given_up(&err) => {}
                Err(err) => return Err(watching(&self.election, err)),
                Ok(received) => self.read_now |= received,
            }
        }
    }

    /// Reads the election's state and history in one step, and learns the
    /// changes since the newest it knew of: those of the history, then
    /// the state they led to (a leader with its lease left, or a vacancy a
    /// lease that ran out left). The first read learns the state only.
    /// Its reply is waited for until `deadline` (the caller's timeout),
    /// or from now if that has passed, and a request's grace at most.
    fn read(&mut self, deadline: Option<Instant>) -> Result<()> {
        let sent = Instant::now();
        // Its status (its leader, no waiters) and its history of changes,
        // oldest first, in one atomic step: the changes and the state they
        // led to.
        let by = deadline.map(|at| at.max(sent));
        let core = self.election.core();
        let mut reply = core.status_by(&self.election.target, 1, 0, by)?;
        let history = std::mem::take(&mut reply.history);
        let status = Status::from_reply(reply);
        let leader = status.holder().map(Leader::of);
        let last_term = status.last_fencing_token;
        // A lease that runs out says nothing: read again just after it
        // would (a renewed one is found renewed, and read again later).
        if let Some(left) = leader.as_ref().and_then(|l| l.remaining_lease) {
            self.next_read = self.next_read.min(sent + left + LEASE_END_MARGIN);
        }
        // Whether the last read was sent less than half a fence life before
        // this one (half: the server's clock and this one's may run apart)
        // and read no leader: the lock key may have run out since.
        // (Instants subtract saturating at zero.)
        let half_fence_life = core.config().fence_life / 2;
        let last_read = self.last_read.replace((sent, leader.is_some()));
        let recent = last_read.is_some_and(|(last, led)| !led && sent - last < half_fence_life);
        // Terms gone back (Redis came back with older data): a gap, and the
        // state now as a first read learns it (nothing is pending: `next`).
        if let Some((after, _)) = self.known.filter(|k| last_term.is_some_and(|t| t < k.0)) {
            self.pending.insert((0, GAP), LeaderEvent::Missed { after });
            self.known = None;
        }
        if let Some(known) = self.known {
            // Each with the term before it, in the history's order.
            let changes: Vec<((Order, LeaderEvent), u64)> = (history.iter())
                .map(|change| (LeaderEvent::of_change(change), change.after))
                .filter(|((order, _), _)| *order > known)
                .collect();
            // Whether the first change the history holds after `known` is the
            // one right after it: it followed the newest term the watch knew,
            // or it followed none (the election's lock key was gone: nobody
            // was granted it for a fence life) and the watch read the election
            // vacant less than half a fence life ago (a grant since would
            // have kept the key; a key gone that had a leader then was lost
            // with Redis's data). With no change in the history, nothing was
            // granted since unless a term newer than `known`, or a key gone
            // after a long absence or a leader, says otherwise.
            // A leader after the one known, oldest in a full history: a
            // handover, or a vacancy between trimmed away; it cannot tell.
            let trimmed = known.1 == LEADS
                && history.len() >= HISTORY_LEN
                && (history.first().map(|c| LeaderEvent::of_change(c).0))
                    .is_some_and(|(term, what)| what == LEADS && term > known.0);
            let linked = !trimmed
                && match changes.first() {
                    Some(&(_, after)) => after == known.0 || (after == 0 && recent),
                    None => last_term.map_or(known.0 == 0 || recent, |term| term <= known.0),
                };
            if !linked {
                let missed = LeaderEvent::Missed { after: known.0 };
                match changes.first().map(|((order, _), _)| order.0).or(last_term) {
                    Some(term) => self.learn((term, GAP), missed),
                    None => {
                        self.learn((known.0, GAP_AFTER), missed);
                        self.learn((known.0, VACANT_AFTER), LeaderEvent::Vacant { ended: None });
                    }
                }
            }
            for ((order, event), _) in changes {
                self.learn(order, event);
            }
        }
        match leader {
            // The leader read now, with its lease (in place of its history
            // entry).
            Some(leader) => self.learn((leader.term, LEADS), LeaderEvent::Leads(leader)),
            None => {
                // The lock key gone: the last term known ended. A first read
                // (nothing known yet) learns the vacancy, with a term or not.
                let ended = last_term.or(self.known.map(|known| known.0));
                let ended = ended.filter(|&term| term > 0);
                if ended.is_some() || self.known.is_none() {
                    let event = LeaderEvent::Vacant { ended };
                    self.learn((ended.unwrap_or(0), VACANT), event);
                }
            }
        }
        Ok(())
    }

    /// Adds `event` at `order` unless the watch knew of it already (one of
    /// the same order learned in the same read gives way to it).
    fn learn(&mut self, order: Order, event: LeaderEvent) {
        let known = |known| order < known || (order == known && !self.pending.contains_key(&order));
        if self.known.is_some_and(known) {
            return;
        }
        self.pending.insert(order, event);
        self.known = Some(self.known.map_or(order, |known| known.max(order)));
    }
}

impl std::fmt::Debug for LeaderWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderWatch")
            .field("name", &self.election.name())
            .field("known", &self.known)
            .finish_non_exhaustive()
    }
}
