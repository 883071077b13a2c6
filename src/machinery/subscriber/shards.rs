//! The shard channels a client listens on with sharded pub/sub (a Redis
//! Cluster of 7.0 or later: `protocol::Route::Sharded`): one per slot of a
//! lock it waits on or holds, subscribed at the slot's master by that
//! node's subscriber thread before the first call there is sent (a script
//! may publish only in its keys' slot), and kept: at most the slots the
//! client used, 16384. And the nodes that have a listener: one that joins
//! the cluster later (masters added to scale out) gets its own once the
//! slot map names it, and one that left has its listener end.

use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::connections::slot_map::{Address, SlotMap};

/// Which slots are wanted and which are listened on now.
#[derive(Default)]
pub(crate) struct Shards {
    state: Mutex<State>,
    /// Told each time a slot's subscription is confirmed.
    confirmed: Condvar,
    /// The nodes with a listener thread.
    listened: Mutex<FxHashSet<Address>>,
    /// The threads started for nodes that joined after the client started,
    /// joined with the client's others.
    joined_later: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    /// Every slot asked for.
    wanted: FxHashSet<u16>,
    /// The slots subscribed now, each with how many connections confirmed
    /// it (two, for a moment, while a slot moves between masters).
    live: FxHashMap<u16, u32>,
    /// The slots once live, or given up waiting for: a subscription of one
    /// of them again follows a gap in which messages may have been lost.
    known: FxHashSet<u16>,
}

impl Shards {
    /// Waits up to `timeout` until the client listens on `slot`, the first
    /// time it is asked for only: a slot listened on before (it moved, its
    /// master failed) or given up on is not waited for again, as its next
    /// subscription has every waiter poll once.
    pub(crate) fn listen(&self, slot: u16, timeout: Duration) {
        let mut state = self.state.lock();
        state.wanted.insert(slot);
        let unheard = |s: &mut State| !s.live.contains_key(&slot) && !s.known.contains(&slot);
        let waited = self.confirmed.wait_while_for(&mut state, unheard, timeout);
        if waited.timed_out() {
            log::warn!("fairlock: not listening on slot {slot} yet, going on (its waiters poll)");
            state.known.insert(slot);
        }
    }

    /// The slots wanted that a connection with `asked` lacks and whose
    /// master it is (`serves`).
    pub(crate) fn to_subscribe(
        &self,
        asked: &FxHashSet<u16>,
        serves: impl Fn(u16) -> bool,
    ) -> Vec<u16> {
        let state = self.state.lock();
        let missing = state.wanted.iter().filter(|slot| !asked.contains(slot));
        missing.copied().filter(|&slot| serves(slot)).collect()
    }

    /// Whether a wanted slot is listened on nowhere (the slot map may be
    /// out of date: a failover, a slot moved).
    pub(crate) fn any_missing(&self) -> bool {
        let state = self.state.lock();
        (state.wanted.iter()).any(|slot| !state.live.contains_key(slot))
    }

    /// A connection confirmed `slot`; true when messages may have been lost
    /// since it was last listened on.
    pub(crate) fn subscribed(&self, slot: u16) -> bool {
        let mut state = self.state.lock();
        *state.live.entry(slot).or_default() += 1;
        self.confirmed.notify_all();
        !state.known.insert(slot)
    }

    /// Whether `node` needs a listener thread: true once per node, for the
    /// caller to start it.
    pub(crate) fn needs_listener(&self, node: &Address) -> bool {
        self.listened.lock().insert(node.clone())
    }

    /// `node`'s listener could not be started: the next slot map that
    /// names it tries again.
    pub(crate) fn no_listener(&self, node: &Address) {
        self.listened.lock().remove(node);
    }

    /// Whether `node`, whose connection failed, left the cluster: `map`
    /// names it no more. Its listener then ends (a thread retrying a gone
    /// address for the client's life, one per node that ever left), and
    /// another starts if a later map names it again.
    pub(crate) fn left(&self, node: &Address, map: Option<&SlotMap>) -> bool {
        map.is_some_and(|map| !map.nodes().contains(node)) && self.listened.lock().remove(node)
    }

    /// Keeps the thread started for a node that joined later (dropping
    /// those of nodes that left since).
    pub(crate) fn keep_thread(&self, thread: JoinHandle<()>) {
        let mut threads = self.joined_later.lock();
        threads.retain(|thread| !thread.is_finished());
        threads.push(thread);
    }

    /// The threads started for nodes that joined later, to join.
    pub(crate) fn take_threads(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.joined_later.lock())
    }

    /// A connection stopped listening on `slots` (it broke, or the slot
    /// moved away).
    pub(crate) fn lost(&self, slots: impl IntoIterator<Item = u16>) {
        let mut state = self.state.lock();
        for slot in slots {
            if let Some(count) = state.live.get_mut(&slot) {
                *count -= 1;
                if *count == 0 {
                    state.live.remove(&slot);
                }
            }
        }
    }
}
