//! Re-entry, fencing tokens, names, key expiry, foreign data and errors.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use fairlock::{Client, ErrorKind, MAX_NAME_LEN};
use fairlock_test_support::*;
use redis::Commands;

#[test]
fn reentry_gives_a_second_guard_with_the_same_token() {
    let server = RedisServer::start();
    let client = server.client();
    let mutex = client.fair_mutex("reentrant");
    let outer = mutex.lock().unwrap();
    let started = Instant::now();
    let inner = mutex.lock().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(mutex.hold_count().unwrap(), 2);
    let third = mutex.try_lock().unwrap().expect("try_lock re-enters too");
    assert_eq!(mutex.hold_count().unwrap(), 3);
    drop(third);
    inner.unlock().unwrap();
    assert!(mutex.is_locked().unwrap(), "still held by the outer guard");
    assert!(mutex.is_held_by_current_thread().unwrap());

    // Another thread of the same client is another owner: it must wait.
    let other = mutex.clone();
    let blocked = std::thread::spawn(move || other.try_lock().unwrap().is_none())
        .join()
        .unwrap();
    assert!(blocked, "another thread must not share the hold");

    outer.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap());
    assert_eq!(mutex.hold_count().unwrap(), 0);
    assert_eq!(mutex.remaining_lease().unwrap(), None);
}

#[test]
fn fencing_tokens_increase_across_clients_and_a_restart_that_lost_data() {
    let mut server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let mut last = 0;
    for i in 0..50 {
        let client = if i % 2 == 0 { &a } else { &b };
        let guard = client.fair_mutex("fenced").lock().unwrap();
        assert!(guard.fencing_token() > last, "token went backwards");
        last = guard.fencing_token();
    }
    server.restart();
    // The first calls may see the dead connections; a new one must work.
    let mut after = None;
    assert!(wait_until(Duration::from_secs(10), || {
        match a.fair_mutex("fenced").lock() {
            Ok(guard) => {
                after = Some(guard.fencing_token());
                true
            }
            Err(err) => {
                assert_eq!(err.kind(), ErrorKind::Connection, "{err:?}");
                false
            }
        }
    }));
    let after = after.unwrap();
    assert!(after > last, "token {after} after restart not above {last}");
}

#[test]
fn any_name_works_and_distinct_names_never_collide() {
    let server = RedisServer::start();
    let client = server.client();
    let long = "n".repeat(MAX_NAME_LEN);
    let names: Vec<String> = [
        "plain",
        "a:b",
        "{a}",
        "{a}:b",
        "a}{",
        "}",
        "{",
        "with space",
        "new\nline",
        "nul\0byte",
        "名前",
        "*",
        "?",
        "[x]",
        "a:lock:b",
        "a:queue",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([long])
    .collect();
    // Hold every lock at once: a collision would make one of them wait.
    let guards: Vec<_> = names
        .iter()
        .map(|name| {
            client
                .fair_mutex(name)
                .try_lock()
                .unwrap()
                .unwrap_or_else(|| panic!("{name:?} collided with another name"))
        })
        .collect();
    let tokens: HashSet<u64> = guards.iter().map(|g| g.fencing_token()).collect();
    assert_eq!(guards.len(), names.len());
    assert!(!tokens.is_empty());
    for name in &names {
        let m = client.fair_mutex(name);
        assert_eq!(m.name(), name);
        assert!(m.is_locked().unwrap());
    }
    drop(guards);
    for name in &names {
        assert!(!client.fair_mutex(name).is_locked().unwrap(), "{name:?}");
    }

    // All keys of one lock share one cluster hash tag, hence one slot.
    let mut conn = server.conn();
    let holder = client.fair_mutex("{slot}:x y");
    let guard = holder.lock().unwrap();
    let keys = std::thread::scope(|s| {
        let other = client.fair_mutex("{slot}:x y");
        let waiter = s.spawn(move || other.lock().map(|g| g.fencing_token()));
        assert!(wait_until(Duration::from_secs(5), || holder
            .queue_len()
            .unwrap()
            == 1));
        let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
        drop(guard);
        waiter.join().unwrap().unwrap();
        keys
    });
    let keys: Vec<String> = keys
        .into_iter()
        .filter(|k| k.ends_with(":{slot}:x y"))
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    let tags: HashSet<&str> = keys.iter().map(|k| cluster_hash_tag(k)).collect();
    assert_eq!(tags.len(), 1, "{keys:?}");
}

#[test]
fn empty_and_oversized_names_are_invalid_name() {
    let server = RedisServer::start();
    let client = server.client();
    for name in [String::new(), "x".repeat(MAX_NAME_LEN + 1)] {
        let m = client.fair_mutex(&name);
        assert_eq!(m.lock().unwrap_err().kind(), ErrorKind::InvalidName);
        assert_eq!(m.try_lock().unwrap_err().kind(), ErrorKind::InvalidName);
        assert_eq!(m.is_locked().unwrap_err().kind(), ErrorKind::InvalidName);
        assert_eq!(m.force_unlock().unwrap_err().kind(), ErrorKind::InvalidName);
    }
    let m = client.fair_mutex("ok");
    let err = m.with_fixed_lease(Duration::ZERO).lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig);
}

/// Redis Cluster's rule: a key's slot comes from its first non-empty `{...}`.
fn cluster_hash_tag(key: &str) -> &str {
    let Some(open) = key.find('{') else {
        return key;
    };
    match key[open + 1..].find('}') {
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

fn keys_without_ttl(conn: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
    keys.into_iter()
        .filter(|k| conn.pttl::<_, i64>(k).unwrap() == -1)
        .collect()
}

#[test]
fn every_key_expires_once_released_and_idle() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let mut conn = server.conn();
    let m = a.fair_mutex("expiring");
    let guard = m.lock().unwrap();
    let waiter = {
        let m = b.fair_mutex("expiring");
        std::thread::spawn(move || m.lock().map(|g| g.fencing_token()))
    };
    assert!(wait_until(Duration::from_secs(5), || m
        .queue_len()
        .unwrap()
        == 1));
    assert_eq!(
        keys_without_ttl(&mut conn),
        Vec::<String>::new(),
        "while queued"
    );
    drop(guard);
    waiter.join().unwrap().unwrap();
    // a timed-out waiter too
    let g = m.lock().unwrap();
    let timed_out = {
        let m = b.fair_mutex("expiring");
        std::thread::spawn(move || {
            m.try_lock_for(Duration::from_millis(200))
                .map(|g| g.is_some())
        })
    };
    assert!(!timed_out.join().unwrap().unwrap());
    drop(g);
    let keys: Vec<String> = conn.keys("fairlock:*").unwrap();
    assert!(
        !keys.is_empty(),
        "the free lock's key (its last token) stays, with a TTL"
    );
    assert_eq!(
        keys_without_ttl(&mut conn),
        Vec::<String>::new(),
        "after release"
    );
}

#[test]
fn foreign_data_under_a_lock_key_is_reported_and_left_alone() {
    let server = RedisServer::start();
    let client = server.client();
    let m = client.fair_mutex("occupied");
    // Find the lock's key by locking once, then put a string there.
    let lock_key = {
        let _g = m.lock().unwrap();
        let mut conn = server.conn();
        let keys: Vec<String> = conn.keys("fairlock:*:lock:occupied").unwrap();
        keys.into_iter().next().unwrap()
    };
    let mut conn = server.conn();
    let _: () = conn.set(&lock_key, "someone else's").unwrap();
    let err = m.lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyConflict, "{err:?}");
    assert!(err.to_string().contains("left untouched"), "{err}");
    assert_eq!(m.try_lock().unwrap_err().kind(), ErrorKind::KeyConflict);
    assert_eq!(m.force_unlock().unwrap_err().kind(), ErrorKind::KeyConflict);
    let value: String = conn.get(&lock_key).unwrap();
    assert_eq!(value, "someone else's");

    // A list where the queue goes.
    let _: () = conn.del(&lock_key).unwrap();
    let key = lock_key.replacen(":lock:", ":queue:", 1);
    let _: () = conn.rpush(&key, "theirs").unwrap();
    let err = m.lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyConflict, "{err:?}");
    let kept: Vec<String> = conn.lrange(&key, 0, -1).unwrap();
    assert_eq!(kept, vec!["theirs".to_string()]);
    let _: () = conn.del(&key).unwrap();
}

#[test]
fn unreachable_redis_is_a_connection_error_within_the_connect_timeout() {
    let port = free_port();
    let started = Instant::now();
    let err = Client::builder(&format!("redis://127.0.0.1:{port}"))
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

#[test]
fn client_clock_is_never_read_by_the_scripts() {
    // Every script reads time with TIME on the server; none takes a
    // timestamp argument. Guard that property at the source level.
    let sources = lua_sources();
    assert_eq!(
        sources.len(),
        26,
        "the 5 files of lua/lib/ and the 21 operations"
    );
    // lua/lib/'s files are one library (its steps take the time read by
    // server_time as arguments), each operation a script of its own.
    let (lib, ops): (Vec<_>, Vec<_>) = sources
        .into_iter()
        .partition(|(path, _)| path.parent().is_some_and(|dir| dir.ends_with("lib")));
    let lib_code: String = lib.into_iter().map(|(_, code)| code).collect();
    let whole_lib = (std::path::PathBuf::from("lua/lib/"), lib_code);
    for (path, code) in ops.into_iter().chain([whole_lib]) {
        assert!(
            !code.contains("os.time") && !code.contains("os.clock"),
            "{path:?}"
        );
        if code.contains("now_ms") || code.contains("now_us") {
            let uses_server_time =
                code.contains("server_time()") || code.contains("redis.call('TIME')");
            assert!(uses_server_time, "{path:?} computes time without TIME");
        }
    }
}

#[test]
fn status_lists_holder_and_queue_in_order() {
    let server = RedisServer::start();
    let holder_client = server.client();
    let m = holder_client.fair_mutex("status");
    let free = m.status(10).unwrap();
    assert_eq!(free.holder(), None);
    assert!(free.waiters.is_empty());
    assert_eq!(free.queue_len, 0);

    let guard = m.lock().unwrap();
    let _again = m.lock().unwrap();
    let clients: Vec<Client> = (0..3).map(|_| server.client()).collect();
    let waiters: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let w = c.fair_mutex("status");
            let handle = std::thread::spawn(move || w.lock().map(|g| g.fencing_token()));
            assert!(wait_until(Duration::from_secs(5), || m
                .queue_len()
                .unwrap()
                == i + 1));
            handle
        })
        .collect();
    let status = m.status(2).unwrap();
    let holder = status.holder().cloned().expect("held");
    assert_eq!(holder.who.client_id(), holder_client.id());
    assert!(holder.who.thread().is_some());
    assert_eq!(holder.hold_count, 2);
    assert_eq!(holder.fencing_token, guard.fencing_token());
    assert!(holder.remaining_lease.unwrap() <= Duration::from_secs(2));
    assert_eq!(status.queue_len, 3);
    assert_eq!(status.last_fencing_token, Some(guard.fencing_token()));
    let listed: Vec<&str> = status.waiters.iter().map(|w| w.who.client_id()).collect();
    assert_eq!(
        listed,
        vec![clients[0].id(), clients[1].id()],
        "first two, in order"
    );
    for w in &status.waiters {
        let left = w.liveness_left.expect("live");
        assert!(
            left > Duration::ZERO && left <= Duration::from_secs(1),
            "{left:?}"
        );
    }
    drop(_again);
    drop(guard);
    for handle in waiters {
        handle.join().unwrap().unwrap();
    }
}
