//! `lock_with(Wait::... .cancelled_by(&canceller))`: another thread ends a
//! wait; the queue entry goes with it.

use std::time::{Duration, Instant};

use fairlock::{Client, Unbound, Wait, WaitCanceller};
use fairlock_test_support::relay::Relay;
use fairlock_test_support::{
    join_within, ms, pause_clients, take, wait_until, BusyScript, Kind, LeasePolicy, RedisServer,
};

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

/// `holder` takes `name` with a `fixed` lease and a waiter of a client of
/// its own (with `command_timeout`, and no watchdog round for 10 s, so a
/// poll is its one request in flight) queues behind it, cancellable:
/// returns the hold, the canceller, the waiting thread (whether it got the
/// lock, and when it returned) and the holder's handle.
fn queued_behind_a_fixed_lease(
    server: &RedisServer,
    holder: &Client,
    name: &str,
    fixed: Duration,
    command_timeout: Duration,
) -> (
    fairlock::FairMutexGuard,
    WaitCanceller,
    std::thread::JoinHandle<(fairlock::Result<bool>, Instant)>,
    fairlock::FairMutex,
) {
    let held = holder
        .fair_mutex(name)
        .with_fixed_lease(fixed)
        .lock()
        .unwrap();
    let cancel = WaitCanceller::new();
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
    (held, cancel, blocked, mutex)
}

/// Whether a client's command waits at Redis (`CLIENT PAUSE` holds it).
fn postponed(conn: &mut redis::Connection) -> bool {
    let info: String = redis::cmd("INFO").arg("clients").query(conn).unwrap();
    let count = info
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"));
    count.is_some_and(|count| count.trim() != "0")
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
    let command_timeout = Duration::from_secs(2);
    let (held, cancel, blocked, _) =
        queued_behind_a_fixed_lease(&server, &holder, name, fixed, command_timeout);
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

/// The same with a pause shorter than the command timeout: the poll in
/// flight when the wait is cancelled is answered once the pause ends, and
/// it took the lock (the holder's fixed lease ran out). The wait returns
/// `Ok(None)` as `WaitCanceller` says, its leave giving that hold back, so
/// the lock is free with nobody queued. (Before, the wait returned the lock
/// 344 ms after its cancel.)
#[test]
fn a_cancel_with_a_poll_in_flight_that_takes_the_lock_gives_it_back() {
    let server = RedisServer::start();
    let holder = server.client();
    let name = "cancel-in-flight-taken";
    // As above: the poll at the lease's end comes after the pause began.
    let fixed = Duration::from_millis(1500);
    let (held, cancel, blocked, mutex) =
        queued_behind_a_fixed_lease(&server, &holder, name, fixed, Duration::from_secs(5));
    let mut conn = server.conn();
    // Ends a second after the lease: the poll then runs, and takes it.
    let pause = fixed + Duration::from_secs(1);
    let paused = pause_clients(&mut conn, "WRITE", pause);
    assert!(!held.is_lease_lost(), "the setup outlasted the lease");
    assert!(
        wait_until(fixed + Duration::from_millis(500), || postponed(&mut conn)),
        "the head never polled"
    );
    cancel.cancel();
    let (got, returned) = join_within(blocked, Duration::from_secs(10), "cancelled wait");
    let after_pause = returned.saturating_duration_since(paused + pause);
    eprintln!(
        "cancel: a wait cancelled with its poll in flight returned {got:?} {:.0} ms after the \
         pause",
        ms(after_pause)
    );
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(after_pause < Duration::from_millis(500), "{after_pause:?}");
    let status = mutex.status(1).unwrap();
    assert!(
        status.holder_count == 0 && status.queue_len == 0,
        "{status:?}"
    );
    drop(held);
}

/// A wait cancelled as the lock is handed to it, over a link whose round
/// trip (36 ms here) outlasts what is left of a short lease (45 ms, less
/// the 18 ms the leave took to reach Redis): the wait ends without the lock
/// (`None`: its leave gives back the hold it finds handed to its call),
/// never with a guard lost from the start, and the lock is free. Three
/// rounds: the cancel follows the release at once, before the handoff's
/// message (18 ms on the way) can reach the waiter. (Before a leave gave
/// the hold back, Redis answered it with the hold, counted out by the time
/// the reply came, and the client gave it back itself: that returned a lost
/// guard in every round.) Once, on a loaded machine, the grant's message
/// won the race and the waiting thread, kept from a core, returned its
/// guard 67 ms after the release, its lease counted out by then (the
/// leave's reply comes back 51-54 ms after the release here): one such
/// round is said and not counted, and a fourth is run; a second fails.
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
    let mut excused = None;
    for round in 0..4 {
        let held = mutex.lock().unwrap();
        let cancel = WaitCanceller::new();
        let m = waiter.fair_mutex(name).with_fixed_lease(lease);
        let c = cancel.clone();
        let blocked = std::thread::spawn(move || {
            let got = m.lock_with(Wait::forever().cancelled_by(&c));
            let lost = got.map(|guard| guard.map(|guard| guard.is_lease_lost()));
            (lost, Instant::now())
        });
        assert!(wait_until(Duration::from_secs(5), || mutex
            .queue_len()
            .unwrap()
            == 1));
        // Redis hands the lock to the waiter as it releases it.
        held.unlock().unwrap();
        let released = Instant::now();
        cancel.cancel();
        let (got, returned) = join_within(blocked, Duration::from_secs(5), "cancelled wait");
        let after = returned.saturating_duration_since(released);
        eprintln!(
            "cancel: round {round}: a wait cancelled as it was handed the lock returned \
             {got:?} (Some(lost?)) {:.0} ms after the release",
            ms(after)
        );
        if matches!(got, Ok(Some(true))) && excused.is_none() {
            eprintln!("cancel: round {round} not counted: its guard came back lost");
            excused = Some(round);
        } else {
            assert!(
                matches!(got, Ok(None) | Ok(Some(false))),
                "round {round}: a guard lost from the start: {got:?} (round {excused:?} too)"
            );
        }
        // What it was handed goes back (or, taken, was released).
        assert!(
            wait_until(Duration::from_secs(5), || !mutex.is_locked().unwrap()),
            "round {round}: the lock stayed held"
        );
        assert_eq!(mutex.queue_len().unwrap(), 0, "round {round}");
        if round == 2 && excused.is_none() {
            break;
        }
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

/// A wait that gives up while its client's link is stalled, its client
/// dropped before the link comes back, for each kind with one hold at a
/// time (a mutex, a one-permit semaphore, a rwlock's write): the leave it
/// sent reaches Redis only when the link resumes, after the lock was handed
/// to that very call meanwhile (here by its holder's release in the
/// stall). Nobody can take that hold any more, so the late leave gives it
/// back and the lock is free at once, not held for a full lease (30 s)
/// as when the leave kept it with its lease extended. The client goes while
/// its watchdog's heartbeat waits in the stall (command timeout 1 s), so it
/// sends no abandon after it: the leave is what Redis gets (with that
/// heartbeat, which finds the call handed the lock too).
#[test]
fn a_leave_a_stalled_link_delivers_after_a_handoff_frees_the_lock_at_once() {
    use fairlock::Bound;
    use fairlock_test_support::fake_queue::wait_for_a_heartbeat;
    use fairlock_test_support::{take, Kind, LeasePolicy};

    let server = RedisServer::start();
    // A holder whose lease (renewed) outlasts the test: its waiter, at the
    // head, has no poll to send before it (one in flight when the wait
    // ends is another late copy, which Redis may run after the leave).
    let other = server
        .builder()
        .lease(Duration::from_secs(30))
        .build()
        .unwrap();
    for kind in Kind::EXCLUSIVE {
        let name = format!("late-leave-{kind:?}");
        let relay = Relay::recording(server.port());
        // Heartbeats every 1.67 s (a third of the waiter timeout); a grant
        // capped at the waiter's liveness deadline lasts up to 5 s.
        let command_timeout = Duration::from_secs(1);
        let client = Client::builder(&relay.url())
            .command_timeout(command_timeout)
            .waiter_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let busy = take::<Bound>(&other, kind, &name, LeasePolicy::Client, Wait::forever())
            .unwrap()
            .expect("free");
        let cancel = WaitCanceller::new();
        let waiting = {
            let (client, name, cancel) = (client.clone(), name.clone(), cancel.clone());
            std::thread::spawn(move || {
                let wait = Wait::forever().cancelled_by(&cancel);
                take::<Bound>(&client, kind, &name, LeasePolicy::Client, wait)
                    .map(|got| got.is_some())
            })
        };
        // Heartbeated once: its client had the reply that queued it.
        wait_for_a_heartbeat(&server, kind.lock_kind(), &name);
        relay.stall();
        // The next heartbeat waits in the stall: the watchdog's round is
        // held for a command timeout from now.
        let scripts = |sent: Vec<String>| {
            (sent.iter())
                .filter(|name| *name == "FCALL" || *name == "EVALSHA")
                .count()
        };
        let before = scripts(relay.sent());
        let held = wait_until(Duration::from_secs(5), || scripts(relay.sent()) > before);
        assert!(held, "{kind:?}: a heartbeat in the stall");
        let stuck = Instant::now();
        cancel.cancel();
        let got = join_within(waiting, Duration::from_secs(5), "the cancelled wait");
        let returned = stuck.elapsed();
        assert!(matches!(got, Ok(false)), "{kind:?}: {got:?}");
        // The holder lets go: the lock goes to the call that left.
        drop(busy);
        let status = other.status(kind.lock_kind(), &name, 1).unwrap();
        assert_eq!(
            status.holder_count, 1,
            "{kind:?}: handed to the call that left: {status:?}"
        );
        let dropping = Instant::now();
        drop(client);
        let dropped = dropping.elapsed();
        let in_round = stuck.elapsed();
        relay.resume();
        let resumed = Instant::now();
        let free = wait_until(Duration::from_secs(10), || {
            let status = other.status(kind.lock_kind(), &name, 1).unwrap();
            status.holder_count == 0 && status.queue_len == 0
        });
        let took = resumed.elapsed();
        eprintln!(
            "cancel: {kind:?}: a late leave after a handoff: free {:.0} ms after the link resumed \
             (the wait returned {:.0} ms and the client was dropped {:.0} ms after the \
             heartbeat stalled, in {:.0} ms)",
            ms(took),
            ms(returned),
            ms(in_round - dropped),
            ms(dropped)
        );
        let status = other.status(kind.lock_kind(), &name, 1).unwrap();
        assert!(
            free,
            "{kind:?}: held 10 s after the link resumed: {status:?}"
        );
        // About one command timeout, as the abandon of a call whose client
        // stays would take; the leave itself frees it at once.
        assert!(
            took < command_timeout + Duration::from_millis(500),
            "{kind:?}: {took:?}"
        );
    }
}

/// `WaitCanceller`'s own example: a worker takes the lock in a loop with
/// one cancellable wait until a shutdown cancels it. With nobody else
/// using the lock, the loop must still end soon after the cancel: a
/// cancelled wait makes one attempt that never queues, and on a free lock
/// that attempt takes it, so the example's loop, which stopped only on
/// `None`, ran one job after another after the cancel, never stopping
/// (cut here at 2 000 jobs); it checks `is_cancelled` now.
#[test]
fn the_cancellers_example_worker_stops_after_a_cancel_on_a_free_lock() {
    let server = RedisServer::start();
    let client = server.client();
    let shutdown = WaitCanceller::new();
    let cancelled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (mutex, shutdown) = (client.fair_mutex("worker"), shutdown.clone());
        let cancelled = std::sync::Arc::clone(&cancelled);
        std::thread::spawn(move || -> fairlock::Result<usize> {
            let mut after_cancel = 0;
            // As the example writes it.
            let wait = Wait::forever().cancelled_by(&shutdown);
            while !shutdown.is_cancelled() {
                let Some(guard) = mutex.lock_with(wait.clone())? else {
                    break;
                };
                // ... one job under the lock ...
                if cancelled.load(std::sync::atomic::Ordering::SeqCst) {
                    after_cancel += 1;
                    if after_cancel == 2_000 {
                        break;
                    }
                }
                drop(guard);
            }
            Ok(after_cancel)
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
    shutdown.cancel();
    let after_cancel = join_within(worker, Duration::from_secs(30), "the worker").unwrap();
    assert!(
        after_cancel <= 1,
        "the worker ran {after_cancel} jobs after its shutdown was cancelled"
    );
}

/// Eight threads of one client queued behind another client's hold, one
/// canceller for all: cancelled, and only then the hold released, so the
/// lock is handed to the first of them after every wait was cancelled.
/// Every wait returns `None` and the lock is left free with nobody queued,
/// whichever thread runs first: a waiter whose thread had not run since
/// the cancel when its grant came returned the lock (1 round in 20 on a
/// 2-core machine), as its sleep looked for a grant before a cancel.
#[test]
fn waits_cancelled_before_the_lock_is_handed_over_all_return_none() {
    let server = RedisServer::start();
    let (holder, client) = (server.client(), server.client());
    for round in 0..20 {
        let name = format!("cancelled-then-released-{round}");
        let mutex = holder.fair_mutex(&name);
        let held = mutex.lock().unwrap();
        let cancel = WaitCanceller::new();
        let waiting: Vec<_> = (0..8)
            .map(|_| {
                let (m, c) = (client.fair_mutex(&name), cancel.clone());
                std::thread::spawn(move || {
                    let got = m.lock_with(Wait::forever().cancelled_by(&c));
                    got.map(|guard| guard.is_some())
                })
            })
            .collect();
        assert!(wait_until(Duration::from_secs(5), || mutex
            .queue_len()
            .unwrap()
            == 8));
        cancel.cancel();
        held.unlock().unwrap();
        let got: Vec<bool> = (waiting.into_iter())
            .map(|w| join_within(w, Duration::from_secs(5), "a cancelled wait"))
            .map(Result::unwrap)
            .collect();
        assert!(
            got.iter().all(|held| !held),
            "round {round}: a wait cancelled before the handoff returned the lock: {got:?}"
        );
        assert!(wait_until(Duration::from_secs(5), || {
            let status = mutex.status(1).unwrap();
            status.holder_count == 0 && status.queue_len == 0
        }));
    }
}

/// For each kind whose hold excludes others (a mutex, a one-permit
/// semaphore, a rwlock's write), a cancel that races the handoff: the
/// waiter's canceller is cancelled from 0 to 1.5 ms after the holder's
/// release, so that it lands before the release, while its handoff is in
/// flight, as the grant arrives, and after. Each wait returns the lock or
/// `None`, and either way nothing is left: the lock is free with nobody
/// queued once a returned guard is released.
#[test]
fn a_cancel_racing_the_handoff_leaves_the_lock_held_by_the_returned_guard_or_free() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    for kind in Kind::EXCLUSIVE {
        for round in 0..16u64 {
            let name = format!("racing-{kind:?}-{round}");
            let held = take::<Unbound>(&holder, kind, &name, LeasePolicy::Client, Wait::forever());
            let held = held.unwrap().expect("free");
            let cancel = WaitCanceller::new();
            let (c, w, n) = (cancel.clone(), waiter.clone(), name.clone());
            let waiting = std::thread::spawn(move || {
                let wait = Wait::forever().cancelled_by(&c);
                take::<Unbound>(&w, kind, &n, LeasePolicy::Client, wait)
            });
            let kind_name = kind.lock_kind();
            let queued = || holder.status(kind_name, &name, 1).unwrap().queue_len == 1;
            assert!(wait_until(Duration::from_secs(5), queued));
            held.unlock().unwrap();
            let spin = Instant::now() + Duration::from_micros(round * 100);
            while Instant::now() < spin {}
            cancel.cancel();
            let got = join_within(waiting, Duration::from_secs(5), "a cancelled wait").unwrap();
            if let Some(guard) = got {
                guard.unlock().unwrap();
            }
            let status = holder.status(kind_name, &name, 1).unwrap();
            assert_eq!(
                (status.holder_count, status.queue_len),
                (0, 0),
                "{kind:?} round {round}: left behind"
            );
        }
    }
}

/// A cancel with the wait's first request in flight (here held at Redis by
/// a pause of writes longer than the 1 s command timeout): as a deadline
/// that passes then, it fails the call when that request does
/// (`Connection`, "no reply within"), since nothing is known of the lock,
/// not `Ok(None)` as `WaitCanceller`'s doc said of every cancel; and once
/// Redis runs the request, the client abandons what it queued or took.
#[test]
fn a_cancel_with_the_first_request_in_flight_fails_when_that_request_does() {
    let server = RedisServer::start();
    let client = (server.builder())
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let mutex = client.fair_mutex("first-in-flight");
    let cancel = WaitCanceller::new();
    let (c, m) = (cancel.clone(), mutex.clone());
    let mut conn = server.conn();
    pause_clients(&mut conn, "WRITE", Duration::from_millis(1500));
    let started = Instant::now();
    let waiting = std::thread::spawn(move || {
        m.lock_with(Wait::forever().cancelled_by(&c))
            .map(|guard| guard.is_some())
    });
    assert!(wait_until(Duration::from_secs(1), || postponed(&mut conn)));
    cancel.cancel();
    let err = join_within(waiting, Duration::from_secs(3), "a cancelled wait")
        .map(|_| ())
        .expect_err("the first request had no reply");
    assert_eq!(err.kind(), fairlock::ErrorKind::Connection, "{err}");
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1400), "{took:?}: {err}");
    assert!(wait_until(Duration::from_secs(5), || {
        let status = mutex.status(1).unwrap();
        status.holder_count == 0 && status.queue_len == 0
    }));
}

/// A wait given two cancellers (a caller's shutdown, and one of its own
/// that a library function adds) is ended by either, as
/// `Wait::cancelled_by` says ("the same wait, also ended by"): here the
/// first one given ends it, then the second on another wait. The second
/// canceller replaced the first, which no longer ended the wait.
#[test]
fn a_wait_given_two_cancellers_is_ended_by_either() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    let held = holder.fair_mutex("two-cancellers").lock().unwrap();
    for first in [true, false] {
        let (a, b) = (WaitCanceller::new(), WaitCanceller::new());
        let wait = Wait::forever().cancelled_by(&a).cancelled_by(&b);
        let m = waiter.fair_mutex("two-cancellers");
        let waiting = std::thread::spawn(move || m.lock_with(wait).map(|g| g.is_some()));
        assert!(wait_until(Duration::from_secs(5), || {
            holder.fair_mutex("two-cancellers").queue_len().unwrap() == 1
        }));
        let (cancel, other) = if first { (&a, &b) } else { (&b, &a) };
        cancel.cancel();
        let ended = wait_until(Duration::from_secs(2), || waiting.is_finished());
        other.cancel(); // lets the thread go either way
        let got = join_within(waiting, Duration::from_secs(5), "a cancelled wait");
        assert!(
            ended,
            "cancelling the {} canceller did not end the wait",
            ["second", "first"][first as usize]
        );
        assert!(!got.unwrap());
    }
    held.unlock().unwrap();
}

/// A wait whose deadline comes while the server runs someone's long
/// script past its `lua-time-limit` (every call answered `BUSY`): its
/// leave is refused, as a stalled server's would go unanswered, so it
/// ends by its deadline empty, `Ok(None)`, as one whose leave a stall
/// holds (before: `Connection`, "redis is busy running a script", though
/// its entry stayed queued); once the script is killed, the watchdog
/// gives the entry back, and the lock passes to nobody's ghost.
#[test]
fn a_wait_whose_leave_meets_a_busy_server_ends_empty_and_its_entry_is_given_back() {
    let server = RedisServer::start();
    let holder = server.client();
    let mutex = holder.fair_mutex("busy-leave");
    let held = mutex.lock().unwrap();
    let waiter = server.client();
    let wait = Duration::from_millis(800);
    let started = Instant::now();
    let waiting = {
        let mutex = waiter.fair_mutex("busy-leave");
        std::thread::spawn(move || mutex.try_lock_for(wait).map(|got| got.is_none()))
    };
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    let mut busy = BusyScript::start(&server);
    let ended = join_within(waiting, Duration::from_secs(5), "the wait");
    let took = started.elapsed();
    assert!(busy.is_refusing(), "the script ended before the wait did");
    busy.kill();
    let left = wait_until(Duration::from_secs(3), || mutex.queue_len().unwrap() == 0);
    eprintln!("cancel: a wait's leave met BUSY: {ended:?} after {took:?}; entry given back {left}");
    assert_eq!(ended.map_err(|e| e.to_string()), Ok(true));
    assert!(took < wait + Duration::from_millis(500), "{took:?}");
    assert!(left, "the entry stayed queued");
    held.unlock().unwrap();
}
