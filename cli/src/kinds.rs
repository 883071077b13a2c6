//! The kinds of lock `fairlock run` can take (the mutex, a permit of a
//! semaphore, a read or write hold of a reader-writer lock), and the
//! leadership `fairlock elect` campaigns for, behind one
//! small interface, so that the run loop, the waiting line and the
//! messages are written once for all of them. What differs per kind is
//! only the request sent and how it is named; the hold is one guard type
//! ([`AnyGuard`]) and the status one [`Status`], whatever the kind.

use std::time::Duration;

use fairlock::{
    kind, Access, AnyGuard, Capacity, Client, FairLock, Guard, LockKind, Ownership, Result, Status,
    Wait,
};

/// What `run` asks for of the lock NAME.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// The mutex (flock's default).
    Mutex,
    /// One of the `of` permits of the semaphore (`--semaphore N`).
    Permit { of: u32 },
    /// The reader-writer lock, to read: shared with other readers
    /// (`--read`, flock's `-s`).
    Read,
    /// The reader-writer lock, to write: alone (`--write`, flock's `-x`).
    Write,
    /// The leadership of the election NAME (`fairlock elect`), campaigning
    /// with the lock's value.
    Leader,
}

/// How a hold's lease runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lease {
    /// Renewed by the watchdog for as long as the guard lives.
    #[default]
    Renewed,
    /// A fixed lease no watchdog renews (`--fixed-lease`).
    Fixed(Duration),
    /// Renewed for at most this long from the grant (`--max-hold`).
    MaxHold(Duration),
}

/// What `run` waits for: one request on the lock NAME, held with a lease.
#[derive(Clone)]
pub struct Lock {
    client: Client,
    name: String,
    request: Request,
    lease: Lease,
    /// The value a leader campaigns with.
    value: Option<String>,
}

impl Lock {
    pub fn new(client: &Client, name: &str, request: Request, lease: Lease) -> Lock {
        Lock {
            client: client.clone(),
            name: name.to_owned(),
            request,
            lease,
            value: None,
        }
    }

    /// The leadership of the election `name`, campaigning with `value`.
    pub fn election(client: &Client, name: &str, value: &str, lease: Lease) -> Lock {
        Lock {
            value: Some(value.to_owned()),
            ..Lock::new(client, name, Request::Leader, lease)
        }
    }

    /// The value a leader campaigns with (an election's).
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which lock of the name the request is on.
    pub fn kind(&self) -> LockKind {
        match self.request {
            Request::Mutex => LockKind::Mutex,
            Request::Permit { .. } => LockKind::Semaphore,
            Request::Read | Request::Write => LockKind::RwLock,
            Request::Leader => LockKind::Election,
        }
    }

    /// How messages name it: `"deploy"` for the mutex, as ever;
    /// `"deploy" (3 permits)` for a semaphore, with the permits in force
    /// as this client's last call on it found them (`"deploy" (4 permits
    /// in force, not 3)` once `fairlock permits` set another number);
    /// `"deploy" (read)` and `"deploy" (write)` for the reader-writer lock.
    pub fn describe(&self) -> String {
        let name = &self.name;
        match self.request {
            Request::Mutex => format!("{name:?}"),
            Request::Permit { of } => {
                let in_force = self.client.fair_semaphore(name, of).permits_in_force();
                format!("{name:?} ({})", permits_text(in_force, of))
            }
            Request::Read => format!("{name:?} (read)"),
            Request::Write => format!("{name:?} (write)"),
            Request::Leader => format!("{name:?} (election)"),
        }
    }

    /// How `-v` and the messages say the hold begins and ends, in the
    /// library's words: a lock is acquired and released, a leader leads
    /// and resigns ([`Verbs::of`] its kind).
    pub fn verbs(&self) -> Verbs {
        Verbs::of(self.kind())
    }

    /// What is held, in "lost ... on NAME": "the lock", "the permit".
    pub fn what(&self) -> &'static str {
        match self.request {
            Request::Mutex => "the lock",
            Request::Permit { .. } => "the permit",
            Request::Read => "the read lock",
            Request::Write => "the write lock",
            Request::Leader => "the leadership",
        }
    }

    /// Waits as `wait` says; `Ok(None)` when it ended without the lock,
    /// with the queue entry removed.
    pub fn wait(&self, wait: Wait) -> Result<Option<AnyGuard>> {
        let (client, name) = (&self.client, self.name.as_str());
        Ok(match self.request {
            Request::Mutex => self
                .leased(client.fair_mutex(name))
                .lock_with(wait)?
                .map(Guard::into_any),
            Request::Permit { of } => self
                .leased(client.fair_semaphore(name, of))
                .acquire_with(wait)?
                .map(Guard::into_any),
            Request::Read => self
                .leased(client.fair_rwlock(name))
                .read_with(wait)?
                .map(Guard::into_any),
            Request::Write => self
                .leased(client.fair_rwlock(name))
                .write_with(wait)?
                .map(Guard::into_any),
            Request::Leader => self
                .leased(client.election(name).bound())
                .with_value(self.value.as_deref().unwrap_or(client.id()))
                .campaign_with(wait)?
                .map(Guard::into_any),
        })
    }

    /// `lock` with this lease.
    fn leased<K: kind::Kind, O: Ownership>(&self, lock: FairLock<K, O>) -> FairLock<K, O> {
        match self.lease {
            Lease::Renewed => lock,
            Lease::Fixed(lease) => lock.with_fixed_lease(lease),
            Lease::MaxHold(max_hold) => lock.with_max_hold(max_hold),
        }
    }

    /// The status of the lock the request is on, listing at most `max`
    /// holders and `max` waiters.
    pub fn status(&self, max: usize) -> Result<Status> {
        self.client.status(self.kind(), &self.name, max)
    }

    /// Who holds the lock now, as `status` names it, then "token N"
    /// ("term N", an election's leader) (with "(one of N
    /// holders)", or "(the only holder)", for a lock of several holders,
    /// and the access of a reader-writer lock's first other holder by
    /// lease end); `None` if nobody else or unknown: not this client,
    /// which Redis may count a holder a moment longer than it does itself.
    pub fn holder_now(&self) -> Option<String> {
        let status = self.status(2).ok()?;
        let mine = self.client.id();
        let holder = (status.holders.iter()).find(|h| h.who.client_id() != mine)?;
        let mut text = format!(
            "{}, {} {}",
            crate::report::who(&holder.who),
            self.verbs().token,
            holder.fencing_token
        );
        if status.capacity != Capacity::One {
            let access = holder
                .access
                .map_or_else(String::new, |access| format!("{}, ", access_word(access)));
            let of = match status.holder_count {
                1 => "the only holder".to_owned(),
                n => format!("one of {n} holders"),
            };
            text.push_str(&format!(" ({access}{of})"));
        }
        Some(text)
    }
}

/// The words every line about one kind of hold says it in, decided
/// here once: `-v` and the messages of `run` and `elect`, and what
/// `status`, `unlock` and `revoke` print. A lock has holders that hold it
/// with a token; an election has a leader that leads it for a term.
pub struct Verbs {
    /// "acquired", "leads".
    pub began: &'static str,
    /// "released", "resigned".
    pub ended: &'static str,
    /// What ending it is called where it failed: "release", "resign from".
    pub end: &'static str,
    /// The ending itself, as Redis may run it late: "release",
    /// "resignation".
    pub ending: &'static str,
    /// What a hold given up on does at its lease's end: "it frees", "the
    /// leadership ends".
    pub frees: &'static str,
    /// "holding", "leading".
    pub holding: &'static str,
    /// What its fencing token is called: "token", "term".
    pub token: &'static str,
    /// Whose it is now: "held by", "led by".
    pub held_by: &'static str,
    /// Who has it: "holder", "leader".
    pub holder: &'static str,
    /// What its holder does: "holds", "leads".
    pub holds: &'static str,
    /// Who waits for it: "waiter", "candidate".
    pub waiter: &'static str,
    /// Its state with a holder, in `status`: "held", "led".
    pub held: &'static str,
    /// Its state without one: "free", "vacant".
    pub free: &'static str,
    /// "is held", "has a leader".
    pub is_held: &'static str,
    /// "is not held", "has no leader".
    pub is_not_held: &'static str,
    /// "was not held", "had no leader".
    pub was_not_held: &'static str,
    /// What `revoke` asks its holders to do: "let go", "step down".
    pub let_go: &'static str,
    /// What `unlock --force` does to it: "unlock", "end the leadership
    /// of".
    pub unlock: &'static str,
    /// And what it did: "unlocked", "ended the leadership of".
    pub unlocked: &'static str,
    /// What an `unlock --force` without a reply may have done all the
    /// same: "it may have been freed", "the leadership may have ended".
    pub may_be_freed: &'static str,
}

impl Verbs {
    /// The words of a `kind` of lock: an election's, or every other
    /// kind's.
    pub fn of(kind: LockKind) -> Verbs {
        match kind {
            LockKind::Election => Verbs {
                began: "leads",
                ended: "resigned",
                end: "resign from",
                ending: "resignation",
                frees: "the leadership ends",
                holding: "leading",
                token: "term",
                held_by: "led by",
                holder: "leader",
                holds: "leads",
                waiter: "candidate",
                held: "led",
                free: "vacant",
                is_held: "has a leader",
                is_not_held: "has no leader",
                was_not_held: "had no leader",
                let_go: "step down",
                unlock: "end the leadership of",
                unlocked: "ended the leadership of",
                may_be_freed: "the leadership may have ended",
            },
            _ => Verbs {
                began: "acquired",
                ended: "released",
                end: "release",
                ending: "release",
                frees: "it frees",
                holding: "holding",
                token: "token",
                held_by: "held by",
                holder: "holder",
                holds: "holds",
                waiter: "waiter",
                held: "held",
                free: "free",
                is_held: "is held",
                is_not_held: "is not held",
                was_not_held: "was not held",
                let_go: "let go",
                unlock: "unlock",
                unlocked: "unlocked",
                may_be_freed: "it may have been freed",
            },
        }
    }

    /// What becomes of a hold whose ending Redis did not answer: "it frees
    /// when Redis runs the release late or its lease runs out".
    pub fn late(&self) -> String {
        let (frees, ending) = (self.frees, self.ending);
        format!("{frees} when Redis runs the {ending} late or its lease runs out")
    }
}

/// "1 holder", "3 holders".
pub fn plural(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// A semaphore's permits as every line that names it says them: "3
/// permits" when `in_force` is the number `asked`, else "4 permits in
/// force, not 3".
pub fn permits_text(in_force: u32, asked: u32) -> String {
    let permits = plural(in_force as usize, "permit");
    if in_force == asked {
        permits
    } else {
        format!("{permits} in force, not {asked}")
    }
}

/// How `status` and the messages say a reader-writer hold's access.
pub fn access_word(access: Access) -> &'static str {
    match access {
        Access::Read => "read",
        Access::Write => "write",
        Access::UpgradableRead => "upgradable read",
        _ => "other",
    }
}
