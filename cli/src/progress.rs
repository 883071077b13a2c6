//! The live line on stderr while `fairlock run` waits on a terminal:
//! position in the queue, time waited, the holder's remaining lease (and
//! while `fairlock elect` does, the leader's).
//!
//! The main thread blocks in its wait, so a thread of its own
//! (`fairlock-progress`) reads the lock's status every 250 ms through
//! another handle of the same client, and finds this process's place by its
//! client id. Any kind of lock: the mutex, a semaphore, a reader-writer lock.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fairlock::{Capacity, LockKind, Participant, Status};

use crate::duration::human;
use crate::kinds::{permits_text, Lock};
use crate::terminal::{self, fit};

/// How often the line is redrawn.
const PERIOD: Duration = Duration::from_millis(250);
/// Most waiters read to find this one's place.
const MAX_LISTED: usize = 1000;

/// The line being shown, if any; cleared before anything else is printed.
static CURRENT: Mutex<Option<Arc<LiveLine>>> = Mutex::new(None);

#[derive(Default)]
struct LineState {
    stopped: bool,
    shown: bool,
}

/// A line on stderr redrawn in place until stopped.
#[derive(Default)]
pub struct LiveLine {
    state: Mutex<LineState>,
    changed: Condvar,
}

impl LiveLine {
    fn state(&self) -> MutexGuard<'_, LineState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops redrawing and wipes the line. No output follows from the
    /// thread once this returns.
    pub fn stop(&self) {
        let mut state = self.state();
        state.stopped = true;
        if std::mem::take(&mut state.shown) {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Draws `text` unless stopped, then sleeps for a period; false once stopped.
    fn show_and_sleep(&self, text: &str) -> bool {
        let mut state = self.state();
        if state.stopped {
            return false;
        }
        {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K{text}");
            let _ = err.flush();
        }
        state.shown = true;
        let (state, _) = self
            .changed
            .wait_timeout_while(state, PERIOD, |s| !s.stopped)
            .unwrap_or_else(|p| p.into_inner());
        !state.stopped
    }
}

/// Wipes the live line if one is shown, before printing something else.
pub fn clear_any() {
    let current = CURRENT.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(line) = current {
        line.stop();
    }
}

/// What the line is about.
pub struct Watch {
    pub lock: Lock,
    pub client_id: String,
    pub started: Instant,
    /// `--wait`, if given.
    pub patience: Option<Duration>,
}

/// Starts redrawing the line; stop it with [`LiveLine::stop`].
pub fn start(watch: Watch) -> Arc<LiveLine> {
    let line = Arc::new(LiveLine::default());
    *CURRENT.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&line));
    let drawer = Arc::clone(&line);
    let spawned = std::thread::Builder::new()
        .name("fairlock-progress".into())
        .spawn(move || loop {
            let view =
                (watch.lock.status(MAX_LISTED)).map(|status| View::of(&status, &watch.client_id));
            let now = Instant::now();
            let text = render(
                watch.lock.name(),
                view.map_err(|e| e.to_string()),
                now.duration_since(watch.started),
                watch.patience,
            );
            if !drawer.show_and_sleep(&fit(&text, terminal_width())) {
                break;
            }
        });
    if spawned.is_err() {
        line.stop(); // no live line, the wait goes on all the same
    }
    line
}

/// What the line says about the lock, read from its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// 1-based place of this process in the queue, if it was listed.
    pub place: Option<usize>,
    pub queue_len: usize,
    /// The queue was longer than the part listed.
    pub cut: bool,
    /// Live holders (several for a semaphore).
    pub holders: usize,
    /// The lease that ends first, of the holders': `None` when nobody
    /// holds (being handed over); `Some(None)`: held without expiry.
    pub holder_lease: Option<Option<Duration>>,
    /// A semaphore's permits in force, as its status read them.
    pub permits: Option<u32>,
    /// An election's: its holder is its leader.
    pub leader: bool,
}

impl View {
    /// The view of any kind's status: its holders are listed by lease end,
    /// so the first is the next to come back if nobody releases one.
    pub fn of(status: &Status, client_id: &str) -> View {
        View {
            // Among those in line: a dead entry ahead is not.
            place: place(
                status
                    .waiters
                    .iter()
                    .filter(|w| w.liveness_left.is_some())
                    .map(|w| &w.who),
                client_id,
            ),
            queue_len: status.queue_len,
            cut: status.queue_len > status.waiters.len(),
            holders: status.holder_count,
            holder_lease: status.holder().map(|h| h.remaining_lease),
            permits: match status.capacity {
                Capacity::Permits(permits) => Some(permits),
                _ => None,
            },
            leader: status.kind == LockKind::Election,
        }
    }
}

/// The 1-based place of `client_id` among the waiters, if listed.
fn place<'a>(mut waiters: impl Iterator<Item = &'a Participant>, client_id: &str) -> Option<usize> {
    waiters
        .position(|who| who.client_id() == client_id)
        .map(|i| i + 1)
}

/// The text of the line.
pub fn render(
    name: &str,
    view: Result<View, String>,
    waited: Duration,
    patience: Option<Duration>,
) -> String {
    let mut text = match &view {
        Ok(View {
            permits: Some(permits),
            ..
        }) => format!(
            "waiting for {name:?} ({}): ",
            permits_text(*permits, *permits)
        ),
        _ => format!("waiting for {name:?}: "),
    };
    let waited = match patience {
        Some(patience) => format!("waited {} of {}", human(waited), human(patience)),
        None => format!("waited {}", human(waited)),
    };
    match view {
        Err(err) => text.push_str(&format!("{waited}, status unavailable ({err})")),
        Ok(view) => {
            match view.place {
                Some(place) => text.push_str(&format!(
                    "position {place} of {}",
                    view.queue_len.max(place)
                )),
                None if view.cut => {
                    text.push_str(&format!("position > {MAX_LISTED} of {}", view.queue_len))
                }
                None => text.push_str("joining the queue"),
            }
            text.push_str(&format!(", {waited}"));
            // An election's words: its leader, its leadership.
            let (holder, lock) = match view.leader {
                true => ("leader", "leadership"),
                false => ("holder", "lock"),
            };
            match (view.holder_lease, view.holders) {
                (Some(Some(lease)), 0 | 1) => {
                    text.push_str(&format!(", {holder}'s lease {} left", human(lease)))
                }
                (Some(Some(lease)), holders) => text.push_str(&format!(
                    ", {holders} holders, first lease ends in {}",
                    human(lease)
                )),
                (Some(None), _) => text.push_str(&format!(", {holder}'s lease never expires")),
                (None, _) => text.push_str(&format!(", {lock} being handed over")),
            }
        }
    }
    text
}

/// Columns of the terminal on stderr; unlimited if it does not say.
fn terminal_width() -> usize {
    terminal::size(libc::STDERR_FILENO).map_or(usize::MAX, |(columns, _)| columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_lease_time_and_patience() {
        let view = View {
            place: Some(2),
            queue_len: 3,
            cut: false,
            holders: 1,
            holder_lease: Some(Some(Duration::from_millis(25_800))),
            permits: None,
            leader: false,
        };
        let text = render("deploy", Ok(view), Duration::from_millis(4_200), None);
        assert_eq!(
            text,
            "waiting for \"deploy\": position 2 of 3, waited 4.2s, holder's lease 25.8s left"
        );
        let view = View {
            place: None,
            queue_len: 0,
            cut: false,
            holders: 0,
            holder_lease: None,
            permits: None,
            leader: false,
        };
        let text = render("x", Ok(view), Duration::ZERO, Some(Duration::from_secs(5)));
        assert_eq!(
            text,
            "waiting for \"x\": joining the queue, waited 0ms of 5.0s, lock being handed over"
        );
        let view = View {
            place: Some(1),
            queue_len: 1,
            cut: false,
            holders: 3,
            holder_lease: Some(Some(Duration::from_millis(1_500))),
            permits: Some(3),
            leader: false,
        };
        let text = render("pool", Ok(view), Duration::from_secs(2), None);
        assert_eq!(
            text,
            "waiting for \"pool\" (3 permits): position 1 of 1, waited 2.0s, 3 holders, first lease ends in 1.5s"
        );
        // An election's: its leader's lease, its leadership handed over.
        let view = View {
            place: Some(1),
            queue_len: 1,
            cut: false,
            holders: 1,
            holder_lease: Some(Some(Duration::from_millis(1_900))),
            permits: None,
            leader: true,
        };
        let text = render("sched", Ok(view), Duration::from_secs(2), None);
        assert_eq!(
            text,
            "waiting for \"sched\": position 1 of 1, waited 2.0s, leader's lease 1.9s left"
        );
        let view = View {
            holders: 0,
            holder_lease: None,
            ..view
        };
        let text = render("sched", Ok(view), Duration::from_secs(2), None);
        assert!(text.ends_with(", leadership being handed over"), "{text}");
        let text = render(
            "x",
            Err("redis is unreachable".into()),
            Duration::ZERO,
            None,
        );
        assert!(text.contains("status unavailable (redis is unreachable)"));
    }
}
