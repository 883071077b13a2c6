//! What `status --watch` compares between two reads: who holds, who waits
//! in which order, the last token; never the leases and liveness left,
//! which tick down on every read. Equal shapes mean "nothing happened",
//! so a log gets a new block only when something did, and the terminal's
//! header says what.

use fairlock::{Capacity, LockKind, Status};

use crate::kinds::{plural, Verbs};
use crate::report::{hold_detail, in_use, waiter_text, who, Report};

/// A lock's status without its clocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Each lock of the name shown, in the order `status` shows them.
    sections: Vec<Section>,
}

/// One lock of the name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    kind: LockKind,
    /// Held, queued for, or its state still recorded (else shown only as
    /// the free mutex, or because it was asked for).
    in_use: bool,
    /// Sorted by token: a semaphore's and an rwlock's holders are listed
    /// by lease end, an order every renewal may change. None when not
    /// all are listed (`--limit`): which are, renewals change too.
    holders: Vec<Hold>,
    holder_count: usize,
    /// In queue order, which is the order they will be served in.
    queue: Vec<Queued>,
    queue_len: usize,
    last_token: Option<u64>,
    capacity: Capacity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Hold {
    who: String,
    token: u64,
    /// "hold count 2" for the mutex, "read" or "write" for the rwlock.
    detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Queued {
    /// Who, with ", read" or ", write" for the rwlock's waiters.
    who: String,
    /// Its liveness ran out; the next acquire drops it.
    dead: bool,
}

impl Shape {
    /// The shape of what `status` read.
    pub fn of(report: &Report) -> Shape {
        Shape {
            sections: report.locks.iter().map(Section::of).collect(),
        }
    }

    /// What happened between `before` and `self`, one short phrase each:
    /// new holders, holders gone, waiters that joined or left, a lock of
    /// the name coming into use or out of it. Empty when the shapes are
    /// equal; a generic phrase when they differ in a way not named here.
    pub fn changes_since(&self, before: &Shape) -> Vec<String> {
        if self == before {
            return Vec::new();
        }
        let mut said = Vec::new();
        for now in &self.sections {
            match before.sections.iter().find(|s| s.kind == now.kind) {
                Some(then) => now.changes_since(then, &mut said),
                None => {
                    if now.in_use {
                        said.push(format!("{}: in use", now.kind.label()));
                    }
                    now.changes_since(&Section::unused(now.kind), &mut said);
                }
            }
        }
        for then in &before.sections {
            let shown = self.sections.iter().any(|s| s.kind == then.kind);
            if then.in_use && !shown {
                said.push(format!("{}: no longer in use", then.kind.label()));
            }
        }
        if said.is_empty() {
            said.push("status changed".to_owned());
        }
        said
    }
}

impl Section {
    fn of(status: &Status) -> Section {
        let mut holders: Vec<Hold> = status
            .holders
            .iter()
            .map(|h| Hold {
                who: who(&h.who),
                token: h.fencing_token,
                detail: hold_detail(status.kind, h),
            })
            .collect();
        holders.sort_by_key(|h| h.token);
        if holders.len() < status.holder_count {
            holders.clear();
        }
        Section {
            kind: status.kind,
            in_use: in_use(status),
            holders,
            holder_count: status.holder_count,
            queue: status
                .waiters
                .iter()
                .map(|w| Queued {
                    who: waiter_text(w),
                    dead: w.liveness_left.is_none(),
                })
                .collect(),
            queue_len: status.queue_len,
            last_token: status.last_fencing_token,
            capacity: status.capacity,
        }
    }

    fn unused(kind: LockKind) -> Section {
        Section {
            kind,
            in_use: false,
            holders: Vec::new(),
            holder_count: 0,
            queue: Vec::new(),
            queue_len: 0,
            last_token: None,
            capacity: Capacity::Unknown,
        }
    }

    /// What starts each message about this lock: nothing for the mutex
    /// (flock's lock, as ever), "semaphore: ", "rwlock: ", "election: ".
    fn label(&self) -> String {
        match self.kind {
            LockKind::Mutex => String::new(),
            kind => format!("{}: ", kind.label()),
        }
    }

    /// What changed, in the words of the lock's kind: an election's
    /// leader, term and candidates ([`Verbs`]).
    fn changes_since(&self, then: &Section, said: &mut Vec<String>) {
        let label = self.label();
        let verbs = Verbs::of(self.kind);
        let (token, holder) = (verbs.token, verbs.holder);
        let same = |a: &Hold, b: &Hold| a.who == b.who && a.token == b.token;
        // Beyond --limit only the number held says who came or went.
        let listed = |s: &Section| s.holders.len() == s.holder_count;
        let unlisted = !(listed(self) && listed(then));
        if unlisted && self.holder_count != then.holder_count {
            said.push(format!("{label}{} {}", self.holder_count, verbs.held));
        }
        let new: Vec<&Hold> = (self.holders.iter())
            .filter(|h| !unlisted && !then.holders.iter().any(|t| same(h, t)))
            .collect();
        let gone: Vec<&Hold> = (then.holders.iter())
            .filter(|t| !unlisted && !self.holders.iter().any(|h| same(h, t)))
            .collect();
        match new.as_slice() {
            [] => {}
            [one] => said.push(format!(
                "{label}new {holder} {}, {token} {}",
                one.who, one.token
            )),
            many => said.push(format!("{label}{} new {holder}s", many.len())),
        }
        match gone.as_slice() {
            [] => {}
            [one] => said.push(format!(
                "{label}{} no longer {} it ({token} {})",
                one.who, verbs.holds, one.token
            )),
            many => said.push(format!("{label}{} {holder}s gone", many.len())),
        }
        for hold in &self.holders {
            let before = then.holders.iter().find(|t| same(hold, t));
            if before.is_some_and(|t| t.detail != hold.detail) {
                said.push(format!("{label}{} now {}", hold.who, hold.detail));
            }
        }
        // By the number held: beyond --limit no holder is listed.
        if self.holder_count == 0 && then.holder_count > 0 {
            said.push(format!("{label}{}", verbs.free));
        }
        let seen_token = |last| self.holders.iter().any(|h| Some(h.token) == last);
        if self.last_token != then.last_token && !seen_token(self.last_token) {
            // Taken and given back between two reads.
            if let Some(last) = self.last_token {
                said.push(format!("{label}last {token} now {last}"));
            }
        }
        let gone: Vec<&Queued> = (then.queue.iter())
            .filter(|t| !self.queue.iter().any(|q| q.who == t.who))
            .collect();
        let left = gone.len();
        // Waiters join at the tail: behind a list cut by --limit, one newly
        // listed may only have moved up. Then those who joined are those
        // waiting now beyond those of before still waiting.
        let listed_live = then.queue.iter().filter(|t| !t.dead).count();
        let joined = if listed_live < then.queue_len {
            let left_live = gone.iter().filter(|t| !t.dead).count();
            (self.queue_len).saturating_sub(then.queue_len.saturating_sub(left_live))
        } else {
            (self.queue.iter())
                .filter(|q| !then.queue.iter().any(|t| t.who == q.who))
                .count()
        };
        if joined > 0 || left > 0 || self.queue_len != then.queue_len {
            let mut parts = Vec::new();
            if joined > 0 {
                parts.push(format!("{joined} joined"));
            }
            if left > 0 {
                parts.push(format!("{left} left"));
            }
            parts.push(format!("{} waiting", self.queue_len));
            said.push(format!("{label}queue: {}", parts.join(", ")));
        }
        for q in &self.queue {
            let was_alive = then.queue.iter().any(|t| t.who == q.who && !t.dead);
            if q.dead && was_alive {
                let waiter = verbs.waiter;
                said.push(format!(
                    "{label}{waiter} {} is dead, not dropped yet",
                    q.who
                ));
            }
        }
        if self.capacity != then.capacity {
            if let Capacity::Permits(permits) = self.capacity {
                said.push(format!("{label}{}", plural(permits as usize, "permit")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlock::Participant;

    /// The mutex's shape with `holder` (owner, token) and `queue` owners.
    /// (The library's status types cannot be built outside it; that a
    /// lease ticking down is no change, tests/cli_watch.rs shows.)
    fn mutex(holder: Option<(&str, u64)>, queue: &[&str]) -> Shape {
        let who = |owner: &str| who(&Participant::new(owner));
        Shape {
            sections: vec![Section {
                kind: LockKind::Mutex,
                in_use: holder.is_some() || !queue.is_empty(),
                holders: holder
                    .iter()
                    .map(|(owner, token)| Hold {
                        who: who(owner),
                        token: *token,
                        detail: "hold count 1".to_owned(),
                    })
                    .collect(),
                holder_count: usize::from(holder.is_some()),
                queue: queue
                    .iter()
                    .map(|owner| Queued {
                        who: who(owner),
                        dead: false,
                    })
                    .collect(),
                queue_len: queue.len(),
                last_token: holder.map(|(_, token)| token),
                capacity: Capacity::One,
            }],
        }
    }

    #[test]
    fn equal_shapes_say_nothing() {
        let shape = mutex(Some(("a:1", 7)), &["b:1"]);
        assert!(shape.changes_since(&shape.clone()).is_empty());
    }

    #[test]
    fn a_handoff_names_the_new_holder_and_the_queue() {
        let before = mutex(Some(("a:1", 7)), &["b:1"]);
        let now = mutex(Some(("b:1", 8)), &[]);
        assert_eq!(
            now.changes_since(&before),
            [
                "new holder client b thread 1, token 8",
                "client a thread 1 no longer holds it (token 7)",
                "queue: 1 left, 0 waiting",
            ]
        );
        let free = mutex(None, &[]);
        assert_eq!(
            free.changes_since(&now),
            ["client b thread 1 no longer holds it (token 8)", "free"]
        );
    }

    /// Beyond `--limit` a waiter newly listed may have moved up, not
    /// joined: who joined is counted from the numbers waiting.
    #[test]
    fn a_queue_cut_by_the_limit_counts_who_joined_by_the_numbers() {
        let cut = |listed: &str, waiting: usize| {
            let mut shape = mutex(Some(("a:1", 7)), &[listed]);
            shape.sections[0].queue_len = waiting;
            shape
        };
        // b got the lock, c moved up: nobody joined.
        assert_eq!(
            cut("c:1", 2).changes_since(&cut("b:1", 3)),
            ["queue: 1 left, 2 waiting"]
        );
        // b got it and e came behind d: one joined.
        assert_eq!(
            cut("c:1", 3).changes_since(&cut("b:1", 3)),
            ["queue: 1 joined, 1 left, 3 waiting"]
        );
        // Nobody left the part listed, two came.
        assert_eq!(
            cut("b:1", 5).changes_since(&cut("b:1", 3)),
            ["queue: 2 joined, 5 waiting"]
        );
    }

    /// A section of `kind` with one holder: client c thread 1, token 3.
    fn held(kind: LockKind, detail: &str) -> Section {
        let mut section = Section::unused(kind);
        section.in_use = true;
        section.holder_count = 1;
        section.last_token = Some(3);
        section.holders.push(Hold {
            who: "client c thread 1".to_owned(),
            token: 3,
            detail: detail.to_owned(),
        });
        section
    }

    #[test]
    fn another_lock_of_the_name_coming_into_use_is_said() {
        let before = mutex(None, &[]);
        let mut now = before.clone();
        now.sections.push(held(LockKind::RwLock, "read"));
        assert_eq!(
            now.changes_since(&before),
            [
                "rwlock: in use",
                "rwlock: new holder client c thread 1, token 3"
            ]
        );
        assert_eq!(before.changes_since(&now), ["rwlock: no longer in use"]);
    }

    /// An election's changes in its words: a new leader and its term, one
    /// that no longer leads, vacant, a dead candidate; they said holder,
    /// token, free and waiter, as of a mutex.
    #[test]
    fn an_election_s_changes_name_its_leader_and_term() {
        let election = |section: Section| Shape {
            sections: vec![section],
        };
        let led = held(LockKind::Election, "");
        let vacant = Section {
            in_use: true,
            ..Section::unused(LockKind::Election)
        };
        assert_eq!(
            election(led.clone()).changes_since(&election(vacant.clone())),
            ["election: new leader client c thread 1, term 3"]
        );
        let mut ended = vacant;
        ended.last_token = Some(3);
        assert_eq!(
            election(ended).changes_since(&election(led.clone())),
            [
                "election: client c thread 1 no longer leads it (term 3)",
                "election: vacant"
            ]
        );
        let mut dead = led.clone();
        let candidate = |dead| Queued {
            who: "client d thread 1".to_owned(),
            dead,
        };
        dead.queue = vec![candidate(true)];
        dead.queue_len = 1;
        let mut waiting = led;
        waiting.queue = vec![candidate(false)];
        waiting.queue_len = 1;
        assert_eq!(
            election(dead).changes_since(&election(waiting)),
            ["election: candidate client d thread 1 is dead, not dropped yet"]
        );
    }

    /// A change of permits says their number, "1 permit" in the singular.
    #[test]
    fn a_change_of_permits_says_their_number() {
        let with = |permits| Shape {
            sections: vec![Section {
                capacity: Capacity::Permits(permits),
                ..held(LockKind::Semaphore, "")
            }],
        };
        assert_eq!(with(1).changes_since(&with(2)), ["semaphore: 1 permit"]);
        assert_eq!(with(3).changes_since(&with(1)), ["semaphore: 3 permits"]);
    }

    /// The free mutex `status` shows when nothing of the name is in use
    /// gives way to the kind that comes into use, and comes back when it
    /// goes, neither said: only the lock in use is.
    #[test]
    fn the_free_mutex_shown_in_place_of_nothing_comes_and_goes_unsaid() {
        let nothing = mutex(None, &[]);
        let semaphore = Shape {
            sections: vec![held(LockKind::Semaphore, "")],
        };
        assert_eq!(
            semaphore.changes_since(&nothing),
            [
                "semaphore: in use",
                "semaphore: new holder client c thread 1, token 3"
            ]
        );
        assert_eq!(
            nothing.changes_since(&semaphore),
            ["semaphore: no longer in use"]
        );
    }
}
