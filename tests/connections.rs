//! Connections as redis-rs users have them (issue 23, part 3), each against
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
            seen.holder
                .expect("the other client sees the holder")
                .fencing_token,
            held.fencing_token()
        );
        let waiter = LockThread::lock(second.fair_mutex(name));
        assert!(wait_until(Duration::from_secs(5), || first
            .fair_mutex(name)
            .queue_len()
            .unwrap()
            == 1));
        let released = Instant::now();
        held.unlock().unwrap();
        let (granted, token) = waiter.granted_within(Duration::from_secs(5), "the waiter");
        eprintln!(
            "handoff in {:.1} ms, token {token}",
            ms(granted.saturating_duration_since(released))
        );
        waiter.release("the waiter");
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
