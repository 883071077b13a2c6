//! Self-tests of the test support: the multi-node topologies
//! (tests/support/src/cluster.rs and sentinel.rs) start whole, keep a
//! replicated write, and fail over when their master is SIGKILLed; a
//! refused port stays refused while it is held.

use std::time::{Duration, Instant};

use fairlock_test_support::*;

#[test]
fn cluster_of_three_masters_starts_and_fails_over() {
    let _serial = serial();
    let started = Instant::now();
    let mut cluster = RedisCluster::start();
    let startup = started.elapsed();

    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "masters: {masters:?}");
    for &master in &masters {
        let replica = cluster.replica_of(master);
        assert!(
            replica != master && cluster.ports().contains(&replica),
            "master {master} has replica {replica}"
        );
    }
    assert_eq!(cluster.seed_urls().len(), 6);
    assert_eq!(cluster.url().matches("127.0.0.1:").count(), 6);

    let key = "topology:cluster:key";
    let master = cluster.master_of_key(key);
    assert!(masters.contains(&master), "{master} not in {masters:?}");
    let slot = cluster.key_slot(key);
    assert_eq!(cluster.master_for_slot(slot), master);
    let replica = cluster.replica_of(master);

    let mut conn = cluster.conn(master);
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("value")
        .query(&mut conn)
        .unwrap();
    // WAIT returns at the acknowledgement; its bound is for a loaded machine
    // (two suites on two cores saw 100 ms pass without one).
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged the write");
    drop(conn);

    let killed = cluster.kill(master);
    let waited = cluster.wait_for_promotion(master, Duration::from_secs(15));
    let failover = killed.elapsed();
    assert!(!cluster.masters().contains(&master));
    assert!(cluster.masters().contains(&replica));
    assert_eq!(cluster.master_of_key(key), replica);

    let mut conn = cluster.conn(replica);
    let value: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).unwrap();
    assert_eq!(value.as_deref(), Some("value"));
    eprintln!(
        "cluster: startup {:.0} ms; master {master} killed, replica {replica} promoted \
         {:.0} ms after the kill (waited {:.0} ms)",
        ms(startup),
        ms(failover),
        ms(waited)
    );
}

#[test]
fn sentinel_set_starts_and_fails_over() {
    let _serial = serial();
    let started = Instant::now();
    let mut set = SentinelSet::start();
    let startup = started.elapsed();

    assert_eq!(SentinelSet::master_name(), "fairlock-master");
    assert_eq!(set.sentinel_urls().len(), 3);
    assert!(set.url().ends_with("/fairlock-master"), "{}", set.url());
    let master = set.master_port();

    let mut conn = set.conn_to(master);
    let _: () = redis::cmd("SET")
        .arg("topology:sentinel:key")
        .arg("value")
        .query(&mut conn)
        .unwrap();
    // WAIT returns at the acknowledgement; its bound is for a loaded machine
    // (two suites on two cores saw 100 ms pass without one).
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged the write");
    drop(conn);

    let (old, killed) = set.kill_master();
    assert_eq!(old, master);
    let waited = set.wait_for_failover(old, Duration::from_secs(20));
    let failover = killed.elapsed();
    let new = set.master_port();
    assert_ne!(new, old);

    let mut conn = set.conn_to(new);
    let value: Option<String> = redis::cmd("GET")
        .arg("topology:sentinel:key")
        .query(&mut conn)
        .unwrap();
    assert_eq!(value.as_deref(), Some("value"));
    eprintln!(
        "sentinel: startup {:.0} ms; master {old} killed, {new} master for every sentinel \
         {:.0} ms after the kill (waited {:.0} ms)",
        ms(startup),
        ms(failover),
        ms(waited)
    );
}

#[test]
fn a_refused_port_refuses_and_cannot_be_taken_while_held() {
    let refused = RefusedPort::new();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], refused.port()));
    let err = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    // What a server or relay of another test does to listen there.
    assert!(
        std::net::TcpListener::bind(addr).is_err(),
        "the port was taken"
    );
    drop(refused);
    assert!(
        std::net::TcpListener::bind(addr).is_ok(),
        "the port is free again"
    );
}
