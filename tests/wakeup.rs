//! Wake-ups: a release notifies the next waiter only, and a lost message
//! never leaves a waiter asleep past a bounded fallback.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock_test_support::{
    create_acl_user, join_within, kill_subscribers, ms, pause_clients, pubsub_clients, serial,
    wait_until, RedisServer, Relay,
};

#[test]
fn a_release_publishes_to_the_next_waiter_only() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder_client = server.client();
    let mutex = holder_client.fair_mutex("herd");
    let holder = mutex.lock().unwrap();

    // Five waiters, five clients: five channels a herd would reach.
    let waiters: Vec<_> = (0..5)
        .map(|i| {
            let m = server.client().fair_mutex("herd");
            let handle = thread::spawn(move || {
                let guard = m.lock().unwrap();
                // Long enough that only the first handoff falls in the window.
                thread::sleep(Duration::from_millis(800));
                guard.unlock().unwrap();
            });
            assert!(wait_until(Duration::from_secs(5), || mutex
                .queue_len()
                .unwrap()
                == i + 1));
            handle
        })
        .collect();

    // Watch every wake channel while the holder releases.
    let mut watcher = server.conn();
    watcher
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut pubsub = watcher.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    holder.unlock().unwrap();
    let mut messages = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        if let Ok(msg) = pubsub.get_message() {
            messages.push((
                msg.get_channel_name().to_owned(),
                msg.get_payload::<String>().unwrap(),
            ));
        }
    }
    drop(pubsub);
    for handle in waiters {
        join_within(handle, Duration::from_secs(15), "waiter");
    }
    // One grant to the next waiter and nothing else: never a message to
    // everybody, nor to the new head of the queue (its client's heartbeat
    // tells it).
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].1.starts_with("G "), "{messages:?}");
}

/// A thread that locks `mutex`, sends when it got it, and unlocks.
fn spawn_timed_waiter(
    mutex: fairlock::FairMutex,
) -> (thread::JoinHandle<()>, mpsc::Receiver<Instant>) {
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let guard = mutex.lock().unwrap();
        tx.send(Instant::now()).unwrap();
        guard.unlock().unwrap();
    });
    (waiter, rx)
}

/// Mutex `name` of `client` held, and a waiter of the same client queued
/// behind (see [`spawn_timed_waiter`]).
fn held_with_a_same_client_waiter(
    client: &fairlock::Client,
    name: &str,
) -> (
    fairlock::FairMutex,
    fairlock::FairMutexGuard,
    thread::JoinHandle<()>,
    mpsc::Receiver<Instant>,
) {
    let mutex = client.fair_mutex(name);
    let holder = mutex.lock().unwrap();
    let (waiter, rx) = spawn_timed_waiter(client.fair_mutex(name));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    (mutex, holder, waiter, rx)
}

#[test]
fn a_waiter_whose_wake_message_was_lost_still_gets_the_lock_promptly() {
    let _serial = serial();
    let server = RedisServer::start();
    // A long watchdog period, so the re-poll after reconnecting is what
    // saves the waiter, not the heartbeat.
    let builder = || {
        server
            .builder()
            .lease(std::time::Duration::from_secs(30))
            .waiter_timeout(Duration::from_secs(30))
    };
    let holder_client = builder().build().unwrap();
    let mutex = holder_client.fair_mutex("lost");
    let holder = mutex.lock().unwrap();
    let waiter_client = builder().build().unwrap();
    let waiter_id = waiter_client.id().to_owned();
    let (waiter, rx) = spawn_timed_waiter(waiter_client.fair_mutex("lost"));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));

    // Cut the waiter's subscription, then release while it is down: the
    // handoff message goes nowhere.
    let mut conn = server.conn();
    let killed = kill_subscribers(&mut conn);
    assert!(killed >= 2, "both clients' subscribers were connected");
    let released = Instant::now();
    holder.unlock().unwrap();
    let granted = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiter got the lock without its message");
    let late = granted - released;
    eprintln!("handoff with the message lost: {:.1} ms", ms(late));
    assert!(late < Duration::from_secs(2), "waited {late:?}");
    join_within(waiter, Duration::from_secs(5), "waiter");

    // The subscriber came back: the next handoff is pushed again.
    let holder = mutex.lock().unwrap();
    let (waiter, rx) = spawn_timed_waiter(waiter_client.fair_mutex("lost"));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    let subscribed = wait_until(Duration::from_secs(5), || pubsub_clients(&mut conn) >= 2);
    assert!(subscribed, "subscribers reconnected");
    let released = Instant::now();
    holder.unlock().unwrap();
    let granted = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    eprintln!(
        "handoff after the reconnect: {:.2} ms",
        ms(granted - released)
    );
    assert!(granted - released < Duration::from_millis(500));
    join_within(waiter, Duration::from_secs(5), "waiter");
    assert!(!waiter_id.is_empty());
}

/// A subscription whose link died without a word (a NAT or a load
/// balancer forgot the idle connection: the server dropped it, the client
/// reads nothing, not even its end, until it sends) is found out and
/// opened again, so handoffs are pushed again: the subscriber, quiet for
/// a watchdog period (1 s here), asks the server to confirm it. Before,
/// nothing was ever sent on it: the client stayed deaf for its life, each
/// handoff waiting for a heartbeat.
#[test]
fn a_subscription_whose_link_died_silently_is_opened_again() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = (fairlock::Client::builder(&relay.url()))
        .lease(Duration::from_secs(3))
        .waiter_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let channel = format!("fairlock:wake:{}", client.id());
    let mut conn = server.conn();
    let mut subscribed = || {
        let counts: (String, i64) = (redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel))
            .query(&mut conn)
            .unwrap();
        counts.1 == 1
    };
    assert!(subscribed());
    relay.forget();
    assert!(wait_until(Duration::from_secs(5), || !subscribed()));
    let forgotten = Instant::now();
    let back = wait_until(Duration::from_secs(6), &mut subscribed);
    eprintln!(
        "subscribed again: {back}, {:.0} ms after the link was forgotten",
        ms(forgotten.elapsed())
    );
    assert!(
        back,
        "not subscribed again within 6 s (watchdog period 1 s)"
    );
    // Handoffs are pushed again.
    let other = server.client();
    let mutex = other.fair_mutex("forgotten");
    let holder = mutex.lock().unwrap();
    let (waiter, rx) = spawn_timed_waiter(client.fair_mutex("forgotten"));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    let released = Instant::now();
    holder.unlock().unwrap();
    let granted = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    eprintln!("handoff after it: {:.1} ms", ms(granted - released));
    assert!(granted - released < Duration::from_millis(300));
    join_within(waiter, Duration::from_secs(5), "waiter");
}

/// Cuts the subscribers of the ACL user `fairlock`'s clients and keeps
/// them from subscribing again (its user loses SUBSCRIBE; the scripts may
/// still PUBLISH), until the server has refused one of their tries;
/// returns how many it cut.
fn cut_subscribers(server: &RedisServer, conn: &mut redis::Connection) -> i64 {
    set_acl(conn, "-subscribe");
    let cut = kill_subscribers(conn);
    let denied = || denied_subscribes(&mut server.conn()) >= 1;
    assert!(
        wait_until(Duration::from_secs(5), denied),
        "no subscribe refused"
    );
    cut
}

/// SUBSCRIBE calls the server denied so far (its ACL LOG).
fn denied_subscribes(conn: &mut redis::Connection) -> i64 {
    let entries: Vec<HashMap<String, redis::Value>> =
        redis::cmd("ACL").arg("LOG").query(conn).unwrap();
    entries
        .iter()
        .filter(|e| e.get("object") == Some(&redis::Value::BulkString(b"subscribe".to_vec())))
        .map(|e| redis::from_redis_value_ref::<i64>(&e["count"]).unwrap())
        .sum()
}

/// A waiter of the releasing client is woken by the release's own reply,
/// which names the new holder: it needs no wake message. Here its client's
/// subscriber is cut and cannot subscribe again (its ACL user loses
/// SUBSCRIBE; the scripts may still PUBLISH), and the watchdog's fallback
/// is 10 s away, so only the reply can wake it at once. Then the
/// subscriber is let back, and a message that arrives for a waiter already
/// woken changes nothing.
#[test]
fn a_waiter_of_the_releasing_client_wakes_from_the_release_reply() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = acl_client(&server, &mut conn, Duration::from_secs(30));
    let (mutex, holder, waiter, rx) = held_with_a_same_client_waiter(&client, "same-client");

    // Its tries to subscribe again are refused (and retried, 50 ms to 1 s
    // apart), so no message and no re-poll reaches the waiter: only the
    // release's reply, or the watchdog's heartbeat 10 s away, can wake it.
    assert_eq!(
        cut_subscribers(&server, &mut conn),
        1,
        "the client's subscriber"
    );
    let released = Instant::now();
    holder.unlock().unwrap();
    let granted = rx.recv_timeout(Duration::from_secs(20));
    let still_down = pubsub_clients(&mut conn) == 0;
    set_acl(&mut conn, "+subscribe");
    let late = granted.expect("the waiter got the lock") - released;
    eprintln!("same-client handoff with no subscriber: {:.2} ms", ms(late));
    assert!(still_down, "the subscriber subscribed again meanwhile");
    assert!(late < Duration::from_secs(1), "waited {late:?}");
    join_within(waiter, Duration::from_secs(5), "waiter");

    // Subscribed again: 50 same-client handoffs in a row, each woken twice
    // (reply and message), give 50 guards with increasing tokens.
    assert!(wait_until(Duration::from_secs(10), || pubsub_clients(
        &mut conn
    ) == 1));
    let tokens = std::sync::Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..2 {
            let (mutex, tokens) = (client.fair_mutex("same-client"), &tokens);
            s.spawn(move || {
                for _ in 0..25 {
                    let guard = mutex.lock().unwrap();
                    tokens.lock().unwrap().push(guard.fencing_token());
                    guard.unlock().unwrap();
                }
            });
        }
    });
    let tokens = tokens.into_inner().unwrap();
    assert_eq!(tokens.len(), 50);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(!mutex.is_locked().unwrap());
}

/// A waiter of the releasing client still gets the lock at once when the
/// release's reply is lost (the release timed out while Redis held writes
/// back, and ran afterwards): its grant message wakes it, not only the
/// reply (sending that message to the releasing client too is what keeps
/// it so: docs/performance.md, "A grant message to the releasing client").
/// The watchdog's heartbeat, the other way a waiter learns of a grant, is
/// 100 s away.
#[test]
fn a_waiter_of_the_releasing_client_gets_the_lock_when_the_release_reply_is_lost() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server
        .builder()
        .lease(Duration::from_secs(300))
        .waiter_timeout(Duration::from_secs(300))
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let (mutex, holder, waiter, rx) = held_with_a_same_client_waiter(&client, "reply-lost");

    let pause = Duration::from_millis(1000);
    let paused = pause_clients(&mut server.conn(), "WRITE", pause);
    let err = holder
        .unlock()
        .expect_err("the release's reply came in a pause");
    assert!(err.is_timeout(), "{err}");
    let granted = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the waiter got the lock");
    let late = granted - (paused + pause);
    eprintln!(
        "same-client handoff after a lost reply: {:.0} ms after the pause",
        ms(late)
    );
    assert!(
        late < Duration::from_secs(5),
        "waited {late:?} past the pause"
    );
    join_within(waiter, Duration::from_secs(5), "waiter");
    assert!(wait_until(Duration::from_secs(5), || !mutex
        .is_locked()
        .unwrap()));
}

/// A permit handed to a waiter whose message is lost (its subscriber cut
/// and refused, as above) is learned from the watchdog's heartbeat. The
/// guard must count its own hold's lease (a fixed 20 s here), not the
/// first lease of the semaphore to run out, another holder's (3 s): else
/// it reports its lease lost while Redis still holds it for its own.
#[test]
fn a_permit_learned_from_a_heartbeat_counts_its_own_lease() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    // A watchdog period of 500 ms: the heartbeat comes well before the
    // other holder's lease runs out (when the waiter would poll itself).
    let client = acl_client(&server, &mut conn, Duration::from_millis(1500));
    let other = server.client();
    let name = "heartbeat-grant";
    let semaphore = other.fair_semaphore(name, 2);
    let short = (semaphore.with_fixed_lease(Duration::from_secs(3)).acquire()).unwrap();
    let long = semaphore.acquire().unwrap();
    let waiting =
        (client.fair_semaphore(name, 2).unbound()).with_fixed_lease(Duration::from_secs(20));
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let permit = waiting.acquire().unwrap();
        tx.send(Instant::now()).unwrap();
        permit
    });
    assert!(wait_until(Duration::from_secs(5), || semaphore
        .queue_len()
        .unwrap()
        == 1));
    assert!(
        cut_subscribers(&server, &mut conn) >= 1,
        "the clients' subscribers"
    );

    let released = Instant::now();
    long.unlock().unwrap();
    let granted = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiter got its permit");
    let permit = join_within(waiter, Duration::from_secs(5), "waiter");
    eprintln!(
        "permit learned {:.0} ms after the release",
        ms(granted - released)
    );
    assert!(
        granted - released < Duration::from_millis(2500),
        "not from the heartbeat (the waiter polled when the other lease ran out)"
    );
    // The other holder's lease runs out at Redis (after this client's
    // count of it would have).
    let theirs_gone = || semaphore.status(10).unwrap().holder_count == 1;
    assert!(wait_until(Duration::from_secs(10), theirs_gone));
    let status = semaphore.status(10).unwrap();
    let ours = &status.holders[0];
    assert_eq!(ours.who.client_id(), client.id(), "{status:?}");
    let left = ours.remaining_lease.unwrap_or_default();
    assert!(left > Duration::from_secs(10), "{status:?}");
    assert!(
        !permit.is_lease_lost(),
        "the permit counted the other holder's lease: lost, while Redis holds it {left:?} more"
    );
    set_acl(&mut conn, "+subscribe");
    permit.unlock().unwrap();
    drop(short);
}

/// A client of `server` as the ACL user `fairlock` (made on `conn`), whose
/// rules a test can then change ([`set_acl`]): a 30 s lease, and
/// `waiter_timeout`.
fn acl_client(
    server: &RedisServer,
    conn: &mut redis::Connection,
    waiter_timeout: Duration,
) -> fairlock::Client {
    create_acl_user(conn, "pw");
    fairlock::Client::builder(&format!("redis://fairlock:pw@127.0.0.1:{}", server.port()))
        .lease(Duration::from_secs(30))
        .waiter_timeout(waiter_timeout)
        .build()
        .unwrap()
}

/// Adds `rule` to the ACL user `fairlock`'s (`-subscribe`, `+subscribe`).
fn set_acl(conn: &mut redis::Connection, rule: &str) {
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("fairlock")
        .arg(rule)
        .query(conn)
        .unwrap();
}

/// An upgrade whose claim is settled while its client hears no message
/// (its subscriber cut and refused, as above) learns it from the
/// watchdog's heartbeat of the claim, within about a period (500 ms), not
/// when the first lease would run out (30 s): the heartbeat finds the
/// claim gone from the queue, and the claim's poll finds the write.
#[test]
fn an_upgrade_settled_without_its_message_is_learned_from_a_heartbeat() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = acl_client(&server, &mut conn, Duration::from_millis(1500));
    let other = server.client();
    let name = "heartbeat-upgrade";
    let rw = other.fair_rwlock(name);
    let upgradable = client
        .fair_rwlock(name)
        .unbound()
        .upgradable_read()
        .unwrap();
    let read = rw.read().unwrap();
    let (tx, rx) = mpsc::channel();
    let upgrader = thread::spawn(move || {
        let write = upgradable.upgrade().unwrap();
        tx.send(Instant::now()).unwrap();
        write
    });
    assert!(wait_until(Duration::from_secs(5), || rw
        .queue_len()
        .unwrap()
        == 1));
    assert!(
        cut_subscribers(&server, &mut conn) >= 1,
        "the clients' subscribers"
    );

    let released = Instant::now();
    read.unlock().unwrap();
    let upgraded = rx
        .recv_timeout(Duration::from_secs(40))
        .expect("the upgrade got the write");
    let write = join_within(upgrader, Duration::from_secs(5), "upgrader");
    eprintln!(
        "upgrade learned {:.0} ms after the last read's release",
        ms(upgraded - released)
    );
    set_acl(&mut conn, "+subscribe");
    assert!(
        upgraded - released < Duration::from_millis(2500),
        "not from the heartbeat"
    );
    assert!(!write.is_lease_lost());
    write.unlock().unwrap();
}

/// A waiter that becomes the head of the queue as the one before it
/// leaves (its wait timed out) is told so, and polls when the holder's
/// fixed lease runs out (no release message comes): it takes the lock
/// then, not at its next heartbeat (10 s apart here).
#[test]
fn a_waiter_made_head_by_a_leave_takes_an_expired_lease_promptly() {
    let server = RedisServer::start();
    let slow_watchdog = || {
        (server.builder().lease(Duration::from_secs(60)))
            .waiter_timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    };
    let (holder, first, second) = (slow_watchdog(), slow_watchdog(), slow_watchdog());
    let fixed = holder
        .fair_mutex("made-head")
        .with_fixed_lease(Duration::from_millis(1000));
    let held = fixed.lock().unwrap();
    let expires = Instant::now() + Duration::from_millis(1000);
    let leaving = thread::spawn(move || {
        let mutex = first.fair_mutex("made-head");
        mutex
            .try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_none()
    });
    let queued = |n| wait_until(Duration::from_secs(5), || fixed.queue_len().unwrap() == n);
    assert!(queued(1), "the first waiter queued");
    let next = thread::spawn(move || {
        let guard = second.fair_mutex("made-head").lock().unwrap();
        (Instant::now(), guard.unlock())
    });
    assert!(queued(2), "the second waiter queued");
    assert!(join_within(
        leaving,
        Duration::from_secs(5),
        "the first waiter"
    ));
    let (got, unlocked) = join_within(next, Duration::from_secs(5), "the second waiter");
    unlocked.unwrap();
    let late = got.saturating_duration_since(expires);
    assert!(
        late < Duration::from_millis(500),
        "took it {late:?} after the lease ran out"
    );
    drop(held);
}
