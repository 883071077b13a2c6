//! `lock_with(Wait::... .cancelled_by(&canceller))`: another thread ends a
//! wait; the queue entry goes with it.

use std::time::{Duration, Instant};

use fairlock::{Client, Wait, WaitCanceller};
use fairlock_test_support::relay::Relay;
use fairlock_test_support::{join_within, ms, pause_clients, wait_until, RedisServer};

#[test]
fn a_cancelled_wait_leaves_the_queue_at_once_and_keeps_its_place_until_then() {
    let server = RedisServer::start();
    let holder = server.client();
    let mutex = holder.fair_mutex("c");
    let held = mutex.lock().unwrap();

    let cancel = WaitCanceller::new();
    let waiter = server.client();
    let (c, m) = (cancel.clone(), waiter.fair_mutex("c"));
    let blocked = std::thread::spawn(move || {
        m.lock_with(Wait::forever().cancelled_by(&c))
            .unwrap()
            .is_some()
    });
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    // Stays queued, in place, across watchdog rounds (waiter timeout is 1 s).
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(mutex.queue_len().unwrap(), 1);

    let cancelled = Instant::now();
    cancel.cancel();
    assert!(!join_within(
        blocked,
        Duration::from_secs(5),
        "cancelled wait"
    ));
    assert!(
        cancelled.elapsed() < Duration::from_millis(500),
        "{:?}",
        cancelled.elapsed()
    );
    assert_eq!(mutex.queue_len().unwrap(), 0, "left the queue");
    held.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap(), "nobody was handed the lock");

    // Cancelling is final: a later wait with it does not queue.
    let _held = mutex.lock().unwrap();
    assert!(waiter
        .fair_mutex("c")
        .lock_with(Wait::forever().cancelled_by(&cancel))
        .unwrap()
        .is_none());
    assert_eq!(mutex.queue_len().unwrap(), 0);
}

#[test]
fn a_cancellable_wait_still_gets_the_lock_and_honours_its_timeout() {
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client.fair_mutex("t");
    let cancel = WaitCanceller::new();
    let guard = mutex
        .lock_with(Wait::forever().cancelled_by(&cancel))
        .unwrap()
        .expect("free");
    let other = server.client();
    let started = Instant::now();
    let got = other
        .fair_mutex("t")
        .lock_with(Wait::at_most(Duration::from_millis(200)).cancelled_by(&cancel))
        .unwrap();
    assert!(got.is_none());
    assert!(started.elapsed() >= Duration::from_millis(200));
    drop(guard);
}

/// A wait cancelled while Redis holds writes back (a stalled server)
/// ends as one whose deadline passes in the same stall does: `Ok(None)`
/// within the leave's 50 ms grace (a cancel is the deadline come early),
/// its queue entry given back once Redis runs again.
#[test]
fn a_wait_cancelled_while_redis_stalls_returns_none_and_leaves_no_entry() {
    let server = RedisServer::start();
    let holder = server.client();
    let mutex = holder.fair_mutex("cancel-stall");
    let held = mutex.lock().unwrap();
    let cancel = WaitCanceller::new();
    let waiter = (server.builder())
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let (c, m) = (cancel.clone(), waiter.fair_mutex("cancel-stall"));
    let blocked = std::thread::spawn(move || {
        let got = m.lock_with(Wait::forever().cancelled_by(&c));
        (got.map(|guard| guard.is_some()), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));

    let pause = Duration::from_millis(1000);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    let cancelled = Instant::now();
    cancel.cancel();
    let (got, returned) = join_within(blocked, Duration::from_secs(5), "cancelled wait");
    let took = returned - cancelled;
    eprintln!(
        "cancel: a wait cancelled in a stall returned {got:?} after {:.0} ms",
        ms(took)
    );
    assert!(
        matches!(got, Ok(false)),
        "a cancelled wait in a stall: {got:?}"
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    // Once writes resume, the entry it left is given back.
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 0));
    eprintln!(
        "cancel: its entry gone {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
    held.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap(), "nobody was handed the lock");
}

/// A cancel ends the wait's sleep at once, not a request it has in
/// flight: a waiter at the head of the queue polls when the holder's
/// fixed lease ends, here while Redis holds writes back, and is cancelled
/// once that poll waits at Redis; the wait returns `Ok(None)` when the
/// poll fails at its command timeout (2 s here), as `WaitCanceller`'s doc
/// says.
#[test]
fn a_cancel_with_a_request_in_flight_returns_once_that_request_is_over() {
    let server = RedisServer::start();
    let holder = server.client();
    let name = "cancel-in-flight";
    // The head polls when this lease ends, which must come after the pause
    // below: the lease outlasts what the setup (a client built, a waiter
    // queued) may take on a busy machine. At 500 ms, a setup kept off the
    // CPU longer had the poll go out before the pause, the waiter took the
    // lock and nothing was ever in flight ("the head never polled").
    let fixed = Duration::from_millis(1500);
    let held = holder
        .fair_mutex(name)
        .with_fixed_lease(fixed)
        .lock()
        .unwrap();
    let cancel = WaitCanceller::new();
    let command_timeout = Duration::from_secs(2);
    // No watchdog round for 10 s: the poll is the one request in flight.
    let waiter = (server.builder())
        .command_timeout(command_timeout)
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (c, m) = (cancel.clone(), waiter.fair_mutex(name));
    let blocked = std::thread::spawn(move || {
        let got = m.lock_with(Wait::forever().cancelled_by(&c));
        (got.map(|guard| guard.is_some()), Instant::now())
    });
    let mutex = holder.fair_mutex(name);
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    let mut conn = server.conn();
    // The poll, at the lease's end, waits at Redis for its command timeout,
    // within the pause: it ends at most `fixed + command_timeout` after
    // the pause began, a second before the pause does.
    let pause = fixed + command_timeout + Duration::from_secs(1);
    pause_clients(&mut conn, "WRITE", pause);
    assert!(
        !held.is_lease_lost(),
        "the setup outlasted the holder's fixed lease: the head may have polled before the pause"
    );
    let postponed = |conn: &mut redis::Connection| {
        let info: String = redis::cmd("INFO").arg("clients").query(conn).unwrap();
        let count = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"));
        count.is_some_and(|count| count.trim() != "0")
    };
    assert!(
        wait_until(fixed + Duration::from_secs(1), || postponed(&mut conn)),
        "the head never polled"
    );
    let cancelled = Instant::now();
    cancel.cancel();
    let (got, returned) = join_within(blocked, Duration::from_secs(10), "cancelled wait");
    let took = returned - cancelled;
    eprintln!(
        "cancel: a wait cancelled with its poll in flight in a stall returned {got:?} after \
         {:.0} ms (command timeout {command_timeout:?})",
        ms(took)
    );
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(
        took < command_timeout + Duration::from_millis(300),
        "{took:?}"
    );
    drop(held);
}

/// A wait cancelled as the lock is handed to it leaves the queue, and
/// Redis answers that it holds the lock instead. Over a link whose round
/// trip (36 ms here) outlasts what is left of a short lease (45 ms, less
/// the 18 ms the leave took to reach Redis) the hold is counted out by the
/// time that reply comes: the wait ends without it (`None`, the hold given
/// back), never with a guard lost from the start, as a grant or an attempt
/// counted out on arrival is never handed over. Three rounds: the cancel
/// follows the release at once, before the handoff's message (18 ms on
/// the way) can reach the waiter.
#[test]
fn a_cancel_answered_with_a_hold_counted_out_on_arrival_returns_none() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let name = "cancel-counted-out";
    let holder = server.client();
    let mutex = holder.fair_mutex(name);
    // Heartbeats every 15 ms: a fixed lease of 45 ms is not polled for.
    let lease = Duration::from_millis(45);
    let waiter = Client::builder(&relay.url()).lease(lease).build().unwrap();
    relay.set_delay(Duration::from_millis(18));
    for round in 0..3 {
        let held = mutex.lock().unwrap();
        let cancel = WaitCanceller::new();
        let m = waiter.fair_mutex(name).with_fixed_lease(lease);
        let c = cancel.clone();
        let blocked = std::thread::spawn(move || {
            let got = m.lock_with(Wait::forever().cancelled_by(&c));
            got.map(|guard| guard.map(|guard| guard.is_lease_lost()))
        });
        assert!(wait_until(Duration::from_secs(5), || mutex
            .queue_len()
            .unwrap()
            == 1));
        // Redis hands the lock to the waiter as it releases it.
        held.unlock().unwrap();
        let cancelled = Instant::now();
        cancel.cancel();
        let got = join_within(blocked, Duration::from_secs(5), "cancelled wait");
        eprintln!(
            "cancel: round {round}: a wait cancelled as it was handed the lock returned \
             {got:?} (Some(lost?)) after {:.0} ms",
            ms(cancelled.elapsed())
        );
        assert!(
            matches!(got, Ok(None) | Ok(Some(false))),
            "round {round}: a guard lost from the start: {got:?}"
        );
        // What it was handed goes back (or, taken, was released).
        assert!(
            wait_until(Duration::from_secs(5), || !mutex.is_locked().unwrap()),
            "round {round}: the lock stayed held"
        );
        assert_eq!(mutex.queue_len().unwrap(), 0, "round {round}");
    }
}

/// A wait that cannot wait at all (not at all, at most zero, until an
/// instant passed, or with its canceller cancelled already) makes one
/// attempt that never queues: `None` at once on a held lock, the lock when
/// it is free. A wait with time left waits, and a duration too long for an
/// `Instant` to hold is no limit (the wait does not end at once).
#[test]
fn a_wait_that_cannot_wait_makes_one_attempt_and_one_with_time_left_waits() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let cancelled = WaitCanceller::new();
    cancelled.cancel();
    let past = Instant::now() - Duration::from_millis(1);
    let cannot_wait = || {
        [
            Wait::not_at_all(),
            Wait::at_most(Duration::ZERO),
            Wait::until(past),
            Wait::forever().cancelled_by(&cancelled),
        ]
    };
    let mutex = waiter.fair_mutex("cannot-wait");
    for wait in cannot_wait() {
        let guard = mutex.lock_with(wait.clone()).unwrap();
        guard.expect("free: one attempt takes it").unlock().unwrap();
    }
    let held = holder.fair_mutex("cannot-wait").lock().unwrap();
    for wait in cannot_wait() {
        let started = Instant::now();
        assert!(mutex.lock_with(wait.clone()).unwrap().is_none(), "{wait:?}");
        assert!(started.elapsed() < Duration::from_secs(1), "{wait:?}");
        assert_eq!(mutex.queue_len().unwrap(), 0, "{wait:?}: never queued");
    }
    held.unlock().unwrap();
    // Time left: it waits, and gets the lock released meanwhile.
    for wait in [
        Wait::at_most(Duration::from_secs(5)),
        Wait::at_most(Duration::MAX),
    ] {
        let held = holder.fair_mutex("cannot-wait").unbound().lock().unwrap();
        let (releaser, started) = (Duration::from_millis(300), Instant::now());
        let release = std::thread::spawn(move || {
            std::thread::sleep(releaser);
            held.unlock().unwrap();
        });
        let guard = mutex.lock_with(wait.clone()).unwrap().expect("waited");
        assert!(started.elapsed() >= releaser, "{wait:?}");
        guard.unlock().unwrap();
        release.join().unwrap();
    }
}
