//! Connections as redis-rs users have them, each against
//! a real server: Unix sockets, a client from a `redis::ConnectionInfo`,
//! the r2d2 pool settings, a password on the Sentinels themselves, and
//! mutual TLS.

use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder, ErrorKind};
use fairlock_test_support::*;
use redis::IntoConnectionInfo;

/// Short test timings (lease 2 s, waiter timeout 1 s, connect timeout 2 s).
fn timings(builder: ClientBuilder) -> ClientBuilder {
    builder
        .lease(Duration::from_secs(2))
        .waiter_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(2))
}

/// `a` holds `name`, `b` queues behind it and gets it on `a`'s release,
/// then the same the other way round: each sees the other as holder.
fn hand_over_both_ways(a: &Client, b: &Client, name: &str) {
    for (first, second) in [(a, b), (b, a)] {
        let held = first.fair_mutex(name).lock().unwrap();
        let seen = second.fair_mutex(name).status(5).unwrap();
        assert_eq!(
            seen.holder()
                .cloned()
                .expect("the other client sees the holder")
                .fencing_token,
            held.fencing_token()
        );
        let (holder, next) = (first.fair_mutex(name), second.fair_mutex(name));
        let (handoff, token) = hand_over(held, &holder, next, Duration::from_secs(5), "the waiter");
        eprintln!("handoff in {:.1} ms, token {token}", ms(handoff));
    }
}

#[test]
fn a_client_over_a_unix_socket_and_one_over_tcp_hand_the_lock_to_each_other() {
    let server = RedisServer::start_unix(&[]);
    for url in [
        server.unix_url(),
        format!("unix://{}", server.unix_socket().display()),
    ] {
        let over_socket = timings(Client::builder(&url)).build().unwrap();
        let over_tcp = server.client();
        hand_over_both_ways(&over_socket, &over_tcp, "unix-and-tcp");
    }
}

#[test]
fn a_unix_socket_url_takes_the_database_and_credentials_in_its_query() {
    let server = RedisServer::start_unix(&["--requirepass", "hunter2"]);
    let socket = server.unix_socket();
    let url = format!("redis+unix://{}?db=3&pass=hunter2", socket.display());
    let client = timings(Client::builder(&url)).build().unwrap();
    let guard = client.fair_mutex("unix-db").lock().unwrap();
    let mut admin = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*")
        .query(&mut admin)
        .unwrap();
    assert!(!keys.is_empty(), "the lock's keys are in database 3");
    redis::cmd("SELECT").arg(0).query::<()>(&mut admin).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*")
        .query(&mut admin)
        .unwrap();
    assert!(keys.is_empty(), "nothing in database 0: {keys:?}");
    guard.unlock().unwrap();
    assert!(!format!("{:?}", timings(Client::builder(&url))).contains("hunter2"));

    let wrong = format!("redis+unix://{}?pass=wrong-hunter2", socket.display());
    let err = timings(Client::builder(&wrong)).build().unwrap_err();
    for text in [format!("{err:?}"), err.to_string()] {
        assert!(!text.contains("hunter2"), "password shown: {text}");
    }
}

#[test]
fn a_unix_socket_that_does_not_exist_is_a_connection_error_within_the_connect_timeout() {
    let dir = private_dir("no-socket").unwrap();
    let url = format!("redis+unix://{}", dir.join("absent.sock").display());
    let connect_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = Client::builder(&url)
        .connect_timeout(connect_timeout)
        .build()
        .unwrap_err();
    let took = started.elapsed();
    eprintln!(
        "absent socket: {:?} after {:.0} ms: {err}",
        err.kind(),
        ms(took)
    );
    assert_eq!(err.kind(), ErrorKind::Connection);
    assert!(took < connect_timeout + Duration::from_secs(1), "{took:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A server on a Unix socket restarted (empty, the socket made again):
/// the clients' pooled connections and subscriptions over the old socket
/// are gone; the next calls open new ones, and a handoff still comes by
/// push message once the subscriber is back.
#[test]
fn clients_over_a_unix_socket_carry_on_after_its_server_restarts() {
    let mut server = RedisServer::start_unix(&[]);
    let builder =
        || timings(Client::builder(&server.unix_url())).waiter_timeout(Duration::from_secs(5));
    let (a, b) = (builder().build().unwrap(), builder().build().unwrap());
    hand_over_both_ways(&a, &b, "unix-before");
    server.restart();
    let started = Instant::now();
    let m = a.fair_mutex("unix-after");
    let guard = retry_while_unreachable(|| m.lock());
    eprintln!(
        "first lock after the restart in {:.1} ms",
        ms(started.elapsed())
    );
    // A waiter polls every 1.67 s (waiter timeout 5 s): a handoff within
    // 1 s came by push message.
    let (handoff, _) = hand_over(
        guard,
        &m,
        b.fair_mutex("unix-after"),
        Duration::from_secs(1),
        "the waiter",
    );
    eprintln!("handoff after the restart in {:.1} ms", ms(handoff));
}

/// A path that is a file or a directory, not a socket: the connect was
/// refused, and the client said "redis is unreachable: Connection
/// refused", `Connection`, retryable, as for a server that is down.
#[test]
fn a_unix_socket_path_that_is_no_socket_is_invalid_config() {
    let dir = private_dir("not-a-socket").unwrap();
    let file = dir.join("redis.conf");
    std::fs::write(&file, "port 0\n").unwrap();
    for path in [&file, &dir] {
        let url = format!("redis+unix://{}", path.display());
        let started = Instant::now();
        let err = Client::builder(&url).build().unwrap_err();
        eprintln!(
            "{}: {:?} after {:?}: {err}",
            path.display(),
            err.kind(),
            started.elapsed()
        );
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        assert!(err.to_string().contains("not a socket"), "{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_client_from_a_redis_connection_info_or_a_redis_client_locks_with_and_without_a_password() {
    let plain = RedisServer::start();
    let secured = RedisServer::start_with(&["--requirepass", "hunter2"]);
    let with_password = format!("redis://:hunter2@127.0.0.1:{}/2", secured.port());
    let redis_client = redis::Client::open(with_password.as_str()).unwrap();
    // Built in code: the address, then the credentials and the database.
    let built = redis::ConnectionAddr::Tcp("127.0.0.1".to_owned(), secured.port())
        .into_connection_info()
        .unwrap()
        .set_redis_settings(
            redis::RedisConnectionInfo::default()
                .set_password("hunter2")
                .set_db(2),
        );
    let builders = [
        (
            "a ConnectionAddr",
            &plain,
            Client::builder_from(redis::ConnectionAddr::Tcp(
                "127.0.0.1".to_owned(),
                plain.port(),
            )),
        ),
        ("a URL string", &plain, Client::builder_from(plain.url())),
        (
            "a redis::Client's info",
            &secured,
            Client::builder_from(redis_client.get_connection_info().clone()),
        ),
        ("a ConnectionInfo", &secured, Client::builder_from(built)),
    ];
    for (what, server, builder) in builders {
        let shown = format!("{builder:?}");
        assert!(!shown.contains("hunter2"), "{what}: {shown}");
        let client = timings(builder).build().unwrap();
        let other = if server.port() == plain.port() {
            plain.client()
        } else {
            timings(Client::builder(&with_password)).build().unwrap()
        };
        hand_over_both_ways(&client, &other, "from-info");
        assert!(!format!("{client:?}").contains("hunter2"));
        eprintln!("{what}: locks and hands over");
    }
    // The locks went to database 2 of the secured server (the fence keys
    // outlive the holds).
    let mut admin = redis_client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*")
        .query(&mut admin)
        .unwrap();
    assert!(!keys.is_empty(), "no fairlock key in database 2");
}

#[test]
fn connection_info_that_names_no_usable_server_is_invalid_config_before_any_io() {
    let nobody = free_port();
    let negative_db = redis::ConnectionAddr::Tcp("127.0.0.1".to_owned(), nobody)
        .into_connection_info()
        .unwrap()
        .set_redis_settings(redis::RedisConnectionInfo::default().set_db(-1));
    let cases = [
        ("not a url", Client::builder_from("not a url")),
        (
            "an unknown scheme",
            Client::builder_from("http://127.0.0.1:1"),
        ),
        (
            "an empty host",
            Client::builder_from(redis::ConnectionAddr::Tcp(String::new(), nobody)),
        ),
        (
            "port 0",
            Client::builder_from(redis::ConnectionAddr::Tcp("127.0.0.1".to_owned(), 0)),
        ),
        ("a negative database", Client::builder_from(negative_db)),
    ];
    for (what, builder) in cases {
        let started = Instant::now();
        let err = builder
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_err();
        let took = started.elapsed();
        eprintln!("{what}: {:?} in {:.1} ms: {err}", err.kind(), ms(took));
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err}");
        assert!(took < Duration::from_millis(500), "{what}: {took:?}");
    }
}

/// The ids of the plain (not subscribed) connections on `server` other
/// than the one asking: the pool's, and the watchdog's own if it opened one.
fn plain_connections(server: &RedisServer) -> Vec<u64> {
    let mut conn = server.conn();
    let me: u64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    list.lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or("")
                    .to_owned()
            };
            let id: u64 = field("id").parse().ok()?;
            let subscribed = field("flags").contains('P') || field("sub") != "0";
            (id != me && !subscribed).then_some(id)
        })
        .collect()
}

#[test]
fn min_idle_opens_that_many_connections_at_build() {
    let server = RedisServer::start();
    // The client checks one connection out as it starts (its scripts are
    // loaded), and r2d2 opens another to keep min_idle idle meanwhile: so
    // min_idle or one more, never more than pool_size (None: pool_size).
    for (min_idle, expected) in [(Some(1), 1..=2), (Some(4), 4..=5), (None, 6..=6)] {
        let client = server
            .builder()
            .pool_size(6)
            .min_idle(min_idle)
            .build()
            .unwrap();
        let mut seen = Vec::new();
        // r2d2 opens them on its own thread once build has returned.
        let reached = wait_until(Duration::from_secs(5), || {
            seen = plain_connections(&server);
            expected.contains(&seen.len())
        });
        assert!(reached, "min_idle {min_idle:?}: connections {seen:?}");
        eprintln!("min_idle {min_idle:?}: {} pooled connections", seen.len());
        drop(client);
        assert!(wait_until(Duration::from_secs(10), || plain_connections(
            &server
        )
        .is_empty()));
    }
}

#[test]
#[ignore = "waits for r2d2's 30 s reaper: scripts/test runs it with --ignored beside the other servers' runs"]
fn idle_timeout_and_max_lifetime_close_pooled_connections() {
    // r2d2's reaper looks every 30 s (not settable): bounded at 45 s.
    let bound = Duration::from_secs(45);
    let bursty = RedisServer::start();
    let aging = RedisServer::start();
    let idle = bursty
        .builder()
        .pool_size(6)
        .min_idle(Some(1))
        .idle_timeout(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    // A burst of calls from 6 threads opens more connections than min_idle.
    std::thread::scope(|s| {
        for t in 0..6 {
            let idle = &idle;
            s.spawn(move || {
                let started = Instant::now();
                while started.elapsed() < Duration::from_millis(500) {
                    idle.fair_mutex(&format!("burst-{t}")).status(1).unwrap();
                }
            });
        }
    });
    let after_burst = plain_connections(&bursty).len();
    assert!(after_burst > 1, "the burst opened {after_burst}");
    let lifetime = aging
        .builder()
        .pool_size(4)
        .min_idle(Some(2))
        .max_lifetime(Some(Duration::from_secs(1)))
        .idle_timeout(None)
        .build()
        .unwrap();
    // The pool opens its min_idle connections on its own thread once
    // build has returned (build opens its first connection directly).
    let mut first = Vec::new();
    let opened = wait_until(Duration::from_secs(5), || {
        first = plain_connections(&aging);
        (2..=3).contains(&first.len())
    });
    assert!(opened, "{first:?}");

    let started = Instant::now();
    let mut idle_closed = None;
    let mut renewed = None;
    while (idle_closed.is_none() || renewed.is_none()) && started.elapsed() < bound {
        if idle_closed.is_none() && plain_connections(&bursty).len() == 1 {
            idle_closed = Some(started.elapsed());
        }
        let now = plain_connections(&aging);
        if renewed.is_none() && now.len() == 2 && now.iter().all(|id| !first.contains(id)) {
            renewed = Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "idle_timeout: {after_burst} -> 1 connection after {idle_closed:?}; \
         max_lifetime: both replaced after {renewed:?}"
    );
    assert!(
        idle_closed.is_some(),
        "idle connections left open past {bound:?}"
    );
    assert!(renewed.is_some(), "old connections kept past {bound:?}");
    // Both clients still work.
    idle.fair_mutex("after").lock().unwrap().unlock().unwrap();
    lifetime
        .fair_mutex("after")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
}

/// A pool size beyond any server's connections: r2d2 reserves room for
/// every connection of the pool as it is made (and again at each of its
/// 30 s looks), so `pool_size(u32::MAX)` asked for 721 GB and aborted the
/// process ("memory allocation of ... bytes failed"). Above 10 000
/// (Redis's default `maxclients`) it is `InvalidConfig`, before any I/O;
/// run in a forked child, which an abort ends without the test binary.
#[test]
fn a_pool_size_beyond_any_server_is_invalid_config_not_an_abort() {
    let nobody = format!("redis://127.0.0.1:{}", free_port());
    let code = fork::in_forked_child(Duration::from_secs(20), move || {
        for size in [u32::MAX, 10_001] {
            let started = Instant::now();
            let Err(err) = Client::builder(&nobody).pool_size(size).build() else {
                return 2;
            };
            eprintln!("pool_size {size}: {err}");
            if err.kind() != ErrorKind::InvalidConfig
                || started.elapsed() > Duration::from_millis(500)
            {
                return 3;
            }
        }
        0
    });
    assert_eq!(
        code,
        Some(0),
        "the child aborted (None) or saw no InvalidConfig"
    );
}

#[test]
fn pool_settings_out_of_bounds_are_invalid_config_before_any_io() {
    let nobody = format!("redis://127.0.0.1:{}", free_port());
    let b = || Client::builder(&nobody).pool_size(4);
    let cases = [
        ("min_idle above pool_size", b().min_idle(Some(5))),
        (
            "a zero max_lifetime",
            b().max_lifetime(Some(Duration::ZERO)),
        ),
        (
            "a 10 ms idle_timeout",
            b().idle_timeout(Some(Duration::from_millis(10))),
        ),
        (
            "a 2-day max_lifetime",
            b().max_lifetime(Some(Duration::from_secs(172_800))),
        ),
    ];
    for (what, builder) in cases {
        let started = Instant::now();
        let err = builder.build().unwrap_err();
        eprintln!("{what}: {err}");
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err}");
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}

/// A server at its `maxclients` refuses a new connection with `ERR max
/// number of clients reached` before anything is sent: that passes once
/// clients leave, so it is a retryable `Connection` error (it was a
/// `Server` error, not retryable, before), at the start and at a call
/// that needs a new pooled connection, and the call works once there is
/// room.
#[test]
fn a_server_at_its_maxclients_is_a_retryable_connection_error() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    // No idle pooled connection: the call opens one.
    let client = timings(server.builder()).min_idle(Some(0)).build().unwrap();
    let set_max = |admin: &mut redis::Connection, n: i64| {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxclients")
            .arg(n)
            .query(admin)
            .unwrap();
    };
    set_max(&mut admin, 1); // those connected stay
    let started = Instant::now();
    let build = timings(server.builder()).build().map(drop).unwrap_err();
    let m = client.fair_mutex("full");
    let call = m.try_lock().map(drop).unwrap_err();
    let took = started.elapsed();
    set_max(&mut admin, 10000);
    eprintln!("refused in {took:?}: {build}; {call}");
    for err in [&build, &call] {
        assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
        assert!(err.is_retryable(), "{err:?}");
        assert!(err.to_string().contains("maxclients"), "{err}");
    }
    assert!(retry_while_unreachable(|| m.try_lock()).is_some());
}

/// Every pooled connection closed by the server while the client sits idle
/// (`CLIENT KILL TYPE normal`, as a server's idle `timeout` or an operator
/// does): the next calls, from twice as many threads as the pool has
/// connections, at once, succeed without an error, on connections opened
/// anew.
#[test]
fn pooled_connections_the_server_closed_are_replaced_without_an_error() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    let client = server
        .builder()
        .pool_size(4)
        .min_idle(None)
        .build()
        .unwrap();
    let calls = |round: &str| {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let client = client.clone();
                    s.spawn(move || {
                        let m = client.fair_mutex(&format!("healed-{i}"));
                        let held = m.try_lock_for(Duration::from_secs(2));
                        held.map(|guard| guard.expect("a free lock").unlock())
                    })
                })
                .collect();
            for (i, handle) in handles.into_iter().enumerate() {
                let outcome = handle.join().unwrap();
                assert!(
                    matches!(outcome, Ok(Ok(()))),
                    "{round}: thread {i}: {outcome:?}"
                );
            }
        });
    };
    calls("before");
    assert!(wait_until(Duration::from_secs(5), || plain_connections(
        &server
    )
    .len()
        >= 4));
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal"])
        .query(&mut admin)
        .unwrap();
    assert!(killed >= 4, "{killed}");
    calls("after CLIENT KILL");
}

/// A password rotated at the server while a client runs: once its pooled
/// connections are gone, a call that needs a new one fails with what the
/// server said (`Auth`, not retryable), not "no redis connection could be
/// had in time" (`Connection`, retryable), and within the connect timeout.
#[test]
fn a_rotated_password_is_an_auth_error_not_a_retryable_connection_one() {
    let server = RedisServer::start_with(&["--requirepass", "before"]);
    let client = timings(Client::builder(&server.url_as("default", "before")))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let mutex = client.fair_mutex("rotated");
    mutex.lock().unwrap().unlock().unwrap();
    let mut admin = server.conn();
    let () = redis::cmd("AUTH").arg("before").query(&mut admin).unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("after")
        .query(&mut admin)
        .unwrap();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    let started = Instant::now();
    let err = mutex.try_lock().unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(!err.is_retryable(), "{err}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}
