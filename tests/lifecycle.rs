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

fn fairlock_threads() -> usize {
    thread_names()
        .iter()
        .filter(|n| n.starts_with("fairlock"))
        .count()
}

#[test]
fn dropping_clients_stops_their_threads_and_closes_their_connections() {
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
    // Joined threads are gone at once; r2d2's maintenance thread exits on
    // its own shortly after its pool is dropped.
    assert!(
        wait_until(Duration::from_secs(10), || fairlock_threads() == 0
            && thread_names().len() == threads_before),
        "threads left: {:?}",
        thread_names()
    );
    assert!(
        wait_until(Duration::from_secs(10), || connected_clients(&mut conn)
            == conns_before),
        "connections left: {}",
        connected_clients(&mut conn)
    );
}
