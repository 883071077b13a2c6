//! What `status --watch` compares between two reads: who holds, who waits
//! in which order, the last token; never the leases and liveness left,
//! which tick down on every read. Equal shapes mean "nothing happened",
//! so a log gets a new block only when something did, and the terminal's
//! header says what.

use fairlock::Participant;

use crate::commands::status::{who, Report};
use crate::kinds::access_word;

/// A lock's status without its clocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The mutex first, then the semaphore and the rwlock while in use.
    sections: Vec<Section>,
}

/// One lock of the name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    /// "" for the mutex, "semaphore: " or "rwlock: " before its messages.
    label: &'static str,
    /// Sorted by token: a semaphore's and an rwlock's holders are listed
    /// by lease end, an order every renewal may change.
    holders: Vec<Hold>,
    holder_count: usize,
    /// In queue order, which is the order they will be served in.
    queue: Vec<Queued>,
    queue_len: usize,
    last_token: Option<u64>,
    permits: Option<u32>,
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
        let mutex = &report.mutex;
        let mut sections = vec![Section {
            label: "",
            holders: mutex
                .holder
                .iter()
                .map(|h| Hold {
                    who: who(&h.who),
                    token: h.fencing_token,
                    detail: format!("hold count {}", h.hold_count),
                })
                .collect(),
            holder_count: usize::from(mutex.holder.is_some()),
            queue: queued(
                mutex
                    .waiters
                    .iter()
                    .map(|w| (&w.who, None, w.liveness_left)),
            ),
            queue_len: mutex.queue_len,
            last_token: mutex.last_fencing_token,
            permits: None,
        }];
        if let Some(semaphore) = &report.semaphore {
            sections.push(Section {
                label: "semaphore: ",
                holders: sorted(semaphore.holders.iter().map(|h| Hold {
                    who: who(&h.who),
                    token: h.fencing_token,
                    detail: String::new(),
                })),
                holder_count: semaphore.holder_count,
                queue: queued(
                    semaphore
                        .waiters
                        .iter()
                        .map(|w| (&w.who, None, w.liveness_left)),
                ),
                queue_len: semaphore.queue_len,
                last_token: semaphore.last_fencing_token,
                permits: semaphore.permits,
            });
        }
        if let Some(rwlock) = &report.rwlock {
            sections.push(Section {
                label: "rwlock: ",
                holders: sorted(rwlock.holders.iter().map(|h| Hold {
                    who: who(&h.who),
                    token: h.fencing_token,
                    detail: h.access.map_or("", access_word).to_owned(),
                })),
                holder_count: rwlock.holder_count,
                queue: queued(
                    rwlock
                        .waiters
                        .iter()
                        .map(|w| (&w.who, w.access.map(access_word), w.liveness_left)),
                ),
                queue_len: rwlock.queue_len,
                last_token: rwlock.last_fencing_token,
                permits: None,
            });
        }
        Shape { sections }
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
            match before.sections.iter().find(|s| s.label == now.label) {
                Some(then) => now.changes_since(then, &mut said),
                None => {
                    said.push(format!("{}in use", now.label));
                    now.changes_since(&Section::unused(now.label), &mut said);
                }
            }
        }
        for then in &before.sections {
            if !self.sections.iter().any(|s| s.label == then.label) {
                said.push(format!("{}no longer in use", then.label));
            }
        }
        if said.is_empty() {
            said.push("status changed".to_owned());
        }
        said
    }
}

impl Section {
    fn unused(label: &'static str) -> Section {
        Section {
            label,
            holders: Vec::new(),
            holder_count: 0,
            queue: Vec::new(),
            queue_len: 0,
            last_token: None,
            permits: None,
        }
    }

    fn changes_since(&self, then: &Section, said: &mut Vec<String>) {
        let label = self.label;
        let same = |a: &Hold, b: &Hold| a.who == b.who && a.token == b.token;
        let new: Vec<&Hold> = self
            .holders
            .iter()
            .filter(|h| !then.holders.iter().any(|t| same(h, t)))
            .collect();
        let gone: Vec<&Hold> = then
            .holders
            .iter()
            .filter(|t| !self.holders.iter().any(|h| same(h, t)))
            .collect();
        match new.as_slice() {
            [] => {}
            [one] => said.push(format!(
                "{label}new holder {}, token {}",
                one.who, one.token
            )),
            many => said.push(format!("{label}{} new holders", many.len())),
        }
        match gone.as_slice() {
            [] => {}
            [one] => said.push(format!(
                "{label}{} no longer holds it (token {})",
                one.who, one.token
            )),
            many => said.push(format!("{label}{} holders gone", many.len())),
        }
        for hold in &self.holders {
            let before = then.holders.iter().find(|t| same(hold, t));
            if before.is_some_and(|t| t.detail != hold.detail) {
                said.push(format!("{label}{} now {}", hold.who, hold.detail));
            }
        }
        if self.holders.is_empty() && !then.holders.is_empty() {
            said.push(format!("{label}free"));
        }
        let seen_token = |token| self.holders.iter().any(|h| Some(h.token) == token);
        if self.last_token != then.last_token && !seen_token(self.last_token) {
            // Taken and given back between two reads.
            if let Some(token) = self.last_token {
                said.push(format!("{label}last token now {token}"));
            }
        }
        let joined = self
            .queue
            .iter()
            .filter(|q| !then.queue.iter().any(|t| t.who == q.who))
            .count();
        let left = then
            .queue
            .iter()
            .filter(|t| !self.queue.iter().any(|q| q.who == t.who))
            .count();
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
                said.push(format!("{label}waiter {} is dead, not dropped yet", q.who));
            }
        }
        if self.permits != then.permits {
            if let Some(permits) = self.permits {
                said.push(format!("{label}{permits} permits"));
            }
        }
    }
}

fn sorted(holders: impl Iterator<Item = Hold>) -> Vec<Hold> {
    let mut holders: Vec<Hold> = holders.collect();
    holders.sort_by_key(|h| h.token);
    holders
}

fn queued<'a>(
    waiters: impl Iterator<
        Item = (
            &'a Participant,
            Option<&'static str>,
            Option<std::time::Duration>,
        ),
    >,
) -> Vec<Queued> {
    waiters
        .map(|(participant, access, liveness_left)| Queued {
            who: match access {
                Some(access) => format!("{}, {access}", who(participant)),
                None => who(participant),
            },
            dead: liveness_left.is_none(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mutex's shape with `holder` (owner, token) and `queue` owners.
    /// (The library's status types cannot be built outside it; that a
    /// lease ticking down is no change, tests/cli_watch.rs shows.)
    fn mutex(holder: Option<(&str, u64)>, queue: &[&str]) -> Shape {
        let who = |owner: &str| who(&Participant::new(owner));
        Shape {
            sections: vec![Section {
                label: "",
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
                permits: None,
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

    #[test]
    fn another_lock_of_the_name_coming_into_use_is_said() {
        let before = mutex(None, &[]);
        let mut now = before.clone();
        let mut rwlock = Section::unused("rwlock: ");
        rwlock.holders.push(Hold {
            who: "client c thread 1".to_owned(),
            token: 3,
            detail: "read".to_owned(),
        });
        now.sections.push(rwlock);
        assert_eq!(
            now.changes_since(&before),
            [
                "rwlock: in use",
                "rwlock: new holder client c thread 1, token 3"
            ]
        );
        assert_eq!(before.changes_since(&now), ["rwlock: no longer in use"]);
    }
}
