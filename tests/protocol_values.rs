//! The protocol layer's values without a server: each Redis-side
//! operation's KEYS and ARGV follow its script's header (acquire, heartbeat,
//! release, renew, status), its replies parse into the typed answer and a
//! malformed one is an error, a queue member names the call and its grant,
//! an ask's units and capacity are what the counted engine expects, every
//! wake message the scripts publish parses (and nothing else does), an
//! election's values follow their rule and its messages parse back, and all
//! keys of a lock share one hash tag, hence one cluster slot; a call's
//! bytes are the redis crate's, packed once. Moved from the unit tests of
//! `src/protocol/` and `src/connections/resp.rs`; reached through
//! `fairlock::__test_support`.

use std::time::{Duration, Instant};

use fairlock::__test_support::{
    check_value, election_channel, Access, Acquire, AcquireReply, Ask, Change, ElectionMessage,
    Engine, HandedOver, Heartbeat, Lease, LockKeys, LockKind, Mode, Op, Operation, QueueEntry,
    Release, ReleaseReply, Renew, Script, Status, WaiterStatus, WakeMessage, RW_CAPACITY,
};
use fairlock::__test_support::{packed_command, RenewReply, Revoke, Revoked};
use fairlock::{ErrorKind, MAX_ELECTION_VALUE_LEN, MAX_NAME_LEN};
use redis::Value;

// Keys (src/protocol/keys.rs)

/// Redis Cluster's rule: the slot comes from the first `{...}` with content.
fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[test]
fn all_keys_of_a_lock_share_a_tag_whatever_the_name() {
    for name in ["orders:42", "{x}", "}{", "a{b}c", "名前 \n\0", "{}"] {
        let keys = LockKeys::of_kind("fairlock", name, LockKind::Mutex).unwrap();
        let tag = hash_tag(&keys.all[0]);
        assert_eq!(tag.len(), 16, "{name:?}");
        assert!(keys.all.iter().all(|k| hash_tag(k) == tag), "{name:?}");
    }
}

#[test]
fn distinct_names_get_distinct_keys() {
    let a = LockKeys::of_kind("p", "a:lock:b", LockKind::Mutex).unwrap();
    let b = LockKeys::of_kind("p", "a", LockKind::Mutex).unwrap();
    for ka in &a.all {
        assert!(!b.all.contains(ka));
    }
}

#[test]
fn the_mutex_keeps_its_keys_and_a_semaphore_of_the_name_has_its_own_in_the_slot() {
    let mutex = LockKeys::of_kind("p", "jobs", LockKind::Mutex).unwrap();
    let sem = LockKeys::of_kind("p", "jobs", LockKind::Semaphore).unwrap();
    let tag = hash_tag(&mutex.all[0]).to_owned();
    assert_eq!(mutex.kind(), LockKind::Mutex);
    assert_eq!(
        mutex.all,
        ["lock", "queue", "revoked", "forced"].map(|k| format!("p:{{{tag}}}:{k}:jobs"))
    );
    assert_eq!(sem.kind(), LockKind::Semaphore);
    assert_eq!(
        sem.all,
        ["sem", "semq", "semmeta", "semrevoked", "semforced"]
            .map(|k| format!("p:{{{tag}}}:{k}:jobs"))
    );
    assert_eq!(sem.slot, mutex.slot);
    assert!(sem.all.iter().all(|k| !mutex.all.contains(k)));
    assert_eq!(
        LockKeys::of_kind("p", "", LockKind::Semaphore)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidName
    );
}

#[test]
fn a_rwlock_of_the_name_has_its_own_keys_in_the_slot_the_queue_2nd() {
    let mutex = LockKeys::of_kind("p", "jobs", LockKind::Mutex).unwrap();
    let sem = LockKeys::of_kind("p", "jobs", LockKind::Semaphore).unwrap();
    let rw = LockKeys::of_kind("p", "jobs", LockKind::RwLock).unwrap();
    let tag = hash_tag(&mutex.all[0]).to_owned();
    assert_eq!(rw.kind(), LockKind::RwLock);
    assert_eq!(
        rw.all,
        ["rw", "rwq", "rwmeta", "rwrevoked", "rwforced"].map(|k| format!("p:{{{tag}}}:{k}:jobs"))
    );
    assert_eq!(rw.slot, mutex.slot);
    assert!(rw
        .all
        .iter()
        .all(|k| !mutex.all.contains(k) && !sem.all.contains(k)));
    assert_eq!(rw.lock(), rw.all[0]);
    assert_eq!(
        LockKeys::of_kind("p", "", LockKind::RwLock)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidName
    );
}

#[test]
fn a_scripts_index_is_its_place_in_all() {
    // The call runner finds a script's hash by this index.
    for (at, script) in Script::ALL.iter().enumerate() {
        assert_eq!(script.index(), at, "{script:?}");
    }
    // An operation only the counted engine has is its script whatever the
    // engine asked.
    for engine in [Engine::Mutex, Engine::Election] {
        let op = Op::Upgrade;
        assert_eq!(
            Script { engine, op }.source(),
            Script::of(LockKind::RwLock, op).source()
        );
    }
}

#[test]
fn an_election_of_the_name_has_a_mutexs_keys_of_its_own_run_by_the_mutex_engine() {
    let mutex = LockKeys::of_kind("p", "jobs", LockKind::Mutex).unwrap();
    let sem = LockKeys::of_kind("p", "jobs", LockKind::Semaphore).unwrap();
    let rw = LockKeys::of_kind("p", "jobs", LockKind::RwLock).unwrap();
    let election = LockKeys::of_kind("p", "jobs", LockKind::Election).unwrap();
    let tag = hash_tag(&mutex.all[0]).to_owned();
    assert_eq!(election.kind(), LockKind::Election);
    assert_eq!(
        election.all,
        ["elect", "electq", "electh", "electrevoked", "electforced"]
            .map(|k| format!("p:{{{tag}}}:{k}:jobs"))
    );
    assert_eq!(election.slot, mutex.slot);
    for other in [&mutex, &sem, &rw] {
        assert!(election.all.iter().all(|k| !other.all.contains(k)));
    }
    assert_eq!(election.lock(), election.all[0]);
    for op in [Op::Acquire, Op::Release, Op::Renew, Op::Status] {
        // The mutex's files, assembled to announce on the election's channel.
        assert_eq!(Script::of(LockKind::Election, op).engine, Engine::Election);
        assert_eq!(Script::of(LockKind::Mutex, op).engine, Engine::Mutex);
    }
    assert!(Ask::Mutex.fits(LockKind::Election));
    assert!(!Ask::RwLock(Access::Write).fits(LockKind::Election));
    assert_eq!(LockKind::Election.label(), "election");
    assert_eq!(
        LockKeys::of_kind("p", "", LockKind::Election)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidName
    );
}

#[test]
fn empty_and_oversized_names_are_invalid() {
    let kind = |n: &str| {
        LockKeys::of_kind("p", n, LockKind::Mutex)
            .unwrap_err()
            .kind()
    };
    assert_eq!(kind(""), ErrorKind::InvalidName);
    assert_eq!(kind(&"x".repeat(MAX_NAME_LEN + 1)), ErrorKind::InvalidName);
    assert!(LockKeys::of_kind("p", &"x".repeat(MAX_NAME_LEN), LockKind::Mutex).is_ok());
}

// Asks (src/protocol/ask.rs)

#[test]
fn a_write_takes_every_unit_a_read_one_and_permits_their_number() {
    let write = Ask::RwLock(Access::Write);
    let read = Ask::RwLock(Access::Read);
    assert_eq!(
        (write.units(), write.capacity()),
        (RW_CAPACITY, RW_CAPACITY)
    );
    assert_eq!((read.units(), read.capacity()), (1, RW_CAPACITY));
    let three = Ask::Permits { n: 3, of: 5 };
    assert_eq!((three.units(), three.capacity()), (3, 5));
    assert!(!three.reentrant() && read.reentrant() && Ask::Mutex.reentrant());
    assert!(write.exclusive() && Ask::Mutex.exclusive() && !read.exclusive());
    assert_eq!(Ask::access_of(u64::from(RW_CAPACITY)), Access::Write);
    assert_eq!(Ask::access_of(1), Access::Read);
    assert_eq!(
        three.describe_on(three.kind(), "a"),
        "semaphore \"a\" 3 permits"
    );
    assert_eq!(
        Ask::Mutex.describe_on(LockKind::Election, "a"),
        "the leadership of election \"a\""
    );
    assert_eq!(Ask::Mutex.describe_on(LockKind::Mutex, "a"), "mutex \"a\"");
}

// Queue members (src/protocol/queue_entry.rs)

#[test]
fn the_member_names_the_call_and_its_grant() {
    let entry = QueueEntry {
        owner: "c1:7",
        call: 42,
        lease: Lease::Fixed(Duration::from_millis(30_000)),
        ask: Ask::Mutex,
    };
    assert_eq!(entry.to_string(), "c1:7 42 30000 1");
    let write = QueueEntry {
        ask: Ask::RwLock(Access::Write),
        ..entry
    };
    assert_eq!(write.to_string(), format!("c1:7 42 30000 1 {RW_CAPACITY}"));
    let permits = QueueEntry {
        ask: Ask::Permits { n: 2, of: 3 },
        ..entry
    };
    assert_eq!(permits.to_string(), "c1:7 42 30000 1 2");
}

// Acquire (src/protocol/acquire.rs)

fn attempt() -> Acquire<'static> {
    Acquire {
        ask: Ask::Mutex,
        owner: "c:1",
        lease: Lease::Renewed(Duration::from_secs(30)),
        waiter_timeout: Duration::from_secs(10),
        mode: Mode::First,
        call: 7,
        live_token: 0,
    }
}

#[test]
fn arguments_follow_the_script_header() {
    assert_eq!(attempt().args(), ["c:1", "7", "30000", "0 10000 first 0"]);
    let permits = Acquire {
        ask: Ask::Permits { n: 2, of: 5 },
        ..attempt()
    };
    assert_eq!(
        permits.args(),
        ["c:1", "7", "30000", "5", "2", "0 10000 first 0"]
    );
}

#[test]
fn replies_parse_into_acquired_or_waiting() {
    let ints = |v: &[i64]| Value::Array(v.iter().map(|n| Value::Int(*n)).collect());
    assert_eq!(
        attempt().parse(ints(&[1, 99, 500])).unwrap(),
        AcquireReply::Acquired {
            token: 99,
            pttl_ms: 500,
            in_force: None
        }
    );
    assert_eq!(
        attempt().parse(ints(&[0, 500, -1, 98])).unwrap(),
        AcquireReply::Waiting {
            pttl_ms: 500,
            position: None,
            last_token: 98,
            in_force: None
        }
    );
    assert_eq!(
        attempt().parse(Value::Int(97)).unwrap(),
        AcquireReply::Acquired {
            token: 97,
            pttl_ms: 30_000,
            in_force: None
        }
    );
    // A semaphore's number in force ends the list when it is not the call's.
    let set = attempt().parse(ints(&[1, 99, 500, 5])).unwrap();
    assert_eq!(set.in_force(), Some(5));
    let set = attempt().parse(ints(&[0, 500, 2, 98, 5])).unwrap();
    assert_eq!(set.in_force(), Some(5));
    assert!(attempt().parse(ints(&[0, 1])).is_err());
    assert!(attempt().parse(ints(&[1, 99, 500, 5, 6])).is_err());
    assert!(attempt().parse(ints(&[1, 99, 500, -5])).is_err());
    // The same words as one string (a call queued behind a hold), as the
    // list reads.
    let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(
        attempt().parse(text("0 500 3 98")).unwrap(),
        attempt().parse(ints(&[0, 500, 3, 98])).unwrap()
    );
    assert_eq!(
        attempt().parse(text("0 -1 0 1795941367665862")).unwrap(),
        attempt()
            .parse(ints(&[0, -1, 0, 1_795_941_367_665_862]))
            .unwrap()
    );
    for bad in ["0 500 3", "0 500 x 98", "0  500 3 98", ""] {
        assert!(attempt().parse(text(bad)).is_err(), "{bad:?}");
    }
}

// Heartbeat (src/protocol/heartbeat.rs)

#[test]
fn arguments_are_queue_entries_and_statuses_follow_their_order() {
    let beat = Heartbeat {
        waiter_timeout: Duration::from_secs(1),
        waiters: vec![
            QueueEntry {
                owner: "c:1",
                call: 4,
                lease: Lease::Renewed(Duration::from_secs(2)),
                ask: Ask::Mutex,
            },
            QueueEntry {
                owner: "c:2",
                call: 5,
                lease: Lease::Fixed(Duration::from_secs(3)),
                ask: Ask::Mutex,
            },
        ],
    };
    assert_eq!(beat.args(), ["1000", "c:1 4 2000 0", "c:2 5 3000 1"]);
    let reply = Value::Array([300, 9, 0, 2, 1, 9].map(Value::Int).to_vec());
    let parsed = beat.parse(reply).unwrap();
    assert_eq!(
        parsed.statuses,
        [WaiterStatus::Queued(2), WaiterStatus::Owns(9)]
    );
    assert_eq!((parsed.pttl_ms, parsed.last_token), (300, 9));
}

// Release (src/protocol/release.rs)

#[test]
fn replies_name_the_holds_left_or_every_waiter_handed_over() {
    let mut op = Release {
        owner: "c:1",
        token: 9,
        call: 4,
        vouched_until: None,
    };
    // The lease is checked at Redis unless the caller vouches for it now.
    assert_eq!(op.args(), ["c:1#4", "9", "check"]);
    op.vouched_until = Some(Instant::now() + Duration::from_secs(60));
    assert_eq!(op.args(), ["c:1#4", "9"]);
    op.vouched_until = Instant::now().checked_sub(Duration::from_millis(1));
    assert_eq!(op.args(), ["c:1#4", "9", "check"]);
    assert_eq!(
        op.parse(Value::Int(2)).unwrap(),
        ReleaseReply::Released { left: 2 }
    );
    assert_eq!(op.parse(Value::Int(-1)).unwrap(), ReleaseReply::NotHeld);
    assert_eq!(op.parse(Value::Int(-2)).unwrap(), ReleaseReply::Gone);
    let grant = |owner: &str, id: i64| {
        [
            Value::BulkString(owner.as_bytes().to_vec()),
            Value::Int(id),
            Value::Int(10 + id),
            Value::Int(500),
        ]
    };
    let two = [grant("c:2", 1), grant("c:3", 2)].concat();
    assert_eq!(
        op.parse(Value::Array(two)).unwrap(),
        ReleaseReply::HandedOver(vec![
            HandedOver {
                owner: "c:2".into(),
                call: 1,
                token: 11,
                ttl_ms: 500
            },
            HandedOver {
                owner: "c:3".into(),
                call: 2,
                token: 12,
                ttl_ms: 500
            },
        ])
    );
    assert!(op
        .parse(Value::Array(grant("c:2", 1)[..3].to_vec()))
        .is_err());
    // One grant as one string (a lone hold handed over), as the list reads.
    let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(
        op.parse(text("c:2@node-7 1 11 500")).unwrap(),
        ReleaseReply::HandedOver(vec![HandedOver {
            owner: "c:2@node-7".into(),
            call: 1,
            token: 11,
            ttl_ms: 500
        }])
    );
    for bad in ["c:2 1 11", "c:2 x 11 500", "c:2 1 11 500 c:3"] {
        assert!(op.parse(text(bad)).is_err(), "{bad:?}");
    }
}

// Elections (src/protocol/election.rs)

#[test]
fn election_values_are_printable_ascii_without_spaces_up_to_the_limit() {
    let longest = "v".repeat(MAX_ELECTION_VALUE_LEN);
    for good in ["a", "node-1@10.0.0.7:8080", "!~", &longest] {
        assert!(check_value(good).is_ok(), "{good:?}");
    }
    let too_long = "v".repeat(MAX_ELECTION_VALUE_LEN + 1);
    for bad in [
        "",
        "a b",
        "tab\there",
        "new\nline",
        "é",
        "\u{7f}",
        &too_long,
    ] {
        let err = check_value(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{bad:?}");
        assert!(
            err.to_string().contains("printable ASCII without spaces"),
            "{err}"
        );
    }
}

#[test]
fn election_messages_parse_back_and_nothing_else_does() {
    assert_eq!(election_channel("p", "a b"), "p:election:a b");
    for message in [
        ElectionMessage::Leads {
            term: 1_795_377_959_667_025,
            value: "a@b:c".into(),
            owner: "abc:u3@a@b:c".into(),
        },
        ElectionMessage::Resigned { term: 18 },
    ] {
        assert_eq!(
            ElectionMessage::parse(message.payload().as_bytes()),
            Some(message)
        );
    }
    assert_eq!(
        ElectionMessage::Leads {
            term: 7,
            value: "v".into(),
            owner: "c:u1@v".into()
        }
        .payload(),
        "7 v c:u1@v"
    );
    for junk in [
        "",
        "17",
        "x v o",
        "17 v",
        "resigned",
        "resigned x",
        "1 2 3 4",
        "\u{ff}",
    ] {
        assert_eq!(ElectionMessage::parse(junk.as_bytes()), None, "{junk:?}");
    }
}

#[test]
fn history_entries_are_a_message_after_the_term_before_it() {
    let grant = Change::parse(b"17 18 v c:u1@v").expect("a grant");
    assert_eq!(grant.after, 17);
    assert_eq!(
        grant.message,
        ElectionMessage::Leads {
            term: 18,
            value: "v".into(),
            owner: "c:u1@v".into()
        }
    );
    let resign = Change::parse(b"18 resigned 18").expect("a resignation");
    let resigned = ElectionMessage::Resigned { term: 18 };
    assert_eq!((resign.after, resign.message), (18, resigned));
    // The first grant after the lock key was gone follows term 0.
    assert_eq!(Change::parse(b"0 19 v c:u2@v").map(|c| c.after), Some(0));
    for junk in [
        "",
        "17",
        "17 ",
        "x 18 v o",
        "17 18 v",
        "17 resigned",
        "17 1 2 3 4",
    ] {
        assert_eq!(Change::parse(junk.as_bytes()), None, "{junk:?}");
    }
}

// Renew (src/protocol/renew.rs)

#[test]
fn the_mutex_sends_its_lock_key_and_no_call_a_counted_lock_all_its_keys_and_the_call() {
    let op = Renew {
        owner: "c:1",
        token: 9,
        first: 9,
        call: 4,
        lease: None,
    };
    assert_eq!(op.args(), ["c:1", "9", "0", "4"]);
    // A hold whose access changed names the token it was granted with too.
    let changed = Renew { first: 7, ..op };
    assert_eq!(
        changed.args_on(LockKind::RwLock),
        ["c:1", "9", "0", "4", "7"]
    );
    // The mutex names a hold by its owner and token: no call id.
    let mutex = LockKeys::of_kind("p", "n", LockKind::Mutex).unwrap();
    assert_eq!(op.keys(&mutex).len(), 1);
    assert_eq!(op.args_on(LockKind::Mutex), ["c:1", "9", "0"]);
    let sem = LockKeys::of_kind("p", "n", LockKind::Semaphore).unwrap();
    assert_eq!(op.keys(&sem), sem.common());
    assert_eq!(op.args_on(LockKind::Semaphore), ["c:1", "9", "0", "4"]);
    assert_eq!(op.args_on(LockKind::RwLock), op.args());
    let election = LockKeys::of_kind("p", "n", LockKind::Election).unwrap();
    assert_eq!(op.keys(&election), &election.all[..1]);
    assert_eq!(op.args_on(LockKind::Election), ["c:1", "9", "0"]);
    assert_eq!(op.parse(Value::Int(1)).unwrap(), RenewReply::Renewed);
    assert_eq!(op.parse(Value::Int(2)).unwrap(), RenewReply::Revoked);
    assert_eq!(op.parse(Value::Int(0)).unwrap(), RenewReply::Lost);
    assert!(RenewReply::Revoked.is_held() && !RenewReply::Lost.is_held());
    assert_eq!(op.parse(Value::Int(3)).unwrap(), RenewReply::ForceReleased);
    assert!(!RenewReply::ForceReleased.is_held());
    assert_eq!(op.parse(Value::Int(4)).unwrap(), RenewReply::Gone);
    assert!(op.parse(Value::Int(5)).is_err());
}

// Revoke (src/protocol/revoke.rs)

#[test]
fn a_revocation_takes_its_call_key_and_says_how_many_holds_it_asked_up_to_which_token() {
    let op = Revoke {
        call_key: "c#1".to_owned(),
    };
    assert_eq!(op.args(), ["c#1"]);
    let sem = LockKeys::of_kind("p", "n", LockKind::Semaphore).unwrap();
    assert_eq!(op.keys(&sem).len(), sem.common().len() + 1);
    assert!(op.keys(&sem).last().unwrap().contains(":semrevoked:"));
    assert_eq!(
        Script::of(LockKind::Election, Op::Revoke).engine,
        Engine::Election
    );
    assert_eq!(
        op.parse(Value::Array(vec![
            Value::Int(3),
            Value::Int(1795377959667025)
        ]))
        .unwrap(),
        Revoked {
            holds: 3,
            up_to: 1795377959667025
        }
    );
    assert_eq!(
        op.parse(Value::Array(vec![Value::Int(0), Value::Int(0)]))
            .unwrap()
            .holds,
        0
    );
    assert!(op.parse(Value::Array(vec![Value::Int(1)])).is_err());
    assert!(op.parse(Value::Int(1)).is_err());
}

// Status (src/protocol/status.rs)

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

#[test]
fn both_engines_answer_in_one_shape() {
    let mutex = Status {
        kind: LockKind::Mutex,
        waiters: 5,
        holders: 5,
    };
    assert_eq!(mutex.args(), ["5"]);
    let reply = Value::Array(vec![
        bulk("c:1"),
        Value::Int(2),
        Value::Int(40),
        Value::Int(900),
        Value::Int(1),
        Value::Int(40),
        bulk("c:2"),
        Value::Int(3000),
    ]);
    let parsed = mutex.parse(reply).unwrap();
    assert_eq!(parsed.holders[0].count, 2);
    assert_eq!(parsed.holders[0].lease_left_ms, Some(900));
    assert_eq!(parsed.waiters[0].owner, "c:2");
    assert_eq!((parsed.capacity, parsed.used), (Some(1), 1));

    let sem = Status {
        kind: LockKind::Semaphore,
        waiters: 5,
        holders: 5,
    };
    assert_eq!(sem.args(), ["5", "5"]);
    let reply = Value::Array(vec![
        Value::Int(3),
        Value::Int(2),
        Value::Int(1),
        Value::Int(1),
        Value::Int(77),
        Value::Int(1),
        bulk("c:1"),
        Value::Int(4),
        Value::Int(2),
        Value::Int(77),
        Value::Int(500),
        bulk("c:2"),
        Value::Int(3),
        Value::Int(800),
    ]);
    let parsed = sem.parse(reply).unwrap();
    assert_eq!(
        (parsed.capacity, parsed.used, parsed.live_holds),
        (Some(3), 2, 1)
    );
    assert_eq!(parsed.holders[0].units, 2);
    assert_eq!(parsed.holders[0].call, Some(4));
    assert_eq!(parsed.waiters[0].units, 3);
}

// Wake messages (src/protocol/wake.rs)

#[test]
fn every_message_the_scripts_send_parses() {
    assert_eq!(
        WakeMessage::parse(b"G 7 1795377959667025 600"),
        Some(WakeMessage::Granted {
            call: 7,
            token: 1_795_377_959_667_025,
            ttl_ms: 600
        })
    );
    assert_eq!(
        WakeMessage::parse(b"H 7 -1"),
        Some(WakeMessage::Head {
            call: 7,
            pttl_ms: -1
        })
    );
    assert_eq!(
        WakeMessage::parse("R 1795377959667025 p:{ab}:lock:a name\nwith spaces".as_bytes()),
        Some(WakeMessage::Revoke {
            up_to: 1795377959667025,
            lock_key: "p:{ab}:lock:a name\nwith spaces".to_owned(),
        })
    );
    assert_eq!(
        WakeMessage::parse(b"L 12 p:{ab}:holders:a b"),
        Some(WakeMessage::Freed {
            up_to: 12,
            lock_key: "p:{ab}:holders:a b".to_owned(),
        })
    );
    assert_eq!(
        WakeMessage::parse(WakeMessage::STOP.as_bytes()),
        Some(WakeMessage::Stop)
    );
}

#[test]
fn anything_else_is_ignored() {
    for junk in [
        &b""[..],
        b"G 1 2",
        b"G a b c",
        b"X 1",
        b"H -3 5",
        b"\xff",
        b"R 5",
        b"R 5 ",
        b"R x k",
        b"L 5",
        b"L -1 k",
        b"RL 5 k",
    ] {
        assert_eq!(WakeMessage::parse(junk), None, "{junk:?}");
    }
}

/// The bytes the redis crate packs for the same arguments.
fn crate_packed(args: &[&[u8]]) -> Vec<u8> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.get_packed_command()
}

#[test]
fn a_call_packs_the_bytes_the_redis_crate_packs_in_a_buffer_sized_once() {
    let long = vec![b'x'; 12_345];
    let cases: [&[&[u8]]; 5] = [
        &[b"PING"],
        &[b"EVALSHA", b"0123456789abcdef", b"3", b"k:1", b"", b"v"],
        &[b"SET", b"key", &long, b"PX", b"30000"],
        &[
            b"X", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"10", b"11",
        ],
        &[b"Y".as_slice(); 120],
    ];
    for args in cases {
        let out = packed_command(b"before", args);
        assert_eq!(&out[..6], b"before");
        assert_eq!(out[6..], crate_packed(args)[..]);
    }
    // The size is reserved exactly once.
    let out = packed_command(b"", &[b"EVALSHA", b"abc", b"0"]);
    assert_eq!(out.len(), out.capacity());
}
