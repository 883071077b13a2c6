//! Bad input: invalid and unusual lock names, someone else's data where a
//! lock keeps its state, malformed URLs and invalid settings. Each gives a
//! clear error at once, or works, and never touches what is not its own.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use fairlock::{Client, ErrorKind, FairMutex, LockKind, MAX_NAME_LEN};
use fairlock_test_support::*;
use redis::Commands;

/// Every call on a handle, each reduced to its error kind.
fn every_call(m: &FairMutex) -> Vec<(&'static str, Result<(), ErrorKind>)> {
    let kind = |r: fairlock::Result<()>| r.map_err(|e| e.kind());
    vec![
        ("lock", kind(m.lock().map(drop))),
        ("try_lock", kind(m.try_lock().map(drop))),
        (
            "try_lock_for",
            kind(m.try_lock_for(Duration::from_millis(100)).map(drop)),
        ),
        ("is_locked", kind(m.is_locked().map(drop))),
        (
            "is_held_by_current_thread",
            kind(m.is_held_by_current_thread().map(drop)),
        ),
        ("hold_count", kind(m.hold_count().map(drop))),
        ("remaining_lease", kind(m.remaining_lease().map(drop))),
        ("queue_len", kind(m.queue_len().map(drop))),
        ("status", kind(m.status(10).map(drop))),
        ("force_unlock", kind(m.force_unlock().map(drop))),
    ]
}

#[test]
fn empty_and_oversized_names_are_invalid_name_on_every_call() {
    let server = RedisServer::start();
    let client = server.client();
    // 32 768 two-byte characters: exactly the limit, in bytes.
    let at_limit = "é".repeat(MAX_NAME_LEN / 2);
    assert_eq!(at_limit.len(), MAX_NAME_LEN);
    for name in [
        String::new(),
        "x".repeat(MAX_NAME_LEN + 1),
        format!("{at_limit}a"),
    ] {
        let m = client.fair_mutex(&name);
        let started = Instant::now();
        for (call, result) in every_call(&m)
            .into_iter()
            .chain(every_call(&m.with_fixed_lease(Duration::from_secs(1))))
        {
            assert_eq!(
                result,
                Err(ErrorKind::InvalidName),
                "{call} with a {}-byte name",
                name.len()
            );
        }
        assert!(started.elapsed() < Duration::from_millis(100), "no I/O");
        let err = m.lock().unwrap_err();
        assert!(err.to_string().contains("lock name"), "{err}");
    }
    let m = client.fair_mutex(&at_limit);
    let guard = m.try_lock().unwrap().expect("a name at the limit works");
    assert_eq!(m.hold_count().unwrap(), 1);
    drop(guard);
    assert!(!m.is_locked().unwrap());
}

#[test]
fn unusual_names_work_and_never_collide() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let names: Vec<&str> = vec![
        "{}",
        "{",
        "}",
        "}{",
        "{a}",
        "a",
        "A",
        "a ",
        " a",
        "*",
        "?",
        "[a]",
        "a*",
        "a?",
        "\\*",
        "\n",
        "a\n",
        "a\r\n",
        "\r",
        "\t",
        "\0",
        "a\0",
        "a\0b",
        "\u{e9}",    // é, one code point
        "e\u{301}",  // é, e + combining accent
        "\u{feff}a", // byte order mark
        "\u{200b}",  // zero-width space
        "\u{1f512}", // 🔒
        "名前",
        "名前\n",
        "fairlock:wake:x",
        "x}:lock:{y",
        ":lock:",
        "a:queue",
        "%s%n",
        "'; redis.call('FLUSHALL') --",
    ];
    // A holds every name at once: a collision would show as a second hold
    // (re-entry) on the same keys.
    let guards: Vec<_> = names
        .iter()
        .map(|name| {
            a.fair_mutex(name)
                .try_lock()
                .unwrap()
                .unwrap_or_else(|| panic!("{name:?} is taken"))
        })
        .collect();
    for name in &names {
        let m = a.fair_mutex(name);
        assert_eq!(m.name(), *name);
        assert_eq!(
            m.hold_count().unwrap(),
            1,
            "{name:?} shares keys with another name"
        );
        assert!(b.fair_mutex(name).try_lock().unwrap().is_none(), "{name:?}");
    }
    drop(guards);
    // One at a time: while A holds one name, every other name is free.
    for held in &names {
        let guard = a.fair_mutex(held).try_lock().unwrap().unwrap();
        for other in names.iter().filter(|n| *n != held) {
            assert!(
                !b.fair_mutex(other).is_locked().unwrap(),
                "{held:?} and {other:?} collide"
            );
        }
        drop(guard);
    }
    // Three keys per name when queued, none shared; a free lock keeps
    // one (its last token).
    let mut conn = server.conn();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    let locks = keys
        .iter()
        .filter(|k| String::from_utf8_lossy(k).contains(":lock:"))
        .count();
    assert_eq!(locks, names.len(), "one lock key per name");

    // A queued waiter and a handoff on the nastiest name of all.
    let nasty = "*?\n\0{x}}{\u{e9}\u{1f512} ";
    let holder = a.fair_mutex(nasty).lock().unwrap();
    let waiter = LockThread::lock(b.fair_mutex(nasty));
    assert!(wait_until(Duration::from_secs(5), || a
        .fair_mutex(nasty)
        .queue_len()
        .unwrap()
        == 1));
    let token = holder.fencing_token();
    holder.unlock().unwrap();
    let (_, next) = waiter.granted_within(Duration::from_secs(3), "the waiter on a nasty name");
    assert!(next > token);
    waiter.release("the waiter on a nasty name");
    assert!(!a.fair_mutex(nasty).is_locked().unwrap());
}

/// The Redis key of `kind` for lock `name` under the default prefix.
fn key_of(kind: &str, name: &str) -> String {
    let tag = &sha1_smol::Sha1::from(name).digest().to_string()[..16];
    format!("fairlock:{{{tag}}}:{kind}:{name}")
}

fn dump(conn: &mut redis::Connection, key: &str) -> (Vec<u8>, i64) {
    let value: Vec<u8> = redis::cmd("DUMP").arg(key).query(conn).unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(conn).unwrap();
    (value, ttl)
}

#[test]
fn foreign_data_under_any_lock_key_is_a_key_conflict_and_stays_untouched() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let mut conn = server.conn();
    let foreign: [(&str, &[&str]); 10] = [
        ("lock", &["SET", "theirs"]),
        ("lock", &["SET", "1 theirs"]),
        ("lock", &["HSET", "f", "theirs"]),
        ("lock", &["RPUSH", "theirs"]),
        ("lock", &["ZADD", "1", "theirs"]),
        ("queue", &["SET", "theirs"]),
        ("queue", &["HSET", "f", "theirs"]),
        ("queue", &["RPUSH", "theirs"]),
        ("queue", &["SADD", "theirs"]),
        ("lock", &["SADD", "theirs"]),
    ];
    let mut conflicts_by_kind: HashMap<&str, usize> = HashMap::new();
    for (case, (kind, write)) in foreign.iter().enumerate() {
        let name = format!("occupied-{case}");
        let key = key_of(kind, &name);
        let _: () = redis::cmd(write[0])
            .arg(&key)
            .arg(&write[1..])
            .query(&mut conn)
            .unwrap();
        let before = dump(&mut conn, &key);

        // A holds (or tries to), B queues behind it and gives up, an
        // operator looks and forces; then A lets go.
        let mut results = Vec::new();
        let held = a.fair_mutex(&name).try_lock();
        results.push(("try_lock", held.as_ref().map(|_| ()).map_err(|e| e.kind())));
        let waiter = {
            let m = b.fair_mutex(&name);
            std::thread::spawn(move || {
                m.try_lock_for(Duration::from_millis(300))
                    .map(|g| g.is_some())
            })
        };
        let waited = join_within(waiter, Duration::from_secs(5), "the waiter");
        results.push((
            "try_lock_for",
            waited.as_ref().map(|_| ()).map_err(|e| e.kind()),
        ));
        if let Err(err) = &waited {
            assert!(err.to_string().contains("left untouched"), "{err:?}");
        }
        let observer = b.fair_mutex(&name);
        results.push((
            "is_locked",
            observer.is_locked().map(drop).map_err(|e| e.kind()),
        ));
        results.push((
            "queue_len",
            observer.queue_len().map(drop).map_err(|e| e.kind()),
        ));
        results.push((
            "status",
            observer.status(10).map(drop).map_err(|e| e.kind()),
        ));
        results.push((
            "force_unlock",
            observer.force_unlock().map(drop).map_err(|e| e.kind()),
        ));
        if let Ok(Some(guard)) = held {
            results.push(("unlock", guard.unlock().map_err(|e| e.kind())));
        }
        for (call, result) in &results {
            assert!(
                matches!(
                    result,
                    Ok(()) | Err(ErrorKind::KeyConflict | ErrorKind::LeaseLost)
                ),
                "{kind} key holding {write:?}: {call} gave {result:?}"
            );
        }
        let conflicts = results
            .iter()
            .filter(|(_, r)| *r == Err(ErrorKind::KeyConflict))
            .count();
        assert!(
            conflicts > 0,
            "{kind} key holding {write:?}: no conflict reported: {results:?}"
        );
        *conflicts_by_kind.entry(kind).or_default() += conflicts;
        assert_eq!(
            dump(&mut conn, &key),
            before,
            "{kind} key holding {write:?} was changed: {results:?}"
        );

        // Their data gone, the lock works again at once.
        let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
        let guard = a
            .fair_mutex(&name)
            .try_lock_for(Duration::from_secs(3))
            .unwrap()
            .expect("the lock works once the foreign key is gone");
        drop(guard);
        assert!(
            wait_until(Duration::from_secs(3), || b
                .fair_mutex(&name)
                .queue_len()
                .unwrap()
                == 0),
            "{kind} key holding {write:?}: a queue entry was left behind"
        );
    }
    eprintln!("KeyConflict reports by the key that held foreign data: {conflicts_by_kind:?}");
    assert_eq!(
        keys_without_ttl(&mut conn, "fairlock:*"),
        Vec::<String>::new()
    );
}

#[test]
fn malformed_urls_are_invalid_config_at_once_and_never_show_the_password() {
    let cases = [
        "",
        "not a url",
        "127.0.0.1:6379",
        "http://127.0.0.1:6379",
        "redis://",
        "redis://127.0.0.1:notaport",
        "redis://127.0.0.1:99999",
        "redis://[::1",
        "redis://127.0.0.1:6379/notadb",
        "redis://127.0.0.1:6379?protocol=resp9",
        "redis://user:hunter2secret@exa mple.com:6379",
        "redis://user:hunter2secret@127.0.0.1:99999",
    ];
    for url in cases {
        let started = Instant::now();
        let err = Client::builder(url).build().unwrap_err();
        let took = started.elapsed();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{url:?}: {err:?}");
        assert!(
            took < Duration::from_millis(100),
            "{url:?} took {took:?}: no I/O expected"
        );
        // Display says what was wrong, the source says why.
        let why = std::error::Error::source(&err)
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(err.to_string().contains("url"), "{url:?}: {err}");
        assert!(!why.is_empty(), "{url:?}: no reason given");
        for text in [err.to_string(), format!("{err:?}"), why] {
            assert!(
                !text.contains("hunter2secret"),
                "{url:?}: password shown in {text:?}"
            );
        }
    }
}

#[cfg(not(feature = "tls"))]
#[test]
fn a_tls_url_without_the_tls_feature_is_invalid_config() {
    let err = Client::open("rediss://127.0.0.1:6379").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
}

#[test]
fn zero_or_too_short_leases_and_timeouts_are_rejected_before_any_io() {
    // Nothing listens here: a setting checked after connecting would show
    // as a connection error instead.
    let url = format!("redis://127.0.0.1:{}", free_port());
    let b = || Client::builder(&url);
    for (what, builder) in [
        ("lease 0", b().lease(Duration::ZERO)),
        ("lease 29 ms", b().lease(Duration::from_millis(29))),
        ("waiter_timeout 0", b().waiter_timeout(Duration::ZERO)),
        (
            "waiter_timeout 1 ms",
            b().waiter_timeout(Duration::from_millis(1)),
        ),
        ("lease too long", b().lease(Duration::MAX)),
        ("connect_timeout 0", b().connect_timeout(Duration::ZERO)),
        ("command_timeout 0", b().command_timeout(Duration::ZERO)),
        ("pool_size 0", b().pool_size(0)),
        ("empty key_prefix", b().key_prefix("")),
        ("key_prefix with a brace", b().key_prefix("a{b}")),
    ] {
        let started = Instant::now();
        let err = builder.build().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err:?}");
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "{what}: no I/O expected"
        );
        eprintln!("{what}: {err}");
    }

    let server = RedisServer::start();
    let client = server.client();
    let m = client.fair_mutex("fixed");
    for lease in [Duration::ZERO, Duration::from_millis(29)] {
        for (call, result) in every_call(&m.with_fixed_lease(lease)).into_iter().take(3) {
            assert_eq!(
                result,
                Err(ErrorKind::InvalidConfig),
                "{call} with a {lease:?} lease"
            );
        }
    }
    assert!(!m.is_locked().unwrap());
}

/// Every message names a lock one way, `"name"` (Rust's `{:?}`, as most
/// already did; a call's failure said `'name'`): the errors of each kind's
/// failure paths are scanned for the other style. The paths: a lost hold's
/// unlock (its kind's own description of the hold), a script's refusal
/// (the call that failed, by operation, kind and name), and a call that
/// cannot reach Redis.
#[test]
fn every_message_quotes_a_lock_name_one_way() {
    let mut server = RedisServer::start();
    let holder = server.client();
    let operator = server.client();
    let name = "quoted";
    let mut messages: Vec<(String, fairlock::Error)> = Vec::new();

    // Lost holds of every kind: force-unlocked, then unlocked.
    use fairlock::LockKind;
    let guards = [
        (
            LockKind::Mutex,
            holder.fair_mutex(name).unbound().lock().unwrap().into_any(),
        ),
        (
            LockKind::Semaphore,
            holder
                .fair_semaphore(name, 2)
                .unbound()
                .acquire()
                .unwrap()
                .into_any(),
        ),
        (
            LockKind::RwLock,
            holder
                .fair_rwlock(name)
                .unbound()
                .write()
                .unwrap()
                .into_any(),
        ),
        (
            LockKind::Election,
            holder.election(name).campaign().unwrap().into_any(),
        ),
    ];
    for (kind, guard) in guards {
        assert!(operator.force_unlock(kind, name).unwrap(), "{kind:?}");
        let lost = guard.lease_signal().wait_timeout(Duration::from_secs(5));
        assert_eq!(lost, Some(fairlock::LeaseEnd::Lost), "{kind:?}");
        messages.push((format!("{kind:?} unlock"), guard.unlock().unwrap_err()));
    }
    // Scripts' refusals: another number of permits, a write over a read.
    let permit = holder.fair_semaphore(name, 2).acquire().unwrap();
    let other = operator.fair_semaphore(name, 3).try_acquire().unwrap_err();
    messages.push(("permits mismatch".into(), other));
    drop(permit);
    let read = holder.fair_rwlock(name).read().unwrap();
    let write = holder.fair_rwlock(name).try_write().unwrap_err();
    messages.push(("upgrade refused".into(), write));
    drop(read);
    // Redis away: each kind's call fails naming its lock.
    let away = server
        .builder()
        .connect_timeout(Duration::from_millis(200))
        .command_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    server.kill();
    for kind in [
        LockKind::Mutex,
        LockKind::Semaphore,
        LockKind::RwLock,
        LockKind::Election,
    ] {
        let err = away.status(kind, name, 10).unwrap_err();
        messages.push((format!("{kind:?} status, redis away"), err));
    }

    for (path, err) in &messages {
        let text = err.to_string();
        eprintln!("{path}: {:?}: {text}", err.kind());
        assert!(
            text.contains("\"quoted\""),
            "{path}: not \"quoted\": {text}"
        );
        assert!(!text.contains("'quoted'"), "{path}: 'quoted': {text}");
    }
    let kinds: Vec<ErrorKind> = messages.iter().map(|(_, err)| err.kind()).collect();
    for kind in [
        ErrorKind::LeaseLost,
        ErrorKind::PermitsMismatch,
        ErrorKind::UpgradeRefused,
        ErrorKind::Connection,
    ] {
        assert!(kinds.contains(&kind), "no {kind:?} among {kinds:?}");
    }
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
    assert_eq!(keys.len(), 2, "{keys:?}");
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
/// The records a revoke and a force release keep of their answer (the
/// last two keys of every kind) are the lock's keys too: someone else's
/// string there is a `KeyConflict` naming the lock, and is left as it was
/// (it was overwritten with the record, and given a TTL, before).
#[test]
fn foreign_data_under_a_revoke_or_force_record_is_a_key_conflict_and_stays_untouched() {
    use fairlock::{__test_support::LockKeys, LockKind};
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let mut conn = server.conn();
    let kinds = [
        LockKind::Mutex,
        LockKind::Semaphore,
        LockKind::RwLock,
        LockKind::Election,
    ];
    let mut changed = Vec::new();
    for kind in kinds {
        for record in ["revoke", "force release"] {
            let name = format!("{}-{}", kind.label(), record.replace(' ', "-"));
            let keys = LockKeys::of_kind("fairlock", &name, kind).unwrap();
            let key = &keys.all[keys.all.len() - if record == "revoke" { 2 } else { 1 }];
            let _: () = conn.set(key, "theirs").unwrap();
            let before = dump(&mut conn, key);
            let guard = match kind {
                LockKind::Mutex => {
                    Box::new(a.fair_mutex(&name).lock().unwrap()) as Box<dyn std::any::Any>
                }
                LockKind::Semaphore => Box::new(a.fair_semaphore(&name, 2).acquire().unwrap()),
                LockKind::RwLock => Box::new(a.fair_rwlock(&name).read().unwrap()),
                _ => Box::new(a.election(&name).campaign().unwrap()),
            };
            let result = match record {
                "revoke" => b.revoke(kind, &name).map(drop),
                _ => b.force_unlock(kind, &name).map(drop),
            };
            drop(guard);
            let after = dump(&mut conn, key);
            if after != before || result.is_ok() {
                changed.push(format!("{record} of {} {name}: {result:?}", kind.label()));
                continue;
            }
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::KeyConflict, "{err:?}");
            assert!(!err.is_retryable(), "{err:?}");
            let said = err.to_string();
            let call = format!("{record} of {} {name:?}: ", kind.label());
            assert!(said.starts_with(&call), "{said}");
            assert!(said.contains("left untouched"), "{said}");
        }
    }
    assert!(changed.is_empty(), "records overwritten: {changed:#?}");
}

/// An election's errors name its calls in its words, as its API says
/// them: its campaign (`campaign for election "x"`) and its leader's
/// resignation (`resignation from election "x"`), where they said
/// `acquire of election` and `release of election`; the error kind is the
/// same. Here another program's hash where the election's lock key goes:
/// a `KeyConflict`, left untouched.
#[test]
fn an_election_s_errors_name_its_campaign_and_resignation() {
    use fairlock::__test_support::LockKeys;
    let server = RedisServer::start();
    let client = server.client();
    let mut conn = server.conn();
    let keys = LockKeys::of_kind("fairlock", "words", LockKind::Election).unwrap();
    let key = keys.lock().to_owned();
    let _: () = conn.hset(&key, "f", "theirs").unwrap();
    let err = client.election("words").try_campaign().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyConflict, "{err:?}");
    let said = err.to_string();
    assert!(
        said.starts_with("campaign for election \"words\": "),
        "{said}"
    );
    let _: () = conn.del(&key).unwrap();

    let leadership = client.election("words").campaign().unwrap();
    let _: () = conn.del(&key).unwrap();
    let _: () = conn.hset(&key, "f", "theirs").unwrap();
    let err = leadership.unlock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyConflict, "{err:?}");
    let said = err.to_string();
    assert!(
        said.starts_with("resignation from election \"words\": "),
        "{said}"
    );
    assert!(!said.contains(" of election"), "{said}");
}

/// A fixed lease or maximum hold out of range, or a bad election value,
/// refused before any I/O, names the call and the lock, as every message
/// does (it named neither before).
#[test]
fn a_refused_lease_or_value_names_the_call_and_the_lock() {
    let server = RedisServer::start();
    let c = server.client();
    let zero = Duration::ZERO;
    let refused = [
        (
            "mutex",
            c.fair_mutex("jobs")
                .with_fixed_lease(zero)
                .try_lock()
                .map(drop),
        ),
        (
            "mutex",
            c.fair_mutex("jobs")
                .with_max_hold(zero)
                .try_lock()
                .map(drop),
        ),
        (
            "rwlock",
            c.fair_rwlock("jobs")
                .with_fixed_lease(zero)
                .try_read()
                .map(drop),
        ),
        (
            "semaphore",
            c.fair_semaphore("jobs", 2)
                .with_fixed_lease(zero)
                .try_acquire()
                .map(drop),
        ),
        (
            "election",
            c.election("jobs")
                .with_fixed_lease(zero)
                .try_campaign()
                .map(drop),
        ),
        (
            "election",
            c.election("jobs")
                .with_value("a b")
                .try_campaign()
                .map(drop),
        ),
    ];
    for (kind, result) in refused {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        let said = err.to_string();
        // An election's acquire is its campaign, in its words.
        let call = match kind {
            "election" => "campaign for election".to_owned(),
            kind => format!("acquire of {kind}"),
        };
        assert!(said.starts_with(&format!("{call} \"jobs\": ")), "{said}");
    }
}

/// Another program's value of another type under an election's history
/// key: a campaign, a leader's read and a resignation work, and leave it
/// as it was, with no TTL given to it.
#[test]
fn foreign_data_under_an_election_s_history_stays_untouched() {
    let server = RedisServer::start();
    let client = server.client();
    let mut conn = server.conn();
    let foreign: [&[&str]; 4] = [
        &["SET", "theirs"],
        &["HSET", "f", "theirs"],
        &["SADD", "theirs"],
        &["ZADD", "1", "theirs"],
    ];
    for write in foreign {
        let name = format!("history-{}", write[0]);
        let key = key_of("electh", &name);
        let _: () = redis::cmd(write[0])
            .arg(&key)
            .arg(&write[1..])
            .query(&mut conn)
            .unwrap();
        let before = dump(&mut conn, &key);
        let election = client.election(&name).with_value("v1");
        let leadership = election.campaign_with(Duration::from_secs(1)).unwrap();
        assert!(election.leader().unwrap().is_some());
        leadership.expect("it leads").unlock().unwrap();
        let after = dump(&mut conn, &key);
        assert_eq!(after, before, "{write:?}: PTTL {} after", after.1);
    }
}

/// Another program's sorted set where a lock keeps its queue (every kind)
/// or a counted lock its holders: fairlock's calls on the lock say
/// `KeyConflict` and leave its members as they were, rather than drop
/// them as entries of waiters gone.
#[test]
fn a_foreign_sorted_set_under_a_queue_or_holders_key_stays_untouched() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let mut conn = server.conn();
    let kinds = [
        (LockKind::Mutex, "queue"),
        (LockKind::Election, "electq"),
        (LockKind::Semaphore, "semq"),
        (LockKind::Semaphore, "sem"),
        (LockKind::RwLock, "rwq"),
    ];
    let mut outcomes = Vec::new();
    for (kind, key_kind) in kinds {
        let name = format!("sorted-{key_kind}");
        let key = key_of(key_kind, &name);
        let _: () = conn
            .zadd_multiple(&key, &[(1, "theirs"), (2, "other")])
            .unwrap();
        let before = dump(&mut conn, &key);
        let kinds = |r: Result<bool, fairlock::Error>| r.map_err(|e| e.kind());
        let wait = Duration::from_millis(200);
        let results = match kind {
            LockKind::Mutex => [
                kinds(a.fair_mutex(&name).try_lock().map(|g| g.is_some())),
                kinds(b.fair_mutex(&name).try_lock_for(wait).map(|g| g.is_some())),
            ],
            LockKind::Election => [
                kinds(a.election(&name).campaign_with(wait).map(|l| l.is_some())),
                kinds(b.election(&name).campaign_with(wait).map(|l| l.is_some())),
            ],
            LockKind::Semaphore => [
                kinds(
                    a.fair_semaphore(&name, 1)
                        .try_acquire()
                        .map(|g| g.is_some()),
                ),
                kinds(
                    b.fair_semaphore(&name, 1)
                        .try_acquire_for(wait)
                        .map(|g| g.is_some()),
                ),
            ],
            _ => [
                kinds(a.fair_rwlock(&name).try_write().map(|g| g.is_some())),
                kinds(
                    b.fair_rwlock(&name)
                        .try_write_for(wait)
                        .map(|g| g.is_some()),
                ),
            ],
        };
        let members: Vec<String> = conn.zrange(&key, 0, -1).unwrap_or_default();
        outcomes.push(format!("{key_kind}: {results:?}, left {members:?}"));
        assert_eq!(
            results,
            [Err(ErrorKind::KeyConflict), Err(ErrorKind::KeyConflict)],
            "{outcomes:?}"
        );
        assert_eq!(dump(&mut conn, &key), before, "{outcomes:?}");
    }
    eprintln!("{outcomes:?}");
}

#[test]
fn a_refused_name_names_the_call_and_the_kind() {
    let server = RedisServer::start();
    let c = server.client();
    let long = "x".repeat(MAX_NAME_LEN + 1);
    let (mut named, mut total) = (0, 0);
    for name in [String::new(), long] {
        let shown = format!("{:?}", &name[..name.len().min(64)]);
        let calls: Vec<(&str, &str, fairlock::Result<()>)> = vec![
            ("acquire", "mutex", c.fair_mutex(&name).try_lock().map(drop)),
            (
                "acquire",
                "semaphore",
                c.fair_semaphore(&name, 2).try_acquire().map(drop),
            ),
            (
                "acquire",
                "rwlock",
                c.fair_rwlock(&name).try_read().map(drop),
            ),
            (
                "campaign for",
                "election",
                c.election(&name).try_campaign().map(drop),
            ),
            ("status", "mutex", c.fair_mutex(&name).is_locked().map(drop)),
            ("status", "election", c.election(&name).leader().map(drop)),
            (
                "force release",
                "rwlock",
                c.fair_rwlock(&name).force_unlock().map(drop),
            ),
            (
                "revoke",
                "semaphore",
                c.fair_semaphore(&name, 2).revoke().map(drop),
            ),
            (
                "set permits",
                "semaphore",
                c.fair_semaphore(&name, 2).set_permits(3).map(drop),
            ),
            ("watch", "election", c.election(&name).watch().map(drop)),
            (
                "acquire",
                "mutex",
                c.fair_multi_lock(["a", &name]).try_lock().map(drop),
            ),
        ];
        for (call, kind, result) in calls {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidName, "{err:?}");
            let said = err.to_string();
            total += 1;
            // An election's campaign is "campaign for election", in its
            // words; every other call "CALL of KIND".
            let of = if call.ends_with(" for") { "" } else { " of" };
            if said.starts_with(&format!("{call}{of} {kind} {shown}")) && said.len() < 300 {
                named += 1;
            } else {
                eprintln!("{call} of {kind}: {}", &said[..said.len().min(120)]);
            }
        }
    }
    assert_eq!(
        named, total,
        "errors naming the call, the kind and the name (cut)"
    );
}

/// A guard's unlock as a value, so that holds of two kinds meet one check.
type Unlock = Box<dyn FnOnce() -> fairlock::Result<()>>;

/// The unlock of `guard`, if a hold was taken.
fn unlock_of<K: fairlock::kind::HoldKind>(guard: Option<fairlock::Guard<K>>) -> Option<Unlock> {
    guard.map(|guard| Box::new(move || guard.unlock()) as Unlock)
}

/// Another program's value of another type (a string, a hash, a list)
/// under each key of a semaphore or a reader-writer lock (its holders,
/// queue and meta): a take, a second take behind it, a force release and
/// the first take's release each work or say `KeyConflict` (or that the
/// hold is lost), never two holds of a one-permit lock at once, and the
/// value is left as it was, with no TTL given to it; once it is gone the
/// lock works again.
#[test]
fn foreign_data_of_another_type_under_a_counted_lock_key_stays_untouched() {
    let server = RedisServer::start();
    let (a, b) = (server.client(), server.client());
    let mut conn = server.conn();
    let writes: [&[&str]; 3] = [
        &["SET", "theirs"],
        &["HSET", "f", "theirs"],
        &["RPUSH", "theirs"],
    ];
    let mut outcomes = Vec::new();
    for (kind, key_kinds) in [
        (LockKind::Semaphore, ["sem", "semq", "semmeta"]),
        (LockKind::RwLock, ["rw", "rwq", "rwmeta"]),
    ] {
        for key_kind in key_kinds {
            for (case, write) in writes.iter().enumerate() {
                let name = format!("typed-{key_kind}-{case}");
                let key = key_of(key_kind, &name);
                let _: () = redis::cmd(write[0])
                    .arg(&key)
                    .arg(&write[1..])
                    .query(&mut conn)
                    .unwrap();
                let before = dump(&mut conn, &key);
                let wait = Duration::from_millis(200);
                let of = |r: Result<(), fairlock::Error>| r.map_err(|e| e.kind());
                let mut results = Vec::new();
                // The hold taken (its unlock), and whether another client
                // got one beside it.
                let (held, behind, beside) = if kind == LockKind::Semaphore {
                    let held = a.fair_semaphore(&name, 1).try_acquire();
                    let behind = b.fair_semaphore(&name, 1).try_acquire_for(wait);
                    (
                        held.map(unlock_of),
                        behind.map(|g| g.is_some()),
                        "two holds of one permit",
                    )
                } else {
                    let held = a.fair_rwlock(&name).try_write().map(unlock_of);
                    let behind = b.fair_rwlock(&name).try_read_for(wait);
                    (held, behind.map(|g| g.is_some()), "a read beside a write")
                };
                assert!(
                    !matches!((&held, &behind), (Ok(Some(_)), Ok(true))),
                    "{key_kind} {write:?}: {beside}"
                );
                let first = held.as_ref().map(drop).map_err(|e| e.kind());
                let second = of(behind.map(drop));
                let forced = of(b.force_unlock(kind, &name).map(drop));
                let released = match held {
                    Ok(Some(unlock)) => of(unlock()),
                    _ => Ok(()),
                };
                results.extend([first, second, forced, released]);
                outcomes.push(format!("{key_kind} {write:?}: {results:?}"));
                for result in &results {
                    assert!(
                        matches!(
                            result,
                            Ok(()) | Err(ErrorKind::KeyConflict | ErrorKind::LeaseLost)
                        ),
                        "{outcomes:#?}"
                    );
                }
                assert_eq!(dump(&mut conn, &key), before, "{outcomes:#?}");
                let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
                let works = match kind {
                    LockKind::Semaphore => a
                        .fair_semaphore(&name, 1)
                        .try_acquire_for(Duration::from_secs(3))
                        .map(|g| g.is_some()),
                    _ => a
                        .fair_rwlock(&name)
                        .try_write_for(Duration::from_secs(3))
                        .map(|g| g.is_some()),
                };
                assert!(
                    matches!(works, Ok(true)),
                    "{key_kind} {write:?}: once gone: {works:?} {outcomes:#?}"
                );
            }
        }
    }
    eprintln!("{outcomes:#?}");
    assert_eq!(
        keys_without_ttl(&mut conn, "fairlock:*"),
        Vec::<String>::new()
    );
}
