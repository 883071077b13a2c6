//! Safety under partitions and clock drift: a holder cut off from Redis
//! learns that its lease is gone no later than another client can take the
//! lock, also when the holder's clocks run 1% slow; and a cut-off client
//! fails fast, keeps its waiters' places and works again once healed.
//!
//! The partition is a [`Relay`] between the holder and Redis that stops
//! passing bytes (`stall`: connections stay open, nothing passes, as when a
//! link goes dark) or resets every connection (`cut`). The other client
//! talks to Redis directly. A relay re-pointed to another server stands
//! for a DNS name that a failover moved, the connections opened before
//! left on the old primary turned replica.
//!
//! The check is causal, not timed: the moment the other client's `lock()`
//! returns, the test asks the holder whether its lease is lost (in this
//! process: at once; in a child process: one pipe round trip later). The
//! margin reported is how long before that return the holder's lease
//! signal had fired (negative: the signal's thread ran later than the
//! return, which says nothing about the lease itself).

use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Bound, Client, ErrorKind, FairMutexGuard, LeaseEnd, LockKind, Unbound, Wait};
use fairlock_test_support::roles::lease_holder;
use fairlock_test_support::*;

const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

/// Rounds per test: each a lock taken, the holder cut off, the lock taken
/// over by the other client.
const ROUNDS: usize = 20;

/// A holder of locks that the test can cut off from Redis.
trait Holder {
    /// Takes `name`; returns the fencing token.
    fn lock(&mut self, name: &str) -> u64;
    /// Whether the holder's guard says its lease is lost, now.
    fn lost_now(&mut self) -> bool;
    /// When the holder's lease signal fired (as this process saw it), and
    /// how it ended.
    fn signal(&mut self) -> (Instant, LeaseEnd);
    /// Releases the hold (its outcome is not the point here).
    fn unlock(&mut self);
}

/// A holder in this process: a client through the relay.
struct InProcess {
    client: Client,
    fixed: Option<Duration>,
    guard: Option<FairMutexGuard>,
    ended: Option<mpsc::Receiver<(Instant, LeaseEnd)>>,
}

impl Holder for InProcess {
    fn lock(&mut self, name: &str) -> u64 {
        let mutex = self.client.fair_mutex(name);
        let mutex = match self.fixed {
            Some(lease) => mutex.with_fixed_lease(lease),
            None => mutex,
        };
        let guard = mutex.lock().expect("holder locks");
        let signal = guard.lease_signal();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let end = signal.wait();
            let _ = tx.send((Instant::now(), end));
        });
        let token = guard.fencing_token();
        self.guard = Some(guard);
        self.ended = Some(rx);
        token
    }

    fn lost_now(&mut self) -> bool {
        self.guard.as_ref().expect("holding").is_lease_lost()
    }

    fn signal(&mut self) -> (Instant, LeaseEnd) {
        let ended = self.ended.take().expect("holding");
        ended
            .recv_timeout(Duration::from_secs(10))
            .expect("the lease signal fires")
    }

    fn unlock(&mut self) {
        drop(self.guard.take());
    }
}

/// A holder in a child process ("lease_holder" role), e.g. with slow clocks.
struct InChild {
    children: Children,
    child: usize,
}

impl InChild {
    fn spawn(url: &str, lease: Duration, fixed: bool, env: &[(&str, String)]) -> InChild {
        let mut children = Children::new(CHILD);
        let mut vars = lease_holder::vars(url, lease.as_millis(), fixed);
        vars.extend(env.iter().cloned());
        let child = children.spawn("lease_holder", &vars);
        children.expect_text(child, "ready", Duration::from_secs(20));
        InChild { children, child }
    }
}

impl Holder for InChild {
    fn lock(&mut self, name: &str) -> u64 {
        self.children.send(self.child, &format!("lock {name}"));
        let locked = self
            .children
            .expect_prefix(self.child, "locked ", Duration::from_secs(20));
        locked.words()[1].parse().expect("a token")
    }

    fn lost_now(&mut self) -> bool {
        self.children.send(self.child, "lost?");
        let answer = self
            .children
            .expect_prefix(self.child, "lost ", Duration::from_secs(20));
        answer.words()[1] == "true"
    }

    fn signal(&mut self) -> (Instant, LeaseEnd) {
        let ended = self
            .children
            .expect_prefix(self.child, "ended ", Duration::from_secs(20));
        let end = match ended.words()[1] {
            "lost" => LeaseEnd::Lost,
            _ => LeaseEnd::Released,
        };
        (ended.at, end)
    }

    fn unlock(&mut self) {
        self.children.send(self.child, "unlock");
        self.children
            .expect_prefix(self.child, "unlocked ", Duration::from_secs(20));
    }
}

/// The other client's `lock()`, on a thread of its own: says when it
/// returned and with which token, and keeps the guard until told.
fn take_over(client: &Client, name: &str) -> (mpsc::Receiver<(Instant, u64)>, mpsc::Sender<()>) {
    let mutex = client.fair_mutex(name);
    let (took, taken) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    thread::spawn(move || {
        let guard = mutex.lock().expect("the other client locks");
        let _ = took.send((Instant::now(), guard.fencing_token()));
        let _ = released.recv_timeout(Duration::from_secs(30));
    });
    (taken, release)
}

/// `ROUNDS` rounds: the holder takes a lock, holds it for `hold` (renewals
/// happen), the other client queues for it, the holder is cut off, and the
/// other client's `lock()` returns. Asserts the holder knew by then.
/// Returns the margins (ms) by which the signal came first.
fn rounds(
    holder: &mut dyn Holder,
    relay: &Relay,
    other: &Client,
    hold: Duration,
    label: &str,
) -> Vec<f64> {
    let mut margins = Vec::new();
    for round in 0..ROUNDS {
        let name = format!("{label}-{round}");
        let token = holder.lock(&name);
        thread::sleep(hold);
        let (taken, release) = take_over(other, &name);
        let queued = wait_until(Duration::from_secs(5), || {
            other.fair_mutex(&name).queue_len().unwrap_or(0) == 1
        });
        assert!(queued, "{label} round {round}: the other client queued");
        relay.stall();
        let (returned, new_token) = taken
            .recv_timeout(Duration::from_secs(30))
            .expect("the other client gets the lock once the lease runs out");
        let lost = holder.lost_now();
        assert!(
            lost,
            "{label} round {round}: the holder still believed it held the lock after \
             another client's lock() returned"
        );
        assert!(new_token > token, "{label} round {round}: fencing order");
        let (fired, end) = holder.signal();
        assert_eq!(end, LeaseEnd::Lost, "{label} round {round}");
        let margin = returned.checked_duration_since(fired).map_or_else(
            || -(fired.duration_since(returned).as_secs_f64() * 1e3),
            |d| d.as_secs_f64() * 1e3,
        );
        margins.push(margin);
        relay.resume();
        holder.unlock();
        let _ = release.send(());
    }
    margins
}

fn report(label: &str, margins: &mut [f64]) {
    margins.sort_by(f64::total_cmp);
    let first = margins.iter().filter(|&&m| m >= 0.0).count();
    eprintln!(
        "{label}: {} of {} rounds lost before the other lock() returned (asserted); \
         lease signal ahead by min {:.2} / median {:.2} / max {:.2} ms, first in {first} rounds",
        margins.len(),
        margins.len(),
        margins[0],
        margins[margins.len() / 2],
        margins[margins.len() - 1]
    );
}

/// A client that goes straight to `server` with `lease`.
fn direct(server: &RedisServer, lease: Duration) -> Client {
    server.builder().lease(lease).build().unwrap()
}

/// (a) and (c) in this process: a holder through a relay, black-holed in
/// each round while a direct client waits. `fixed`: the holder takes a
/// fixed 300 ms lease instead of a watchdog-renewed one.
fn cut_off_holder_in_process(fixed: bool, label: &str, what: &str) {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let lease = Duration::from_millis(300);
    let client = Client::builder(&relay.url())
        .lease(lease)
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let mut holder = InProcess {
        client,
        fixed: fixed.then_some(lease),
        guard: None,
        ended: None,
    };
    let other = direct(&server, lease);
    // A renewed hold is held long enough to be renewed before the cut.
    let hold = if fixed { lease / 4 } else { lease / 2 };
    let mut margins = rounds(&mut holder, &relay, &other, hold, label);
    report(what, &mut margins);
}

/// (b) and (c) in a child process whose clocks, wall and monotonic, run at
/// 99% of real speed (libfaketime). The lease is long enough that 1% of it
/// (8 ms) dwarfs the pipe round trip of the check: without the allowance
/// these fail.
fn cut_off_slow_holder(fixed: bool, label: &str, what: &str) {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let lease = Duration::from_millis(800);
    let slow = [
        ("LD_PRELOAD", libfaketime()),
        ("FAKETIME", "+0 x0.99".to_owned()),
    ];
    let mut holder = InChild::spawn(&relay.url(), lease, fixed, &slow);
    let other = direct(&server, lease);
    let hold = if fixed { lease / 4 } else { lease / 2 };
    let mut margins = rounds(&mut holder, &relay, &other, hold, label);
    report(what, &mut margins);
}

#[test]
fn a_cut_off_holder_knows_it_lost_the_lock_before_anyone_else_gets_it() {
    cut_off_holder_in_process(false, "renewed", "(a) renewed lease, same clock");
}

#[test]
fn a_cut_off_fixed_lease_holder_knows_before_anyone_else_gets_it() {
    cut_off_holder_in_process(true, "fixed", "(c) fixed lease, same clock");
}

#[test]
fn a_holder_whose_clocks_run_one_percent_slow_still_knows_first() {
    cut_off_slow_holder(
        false,
        "slow-renewed",
        "(b) renewed lease, holder clocks x0.99",
    );
}

#[test]
fn a_fixed_lease_holder_whose_clocks_run_one_percent_slow_still_knows_first() {
    cut_off_slow_holder(true, "slow-fixed", "(c) fixed lease, holder clocks x0.99");
}

/// How a partition looks to the client behind the relay.
#[derive(Debug, Clone, Copy)]
enum Partition {
    /// Connections stay open and nothing passes.
    BlackHole,
    /// Every connection is reset; new ones are refused.
    Reset,
}

/// A client cut off for `PARTITION` (shorter than its waiter timeout):
/// each of its calls returns within its bound; its queued waiter keeps its
/// place ahead of a later one; it works again within 1 s of the heal.
fn cut_off_client(partition: Partition) {
    const PARTITION: Duration = Duration::from_millis(1500);
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let (connect_timeout, command_timeout) =
        (Duration::from_millis(500), Duration::from_millis(500));
    let settings = |url: &str| {
        Client::builder(url)
            .lease(Duration::from_secs(1))
            .waiter_timeout(Duration::from_secs(3))
            .connect_timeout(connect_timeout)
            .command_timeout(command_timeout)
    };
    let cut_off = settings(&relay.url()).build().unwrap();
    let direct_client = settings(&server.url()).build().unwrap();
    let name = "partitioned";
    let holder = direct_client.fair_mutex(name).lock().unwrap();

    // Queued first: the cut-off client; second: a direct one.
    let (order_tx, order) = mpsc::channel();
    let spawn_waiter = |client: &Client, who: &'static str| {
        let mutex = client.fair_mutex(name);
        let order_tx = order_tx.clone();
        thread::spawn(move || {
            let guard = mutex
                .try_lock_for(Duration::from_secs(30))
                .unwrap_or_else(|err| panic!("{who}: {err}"))
                .unwrap_or_else(|| panic!("{who} timed out"));
            order_tx.send(who).unwrap();
            thread::sleep(Duration::from_millis(50));
            drop(guard);
        })
    };
    let queue_len = || direct_client.fair_mutex(name).queue_len().unwrap();
    let first = spawn_waiter(&cut_off, "cut-off client");
    assert!(wait_until(Duration::from_secs(5), || queue_len() == 1));
    let second = spawn_waiter(&direct_client, "direct client");
    assert!(wait_until(Duration::from_secs(5), || queue_len() == 2));

    let started = Instant::now();
    match partition {
        Partition::BlackHole => relay.stall(),
        Partition::Reset => relay.cut(),
    }
    // Every kind of call at once, each bounded: a pool checkout may have to
    // open a connection (connect timeout) before its command (command
    // timeout).
    let bound = connect_timeout + command_timeout + Duration::from_secs(1);
    type Call = fn(&fairlock::FairMutex) -> Option<ErrorKind>;
    let calls: [(&str, Call); 6] = [
        ("try_lock", |m| m.try_lock().err().map(|e| e.kind())),
        ("lock", |m| m.lock().err().map(|e| e.kind())),
        ("try_lock_for(300 ms)", |m| {
            m.try_lock_for(Duration::from_millis(300))
                .err()
                .map(|e| e.kind())
        }),
        ("is_locked", |m| m.is_locked().err().map(|e| e.kind())),
        ("queue_len", |m| m.queue_len().err().map(|e| e.kind())),
        ("force_unlock", |m| m.force_unlock().err().map(|e| e.kind())),
    ];
    let callers: Vec<_> = calls
        .into_iter()
        .enumerate()
        .map(|(i, (what, call))| {
            let mutex = cut_off.fair_mutex(&format!("elsewhere-{i}"));
            thread::spawn(move || {
                let start = Instant::now();
                let kind = call(&mutex);
                (what, start.elapsed(), kind)
            })
        })
        .collect();
    let mut timings = Vec::new();
    for caller in callers {
        let (what, took, kind) = caller.join().unwrap();
        assert!(
            took <= bound,
            "{partition:?}: {what} took {took:?} (bound {bound:?})"
        );
        assert_eq!(kind, Some(ErrorKind::Connection), "{partition:?}: {what}");
        timings.push(format!("{what} {:.0} ms", took.as_secs_f64() * 1e3));
    }
    assert!(
        started.elapsed() < PARTITION,
        "the calls took longer than the partition: {timings:?}"
    );
    thread::sleep(PARTITION - started.elapsed());
    match partition {
        Partition::BlackHole => relay.resume(),
        Partition::Reset => relay.heal(),
    }
    let healed = Instant::now();
    let fresh = cut_off.fair_mutex("after-the-heal");
    let mut attempts = 0;
    let recovered = wait_until(Duration::from_secs(5), || {
        attempts += 1;
        matches!(fresh.try_lock(), Ok(Some(_)))
    });
    let recovery = healed.elapsed();
    assert!(recovered, "{partition:?}: the client never worked again");
    assert!(
        recovery <= Duration::from_secs(1),
        "{partition:?}: working again took {recovery:?} ({attempts} attempts)"
    );

    drop(holder);
    let got = [
        order.recv_timeout(Duration::from_secs(10)).unwrap(),
        order.recv_timeout(Duration::from_secs(10)).unwrap(),
    ];
    first.join().unwrap();
    second.join().unwrap();
    assert_eq!(
        got,
        ["cut-off client", "direct client"],
        "{partition:?}: the cut-off client's waiter kept its place"
    );
    eprintln!(
        "(d) {partition:?} for {PARTITION:?}: {timings:?}; working again {:.0} ms after the heal",
        recovery.as_secs_f64() * 1e3
    );
}

#[test]
fn a_black_holed_client_fails_fast_keeps_its_place_and_recovers() {
    cut_off_client(Partition::BlackHole);
}

#[test]
fn a_client_whose_connections_are_reset_fails_fast_keeps_its_place_and_recovers() {
    cut_off_client(Partition::Reset);
}

/// `server`'s `INFO replication`.
fn replication(server: &RedisServer) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query(&mut server.conn())
        .unwrap()
}

/// A managed Redis's failover behind one DNS name (the relay): the old
/// primary hands over to its replica (`FAILOVER`) and turns replica of
/// it, and the name moves to the new one. Connections opened before stay
/// with the old primary, which refuses every write (`READONLY`) and closes
/// nothing: a client's calls, its watchdog's renewals and its waiters'
/// grants must move to the new primary, not fail on them until the pool's
/// 30 min lifetime ends them.
#[test]
fn a_primary_turned_replica_behind_the_same_address_is_left_for_the_new_one() {
    // Room for a watchdog round or two that still meet the old primary
    // between its demotion and the move, on a busy machine: the lease is
    // counted from the last renewal before the demotion, up to a period
    // (a third of it) earlier, and the first round after the move may be
    // a period later. With 6 s, one run of the suite with both cores
    // hogged counted the hold lost.
    const LEASE: Duration = Duration::from_secs(9);
    const POOL: u32 = 4;
    let _serial = serial();
    let (old, new) = (RedisServer::start(), RedisServer::start());
    let relay = Relay::start(old.port());
    // Every pooled connection opened at build, to the old primary.
    let settings = || {
        Client::builder(&relay.url())
            .lease(LEASE)
            .waiter_timeout(LEASE)
            .pool_size(POOL)
            .min_idle(Some(POOL))
    };
    let client = settings().build().unwrap();
    let name = "failed-over";
    let mutex = client.fair_mutex(name);
    let guard = mutex.lock().unwrap();
    let waiter = LockThread::lock(settings().build().unwrap().fair_mutex(name));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));

    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(old.port())
        .query(&mut new.conn())
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || replication(&old)
        .contains("state=online")));
    let () = redis::cmd("FAILOVER").query(&mut old.conn()).unwrap();
    let failover_sent = Instant::now();
    assert!(wait_until(Duration::from_secs(10), || {
        replication(&old).contains("role:slave") && replication(&new).contains("role:master")
    }));
    relay.repoint(new.port());
    let failed_over = Instant::now();
    // A lease runs out if this takes longer than about a third of it.
    let moved_after = failed_over - failover_sent;
    let mut admin = new.conn();
    let since_ms = server_time_us(&mut admin) / 1000;

    // Each call may fail once per connection pooled before (a clear
    // `Connection` error with the server's `READONLY` words), then goes
    // to the new primary.
    let mut failures = Vec::new();
    let mut first_ok = None;
    for i in 0..2 * POOL + 2 {
        match client.fair_mutex(&format!("after-{i}")).try_lock() {
            Ok(Some(guard)) => {
                first_ok.get_or_insert_with(|| failed_over.elapsed());
                guard.unlock().unwrap();
            }
            Ok(None) => panic!("after-{i} is held"),
            Err(err) => {
                assert!(
                    first_ok.is_none(),
                    "a call failed after one succeeded: {err}"
                );
                let refused = err
                    .to_string()
                    .contains("write against a read only replica");
                assert!(err.is_connection() && refused, "{err}");
                failures.push(err.to_string());
            }
        }
    }
    assert!(
        failures.len() <= POOL as usize,
        "{} calls failed on {POOL} pooled connections: {failures:?}",
        failures.len()
    );

    // The watchdog renews the hold on the new primary within its lease.
    let renewed = wait_until(LEASE, || {
        let now = server_time_us(&mut admin) / 1000;
        let left = lease_left_of(&mut admin, &lock_key(name));
        left.is_some_and(|left| now + left >= since_ms + LEASE.as_millis() as i64)
    });
    let renewed_after = failed_over.elapsed();
    assert!(renewed, "no renewal on the new primary within {LEASE:?}");
    assert!(!guard.is_lease_lost());

    // The unlock hands the lock to the waiter.
    let held_token = guard.fencing_token();
    let released = Instant::now();
    guard.unlock().unwrap();
    let (granted, token) = waiter.granted_within(Duration::from_secs(5), "the waiter");
    assert!(token > held_token);
    waiter.release("the waiter");
    eprintln!(
        "failover behind one address: moved {:.0} ms after the FAILOVER; first call through \
         {:.0} ms after the move ({} failed: {failures:?}); renewed on the new primary {:.0} ms \
         after; handoff {:.1} ms",
        ms(moved_after),
        ms(first_ok.unwrap_or_default()),
        failures.len(),
        ms(renewed_after),
        ms(granted.saturating_duration_since(released))
    );
}

/// A watchdog that cannot reach Redis says so at warn once for the
/// outage, naming its client, not once a round (every 100 ms here) while
/// its hold's lease runs out and its waiter rides the outage out.
#[test]
fn an_outage_is_warned_of_once_not_every_watchdog_round() {
    crate::semaphore::warnings("");
    let mut server = RedisServer::start();
    let client = (server.builder())
        .lease(Duration::from_millis(300))
        .waiter_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mutex = client.fair_mutex("outage-said-once");
    let guard = mutex.lock().unwrap();
    let waiter = {
        let mutex = mutex.clone();
        thread::spawn(move || {
            mutex
                .try_lock_for(Duration::from_secs(3))
                .map(|g| g.is_some())
        })
    };
    assert!(wait_until(Duration::from_secs(5), || mutex
        .status(1)
        .is_ok_and(|s| s.queue_len == 1)));
    server.kill();
    assert!(wait_until(Duration::from_secs(5), || guard.is_lease_lost()));
    // Ten rounds or more after the lease ran out.
    thread::sleep(Duration::from_secs(1));
    let said = crate::semaphore::warnings(&format!("client {}'s watchdog round", client.id()));
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("until a round succeeds"), "{said:?}");
    drop(guard);
    let waited = join_within(waiter, Duration::from_secs(10), "the waiter");
    assert!(waited.is_err(), "{waited:?}");
}

/// A take whose request a stalled link holds back longer than its fixed
/// lease, and which takes the free lock once the bytes flow, is returned
/// live: its lease counts from the request's send time, so its reply
/// arrives counted out, yet Redis gave the lease a moment ago. The call
/// asks Redis once more (the same call, answered as a repeat) and returns
/// the hold with the lease Redis has, for every kind, a waiting call's
/// first request (`lock`) as a `try_lock`. (Before, it returned a guard
/// already lost, whose unlock said `LeaseLost`, while the lock was the
/// caller's at Redis for most of its lease.)
#[test]
fn a_take_answered_after_its_fixed_lease_would_have_run_out_is_returned_live() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url()).build().unwrap();
    let observer = server.client();
    let lease = Duration::from_millis(600);
    let stall = Duration::from_millis(900);
    let mut wrong = Vec::new();
    for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
        for (how, wait) in [("lock", Wait::forever()), ("try_lock", Wait::not_at_all())] {
            let name = format!("late-take-{kind:?}-{how}");
            let fixed = LeasePolicy::Fixed(lease);
            // The client's connection and subscription are open first.
            let warm = take::<Bound>(&client, kind, &name, fixed, Wait::forever());
            warm.unwrap().expect("free").unlock().unwrap();
            let held = relay.held_bytes();
            relay.stall();
            let started = Instant::now();
            let (lost, token, unlocked, returned, status) = thread::scope(|s| {
                let taker = s.spawn(|| {
                    let guard = take::<Bound>(&client, kind, &name, fixed, wait.clone())
                        .unwrap()
                        .expect("the lock is free");
                    let returned = started.elapsed();
                    let status = observer.status(kind.lock_kind(), &name, 1).unwrap();
                    let (lost, token) = (guard.is_lease_lost(), guard.fencing_token());
                    (lost, token, guard.unlock(), returned, status)
                });
                assert!(
                    wait_until(Duration::from_secs(5), || relay.held_bytes() > held),
                    "the take did not reach the relay"
                );
                thread::sleep(stall.saturating_sub(started.elapsed()));
                relay.resume();
                taker.join().unwrap()
            });
            eprintln!(
                "{kind:?} {how}: fixed lease {lease:?}, request held {stall:?}; returned after \
                 {:.0} ms, lost={lost}, unlock {unlocked:?}; redis: {:?}",
                ms(returned),
                status.holder()
            );
            let held = status.holder().map(|holder| holder.fencing_token);
            if lost || held != Some(token) || unlocked.is_err() {
                wrong.push(format!("{kind:?} {how}: lost={lost}, {unlocked:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "guards returned already lost: {wrong:#?}");
}

/// With `sync_replicas`, a waiter handed the lock confirms the grant (a
/// renewal and a `WAIT`) before it returns. Over a slow link (1.6 s each
/// way, a lease of 4 s) that confirmation comes back after the grant's
/// count ran out (it counts from the last request that saw the waiter
/// queued, or from the heartbeat that found it holding), though Redis ran
/// it with the hold still the waiter's: the call must not return that
/// guard already lost. It asks Redis once more, as for a grant counted out
/// on arrival, and returns the hold with the lease Redis has or, its
/// lease over, takes the lock anew; either way live, and the hold Redis
/// has. (Before, the renewed one was returned lost, its unlock
/// `LeaseLost`, while Redis held it for the waiter.)
#[test]
fn a_grant_confirmed_after_its_count_ran_out_is_returned_live() {
    let _serial = serial();
    let (server, _replica, _) = crate::deadlines::server_with_replica();
    let relay = Relay::start(server.port());
    let lease = Duration::from_secs(4);
    let one_way = Duration::from_millis(1600);
    let client = Client::builder(&relay.url())
        .lease(lease)
        .waiter_timeout(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(10))
        .sync_replicas(1, Duration::from_secs(2))
        .build()
        .unwrap();
    // The holder's lease outlasts the test: the waiters poll only when told.
    let holder = (server.builder().lease(Duration::from_secs(60)))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let observer = server.client();
    let cases = [
        ("late-confirm-renewed", LeasePolicy::Client),
        ("late-confirm-fixed", LeasePolicy::Fixed(lease)),
    ];
    let held: Vec<_> = (cases.iter())
        .map(|(name, _)| holder.fair_mutex(name).lock().unwrap())
        .collect();
    let outcomes = thread::scope(|s| {
        let waiters: Vec<_> = (cases.iter())
            .map(|&(name, policy)| {
                let (client, observer) = (&client, &observer);
                s.spawn(move || {
                    let guard = take::<Bound>(client, Kind::Mutex, name, policy, Wait::forever())
                        .unwrap()
                        .expect("a wait without a limit");
                    let returned = Instant::now();
                    let (lost, token) = (guard.is_lease_lost(), guard.fencing_token());
                    let at_redis = observer.status(LockKind::Mutex, name, 1).unwrap();
                    let at_redis = at_redis.holder().map(|holder| holder.fencing_token);
                    (name, returned, lost, token, at_redis, guard.unlock())
                })
            })
            .collect();
        for (name, _) in &cases {
            let queued = || observer.fair_mutex(name).queue_len().unwrap() == 1;
            assert!(
                wait_until(Duration::from_secs(5), queued),
                "{name} never queued"
            );
        }
        relay.set_delay(one_way);
        let handed = Instant::now();
        held.into_iter().for_each(|guard| guard.unlock().unwrap());
        (waiters.into_iter())
            .map(|waiter| (handed, waiter.join().unwrap()))
            .collect::<Vec<_>>()
    });
    let mut wrong = Vec::new();
    for (handed, (name, returned, lost, token, at_redis, unlocked)) in outcomes {
        eprintln!(
            "{name}: returned {:.0} ms after the handoff, lost={lost}, token {token}, redis's \
             holder {at_redis:?}, unlock {:?}",
            ms(returned.duration_since(handed)),
            unlocked.as_ref().map_err(|err| err.kind())
        );
        if lost || at_redis != Some(token) || unlocked.is_err() {
            wrong.push(format!("{name}: lost={lost}, {unlocked:?}"));
        }
    }
    assert!(wrong.is_empty(), "guards returned already lost: {wrong:#?}");
}

/// A hold its client counted lost while its link is stalled (its lease
/// ran out with no renewal answered), unlocked while the link is still
/// stalled: the unlock says `LeaseLost` (the hold is gone; writes made
/// after its loss must be undone), as its documentation says of a hold
/// counted lost, not the release's own timeout, a `Connection` error that
/// reads as a hold not yet given back; an election's in its own words (its
/// leadership, its term, its resignation). What Redis still has of each is
/// given back once the link flows.
#[test]
fn an_unlock_of_a_hold_counted_lost_in_a_stall_says_its_lease_was_lost() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let name = "lost-in-a-stall";
    let guard = client.fair_mutex(name).lock().unwrap();
    let leadership = client.election(name).campaign().unwrap();
    let term = leadership.term();
    relay.stall();
    let lost = || guard.is_lease_lost() && leadership.is_lease_lost();
    assert!(
        wait_until(Duration::from_secs(5), lost),
        "counted lost in the stall"
    );
    let err = guard.unlock().expect_err("counted lost");
    let resigned = leadership.unlock().expect_err("counted lost");
    relay.resume();
    eprintln!("partitions: unlock of a hold counted lost in a stall: {err}");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    eprintln!("partitions: resignation of a leadership counted lost in a stall: {resigned}");
    assert_eq!(resigned.kind(), ErrorKind::LeaseLost, "{resigned}");
    let said = resigned.to_string();
    let leadership =
        format!("the leadership of election {name:?} (term {term}) was no longer held");
    assert!(said.contains(&leadership), "{said}");
    assert!(said.contains("its resignation failed too"), "{said}");
    assert!(
        !said.contains("token") && !said.contains(" release"),
        "{said}"
    );
    let other = server.client();
    let (mutex, election) = (other.fair_mutex(name), other.election(name));
    let free = || !mutex.is_locked().unwrap() && election.leader().unwrap().is_none();
    assert!(
        wait_until(Duration::from_secs(5), free),
        "given back once the link flows"
    );
}

/// The same with the release refused rather than cut off: Redis over its
/// `maxmemory` (`noeviction`) when the unlock of a hold of a fixed lease,
/// counted lost, is sent. `LeaseLost`, not the refusal (`Server`,
/// "try again once this passes", of a hold that is gone).
#[test]
fn an_unlock_of_a_hold_counted_lost_refused_for_memory_says_its_lease_was_lost() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client
        .fair_mutex("lost-and-refused")
        .with_fixed_lease(Duration::from_millis(500));
    let guard = mutex.lock().unwrap();
    server.set_eviction("1", "noeviction");
    let lost = wait_until(Duration::from_secs(5), || guard.is_lease_lost());
    let unlocked = guard.unlock();
    server.set_eviction("0", "noeviction");
    assert!(lost, "counted lost");
    let err = unlocked.expect_err("counted lost");
    eprintln!("partitions: unlock of a hold counted lost, refused for memory: {err}");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
}

/// A rwlock's hold its client counts lost while the call that changes its
/// access is held up by a stalled link (lease 1 s, renewals unanswered): a
/// write's `downgrade()` whose request gets no reply (command timeout 2 s),
/// and an `upgrade()` waiting for another client's read, which rides the
/// stall out for its patience (waiter timeout + connect timeout, 2 s). Each
/// says `LeaseLost`, as the unlock of a hold counted lost does (and as its
/// documentation says of a hold this client counted lost), naming what the
/// call met, not that call's `Connection` error, retryable, for a hold
/// already gone. What Redis still has is given back once the link flows.
#[test]
fn a_change_of_access_of_a_hold_counted_lost_in_a_stall_says_its_lease_was_lost() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(1))
        .waiter_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let other = server.client();
    let rwlock = |name: &str| client.fair_rwlock(name).unbound();
    let write = rwlock("lost-downgrading").write().unwrap();
    let read = other.fair_rwlock("lost-upgrading").read().unwrap();
    let upgradable = rwlock("lost-upgrading").upgradable_read().unwrap();
    let signals = [write.lease_signal(), upgradable.lease_signal()];
    let upgrading = thread::spawn(move || upgradable.upgrade().map(drop));
    let queued = || other.fair_rwlock("lost-upgrading").queue_len().unwrap() == 1;
    assert!(
        wait_until(Duration::from_secs(5), queued),
        "the claim waits"
    );
    relay.stall();
    let downgraded = write.downgrade().map(drop);
    let upgraded = join_within(upgrading, Duration::from_secs(10), "the upgrade");
    for signal in signals {
        assert_eq!(
            signal.ended(),
            Some(LeaseEnd::Lost),
            "counted lost in the stall"
        );
    }
    relay.resume();
    drop(read);
    for (what, got) in [("downgrade", downgraded), ("upgrade", upgraded)] {
        let err = got.expect_err("counted lost");
        eprintln!("partitions: {what} of a hold counted lost in a stall: {err}");
        assert_eq!(err.kind(), ErrorKind::LeaseLost, "{what}: {err}");
        assert!(!err.is_retryable(), "{what}: {err}");
        assert!(err.to_string().contains("failed too"), "{what}: {err}");
    }
    for name in ["lost-downgrading", "lost-upgrading"] {
        let rwlock = other.fair_rwlock(name);
        let free = || {
            let status = rwlock.status(1).unwrap();
            status.holder_count == 0 && status.queue_len == 0
        };
        assert!(
            wait_until(Duration::from_secs(5), free),
            "{name} given back"
        );
    }
}

/// A renewal over a slow link (300 ms each way) counts its lease from when
/// it was asked, not from its late reply: Redis's lease starts when the
/// script runs. The link is cut once a renewal has run and its reply came
/// back, before the next one is sent: the holder is counted lost before
/// Redis frees the lock (counted from the reply, it was still held here
/// once another could take the lock).
#[test]
fn a_renewal_answered_late_counts_from_its_ask() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_millis(1200))
        .build()
        .unwrap();
    let guard = client.fair_mutex("renewed-late").lock().unwrap();
    let mut conn = server.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*:lock:renewed-late")
        .query(&mut conn)
        .unwrap();
    let mut pttl = || -> i64 { redis::cmd("PTTL").arg(&keys[0]).query(&mut conn).unwrap() };
    relay.set_delay(Duration::from_millis(300));
    // A renewal runs (the key's TTL, lease and fence life, jumps up): its
    // reply is back 300 ms later,
    // the next renewal sent 400 ms after that.
    let mut last = pttl();
    let renewed = wait_until(Duration::from_secs(5), || {
        let now = pttl();
        std::mem::replace(&mut last, now) + 100 < now
    });
    assert!(renewed, "no renewal ran");
    thread::sleep(Duration::from_millis(500));
    relay.cut();
    let observer = server.client();
    let free = || {
        let status = observer.status(LockKind::Mutex, "renewed-late", 1);
        status.unwrap().holder().is_none()
    };
    assert!(wait_until(Duration::from_secs(5), free), "never freed");
    assert!(
        guard.is_lease_lost(),
        "still counted held once redis freed it"
    );
}

/// Redis holds writes back (`CLIENT PAUSE WRITE`) just after a watchdog
/// round, for 4.6 s, an outage shorter than the holds' lease (6 s): the
/// next round's renewals wait in the pause past their command timeout (2 s)
/// and fail (their connection given up, Redis never runs them). The holds
/// of every kind are kept: a renewal that failed for a hold whose count
/// would run out before the next round (a period later, after the count's
/// end here) is tried again soon, as a queued call's request is through an
/// outage, and the retry sent in the pause is answered when it ends, 1.4 s
/// before the count's end (0.7 s at half these figures failed once in a
/// CI run beside a CPU hog). (Before: the next round came a period after
/// the failed one, too late: every lease ran out, at Redis too, each guard
/// counted lost and its unlock `LeaseLost`.)
#[test]
fn holds_outlive_a_write_pause_that_outlasts_a_renewals_timeout_not_their_lease() {
    let server = RedisServer::start();
    let relay = Relay::recording(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(6))
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let take = |kind: Kind| {
        let name = format!("paused-{kind:?}");
        let wait = Wait::not_at_all();
        fairlock_test_support::take::<Bound>(&client, kind, &name, LeasePolicy::Client, wait)
            .unwrap()
            .expect("free")
    };
    let guards = [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write].map(take);
    let leadership = client.election("paused-election").campaign().unwrap();
    let multi = (client.fair_multi_lock(["paused-a"]))
        .and_permits("paused-b", 2, 1)
        .lock()
        .unwrap();
    let scripts = || {
        let sent = relay.sent();
        (sent.iter())
            .filter(|name| *name == "FCALL" || *name == "EVALSHA")
            .count()
    };
    // Just after the watchdog's round: its next comes a period (2 s) later.
    let taken = scripts();
    assert!(wait_until(Duration::from_secs(5), || scripts() > taken));
    let mut conn = server.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(4600)
        .arg("WRITE")
        .query(&mut conn)
        .unwrap();
    // Past the pause, the failed round's retry and the next full lease.
    thread::sleep(Duration::from_millis(7000));
    let lost = |lost: bool, what: &str| assert!(!lost, "{what} counted lost");
    guards
        .iter()
        .for_each(|guard| lost(guard.is_lease_lost(), "a guard"));
    lost(leadership.is_lease_lost(), "the leadership");
    lost(multi.is_lease_lost(), "the multi-lock");
    guards.into_iter().for_each(|guard| guard.unlock().unwrap());
    leadership.unlock().unwrap();
    multi.unlock().unwrap();
}

/// The client's holds and queue entries of `kind` on `name`, as Redis has
/// them: "held <token>" and "queued".
fn ours(observer: &Client, kind: Kind, name: &str, client: &Client) -> Vec<String> {
    let status = observer.status(kind.lock_kind(), name, 10).unwrap();
    let held = status
        .holders
        .iter()
        .map(|h| (&h.who, format!("held {}", h.fencing_token)));
    let queued = status
        .waiters
        .iter()
        .map(|w| (&w.who, "queued".to_string()));
    held.chain(queued)
        .filter(|(who, _)| who.client_id() == client.id())
        .map(|(_, what)| what)
        .collect()
}

/// A release whose reply is lost (the link cut while the reply is on its
/// way, 300 ms each way): Redis ran it and handed the lock to a waiter of
/// another client. The unlock fails (`Connection`: nothing is known), and
/// the client gives the release back by its call once the link heals; that
/// give-back, and any copy of the release, must not free the hold the
/// other client was handed since: it keeps it, the only holder, and its
/// unlock is `Ok`. Every kind, each on a relay of its own, at once.
#[test]
fn a_release_whose_reply_is_lost_frees_nobody_elses_hold() {
    every_exclusive_kind_at_once(release_with_a_lost_reply);
}

fn release_with_a_lost_reply(server: &RedisServer, kind: Kind) -> Option<String> {
    let name = format!("lost-release-{kind:?}");
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(10))
        .waiter_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let other = server.client();
    let observer = server.client();
    let guard = take::<Bound>(&client, kind, &name, LeasePolicy::Client, Wait::forever())
        .unwrap()
        .expect("free");
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let guard = take::<Unbound>(&other, kind, &name, LeasePolicy::Client, Wait::forever())
                .unwrap()
                .expect("handed over");
            (guard.fencing_token(), guard)
        });
        let queued = || {
            observer
                .status(kind.lock_kind(), &name, 10)
                .unwrap()
                .queue_len
                == 1
        };
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "{kind:?}: not queued"
        );
        relay.set_delay(Duration::from_millis(300));
        let cutter = s.spawn(|| {
            let ran = wait_until(Duration::from_secs(5), || {
                ours(&observer, kind, &name, &client).is_empty()
            });
            relay.cut();
            ran
        });
        let unlocked = guard.unlock();
        assert!(cutter.join().unwrap(), "{kind:?}: the release never ran");
        let (token, guard) = waiter.join().unwrap();
        relay.set_delay(Duration::ZERO);
        relay.heal();
        // The watchdog (period 333 ms) gives the failed release back.
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_millis(1200);
        while Instant::now() < deadline {
            let status = observer.status(kind.lock_kind(), &name, 10).unwrap();
            let holders: Vec<u64> = status.holders.iter().map(|h| h.fencing_token).collect();
            if holders != [token] {
                seen = holders;
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let lost = guard.is_lease_lost();
        let released = guard.unlock();
        eprintln!(
            "{kind:?}: unlock {unlocked:?}; the other's hold {token}: later holders {seen:?}, \
             lost={lost}, unlock {released:?}"
        );
        (!seen.is_empty() || lost || released.is_err()).then(|| {
            format!("{kind:?}: unlock {unlocked:?}; holders {seen:?} not [{token}], lost={lost}, {released:?}")
        })
    })
}

/// A timed wait whose leave is lost (its link stalled before its deadline,
/// then cut, the leave discarded): the wait returns by its deadline and a
/// leave's grace; its entry, left at Redis, is handed the lock by the
/// holder's release. Nobody takes that grant up, and the waiter behind must
/// hold it within the waiter timeout (1 s) of the entry's last heartbeat,
/// as a dead waiter's grant lasts no longer than its deadline, link still
/// cut; and, the link healed, it is given back by the client at once.
#[test]
fn a_grant_to_a_wait_whose_leave_was_lost_passes_on_within_the_waiter_timeout() {
    let server = RedisServer::start();
    let wrong: Vec<String> = thread::scope(|s| {
        let runs: Vec<_> = [
            (Kind::Mutex, false),
            (Kind::Semaphore, true),
            (Kind::Write, false),
        ]
        .into_iter()
        .map(|(kind, heal)| {
            let server = &server;
            s.spawn(move || leave_lost(server, kind, heal))
        })
        .collect();
        runs.into_iter()
            .filter_map(|run| run.join().unwrap())
            .collect()
    });
    assert!(wrong.is_empty(), "{wrong:#?}");
}

fn leave_lost(server: &RedisServer, kind: Kind, heal: bool) -> Option<String> {
    let name = format!("lost-leave-{kind:?}");
    let relay = Relay::start(server.port());
    let waiter_timeout = Duration::from_secs(1);
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(10))
        .waiter_timeout(waiter_timeout)
        .command_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let holder = server.client();
    // Told it heads the queue by its heartbeats, a period (333 ms) apart.
    let other = server
        .builder()
        .waiter_timeout(waiter_timeout)
        .build()
        .unwrap();
    let observer = server.client();
    let held = take::<Unbound>(&holder, kind, &name, LeasePolicy::Client, Wait::forever())
        .unwrap()
        .expect("free");
    let waits = || {
        observer
            .status(kind.lock_kind(), &name, 10)
            .unwrap()
            .queue_len
    };
    let wait = Duration::from_millis(600);
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let started = Instant::now();
            let got = take::<Bound>(&client, kind, &name, LeasePolicy::Client, wait).unwrap();
            (got.is_some(), started.elapsed())
        });
        assert!(wait_until(Duration::from_secs(5), || waits() == 1));
        let behind = s.spawn(|| {
            take::<Unbound>(&other, kind, &name, LeasePolicy::Client, Wait::forever())
                .unwrap()
                .map(|g| (Instant::now(), g))
        });
        assert!(wait_until(Duration::from_secs(5), || waits() == 2));
        thread::sleep(Duration::from_millis(300));
        relay.stall();
        let stalled = Instant::now();
        let (got, took) = waiter.join().unwrap();
        relay.cut();
        let still = ours(&observer, kind, &name, &client);
        held.unlock().unwrap();
        let released = Instant::now();
        if heal {
            relay.heal();
        }
        let (at, guard) = behind.join().unwrap().expect("waits for ever");
        let after_release = at - released;
        let after_stall = at - stalled;
        eprintln!(
            "{kind:?}: the wait returned {got} after {:.0} ms; left at redis {still:?}; the one \
             behind held {:.0} ms after the release, {:.0} ms after the stall (healed: {heal})",
            ms(took),
            ms(after_release),
            ms(after_stall)
        );
        guard.unlock().unwrap();
        // Healed: the client's next watchdog round gives the grant back.
        // Cut: the entry's deadline, a heartbeat before the stall, and the
        // heartbeat of the one behind that finds it heads the queue.
        let late = match heal {
            true => after_release > Duration::from_millis(700),
            false => after_stall > waiter_timeout + Duration::from_millis(700),
        };
        (got || took > wait + Duration::from_millis(150) || late).then(|| {
            format!(
                "{kind:?}: got {got} after {took:?}; held {after_release:?} after the release, \
                 {after_stall:?} after the stall (healed: {heal})"
            )
        })
    })
}

/// Each step of a call whose reply is lost with its connection (the relay
/// drops the reply and resets the connection: the request ran), so that
/// the call goes out again on another connection, a repeat Redis answers
/// as the call it already ran: a take of a free lock, a release with
/// nobody waiting, a release that hands over to another client's waiter,
/// a timed wait's leave, a handoff to this client's waiter (its grant
/// message lost: its subscription opened again), a rwlock's upgrade;
/// every kind. Each returns what it did (a guard, `Ok`, `None`), one hold
/// at a time at Redis, the fencing token of the hold Redis has, nothing
/// left queued.
#[test]
fn a_call_whose_reply_is_lost_with_its_connection_is_answered_as_it_ran() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url()).build().unwrap();
    let other = server.client();
    let observer = server.client();
    let holders = |kind: Kind, name: &str| -> Vec<(String, u64)> {
        let status = observer.status(kind.lock_kind(), name, 10).unwrap();
        let who = |h: &fairlock::Holder| h.who.client_id().to_string();
        status
            .holders
            .iter()
            .map(|h| (who(h), h.fencing_token))
            .collect()
    };
    let queue = |kind: Kind, name: &str| {
        observer
            .status(kind.lock_kind(), name, 10)
            .unwrap()
            .queue_len
    };
    let mut wrong = Vec::new();
    let forever = LeasePolicy::Client;
    for kind in Kind::EXCLUSIVE {
        let name = format!("lost-reply-{kind:?}");
        let me = client.id().to_string();
        // The connections are open first.
        take::<Bound>(&client, kind, &name, forever, Wait::forever())
            .unwrap()
            .unwrap()
            .unlock()
            .unwrap();

        // A take of a free lock.
        relay.lose_next_reply();
        let taken = take::<Bound>(&client, kind, &name, forever, Wait::forever());
        let guard = match taken {
            Ok(Some(guard)) if holders(kind, &name) == [(me.clone(), guard.fencing_token())] => {
                guard
            }
            other => {
                wrong.push(format!(
                    "{kind:?} take: {:?}, redis {:?}",
                    other.map(|g| g.map(|g| g.fencing_token())),
                    holders(kind, &name)
                ));
                continue;
            }
        };
        // A release with nobody waiting.
        relay.lose_next_reply();
        let released = guard.unlock();
        if released.is_err() || !holders(kind, &name).is_empty() {
            wrong.push(format!(
                "{kind:?} lone release: {released:?}, redis {:?}",
                holders(kind, &name)
            ));
        }
        // A release that hands over to another client's waiter.
        let guard = take::<Bound>(&client, kind, &name, forever, Wait::forever())
            .unwrap()
            .unwrap();
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                take::<Unbound>(&other, kind, &name, forever, Wait::forever())
                    .unwrap()
                    .unwrap()
            });
            assert!(wait_until(Duration::from_secs(5), || queue(kind, &name) == 1));
            relay.lose_next_reply();
            let released = guard.unlock();
            let theirs = waiter.join().unwrap();
            thread::sleep(Duration::from_millis(100));
            let redis = holders(kind, &name);
            let token = theirs.fencing_token();
            let lost = theirs.is_lease_lost();
            let unlocked = theirs.unlock();
            if released.is_err()
                || redis != [(other.id().to_string(), token)]
                || lost
                || unlocked.is_err()
            {
                wrong.push(format!("{kind:?} handover: {released:?}; redis {redis:?}, theirs {token} lost={lost} unlock {unlocked:?}"));
            }
        });
        // A timed wait's leave.
        let theirs = take::<Unbound>(&other, kind, &name, forever, Wait::forever())
            .unwrap()
            .unwrap();
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                take::<Bound>(&client, kind, &name, forever, Duration::from_millis(400))
                    .map(|g| g.map(|g| g.fencing_token()))
            });
            assert!(wait_until(Duration::from_secs(5), || queue(kind, &name) == 1));
            relay.lose_next_reply();
            let waited = waiter.join().unwrap();
            let queued = queue(kind, &name);
            if !matches!(waited, Ok(None)) || queued != 0 {
                wrong.push(format!("{kind:?} leave: {waited:?}, {queued} queued"));
            }
        });
        // A handoff to this client's waiter: its grant message (or the
        // reply that tells it) lost.
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                take::<Bound>(&client, kind, &name, forever, Duration::from_secs(3))
                    .map(|g| g.map(|g| (g.fencing_token(), g.is_lease_lost(), g.unlock())))
            });
            assert!(wait_until(Duration::from_secs(5), || queue(kind, &name) == 1));
            relay.lose_next_reply();
            theirs.unlock().unwrap();
            let got = waiter.join().unwrap();
            if !matches!(got, Ok(Some((_, false, Ok(()))))) {
                wrong.push(format!("{kind:?} handoff: {got:?}"));
            }
        });
        if kind == Kind::Write {
            // An upgrade.
            let lock = client.fair_rwlock(&name);
            let upgradable = lock.upgradable_read().unwrap();
            relay.lose_next_reply();
            let upgraded = upgradable.upgrade();
            let redis = holders(kind, &name);
            match upgraded {
                Ok(write) if redis == [(me.clone(), write.fencing_token())] => {
                    write.unlock().unwrap()
                }
                other => wrong.push(format!(
                    "upgrade: {:?}, redis {redis:?}",
                    other.map(|w| w.fencing_token())
                )),
            }
        }
    }
    // One reply lost at each step: 5 of each kind, and the upgrade.
    assert_eq!(relay.severed_connections(), 16, "replies lost");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The same for the other steps: an upgrade that queues behind another
/// client's read, a downgrade, an election's campaign handed over by a
/// resignation, and a multi-lock's take and release (each part's reply may
/// be the one lost).
#[test]
fn a_change_a_campaign_or_a_set_whose_reply_is_lost_with_its_connection_is_answered_as_it_ran() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url()).build().unwrap();
    let other = server.client();
    let observer = server.client();
    let me = client.id().to_string();
    let holders = |kind: LockKind, name: &str| -> Vec<(String, u64)> {
        let status = observer.status(kind, name, 10).unwrap();
        let who = |h: &fairlock::Holder| h.who.client_id().to_string();
        status
            .holders
            .iter()
            .map(|h| (who(h), h.fencing_token))
            .collect()
    };
    let queued = |kind: LockKind, name: &str| observer.status(kind, name, 10).unwrap().queue_len;
    let mut wrong = Vec::new();
    // Warm: the connections and subscription are open.
    client.fair_mutex("warm").lock().unwrap().unlock().unwrap();

    // An upgrade queued behind another client's read.
    let lock = client.fair_rwlock("upgrade");
    let upgradable = lock.upgradable_read().unwrap();
    let theirs = other.fair_rwlock("upgrade").unbound().read().unwrap();
    let got = thread::scope(|s| {
        s.spawn(|| {
            assert!(wait_until(Duration::from_secs(5), || queued(
                LockKind::RwLock,
                "upgrade"
            ) == 1));
            relay.lose_next_reply();
            theirs.unlock().unwrap();
        });
        upgradable.upgrade_with(Duration::from_secs(3)).map(|r| {
            r.map(|w| (w.fencing_token(), w.is_lease_lost(), w.unlock()))
                .map_err(drop)
        })
    });
    if !matches!(got, Ok(Ok((_, false, Ok(()))))) {
        wrong.push(format!("queued upgrade: {got:?}"));
    }
    // A downgrade.
    let write = lock.write().unwrap();
    relay.lose_next_reply();
    match write.downgrade() {
        Ok(read)
            if holders(LockKind::RwLock, "upgrade") == [(me.clone(), read.fencing_token())] =>
        {
            read.unlock().unwrap()
        }
        other => wrong.push(format!(
            "downgrade: {:?}, redis {:?}",
            other.map(|r| r.fencing_token()),
            holders(LockKind::RwLock, "upgrade")
        )),
    }
    // A campaign handed over by the leader's resignation.
    let leading = other.election("elect").campaign().unwrap();
    thread::scope(|s| {
        let candidate = s.spawn(|| {
            client
                .election("elect")
                .try_campaign_for(Duration::from_secs(3))
                .map(|l| l.map(|l| (l.fencing_token(), l.is_lease_lost(), l.unlock())))
        });
        assert!(wait_until(Duration::from_secs(5), || queued(
            LockKind::Election,
            "elect"
        ) == 1));
        relay.lose_next_reply();
        leading.unlock().unwrap();
        let got = candidate.join().unwrap();
        if !matches!(got, Ok(Some((_, false, Ok(()))))) {
            wrong.push(format!("campaign: {got:?}"));
        }
    });
    // A multi-lock's take and release, each part's reply lost in turn.
    let names = ["set-a", "set-b", "set-c"];
    for lost in 0..names.len() {
        let set = client.fair_multi_lock(names);
        // The lost reply is the `lost`th part's (each part's request waits
        // for the reply before).
        relay.lose_reply_after(lost as u64);
        let got = set.lock();
        let redis: Vec<_> = names.iter().map(|n| holders(LockKind::Mutex, n)).collect();
        let expected: Option<Vec<_>> = got.as_ref().ok().map(|g| {
            names
                .iter()
                .map(|n| vec![(me.clone(), g.fencing_token(n).unwrap())])
                .collect()
        });
        if expected.as_ref() != Some(&redis) {
            wrong.push(format!(
                "set take, part {lost} lost: {:?}, redis {redis:?}",
                got.as_ref().map(|_| ())
            ));
        }
        let Ok(guard) = got else { continue };
        relay.lose_reply_after(lost as u64);
        let released = guard.unlock();
        let redis: Vec<_> = names.iter().map(|n| holders(LockKind::Mutex, n)).collect();
        if released.is_err() || redis.iter().any(|h| !h.is_empty()) {
            wrong.push(format!("set release: {released:?}, redis {redis:?}"));
        }
    }
    // One reply lost at each step: 3, and a take and a release of each part.
    assert_eq!(relay.severed_connections(), 9, "replies lost");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A server whose replies stop during a client's start (a one-way
/// partition from one of the start's requests on: the request arrives, its
/// reply is held back), each request in turn: `build` fails with
/// `Connection` within its timeouts, and its message says what the start
/// was doing and names the server, as the start's errors do. (Before, a
/// start held up at its `INFO memory` said only "redis call timed out".)
#[test]
fn a_start_whose_replies_stop_at_any_step_says_where_and_keeps_its_timeouts() {
    let server = RedisServer::start();
    let (connect, command) = (Duration::from_millis(300), Duration::from_millis(300));
    // The start's requests, its scripts loaded (as for every start below).
    drop(server.client());
    let relay = Relay::recording(server.port());
    let (steps, client) = relay.during(|| Client::builder(&relay.url()).build().unwrap());
    drop(client);
    let start_held_at = |step: usize| {
        let relay = Relay::recording(server.port());
        relay.set_delay(Duration::from_millis(25));
        let done = std::sync::atomic::AtomicBool::new(false);
        thread::scope(|s| {
            let stall = s.spawn(|| {
                let sent = || relay.sent().len() > step;
                wait_until(Duration::from_secs(5), || sent() || done.load(SeqCst));
                sent().then(|| {
                    relay.stall_replies();
                    Instant::now()
                })
            });
            let built = Client::builder(&relay.url())
                .connect_timeout(connect)
                .command_timeout(command)
                .build();
            done.store(true, SeqCst);
            let stalled = stall.join().unwrap().expect("the start sent its requests");
            let (took, url) = (stalled.elapsed(), relay.url());
            relay.resume();
            (built.map(drop), took, url)
        })
    };
    let wrong: Vec<String> = thread::scope(|s| {
        let runs: Vec<_> = (0..steps.len())
            .map(|step| s.spawn(move || start_held_at(step)))
            .collect();
        let ends = runs.into_iter().map(|run| run.join().unwrap());
        let wrong = steps
            .iter()
            .zip(ends)
            .filter_map(|(what, (built, took, url))| {
                eprintln!(
                    "replies held from {what} on: {built:?} {:.0} ms later",
                    ms(took)
                );
                // The subscription is waited for a connection and a reply.
                let late = took > connect + command + Duration::from_millis(200);
                match built {
                    Err(err) if err.is_connection() && err.to_string().contains(&url) && !late => {
                        None
                    }
                    other => Some(format!("held at {what}: {other:?} after {took:?}")),
                }
            });
        wrong.collect()
    });
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A one-way partition of a holder: its requests reach Redis, the replies
/// never come back (renewals run, unconfirmed). The holder counts its lease
/// lost at its own end of it, before any other client's `lock()` returns;
/// its release, sent once it hears so, reaches Redis though its reply does
/// not, and the lock passes on at once (the renewals that still arrived
/// had kept it held for the guard). Every kind, at once.
#[test]
fn a_holder_whose_replies_are_lost_knows_first_and_its_release_passes_the_lock_on() {
    every_exclusive_kind_at_once(replies_lost_under_a_hold);
}

fn replies_lost_under_a_hold(server: &RedisServer, kind: Kind) -> Option<String> {
    let name = format!("replies-lost-{kind:?}");
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let other = server.client();
    let guard = take::<Bound>(&client, kind, &name, LeasePolicy::Client, Wait::forever())
        .unwrap()
        .expect("free");
    thread::scope(|s| {
        let taker = s.spawn(|| {
            let got = take::<Unbound>(
                &other,
                kind,
                &name,
                LeasePolicy::Client,
                Duration::from_secs(5),
            );
            (Instant::now(), got.map(|g| g.map(|g| g.fencing_token())))
        });
        let queued = || other.status(kind.lock_kind(), &name, 1).unwrap().queue_len == 1;
        assert!(
            wait_until(Duration::from_secs(5), queued),
            "{kind:?}: not queued"
        );
        relay.stall_replies();
        let stalled = Instant::now();
        let end = guard.lease_signal().wait();
        let told = Instant::now();
        let unlocked = guard.unlock();
        let (got_at, got) = taker.join().unwrap();
        relay.resume();
        eprintln!(
            "{kind:?}: {end:?} {:.0} ms after the stall, the other's lock {got:?} {:.1} ms after \
             that; unlock {unlocked:?}",
            ms(told - stalled),
            ms(got_at.saturating_duration_since(told))
        );
        let passed_on = got_at > told && got_at - told < Duration::from_millis(300);
        let lost = matches!(&unlocked, Err(err) if err.is_lease_lost());
        (end != LeaseEnd::Lost || !matches!(got, Ok(Some(_))) || !passed_on || !lost).then(|| {
            format!(
                "{kind:?}: {end:?}, the other's {got:?} {:?} after, unlock {unlocked:?}",
                got_at.checked_duration_since(told)
            )
        })
    })
}

/// A waiter's first request whose reply is lost with its connection (the
/// request ran: it is queued), on a link of 100 ms each way, so that
/// another client queues after it and before its repeat reaches Redis:
/// the repeat is answered as the call it already ran, its place kept, and
/// the waiters get the lock in their order of arrival, every kind.
#[test]
fn a_waiter_whose_first_reply_is_lost_keeps_its_place_ahead_of_a_later_one() {
    every_exclusive_kind_at_once(queued_with_a_lost_reply);
}

fn queued_with_a_lost_reply(server: &RedisServer, kind: Kind) -> Option<String> {
    let name = format!("lost-enqueue-{kind:?}");
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url()).build().unwrap();
    let (holder, other, observer) = (server.client(), server.client(), server.client());
    let forever = LeasePolicy::Client;
    // The client's connections and subscription are open first.
    let warm = take::<Bound>(&client, kind, &name, forever, Wait::forever());
    warm.unwrap().expect("free").unlock().unwrap();
    let held = take::<Unbound>(&holder, kind, &name, forever, Wait::forever());
    let held = held.unwrap().expect("free");
    let queue = || observer.status(kind.lock_kind(), &name, 10).unwrap();
    relay.set_delay(Duration::from_millis(100));
    relay.lose_next_reply();
    let wait = Duration::from_secs(5);
    thread::scope(|s| {
        let first = s.spawn(|| {
            take::<Bound>(&client, kind, &name, forever, wait)
                .map(|g| g.map(|g| (g.fencing_token(), g.unlock().is_ok())))
        });
        assert!(
            wait_until(wait, || queue().queue_len == 1),
            "{kind:?}: not queued"
        );
        let later = s.spawn(|| {
            take::<Unbound>(&other, kind, &name, forever, wait)
                .map(|g| g.map(|g| (g.fencing_token(), g.unlock().is_ok())))
        });
        assert!(
            wait_until(wait, || queue().queue_len == 2),
            "{kind:?}: not queued"
        );
        // The repeat has reached Redis.
        thread::sleep(Duration::from_millis(300));
        let order: Vec<bool> = (queue().waiters.iter())
            .map(|w| w.who.client_id() == client.id())
            .collect();
        held.unlock().unwrap();
        let (first, later) = (first.join().unwrap(), later.join().unwrap());
        let lost = relay.severed_connections();
        eprintln!("{kind:?}: queued first: {order:?}; the first {first:?}, the later {later:?}");
        let in_order = match (&first, &later) {
            (Ok(Some((a, true))), Ok(Some((b, true)))) => a < b,
            _ => false,
        };
        (order != [true, false] || !in_order || lost != 1).then(|| {
            format!("{kind:?}: queue {order:?}, {first:?}, then {later:?}; {lost} replies lost")
        })
    })
}

/// Runs `run` for every exclusive kind at once, each on a thread of its
/// own beside one server, and asserts that none said what went wrong.
fn every_exclusive_kind_at_once(run: fn(&RedisServer, Kind) -> Option<String>) {
    let server = RedisServer::start();
    let wrong: Vec<String> = thread::scope(|s| {
        let runs: Vec<_> = (Kind::EXCLUSIVE.into_iter())
            .map(|kind| {
                let server = &server;
                s.spawn(move || run(server, kind))
            })
            .collect();
        (runs.into_iter())
            .filter_map(|run| run.join().unwrap())
            .collect()
    });
    assert!(wrong.is_empty(), "{wrong:#?}");
}
