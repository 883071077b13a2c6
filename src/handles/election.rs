//! Leader election on the fair queue (etcd's `Election`, Curator's
//! `LeaderSelector`): an election is a mutex's FIFO queue under keys of its
//! own, each campaign an unbound acquisition whose owner id carries the
//! candidate's value (`<client id>:u<call>@<value>`), the leader its
//! holder and the term its fencing token. Beside the queue, a channel per
//! election (`<key prefix>:election:<name>`) on which the election's
//! scripts say who leads and who resigned, for watchers.

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::connections::Listen;
use crate::error::{Error, Result};
use crate::handles::call_hold::CallHold;
use crate::handles::cancel::WaitCanceller;
use crate::handles::handle::{Handle, Wait};
use crate::handles::lease_signal::LeaseSignal;
use crate::handles::status::{Holder, LockStatus, Participant};
use crate::machinery::shared::{ClientInner, Shared};
use crate::machinery::subscriber;
use crate::protocol::{check_value, election_channel, Ask, ElectionMessage, LockKind};

/// How long a watch waits for more messages after a read found a leader no
/// message named, so that a message published before what the read saw is
/// not passed by it.
const DRAIN_WAIT: Duration = Duration::from_millis(1);

/// A leader election named by a string: candidates
/// [campaign](Self::campaign) with a value and lead one at a time, in the
/// order their campaigns reached Redis; a leader leads until it
/// [resigns](Leadership::resign), drops its [`Leadership`] or loses its
/// lease (its process died or was cut off), and the next candidate in
/// arrival order leads at once. Each leader's [term](Leadership::term) is
/// larger than every earlier leader's, a fencing token for what it does.
///
/// Made by [`Client::election`](crate::Client::election); cheap to clone,
/// `Send + Sync`. The election of a name is apart from the mutex, the
/// semaphore and the reader-writer lock of that name.
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
/// leadership.resign()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    /// The election's queue: a mutex's, in keys of its own, each
    /// acquisition unbound.
    handle: Handle,
    /// The channel leaders announce themselves on.
    channel: Arc<str>,
}

impl Election {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> Self {
        let handle = Handle::new(client, name, LockKind::Election).unbound();
        let channel = election_channel(&handle.shared().config.key_prefix, name).into();
        Election { handle, channel }
    }

    /// The election's name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.election("scheduler").name(), "scheduler");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.handle.name()
    }

    fn shared(&self) -> &Shared {
        self.handle.shared()
    }

    /// The value [`campaign`](Self::campaign) uses: the client's
    /// [identity](crate::ClientBuilder::identity), or its
    /// [id](crate::Client::id) when it has none.
    fn own_value(&self) -> String {
        let shared = self.shared();
        shared
            .config
            .identity
            .clone()
            .unwrap_or_else(|| shared.client_id.clone())
    }

    /// Campaigns with the client's [identity](crate::ClientBuilder::identity)
    /// as the value (its [id](crate::Client::id) when it has none): as
    /// [`campaign_with`](Self::campaign_with).
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
    pub fn campaign(&self) -> Result<Leadership> {
        self.campaign_with(&self.own_value())
    }

    /// Waits in the election's queue, as long as it takes, and returns once
    /// this candidate leads. Candidates lead in the order their campaigns
    /// reached Redis; each campaign is a candidate of its own, whatever
    /// thread makes it (a second campaign of one thread queues behind the
    /// first). The value names the candidate wherever the leader is read
    /// ([`Election::leader`], [`LeaderWatch`], every status); the call
    /// that makes it leader says so on the election's channel, in the same
    /// round trip (watchers also read the leader on their own).
    ///
    /// The client's watchdog renews the leadership's lease while the
    /// [`Leadership`] lives; a leader whose process dies leads no longer
    /// than its lease.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) for a
    /// value that is not 1 to [`MAX_ELECTION_VALUE_LEN`](crate::MAX_ELECTION_VALUE_LEN)
    /// bytes of printable ASCII without spaces (0x21 to 0x7E), before any
    /// I/O; [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName),
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) as
    /// [`FairMutex::lock`](crate::FairMutex::lock).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign_with("10.0.0.7:8080")?;
    /// assert_eq!(leadership.value(), "10.0.0.7:8080");
    /// # Ok(()) }
    /// ```
    pub fn campaign_with(&self, value: &str) -> Result<Leadership> {
        self.run(value, Wait::Forever)?
            .ok_or_else(Error::unbounded_wait_ended)
    }

    /// As [`campaign_with`](Self::campaign_with), waiting at most
    /// `timeout`: on timeout the candidate leaves the queue before this
    /// returns `Ok(None)`, so nobody behind it waits for it (as
    /// [`FairMutex::try_lock_for`](crate::FairMutex::try_lock_for)).
    /// `Duration::ZERO` leads only if nobody leads or waits.
    ///
    /// # Errors
    /// As [`campaign_with`](Self::campaign_with).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let election = client.election("scheduler");
    /// match election.try_campaign_for("node-2", Duration::from_secs(5))? {
    ///     Some(leadership) => println!("leading, term {}", leadership.term()),
    ///     None => println!("another leads; left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_campaign_for(&self, value: &str, timeout: Duration) -> Result<Option<Leadership>> {
        self.run(value, Wait::AtMost(Some(timeout), None))
    }

    /// As [`campaign_with`](Self::campaign_with), until this candidate
    /// leads, `timeout` passes (`None`: no limit) or `cancel` is cancelled
    /// from another thread; then the candidate leaves the queue before
    /// this returns `Ok(None)` (as
    /// [`FairMutex::lock_cancellable`](crate::FairMutex::lock_cancellable)).
    ///
    /// # Errors
    /// As [`campaign_with`](Self::campaign_with).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let election = client.election("scheduler");
    /// let cancel = fairlock::WaitCanceller::new();
    /// let stopper = cancel.clone(); // e.g. to a shutdown handler
    /// # drop(stopper);
    /// if let Some(leadership) = election.campaign_cancellable("node-2", None, &cancel)? {
    ///     leadership.resign()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn campaign_cancellable(
        &self,
        value: &str,
        timeout: Option<Duration>,
        cancel: &WaitCanceller,
    ) -> Result<Option<Leadership>> {
        self.run(value, Wait::AtMost(timeout, Some(cancel)))
    }

    /// One campaign with `value` (checked before any I/O), waiting as
    /// `wait` says; the script that made it leader announced it on the
    /// channel.
    fn run(&self, value: &str, wait: Wait<'_>) -> Result<Option<Leadership>> {
        check_value(value)?;
        let hold = self
            .handle
            .with_owner_tag(value)
            .acquire(Ok(Ask::Mutex), wait)?;
        Ok(hold.map(|hold| Leadership {
            term: hold.fencing_token(),
            hold: Some(hold),
            election: self.clone(),
            value: value.to_owned(),
        }))
    }

    /// The leader now, if any: one status read, no campaign.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidName`](crate::ErrorKind::InvalidName),
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection).
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
        Ok(self.status(0)?.holder.map(Leader::of))
    }

    /// The election as a lock's status, in one atomic read: the leader as
    /// its holder, the first `max_candidates` candidates waiting, in the
    /// order they will lead, the number waiting and the last term. Each
    /// participant's [`identity`](Participant::identity) is the value it
    /// campaigns with.
    ///
    /// # Errors
    /// As [`leader`](Self::leader).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let status = client.election("scheduler").status(10)?;
    /// for next in &status.waiters {
    ///     println!("next: {:?}", next.who.identity());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn status(&self, max_candidates: usize) -> Result<LockStatus> {
        Ok(LockStatus::from_reply(
            self.handle.status(max_candidates, 1)?,
        ))
    }

    /// Starts watching the election: opens a connection of the watch's
    /// own, subscribed to the election's channel, from which
    /// [`LeaderWatch::next`] learns of each new leader without polling
    /// Redis in a loop. On Redis Cluster it listens on a seed node (every
    /// node hears every message); behind Sentinel, on the master.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when the
    /// subscription cannot be opened.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mut watch = client.election("scheduler").watch()?;
    /// while let Some(leader) = watch.next(Duration::from_secs(60))? {
    ///     println!("{} leads from term {}", leader.value, leader.term);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(&self) -> Result<LeaderWatch> {
        let conn = self.subscription()?;
        Ok(LeaderWatch {
            election: self.clone(),
            conn: Some(conn),
            floor: 0,
            first_read: true,
            pending: BTreeMap::new(),
            read_now: true,
            next_read: Instant::now(),
        })
    }

    /// A new connection subscribed to the election's channel.
    fn subscription(&self) -> Result<redis::Connection> {
        let mut conn = self.shared().backend.subscriber_connection(&Listen::Main)?;
        subscriber::subscribe(&mut conn, &self.channel)?;
        Ok(conn)
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// A candidate's leadership, from its campaign's return until it
/// [resigns](Self::resign), is dropped (which resigns, best effort) or
/// loses its lease. `Send + Sync + 'static`: it may move to any thread,
/// and the client's watchdog renews it wherever it is.
///
/// ```
/// fn assert_send_sync_static<T: Send + Sync + 'static>() {}
/// assert_send_sync_static::<fairlock::Leadership>();
/// ```
#[must_use = "if unused the leadership is resigned immediately"]
pub struct Leadership {
    /// The campaign's hold; `None` once resigned.
    hold: Option<CallHold>,
    election: Election,
    value: String,
    term: u64,
}

impl Leadership {
    /// The leader's term: its hold's fencing token, larger than every
    /// earlier leader's term of this election. Pass it to what the leader
    /// writes, and have that reject a term smaller than one it has seen.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// assert!(leadership.term() > 0);
    /// # Ok(()) }
    /// ```
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The value this candidate campaigned with.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign_with("node-1")?;
    /// assert_eq!(leadership.value(), "node-1");
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The election's name.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// assert_eq!(leadership.name(), "scheduler");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.election.name()
    }

    /// How long the campaign waited, from its start to its return.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// println!("became leader after {:?}", leadership.waited());
    /// # Ok(()) }
    /// ```
    pub fn waited(&self) -> Duration {
        self.hold.as_ref().map_or(Duration::ZERO, CallHold::waited)
    }

    /// True once the leadership is known to be gone: no renewal confirmed
    /// its lease in time (Redis unreachable, a partition, a paused
    /// process: this comes before any other candidate's campaign can
    /// return), or Redis said it was no longer this candidate's. Only the
    /// [term](Self::term) makes a leader's write safe.
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// if leadership.is_lease_lost() {
    ///     return Ok(()); // stop leading
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.hold.as_ref().is_none_or(CallHold::is_lease_lost)
    }

    /// A signal other threads block on to learn the moment the leadership
    /// is lost (or resigned first): see [`LeaseSignal`].
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign()?;
    /// let signal = leadership.lease_signal();
    /// std::thread::spawn(move || println!("leadership ended: {:?}", signal.wait()));
    /// # Ok(()) }
    /// ```
    pub fn lease_signal(&self) -> LeaseSignal {
        self.hold
            .as_ref()
            .expect("a leadership holds its hold until resigned or dropped")
            .lease_signal()
    }

    /// Resigns: releases the leadership, so that the next candidate in
    /// arrival order leads at once, and says so on the election's channel.
    /// Dropping the leadership resigns too, best effort.
    ///
    /// # Errors
    /// As [`FairMutexGuard::unlock`](crate::FairMutexGuard::unlock):
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the
    /// leadership was already gone (another candidate may lead; nothing
    /// was changed), [`ErrorKind::Connection`](crate::ErrorKind::Connection)
    /// when Redis could not be reached (the watchdog releases it as soon
    /// as Redis answers, or the lease runs out first).
    ///
    /// ```no_run
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// client.election("scheduler").campaign()?.resign()?;
    /// # Ok(()) }
    /// ```
    pub fn resign(mut self) -> Result<()> {
        let Some(mut hold) = self.hold.take() else {
            return Ok(());
        };
        hold.release()
    }
}

impl Drop for Leadership {
    /// Resigns, best effort: the release waits at most one command timeout
    /// (what did not go out by then the watchdog gives back).
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            drop(hold);
        }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("name", &self.name())
            .field("value", &self.value)
            .field("term", &self.term)
            .finish_non_exhaustive()
    }
}

/// An election's leader, as [`Election::leader`] and [`LeaderWatch::next`]
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
    fn of(holder: Holder) -> Leader {
        Leader {
            value: holder.who.identity().unwrap_or_default().to_owned(),
            term: holder.fencing_token,
            remaining_lease: holder.remaining_lease,
            who: holder.who,
        }
    }
}

/// What a watch heard when it waited for a message.
enum Heard {
    Nothing,
    /// A message (parsed if it was one of an election's).
    Message(Option<ElectionMessage>),
}

/// A watch on an election's leaders, made by [`Election::watch`]: each
/// [`next`](Self::next) returns the next leader, in the order of terms.
/// It reads the leader when a message on the election's channel says it
/// changed, and at least every `min(lease, timeout)` of its call in any
/// case, so that a change that said nothing (a leader that died, its
/// successor's message lost) is still seen. Its connection closes when it
/// is dropped.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mut watch = client.election("scheduler").watch()?;
/// if let Some(leader) = watch.next(Duration::from_secs(5))? {
///     println!("{} leads", leader.value);
/// }
/// # Ok(()) }
/// ```
pub struct LeaderWatch {
    election: Election,
    /// The subscription; `None` after it broke, until opened again.
    conn: Option<redis::Connection>,
    /// Terms up to this one are not returned: the last returned, or below
    /// the leader of the first read.
    floor: u64,
    /// No read of the leader yet.
    first_read: bool,
    /// Leaders learned of and not returned yet, by term.
    pending: BTreeMap<u64, Leader>,
    /// Read the leader before waiting again (first call, a message, a
    /// subscription opened again).
    read_now: bool,
    next_read: Instant,
}

impl LeaderWatch {
    /// Returns the next leader: one whose term is larger than that of the
    /// last leader this watch returned (the first call: the leader now, if
    /// any), waiting up to `timeout` for one; `None` at timeout. Leaders
    /// come in the order of their terms, each once: a watch that heard
    /// two changes while its caller was busy returns both, in order
    /// (messages carry their terms).
    ///
    /// # Errors
    /// [`ErrorKind::Connection`](crate::ErrorKind::Connection) when Redis
    /// cannot be read or the subscription cannot be opened again (a later
    /// call tries again).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> fairlock::Result<()> {
    /// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
    /// let mut watch = client.election("scheduler").watch()?;
    /// loop {
    ///     match watch.next(Duration::from_secs(30))? {
    ///         Some(leader) => println!("term {}: {}", leader.term, leader.value),
    ///         None => println!("no change in 30 s"),
    ///     }
    /// #   break;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Leader>> {
        let started = Instant::now();
        let deadline = started.checked_add(timeout);
        let every = self.election.shared().config.lease.min(timeout);
        self.next_read = self.next_read.min(started + every);
        loop {
            let now = Instant::now();
            if self.read_now || now >= self.next_read {
                self.read_now = false;
                self.next_read = now + every;
                self.read()?;
            }
            if let Some(leader) = self.take_next() {
                return Ok(Some(leader));
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(None);
            }
            let until = deadline.map_or(self.next_read, |d| d.min(self.next_read));
            if let Heard::Message(message) = self.receive(until.saturating_duration_since(now))? {
                self.heard(message);
            }
        }
    }

    /// Reads the leader. A new one no message named yet may have had
    /// predecessors whose messages are still on their way (a message is
    /// sent before what the read saw, but on another connection): those
    /// are read first, so that none is passed.
    fn read(&mut self) -> Result<()> {
        let leader = self.election.leader()?;
        if std::mem::replace(&mut self.first_read, false) {
            if let Some(leader) = &leader {
                self.floor = self.floor.max(leader.term.saturating_sub(1));
                self.pending.retain(|&term, _| term >= leader.term);
            }
        }
        let Some(leader) = leader else {
            return Ok(());
        };
        if leader.term <= self.floor {
            return Ok(());
        }
        let unheard = self.pending.insert(leader.term, leader).is_none();
        if unheard {
            while let Heard::Message(message) = self.receive(DRAIN_WAIT)? {
                self.heard(message);
            }
        }
        Ok(())
    }

    /// Notes a message: a new leader it names is pending, and any message
    /// has the leader read again.
    fn heard(&mut self, message: Option<ElectionMessage>) {
        self.read_now = true;
        if let Some(ElectionMessage::Leads { term, value, owner }) = message {
            if term > self.floor {
                self.pending.entry(term).or_insert(Leader {
                    value,
                    term,
                    who: Participant::new(owner),
                    remaining_lease: None,
                });
            }
        }
    }

    /// The pending leader of the smallest term above the floor, which
    /// rises to it.
    fn take_next(&mut self) -> Option<Leader> {
        let (term, leader) = self.pending.pop_first()?;
        self.floor = term;
        Some(leader)
    }

    /// Waits up to `wait` for a message on the subscription, opening it
    /// again first if it broke.
    fn receive(&mut self, wait: Duration) -> Result<Heard> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => {
                let conn = self.election.subscription()?;
                // Messages published while it was closed are lost.
                self.read_now = true;
                self.conn.insert(conn)
            }
        };
        conn.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(Error::from_redis)?;
        // Read as a `PubSub` whose drop is skipped: dropping one
        // unsubscribes, and this connection stays subscribed for the next
        // call. (It holds nothing else to drop: its message cache stays
        // empty, as the subscription was made without it.)
        let mut pubsub = ManuallyDrop::new(conn.as_pubsub());
        let received = pubsub.get_message();
        match received {
            Ok(message) => Ok(Heard::Message(ElectionMessage::parse(
                message.get_payload_bytes(),
            ))),
            Err(err) if err.is_timeout() || subscriber::interrupted(&err) => Ok(Heard::Nothing),
            Err(err) => {
                log::info!(
                    "fairlock: the watch of election {:?} lost its subscription: {err}",
                    self.election.name()
                );
                self.conn = None;
                self.read_now = true;
                Ok(Heard::Nothing)
            }
        }
    }
}

impl std::fmt::Debug for LeaderWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderWatch")
            .field("name", &self.election.name())
            .field("last_term", &self.floor)
            .finish_non_exhaustive()
    }
}
