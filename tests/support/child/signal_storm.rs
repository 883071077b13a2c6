//! The "signal_storm" role of tests/signals.rs: every kind of call, under a
//! storm of signals on every thread of the process. Line formats: see
//! `roles::signals`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlock::{Client, LockKind, Wait, WaitCanceller};
use fairlock_test_support::SignalStorm;

use crate::roles::signals::{builder, DURATION_MS, PERIOD_US, URL};
use crate::{child_arg, say};

/// Failed calls reported one by one; the rest are only counted.
const REPORTED: u64 = 20;

/// What the calls of all threads came to.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    errors: AtomicU64,
    /// The first error of each kind of call, for the report.
    seen: Mutex<Vec<String>>,
}

impl Tally {
    fn note<T>(&self, what: &str, result: fairlock::Result<T>) -> Option<T> {
        self.calls.fetch_add(1, SeqCst);
        match result {
            Ok(value) => Some(value),
            Err(err) => {
                if self.errors.fetch_add(1, SeqCst) < REPORTED {
                    self.seen.lock().unwrap().push(format!("{what}: {err:#}"));
                }
                None
            }
        }
    }
}

pub fn signal_storm() {
    let url: String = child_arg(URL);
    let duration = Duration::from_millis(child_arg(DURATION_MS));
    let period = Duration::from_micros(child_arg(PERIOD_US));
    let storm = SignalStorm::start(period);
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let client = tally.note("open", builder(&url).build());
    // A second thread takes the contended mutex in turn with the main one,
    // so handoffs, wake-up messages and the subscriber run too.
    let contender = client.clone().map(|client| {
        let (tally, stop) = (Arc::clone(&tally), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mutex = client.fair_mutex("storm:contended");
            while !stop.load(SeqCst) {
                if let Some(guard) = tally.note("contended lock", mutex.lock()) {
                    std::thread::sleep(Duration::from_micros(300));
                    tally.note("contended unlock", guard.unlock());
                }
            }
        })
    });
    let started = Instant::now();
    let mut round = 0u64;
    while let Some(client) = client.as_ref().filter(|_| started.elapsed() < duration) {
        every_kind_of_call(client, &tally);
        if round.is_multiple_of(8) {
            // A client opened and closed under the storm: its connect,
            // handshake, script load and subscription.
            if let Some(other) = tally.note("open", builder(&url).build()) {
                let mutex = other.fair_mutex("storm:fresh");
                if let Some(guard) = tally.note("fresh lock", mutex.lock()) {
                    tally.note("fresh unlock", guard.unlock());
                }
            }
        }
        round += 1;
    }
    stop.store(true, SeqCst);
    if let Some(contender) = contender {
        contender.join().expect("the contender thread");
    }
    drop(client);
    let delivered = SignalStorm::delivered();
    drop(storm);
    for error in tally.seen.lock().unwrap().iter() {
        say(format!("error {error}"));
    }
    say(format!(
        "done {} {} {delivered}",
        tally.calls.load(SeqCst),
        tally.errors.load(SeqCst)
    ));
}

/// One of each kind of call the library makes to Redis.
fn every_kind_of_call(client: &Client, tally: &Tally) {
    let mutex = client.fair_mutex("storm:mutex");
    if let Some(guard) = tally.note("lock", mutex.lock()) {
        tally.note("unlock", guard.unlock());
    }
    if let Some(Some(guard)) =
        tally.note("try_lock_for", mutex.try_lock_for(Duration::from_secs(1)))
    {
        tally.note("try_lock_for unlock", guard.unlock());
    }
    let contended = client.fair_mutex("storm:contended");
    if let Some(guard) = tally.note("contended lock", contended.lock()) {
        tally.note("contended unlock", guard.unlock());
    }
    // A wait that ends without the lock (the contender holds it, or the
    // wait's end comes first) and leaves the queue.
    let short = Wait::at_most(Duration::from_millis(2)).cancelled_by(&WaitCanceller::new());
    if let Some(Some(guard)) = tally.note("contended lock_with", contended.lock_with(short)) {
        tally.note("contended lock_with unlock", guard.unlock());
    }
    let semaphore = client.fair_semaphore("storm:semaphore", 3);
    if let Some(permit) = tally.note("acquire_many", semaphore.acquire_many(2)) {
        tally.note("release", permit.unlock());
    }
    let rwlock = client.fair_rwlock("storm:rwlock");
    if let Some(read) = tally.note("read", rwlock.read()) {
        tally.note("read unlock", read.unlock());
    }
    if let Some(upgradable) = tally.note("upgradable_read", rwlock.upgradable_read()) {
        if let Some(write) = tally.note("upgrade", upgradable.upgrade()) {
            if let Some(read) = tally.note("downgrade", write.downgrade()) {
                tally.note("downgraded unlock", read.unlock());
            }
        }
    }
    let election = client.election("storm:election");
    if let Some(Some(leadership)) = tally.note("try_campaign", election.try_campaign()) {
        tally.note("leader", election.leader());
        tally.note("resign", leadership.unlock());
    }
    // A watch's subscription on a connection of its own, and its reads.
    if let Some(mut watch) = tally.note("watch", election.watch()) {
        tally.note("watch next", watch.next(Duration::from_millis(2)));
        tally.note("watch next", watch.next(Duration::from_millis(2)));
    }
    let multi = client.fair_multi_lock(["storm:a", "storm:b"]);
    if let Some(guard) = tally.note("multi lock", multi.lock()) {
        tally.note("multi unlock", guard.unlock());
    }
    tally.note("status", client.status(LockKind::Mutex, "storm:mutex", 4));
    tally.note(
        "force_unlock",
        client.force_unlock(LockKind::Mutex, "storm:idle"),
    );
    tally.note("revoke", client.revoke(LockKind::Mutex, "storm:idle"));
}
