//! A new user's first contact with a server that says no: each way of
//! failing to connect reported at once, with its
//! cause in the message and a kind that says whether retrying helps; and a
//! restarted server's first lock taken as soon as it accepts, with every
//! call that has a deadline back by it throughout the outage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlock::{Client, ErrorKind, ServerWarningKind};
use fairlock_test_support::sentinel::SentinelSet;
use fairlock_test_support::*;

/// How soon a refusal must be reported (the target is 100 ms on loopback;
/// the default connect timeout, 5 s, is what main took).
const REPORTED_WITHIN: Duration = Duration::from_secs(1);

/// Builds a client for `url` with the default settings (a 5 s connect
/// timeout) and expects it to fail: the error, and how long it took.
fn refused(url: &str) -> (fairlock::Error, Duration) {
    let started = Instant::now();
    let err = Client::open(url).expect_err("the client should not start");
    (err, started.elapsed())
}

/// `err`, reported in `took`, says `cause` in its `Display` and is of `kind`.
fn check(what: &str, err: &fairlock::Error, took: Duration, kind: ErrorKind, cause: &str) {
    eprintln!("{what}: {took:?}: {err}");
    assert!(
        took < REPORTED_WITHIN,
        "{what}: reported after {took:?}: {err}"
    );
    assert_eq!(err.kind(), kind, "{what}: {err:?}");
    let text = err.to_string();
    assert!(text.contains(cause), "{what}: no {cause:?} in {text:?}");
}

#[test]
fn a_wrong_password_is_an_auth_error_at_once_that_is_not_retried() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let wrong = format!("redis://:wrong@127.0.0.1:{}", server.port());
    let (err, took) = refused(&wrong);
    check("wrong password", &err, took, ErrorKind::Auth, "credentials");
    assert!(
        !err.is_connection() && !err.is_retryable(),
        "retrying a wrong password cannot help"
    );
    // A plain server's refusal says nothing of Sentinel's settings.
    let text = err.to_string();
    assert!(!text.to_lowercase().contains("sentinel"), "{text}");
    assert!(text.contains("the URL's user and password"), "{text}");
    // None given where the server asks for one: NOAUTH, the same kind.
    let (err, took) = refused(&server.url());
    check("no password", &err, took, ErrorKind::Auth, "NOAUTH");
    assert!(!err.is_connection() && !err.is_retryable());
    assert!(
        !err.to_string().to_lowercase().contains("sentinel"),
        "{err}"
    );
}

/// Every error of a first contact names the server it was met at, its
/// password redacted: a program with several Redis servers (or a log of
/// many services) can tell which one refused. Before, only the timeouts
/// and a server that is not Redis did: a refused port said "redis is
/// unreachable: Connection refused (os error 111)", and nothing more.
#[test]
fn every_first_contact_error_names_the_server_without_its_password() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let port = server.port();
    let mut admin = fairlock_test_support::server::try_conn_as(port, Some("s3cret")).unwrap();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&["deaf", "on", ">s3cret", "~*", "&*", "+@all", "-subscribe"])
        .query(&mut admin)
        .unwrap();
    let refused = RefusedPort::new();
    let closing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closing_port = closing.local_addr().unwrap().port();
    std::thread::spawn(move || closing.incoming().for_each(drop));
    for (what, url, at) in [
        (
            "refused port",
            refused.url().replace("//", "//:hunter2@"),
            refused.port(),
        ),
        (
            "closed at once",
            format!("redis://127.0.0.1:{closing_port}"),
            closing_port,
        ),
        (
            "wrong password",
            format!("redis://:hunter2@127.0.0.1:{port}"),
            port,
        ),
        (
            "unknown database",
            format!("redis://:s3cret@127.0.0.1:{port}/99"),
            port,
        ),
        // Its wake-up channel's `SUBSCRIBE` refused by its ACL.
        (
            "no subscribe",
            format!("redis://deaf:s3cret@127.0.0.1:{port}"),
            port,
        ),
        (
            "sentinel refused",
            format!("redis+sentinel://:hunter2@127.0.0.1:{}/m", refused.port()),
            refused.port(),
        ),
    ] {
        let (err, took) = refused_with(&url);
        let text = err.to_string();
        eprintln!("{what}: {:?} after {took:?}: {text}", err.kind());
        assert!(took < REPORTED_WITHIN, "{what}: {took:?}");
        assert!(
            text.contains(&format!("127.0.0.1:{at}")),
            "{what}: no server in {text:?}"
        );
        for shown in [text, format!("{err:?}")] {
            assert!(
                !shown.contains("hunter2") && !shown.contains("s3cret"),
                "{what}: {shown}"
            );
        }
    }
}

/// As [`refused`], with a short connect timeout.
fn refused_with(url: &str) -> (fairlock::Error, Duration) {
    let started = Instant::now();
    let builder = Client::builder(url).connect_timeout(Duration::from_millis(500));
    (builder.build().expect_err(url), started.elapsed())
}

/// A read-only replica given as the URL (fairlock writes with every
/// call): on Redis 7.0 and later (and Valkey) the start's `FUNCTION LOAD`
/// is refused (`READONLY`), and the build fails at once, naming the server
/// and what answered; before, that refusal only moved the client to
/// EVALSHA, the build succeeded, and every call then failed saying "its
/// master was demoted". Redis 6.2 loads its scripts on a replica: its
/// calls say what answered. `Connection` (may be retried): behind a name a
/// failover moves, the master answers there again.
#[test]
fn a_read_only_replica_as_the_url_is_named_at_once() {
    assert_replica_named_at_once(false);
}

/// The same where the replica has the library from its master (a client
/// of the master loaded it first, as in any fleet): the start finds it
/// there and loads nothing, and its probe, a function Redis counts as a
/// write, is refused (`READONLY`) as the load was. Before, the probe was
/// flagged `no-writes`: the build succeeded on the replica and only the
/// calls failed.
#[test]
fn a_read_only_replica_with_the_library_as_the_url_is_named_at_once() {
    if server_version().0 < 7 {
        return; // Redis 6.2: no library, the case above
    }
    assert_replica_named_at_once(true);
}

/// Starts a master and its replica (the master's library loaded first if
/// `with_library`, and seen on the replica), then a client on the replica:
/// it must fail at once, naming the replica.
fn assert_replica_named_at_once(with_library: bool) {
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut conn = replica.conn();
    assert!(wait_until(Duration::from_secs(10), || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .unwrap();
        info.contains("master_link_status:up")
    }));
    if with_library {
        drop(master.client());
        assert!(wait_until(Duration::from_secs(10), || {
            let libraries: Vec<redis::Value> =
                redis::cmd("FUNCTION").arg("LIST").query(&mut conn).unwrap();
            !libraries.is_empty()
        }));
    }
    let started = Instant::now();
    let built = Client::open(&replica.url());
    let took = started.elapsed();
    let err = match built {
        Err(err) => err,
        Ok(client) if server_version().0 < 7 => client
            .fair_mutex("replica")
            .try_lock()
            .expect_err("a replica"),
        Ok(_) => panic!("built on a read-only replica, in {took:?}"),
    };
    let text = err.to_string();
    eprintln!("replica: {:?} after {took:?}: {text}", err.kind());
    assert!(took < REPORTED_WITHIN, "{took:?}");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    assert!(text.contains("read-only replica"), "{text}");
    // Both causes named: a failover's demotion, or a URL naming a replica.
    assert!(text.contains("a URL that names a replica"), "{text}");
    if server_version().0 >= 7 {
        assert!(text.contains(&replica.url()), "{text}");
    }
}

#[test]
fn an_unknown_database_is_a_config_error_at_once_naming_the_servers_refusal() {
    let server = RedisServer::start();
    let (err, took) = refused(&format!("{}/99", server.url()));
    check(
        "db 99",
        &err,
        took,
        ErrorKind::InvalidConfig,
        "DB index is out of range",
    );
    assert!(!err.is_connection());
}

/// docs/security.md's user with a URL that names a database: the
/// connection's `SELECT` is refused unless the line has `+select`, as the
/// page says, and that is a `Permission` error naming the command, at
/// once, not retried (before: `Server`, "redis returned an error", as a
/// refusal fairlock has no kind for: the redis crate passes the `NOPERM`
/// on without its code). With `+select` the client locks in that database.
#[test]
fn a_database_the_acl_user_may_not_select_is_a_permission_error() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "s3lect");
    let url = format!("{}/1", server.url_as("fairlock", "s3lect"));
    let (err, took) = refused(&url);
    check(
        "db 1 without +select",
        &err,
        took,
        ErrorKind::Permission,
        "'select'",
    );
    assert!(!err.is_retryable(), "{err:?}");
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "fairlock", "+select"])
        .query(&mut admin)
        .unwrap();
    let client = Client::open(&url).expect("the user may select now");
    let guard = client.fair_mutex("in-db-1").lock().unwrap();
    let () = redis::cmd("SELECT").arg(1).query(&mut admin).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*")
        .query(&mut admin)
        .unwrap();
    assert!(!keys.is_empty(), "the lock is in database 1");
    guard.unlock().unwrap();
}

#[test]
fn a_refused_port_is_reported_at_once_with_its_cause_and_may_be_retried() {
    let port = RefusedPort::new();
    let (err, took) = refused(&port.url());
    check("refused port", &err, took, ErrorKind::Connection, "refused");
    assert!(err.is_connection(), "the server may come up: {err:?}");
    assert!(err.is_retryable(), "the server may come up: {err:?}");
}

#[test]
fn an_http_url_names_what_is_wrong_with_it() {
    let (err, took) = refused("http://127.0.0.1:6379");
    check("http url", &err, took, ErrorKind::InvalidConfig, "scheme");
    assert!(
        err.to_string().contains("did not parse"),
        "the cause: {err}"
    );
    assert!(!err.is_connection());
}

/// Kills `server`, keeps it down for `outage`, starts it again on its port
/// and returns how long after it accepted again (as the test support saw
/// it) a thread that kept calling `lock()` got the lock; meanwhile a
/// `try_lock_for` issued during the outage, for 2 s (half the outage if
/// that is not longer), must return by its deadline + 0.5 s (its outcome is returned
/// too: whether it got the lock, or its error).
fn first_lock_after_restart(outage: Duration) -> (Duration, fairlock::Result<bool>) {
    let mut server = RedisServer::start();
    let client = Client::open(&server.url()).unwrap();
    let mutex = client.fair_mutex("first-contact-restart");
    mutex.lock().unwrap().unlock().unwrap();

    server.kill();
    let killed = Instant::now();
    let got = Arc::new(Mutex::new(None::<Instant>));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (client, got, stop) = (client.clone(), Arc::clone(&got), Arc::clone(&stop));
        std::thread::spawn(move || {
            // A service's retry loop, as the README's errors section writes it.
            let mutex = client.fair_mutex("first-contact-restart");
            while !stop.load(Ordering::Relaxed) {
                match mutex.lock() {
                    Ok(guard) => {
                        *got.lock().unwrap() = Some(Instant::now());
                        let _ = guard.unlock();
                        return;
                    }
                    Err(err) if err.is_connection() => {}
                    Err(err) => panic!("not a connection error: {err:?}"),
                }
            }
        })
    };
    let wait = if outage > Duration::from_secs(2) {
        Duration::from_secs(2)
    } else {
        outage / 2
    };
    let deadline_call = {
        let client = client.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let result = client
                .fair_mutex("first-contact-deadline")
                .try_lock_for(wait);
            (started.elapsed(), result.map(|guard| guard.is_some()))
        })
    };
    std::thread::sleep(outage.saturating_sub(killed.elapsed()));
    let restarting = Instant::now();
    server.start_again();
    // The support polls every 20 ms: the server accepted at most that
    // much earlier (and the lock may come before this instant).
    let accepting = Instant::now();

    let (took, result) = deadline_call.join().unwrap();
    eprintln!("try_lock_for({wait:?}) during a {outage:?} outage: back in {took:?}: {result:?}");
    assert!(
        took < wait + Duration::from_millis(500),
        "try_lock_for({wait:?}) came back after {took:?}: {result:?}"
    );
    let bound = Instant::now() + Duration::from_secs(10);
    while got.lock().unwrap().is_none() && Instant::now() < bound {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let got = got
        .lock()
        .unwrap()
        .expect("no lock within 10 s of the restart");
    worker.join().unwrap();
    let lag = got.saturating_duration_since(accepting);
    eprintln!(
        "outage {outage:?}: first lock {lag:?} after the server was seen accepting again \
         ({:?} after its restart began, {:?} after it was seen accepting)",
        got.saturating_duration_since(restarting),
        accepting.saturating_duration_since(restarting),
    );
    (lag, result)
}

#[test]
fn after_a_1s_outage_the_first_lock_comes_as_soon_as_the_server_accepts() {
    let (lag, _) = first_lock_after_restart(Duration::from_secs(1));
    assert!(
        lag < Duration::from_millis(500),
        "first lock {lag:?} after the restart"
    );
}

#[test]
fn after_a_3s_outage_the_first_lock_comes_as_soon_as_the_server_accepts() {
    let (lag, during) = first_lock_after_restart(Duration::from_secs(3));
    assert!(
        lag < Duration::from_millis(500),
        "first lock {lag:?} after the restart"
    );
    // Still down when the 2 s were up: the error names the call, the lock
    // and the cause.
    let err = during.expect_err("Redis was down for the whole wait");
    assert!(err.is_connection(), "{err:?}");
    let text = err.to_string();
    for part in ["acquire of mutex \"first-contact-deadline\"", "refused"] {
        assert!(text.contains(part), "no {part:?} in {text:?}");
    }
}

#[test]
#[ignore = "a 10 s outage: run with --ignored"]
fn after_a_10s_outage_the_first_lock_comes_as_soon_as_the_server_accepts() {
    let (lag, _) = first_lock_after_restart(Duration::from_secs(10));
    assert!(
        lag < Duration::from_millis(500),
        "first lock {lag:?} after the restart"
    );
}

/// A call queued behind a holder when Redis dies: its wait ends at its
/// deadline, and leaving the queue then waits for no connection.
#[test]
fn a_call_queued_when_redis_dies_returns_by_its_deadline() {
    let mut server = RedisServer::start();
    // The default connect timeout (5 s), a short command timeout for the
    // holder's drop at the end.
    let client = Client::builder(&server.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let holder = client.fair_mutex("first-contact-queued").unbound();
    let held = holder.lock().unwrap();
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let result = client
                .fair_mutex("first-contact-queued")
                .try_lock_for(Duration::from_millis(1500));
            (started.elapsed(), result.map(|guard| guard.is_some()))
        })
    };
    // Queued (the status lists it) before the kill.
    let mutex = client.fair_mutex("first-contact-queued");
    let bound = Instant::now() + Duration::from_secs(1);
    while mutex.queue_len().unwrap() == 0 && Instant::now() < bound {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(mutex.queue_len().unwrap(), 1, "the waiter did not queue");
    server.kill();
    let (took, result) = waiter.join().unwrap();
    eprintln!("try_lock_for(1.5 s) queued when Redis died: back in {took:?}: {result:?}");
    assert!(
        took < Duration::from_millis(2000),
        "try_lock_for(1.5 s) came back after {took:?}: {result:?}"
    );
    drop(held);
}

/// A wait whose deadline passes while its request waits for a pooled
/// connection that the client's other calls keep busy is not acquired, as
/// one whose deadline passes while it is parked: no `Connection` error for
/// a server that answers, and nothing left behind.
#[test]
fn a_wait_that_finds_every_pooled_connection_busy_is_not_acquired_and_leaves_nothing() {
    let server = RedisServer::start();
    // A 400 ms round trip, and one pooled connection: a status call keeps
    // it busy for 400 ms.
    let relay = Relay::with_delay(server.port(), Duration::from_millis(200));
    let client = Client::builder(&relay.url()).pool_size(1).build().unwrap();
    timed_waits_with_no_connection_free_are_not_acquired(
        || client.clone(),
        &server.client(),
        "pool-busy",
        "with the one connection busy",
    );
}

/// `pool_size(1)` and six threads locking over a slow link (a 400 ms
/// round trip): a call finds no pooled connection free within its connect
/// timeout (500 ms) and fails, `Connection`, "no redis connection could be
/// had in time", naming its call, after that timeout, as `pool_size`'s
/// doc says.
#[test]
fn a_call_that_gets_no_pooled_connection_within_the_connect_timeout_says_so() {
    let server = RedisServer::start();
    let relay = Relay::with_delay(server.port(), Duration::from_millis(200));
    let connect = Duration::from_millis(500);
    let client = Client::builder(&relay.url())
        .pool_size(1)
        .connect_timeout(connect)
        .command_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let client = client.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let got = client.fair_mutex(&format!("pool-one-{i}")).lock();
                let took = started.elapsed();
                (took, got.and_then(|guard| guard.unlock()))
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
    for (took, result) in &results {
        eprintln!("pool_size(1), 6 threads: {took:?}: {result:?}");
    }
    assert!(!failed.is_empty(), "every call had a connection in time");
    for (took, result) in failed {
        let err = result.as_ref().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("no redis connection could be had in time"),
            "{text}"
        );
        assert!(text.contains("pool-one-"), "{text}");
        assert!(*took >= connect && *took < connect * 3, "{took:?}");
    }
}

/// A wait whose deadline passes while the pool is still opening the
/// connection its request needs (a slow handshake, nothing failed) is not
/// acquired either: a slow opening is not an outage. A new connection's
/// `AUTH` takes the relay's 400 ms round trip; the pool's one open
/// connection is kept busy, so the request needs a second.
#[test]
fn a_wait_whose_connection_is_still_being_opened_is_not_acquired_and_leaves_nothing() {
    let password = "first-contact-opening";
    let server = RedisServer::start_with(&["--requirepass", password]);
    let relay = Relay::with_delay(server.port(), Duration::from_millis(200));
    let through_relay = format!("redis://default:{password}@127.0.0.1:{}", relay.port());
    // A client of its own for each wait: one connection open, a second one
    // to open (the first wait's would be open by the second).
    timed_waits_with_no_connection_free_are_not_acquired(
        || {
            Client::builder(&through_relay)
                .pool_size(2)
                .build()
                .unwrap()
        },
        &Client::open(&server.url_as("default", password)).unwrap(),
        "opening",
        "while its connection opens",
    );
}

/// `try_lock_for(20 ms)` and `(100 ms)` on a client from `client_for`,
/// each while a status call of the same client keeps its one open pooled
/// connection busy for a 400 ms round trip: `Ok(None)` by the deadline
/// (+ 300 ms), and `operator` finds the lock free and nobody queued.
fn timed_waits_with_no_connection_free_are_not_acquired(
    client_for: impl Fn() -> Client,
    operator: &Client,
    name: &str,
    while_what: &str,
) {
    for wait in [Duration::from_millis(20), Duration::from_millis(100)] {
        let client = client_for();
        let name = format!("first-contact-{name}-{}", wait.as_millis());
        let busy = {
            let mutex = client.fair_mutex(&name);
            std::thread::spawn(move || mutex.is_locked())
        };
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        let result = client.fair_mutex(&name).try_lock_for(wait);
        let took = started.elapsed();
        eprintln!("try_lock_for({wait:?}) {while_what}: {took:?}: {result:?}");
        assert!(
            matches!(result, Ok(None)),
            "try_lock_for({wait:?}): {result:?}"
        );
        assert!(took < wait + Duration::from_millis(300), "{took:?}");
        assert!(!busy.join().unwrap().unwrap());
        let mutex = operator.fair_mutex(&name);
        assert!(
            wait_until(Duration::from_secs(5), || !mutex.is_locked().unwrap()
                && mutex.queue_len().unwrap() == 0),
            "try_lock_for({wait:?}) left its call behind"
        );
    }
}

/// A TCP listener on a free port that answers every connection as `reply`
/// says (`None`: accepts and never writes), until dropped; its thread and
/// the connections' are joined then.
struct Impostor {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Impostor {
    fn start(reply: Option<&'static [u8]>) -> Impostor {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // Each connection on a thread of its own (the pool's silent
            // connections must hold up nobody), which gives back its
            // stream: kept open to the end, a silent peer, not a closed one.
            let mut open = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                open.push(std::thread::spawn(move || {
                    if let Some(reply) = reply {
                        // The request (or some of it), then the answer.
                        let timeout = Some(Duration::from_secs(1));
                        stream.set_read_timeout(timeout).unwrap();
                        let _ = stream.read(&mut [0u8; 1024]);
                        let _ = stream.write_all(reply);
                    }
                    stream
                }));
            }
            let streams: Vec<_> = open.into_iter().map(|t| t.join().unwrap()).collect();
            drop(streams);
        });
        Impostor {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, auth: &str) -> String {
        format!("redis://{auth}127.0.0.1:{}", self.port)
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

/// Something other than Redis on the port (an HTTP server) is named as
/// such, in one line, as a setting to fix (InvalidConfig: the same
/// address answers the same way however often it is asked), at once;
/// before, it was `Server`, "Incompatible type - Parse error at 1" and
/// two more lines of "Unexpected `72`". With a password the handshake
/// meets it first, and says the same.
#[test]
fn an_http_server_on_the_port_is_named_in_one_line_as_not_redis() {
    let http = Impostor::start(Some(b"HTTP/1.1 400 Bad Request\r\n\r\n"));
    for auth in ["", ":pw@", "user:pw@"] {
        let (err, took) = refused(&http.url(auth));
        let what = format!("http server, {auth:?}");
        check(
            &what,
            &err,
            took,
            ErrorKind::InvalidConfig,
            "is not a redis server",
        );
        let text = err.to_string();
        assert!(!text.contains('\n'), "{what}: more than one line: {text:?}");
        assert!(
            text.contains(&format!("127.0.0.1:{}", http.port)),
            "{what}: {text}"
        );
        assert!(!text.contains("Parse error"), "{what}: {text}");
        assert!(!err.is_retryable() && !err.is_connection(), "{what}");
        // The redis crate's own words stay the source, for a program that wants them.
        assert!(std::error::Error::source(&err).is_some(), "{what}");
    }
}

/// A URL whose scheme and port do not match (a `redis://` URL naming a
/// Sentinel's port, a `redis+sentinel://` one naming a data server): what
/// answers is not the server the URL says, so the start fails at once with
/// `InvalidConfig` naming it and the command it does not know, as for any
/// server that is not Redis; before, `Server` ("redis returned an error:
/// ResponseError: unknown command 'TIME'").
#[test]
fn a_url_whose_port_is_not_the_kind_of_server_it_says_is_invalid_config() {
    let set = SentinelSet::start();
    let sentinel = set.sentinel_urls()[0].clone();
    let data = set.servers()[0].port();
    for (url, at) in [
        (sentinel.clone(), sentinel.replace("redis://", "")),
        (
            format!("redis+sentinel://127.0.0.1:{data}/m"),
            format!("127.0.0.1:{data}"),
        ),
    ] {
        let (err, took) = refused(&url);
        let text = err.to_string();
        check(
            &url,
            &err,
            took,
            ErrorKind::InvalidConfig,
            "unknown command",
        );
        assert!(
            text.contains(&at) && text.contains("check the URL"),
            "{text}"
        );
        assert!(!err.is_retryable(), "{url}");
    }
}

/// A socket that accepts and never answers: the start fails when the
/// first request's reply has not come within the command timeout, in one
/// line that says so and names the setting (before: "Resource temporarily
/// unavailable (os error 11)", or "redis call timed out"), and it may be
/// retried. With a password the handshake is what gets no reply, within
/// the connect timeout. A Sentinel that never answers `SENTINEL MASTERS`
/// is a command timeout too (before: named the connect timeout, 400 ms,
/// though the 700 ms command timeout had fired).
#[test]
fn a_socket_that_never_answers_is_a_timeout_in_words_naming_its_setting() {
    let silent = Impostor::start(None);
    let connect = Duration::from_millis(400);
    let command = Duration::from_millis(700);
    let sentinel = format!("redis+sentinel://127.0.0.1:{}/m", silent.port);
    for (auth, within, said) in [
        (
            "",
            command,
            "accepted the connection and sent no reply within 700 ms (the command_timeout)",
        ),
        (
            ":pw@",
            connect,
            "did not answer the connect or its handshake within 400 ms (the connect_timeout)",
        ),
        (
            "sentinel",
            command,
            "accepted the connection and sent no reply within 700 ms (the command_timeout)",
        ),
    ] {
        let started = Instant::now();
        let url = match auth {
            "sentinel" => sentinel.clone(),
            _ => silent.url(auth),
        };
        let err = Client::builder(&url)
            .connect_timeout(connect)
            .command_timeout(command)
            .build()
            .expect_err("nothing answers");
        let took = started.elapsed();
        eprintln!("silent, {auth:?}: {took:?}: {err}");
        assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
        assert!(err.is_timeout() && err.is_retryable(), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(said), "{auth:?}: no {said:?} in {text:?}");
        assert!(
            !text.contains("os error") && !text.contains('\n'),
            "{text:?}"
        );
        // The timeout, not the 5 s default nor a retry loop.
        assert!(took >= within, "{auth:?}: {took:?}");
        assert!(took < within + Duration::from_secs(1), "{auth:?}: {took:?}");
    }
}

/// A cluster seed that accepts and never answers: the redis crate's
/// cluster client reads the `PING` it sends each node it opens before it
/// sets its own read timeout, so `build` never returned (the test gave up
/// after 5 s); it now fails within the connect timeout, `Connection`.
#[test]
fn a_cluster_seed_that_never_answers_fails_the_build_within_the_connect_timeout() {
    let silent = Impostor::start(None);
    let connect = Duration::from_millis(400);
    let url = format!("redis+cluster://127.0.0.1:{}", silent.port);
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let built = Client::builder(&url)
            .connect_timeout(connect)
            .command_timeout(Duration::from_millis(700))
            .build();
        let _ = tx.send(built.map(drop));
    });
    let built = rx.recv_timeout(Duration::from_secs(5));
    let took = started.elapsed();
    let err = built
        .unwrap_or_else(|_| panic!("build had not returned after {took:?}"))
        .expect_err("nothing answers");
    eprintln!("silent cluster seed: {took:?}: {err}");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    assert!(took < connect + Duration::from_secs(1), "{took:?}");
}

/// A server that answers reads but holds writes back (`CLIENT PAUSE
/// WRITE`, as a managed failover does) when a client starts: its `TIME`
/// is answered, the load of fairlock's scripts is not, and the error says
/// so, naming the server, within the command timeout (before: "redis call
/// timed out", nothing more).
#[test]
fn a_server_that_holds_the_scripts_load_back_is_named_in_the_error() {
    let server = RedisServer::start();
    let command = Duration::from_millis(700);
    let _paused = pause_clients(&mut server.conn(), "WRITE", Duration::from_millis(3000));
    let started = Instant::now();
    let err = (server.builder())
        .command_timeout(command)
        .build()
        .expect_err("the scripts are not loaded in a write pause");
    let took = started.elapsed();
    eprintln!("first_contact: a start in a write pause: {err} after {took:?}");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    let text = err.to_string();
    let said = format!("loading fairlock's scripts at {}: ", server.url());
    assert!(text.starts_with(&said), "no {said:?} in {text:?}");
    assert!(text.contains("no reply within 700 ms"), "{text:?}");
    assert!(took < command * 2, "{took:?}");
}

/// A server that may evict fairlock's keys (a memory
/// limit and any policy but noeviction: every fairlock key has a TTL, so
/// volatile-* reaches them too) is refused by a client that asks for it,
/// naming the policy and what to set; a client that does not ask starts
/// (and logs a warning: `cli/tests/cli_status.rs` sees it on stderr).
#[test]
fn a_server_that_may_evict_is_refused_when_the_client_requires_noeviction() {
    let server = RedisServer::start();
    let strict = || {
        Client::builder(&server.url())
            .require_noeviction(true)
            .build()
    };
    for policy in ["volatile-lru", "allkeys-lfu", "volatile-ttl"] {
        server.set_eviction("100mb", policy);
        let err = strict().expect_err(policy);
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{policy}: {err}");
        assert!(!err.is_connection(), "{policy}");
        let text = err.to_string();
        for said in [policy, "104857600", "set maxmemory-policy noeviction"] {
            assert!(text.contains(said), "{policy}: no {said:?} in {text}");
        }
        // The default starts, and keeps the warning for the program to read.
        let client = Client::open(&server.url()).expect(policy);
        assert!(client.fair_mutex("m").try_lock().unwrap().is_some());
        let warnings = client.warnings();
        assert_eq!(warnings.len(), 1, "{policy}: {warnings:?}");
        assert_eq!(warnings[0].kind(), ServerWarningKind::MayEvict, "{policy}");
        assert!(warnings[0]
            .server()
            .ends_with(&format!(":{}", server.port())));
        let said = warnings[0].to_string();
        for part in [
            policy,
            "may evict fairlock's keys",
            "set maxmemory-policy noeviction",
        ] {
            assert!(said.contains(part), "{policy}: no {part:?} in {said}");
        }
    }
    // No memory limit: nothing is ever evicted, whatever the policy.
    server.set_eviction("0", "allkeys-lru");
    assert!(strict().is_ok());
    assert!(Client::open(&server.url()).unwrap().warnings().is_empty());
    server.set_eviction("100mb", "noeviction");
    assert!(strict().is_ok());
    assert!(Client::open(&server.url()).unwrap().warnings().is_empty());
}

/// The least-privilege user of docs/security.md reads the policy with
/// `INFO memory` and nothing denied; a user made without that grant (an
/// earlier line) starts without the check, and fails with Permission when
/// the client requires it.
#[test]
fn the_eviction_check_runs_as_the_acl_user_and_is_skipped_without_its_grant() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    server.set_eviction("100mb", "allkeys-lru");
    create_acl_user(&mut admin, "pw");
    let url = server.url_as("fairlock", "pw");
    let err = Client::builder(&url)
        .require_noeviction(true)
        .build()
        .expect_err("the ACL user reads the policy");
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
    assert!(acl_denials(&mut admin).is_empty());

    create_acl_user_without(&mut admin, "pw", &["+info|memory"]);
    let client = Client::open(&url).expect("the check is skipped");
    // ... and the client says it could not be made.
    let warnings = client.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind(), ServerWarningKind::EvictionUnknown);
    assert!(
        warnings[0].to_string().contains("+info|memory"),
        "{}",
        warnings[0]
    );
    let err = Client::builder(&url)
        .require_noeviction(true)
        .build()
        .expect_err("cannot read the policy");
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
}

/// A server whose `INFO` is disabled (`rename-command INFO ""`, as some
/// hardened or managed servers ship) cannot be asked its policy either:
/// the client starts without the check, saying so, as for a user denied
/// it, and fails only when it requires noeviction (before: every start
/// failed, "INFO memory at ...: unknown command").
#[test]
fn a_server_without_info_starts_without_the_eviction_check() {
    let server = RedisServer::start_with(&["--rename-command", "INFO", ""]);
    let client = Client::open(&server.url()).expect("the check is skipped");
    let warnings = client.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind(), ServerWarningKind::EvictionUnknown);
    client
        .fair_mutex("no-info")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let err =
        (server.builder().require_noeviction(true).build()).expect_err("cannot read the policy");
    eprintln!("first_contact: no INFO, noeviction required: {err}");
    assert!(err.to_string().contains("INFO memory"), "{err}");
}

#[test]
fn unreachable_redis_is_a_connection_error_within_the_connect_timeout() {
    let port = RefusedPort::new();
    let started = Instant::now();
    let err = Client::builder(&port.url())
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(500) + Duration::from_secs(1));

    let err = Client::open("not a url").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");

    // An existing client whose server goes away.
    let mut server = RedisServer::start();
    let client = server
        .builder()
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let m = client.fair_mutex("gone");
    server.kill();
    for _ in 0..3 {
        let started = Instant::now();
        let err = m.lock().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
        assert!(started.elapsed() < Duration::from_millis(500) + Duration::from_secs(1));
        let started = Instant::now();
        assert_eq!(m.is_locked().unwrap_err().kind(), ErrorKind::Connection);
        assert!(started.elapsed() < Duration::from_millis(500) + Duration::from_secs(1));
    }
}
