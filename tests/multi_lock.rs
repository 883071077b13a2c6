//! All-or-nothing multi-locks against a real server: 8 clients taking
//! random overlapping sets of 3 of 10 names in random orders for 30 s
//! never deadlock (no call gives up, though each would after a timeout
//! far above any honest wait: a deadlock ends only by a give-up) and never
//! overlap on a name; a multi-lock that times out or is refused leaves no
//! hold and no queue entry; rwlock reads share and writes exclude inside
//! sets; a semaphore's permits part excludes what does not fit and holds
//! nothing when refused; each part's fencing token is there; a part lost
//! while the set waits for a later one fails the call; one that fails in
//! a stall releases its parts within one command timeout, one cancelled
//! in a stall within the cancel's grace; bad input is
//! refused before any I/O. (On a 3-master cluster: tests/cluster.rs.)

use std::thread;
use std::time::{Duration, Instant};

use fairlock::__test_support::LockKeys;
use fairlock::{Access, Client, ErrorKind, LockKind, Wait, WaitCanceller};
use fairlock_test_support::*;

/// A small xorshift generator: each worker its own seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `k` distinct numbers below `n`, in random order.
    fn pick(&mut self, k: usize, n: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = i + (self.next() as usize) % (n - i);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    }
}

#[test]
fn eight_clients_taking_random_overlapping_sets_never_deadlock_nor_overlap() {
    let server = RedisServer::start();
    let names: Vec<String> = (0..10).map(|i| format!("acct-{i}")).collect();
    let run_for = Duration::from_secs(30);
    // Far above any honest wait (a set waits for at most a few others'
    // short holds: 75-260 ms at worst here, up to 780 ms with a CPU hog on
    // one of two cores), so a call gives up only when a deadlock, which
    // nothing else ends, holds it; names taken in the callers' orders give
    // up dozens of times in 30 s.
    let timeout = Duration::from_secs(5);
    // Each name's believed-held intervals: from the call's return to the
    // start of its release, with the part's token.
    let log = HoldLog::new();
    let started = Instant::now();
    let workers: Vec<_> = (0..8u64)
        .map(|w| {
            let client = server.client();
            let (names, log) = (names.clone(), log.clone());
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w + 1).wrapping_mul(0x2545_F491));
                let (mut got, mut gave_up, mut slowest) = (0u32, 0u32, Duration::ZERO);
                while started.elapsed() < run_for {
                    let set: Vec<&str> = rng
                        .pick(3, 10)
                        .into_iter()
                        .map(|i| names[i].as_str())
                        .collect();
                    let asked = Instant::now();
                    let guard = client.fair_multi_lock(&set).try_lock_for(timeout).unwrap();
                    let took = asked.elapsed();
                    slowest = slowest.max(took);
                    let Some(guard) = guard else {
                        gave_up += 1;
                        continue;
                    };
                    got += 1;
                    let from = Instant::now();
                    thread::sleep(Duration::from_millis(rng.next() % 4));
                    let tokens: Vec<(String, u64)> = guard
                        .parts()
                        .iter()
                        .map(|p| (p.name().to_owned(), p.fencing_token()))
                        .collect();
                    assert_eq!(tokens.len(), 3, "every part held: {tokens:?}");
                    let to = Instant::now();
                    guard.unlock().unwrap();
                    for (name, token) in tokens {
                        log.record(&name, Span { from, to, token });
                    }
                }
                (got, gave_up, slowest)
            })
        })
        .collect();
    // Every worker joined before any verdict.
    let results: Vec<(u32, u32, Duration)> = workers
        .into_iter()
        .map(|worker| join_within(worker, run_for + Duration::from_secs(30), "a worker"))
        .collect();
    let mut total = (0, 0);
    for (w, (got, gave_up, slowest)) in results.into_iter().enumerate() {
        eprintln!(
            "multi_lock: worker {w}: {got} sets held, {gave_up} timed out, slowest call {:.0} ms",
            ms(slowest)
        );
        // Every call returned within its timeout (and the abandon after it).
        assert!(
            slowest < timeout + Duration::from_secs(1),
            "worker {w}: a call took {slowest:?}"
        );
        // And none had to give up: that is what only a deadlock-free
        // multi-lock achieves, the timeout above guarantees the rest.
        assert_eq!(
            gave_up, 0,
            "worker {w}: {gave_up} calls gave up after {timeout:?} (slowest {slowest:?}): deadlocked?"
        );
        total = (total.0 + got, total.1 + gave_up);
    }
    assert!(
        total.0 > 100,
        "too few sets held to mean anything: {total:?}"
    );
    // No two holders of a name at once, tokens growing per name.
    log.assert_exclusive();
    eprintln!(
        "multi_lock: 8 clients, 30 s: {} sets held, {} timed out, no overlap on any of {} names",
        total.0,
        total.1,
        log.spans().len()
    );
    // Nothing left behind.
    let observer = server.client();
    for name in &names {
        let status = observer.fair_mutex(name).status(10).unwrap();
        assert!(
            status.holder().is_none() && status.queue_len == 0,
            "{name}: {status:?}"
        );
    }
}

#[test]
fn a_multi_lock_that_times_out_or_is_refused_leaves_no_hold_and_no_queue_entry() {
    let server = RedisServer::start();
    let other = server.client();
    let client = server.client();
    let busy = other.fair_mutex("b").lock().unwrap();
    let set = client.fair_multi_lock(["c", "b", "a"]);
    let asked = Instant::now();
    assert!(set
        .try_lock_for(Duration::from_millis(400))
        .unwrap()
        .is_none());
    let waited = asked.elapsed();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert!(set.try_lock().unwrap().is_none(), "b is held: never queues");
    for name in ["a", "b", "c"] {
        let status = client.fair_mutex(name).status(10).unwrap();
        assert_eq!(status.queue_len, 0, "{name}: left a queue entry");
        let held_by_set = status
            .holder()
            .is_some_and(|h| h.who.client_id() == client.id());
        assert!(!held_by_set, "{name}: a part was left held");
    }
    drop(busy);
    let guard = set.try_lock().unwrap().expect("all free now");
    let names: Vec<String> = guard.parts().iter().map(|p| p.name().to_owned()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["a", "b", "c"]);
    // One order whatever order the names were given in (their keys').
    drop(guard);
    let again = client.fair_multi_lock(["a", "b", "c"]).lock().unwrap();
    let order: Vec<String> = again.parts().iter().map(|p| p.name().to_owned()).collect();
    assert_eq!(order, names, "the shared order");
    drop(again);
    let guard = set.try_lock().unwrap().expect("free again");
    let a = guard.fencing_token("a").unwrap();
    assert!(a > 0 && guard.fencing_token("zz").is_none());
    // The guard moves to another thread and is released there.
    thread::spawn(move || guard.unlock())
        .join()
        .unwrap()
        .unwrap();
    assert!(!client.fair_mutex("a").is_locked().unwrap());
}

#[test]
fn reads_share_and_writes_exclude_inside_multi_locks() {
    let server = RedisServer::start();
    let one = server.client();
    let two = server.client();
    let first = one
        .fair_multi_lock(["m"])
        .and_read("catalog")
        .lock()
        .unwrap();
    // Another set reading the same rwlock (and another mutex) shares it.
    let second = two
        .fair_multi_lock(["n"])
        .and_read("catalog")
        .try_lock()
        .unwrap()
        .expect("reads share");
    let read = second
        .parts()
        .iter()
        .find(|p| p.name() == "catalog")
        .unwrap();
    assert_eq!(read.access(), Some(Access::Read));
    // A write of it does not, and the set's mutex is left free.
    let writer = two.fair_multi_lock(["w"]).and_write("catalog");
    assert!(writer
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert!(!two.fair_mutex("w").is_locked().unwrap());
    // A name both read and written is written.
    let both = one.fair_multi_lock(["x"]).and_read("dup").and_write("dup");
    drop((first, second));
    let guard = both.lock().unwrap();
    assert_eq!(guard.parts().len(), 2);
    let dup = guard.parts().iter().find(|p| p.name() == "dup").unwrap();
    assert_eq!(dup.access(), Some(Access::Write));
}

#[test]
fn bad_input_is_refused_before_any_io() {
    let server = RedisServer::start();
    let client: Client = server.client();
    let empty: [&str; 0] = [];
    let err = client.fair_multi_lock(empty).lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
    let err = client.fair_multi_lock(["ok", ""]).try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidName, "{err}");
    let err = client
        .fair_multi_lock(["ok"])
        .with_fixed_lease(Duration::ZERO)
        .try_lock()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    assert!(keys.is_empty(), "a refused multi-lock wrote {keys:?}");
}

/// A multi-lock part of n permits of a semaphore: it excludes what it must
/// (another set whose permits do not fit waits, and gives up holding
/// nothing, queued nowhere) and shares what it may (a permit that still
/// fits); a semaphore named twice is asked once for the sum; a set queued
/// for more permits than a shrink leaves gets `ErrorKind::PermitsExceeded`
/// and holds none of its parts; bad numbers are refused before any I/O.
#[test]
fn a_permits_part_excludes_what_does_not_fit_and_holds_nothing_when_refused() {
    let server = RedisServer::start();
    let one = server.client();
    let two = server.client();
    let first = one
        .fair_multi_lock(["job-a"])
        .and_permits("gpus", 3, 2)
        .lock()
        .unwrap();
    let gpus = first.parts().iter().find(|p| p.name() == "gpus").unwrap();
    assert_eq!(gpus.num_permits(), 2);
    let sem = two.fair_semaphore("gpus", 3);
    let second = two.fair_multi_lock(["job-b"]).and_permits("gpus", 3, 2);
    assert!(second
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    // The part it took is released by the wait's end and a leave's grace
    // (50 ms); a release not done by then (a loaded machine) is given back
    // by the watchdog's next round (every 10 s on the defaults).
    let job_b_free = || !two.fair_mutex("job-b").is_locked().unwrap();
    assert!(
        wait_until(Duration::from_secs(15), job_b_free),
        "the part taken was kept"
    );
    assert_eq!(sem.queue_len().unwrap(), 0, "left a queue entry");
    drop(
        sem.try_acquire()
            .unwrap()
            .expect("the third permit is free"),
    );
    // Queued for all 3 while 2 are held, then the semaphore shrinks to 2.
    let all = two.fair_multi_lock(["job-b"]).and_permits("gpus", 3, 3);
    let waiting = thread::spawn(move || all.lock().map(drop).map_err(|e| e.kind()));
    assert!(wait_until(Duration::from_secs(5), || sem
        .queue_len()
        .unwrap()
        == 1));
    assert_eq!(sem.set_permits(2).unwrap().refused, 1);
    let refused = join_within(waiting, Duration::from_secs(5), "the refused set");
    assert_eq!(refused, Err(ErrorKind::PermitsExceeded));
    assert!(!two.fair_mutex("job-b").is_locked().unwrap());
    assert_eq!(sem.queue_len().unwrap(), 0);
    drop(first);
    // Twice the same semaphore: one part of the sum.
    let twice = one
        .fair_multi_lock(["job-c"])
        .and_permits("gpus", 3, 1)
        .and_permits("gpus", 3, 1);
    let guard = twice.try_lock().unwrap().expect("2 of the 2 set");
    assert_eq!(guard.parts().len(), 2);
    let gpus = guard.parts().iter().find(|p| p.name() == "gpus").unwrap();
    assert_eq!(gpus.num_permits(), 2);
    drop(guard);
    // Bad numbers: nothing written.
    let mut conn = server.conn();
    let before: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    for set in [
        one.fair_multi_lock(["x"]).and_permits("s", 3, 0),
        one.fair_multi_lock(["x"]).and_permits("s", 3, 4),
        one.fair_multi_lock(["x"]).and_permits("s", 0, 1),
        one.fair_multi_lock(["x"])
            .and_permits("s", 3, 2)
            .and_permits("s", 3, 2),
        one.fair_multi_lock(["x"])
            .and_permits("s", 3, 1)
            .and_permits("s", 4, 1),
    ] {
        let err = set.try_lock().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
        // Its call and its part, as every call's error names them.
        assert!(
            err.to_string().starts_with("acquire of semaphore \"s\": "),
            "names its part: {err}"
        );
    }
    // The sum of a semaphore named twice says it is one.
    let twice = one.fair_multi_lock(["x"]).and_permits("s", 3, 2);
    let err = twice.and_permits("s", 3, 2).try_lock().unwrap_err();
    assert!(err.to_string().contains("2 parts"), "{err}");
    let after: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert_eq!(before.len(), after.len(), "a refused set wrote something");
}

/// A multi-lock's timed wait returns by its deadline (and the leave's and
/// the releases' grace) whatever the server does: here writes are held
/// back (`CLIENT PAUSE WRITE`) as its wait for its second part runs out,
/// so neither that part's leave nor the release of the first part it took
/// can be answered; what they leave the watchdog gives back once writes
/// resume. Before, each part taken was released as a guard's drop is,
/// waiting a command timeout (1 s here) each.
#[test]
fn a_multi_lock_that_times_out_in_a_stall_returns_by_its_deadline() {
    let _serial = serial();
    let server = RedisServer::start();
    let other = server.client();
    let client = server.stall_client();
    // The part taken second, in the order every client takes them, is held.
    let mut names = ["stall-x", "stall-y"];
    names.sort_by_key(|name| mutex_key(name));
    let [first, second] = names;
    let busy = other.fair_mutex(second).lock().unwrap();
    let set = client.fair_multi_lock(names);
    let patience = Duration::from_millis(1000);
    let started = Instant::now();
    let waiter = thread::spawn(move || {
        let got = set.try_lock_for(patience).map(|guard| guard.is_some());
        (got, Instant::now())
    });
    let queued = || other.fair_mutex(second).queue_len().unwrap() == 1;
    assert!(
        wait_until(Duration::from_secs(1), queued),
        "the set did not queue"
    );
    let pause = Duration::from_millis(2500);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    let (got, returned) = join_within(waiter, Duration::from_secs(10), "the set's wait");
    let took = returned - started;
    eprintln!(
        "multi_lock: try_lock_for({patience:?}) in a stall: {got:?} after {:.0} ms",
        ms(took)
    );
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(
        took <= patience + Duration::from_millis(300),
        "returned {took:?} after a wait of {patience:?}"
    );
    // Once writes resume, the part taken and the queue entry are given back.
    let free = || {
        let held = other.fair_mutex(first).status(1).unwrap();
        let queue = other.fair_mutex(second).status(1).unwrap();
        let ours = |h: &fairlock::Holder| h.who.client_id() == client.id();
        held.holder().is_none_or(|h| !ours(h)) && queue.queue_len == 0
    };
    assert!(
        wait_until(Duration::from_secs(10), free),
        "the set left a part or an entry"
    );
    eprintln!(
        "multi_lock: nothing left {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
    drop(busy);
}

/// A multi-lock's guard dropped or unlocked while Redis holds writes back
/// releases its parts within one command timeout all told (1 s here), as
/// one guard does, not one for each part; what is not released by then
/// the watchdog gives back once writes resume.
#[test]
fn a_multi_guard_dropped_in_a_stall_waits_one_command_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let other = server.client();
    let client = server.stall_client();
    let names = ["drop-stall-a", "drop-stall-b", "drop-stall-c"];
    let guard = client.fair_multi_lock(names).lock().unwrap();
    let unlocked = client.fair_multi_lock(names.map(|name| format!("{name}-u")));
    let unlocked = unlocked.lock().unwrap();
    let pause = Duration::from_millis(5000);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    let started = Instant::now();
    drop(guard);
    let took = started.elapsed();
    let started = Instant::now();
    let unlock = unlocked.unlock();
    let unlock_took = started.elapsed();
    eprintln!(
        "multi_lock: a guard of {} parts in a stall: dropped {:.0} ms, unlocked {:.0} ms \
         ({unlock:?}; command timeout 1 s)",
        names.len(),
        ms(took),
        ms(unlock_took)
    );
    assert!(took < Duration::from_millis(1400), "{took:?}");
    assert!(unlock_took < Duration::from_millis(1400), "{unlock_took:?}");
    assert!(unlock.is_err_and(|err| err.is_connection()));
    for name in names
        .into_iter()
        .flat_map(|name| [name.to_owned(), format!("{name}-u")])
    {
        let mutex = other.fair_mutex(&name);
        assert!(
            wait_until(Duration::from_secs(10), || !mutex.is_locked().unwrap()),
            "{name} stayed held"
        );
    }
    eprintln!(
        "multi_lock: every part free {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
}

/// A multi-lock's guard unlocked over a slow link (150 ms each way,
/// command timeout 1 s): each release is answered in about 300 ms, so the
/// parts released last find the one command timeout they share over. The
/// error says that: the timeout shared, how many parts were released by
/// then, and that the watchdog gives back the rest; not the figure of a
/// part sent with what was left of it, which says nothing of Redis
/// (before: "release of mutex ...: redis call timed out: no reply within
/// 97 ms", though Redis answered every release it had time for in 300 ms).
#[test]
fn a_multi_guard_unlocked_over_a_slow_link_says_its_releases_shared_one_timeout() {
    let _serial = serial();
    let (_server, other, relay, client) = over_a_relay(Duration::from_secs(1));
    let names = ["slow-a", "slow-b", "slow-c", "slow-d", "slow-e"];
    let guard = client.fair_multi_lock(names).lock().unwrap();
    relay.set_delay(Duration::from_millis(150));
    let started = Instant::now();
    let err = guard
        .unlock()
        .expect_err("five releases of 300 ms each in 1 s");
    let took = started.elapsed();
    relay.set_delay(Duration::ZERO);
    eprintln!(
        "multi_lock: unlocked over a slow link after {:.0} ms: {err}",
        ms(took)
    );
    let said = err.to_string();
    assert!(err.is_connection() && err.is_retryable(), "{err}");
    assert!(
        said.contains("unlock of a multi-lock of 5 parts")
            && said.contains("released by then")
            && said.contains("the watchdog gives back the rest"),
        "{err}"
    );
    assert!(!said.contains("no reply within"), "{err}");
    assert!(took < Duration::from_millis(1400), "{took:?}");
    assert_free_within_5s(&other, &names);
}

/// A server, a client of it, and a client of it through a relay (a link
/// a test can slow or cut) with `command_timeout`.
fn over_a_relay(command_timeout: Duration) -> (RedisServer, Client, Relay, Client) {
    let server = RedisServer::start();
    let other = server.client();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .command_timeout(command_timeout)
        .build()
        .unwrap();
    (server, other, relay, client)
}

/// A server, a relay to it, a client over the relay whose queued calls
/// give up after 1.5 s of silence (waiter timeout 1 s + connect timeout
/// 500 ms; command timeout 500 ms), and another client on the server.
fn patient_for_1_5s_over_a_relay() -> (RedisServer, Relay, Client, Client) {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let command_timeout = Duration::from_millis(500);
    let client = Client::builder(&relay.url())
        .command_timeout(command_timeout)
        .connect_timeout(command_timeout)
        .waiter_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let other = server.client();
    (server, relay, client, other)
}

/// The lock key of the mutex `name`: the order in which every client
/// takes a multi-lock's parts.
fn mutex_key(name: &str) -> String {
    LockKeys::of_kind("fairlock", name, LockKind::Mutex)
        .unwrap()
        .all[0]
        .clone()
}

/// Each of `names` is free, nothing held or queued, within 5 s (the
/// watchdog's give-backs included), as `other` reads it.
fn assert_free_within_5s(other: &Client, names: &[&str]) {
    for name in names {
        let mutex = other.fair_mutex(name);
        let free = || !mutex.is_locked().unwrap() && mutex.queue_len().unwrap() == 0;
        assert!(
            wait_until(Duration::from_secs(5), free),
            "{name} stayed held"
        );
    }
}

/// A multi-lock's `try_lock_for(1 s)` of five free mutexes over a slow
/// link (200 ms each way, command timeout 1 s): each part is answered in
/// about 400 ms, so the set's wait ends halfway through the request for
/// the third part, which has had only what was left of it (at 150 ms each
/// way, the fourth's began 100 ms before the end: on a loaded machine it
/// began after it once, and the set returned `None`). The error (`Connection`: nothing is
/// known of that part) says that the set's wait ended, which part was
/// asked for and that the parts taken are given back; not that part's
/// figure, which says nothing of Redis (before: "acquire of mutex ...:
/// redis call timed out: no reply within 147 ms", though Redis answered
/// every request in 300 ms, at 150 ms each way). The call returns once the
/// two parts taken are given back, a round trip each, within one command
/// timeout of its end.
#[test]
fn a_multi_lock_whose_wait_ends_over_a_slow_link_says_its_wait_ended() {
    let _serial = serial();
    let (_server, other, relay, client) = over_a_relay(Duration::from_secs(1));
    let names = [
        "slow-take-a",
        "slow-take-b",
        "slow-take-c",
        "slow-take-d",
        "slow-take-e",
    ];
    let set = client.fair_multi_lock(names);
    relay.set_delay(Duration::from_millis(200));
    let started = Instant::now();
    let got = set.try_lock_for(Duration::from_secs(1));
    let took = started.elapsed();
    relay.set_delay(Duration::ZERO);
    let err = got
        .map(|guard| guard.is_some())
        .expect_err("five requests of 400 ms in 1 s");
    eprintln!(
        "multi_lock: try_lock_for(1s) over a slow link after {:.0} ms: {err}",
        ms(took)
    );
    let said = err.to_string();
    assert!(err.is_connection() && err.is_retryable(), "{err}");
    assert!(
        said.contains("acquire of a multi-lock of 5 parts: its wait ended")
            && said.contains("given back"),
        "{err}"
    );
    assert!(!said.contains("no reply within"), "{err}");
    assert!(took < Duration::from_millis(2400), "{took:?}");
    assert_free_within_5s(&other, &names);
}

/// A multi-lock whose wait ends over a slow link (30 ms each way: a 60 ms
/// round trip) gives back the parts it took before it returns `None`, as
/// its documentation says: of three mutexes, the first two taken and the
/// last held by another client, none is left held by the set when
/// `try_lock_for` returns (another client on the server reads them at
/// once), nor when a canceller ends its wait. Before, the two releases
/// were kept to the wait's end and 50 ms (LEAVE_GRACE), which the leave
/// of the queue (one round trip) had used, so they were sent without
/// waiting for their replies: both parts still held as the call returned,
/// freed 30-160 ms later.
#[test]
fn a_multi_lock_whose_wait_ends_over_a_slow_link_holds_nothing_when_it_returns() {
    let _serial = serial();
    let (_server, other, relay, client) = over_a_relay(Duration::from_secs(2));
    let mut names = ["slow-end-a", "slow-end-b", "slow-end-c"];
    names.sort_by_key(|name| mutex_key(name));
    let last = names[2];
    let busy = other.fair_mutex(last).lock().unwrap();
    let set = client.fair_multi_lock(names);
    // A pooled connection open before the link slows.
    assert!(!client.fair_mutex(names[0]).is_locked().unwrap());
    relay.set_delay(Duration::from_millis(30));
    let still_held = || -> Vec<&str> {
        (names[..2].iter().copied())
            .filter(|name| other.fair_mutex(name).is_locked().unwrap())
            .collect()
    };
    let patience = Duration::from_millis(500);
    let started = Instant::now();
    let got = set.try_lock_for(patience).map(|guard| guard.is_some());
    let took = started.elapsed();
    let held_after_timeout = still_held();
    let cancel = WaitCanceller::new();
    let cancelling = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(400));
            cancel.cancel();
        })
    };
    let cancelled = set.lock_with(Wait::forever().cancelled_by(&cancel));
    let cancelled = cancelled.map(|guard| guard.is_some());
    let held_after_cancel = still_held();
    cancelling.join().unwrap();
    relay.set_delay(Duration::ZERO);
    eprintln!(
        "multi_lock: try_lock_for({patience:?}) over a 60 ms round trip: {got:?} after {:.0} ms, \
         {held_after_timeout:?} held then; cancelled: {cancelled:?}, {held_after_cancel:?} held",
        ms(took)
    );
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(matches!(cancelled, Ok(false)), "{cancelled:?}");
    assert!(
        held_after_timeout.is_empty(),
        "{held_after_timeout:?} still held when try_lock_for returned"
    );
    assert!(
        held_after_cancel.is_empty(),
        "{held_after_cancel:?} still held when the cancelled lock_with returned"
    );
    // Its deadline, the leave and two releases of 60 ms each.
    assert!(took < patience + Duration::from_millis(600), "{took:?}");
    drop(busy);
    assert_free_within_5s(&other, &names);
}

/// A multi-lock's wait cancelled while the reply to its first part's
/// request is on its way (a slow link: 200 ms each way, command timeout
/// 2 s; the cancel as soon as Redis holds that part) ends there: the part
/// taken is given back and the call returns `None` once that reply is in
/// and that part's release answered, asking for no later part. Before,
/// each later part was still asked for once, a round trip each, and the
/// cancelled call returned the whole set held, 0.8 s after the cancel.
#[test]
fn a_multi_lock_cancelled_during_a_parts_request_asks_for_no_later_part() {
    let _serial = serial();
    let (_server, other, relay, client) = over_a_relay(Duration::from_secs(2));
    // In the order every client takes them (their keys').
    let mut names = ["cancelled-a", "cancelled-b", "cancelled-c"];
    names.sort_by_key(|name| mutex_key(name));
    let set = client.fair_multi_lock(names);
    let cancel = WaitCanceller::new();
    // A pooled connection open before the link slows: the first part's
    // request is one round trip.
    assert!(!client.fair_mutex(names[0]).is_locked().unwrap());
    relay.set_delay(Duration::from_millis(200));
    let taking = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            let got = set.lock_with(Wait::forever().cancelled_by(&cancel));
            (got.map(|guard| guard.is_some()), Instant::now())
        })
    };
    let first = other.fair_mutex(names[0]);
    assert!(wait_until(Duration::from_secs(5), || first
        .is_locked()
        .unwrap()));
    let cancelled = Instant::now();
    cancel.cancel();
    let (got, ended) = join_within(taking, Duration::from_secs(10), "the set's call");
    relay.set_delay(Duration::ZERO);
    let took = ended.duration_since(cancelled);
    eprintln!("multi_lock: cancelled during its first part's request: {got:?}, {took:?} after");
    assert!(!got.unwrap(), "the cancelled call returned the set held");
    // Its reply 200 ms after the cancel, its release's 400 ms more; each
    // later part's, 400 ms more.
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert_free_within_5s(&other, &names);
}

/// A part the set took, lost while the set waits for a later one, is not
/// returned as held: the call fails `LeaseLost`, naming that part, and
/// gives back the parts it holds. Once force-released (another client
/// then takes it), and once by its fixed lease running out during the
/// wait.
#[test]
fn a_part_lost_while_the_set_waits_for_a_later_one_fails_the_call() {
    let server = RedisServer::start();
    let (client, other, third) = (server.client(), server.client(), server.client());
    // The two names in the order every client takes them (their keys').
    let mut names = ["lost-p", "lost-q"];
    names.sort_by_key(|name| mutex_key(name));
    let [first, second] = names;
    for fixed in [None, Some(Duration::from_millis(300))] {
        let busy = other.fair_mutex(second).lock().unwrap();
        let set = client.fair_multi_lock(names);
        let set = fixed.map_or(set.clone(), |lease| set.with_fixed_lease(lease));
        let started = Instant::now();
        let waiting = thread::spawn(move || set.try_lock_for(Duration::from_secs(10)));
        let queued = wait_until(Duration::from_secs(5), || {
            other.fair_mutex(second).queue_len().unwrap() == 1
        });
        assert!(queued, "the set holds {first} and waits for {second}");
        assert!(client.fair_mutex(first).is_locked().unwrap());
        let taken = match fixed {
            // Force-released, and taken by another client; its holder's
            // client is told by a message within about a millisecond.
            None => {
                assert!(third.force_unlock(LockKind::Mutex, first).unwrap());
                let taken = third.fair_mutex(first).try_lock().unwrap();
                thread::sleep(Duration::from_millis(100));
                taken
            }
            // Its fixed lease runs out while the set waits.
            Some(lease) => {
                let left = (started + lease + Duration::from_millis(200))
                    .saturating_duration_since(Instant::now());
                thread::sleep(left);
                None
            }
        };
        drop(busy);
        let got = join_within(waiting, Duration::from_secs(5), "the set");
        let err = match got {
            Err(err) => err,
            Ok(got) => {
                let lost = got.as_ref().map(|guard| guard.is_lease_lost());
                panic!("fixed lease {fixed:?}: the set returned a guard (lost: {lost:?}) while {first} was lost")
            }
        };
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
        assert!(err.to_string().contains(first), "{err}");
        // Nothing is held: the same call again takes the set (no holder's
        // lost lease behind it), so the error says it may be retried.
        assert!(err.is_retryable(), "fixed lease {fixed:?}: {err}");
        let status = client.fair_mutex(second).status(1).unwrap();
        assert!(
            status.holder().is_none() && status.queue_len == 0,
            "{second} given back"
        );
        assert_eq!(
            taken.is_some(),
            third.fair_mutex(first).is_locked().unwrap()
        );
        drop(taken);
        let again = client.fair_multi_lock(names).try_lock().unwrap();
        assert!(again.is_some(), "the set, retried, is taken");
        eprintln!("multi-lock: a part lost while waiting (fixed lease {fixed:?}): {err}");
    }
}

/// A `lock()` (no deadline) of five mutexes, queued for the last (another
/// client holds it) when its client's link stalls: once the queued part
/// gives up (`Connection`, after its patience), the four parts taken are
/// released within one command timeout all told, as a guard's drop, not
/// one each; the watchdog gives back what is left once the link is back.
#[test]
fn a_multi_lock_that_fails_in_a_stall_releases_its_parts_within_one_command_timeout() {
    let _serial = serial();
    let (server, relay, client, other) = patient_for_1_5s_over_a_relay();
    let mut names: Vec<String> = (0..5).map(|i| format!("stall-part-{i}")).collect();
    names.sort_by_key(|name| mutex_key(name));
    let last = names[4].clone();
    let busy = other.fair_mutex(&last).lock().unwrap();
    let set = client.fair_multi_lock(names.iter().map(String::as_str));
    let locking = thread::spawn(move || {
        let got = set.lock();
        (Instant::now(), got)
    });
    let queued = wait_until(Duration::from_secs(5), || {
        other.fair_mutex(&last).queue_len().unwrap() == 1
    });
    assert!(queued, "the set waits for {last}, holding the others");
    // A stall before the set's client has its reply would fail the first
    // request, not test a queued wait's patience.
    wait_for_a_heartbeat(&server, LockKind::Mutex, &last);
    relay.stall();
    let stalled = Instant::now();
    let (returned, got) = join_within(locking, Duration::from_secs(30), "the set");
    let took = returned - stalled;
    relay.resume();
    let err = got.unwrap_err();
    eprintln!(
        "multi_lock: lock() of 5 in a stall failed {:.0} ms after it began: {err}",
        ms(took)
    );
    assert!(err.is_connection(), "{err:?}");
    // It says why it gave up: its patience, not a request's last moment.
    assert!(
        err.to_string()
            .contains("gave up after 1.5s with redis unreachable"),
        "{err}"
    );
    // The queued part gives up about 2 s into the stall (its patience,
    // waiter timeout + connect timeout, from its first failed heartbeat);
    // then one command timeout and a leave's grace for the four releases:
    // 2.45 s with both cores busy, 4.4 s or more with a command timeout
    // each, past 3.3 s once on a machine loaded thrice over.
    assert!(took < Duration::from_millis(3900), "{took:?}");
    drop(busy);
    for name in &names {
        let mutex = other.fair_mutex(name);
        let free = wait_until(Duration::from_secs(10), || {
            !mutex.is_locked().unwrap() && mutex.queue_len().unwrap() == 0
        });
        // What is left says which call kept it: its holder and lease, or
        // its queue entries and their liveness.
        assert!(free, "{name} left held or queued: {:?}", mutex.status(10));
    }
}

/// A multi-lock of eight mutexes, queued for the last, cancelled while
/// Redis holds writes back (`CLIENT PAUSE WRITE`, command timeout 1 s):
/// `None` within a leave's grace or two of the cancel, its leave and the
/// seven releases sharing the cancel's grace (each had one of its own), as
/// a timed-out one's share its deadline; all given back once writes resume.
#[test]
fn a_multi_lock_cancelled_in_a_stall_returns_within_the_cancels_grace() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.stall_client();
    let other = server.client();
    let mut names: Vec<String> = (0..8).map(|i| format!("cancel-part-{i}")).collect();
    names.sort_by_key(|name| mutex_key(name));
    let last = names[7].clone();
    let busy = other.fair_mutex(&last).lock().unwrap();
    let set = client.fair_multi_lock(names.iter().map(String::as_str));
    let cancel = WaitCanceller::new();
    let wait = Wait::forever().cancelled_by(&cancel);
    let locking = thread::spawn(move || {
        let got = set.lock_with(wait);
        (Instant::now(), got.map(|guard| guard.is_some()))
    });
    let queued = wait_until(Duration::from_secs(5), || {
        other.fair_mutex(&last).queue_len().unwrap() == 1
    });
    assert!(queued, "the set waits for {last}, holding the others");
    let pause = Duration::from_millis(3000);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    cancel.cancel();
    let cancelled = Instant::now();
    let (returned, got) = join_within(locking, Duration::from_secs(10), "the set");
    let took = returned - cancelled;
    eprintln!(
        "multi_lock: 8 parts cancelled in a stall: {got:?} after {:.0} ms",
        ms(took)
    );
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(took < Duration::from_millis(250), "{took:?}");
    drop(busy);
    for name in &names {
        let mutex = other.fair_mutex(name);
        let free = wait_until(Duration::from_secs(10), || {
            !mutex.is_locked().unwrap() && mutex.queue_len().unwrap() == 0
        });
        assert!(free, "{name} left held or queued");
    }
    eprintln!(
        "multi_lock: every part free {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
}

/// A set that takes the mutex, the rwlock and the semaphore of one name
/// holds three locks, each counting its own tokens: `fencing_token(name)`
/// cannot say which the caller means, so it says none; each part's own is
/// in `parts()`, told apart by its kind.
#[test]
fn a_name_taken_as_locks_of_several_kinds_has_no_single_token() {
    let server = RedisServer::start();
    let client = server.client();
    // The mutex "x" taken before, so its tokens run ahead of the others'.
    drop(client.fair_mutex("x").lock().unwrap());
    let set = (client.fair_multi_lock(["x", "y"]))
        .and_read("x")
        .and_permits("x", 3, 1);
    let guard = set.lock().unwrap();
    assert_eq!(guard.parts().len(), 4);
    assert!(guard.fencing_token("y").is_some(), "a name of one part");
    let token = guard.fencing_token("x");
    assert_eq!(token, None, "three locks named x: the token of which?");
    let mut kinds = Vec::new();
    for part in guard.parts().iter().filter(|part| part.name() == "x") {
        let status = client.status(part.lock_kind(), "x", 1).unwrap();
        assert_eq!(status.last_fencing_token, Some(part.fencing_token()));
        kinds.push(part.lock_kind());
    }
    kinds.sort_by_key(|kind| format!("{kind:?}"));
    let all = [LockKind::Mutex, LockKind::RwLock, LockKind::Semaphore];
    assert_eq!(kinds, all);
    guard.unlock().unwrap();
}

/// A multi-lock queued for its last part (another client's write) when
/// Redis restarts without its data: the part it holds is lost with the
/// data, and the one it waits for is granted at once once the server is
/// back (its holder is gone too). The set is not returned as held: the
/// part Redis lost is asked about before the call returns (the client
/// noted the gap), and the call fails `LeaseLost`, retryable, naming it,
/// every part given back. Its client holds two thousand other locks, as a
/// busy service's may: the watchdog's check of every hold after the gap is
/// one pipeline of them all, which the set's last grant beat every time
/// (the set returned held, its part lost at Redis and not known lost).
#[test]
fn a_multi_lock_queued_across_a_restart_that_lost_its_data_returns_no_part_redis_lost() {
    const OTHER_HOLDS: usize = 2000;
    let _serial = serial();
    let mut server = RedisServer::start();
    let other = server.client();
    let client = (server.builder())
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let holds: Vec<_> = (0..OTHER_HOLDS)
        .map(|i| {
            client
                .fair_mutex(&format!("busy-{i}"))
                .unbound()
                .lock()
                .unwrap()
        })
        .collect();
    // The mutex comes first in the shared order, the write second.
    let names = ("restart-a", "restart-w");
    let key = |name, kind| LockKeys::of_kind("fairlock", name, kind).unwrap().all[0].clone();
    assert!(key(names.0, LockKind::Mutex) < key(names.1, LockKind::RwLock));
    let set = client.fair_multi_lock([names.0]).and_write(names.1);
    let blocker = other.fair_rwlock(names.1).write().unwrap();
    let waiting = thread::spawn(move || set.lock());
    let queued = || other.fair_rwlock(names.1).queue_len().unwrap() == 1;
    assert!(wait_until(Duration::from_secs(5), queued), "the set waits");
    server.restart_after(Duration::from_millis(500));
    let got = join_within(waiting, Duration::from_secs(10), "the set");
    let err = match got {
        Err(err) => err,
        Ok(guard) => {
            let lost: Vec<_> = (guard.parts().iter())
                .map(|part| (part.name().to_owned(), part.is_lease_lost()))
                .collect();
            panic!("the set was returned held after the restart; its parts lost: {lost:?}");
        }
    };
    eprintln!("multi-lock queued across a restart: {err}");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains(names.0), "{err}");
    assert!(err.to_string().contains("redis lost it"), "{err}");
    drop(blocker);
    assert_free_within_5s(&other, &[names.0]);
    let write = other.fair_rwlock(names.1);
    let free = || {
        let status = write.status(1).unwrap();
        status.holder_count == 0 && status.queue_len == 0
    };
    assert!(
        wait_until(Duration::from_secs(5), free),
        "the write given back"
    );
    let again = (client.fair_multi_lock([names.0]).and_write(names.1)).try_lock();
    assert!(again.unwrap().is_some(), "the set, retried, is taken");
    drop(holds);
}

/// A `lock()` of two mutexes on a fixed lease (800 ms), holding the first
/// and queued for the second (another client holds it) when its client's
/// link stalls: the first part's lease runs out during the stall, and the
/// queued part gives up after its patience (1.5 s). The call fails
/// `LeaseLost` naming the part lost while the set waited, as `lock_with`'s
/// doc says, saying what the wait met too; the parts are given back once
/// the link is back. Before, it failed `Connection`, the lost part
/// unnamed.
#[test]
fn a_part_lost_while_the_set_waits_through_a_stall_fails_the_call_lease_lost() {
    let _serial = serial();
    let (server, relay, client, other) = patient_for_1_5s_over_a_relay();
    let mut names = ["stall-lost-a".to_owned(), "stall-lost-b".to_owned()];
    names.sort_by_key(|name| mutex_key(name));
    let [first, last] = names.clone();
    let busy = other.fair_mutex(&last).lock().unwrap();
    let set = (client.fair_multi_lock(names.iter().map(String::as_str)))
        .with_fixed_lease(Duration::from_millis(800));
    let locking = thread::spawn(move || set.lock());
    wait_for_a_heartbeat(&server, LockKind::Mutex, &last);
    relay.stall();
    let got = join_within(locking, Duration::from_secs(30), "the set");
    relay.resume();
    let err = match got {
        Err(err) => err,
        Ok(guard) => panic!("the set was returned held: {:?}", guard.is_lease_lost()),
    };
    eprintln!("multi_lock: a part lost while the set waited through a stall: {err}");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert!(
        err.to_string().contains(&first),
        "names the lost part: {err}"
    );
    assert!(
        err.to_string().contains("unreachable"),
        "says what the wait met: {err}"
    );
    assert!(err.is_retryable(), "{err}");
    drop(busy);
    for name in &names {
        let mutex = other.fair_mutex(name);
        let free = wait_until(Duration::from_secs(10), || {
            !mutex.is_locked().unwrap() && mutex.queue_len().unwrap() == 0
        });
        assert!(free, "{name} left held or queued");
    }
}

/// A part the set holds while it waits for a later one, asked to let go
/// (`revoke`) meanwhile: the set's guard, once it returns, says it was
/// asked (`is_revoked`), as does that part's signal, and the part taken
/// after is not asked.
#[test]
fn a_part_asked_to_let_go_while_the_set_waits_is_revoked_in_the_guard() {
    let server = RedisServer::start();
    let (client, other, operator) = (server.client(), server.client(), server.client());
    let mut names = ["asked-p", "asked-q"];
    names.sort_by_key(|name| mutex_key(name));
    let [first, second] = names;
    let busy = other.fair_mutex(second).lock().unwrap();
    let set = client.fair_multi_lock(names);
    let waiting = thread::spawn(move || set.lock());
    let queued = wait_until(Duration::from_secs(5), || {
        other.fair_mutex(second).queue_len().unwrap() == 1
    });
    assert!(queued, "the set holds {first} and waits for {second}");
    assert_eq!(operator.revoke(LockKind::Mutex, first).unwrap(), 1);
    drop(busy);
    let multi = join_within(waiting, Duration::from_secs(5), "the set").unwrap();
    let asked = |multi: &fairlock::MultiGuard| {
        let parts = multi.parts().iter();
        parts
            .map(|p| (p.name().to_owned(), p.is_revoked()))
            .collect::<Vec<_>>()
    };
    let want = vec![(first.to_owned(), true), (second.to_owned(), false)];
    assert!(
        wait_until(Duration::from_secs(2), || asked(&multi) == want),
        "{:?}",
        asked(&multi)
    );
    assert!(multi.is_revoked());
    multi.unlock().unwrap();
}

/// A thread-bound set whose later part is refused (a write of a rwlock
/// the thread reads: `UpgradeRefused`, nothing queued) says so naming
/// that part, and gives back the part it took before it.
#[test]
fn a_bound_set_refused_at_a_later_part_names_it_and_gives_back_the_earlier() {
    let server = RedisServer::start();
    let client = server.client();
    let key = |name: &str, kind| LockKeys::of_kind("fairlock", name, kind).unwrap().all[0].clone();
    let rw = "refused-rw";
    let first = (0..100)
        .map(|i| format!("refused-first-{i}"))
        .find(|name| key(name, LockKind::Mutex) < key(rw, LockKind::RwLock))
        .unwrap();
    let read = client.fair_rwlock(rw).read().unwrap();
    let set = client.fair_multi_lock([&first]).and_write(rw).bound();
    let err = set.try_lock_for(Duration::from_secs(2)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{err}");
    assert!(err.to_string().contains(rw), "names the part: {err}");
    let other = server.client();
    assert!(
        !other.fair_mutex(&first).is_locked().unwrap(),
        "the first part kept"
    );
    assert_eq!(other.fair_rwlock(rw).queue_len().unwrap(), 0);
    drop(read);
}
