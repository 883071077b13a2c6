//! `LeaderWatch`: every change of an election's leader, in the order of
//! terms, from the messages on the election's channel and reads of the
//! leader (at least every `min(lease, timeout)`, so that a change that said
//! nothing is still seen).

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::handles::election::{Election, Leader};
use crate::handles::kind;
use crate::handles::lock::FairLock;
use crate::handles::ownership::Ownership;
use crate::handles::participant::Participant;
use crate::machinery::subscriber;
use crate::protocol::{election_channel, ElectionMessage};

/// How long a watch waits for more messages after a read found a leader no
/// message named, so that a message published before what the read saw is
/// not passed by it.
const DRAIN_WAIT: Duration = Duration::from_millis(1);

impl<O: Ownership> FairLock<kind::Election, O> {
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
        let election = self.unbound();
        let conn = subscription(&election)?;
        Ok(LeaderWatch {
            election,
            conn: Some(conn),
            floor: 0,
            first_read: true,
            pending: BTreeMap::new(),
            read_now: true,
            next_read: Instant::now(),
        })
    }
}

/// A new connection subscribed to `election`'s channel.
fn subscription(election: &Election) -> Result<redis::Connection> {
    let shared = election.shared();
    let channel = election_channel(&shared.config().key_prefix, election.name());
    shared.subscription(&channel)
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
        let every = self.election.shared().config().lease.min(timeout);
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
        let first = std::mem::replace(&mut self.first_read, false);
        let Some(leader) = leader else {
            return Ok(());
        };
        if first {
            self.floor = self.floor.max(leader.term.saturating_sub(1));
            self.pending.retain(|&term, _| term >= leader.term);
        }
        if leader.term <= self.floor {
            return Ok(());
        }
        // A leader no message told of yet: the messages may be waiting.
        if self.pending.insert(leader.term, leader).is_none() {
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
                let conn = subscription(&self.election)?;
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
        match pubsub.get_message() {
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
