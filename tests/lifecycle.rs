//! Clients start their threads and connections, and give all of them back.
//! (Alone in its binary: it counts the process's threads.)

use std::time::Duration;

use fairlock_test_support::*;

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

/// One test at a time: each counts the process's threads and the server's
/// connections.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn fairlock_threads() -> usize {
    thread_names()
        .iter()
        .filter(|n| n.starts_with("fairlock"))
        .count()
}

#[test]
fn dropping_clients_stops_their_threads_and_closes_their_connections() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut conn = server.conn();
    let threads_before = thread_names().len();
    let conns_before = connected_clients(&mut conn);
    assert_eq!(fairlock_threads(), 0);

    let client = server.client();
    // Linux shows 15 bytes of a name; a new thread names itself as it starts.
    let count = |name: &str| thread_names().iter().filter(|n| *n == name).count();
    assert!(
        wait_until(Duration::from_secs(5), || count("fairlock-watchd") == 1
            && count("fairlock-subscr") == 1
            && count("fairlock-pool") == 1),
        "{:?}",
        thread_names()
    );
    // One held lock, then the client, its mutex and guard are all dropped.
    let guard = client.fair_mutex("lifecycle").lock().unwrap();
    drop(client);
    assert_eq!(fairlock_threads(), 3, "the guard keeps the client alive");
    drop(guard);

    for _ in 0..50 {
        let client = server.client();
        let m = client.fair_mutex("lifecycle");
        m.lock().unwrap().unlock().unwrap();
    }
    // Every kind, a watch, a wait that ran out, a guard dropped on another
    // thread, then the client's handles before its last guard.
    let client = server.client();
    let mut watch = client.election("lifecycle").watch().unwrap();
    watch.next(Duration::from_secs(2)).unwrap();
    let leader = client.election("lifecycle").campaign().unwrap();
    let read = client.fair_rwlock("lifecycle").read().unwrap();
    let multi = client
        .fair_multi_lock(["lifecycle-a", "lifecycle-b"])
        .lock()
        .unwrap();
    let permit = client.fair_semaphore("lifecycle", 1).acquire().unwrap();
    let sem = client.fair_semaphore("lifecycle", 1);
    let waited = std::thread::spawn(move || sem.try_acquire_for(Duration::from_millis(50)));
    assert!(waited.join().unwrap().unwrap().is_none());
    let unbound = client.fair_mutex("lifecycle").unbound().lock().unwrap();
    std::thread::spawn(move || drop(unbound)).join().unwrap();
    drop((client, watch, leader, read, multi));
    drop(permit);
    assert_nothing_left(&mut conn, threads_before, conns_before);
}

/// A build that fails at its first contact, or after it (a server that
/// may evict, refused by `require_noeviction`), leaves no thread and no
/// connection behind: the pool's attempts to open its idle connections
/// stop with it.
#[test]
fn a_failed_build_leaves_no_thread_and_no_connection() {
    let _serial = serial();
    let server = RedisServer::start_with(&["--requirepass", "right"]);
    let mut conn = try_conn_as(server.port(), Some("right")).unwrap();
    let threads_before = thread_names().len();
    let conns_before = connected_clients(&mut conn);
    let url = |password: &str| format!("redis://:{password}@127.0.0.1:{}", server.port());
    for _ in 0..5 {
        let refused = fairlock::Client::builder(&url("wrong"))
            .min_idle(None)
            .build();
        assert!(refused.is_err());
        let unknown_db = fairlock::Client::builder(&format!("{}/99", url("right"))).build();
        assert!(unknown_db.is_err());
    }
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1gb")
        .query(&mut conn)
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut conn)
        .unwrap();
    for _ in 0..5 {
        let evicting = fairlock::Client::builder(&url("right"))
            .min_idle(None)
            .require_noeviction(true)
            .build();
        assert!(evicting.is_err());
    }
    assert_nothing_left(&mut conn, threads_before, conns_before);
}

/// No fairlock thread is left, the process has the threads it had
/// (`threads_before`), and the server the connections it had
/// (`conns_before`), within 10 s: joined threads go at once, and r2d2's
/// maintenance thread exits on its own shortly after its pool is dropped.
fn assert_nothing_left(conn: &mut redis::Connection, threads_before: usize, conns_before: i64) {
    assert!(
        wait_until(Duration::from_secs(10), || fairlock_threads() == 0
            && thread_names().len() == threads_before),
        "threads left: {:?}",
        thread_names()
    );
    assert!(
        wait_until(Duration::from_secs(10), || connected_clients(conn)
            == conns_before),
        "connections left: {}",
        connected_clients(conn)
    );
}
