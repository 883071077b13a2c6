//! fairlock on a Sentinel-managed master (one master, one replica, three
//! sentinels): the client follows the master across a failover, and a thread
//! waiting when the master dies still gets the lock, and a candidate
//! queued behind a leader then leads, a watch seeing it; Sentinels with a
//! password of their own serve only a client that has it.

use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder, ErrorKind, LeaderEvent};
use fairlock_test_support::relay::Relay;
use fairlock_test_support::sentinel::SentinelSet;
use fairlock_test_support::*;

fn builder(set: &SentinelSet) -> ClientBuilder {
    Client::builder(&set.url())
        // Long enough to outlast the failover (about 2 to 5 s here): the
        // hold and the queue entry survive it on the promoted replica.
        .lease(Duration::from_secs(15))
        .waiter_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
}

#[test]
fn a_thread_waiting_through_a_sentinel_failover_still_gets_the_lock() {
    let _serial = serial();
    let mut set = SentinelSet::start();
    let holder_client = builder(&set)
        .sync_replicas(1, Duration::from_millis(500))
        .build()
        .unwrap();
    let mutex = holder_client.fair_mutex("sentinel-failover");
    let holder = mutex.lock().unwrap();
    let held_token = holder.fencing_token();
    let waiter = LockThread::lock(
        builder(&set)
            .build()
            .unwrap()
            .fair_mutex("sentinel-failover"),
    );
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));

    // An election across the failover too: a leader (acknowledged by the
    // replica), a candidate queued behind it, a watch that has seen the
    // leader.
    let leadership = holder_client
        .election("sentinel-election")
        .with_value("before")
        .campaign()
        .unwrap();
    let before_term = leadership.term();
    let candidate = builder(&set)
        .build()
        .unwrap()
        .election("sentinel-election")
        .with_value("after");
    let campaigning = std::thread::spawn(move || candidate.campaign());
    let election = holder_client.election("sentinel-election");
    assert!(wait_until(Duration::from_secs(5), || election
        .queue_len()
        .unwrap()
        == 1));
    let mut watch = builder(&set)
        .build()
        .unwrap()
        .election("sentinel-election")
        .watch()
        .unwrap();
    match watch.next(Duration::from_secs(5)).unwrap() {
        Some(LeaderEvent::Leads(leader)) => assert_eq!(leader.term, before_term),
        other => panic!("the leader expected, not {other:?}"),
    }

    let (old_master, killed) = set.kill_master();
    let failover = set.wait_for_failover(old_master, Duration::from_secs(30));
    eprintln!(
        "sentinel: master {old_master} killed; failover done {:.0} ms later",
        ms(killed.elapsed())
    );
    let _ = failover;

    // The acquisition was acknowledged by the replica before lock()
    // returned, so the promoted replica still shows this hold.
    let status = retry_while_unreachable(|| mutex.status(5));
    let holder_seen = status
        .holder()
        .cloned()
        .expect("the hold survived the failover");
    assert_eq!(holder_seen.fencing_token, held_token);
    assert_eq!(status.queue_len, 1, "the waiter kept its place");
    assert!(!holder.is_lease_lost());

    // The promoted replica has no replica of its own: the release happens
    // on the new master, and its shortfall is reported.
    let released = Instant::now();
    assert_eq!(
        holder.unlock().map_err(|e| e.kind()),
        Err(ErrorKind::NotReplicated)
    );
    let (granted, token) =
        waiter.granted_within(Duration::from_secs(10), "the waiter across the failover");
    eprintln!(
        "sentinel: waiter granted {:.1} ms after the unlock on the new master ({:.0} ms after \
         the kill); token {token} > {held_token}",
        ms(granted.saturating_duration_since(released)),
        ms(granted - killed)
    );
    assert!(token > held_token);
    waiter.release("the waiter across the failover");

    // The leader resigns on the new master (its shortfall reported) and
    // the queued candidate leads; the watch, whose subscription died with
    // the old master, follows to the new one and sees the handover and
    // the vacancy after it, nothing missed.
    assert_eq!(
        leadership.unlock().map_err(|e| e.kind()),
        Err(ErrorKind::NotReplicated)
    );
    let next_leader = join_within(campaigning, Duration::from_secs(10), "the candidate")
        .expect("the candidate leads on the new master");
    let after_term = next_leader.term();
    assert!(after_term > before_term);
    next_leader.unlock().unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match retry_while_unreachable(|| watch.next(Duration::from_secs(5))) {
            Some(LeaderEvent::Leads(leader)) => seen.push((leader.term, leader.value)),
            Some(LeaderEvent::Vacant { ended: Some(term) }) => seen.push((term, "-".into())),
            other => panic!("{other:?} after {seen:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            (after_term, "after".to_owned()),
            (after_term, "-".to_owned())
        ]
    );

    // New clients find the new master through the sentinels.
    let fresh = builder(&set).build().unwrap();
    let guard = fresh.fair_mutex("sentinel-failover").lock().unwrap();
    assert!(guard.fencing_token() > token);
    guard.unlock().unwrap();
}

#[test]
fn a_sentinel_url_naming_an_unknown_master_is_a_clear_error() {
    let _serial = serial();
    let set = SentinelSet::start();
    let url = set
        .url()
        .replace(SentinelSet::master_name(), "no-such-master");
    let started = Instant::now();
    let err = Client::builder(&url)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap_err();
    eprintln!(
        "sentinel: unknown master: {err} ({:.0} ms)",
        ms(started.elapsed())
    );
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The Sentinels' own password in these tests; the data servers' user has
/// another (`DATA_PASSWORD`), and neither is sent where the other belongs.
const SENTINEL_PASSWORD: &str = "sentinel-s3cret";
const DATA_PASSWORD: &str = "data-s3cret";

/// `set`'s URL with the data servers' user `fairlock-data` in it.
fn url_with_data_user(set: &SentinelSet) -> String {
    set.url().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://fairlock-data:{DATA_PASSWORD}@"),
        1,
    )
}

#[test]
fn sentinels_with_a_password_serve_only_a_client_that_has_it_also_across_a_failover() {
    let _serial = serial();
    let mut set = SentinelSet::start_with_password(SENTINEL_PASSWORD);
    // The data servers know a user of their own, with another password;
    // their `default` user stays open for the test's own connections.
    for server in set.servers() {
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("fairlock-data")
            .arg(&["on", &format!(">{DATA_PASSWORD}"), "~*", "&*", "+@all"])
            .query(&mut server.conn())
            .unwrap();
    }
    let url = url_with_data_user(&set);

    // Without the Sentinels' password, or with a wrong one (the URL's
    // credentials are the master's, never the Sentinels'): a typed error
    // at once, naming the Sentinels' refusal.
    let connect_timeout = Duration::from_secs(1);
    for (what, password) in [
        ("no sentinel password", None),
        ("a wrong sentinel password", Some("wrong-s3cret")),
        ("the data password", Some(DATA_PASSWORD)),
    ] {
        let mut builder = Client::builder(&url)
            .connect_timeout(connect_timeout)
            .lease(Duration::from_secs(15));
        if let Some(password) = password {
            builder = builder.sentinel_password(password);
        }
        let started = Instant::now();
        let err = builder.build().unwrap_err();
        let took = started.elapsed();
        let bound = connect_timeout + Duration::from_secs(1);
        let chain = error_chain(&err);
        eprintln!(
            "sentinel auth, {what}: {:?} after {took:?}: {chain}",
            err.kind()
        );
        assert!(took < bound, "{what}: {took:?}");
        // Refused credentials: retrying cannot help, and the message
        // names the setting that is the Sentinels' own.
        assert_eq!(err.kind(), ErrorKind::Auth, "{what}: {chain}");
        assert!(!err.is_retryable(), "{what}");
        assert!(
            err.to_string().contains("sentinel_password"),
            "{what}: {err}"
        );
        let lower = chain.to_lowercase();
        assert!(
            ["noauth", "wrongpass", "authentication", "password"]
                .iter()
                .any(|word| lower.contains(word)),
            "{what}: the refusal is not named: {chain}"
        );
        for secret in [SENTINEL_PASSWORD, DATA_PASSWORD, "wrong-s3cret"] {
            assert!(!chain.contains(secret), "{what}: a password shown: {chain}");
        }
    }

    // With it: two clients lock and hand the lock over.
    let with_password = || {
        Client::builder(&url)
            .sentinel_password(SENTINEL_PASSWORD)
            .lease(Duration::from_secs(15))
            .waiter_timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Duration::from_secs(2))
    };
    let started = Instant::now();
    let a = with_password().build().expect("the sentinels' password");
    eprintln!(
        "sentinel auth: client built in {:.0} ms",
        ms(started.elapsed())
    );
    assert!(!format!("{a:?}").contains(SENTINEL_PASSWORD));
    let b = with_password().build().unwrap();
    let mutex = a.fair_mutex("sentinel-auth");
    let guard = mutex.lock().unwrap();
    let next = b.fair_mutex("sentinel-auth");
    let (handoff, _) = hand_over(guard, &mutex, next, Duration::from_secs(5), "the waiter");
    eprintln!("sentinel auth: handoff in {:.1} ms", ms(handoff));

    // The Sentinels, password-protected among themselves too, still fail
    // over; both clients and a new one find the new master through them.
    let (old_master, killed) = set.kill_master();
    set.wait_for_failover(old_master, Duration::from_secs(30));
    eprintln!(
        "sentinel auth: failover done {:.0} ms after the kill",
        ms(killed.elapsed())
    );
    for client in [&a, &b] {
        let guard = retry_while_unreachable(|| client.fair_mutex("sentinel-auth").lock());
        guard.unlock().unwrap();
    }
    let fresh = with_password().build().unwrap();
    fresh
        .fair_mutex("sentinel-auth")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
}

/// The master's credentials in a Sentinel URL, reserved characters
/// percent-encoded as in any `redis://` URL (docs/security.md says to):
/// they were sent as written, `%40` and all, so the master refused them
/// (`Auth`); they are decoded now, as the redis crate decodes a
/// `redis://` URL's.
#[test]
fn a_sentinel_urls_percent_encoded_password_reaches_the_master_decoded() {
    let _serial = serial();
    let set = SentinelSet::start();
    let password = "p@ss:w/rd%#?&=s3cret";
    for server in set.servers() {
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("fairlock-data")
            .arg(&["on", &format!(">{password}"), "~*", "&*", "+@all"])
            .query(&mut server.conn())
            .unwrap();
    }
    let encoded: String = password
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' | '~' => c.to_string(),
            other => format!("%{:02X}", other as u32),
        })
        .collect();
    let url = set.url().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://fairlock-data:{encoded}@"),
        1,
    );
    let client = Client::builder(&url)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_else(|err| panic!("{:?}: {err}", err.kind()));
    let mutex = client.fair_mutex("sentinel-encoded");
    mutex.lock().unwrap().unlock().unwrap();
}

#[test]
fn sentinel_credentials_are_checked_before_any_io() {
    // No server listens on these ports: each refusal comes from build's
    // checks alone.
    let sentinel_url = "redis+sentinel://127.0.0.1:1,127.0.0.1:2/fairlock-master";
    let cases: [(&str, ClientBuilder); 5] = [
        (
            "an empty password",
            Client::builder(sentinel_url).sentinel_password(""),
        ),
        (
            "an empty user",
            Client::builder(sentinel_url)
                .sentinel_username("")
                .sentinel_password("pw"),
        ),
        (
            "a user without a password",
            Client::builder(sentinel_url).sentinel_username("someone"),
        ),
        (
            "one server's url",
            Client::builder("redis://127.0.0.1:1").sentinel_password("pw"),
        ),
        (
            "a cluster's url",
            Client::builder("redis+cluster://127.0.0.1:1,127.0.0.1:2").sentinel_password("pw"),
        ),
    ];
    for (what, builder) in cases {
        let started = Instant::now();
        let err = builder.build().unwrap_err();
        eprintln!("sentinel credentials, {what}: {err}");
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err:?}");
        assert!(started.elapsed() < Duration::from_millis(100), "{what}");
    }
}

/// A Sentinel that accepts and never answers (a stopped process, a link
/// that stalls), first in the URL, neither holds up a client that the
/// other Sentinels can serve nor blocks it for longer than its timeouts:
/// the lookup asks the next one once the connect or command timeout has
/// passed.
#[test]
fn a_stalled_sentinel_is_passed_over_within_the_timeouts() {
    let _serial = serial();
    let set = SentinelSet::start();
    let first = set.sentinels()[0].port();
    let relay = Relay::start(first);
    relay.stall();
    let url = set.url().replacen(
        &format!("127.0.0.1:{first},"),
        &format!("127.0.0.1:{},", relay.port()),
        1,
    );
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let building = std::thread::spawn(move || {
        Client::builder(&url)
            .connect_timeout(timeout)
            .command_timeout(timeout)
            .build()
    });
    let client = join_within(building, Duration::from_secs(10), "a client built")
        .expect("the other sentinels name the master");
    let took = started.elapsed();
    eprintln!(
        "sentinel: client built past a stalled sentinel in {:.0} ms",
        ms(took)
    );
    // The lookups of the first connection, the pool's and the
    // subscriber's each wait at most a command timeout for the stalled one.
    assert!(took < Duration::from_secs(4), "{took:?}");
    let started = Instant::now();
    let guard = client.fair_mutex("sentinel-stalled").lock().unwrap();
    guard.unlock().unwrap();
    eprintln!(
        "sentinel: lock and unlock past a stalled sentinel in {:.0} ms",
        ms(started.elapsed())
    );
    drop(client);
    relay.resume();
}

/// A master that stops answering (a stopped process, a partition), not
/// one that dies: the Sentinels fail it over, and the client's calls must
/// follow them to the new master once a call timed out on the old one,
/// not go on timing out on pooled connections to it (which nothing closes
/// and which never hear a `READONLY`) until the pool's 30 min lifetime
/// ends them.
#[test]
fn calls_follow_a_failover_away_from_a_master_that_stopped_answering() {
    let _serial = serial();
    let set = SentinelSet::start();
    let timeout = Duration::from_millis(500);
    let client = Client::builder(&set.url())
        .lease(Duration::from_secs(15))
        .connect_timeout(timeout)
        .command_timeout(timeout)
        .build()
        .unwrap();
    let mutex = client.fair_mutex("sentinel-stopped");
    mutex.lock().unwrap().unlock().unwrap();

    let (old_master, stopped) = set.stop_master();
    let err = mutex.try_lock().map(|_| ()).unwrap_err();
    eprintln!("sentinel: a call to the stopped master: {err}");
    assert!(err.is_connection(), "{err:?}");
    set.wait_for_failover(old_master, Duration::from_secs(30));
    let failed_over = Instant::now();

    let mut failures = Vec::new();
    let guard = loop {
        match mutex.try_lock() {
            Ok(Some(guard)) => break guard,
            Ok(None) => panic!("the lock is held on the new master"),
            Err(err) if err.is_connection() && failed_over.elapsed() < Duration::from_secs(10) => {
                failures.push(err.to_string());
            }
            Err(err) => {
                panic!(
                    "no call reached the new master within 10 s of the failover ({} failed, \
                     the last: {err})",
                    failures.len()
                );
            }
        }
    };
    eprintln!(
        "sentinel: a call reached the new master {:.0} ms after the failover, after {} \
         failed: {failures:?}",
        ms(failed_over.elapsed()),
        failures.len()
    );
    guard.unlock().unwrap();
    drop(stopped);
}

/// A master stopped (`SIGSTOP`) and failed over closes no connection, so a
/// client's wake-up subscription to it hears nothing more while it stays
/// stopped: every handoff would wait for its waiter's next heartbeat. A
/// watchdog round (or a call) that got no reply in time has the
/// subscriber ask the Sentinels again, as the pool does.
#[test]
fn wake_ups_follow_a_failover_away_from_a_master_that_stopped_answering() {
    let _serial = serial();
    let set = SentinelSet::start();
    let timeout = Duration::from_millis(500);
    // A watchdog round every 2 s; a lease that outlasts the failover.
    let build = || {
        Client::builder(&set.url())
            .lease(Duration::from_secs(15))
            .waiter_timeout(Duration::from_secs(6))
            .connect_timeout(timeout)
            .command_timeout(timeout)
            .build()
            .unwrap()
    };
    let (a, b) = (build(), build());
    let name = "sentinel-stopped-wake";
    let guard = a.fair_mutex(name).lock().unwrap();
    let waiter = LockThread::lock(b.fair_mutex(name));
    assert!(wait_until(Duration::from_secs(5), || a
        .fair_mutex(name)
        .queue_len()
        .unwrap()
        == 1));

    let (old_master, _stopped) = set.stop_master();
    set.wait_for_failover(old_master, Duration::from_secs(30));
    let failed_over = Instant::now();
    let new_master = set.master_port();
    let channels = || -> Vec<String> {
        redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("fairlock:wake:*")
            .query(&mut set.conn_to(new_master))
            .unwrap()
    };
    let both = wait_until(Duration::from_secs(10), || channels().len() == 2);
    eprintln!(
        "sentinel: {} of 2 clients' wake-up channels subscribed on the new master {:.0} ms after \
         the failover",
        channels().len(),
        ms(failed_over.elapsed())
    );
    assert!(
        both,
        "the wake-up subscriptions stayed on the stopped master"
    );
    let released = Instant::now();
    guard.unlock().unwrap();
    let (granted, _) = waiter.granted_within(Duration::from_secs(5), "the waiter");
    let took = granted.saturating_duration_since(released);
    eprintln!("sentinel: handoff on the new master {:.1} ms", ms(took));
    assert!(took < Duration::from_millis(500), "{took:?}: not woken");
    waiter.release("the waiter");
}

/// When the Sentinels know the master's name but give no master to use
/// (they flag it down, or the server they name answers as a replica), a
/// lookup says so: not that the name is unknown, which sends its reader
/// to the URL while a failover is under way. Either passes: `Connection`,
/// retryable.
#[test]
fn a_lookup_that_finds_no_usable_master_says_why() {
    let _serial = serial();
    let set = SentinelSet::start();
    let timeout = Duration::from_millis(500);
    let build = || {
        Client::builder(&set.url())
            .connect_timeout(timeout)
            .command_timeout(timeout)
            .build()
            .map(drop)
            .unwrap_err()
    };
    let check = |what: &str, err: fairlock::Error, says: &str| {
        let chain = error_chain(&err);
        eprintln!("sentinel, {what}: {chain}");
        assert_eq!(err.kind(), ErrorKind::Connection, "{what}: {chain}");
        assert!(err.is_retryable(), "{what}");
        assert!(chain.contains(says), "{what}: {chain}");
        assert!(!chain.contains("not found"), "{what}: {chain}");
    };
    let master = set.master_port();
    let replica = (set.servers().iter().map(|s| s.port()))
        .find(|&port| port != master)
        .unwrap();

    // The master stopped and flagged down by every Sentinel, a quorum out
    // of reach keeping them from failing it over.
    let flagged_down = |sentinel: &fairlock_test_support::sentinel::Sentinel| {
        let fields: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(SentinelSet::master_name())
            .query(&mut sentinel.conn())
            .unwrap();
        let flags = fields.iter().skip_while(|f| *f != "flags").nth(1);
        flags.is_some_and(|flags| flags.contains("s_down"))
    };
    for sentinel in set.sentinels() {
        let () = redis::cmd("SENTINEL")
            .arg("SET")
            .arg(SentinelSet::master_name())
            .arg("quorum")
            .arg(4)
            .query(&mut sentinel.conn())
            .unwrap();
    }
    let (_, stopped) = set.stop_master();
    assert!(wait_until(Duration::from_secs(10), || set
        .sentinels()
        .iter()
        .all(flagged_down)));
    check("the master flagged down", build(), "down");
    drop(stopped);
    assert!(wait_until(Duration::from_secs(10), || !set
        .sentinels()
        .iter()
        .any(flagged_down)));

    // The master turned replica of its replica behind the Sentinels' back.
    let () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut set.conn_to(replica))
        .unwrap();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(replica)
        .query(&mut set.conn_to(master))
        .unwrap();
    check("the master named a replica", build(), "replica");
}

/// With every Sentinel down and the master up, what cannot be reached is
/// named: the Sentinels, not "redis", which answers (an operator sent to
/// the data server finds it well). Pooled connections still serve.
#[test]
fn with_every_sentinel_down_the_error_names_the_sentinels() {
    let _serial = serial();
    let mut set = SentinelSet::start();
    let timeout = Duration::from_millis(500);
    let url = set.url();
    let build = || {
        Client::builder(&url)
            .connect_timeout(timeout)
            .command_timeout(timeout)
            .build()
    };
    let client = build().unwrap();
    let mutex = client.fair_mutex("sentinels-down");
    mutex.lock().unwrap().unlock().unwrap();
    for sentinel in set.sentinels_mut() {
        sentinel.kill();
    }
    mutex.lock().unwrap().unlock().unwrap();
    // The master closes the client's connections: new ones need a lookup.
    let () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut set.servers()[0].conn())
        .unwrap();
    let started = Instant::now();
    let called = mutex.try_lock().map(drop).unwrap_err();
    let took = started.elapsed();
    let built = build().map(drop).unwrap_err();
    for (what, err) in [("a call", called), ("a build", built)] {
        let chain = error_chain(&err);
        eprintln!("sentinels down, {what}: {chain}");
        assert_eq!(err.kind(), ErrorKind::Connection, "{what}: {chain}");
        assert!(err.is_retryable(), "{what}");
        assert!(
            err.to_string().contains("asking the sentinel at"),
            "{what}: {err}"
        );
    }
    assert!(took < timeout + Duration::from_millis(300), "{took:?}");
}

/// With `sync_replicas`, a failover to a replica that has no replica of
/// its own: every renewal is answered but acknowledged by none, so the
/// holder counts its lease out by its last acknowledged renewal (within
/// its lease of the kill), and its unlock says so, naming the replicas,
/// not a stalled redis or a paused process; the waiter queued before, its
/// grant acknowledged by none either, gets `NotReplicated`.
#[test]
fn a_hold_failed_over_to_a_master_without_replicas_is_lost_for_want_of_them() {
    let _serial = serial();
    let mut set = SentinelSet::start();
    let (lease, timeout) = (Duration::from_secs(3), Duration::from_millis(500));
    let build = || {
        Client::builder(&set.url())
            .lease(lease)
            .sync_replicas(1, Duration::from_millis(300))
            .connect_timeout(timeout)
            .command_timeout(timeout)
            .build()
            .unwrap()
    };
    let name = "sentinel-sync-lost";
    let (holder, waiter) = (build().fair_mutex(name), build().fair_mutex(name));
    let guard = holder.lock().unwrap();
    let waiting = std::thread::spawn(move || waiter.lock().map(drop));
    assert!(wait_until(Duration::from_secs(5), || holder
        .queue_len()
        .unwrap()
        == 1));
    let (old_master, killed) = set.kill_master();
    set.wait_for_failover(old_master, Duration::from_secs(30));
    let end = guard.lease_signal().wait_timeout(Duration::from_secs(10));
    let lost_after = killed.elapsed();
    eprintln!(
        "sentinel, sync: {end:?} {:.0} ms after the kill",
        ms(lost_after)
    );
    assert_eq!(end, Some(fairlock::LeaseEnd::Lost));
    assert!(
        lost_after < lease + Duration::from_millis(500),
        "{lost_after:?}"
    );
    let err = guard.unlock().unwrap_err();
    eprintln!("sentinel, sync: the unlock: {err}");
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err:?}");
    assert!(err.to_string().contains("replicas"), "{err}");
    let handed = join_within(waiting, Duration::from_secs(5), "the waiter");
    assert_eq!(handed.map_err(|e| e.kind()), Err(ErrorKind::NotReplicated));
}

/// A master that stopped answering, which the Sentinels still name (not
/// flagged down yet): each Sentinel asked names it, and a lookup that
/// asked it again for each waited a command timeout per Sentinel, so a
/// build and a watch's subscription, each saying "no reply within 500
/// ms", took 1.5 s. Asked once per lookup, the wait is one timeout.
#[test]
fn a_stalled_master_named_by_every_sentinel_costs_a_lookup_one_timeout() {
    let _serial = serial();
    let set = SentinelSet::start();
    let timeout = Duration::from_millis(500);
    let build = || {
        Client::builder(&set.url())
            .connect_timeout(timeout)
            .command_timeout(timeout)
            .build()
    };
    let client = build().unwrap();
    let election = client.election("sentinel-stalled-named");
    // Not flagged down, nor failed over, while the test lasts.
    for sentinel in set.sentinels() {
        let () = redis::cmd("SENTINEL")
            .arg("SET")
            .arg(SentinelSet::master_name())
            .arg("down-after-milliseconds")
            .arg(30_000)
            .query(&mut sentinel.conn())
            .unwrap();
    }
    let (_, stopped) = set.stop_master();
    let bound = timeout + Duration::from_millis(300);
    let started = Instant::now();
    let built = build().map(drop).unwrap_err();
    let took = started.elapsed();
    eprintln!("sentinel, a stalled master: build {took:?}: {built}");
    assert!(built.is_connection() && took < bound, "{took:?}: {built}");
    let started = Instant::now();
    let watched = election.watch().map(drop).unwrap_err();
    let took = started.elapsed();
    eprintln!("sentinel, a stalled master: watch {took:?}: {watched}");
    assert!(
        watched.is_connection() && took < bound,
        "{took:?}: {watched}"
    );
    drop(stopped);
}

/// A call whose request its own deadline cut short (the master busy for
/// 150 ms with someone's script, a `try_lock_for(20 ms)`) may have met a
/// master only busy for a moment: its own connection goes, not every
/// pooled one (64 idle here), each replaced through a lookup of the
/// Sentinels (before: 62-70 connections to the master for 5 such calls;
/// now 14).
#[test]
fn a_call_cut_short_by_its_deadline_replaces_only_its_own_connection() {
    let _serial = serial();
    let set = SentinelSet::start();
    let timeout = Duration::from_millis(500);
    let client = (Client::builder(&set.url()))
        .connect_timeout(timeout)
        .command_timeout(timeout)
        .pool_size(64)
        .build()
        .unwrap();
    let mutex = client.fair_mutex("sentinel-cut-short");
    let master = set.master_port();
    let received = || -> i64 {
        let info: String = (redis::cmd("INFO").arg("stats"))
            .query(&mut set.conn_to(master))
            .unwrap();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"));
        line.unwrap().trim().parse().unwrap()
    };
    // The pool opens its idle connections (min_idle: the pool size).
    assert!(wait_until(Duration::from_secs(5), || {
        let before = received();
        std::thread::sleep(Duration::from_millis(200));
        received() == before + 1
    }));
    let (before, cuts) = (received(), 5);
    for _ in 0..cuts {
        let mut busy = set.conn_to(master);
        let script = "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
                      while true do local n = redis.call('TIME') \
                      if n[1] * 1000000 + n[2] - s > 150000 then return 1 end end";
        let busy = std::thread::spawn(move || {
            let _: redis::RedisResult<i64> = redis::cmd("EVAL").arg(script).arg(0).query(&mut busy);
        });
        std::thread::sleep(Duration::from_millis(20));
        let err = mutex
            .try_lock_for(Duration::from_millis(20))
            .map(drop)
            .unwrap_err();
        assert!(err.is_connection(), "{err:?}");
        busy.join().unwrap();
        mutex.is_locked().unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    // Less each round's own connection for the script.
    let opened = received() - before - 1 - cuts;
    eprintln!("sentinel: {opened} connections to the master over {cuts} calls cut short");
    assert!(
        opened <= 8 * cuts,
        "{opened} connections for {cuts} calls cut short"
    );
}

/// Sentinels that refuse the client's credentials, one of them down: the
/// lookup reports the refusal (`Auth`, not retryable), whichever Sentinel
/// it asked last, not the down one's refused connection (`Connection`,
/// retryable: retrying cannot help).
#[test]
fn a_refusal_of_the_sentinels_is_reported_though_one_of_them_is_down() {
    let _serial = serial();
    let mut set = SentinelSet::start_with_password(SENTINEL_PASSWORD);
    let url = set.url();
    for down in [2, 0] {
        set.sentinels_mut()[down].kill();
        let err = (Client::builder(&url).connect_timeout(Duration::from_secs(1)))
            .build()
            .map(drop)
            .unwrap_err();
        eprintln!("sentinel auth, sentinel {down} down: {err}");
        assert_eq!(err.kind(), ErrorKind::Auth, "sentinel {down} down: {err}");
        assert!(!err.is_retryable());
    }
}
