//! Leader election on the fair queue, against a real server: candidates
//! in five processes lead in arrival order, a SIGKILLed leader is replaced
//! within its lease + 1 s and a resigning one at once (by the push message:
//! the successor's fallbacks are seconds away), each successor only after
//! its predecessor went, terms increase, and a watch sees every leader in
//! order; a leader cut off from Redis learns it lost before the next
//! candidate's campaign returns; and the API's
//! edges (no leader, values in status, invalid values refused before any
//! I/O, bounded and cancelled campaigns leave no queue entry, two
//! campaigns of one thread queue behind each other, a change that
//! published nothing is still seen by a watch, and one that lost its
//! messages reports every change from the election's history or says it
//! missed some, one whose read failed reads first on its next call, and
//! one after a restart from an older snapshot, or away across one that
//! lost the data, or past a vacancy the history dropped, says it missed
//! changes, and one returns what it learned while Redis is away).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use fairlock::__test_support::LockKeys;
use fairlock::{Client, ErrorKind, Leader, LeaderEvent, Leadership, LeaseEnd, Wait, WaitCanceller};
use fairlock_test_support::roles::candidate::{LEASE_MS, NAME, URL, VALUE, WAITER_TIMEOUT_MS};
use fairlock_test_support::*;

const CHILD: &str = env!("CARGO_BIN_EXE_fairlock-test-child");

/// A watch running on a thread of its own, sending every leader it
/// returns, until stopped.
struct Observer {
    /// Each leader, with when the watch returned it.
    leaders: mpsc::Receiver<(Instant, Leader)>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Observer {
    fn start(client: &Client, name: &str) -> Observer {
        let mut watch = client.election(name).watch().expect("the watch subscribes");
        let (tx, leaders) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match watch.next(Duration::from_millis(200)).expect("watch") {
                    Some(LeaderEvent::Leads(leader)) => {
                        let sent = tx.send((Instant::now(), leader));
                        if sent.is_err() {
                            return;
                        }
                    }
                    Some(LeaderEvent::Missed { after }) => {
                        panic!("the watch missed changes after term {after}")
                    }
                    // Vacancies between the leaders (the lease of a killed
                    // leader that ran out as nobody waited) are not counted.
                    _ => {}
                }
            }
        });
        Observer {
            leaders,
            stop,
            thread: Some(thread),
        }
    }

    /// The next `n` leaders the watch returned, with when, waiting up to
    /// `timeout`.
    fn take(&self, n: usize, timeout: Duration) -> Vec<(Instant, Leader)> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        while seen.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.leaders.recv_timeout(left) {
                Ok(leader) => seen.push(leader),
                Err(_) => panic!("the watch returned {seen:?} within {timeout:?}, not {n}"),
            }
        }
        seen
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            if !thread::panicking() {
                join_within(thread, Duration::from_secs(5), "the observer");
            }
        }
    }
}

fn queue_len(client: &Client, name: &str) -> usize {
    client.election(name).status(0).unwrap().queue_len
}

/// The `leads <term> <value>` event of `child`, within `timeout`: when it
/// was read, the term and the value.
fn leads(children: &mut Children, child: usize, timeout: Duration) -> (Instant, u64, String) {
    let event = children.expect_prefix(child, "leads ", timeout);
    let words = event.words();
    (
        event.at,
        words[1].parse().expect("a term"),
        words[2].to_owned(),
    )
}

#[test]
fn five_candidate_processes_lead_in_arrival_order_through_kills_and_resignations() {
    let _serial = serial();
    let server = RedisServer::start();
    let observer_client = server.client();
    let name = "scheduler";
    // Candidates 0 and 1 are SIGKILLed: a lease of 1 s, their successors
    // take over when it runs out. Candidates 2 and 3 resign, to 3 and 4,
    // whose fallbacks are made slow, so that only the push message can
    // hand them the lead within the bound: their watchdog (its heartbeat
    // would find the lock handed over) first runs min(lease, waiter
    // timeout)/3 = 20 s after their client was built, and they poll when
    // the resigning leader's 60 s lease would run out.
    let lease = Duration::from_secs(1);
    let slow = Duration::from_secs(60);
    let first_heartbeat = slow / 3;
    let resign_bound = Duration::from_secs(1);
    let settings = |i: usize| {
        if i < 2 {
            (lease, Duration::from_secs(2))
        } else {
            (slow, slow)
        }
    };
    let observer = Observer::start(&observer_client, name);
    let mut children = Children::new(CHILD);
    let values: Vec<String> = (0..5)
        .map(|i| format!("candidate-{i}@10.0.0.{i}:80"))
        .collect();
    let mut led: Vec<(u64, String)> = Vec::new();
    let mut led_at: Vec<Instant> = Vec::new();
    // When each candidate was started: its client, and its watchdog, were
    // built after.
    let mut started_at: Vec<Instant> = Vec::new();

    // Started one by one, each queued before the next starts: arrival
    // order is child order.
    for (i, value) in values.iter().enumerate() {
        let (child_lease, waiter_timeout) = settings(i);
        started_at.push(Instant::now());
        let child = children.spawn(
            "candidate",
            &[
                (URL, server.url()),
                (NAME, name.to_owned()),
                (VALUE, value.clone()),
                (LEASE_MS, child_lease.as_millis().to_string()),
                (WAITER_TIMEOUT_MS, waiter_timeout.as_millis().to_string()),
            ],
        );
        assert_eq!(child, i);
        children.expect_text(child, "ready", Duration::from_secs(20));
        if i == 0 {
            let (at, term, led_value) = leads(&mut children, 0, Duration::from_secs(10));
            assert_eq!(&led_value, value);
            led.push((term, led_value));
            led_at.push(at);
        } else {
            assert!(
                wait_until(Duration::from_secs(10), || queue_len(
                    &observer_client,
                    name
                ) == i),
                "candidate {i} never queued"
            );
        }
    }
    let status = observer_client.election(name).status(10).unwrap();
    let queued: Vec<_> = status.waiters.iter().map(|w| w.who.identity()).collect();
    let expected: Vec<_> = values[1..].iter().map(|v| Some(v.as_str())).collect();
    assert_eq!(queued, expected, "the candidates wait in arrival order");
    assert_eq!(
        status.holder().as_ref().and_then(|h| h.who.identity()),
        Some(values[0].as_str())
    );

    // Kill, kill, resign, resign: each time the next in arrival order
    // leads, and only after its predecessor went (a successor that led
    // before would be two leaders at once).
    let mut kill_delays = Vec::new();
    let mut resign_delays = Vec::new();
    for leader in 0..4 {
        let next = leader + 1;
        let killed = leader < 2;
        let (went, at, bound) = if killed {
            let went = children.kill(leader);
            let (at, term, value) = leads(&mut children, next, lease + Duration::from_secs(5));
            led.push((term, value));
            led_at.push(at);
            (went, at, lease + Duration::from_secs(1))
        } else {
            // Neither fallback of the next candidate could hand it the lead
            // within the bound from now: the claim below is the push
            // message's.
            assert!(
                Instant::now() + resign_bound < started_at[next] + first_heartbeat,
                "candidate {next}'s first heartbeat is near: too slow a start to tell \
                 the push message from it"
            );
            let asked = Instant::now();
            children.send(leader, "resign");
            let (at, term, value) = leads(&mut children, next, Duration::from_secs(5));
            children.expect_text(leader, "resigned ok", Duration::from_secs(5));
            led.push((term, value));
            led_at.push(at);
            (asked, at, resign_bound)
        };
        let how = if killed { "SIGKILLed" } else { "resigned" };
        assert!(
            at > went,
            "candidate {next} led {:?} before candidate {leader} was {how}",
            went - at
        );
        let delay = at - went;
        if killed {
            kill_delays.push(delay);
        } else {
            resign_delays.push(delay);
        }
        eprintln!(
            "election: candidate {leader} {how} -> candidate {next} leads {:.1} ms later",
            ms(delay)
        );
        assert!(
            delay <= bound,
            "candidate {next} led {delay:?} after candidate {leader} went (bound {bound:?})"
        );
        assert_eq!(led[next].1, values[next], "the next in arrival order leads");
    }
    children.send(4, "resign");
    children.expect_text(4, "resigned ok", Duration::from_secs(5));
    assert_eq!(observer_client.election(name).leader().unwrap(), None);

    for pair in led.windows(2) {
        assert!(pair[0].0 < pair[1].0, "terms strictly increase: {led:?}");
    }
    let seen = observer.take(5, Duration::from_secs(5));
    // When the watch returned each leader, against when the leader's
    // process said it leads (read from its stdout: either may come first).
    let lags: Vec<f64> = seen
        .iter()
        .zip(&led_at)
        .map(|((seen_at, _), led_at)| {
            let ahead = ms(seen_at.saturating_duration_since(*led_at));
            let behind = ms(led_at.saturating_duration_since(*seen_at));
            ((ahead - behind) * 10.0).round() / 10.0
        })
        .collect();
    let seen: Vec<(u64, String)> = seen.into_iter().map(|(_, l)| (l.term, l.value)).collect();
    assert_eq!(seen, led, "the watch saw every leader, in order");
    eprintln!(
        "election: the watch returned each leader {lags:?} ms after its process said it leads"
    );
    eprintln!(
        "election: replaced after SIGKILL (lease {lease:?}) in {:?} ms; after resign in {:?} ms",
        kill_delays
            .iter()
            .map(|d| ms(*d).round())
            .collect::<Vec<_>>(),
        resign_delays
            .iter()
            .map(|d| (ms(*d) * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_partitioned_leader_learns_it_lost_before_the_next_candidate_leads() {
    let _serial = serial();
    let server = RedisServer::start();
    let lease = Duration::from_millis(500);
    let second_client = server.builder().lease(lease).build().unwrap();
    let mut margins = Vec::new();
    for round in 0..5 {
        let name = format!("partitioned-{round}");
        let relay = Relay::start(server.port());
        // The allowance is what buys "before": the leader's count of its
        // lease ends this much before Redis's (50 ms, a tenth of the lease,
        // more than the default 1% + 2 ms).
        let leader_client = Client::builder(&relay.url())
            .lease(lease)
            .clock_drift(0.01, Duration::from_millis(50))
            .waiter_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_millis(500))
            .command_timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let leadership = leader_client
            .election(&name)
            .with_value("leader")
            .campaign()
            .unwrap();
        let signal = leadership.lease_signal();
        let leader_signal = signal.clone();
        let (ended_tx, ended_rx) = mpsc::channel();
        thread::spawn(move || {
            let end = signal.wait();
            let _ = ended_tx.send((Instant::now(), end));
        });

        let (second_tx, second_rx) = mpsc::channel();
        let second_election = second_client.election(&name);
        let second = thread::spawn(move || {
            let got = second_election
                .with_value("second")
                .try_campaign_for(Duration::from_secs(20))
                .unwrap()
                .expect("the second candidate leads");
            // What the leader's signal says as the next one leads: read
            // here, the moment it returns, not when some thread is next
            // scheduled.
            let said = leader_signal.ended();
            let _ = second_tx.send((Instant::now(), said));
            got
        });
        assert!(
            wait_until(Duration::from_secs(5), || queue_len(&second_client, &name)
                == 1),
            "the second candidate never queued"
        );

        let cut_at = Instant::now();
        relay.cut();
        let (second_at, said) = second_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the second candidate's campaign returns");
        assert_eq!(
            said,
            Some(LeaseEnd::Lost),
            "round {round}: the cut-off leader's signal did not say it lost when the next one led"
        );
        assert!(
            leadership.is_lease_lost(),
            "round {round}: the cut-off leader still believed it led when the next one did"
        );
        let (signal_at, end) = ended_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the lease signal fired");
        assert_eq!(end, LeaseEnd::Lost);
        eprintln!(
            "election: round {round}: link cut at 0, lease signal at {:.1} ms, next campaign returned at {:.1} ms",
            ms(signal_at - cut_at),
            ms(second_at - cut_at)
        );
        // The thread blocked on the signal is woken by the count's end, not
        // by a later event (a renewal's timeout, the heal). When it runs
        // again is the machine's to say: one kept off a busy machine's CPU
        // heard it 61 ms after the next leader's campaign returned, beyond
        // the 50 ms allowance. "Before" is what the signal said then (above).
        assert!(
            signal_at < second_at + lease,
            "round {round}: the lease signal came {:?} after the next leader's campaign returned",
            signal_at - second_at
        );
        margins.push(second_at.saturating_duration_since(signal_at));
        let second = join_within(second, Duration::from_secs(5), "the second candidate");
        assert!(second.term() > leadership.term());
        second.unlock().unwrap();
        relay.heal();
        let lost = leadership.unlock().unwrap_err();
        assert_eq!(lost.kind(), ErrorKind::LeaseLost);
        assert!(
            lost.to_string()
                .contains(&format!("the leadership of election {name:?} (term ")),
            "{lost}"
        );
        drop(leader_client);
    }
    let mut sorted = margins.clone();
    sorted.sort();
    eprintln!(
        "election: lease signal before the next campaign returned by {:.1}-{:.1} ms (lease {lease:?})",
        ms(sorted[0]),
        ms(sorted[sorted.len() - 1])
    );
}

#[test]
fn leader_values_status_and_invalid_values() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = server.client();
    let named = server.builder().identity("node-7.example").build().unwrap();
    let election = client.election("values");

    // Nobody leads.
    assert_eq!(election.leader().unwrap(), None);

    // An invalid value is refused before any I/O: nothing is written.
    let scripts_before = script_calls(&mut conn);
    for bad in ["", "two words", "tab\t", "é", "\u{7f}", &"v".repeat(257)] {
        let err = election.with_value(bad).campaign().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{bad:?}");
        assert!(err.to_string().contains("printable ASCII"), "{err}");
        let err = election
            .with_value(bad)
            .try_campaign_for(Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{bad:?}");
    }
    // A bad name: the watch too, as its doc says.
    let err = client.election("").watch().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidName, "{err}");
    assert_eq!(script_calls(&mut conn), scripts_before, "no script ran");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "no key written: {keys:?}");

    // The value rides in the owner id: the leader and every status show it.
    let longest = "v".repeat(fairlock::MAX_ELECTION_VALUE_LEN);
    let leadership = election.with_value("alpha@10.0.0.1:80").campaign().unwrap();
    assert_eq!(leadership.value(), "alpha@10.0.0.1:80");
    assert_eq!(leadership.name(), "values");
    let leader = election.leader().unwrap().expect("a leader");
    assert_eq!(leader.value, "alpha@10.0.0.1:80");
    assert_eq!(leader.term, leadership.term());
    assert_eq!(leader.who.client_id(), client.id());
    assert_eq!(leader.who.thread(), None, "a campaign is unbound");
    assert!(leader.remaining_lease.is_some_and(|l| l > Duration::ZERO));
    let waiter = {
        let election = named.election("values");
        let longest = longest.clone();
        thread::spawn(move || {
            election
                .with_value(&longest)
                .try_campaign_for(Duration::from_secs(20))
                .unwrap()
        })
    };
    assert!(wait_until(Duration::from_secs(5), || queue_len(
        &client, "values"
    ) == 1));
    let status = election.status(10).unwrap();
    assert_eq!(
        status.waiters[0].who.identity(),
        Some(longest.as_str()),
        "a waiting candidate shows its value"
    );
    // Its own keys: the mutex of the name is free and apart.
    assert!(!client.fair_mutex("values").is_locked().unwrap());
    let mutex = client.fair_mutex("values").lock().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(
        keys.iter().any(|k| k.ends_with(":elect:values")),
        "the election's own lock key: {keys:?}"
    );
    drop(mutex);

    // Resigning hands it to the next candidate at once.
    let term = leadership.term();
    leadership.unlock().unwrap();
    let next = join_within(waiter, Duration::from_secs(5), "the waiting candidate")
        .expect("the next candidate leads");
    assert!(next.term() > term);
    assert_eq!(election.leader().unwrap().unwrap().value, longest);
    // Dropping resigns too.
    drop(next);
    assert_eq!(election.leader().unwrap(), None);

    // campaign(): the client's identity, or its id without one.
    let by_identity = named.election("values").campaign().unwrap();
    assert_eq!(by_identity.value(), "node-7.example");
    assert_eq!(
        election.leader().unwrap().unwrap().who.identity(),
        Some("node-7.example")
    );
    by_identity.unlock().unwrap();
    let by_id = client.election("values").campaign().unwrap();
    assert_eq!(by_id.value(), client.id());
    by_id.unlock().unwrap();
}

#[test]
fn bounded_and_cancelled_campaigns_leave_no_entry_and_one_thread_queues_behind_itself() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = server.client();
    let election = client.election("bounded");
    let leading = election.with_value("first").campaign().unwrap();

    // The same thread campaigns again: not a re-entry, a candidate of its
    // own, queued behind the first until its timeout.
    let watcher = {
        let client = client.clone();
        thread::spawn(move || {
            wait_until(Duration::from_secs(5), || {
                queue_len(&client, "bounded") == 1
            })
        })
    };
    let started = Instant::now();
    let again = election
        .with_value("second")
        .try_campaign_for(Duration::from_millis(600))
        .unwrap();
    assert!(
        again.is_none(),
        "a second campaign of the leading thread waits"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(
        join_within(watcher, Duration::from_secs(10), "the watcher"),
        "the second campaign queued while it waited"
    );
    assert_eq!(
        queue_len(&client, "bounded"),
        0,
        "the timed-out campaign left"
    );
    let queue_key = election_queue_key(&mut conn);
    let entries: usize = redis::cmd("ZCARD")
        .arg(&queue_key)
        .query(&mut conn)
        .unwrap();
    assert_eq!(entries, 0, "no queue entry left in {queue_key}");

    // Cancelled from another thread: the same.
    let cancel = WaitCanceller::new();
    let canceller = {
        let (client, cancel) = (client.clone(), cancel.clone());
        thread::spawn(move || {
            assert!(wait_until(Duration::from_secs(5), || queue_len(
                &client, "bounded"
            ) == 1));
            cancel.cancel();
        })
    };
    let cancelled = election
        .with_value("third")
        .campaign_with(Wait::at_most(Duration::from_secs(20)).cancelled_by(&cancel))
        .unwrap();
    assert!(cancelled.is_none());
    join_within(canceller, Duration::from_secs(10), "the canceller");
    assert_eq!(
        queue_len(&client, "bounded"),
        0,
        "the cancelled campaign left"
    );

    // Once the first resigns, the same thread's next campaign leads at once.
    leading.unlock().unwrap();
    let second = election
        .with_value("second")
        .try_campaign_for(Duration::from_secs(5))
        .unwrap()
        .expect("leads");
    assert_eq!(second.value(), "second");
    assert!(!second.is_lease_lost());
    drop(second);
}

/// The queue key of the one election on the server.
fn election_queue_key(conn: &mut redis::Connection) -> String {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*:electq:*").query(conn).unwrap();
    match keys.as_slice() {
        [key] => key.clone(),
        // The queue key goes once empty: nothing is queued.
        [] => "fairlock:none:electq:none".to_owned(),
        more => panic!("one election queue expected: {more:?}"),
    }
}

/// The leader an event names (a panic for any other event).
fn leader_of(event: Option<LeaderEvent>) -> Leader {
    match event {
        Some(LeaderEvent::Leads(leader)) => leader,
        other => panic!("a leader expected, not {other:?}"),
    }
}

/// A vacancy after `term`, as an event says it.
fn vacant(term: u64) -> Option<LeaderEvent> {
    Some(LeaderEvent::Vacant { ended: Some(term) })
}

/// The README's watch loop, with a 100 ms timeout: it goes on past
/// timeouts with no change (`next` returns `None`; the `while let` the
/// README had ended there, silently) and reports the leader that comes
/// after them.
#[test]
fn the_readmes_watch_loop_goes_on_past_its_timeout() {
    let server = RedisServer::start();
    let client = server.client();
    let election = client.election("watched-past-timeouts");
    let mut watch = election.watch().unwrap();
    let campaigner = {
        let election = election.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(450));
            election.with_value("late").campaign().unwrap()
        })
    };
    let (mut quiet, mut events) = (0, Vec::new());
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(10), "{events:?}");
        let Some(event) = watch.next(Duration::from_millis(100)).unwrap() else {
            quiet += 1;
            continue;
        };
        match event {
            LeaderEvent::Leads(leader) => {
                events.push(format!("leads {}", leader.value));
                break;
            }
            other => events.push(other.to_string()),
        }
    }
    assert!(quiet >= 2, "{quiet} timeouts before the leader: {events:?}");
    assert_eq!(events, ["vacant", "leads late"], "{quiet} timeouts");
    drop(campaigner.join().unwrap());
}

#[test]
fn a_watch_returns_every_change_in_order_and_sees_one_that_published_nothing() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client();
    let election = client.election("watched");
    let mut watch = election.watch().unwrap();

    // Nobody leads, nobody ever did: the first event says so, then None
    // at timeout.
    let wait = Duration::from_secs(5);
    assert_eq!(
        watch.next(wait).unwrap(),
        Some(LeaderEvent::Vacant { ended: None })
    );
    let started = Instant::now();
    assert_eq!(watch.next(Duration::from_millis(300)).unwrap(), None);
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Two leaders in a row, the first resigning with nobody waiting, while
    // nobody calls next: both, in order, and the vacancy between.
    let a = election.with_value("a").campaign().unwrap();
    let term_a = a.term();
    a.unlock().unwrap();
    let b = election.with_value("b").campaign().unwrap();
    let term_b = b.term();
    let first = leader_of(watch.next(wait).unwrap());
    assert_eq!((first.term, first.value.as_str()), (term_a, "a"));
    assert_eq!(watch.next(wait).unwrap(), vacant(term_a));
    let second = leader_of(watch.next(wait).unwrap());
    assert_eq!((second.term, second.value.as_str()), (term_b, "b"));
    assert_eq!(second.who.client_id(), client.id());
    assert_eq!(
        watch.next(Duration::from_millis(200)).unwrap(),
        None,
        "nothing new"
    );

    // A new watch starts with the leader now.
    let mut fresh = election.watch().unwrap();
    let now = leader_of(fresh.next(wait).unwrap());
    assert_eq!(now.term, term_b);
    assert!(now.remaining_lease.is_some());
    drop(b);
    assert_eq!(watch.next(wait).unwrap(), vacant(term_b));
    assert_eq!(fresh.next(wait).unwrap(), vacant(term_b));
    assert_eq!(watch.next(Duration::from_millis(200)).unwrap(), None);

    // A leader whose message was lost: a client whose user may not publish
    // on the election's channel campaigns (its publish fails and is only
    // logged); a watch still returns it, from the read it makes at least
    // every min(lease, timeout): here its client's lease, 600 ms, in a 5 s
    // call that began (and read the election empty) before the campaign.
    drop(watch);
    let mut admin = server.conn();
    create_mute_user(&mut admin);
    let mute = Client::builder(&server.url_as("mute", "mute"))
        .build()
        .unwrap();
    let watch_lease = Duration::from_millis(600);
    let watcher = server.builder().lease(watch_lease).build().unwrap();
    let mut watch = watcher.election("watched").watch().unwrap();
    assert_eq!(watch.next(wait).unwrap(), vacant(term_b), "the state now");
    let reads_before = script_calls(&mut admin);
    let watching = thread::spawn(move || {
        let seen = watch.next(Duration::from_secs(5)).unwrap();
        (Instant::now(), seen)
    });
    assert!(
        wait_until(Duration::from_secs(5), || script_calls(&mut admin)
            > reads_before),
        "the watch never read the election"
    );
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let silent = mute
        .election("watched")
        .with_value("silent")
        .campaign()
        .unwrap();
    let campaigned = Instant::now();
    let denials = format!("{:?}", acl_denials(&mut admin));
    assert!(
        denials.contains("fairlock:election:watched"),
        "the mute client's publish was refused: {denials}"
    );
    let (seen_at, seen) = join_within(watching, Duration::from_secs(10), "the watch");
    let seen = leader_of(seen);
    assert_eq!((seen.term, seen.value.as_str()), (silent.term(), "silent"));
    let after = seen_at.saturating_duration_since(campaigned);
    eprintln!(
        "election: a leader that published nothing seen by a watch {:.0} ms after its campaign returned (watch lease {watch_lease:?}, call timeout 5 s)",
        ms(after)
    );
    assert!(
        after <= watch_lease + Duration::from_millis(500),
        "seen {after:?} after the campaign"
    );
    drop(silent);
}

/// Closes every subscribed connection of the server (a watch's among
/// them): what they were sent until they subscribe again is lost.
fn kill_subscriptions(admin: &mut redis::Connection) {
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(admin)
        .unwrap();
}

/// `n` leaders in a row, each handing over to the next (it queues behind
/// it, then the leader resigns), the last resigning with nobody waiting:
/// `n` leaders and one vacancy, `n + 1` changes. Their terms.
fn leaders_in_a_row(election: &fairlock::Election, n: usize) -> Vec<u64> {
    let mut terms = Vec::new();
    let mut leading = election.with_value("v0").campaign().unwrap();
    terms.push(leading.term());
    for i in 1..n {
        let next = election.with_value(&format!("v{i}"));
        let waiting = thread::spawn(move || next.campaign().unwrap());
        let queued = wait_until(Duration::from_secs(5), || {
            election.queue_len().unwrap() == 1
        });
        assert!(queued, "the next candidate queued");
        leading.unlock().unwrap();
        leading = join_within(waiting, Duration::from_secs(5), "the next candidate");
        terms.push(leading.term());
    }
    leading.unlock().unwrap();
    terms
}

/// A watch whose subscription is lost while leaders come and go (and
/// whose caller is away) reports every one of them, in order, each
/// handover and the vacancy at the end, from the election's history; past
/// ELECTION_HISTORY_LEN changes it says it missed some, then reports the
/// ones the history still holds. A campaign adds no command to the
/// election's scripts' round trip (one EVALSHA each, checked in
/// a_campaign_a_resign_and_a_drop_each_cost_the_client_one_command).
#[test]
fn a_watch_that_lost_its_messages_reports_every_change_from_the_history() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = server.client();
    let mut admin = server.conn();
    let election = client.election("history");
    let mut watch = election.watch().unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(
        watch.next(wait).unwrap(),
        Some(LeaderEvent::Vacant { ended: None })
    );

    // Five leaders while the watch is cut off: all five, each handed over
    // to the next, then the vacancy.
    kill_subscriptions(&mut admin);
    let terms = leaders_in_a_row(&election, 5);
    for (i, term) in terms.iter().enumerate() {
        let leader = leader_of(watch.next(wait).unwrap());
        assert_eq!((leader.term, leader.value), (*term, format!("v{i}")));
        assert_eq!(leader.remaining_lease, None, "known from the history");
    }
    assert_eq!(watch.next(wait).unwrap(), vacant(terms[4]));
    assert_eq!(watch.next(Duration::from_millis(100)).unwrap(), None);

    // ELECTION_HISTORY_LEN + 4 changes while it is cut off: it says it
    // missed some after the last term it knew, then reports the newest
    // ELECTION_HISTORY_LEN changes, in order.
    let kept = fairlock::ELECTION_HISTORY_LEN;
    kill_subscriptions(&mut admin);
    let more = leaders_in_a_row(&election, kept + 3);
    let history_len: usize = redis::cmd("LLEN")
        .arg(
            LockKeys::of_kind("fairlock", "history", fairlock::LockKind::Election)
                .unwrap()
                .all[2]
                .as_str(),
        )
        .query(&mut admin)
        .unwrap();
    assert_eq!(history_len, kept, "the history is capped");
    assert_eq!(
        watch.next(wait).unwrap(),
        Some(LeaderEvent::Missed { after: terms[4] })
    );
    // The newest `kept` changes: the last `kept - 1` leaders, the vacancy.
    for term in &more[more.len() - (kept - 1)..] {
        assert_eq!(leader_of(watch.next(wait).unwrap()).term, *term);
    }
    assert_eq!(watch.next(wait).unwrap(), vacant(*more.last().unwrap()));
    assert_eq!(watch.next(Duration::from_millis(100)).unwrap(), None);
}

#[test]
fn a_leadership_is_send_sync_and_resigned_on_another_thread() {
    let server = RedisServer::start();
    let client = server.client();
    let election = client.election("moved");
    let leadership: Leadership = election.with_value("mover").campaign().unwrap();
    let term = leadership.term();
    let resigned = thread::spawn(move || leadership.unlock());
    join_within(resigned, Duration::from_secs(5), "the resigning thread").unwrap();
    assert_eq!(election.leader().unwrap(), None);
    let next = election.with_value("after").campaign().unwrap();
    assert!(next.term() > term);
}

/// `cmdstat_<command>:calls=<n>` of every command the server ran so far.
fn command_calls(conn: &mut redis::Connection) -> std::collections::HashMap<String, i64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(":calls=")?;
            Some((name.to_owned(), rest.split(',').next()?.parse().ok()?))
        })
        .collect()
}

/// A campaign that leads at once, a resign and a drop each cost the client
/// one command, an EVALSHA (read on its way by a proxy): the scripts say
/// who leads and who resigned on the election's channel themselves, in the
/// same call. On the server (a server of this test's own), EVALSHA runs
/// once per call, and PUBLISH once per message the channel carried.
#[test]
fn a_campaign_a_resign_and_a_drop_each_cost_the_client_one_command() {
    let server = RedisServer::start();
    let relay = Relay::recording(server.port());
    let client = Client::builder(&relay.url()).build().unwrap();
    let election = client.election("counted");
    let mut admin = server.conn();
    let mut listener = server.conn();
    let mut channel = listener.as_pubsub();
    channel.subscribe("fairlock:election:counted").unwrap();
    channel
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut heard = || {
        let mut payloads = Vec::new();
        while let Ok(message) = channel.get_message() {
            payloads.push(message.get_payload::<String>().unwrap());
        }
        payloads
    };
    // Connections opened, scripts loaded, subscriptions made.
    election
        .with_value("warm")
        .campaign()
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(heard().len(), 2, "the warm-up's leader and resignation");

    let before = command_calls(&mut admin);
    let (campaign, leadership) = relay.during(|| election.with_value("one").campaign().unwrap());
    let term = leadership.term();
    let (resign, resigned) = relay.during(|| leadership.unlock());
    resigned.unwrap();
    let dropped = election.with_value("two").campaign().unwrap();
    let dropped_term = dropped.term();
    let (drop_cmds, ()) = relay.during(|| drop(dropped));
    let after = command_calls(&mut admin);
    let grew = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
    eprintln!(
        "election: commands from the client: campaign {campaign:?}, resign {resign:?}, drop {drop_cmds:?}"
    );
    let script = script_command();
    assert_eq!(campaign, [script], "one command per campaign");
    assert_eq!(resign, [script], "one command per resign");
    assert_eq!(drop_cmds, [script], "one command per drop");
    assert_eq!(election.leader().unwrap(), None, "the drop resigned");
    let messages = heard();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(messages[0].starts_with(&format!("{term} one {}:u", client.id())));
    assert_eq!(messages[1], format!("resigned {term}"));
    assert!(messages[2].starts_with(&format!("{dropped_term} two ")));
    assert_eq!(messages[3], format!("resigned {dropped_term}"));
    // The server ran one script call per call (two campaigns, a resign, a
    // drop) and one PUBLISH per message heard: none other than the
    // scripts'.
    assert_eq!(grew(&script.to_lowercase()), 4);
    assert_eq!(grew("publish"), 4);
}

/// A new leader campaigns, and `watch` sees it lead within 5 s.
pub(crate) fn assert_watch_goes_on(
    election: &fairlock::Election,
    watch: &mut fairlock::LeaderWatch,
) {
    let campaigner = election.with_value("after").campaign().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let leads = loop {
        assert!(Instant::now() < deadline, "no leader seen after the stall");
        if let Ok(Some(LeaderEvent::Leads(leader))) = watch.next(Duration::from_millis(500)) {
            break leader;
        }
    };
    assert_eq!(leads.value, "after");
    drop(campaigner);
}

/// A watch's `next(timeout)` returns within its timeout (and a request's
/// grace) when Redis stalls (`CLIENT PAUSE ALL`): its read of the election
/// at the timeout is given up as a lock's wait is, `None` (nothing seen in
/// time; the next call reads first), rather than failing after a command
/// timeout (1 s here).
#[test]
fn a_watch_returns_by_its_timeout_while_redis_stalls() {
    let server = RedisServer::start();
    let client = (server.builder())
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let election = client.election("watched-in-a-stall");
    let mut watch = election.watch().unwrap();
    let first = watch.next(Duration::from_secs(5)).unwrap();
    assert_eq!(first, Some(LeaderEvent::Vacant { ended: None }));
    let timeout = Duration::from_millis(200);
    let pause = Duration::from_millis(2000);
    pause_clients(&mut server.conn(), "ALL", pause);
    let started = Instant::now();
    let got = watch.next(timeout);
    let took = started.elapsed();
    eprintln!(
        "election: next({timeout:?}) in a stall: {got:?} after {:.0} ms",
        ms(took)
    );
    assert!(
        took <= timeout + Duration::from_millis(300),
        "next({timeout:?}) took {took:?}: {got:?}"
    );
    assert!(matches!(got, Ok(None)), "{got:?}");
    // Once the server runs again, the watch goes on.
    thread::sleep(pause.saturating_sub(started.elapsed()));
    assert_watch_goes_on(&election, &mut watch);
}

/// A watch started while Redis holds every client back (`CLIENT PAUSE
/// ALL`) cannot subscribe; its error names the election and the timeout in
/// words, as every call's does (before: "redis call timed out", the source
/// "Resource temporarily unavailable (os error 11)").
#[test]
fn a_watch_that_cannot_subscribe_in_a_stall_names_the_election() {
    let server = RedisServer::start();
    let client = server.stall_client();
    let name = "watch-unsubscribed";
    let election = client.election(name);
    let _paused = pause_clients(&mut server.conn(), "ALL", Duration::from_millis(2000));
    let started = Instant::now();
    let Err(err) = election.watch() else {
        panic!("a subscription in a stall");
    };
    let took = started.elapsed();
    eprintln!(
        "election: watch() in a stall: {err} after {:.0} ms",
        ms(took)
    );
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    let text = err.to_string();
    let named = format!("watch of election {name:?}: ");
    assert!(text.starts_with(&named), "no {named:?} in {text:?}");
    assert!(text.contains("no reply within 1000 ms"), "{text:?}");
    assert!(took < Duration::from_millis(1400), "{took:?}");
}

/// A watch whose subscription broke opens it again within its call's
/// timeout: the server answers the connections the client has (the
/// election is read) but not the new one (a relay holds it), so the
/// `SUBSCRIBE` went unanswered for a whole command timeout (`next(300 ms)`
/// failed with `Connection` after 1 s); it is now given up as the read
/// is, `None` by the timeout, and the next call opens it again.
#[test]
fn a_watch_opening_its_subscription_again_returns_by_its_timeout() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .command_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let election = client.election("watch-reopened");
    let mut watch = election.watch().unwrap();
    let first = watch.next(Duration::from_secs(5)).unwrap();
    assert_eq!(first, Some(LeaderEvent::Vacant { ended: None }));
    // The watch's connection is the newest subscribed one.
    relay.stall_new();
    let mut conn = server.conn();
    kill_newest_subscriber(&mut conn, |_| true);
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let got = watch.next(timeout);
    let took = started.elapsed();
    eprintln!(
        "election: next({timeout:?}) opening its subscription again, unanswered: \
         {got:?} after {:.0} ms",
        ms(took)
    );
    assert!(
        took <= timeout + Duration::from_millis(300),
        "next({timeout:?}) took {took:?}: {got:?}"
    );
    assert!(matches!(got, Ok(None)), "{got:?}");
    // With more than a command timeout to wait, it fails as unanswered,
    // naming the election.
    let err = watch.next(Duration::from_secs(3)).unwrap_err();
    relay.resume();
    eprintln!("election: then next(3 s): {err}");
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        err.to_string().contains("election \"watch-reopened\""),
        "{err}"
    );
    // The next call opens it again, and the watch goes on.
    assert_watch_goes_on(&election, &mut watch);
}

/// A read that failed (no reply within the command timeout, the call's own
/// timeout far off) after a message said the election changed: the next
/// call reads first, as the error says it tries again, and returns the
/// change at once; it waited for its periodic read before (here the
/// call's 2 s timeout).
#[test]
fn a_watch_whose_read_failed_reads_first_on_its_next_call() {
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let watcher = Client::builder(&relay.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut watch = watcher.election("read-failed").watch().unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(
        watch.next(wait).unwrap(),
        Some(LeaderEvent::Vacant { ended: None })
    );
    // Each way 400 ms: the message comes, the read it starts gets no reply
    // within the command timeout.
    relay.set_delay(Duration::from_millis(400));
    let client = server.client();
    let leading = client
        .election("read-failed")
        .with_value("new")
        .campaign()
        .unwrap();
    let err = watch.next(wait).unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    relay.set_delay(Duration::ZERO);
    let started = Instant::now();
    let seen = watch.next(Duration::from_secs(2)).unwrap();
    let took = started.elapsed();
    eprintln!(
        "election: after a read that failed ({err}), the next call returned {seen:?} after {:.0} ms",
        ms(took)
    );
    let seen = leader_of(seen);
    assert_eq!((seen.term, seen.value.as_str()), (leading.term(), "new"));
    assert!(took < Duration::from_millis(500), "seen after {took:?}");
}

/// A bound election: a leading thread's second campaign with its value
/// leads at once, with the same term (one candidate); with another value
/// it is another candidate, queued behind the first until its timeout, and
/// leaves the queue (the doc said every campaign of the thread led at once).
#[test]
fn a_bound_thread_is_one_candidate_per_value() {
    let server = RedisServer::start();
    let client = server.client();
    let election = client.election("bound-values").bound();
    let first = election.with_value("a").campaign().unwrap();
    let again = election
        .with_value("a")
        .try_campaign()
        .unwrap()
        .expect("re-entered");
    assert_eq!((again.term(), again.value()), (first.term(), "a"));
    let started = Instant::now();
    let wait = Duration::from_millis(300);
    let other = election.with_value("b").try_campaign_for(wait).unwrap();
    assert!(other.is_none(), "another value waits behind the first");
    assert!(started.elapsed() >= wait);
    assert_eq!(queue_len(&client, "bound-values"), 0, "and left the queue");
    drop((again, first));
    let next = election
        .with_value("b")
        .try_campaign()
        .unwrap()
        .expect("free");
    assert_eq!(next.value(), "b");
}

/// A server that comes back with older data (a restart from an RDB
/// snapshot taken before the last terms) gives out again terms a watch has
/// seen: the watch says it missed changes, then reports the leaders of
/// the election as it is now, rather than nothing until the terms pass
/// the newest it knew.
#[test]
fn a_watch_after_a_restart_from_an_older_snapshot_says_so_and_goes_on() {
    let mut server = RedisServer::start();
    let client = server.client();
    let election = client.election("snapshot");
    let mut watch = election.watch().unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(watch.next(wait).unwrap(), vacant_none());
    let mut terms = Vec::new();
    for value in ["a", "b", "c"] {
        let leading = election.with_value(value).campaign().unwrap();
        terms.push(leading.term());
        leading.unlock().unwrap();
        if value == "a" {
            let () = redis::cmd("SAVE").query(&mut server.conn()).unwrap();
        }
    }
    for term in &terms {
        assert_eq!(leader_of(watch.next(wait).unwrap()).term, *term);
        assert_eq!(watch.next(wait).unwrap(), vacant(*term));
    }
    server.kill();
    server.start_again();
    let again = retry_while_unreachable(|| election.with_value("d").try_campaign());
    let again = again.expect("nobody leads");
    assert_eq!(again.term(), terms[1], "a term given out again");
    let mut seen = Vec::new();
    let started = Instant::now();
    while started.elapsed() < wait {
        match watch.next(Duration::from_millis(500)) {
            Ok(Some(LeaderEvent::Leads(leader))) if leader.value == "d" => {
                seen.push(format!("leads d term {}", leader.term));
                break;
            }
            Ok(Some(event)) => seen.push(event.to_string()),
            Ok(None) | Err(_) => {}
        }
    }
    assert_eq!(
        seen,
        [
            format!("missed changes after term {}", terms[2]),
            format!("leads d term {}", terms[1])
        ]
    );
}

fn vacant_none() -> Option<LeaderEvent> {
    Some(LeaderEvent::Vacant { ended: None })
}

/// A watch whose caller is away while the leader it last read resigns, the
/// next leads, and Redis restarts empty (no persistence) before another
/// leads: the first change the history then holds follows no term (the
/// lock key was gone), which a fence life would explain only if nobody had
/// held the election since the watch's last read; it saw a leader then, so
/// it says it missed changes rather than going on as if nothing had come
/// between.
#[test]
fn a_watch_away_across_a_restart_that_lost_the_data_says_it_missed_changes() {
    let mut server = RedisServer::start();
    let client = server.client();
    let election = client.election("lost-data");
    let mut watch = election.watch().unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(watch.next(wait).unwrap(), vacant_none());
    let first = election.with_value("a").campaign().unwrap();
    let a = leader_of(watch.next(wait).unwrap());
    assert!(a.remaining_lease.is_some(), "read leading");
    // The caller away: the leader resigns, another leads, Redis restarts
    // empty, a third leads.
    first.unlock().unwrap();
    let second = election.with_value("b").campaign().unwrap();
    server.restart();
    let third = retry_while_unreachable(|| election.with_value("c").try_campaign());
    let third = third.expect("nobody leads after the restart");
    let mut seen = Vec::new();
    let started = Instant::now();
    while started.elapsed() < wait {
        match watch.next(Duration::from_millis(500)) {
            Ok(Some(LeaderEvent::Leads(leader))) if leader.value == "c" => {
                seen.push(format!("leads c term {}", leader.term));
                break;
            }
            Ok(Some(event)) => seen.push(event.to_string()),
            Ok(None) | Err(_) => {}
        }
    }
    assert_eq!(
        seen,
        [
            format!("missed changes after term {}", a.term),
            format!("leads c term {}", third.term())
        ],
        "b led term {} unreported",
        second.term()
    );
}

/// Changes a watch has learned and not returned yet come out while Redis
/// is away: its reads wait until they are all returned, rather than
/// failing each call that found a read due with `Connection`.
#[test]
fn a_watch_returns_what_it_learned_while_redis_is_away() {
    let mut server = RedisServer::start();
    let client = server.client();
    let election = client.election("learned");
    let mut watch = election.watch().unwrap();
    let step = Duration::from_millis(200);
    // The reads it must make are given 2 s (a read given 200 ms was given
    // up, `None`, on a busy machine): each returns once it is answered.
    let read = Duration::from_secs(2);
    assert_eq!(watch.next(read).unwrap(), vacant_none());
    // Three leaders in a row while the caller is away, then a vacancy.
    let terms = leaders_in_a_row(&election, 3);
    assert_eq!(leader_of(watch.next(read).unwrap()).term, terms[0]);
    server.kill();
    let mut rest = Vec::new();
    for _ in 0..3 {
        // Past the watch's periodic read (every min(lease, 200 ms)).
        thread::sleep(step + Duration::from_millis(50));
        rest.push(match watch.next(step) {
            Ok(Some(LeaderEvent::Leads(leader))) => format!("leads {}", leader.term),
            Ok(event) => format!("{event:?}"),
            Err(err) => err.to_string(),
        });
    }
    let expected = [
        format!("leads {}", terms[1]),
        format!("leads {}", terms[2]),
        format!("{:?}", vacant(terms[2])),
    ];
    assert_eq!(rest, expected);
    // Nothing learned is left: the next call's read fails, and its error
    // names the call made, the watch's next, not a status call. A read
    // whose pool opened no connection, nor failed to, in its 200 ms (a
    // busy machine) is given up as documented (`None`, nothing known):
    // the first of up to three calls that fails.
    let mut calls = Vec::new();
    let err = loop {
        match watch.next(step) {
            Err(err) => break err,
            Ok(event) if calls.len() < 2 => calls.push(event),
            Ok(event) => panic!("no read failed in three calls: {calls:?}, {event:?}"),
        }
    };
    assert!(calls.iter().all(Option::is_none), "{calls:?}");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let named = "watch of election \"learned\": ";
    assert!(err.to_string().starts_with(named), "{err}");
}

/// A watch that read a leader, then seventeen changes while it could not
/// read: the leader resigns with nobody waiting (a vacancy), then eight
/// candidates each lead and resign alone. The history keeps the newest
/// sixteen, which begin with a leader following the term the watch knew:
/// a handover would look the same, so the vacancy trimmed away must not
/// be skipped silently: the watch says it missed changes.
#[test]
fn a_watch_that_missed_a_vacancy_trimmed_from_the_history_says_so() {
    let server = RedisServer::start();
    let client = server.client();
    let mut admin = server.conn();
    let election = client.election("trimmed");
    let mut watch = election.watch().unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(watch.next(wait).unwrap(), vacant_none());
    let first = election.with_value("first").campaign().unwrap();
    assert_eq!(leader_of(watch.next(wait).unwrap()).term, first.term());
    kill_subscriptions(&mut admin);
    let known = first.term();
    first.unlock().unwrap();
    let mut terms = Vec::new();
    for i in 0..8 {
        let leading = election.with_value(&format!("v{i}")).campaign().unwrap();
        terms.push(leading.term());
        leading.unlock().unwrap();
    }
    let event = watch.next(wait).unwrap();
    assert_eq!(
        event,
        Some(LeaderEvent::Missed { after: known }),
        "17 changes after term {known}"
    );
    // Then the sixteen the history holds, in order.
    for term in terms {
        assert_eq!(leader_of(watch.next(wait).unwrap()).term, term);
        assert_eq!(watch.next(wait).unwrap(), vacant(term));
    }
    assert_eq!(watch.next(Duration::from_millis(100)).unwrap(), None);
}

/// A watch away while a leader came and went and the election's keys then
/// ran out (a fence life of 1 s after), then the next leads: a watch whose
/// client has the candidates' fence life says it missed changes before
/// the next leader. One whose client keeps fence keys longer (the default
/// 10 min) takes its read of 1 s before as recent, so the vacancy as one
/// the keys outlived, and reports the next leader alone, as the docs say
/// (its client's fence life is the one it judges by).
#[test]
fn a_watch_judges_an_absence_by_its_clients_fence_life() {
    let server = RedisServer::start();
    let fence_life = Duration::from_secs(1);
    let candidates = server.builder().fence_life(fence_life).build().unwrap();
    let election = candidates.election("fences");
    let keys = LockKeys::of_kind("fairlock", "fences", fairlock::LockKind::Election)
        .unwrap()
        .all;
    let wait = Duration::from_secs(5);
    let watchers = [(server.builder().fence_life(fence_life), true)];
    for (watcher, says_missed) in watchers.into_iter().chain([(server.builder(), false)]) {
        let mut watch = watcher.build().unwrap().election("fences").watch().unwrap();
        let first = watch.next(wait).unwrap();
        assert!(
            matches!(first, Some(LeaderEvent::Vacant { .. })),
            "{first:?}"
        );
        let first = election.with_value("a").campaign().unwrap();
        let a = leader_of(watch.next(wait).unwrap());
        first.unlock().unwrap();
        assert_eq!(watch.next(wait).unwrap(), vacant(a.term));
        // The caller away: b leads and resigns, the election's keys run
        // out (a fence life after), c leads.
        let second = election.with_value("b").campaign().unwrap();
        let b = second.term();
        second.unlock().unwrap();
        let gone = wait_until(wait, || {
            let count: usize = (redis::cmd("EXISTS").arg(&keys))
                .query(&mut server.conn())
                .unwrap();
            count == 0
        });
        assert!(gone, "the election's keys ran out");
        let third = election.with_value("c").campaign().unwrap();
        let mut seen = Vec::new();
        while let Some(event) = watch.next(Duration::from_millis(500)).unwrap() {
            seen.push(event);
        }
        let c = leader_of(seen.last().cloned()).term;
        assert_eq!(c, third.term());
        drop(third);
        eprintln!("election: b led term {b}, unseen; the watch then said {seen:?}");
        let missed = LeaderEvent::Missed { after: a.term };
        assert_eq!(seen.len(), 1 + usize::from(says_missed), "{seen:?}");
        assert_eq!(seen[0] == missed, says_missed, "{seen:?}");
    }
}

/// A watch whose subscription's link died without a word (a NAT or a
/// load balancer forgot the idle connection: the server dropped it, the
/// client reads nothing, not even its end, until it sends) is opened
/// again, so a new leader is heard of at once: quiet for a watchdog period
/// (1 s here), the watch asks the server to confirm its subscription.
/// Before, it stayed deaf, each change learned at its periodic read
/// (every `min(lease, timeout)`: 10 s here).
#[test]
fn a_watch_whose_link_died_silently_subscribes_again() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let name = "silent";
    let mut watch = client.election(name).watch().unwrap();
    let _ = watch.next(Duration::from_millis(100)).unwrap();
    let mut conn = server.conn();
    let mut subscribed = || {
        let counts: (String, i64) = (redis::cmd("PUBSUB").arg("NUMSUB"))
            .arg(format!("fairlock:election:{name}"))
            .query(&mut conn)
            .unwrap();
        counts.1 == 1
    };
    relay.forget();
    assert!(wait_until(Duration::from_secs(5), || !subscribed()));
    let forgotten = Instant::now();
    let (tx, rx) = mpsc::channel();
    let watcher = thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Some(LeaderEvent::Leads(leader)) = watch.next(Duration::from_secs(10)).unwrap() {
                tx.send((Instant::now(), leader.value)).unwrap();
                return;
            }
        }
    });
    let back = wait_until(Duration::from_secs(6), &mut subscribed);
    eprintln!(
        "watch subscribed again: {back}, {:.0} ms after the link was forgotten",
        forgotten.elapsed().as_secs_f64() * 1000.0
    );
    let other = server.client();
    let leadership = other.election(name).with_value("next").campaign().unwrap();
    let led = Instant::now();
    let (heard, value) = rx.recv_timeout(Duration::from_secs(25)).unwrap();
    let late = heard.saturating_duration_since(led);
    eprintln!("new leader heard {late:?} after it led");
    assert_eq!(value, "next");
    assert!(
        back,
        "not subscribed again within 6 s (watchdog period 1 s)"
    );
    assert!(late < Duration::from_millis(500), "{late:?}");
    join_within(watcher, Duration::from_secs(5), "watcher");
    drop(leadership);
}

/// A watch that read a leader, then finds the election's keys gone (Redis
/// lost its data: FLUSHALL here) with nobody leading: it says it missed
/// changes, then the vacancy it read, with no term on record
/// (`Vacant { ended: None }`, which the docs gave only as a first event),
/// then goes on with the next leader.
#[test]
fn a_watch_that_finds_the_election_emptied_says_it_missed_changes_then_vacant() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    let election = client.election("emptied");
    let mut watch = election.watch().unwrap();
    let wait = Duration::from_secs(5);
    assert_eq!(watch.next(wait).unwrap(), vacant_none());
    let leading = election.with_value("a").campaign().unwrap();
    let a = leader_of(watch.next(wait).unwrap());
    let () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();
    let mut seen = Vec::new();
    while let Some(event) = watch.next(Duration::from_millis(500)).unwrap() {
        seen.push(event);
    }
    let missed = Some(LeaderEvent::Missed { after: a.term });
    assert_eq!(seen, [missed, vacant_none()].map(Option::unwrap));
    drop(leading);
    let next = election.with_value("b").campaign().unwrap();
    assert_eq!(leader_of(watch.next(wait).unwrap()).term, next.term());
}

/// A leader force-released (`force_unlock`): it learns it at once (its
/// lease signal says `Lost`), the candidate waiting leads, and a watch
/// returns that leader; force-released with nobody waiting, a watch
/// returns the vacancy of its term.
#[test]
fn a_force_released_leader_learns_it_and_a_watch_sees_what_came_after() {
    let server = RedisServer::start();
    let (leading, waiting, operator) = (server.client(), server.client(), server.client());
    let wait = Duration::from_secs(5);
    let a = leading
        .election("forced")
        .with_value("a")
        .campaign()
        .unwrap();
    let mut watch = operator.election("forced").watch().unwrap();
    assert_eq!(leader_of(watch.next(wait).unwrap()).term, a.term());
    let candidate = waiting.election("forced").with_value("b");
    let b = thread::spawn(move || candidate.campaign());
    assert!(wait_until(wait, || queue_len(&operator, "forced") == 1));
    assert!(operator
        .force_unlock(fairlock::LockKind::Election, "forced")
        .unwrap());
    assert_eq!(a.lease_signal().wait_timeout(wait), Some(LeaseEnd::Lost));
    let b = join_within(b, wait, "the candidate").unwrap();
    let seen = leader_of(watch.next(wait).unwrap());
    assert_eq!((seen.term, seen.value.as_str()), (b.term(), "b"));
    assert!(b.term() > a.term());
    assert!(operator
        .force_unlock(fairlock::LockKind::Election, "forced")
        .unwrap());
    assert_eq!(b.lease_signal().wait_timeout(wait), Some(LeaseEnd::Lost));
    assert_eq!(watch.next(wait).unwrap(), vacant(b.term()));
    assert_eq!(watch.next(Duration::from_millis(100)).unwrap(), None);
    assert_eq!(a.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
    assert_eq!(b.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
}
