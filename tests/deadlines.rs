//! A deadline is a deadline: a timed wait returns by it, plus a bound the
//! library states (`LEAVE_GRACE` and a request's `REPLY_GRACE`, 50 ms each,
//! the leave that ends a wait given two round trips of its link more),
//! whatever the server does. Here the server is stopped by a real
//! `SIGSTOP` for longer than the waits and than the command timeout: waits
//! of every kind queued before the stall come back by their deadline with
//! nothing, ones that start during it (shorter than the command timeout)
//! by their deadline with `Connection` (before: 4.5 s for a 2 s wait
//! stalled 3 s, and the lock itself 1.8 s late when the stall ended first),
//! an unlock comes back by the command timeout saying "no reply within",
//! and once the server runs again, nothing the stalled calls left in its
//! queues stays there.

use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Client, Unbound};
use fairlock_test_support::*;

/// What a timed wait may take past its deadline here: the library's 50 ms
/// and 50 ms, and room for a busy machine.
const OVER: Duration = Duration::from_millis(400);
/// The waits' own timeout.
const WAIT: Duration = Duration::from_secs(2);
/// The waits started during the stall: shorter than the command timeout.
const SHORT_WAIT: Duration = Duration::from_millis(500);
/// The client's command timeout: shorter than the stall.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(1);

/// A server stopped by `SIGSTOP` until dropped (or `resume`d).
struct Stopped {
    pid: u32,
    running: bool,
}

impl Stopped {
    fn stop(server: &RedisServer) -> Stopped {
        let pid = server.pid().expect("the server's pid");
        send_signal(pid, "STOP");
        Stopped {
            pid,
            running: false,
        }
    }

    fn resume(&mut self) {
        if !self.running {
            send_signal(self.pid, "CONT");
            self.running = true;
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.resume();
    }
}

fn client(server: &RedisServer) -> Client {
    server
        .builder()
        .lease(Duration::from_secs(10))
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap()
}

/// A wait of `wait` on `kind`'s lock `name` on its own thread: how long
/// it took and whether it got the lock (or the error's kind).
fn timed_wait(
    client: &Client,
    kind: Kind,
    name: &str,
    wait: Duration,
) -> thread::JoinHandle<(Duration, Result<bool, fairlock::ErrorKind>)> {
    let (client, name) = (client.clone(), name.to_owned());
    thread::spawn(move || {
        let started = Instant::now();
        let got = take::<Unbound>(&client, kind, &name, LeasePolicy::Client, wait);
        let took = started.elapsed();
        (
            took,
            got.map(|guard| guard.is_some()).map_err(|err| err.kind()),
        )
    })
}

#[test]
fn timed_waits_and_unlocks_keep_their_deadlines_while_the_server_is_stopped() {
    let _serial = serial();
    let server = RedisServer::start();
    let holders = client(&server);
    let waiters = client(&server);
    let mut held = Vec::new();
    let mut queued = Vec::new();
    for kind in Kind::EXCLUSIVE {
        let name = format!("stalled-{kind:?}");
        let guard = take::<Unbound>(&holders, kind, &name, LeasePolicy::Client, WAIT)
            .unwrap()
            .expect("free");
        held.push(guard);
        queued.push((kind, name.clone(), timed_wait(&waiters, kind, &name, WAIT)));
    }
    // Every waiter queued before the stall.
    for kind in Kind::EXCLUSIVE {
        let name = format!("stalled-{kind:?}");
        assert!(
            wait_until(Duration::from_secs(5), || {
                waiters
                    .status(kind.lock_kind(), &name, 4)
                    .unwrap()
                    .queue_len
                    == 1
            }),
            "{kind:?}: the waiter queued"
        );
    }
    let stall_started = Instant::now();
    let mut stopped = Stopped::stop(&server);
    // Waits that start during the stall, shorter than the command timeout:
    // their first request has no reply by their deadline, and they fail as
    // a first request does when Redis cannot be had (`Connection`, "no
    // reply within"), by their deadline.
    let during: Vec<_> = Kind::EXCLUSIVE
        .into_iter()
        .map(|kind| {
            let name = format!("during-{kind:?}");
            (kind, timed_wait(&waiters, kind, &name, SHORT_WAIT))
        })
        .collect();
    // A holder's unlock during the stall.
    let unlocking = {
        let guard = held.pop().expect("a hold");
        thread::spawn(move || {
            let started = Instant::now();
            let result = guard.unlock();
            (started.elapsed(), result)
        })
    };
    for (kind, name, waiting) in queued {
        let (took, got) = join_within(waiting, WAIT * 3, "a queued wait");
        eprintln!(
            "queued {kind:?} on {name:?}: {got:?} after {:.0} ms",
            ms(took)
        );
        assert_eq!(
            got,
            Ok(false),
            "{kind:?}: nothing got while the server is stopped"
        );
        assert!(
            took <= WAIT + OVER,
            "{kind:?}: {took:?} for a wait of {WAIT:?}"
        );
    }
    for (kind, waiting) in during {
        let (took, got) = join_within(waiting, WAIT * 3, "a wait started in the stall");
        eprintln!(
            "started in the stall {kind:?}: {got:?} after {:.0} ms",
            ms(took)
        );
        assert_eq!(got, Err(fairlock::ErrorKind::Connection), "{kind:?}");
        assert!(
            took <= SHORT_WAIT + OVER,
            "{kind:?}: {took:?} for a wait of {SHORT_WAIT:?}"
        );
    }
    let (took, unlocked) = join_within(unlocking, COMMAND_TIMEOUT * 5, "the unlock");
    eprintln!("unlock in the stall: {unlocked:?} after {:.0} ms", ms(took));
    let err = unlocked.expect_err("no unlock while the server is stopped");
    assert!(err.is_connection(), "{err:?}");
    assert!(
        err.to_string().contains("no reply within 1000 ms"),
        "the timeout in words: {err}"
    );
    assert!(took <= COMMAND_TIMEOUT + OVER, "{took:?}");
    // The waits and the unlock came back while the server was still
    // stopped (3 s here at the least).
    assert!(stall_started.elapsed() < Duration::from_secs(3));
    thread::sleep(Duration::from_secs(3).saturating_sub(stall_started.elapsed()));
    stopped.resume();
    // What the stalled calls left is abandoned once the server runs:
    // no queue entry of theirs stays.
    for kind in Kind::EXCLUSIVE {
        for name in [format!("stalled-{kind:?}"), format!("during-{kind:?}")] {
            assert!(
                wait_until(Duration::from_secs(5), || {
                    let status = waiters.status(kind.lock_kind(), &name, 4).unwrap();
                    status.queue_len == 0
                        && (name.starts_with("stalled") || status.holder_count == 0)
                }),
                "{kind:?} {name:?}: left behind: {:?}",
                waiters.status(kind.lock_kind(), &name, 4)
            );
        }
    }
    drop(held);
}

/// A request that a stop and continue cut short goes out again and waits
/// only for what is left of the command timeout: a request and its repeats
/// take one timeout all told, so a reply read says the request ran within
/// one timeout of its first sending (what a release whose client vouches
/// for its lease counts on). A child's unlock goes out through a relay that
/// holds it; half way through the child is stopped and continued: its
/// unlock gives up one command timeout (1 s) after it started, not a whole
/// timeout after the repeat (1.5 s).
#[test]
fn a_request_repeated_after_a_stop_takes_one_command_timeout_all_told() {
    const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let mut children = Children::new(CHILD);
    // A fixed lease: no watchdog sends anything through the relay meanwhile.
    let vars = fairlock_test_support::roles::lease_holder::vars(&relay.url(), 30_000, true);
    let child = children.spawn("lease_holder", &vars);
    children.expect_text(child, "ready", Duration::from_secs(20));
    children.send(child, "lock repeated");
    children.expect_prefix(child, "locked ", Duration::from_secs(20));

    relay.stall();
    let started = Instant::now();
    children.send(child, "unlock");
    assert!(
        wait_until(Duration::from_secs(5), || relay.held_bytes() > 0),
        "the unlock never went out"
    );
    thread::sleep((COMMAND_TIMEOUT / 2).saturating_sub(started.elapsed()));
    send_signal(children.pid(child), "STOP");
    send_signal(children.pid(child), "CONT");
    let unlocked = children.expect_prefix(child, "unlocked ", Duration::from_secs(5));
    let took = unlocked.at - started;
    relay.resume();
    eprintln!(
        "deadlines: an unlock stopped and continued half way gave up after {:.0} ms ({})",
        ms(took),
        unlocked.text
    );
    assert_ne!(unlocked.words()[1], "ok", "the relay held the reply back");
    assert!(
        took >= COMMAND_TIMEOUT - Duration::from_millis(50),
        "{took:?}"
    );
    assert!(
        took < COMMAND_TIMEOUT + Duration::from_millis(250),
        "the repeat waited a whole timeout of its own: {took:?}"
    );
}

/// A server, its one replica (diskless sync) and a connection to the
/// server, once the replica has acknowledged a write.
pub(crate) fn server_with_replica() -> (RedisServer, RedisServer, redis::Connection) {
    // The delay is the master's before it syncs a replica: by default 5 s.
    let server = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = server.port().to_string();
    let replica = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let mut conn = server.conn();
    assert!(
        wait_until(Duration::from_secs(10), || replicas_acknowledge(
            &mut conn, 1
        )),
        "the replica never acknowledged a write"
    );
    (server, replica, conn)
}

/// With `sync_replicas`, a write goes out with its `WAIT` in one pipeline
/// of two requests. While the server is stopped, the call still waits one
/// command timeout (or what is left of its deadline) for its replies all
/// told, not one for each reply of the pipeline: an unlock gives up after
/// the command timeout, a `try_lock_for` started in the stall by its
/// deadline (and the watchdog's pipeline of renewals, one request per hold,
/// after one timeout, not one per hold).
#[test]
fn a_pipeline_takes_one_command_timeout_all_told_while_the_server_is_stopped() {
    let _serial = serial();
    let (server, _replica, _) = server_with_replica();
    let client = server
        .builder()
        .lease(Duration::from_secs(10))
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .sync_replicas(1, Duration::from_millis(500))
        .build()
        .unwrap();
    // The replica may still be catching up with the client's start (its
    // library): an acquisition it did not acknowledge is rolled back.
    let mutex = client.fair_mutex("pipeline-stopped");
    let started = Instant::now();
    let guard = loop {
        match mutex.lock() {
            Ok(guard) => break guard,
            Err(err) if err.kind() == fairlock::ErrorKind::NotReplicated => {
                assert!(started.elapsed() < Duration::from_secs(10), "{err:?}");
            }
            Err(err) => panic!("{err:?}"),
        }
    };
    let waiting = client.fair_mutex("pipeline-stopped-wait");

    let mut stopped = Stopped::stop(&server);
    let started = Instant::now();
    let unlocked = guard.unlock();
    let unlock_took = started.elapsed();
    let started = Instant::now();
    let waited = waiting.try_lock_for(SHORT_WAIT).map(|got| got.is_some());
    let wait_took = started.elapsed();
    stopped.resume();
    eprintln!(
        "deadlines: with sync_replicas, stopped: unlock {:.0} ms ({unlocked:?}), \
         try_lock_for({SHORT_WAIT:?}) {:.0} ms ({waited:?})",
        ms(unlock_took),
        ms(wait_took)
    );
    assert!(
        unlocked.is_err(),
        "the unlock went through a stopped server"
    );
    assert!(
        unlock_took < COMMAND_TIMEOUT + OVER,
        "the unlock waited a command timeout for each reply: {unlock_took:?}"
    );
    assert!(
        wait_took < SHORT_WAIT + OVER,
        "try_lock_for({SHORT_WAIT:?}) waited past its deadline for each reply: {wait_took:?}"
    );
    // The replies the stalled calls did not read are skipped: the same
    // pooled connections read each later call's own.
    for name in ["pipeline-stopped", "pipeline-stopped-wait"] {
        let mutex = client.fair_mutex(name);
        let guard = retry_while_unreachable(|| mutex.try_lock_for(Duration::from_secs(5)))
            .expect("the lock is free once the stalled calls are undone");
        assert!(mutex.is_locked().unwrap());
        guard.unlock().unwrap();
        assert!(!mutex.is_locked().unwrap());
    }
}

/// With `sync_replicas`, a call handed the lock while it waits confirms
/// the grant (a renewal and its `WAIT`) within its deadline. Here the only
/// replica is stopped after the call queued, so that `WAIT` runs its whole
/// sync timeout (2.5 s): `try_lock_for(500 ms)` came back `NotReplicated`
/// after it; now it comes back `None` by its deadline, and the hold it was
/// handed goes back to the lock at once.
#[test]
fn a_grant_confirmed_for_sync_replicas_keeps_to_the_deadline() {
    let _serial = serial();
    let (server, replica, mut conn) = server_with_replica();
    let holder = server.client();
    let waiting_client = (server.builder())
        .command_timeout(Duration::from_secs(3))
        .sync_replicas(1, Duration::from_millis(2500))
        .build()
        .unwrap();
    let name = "confirmed-in-time";
    let guard = holder.fair_mutex(name).lock().unwrap();
    let waiting = waiting_client.fair_mutex(name);
    let waiter = thread::spawn(move || {
        let started = Instant::now();
        let got = waiting.try_lock_for(SHORT_WAIT);
        (started.elapsed(), got.map(|guard| guard.is_some()))
    });
    // Queued, its WAIT answered (the replica acknowledged what came after).
    let queue = format!("fairlock:*:queue:{name}");
    assert!(wait_until(Duration::from_secs(2), || {
        !redis::Commands::keys::<_, Vec<String>>(&mut conn, &queue)
            .unwrap()
            .is_empty()
    }));
    assert!(wait_until(Duration::from_secs(10), || {
        replicas_acknowledge(&mut conn, 1)
    }));
    // The queueing request's own `WAIT` answered too before the replica
    // stops. Once, in a CI run beside a benchmark, that first request
    // timed out at the deadline (no reply within the 549 ms it was given,
    // so, it seems, its `WAIT` still waiting) and failed as one Redis never
    // answered does (`Connection`): a case this test is not about.
    assert!(
        wait_until(Duration::from_secs(10), || clients_blocked_in_wait(
            &mut conn
        ) == 0),
        "the waiter's queueing request still waits in WAIT though the replica acknowledged past it"
    );
    let mut stopped = Stopped::stop(&replica);
    guard.unlock().unwrap();
    let (took, got) = waiter.join().unwrap();
    let observer = holder.fair_mutex(name);
    let freed = Instant::now();
    let free = wait_until(Duration::from_secs(5), || {
        observer.try_lock().unwrap().is_some()
    });
    let freed_after = freed.elapsed();
    stopped.resume();
    eprintln!(
        "deadlines: try_lock_for({SHORT_WAIT:?}) handed the lock, its WAIT unanswered: \
         {got:?} after {:.0} ms, the lock free again {:.0} ms later",
        ms(took),
        ms(freed_after)
    );
    assert!(
        took < SHORT_WAIT + OVER,
        "try_lock_for({SHORT_WAIT:?}) confirmed its grant past its deadline: {took:?} ({got:?})"
    );
    assert!(matches!(got, Ok(false)), "{got:?}");
    assert!(free, "the hold handed to the call that gave up stayed");
}

/// A wait whose request Redis answered with an error (here the lock's key
/// holds foreign data: `KeyConflict`) leaves the queue within its deadline,
/// as one that runs out does. Through a relay that adds 400 ms each way,
/// `try_lock_for(1 s)` got its error after one round trip (800 ms) and
/// then waited a whole round trip more for its leave, bounded only by the
/// command timeout; now the leave is given up at the deadline and a
/// leave's grace, the rest left to the watchdog.
#[test]
fn a_leave_after_an_error_keeps_to_the_deadline() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .command_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let name = "left-in-time";
    let mutex = client.fair_mutex(name);
    let guard = mutex.lock().unwrap();
    let mut conn = server.conn();
    let keys: Vec<String> =
        redis::Commands::keys(&mut conn, format!("fairlock:*:lock:{name}")).unwrap();
    guard.unlock().unwrap();
    let _: () = redis::Commands::set(&mut conn, &keys[0], "someone else's").unwrap();
    relay.set_delay(Duration::from_millis(400));
    let wait = Duration::from_secs(1);
    let started = Instant::now();
    let got = mutex.try_lock_for(wait);
    let took = started.elapsed();
    relay.set_delay(Duration::ZERO);
    eprintln!(
        "deadlines: try_lock_for({wait:?}) answered with an error, 800 ms round trips: \
         {:?} after {:.0} ms",
        got.as_ref().map(Option::is_some),
        ms(took)
    );
    assert_eq!(got.unwrap_err().kind(), fairlock::ErrorKind::KeyConflict);
    assert!(
        took < wait + Duration::from_millis(300),
        "try_lock_for({wait:?}) left the queue past its deadline: {took:?}"
    );
}

/// Dropping a client stops its threads within about one command timeout
/// however Redis stalls: the watchdog's round under way then (here the
/// abandon of an unlock that failed in the stall) is its last try, not
/// followed by another, and the stop's wake-up message waits no longer
/// than its connection's checkout (200 ms). The link is held by a relay
/// (no watchdog round but that abandon: lease and waiter timeout 30 s),
/// and the client is dropped once the abandon went out. The last guard of
/// a client (its handle dropped first) gives its release one command
/// timeout and then stops the client: about one more.
#[test]
fn dropping_a_client_in_a_stall_takes_about_one_command_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let long = Duration::from_secs(30);
    let client = || {
        Client::builder(&relay.url())
            .lease(long)
            .waiter_timeout(long)
            .command_timeout(COMMAND_TIMEOUT)
            .connect_timeout(COMMAND_TIMEOUT)
            .build()
            .unwrap()
    };
    let unlocking = client();
    let guard = unlocking.fair_mutex("stalled-drop").lock().unwrap();
    let last = client().fair_mutex("stalled-last").lock().unwrap();
    relay.stall();
    assert!(
        guard.unlock().is_err(),
        "the unlock went through a stalled link"
    );
    let unlock_bytes = relay.held_bytes();
    // (Only the moment to drop: Redis is stalled, so no bound holds when
    // the abandon goes out; under a CPU hog with the suite beside it, it
    // once took over 5 s.)
    assert!(
        wait_until(Duration::from_secs(15), || relay.held_bytes()
            > unlock_bytes),
        "the watchdog never sent the abandon"
    );
    let started = Instant::now();
    drop(unlocking);
    let client_took = started.elapsed();
    let started = Instant::now();
    drop(last);
    let last_took = started.elapsed();
    relay.resume();
    eprintln!(
        "deadlines: in a stall, dropping a client whose abandon was under way took {:.0} ms, \
         dropping the last guard of a client {:.0} ms (command timeout 1 s)",
        ms(client_took),
        ms(last_took)
    );
    assert!(
        client_took < COMMAND_TIMEOUT + OVER,
        "the stop waited for more than the round under way: {client_took:?}"
    );
    assert!(last_took < COMMAND_TIMEOUT * 2 + OVER, "{last_took:?}");
}

/// The same with several calls to abandon: three unlocks fail while the
/// link is cut (at once), then the link stalls (new connections too). The
/// watchdog's round stops at the first abandon that cannot reach Redis,
/// so the round under way when the client is dropped is one command
/// timeout, not one for each call still to abandon.
#[test]
fn dropping_a_client_with_several_abandons_in_a_stall_takes_about_one_command_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(3))
        .command_timeout(COMMAND_TIMEOUT)
        .connect_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap();
    let guards: Vec<_> = (0..3)
        .map(|i| client.fair_mutex(&format!("abandons-{i}")).lock().unwrap())
        .collect();
    relay.cut();
    for guard in guards {
        assert!(guard.unlock().is_err(), "an unlock went through a cut link");
    }
    relay.stall();
    relay.heal();
    // The moment to drop: a round's first abandon went out into the stall.
    assert!(
        wait_until(Duration::from_secs(15), || relay.held_bytes() > 0),
        "the watchdog never sent an abandon"
    );
    let started = Instant::now();
    drop(client);
    let took = started.elapsed();
    relay.resume();
    eprintln!(
        "deadlines: in a stall, dropping a client with three abandons pending took {:.0} ms \
         (command timeout 1 s)",
        ms(took)
    );
    assert!(
        took < COMMAND_TIMEOUT + OVER,
        "the stop waited for an abandon after the round could not reach redis: {took:?}"
    );
}

/// A thread queued with no deadline waits through an outage for the
/// client's patience (`waiter_timeout + connect_timeout`, 3 s here), then
/// returns `Connection`: with Redis killed and not back, the head of the
/// queue came back after 8.2 s (its first poll waited for a connection,
/// and its patience counted from that poll's end, the last poll past it),
/// and a waiter behind it never (it polls only when told, and nothing
/// told it); now a heartbeat that cannot reach Redis has each waiter ask
/// itself, and no poll waits past the patience's end.
#[test]
fn queued_waits_give_up_after_their_patience_when_redis_is_gone() {
    let _serial = serial();
    let mut server = RedisServer::start();
    let holder = server.client();
    let waiting = server.client(); // waiter timeout 1 s, connect timeout 2 s
    let patience = Duration::from_secs(3);
    let name = "outage-patience";
    let guard = holder.fair_mutex(name).lock().unwrap();
    let mut waiters = Vec::new();
    for n in 1..=2 {
        let mutex = waiting.fair_mutex(name);
        waiters.push(thread::spawn(move || {
            (mutex.lock().map(drop), Instant::now())
        }));
        assert!(wait_until(Duration::from_secs(5), || {
            holder.fair_mutex(name).queue_len().unwrap() == n
        }));
    }
    let killed = Instant::now();
    server.kill();
    for (place, waiter) in waiters.into_iter().enumerate() {
        let (got, at) = join_within(waiter, patience * 4, "a queued lock()");
        let took = at - killed;
        eprintln!(
            "deadlines: the queued lock() at place {place} after Redis was killed: {:?} after \
             {:.0} ms (patience {patience:?})",
            got.as_ref().map_err(|err| err.to_string()),
            ms(took)
        );
        assert!(got.is_err_and(|err| err.is_connection()), "place {place}");
        // Its first poll within a watchdog period (333 ms), then its patience.
        assert!(
            took < patience + Duration::from_millis(900),
            "place {place}: {took:?}"
        );
    }
    drop(guard);
}

/// With `sync_replicas`, a hold too few replicas saw is given back at once
/// (an abandon) before the call returns `NotReplicated`; in a wait with a
/// deadline, that abandon keeps to the deadline too. Here there is no
/// replica (every `WAIT` runs its sync timeout, 1 s), and Redis holds
/// writes back from just after the acquisition ran: `try_lock_for(1.5 s)`
/// waited a whole command timeout (3 s) more for the abandon; now it
/// returns by its deadline and the watchdog gives the hold back once
/// writes resume.
#[test]
fn a_hold_too_few_replicas_saw_is_given_back_within_the_deadline() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server
        .builder()
        .command_timeout(Duration::from_secs(3))
        .sync_replicas(1, Duration::from_secs(1))
        .build()
        .unwrap();
    let name = "unreplicated-in-a-stall";
    let mutex = client.fair_mutex(name);
    let wait = Duration::from_millis(1500);
    let waiter = thread::spawn(move || {
        let started = Instant::now();
        let got = mutex.try_lock_for(wait);
        (started.elapsed(), got.map(|guard| guard.is_some()))
    });
    let mut conn = server.conn();
    let held = |conn: &mut redis::Connection| {
        let keys: Vec<String> =
            redis::Commands::keys(conn, format!("fairlock:*:lock:{name}")).unwrap();
        !keys.is_empty()
    };
    assert!(wait_until(Duration::from_secs(1), || held(&mut conn)));
    let pause = Duration::from_millis(4000);
    let paused = pause_clients(&mut conn, "WRITE", pause);
    let (took, got) = join_within(waiter, Duration::from_secs(10), "the wait");
    eprintln!(
        "deadlines: try_lock_for({wait:?}) too few replicas saw, writes held back: {got:?} \
         after {:.0} ms",
        ms(took)
    );
    assert_eq!(
        got.as_ref().map_err(fairlock::Error::kind),
        Err(fairlock::ErrorKind::NotReplicated)
    );
    assert!(took < wait + OVER, "{took:?}");
    // Given back once writes resume.
    let observer = server.client().fair_mutex(name);
    assert!(
        wait_until(Duration::from_secs(10), || !observer.is_locked().unwrap()),
        "the hold stayed"
    );
    eprintln!(
        "deadlines: the hold given back {:.0} ms after the pause",
        ms(paused.elapsed().saturating_sub(pause))
    );
}

/// `sync_replicas(1, 600 ms)` under a 700 ms command timeout, no replica,
/// over a link with a 200 ms round trip: the `WAIT` rightly takes its
/// 600 ms, and its reply comes after the command timeout. The lock call
/// must say what happened, `NotReplicated`, not `Connection` (before: a
/// "no reply within 700 ms" after 700 ms).
#[test]
fn a_wait_for_replicas_near_the_command_timeout_over_a_slow_link_says_not_replicated() {
    let server = RedisServer::start();
    // A client of its own loads the scripts first: their load over the
    // link, by a client whose command timeout is 700 ms, could take that
    // long on a loaded machine (the build failed so once).
    drop(server.client());
    let relay = Relay::with_delay(server.port(), Duration::from_millis(100));
    let client = Client::builder(&relay.url())
        .command_timeout(Duration::from_millis(700))
        .sync_replicas(1, Duration::from_millis(600))
        .build()
        .unwrap();
    let mutex = client.fair_mutex("sync-slow-link");
    for _ in 0..2 {
        let started = Instant::now();
        let err = mutex.lock().map(drop).expect_err("no replica acknowledges");
        let took = started.elapsed();
        eprintln!("deadlines: sync 600 ms, command 700 ms, 200 ms round trip: {took:?}: {err}");
        assert_eq!(err.kind(), fairlock::ErrorKind::NotReplicated, "{err:?}");
        assert!(took < Duration::from_millis(2000), "{took:?}");
    }
    assert!(!mutex.is_locked().unwrap(), "the rolled back hold is left");
}

/// `sync_replicas(1, 500 µs)`: above zero and below the command timeout,
/// so accepted; no replica. Its `WAIT` must wait its timeout (at least the
/// 1 ms Redis counts in), and the lock call say `NotReplicated` at once,
/// not send `WAIT 1 0`, which Redis reads as "wait for ever", so that the
/// call fails only at its command timeout, `Connection`.
#[test]
fn a_sync_replicas_timeout_below_a_millisecond_does_not_wait_for_ever() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .command_timeout(Duration::from_secs(2))
        .sync_replicas(1, Duration::from_micros(500))
        .build()
        .unwrap();
    let mutex = client.fair_mutex("sync-sub-ms");
    let started = Instant::now();
    let err = mutex.lock().map(drop).expect_err("no replica acknowledges");
    let took = started.elapsed();
    eprintln!("deadlines: sync 500 µs: {took:?}: {err}");
    assert_eq!(err.kind(), fairlock::ErrorKind::NotReplicated, "{err:?}");
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert!(!mutex.is_locked().unwrap(), "the rolled back hold is left");
}

/// A wait whose deadline passes while its poll is on a slow link (a relay,
/// 200 ms each way): the head of the queue polls as the holder's fixed
/// lease runs out, and that poll takes the lock at Redis after the wait
/// has ended (`None`, its reply not waited for past the request's grace).
/// The watchdog gives that hold back at once: its abandon is the round's
/// only message, reaching Redis a one-way trip after the wait returned.
/// Before, the waiter was still heartbeaten in the round the abandon
/// nudged (it was forgotten only after the abandon was asked for), and
/// the abandon waited for that heartbeat's round trip: the lock held
/// 0.6 s after the wait returned in 1 to 3 rounds of 11 (3 runs of 3).
/// The watchdog's period (40 s) brings no round of its own.
#[test]
fn a_wait_that_ends_with_its_poll_in_flight_has_the_lock_it_took_given_back_at_once() {
    let _serial = serial();
    let server = RedisServer::start();
    let other = server.client();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(200));
    let waiter = Client::builder(&relay.url())
        .lease(Duration::from_secs(120))
        .waiter_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let fixed = Duration::from_millis(900);
    let mut late = Vec::new();
    for round in 0..10 {
        let name = format!("poll-in-flight-{round}");
        let mutex = other.fair_mutex(&name);
        let held = mutex.with_fixed_lease(fixed).lock().unwrap();
        let lease_end = Instant::now() + fixed;
        // The head polls when the reply to its first request says the
        // lease ends (a one-way trip late, 200 ms): the poll is out from
        // then until a round trip later, past this deadline.
        let m = waiter.fair_mutex(&name);
        let blocked = thread::spawn(move || {
            let got = m.lock_with(fairlock::Wait::until(
                lease_end + Duration::from_millis(300),
            ));
            (got.map(|guard| guard.is_some()), Instant::now())
        });
        let (got, returned) = join_within(blocked, Duration::from_secs(10), "the wait");
        assert!(matches!(got, Ok(false)), "round {round}: {got:?}");
        let ours = || {
            let status = mutex.status(10).unwrap();
            status
                .holders
                .iter()
                .any(|h| h.who.client_id() == waiter.id())
        };
        assert!(
            wait_until(Duration::from_secs(2), ours),
            "round {round}: the poll did not take the lock after the wait ended"
        );
        assert!(
            wait_until(Duration::from_secs(40), || !ours()),
            "round {round}: never given back"
        );
        let after = returned.elapsed();
        eprintln!(
            "deadlines: round {round}: given back {:.0} ms after the wait returned",
            ms(after)
        );
        if after > Duration::from_millis(450) {
            late.push((round, after));
        }
        let _ = held.unlock();
    }
    assert!(
        late.is_empty(),
        "held past a one-way trip after the wait: {late:?}"
    );
}

/// An upgrade whose deadline passes while its poll is on a slow link (a
/// relay, 200 ms each way): the upgradable read has a fixed lease of 4.5 s,
/// so its claim, queued behind another client's read, asks Redis again
/// 1.5 s after its first request, and that poll is out for a 400 ms round
/// trip; the deadline (1.7 s) falls inside it. The claim is withdrawn then,
/// as at any wait's end (within the link's grace): the call gives the read
/// back to the caller (`Err(read)`), still held, its token unchanged. Before,
/// it failed with a `Connection` error (the poll's reply cut short by the
/// deadline) and the read was given back to Redis: a slow link cost the
/// caller the read an upgrade that timed out must leave it.
#[test]
fn an_upgrade_whose_poll_is_in_flight_at_its_deadline_is_withdrawn_and_keeps_the_read() {
    const WAIT: Duration = Duration::from_millis(1700);
    let _serial = serial();
    let server = RedisServer::start();
    let other = server.client();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(200));
    let client = Client::builder(&relay.url()).build().unwrap();
    for round in 0..2 {
        let name = format!("upgrade-poll-in-flight-{round}");
        let reader = other.fair_rwlock(&name).read().unwrap();
        let rwlock = client.fair_rwlock(&name);
        let read = (rwlock.with_fixed_lease(Duration::from_millis(4500)))
            .upgradable_read()
            .unwrap();
        let token = read.fencing_token();
        let started = Instant::now();
        let upgraded = read.upgrade_with(fairlock::Wait::at_most(WAIT));
        let took = started.elapsed();
        let outcome = upgraded
            .as_ref()
            .map(|got| got.is_ok())
            .map_err(|err| err.kind());
        eprintln!(
            "deadlines: round {round}: upgrade_with({WAIT:?}), a poll in flight at its deadline: \
             {outcome:?} (upgraded?) after {:.0} ms",
            ms(took)
        );
        let read = match upgraded {
            Ok(Err(read)) => read,
            other => panic!("round {round}: not the read back: {other:?}"),
        };
        assert!(
            took < WAIT + Duration::from_millis(900),
            "round {round}: took {took:?}"
        );
        assert_eq!(read.fencing_token(), token, "round {round}");
        let status = other.fair_rwlock(&name).status(10).unwrap();
        let ours = status
            .holders
            .iter()
            .filter(|h| h.who.client_id() == client.id());
        assert_eq!(ours.count(), 1, "round {round}: {status:?}");
        read.unlock().unwrap();
        reader.unlock().unwrap();
    }
}

/// A wait that ends (its deadline) as the lock is handed to it, over a
/// link with a 200 ms round trip (a relay, 100 ms each way): the holder
/// (another client, on the server) lets go at the deadline, so the grant's
/// message reaches the waiter after it gave up, and its leave (the
/// cancel) reaches Redis after the grant, which it gives back (a leave
/// never keeps a hold: `lock_with` says the lock goes on). The call
/// returns `None` with the lock already free, by its deadline and the
/// leave's grace. Before, the leave had 50 ms past the deadline for its
/// reply, which such a link cannot bring back: the call returned `None`
/// with the lock still held, given back by the watchdog a round trip
/// later (in 3 rounds of 3).
#[test]
fn a_wait_handed_the_lock_as_it_ends_over_a_slow_link_passes_it_on_before_it_returns() {
    let server = RedisServer::start();
    let other = server.client();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(100));
    let client = Client::builder(&relay.url()).build().unwrap();
    for round in 0..3 {
        let name = format!("handed-as-it-ends-{round}");
        let held = other.fair_mutex(&name).unbound().lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let letting_go = thread::spawn(move || {
            thread::sleep(deadline.saturating_duration_since(Instant::now()));
            held.unlock().unwrap();
        });
        let got = client
            .fair_mutex(&name)
            .lock_with(fairlock::Wait::until(deadline));
        let late = Instant::now().saturating_duration_since(deadline);
        join_within(letting_go, Duration::from_secs(5), "the holder");
        eprintln!(
            "deadlines: round {round}: handed the lock as its wait ended, 200 ms round trips: \
             {:?} {:.0} ms past the deadline",
            got.as_ref().map(Option::is_some),
            ms(late)
        );
        let locked = other.fair_mutex(&name).is_locked().unwrap();
        assert!(
            got.unwrap().is_none(),
            "round {round}: a wait that ended kept the lock"
        );
        assert!(
            !locked,
            "round {round}: the lock still held as the wait returned"
        );
        assert!(
            late < Duration::from_millis(800),
            "round {round}: returned {late:?} past its deadline"
        );
    }
}

/// A client of `server` whose connections wait 3 s to connect (a
/// connection pooled for a call that outlasts its deadline would wait that
/// long with Redis gone), its command timeout COMMAND_TIMEOUT.
fn waiting_out_connects(server: &RedisServer) -> Client {
    (server.builder())
        .connect_timeout(Duration::from_secs(3))
        .command_timeout(COMMAND_TIMEOUT)
        .build()
        .unwrap()
}

/// An upgrade with a deadline of an upgradable read its client counted
/// lost (Redis killed and not back: its renewals failed for its lease)
/// says `LeaseLost` by its deadline and a leave's grace: the release it
/// sends in place of the upgrade waits for a connection no longer than
/// that (the watchdog gives the read back once Redis answers). Before, that
/// release waited the connect timeout for a connection, whatever the
/// deadline: `upgrade_with(300 ms)` took 3.0 s, the connect timeout here.
#[test]
fn an_upgrade_of_a_hold_counted_lost_keeps_its_deadline_while_redis_is_gone() {
    const WAIT: Duration = Duration::from_millis(300);
    let _serial = serial();
    let mut server = RedisServer::start();
    let client = waiting_out_connects(&server);
    let read = client.fair_rwlock("upgraded-when-lost").unbound();
    let read = read.upgradable_read().unwrap();
    server.kill();
    assert!(
        wait_until(Duration::from_secs(5), || read.is_lease_lost()),
        "counted lost within its 2 s lease of the kill"
    );
    let started = Instant::now();
    let upgraded = read.upgrade_with(fairlock::Wait::at_most(WAIT));
    let took = started.elapsed();
    let kind = upgraded.as_ref().map(|_| ()).map_err(|err| err.kind());
    eprintln!(
        "deadlines: upgrade_with({WAIT:?}) of a hold counted lost, redis gone: {kind:?} after \
         {:.0} ms",
        ms(took)
    );
    assert_eq!(kind, Err(fairlock::ErrorKind::LeaseLost));
    assert!(took < WAIT + OVER, "upgrade_with({WAIT:?}) took {took:?}");
    server.start_again();
}

/// The same for the changes of access that have no deadline: a
/// `try_upgrade` of an upgradable read and a `downgrade` of a write, both
/// counted lost (Redis killed and not back), say `LeaseLost` within one
/// command timeout and a leave's grace, as a change of access that fails
/// releases its hold (`release_after`). Before, the release each sends in
/// its place waited the connect timeout for a connection: 3.0 s each here.
#[test]
fn a_try_upgrade_and_a_downgrade_of_holds_counted_lost_keep_to_a_command_timeout_while_redis_is_gone(
) {
    let _serial = serial();
    let mut server = RedisServer::start();
    let client = waiting_out_connects(&server);
    let rwlock = |name: &str| client.fair_rwlock(name).unbound();
    let upgradable = rwlock("tried-when-lost").upgradable_read().unwrap();
    let write = rwlock("downgraded-when-lost").write().unwrap();
    server.kill();
    let lost = || upgradable.is_lease_lost() && write.is_lease_lost();
    assert!(
        wait_until(Duration::from_secs(5), lost),
        "counted lost within their 2 s leases of the kill"
    );
    let started = Instant::now();
    let tried = upgradable.try_upgrade().map(drop).map_err(|err| err.kind());
    let tried = (tried, started.elapsed());
    let started = Instant::now();
    let downgraded = write.downgrade().map(drop).map_err(|err| err.kind());
    let downgraded = (downgraded, started.elapsed());
    for (what, (kind, took)) in [("try_upgrade", tried), ("downgrade", downgraded)] {
        eprintln!(
            "deadlines: {what} of a hold counted lost, redis gone: {kind:?} after {:.0} ms",
            ms(took)
        );
        assert_eq!(kind, Err(fairlock::ErrorKind::LeaseLost), "{what}");
        assert!(took < COMMAND_TIMEOUT + OVER, "{what} took {took:?}");
    }
    server.start_again();
}

/// The farthest deadline an `Instant` holds is no limit, as a duration
/// too long for one is, for every wait that takes one: a lock's (by
/// `Wait::until` and `Wait::at_most`, on one lock and on a set) waits for
/// the lock, released here 200 ms later; an election watch's first `next`
/// says the state at once, and a lease signal's wait returns at the
/// release. Adding a reply's 50 ms grace to such a deadline overflowed the
/// `Instant`: a panic before the first request went out.
#[test]
fn the_farthest_deadline_an_instant_holds_is_no_limit() {
    let server = RedisServer::start();
    let (holder, waiter) = (server.client(), server.client());
    // The last millisecond an Instant holds, found by halving.
    let (mut far, mut step) = (Instant::now(), Duration::from_secs(u64::MAX / 2));
    while step >= Duration::from_millis(1) {
        far = far.checked_add(step).unwrap_or(far);
        step /= 2;
    }
    let farthest = || far.duration_since(Instant::now());
    for wait in [
        fairlock::Wait::until(far),
        fairlock::Wait::at_most(farthest()),
    ] {
        let held = holder.fair_mutex("farthest").unbound().lock().unwrap();
        let signal = held.lease_signal();
        let release = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            held.unlock().unwrap();
        });
        let mutex = waiter.fair_mutex("farthest").lock_with(wait.clone());
        mutex.unwrap().expect("waited").unlock().unwrap();
        assert!(signal.wait_timeout(farthest()).is_some());
        release.join().unwrap();
        let set = waiter
            .fair_multi_lock(["farthest", "farthest:b"])
            .lock_with(wait);
        set.unwrap().expect("free").unlock().unwrap();
    }
    let mut watch = waiter.election("farthest").watch().unwrap();
    assert!(watch.next(farthest()).unwrap().is_some(), "the state now");
}
