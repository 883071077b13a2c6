//! The mutex's own scenarios, with raw ARGV (the mutex engine,
//! lua/mutex/): a release or a force release delivered twice, a heartbeat
//! still in flight, a call abandoned by its id, an orphaned hold, an
//! argument out of range. Each answers as its header says and leaves no
//! key without a TTL.

use super::driver::*;
use fairlock::__test_support::words;

/// The mutex engine's script of `op`.
const fn mutex(op: Op) -> Script {
    Script {
        engine: Engine::Mutex,
        op,
    }
}

const ACQUIRE: Script = mutex(Op::Acquire);
const RELEASE: Script = mutex(Op::Release);
const ABANDON: Script = mutex(Op::Abandon);
const FORCE: Script = mutex(Op::ForceRelease);
const HEARTBEAT: Script = mutex(Op::Heartbeat);
const RENEW: Script = mutex(Op::Renew);

fn fixture(name: &str) -> Lock {
    Lock::new(LockKind::Mutex, name)
}

/// The mutex's raw calls and its lock key read back.
impl Lock {
    /// A reply of integers, a list or one string of them (`words`);
    /// acquire's bare token (a free lock taken) reads as its long form
    /// `[1, token]`.
    fn ints(&mut self, body: Script, args: &[&str]) -> Vec<i64> {
        match self.eval(body, args).unwrap() {
            Value::Int(token) if body == ACQUIRE => vec![1, token],
            reply => redis::from_redis_value(words(reply)).unwrap(),
        }
    }

    fn int(&mut self, body: Script, args: &[&str]) -> i64 {
        let reply = self.eval(body, args).unwrap();
        redis::from_redis_value(reply).unwrap()
    }

    /// acquire.lua for `owner` with a watchdog lease of 10 s and a 10 s
    /// waiter timeout; `live` is the token of a live guard, or "0".
    fn acquire_raw(&mut self, owner: &str, mode: &str, call: &str, live: &str) -> Vec<i64> {
        let rest = format!("0 10000 {mode} {live}");
        self.ints(ACQUIRE, &[owner, call, "10000", &rest])
    }

    /// release.lua's holds left (0 also when handed over), or -1.
    fn release_raw(&mut self, owner: &str, token: &str, call: &str) -> i64 {
        match self
            .eval(RELEASE, &[&format!("{owner}#{call}"), token])
            .unwrap()
        {
            Value::Int(left) => left,
            Value::BulkString(_) => 0,
            other => panic!("release replied {other:?}"),
        }
    }

    /// The holder's owner id, if the lock is held.
    fn holder(&mut self) -> Option<String> {
        holder_of(&mut self.conn, &self.keys.all[0]).map(|(owner, _, _)| owner)
    }

    /// The holder's fencing token.
    fn token(&mut self) -> String {
        holder_of(&mut self.conn, &self.keys.all[0]).unwrap().1
    }

    /// The acquire calls counted in the hold (none when free).
    fn calls(&mut self) -> Vec<String> {
        let stored: Option<String> = self.conn.get(&self.keys.all[0]).unwrap();
        match stored
            .as_deref()
            .map(|s| unversioned(s).split(' ').nth(1).unwrap())
        {
            None | Some("-" | "+") => Vec::new(),
            Some(hold) => {
                let (_, calls) = hold.rsplit_once('#').unwrap();
                calls.split(',').map(str::to_owned).collect()
            }
        }
    }

    /// The hold's lease ms left (its key outlives it by the fence life).
    fn lease_left(&mut self) -> i64 {
        lease_left_of(&mut self.conn, &self.keys.all[0]).unwrap()
    }
}

#[test]
fn a_release_delivered_twice_answers_as_the_first_did() {
    let mut f = fixture("release-twice");
    // Handed over to a waiter: the second delivery finds the waiter holding.
    let token = f.acquire_raw("a:1", "first", "1", "0")[1].to_string();
    assert_eq!(f.acquire_raw("b:1", "first", "2", "0")[0], 0, "b queues");
    assert_eq!(f.release_raw("a:1", &token, "1"), 0);
    assert_eq!(f.holder().as_deref(), Some("b:1"));
    assert_eq!(
        f.release_raw("a:1", &token, "1"),
        0,
        "a repeated release is Ok"
    );
    assert_eq!(f.holder().as_deref(), Some("b:1"), "and changes nothing");
    // Freed with nobody waiting: the lock key keeps only the last token and
    // the call that freed it.
    let b_token = f.token();
    assert_eq!(f.release_raw("b:1", &b_token, "2"), 0);
    assert_eq!(f.holder(), None);
    assert_eq!(f.release_raw("b:1", &b_token, "2"), 0);
    // A release that never held still reports the lost lease.
    assert_eq!(f.release_raw("c:1", &b_token, "3"), -1);
    assert_eq!(f.release_raw("b:1", &b_token, "9"), -1);
    f.assert_every_key_expires();
}

#[test]
fn a_force_release_delivered_twice_frees_the_lock_once() {
    let mut f = fixture("force-twice");
    f.acquire_raw("a:1", "first", "1", "0");
    f.acquire_raw("b:1", "first", "2", "0");
    let first: Option<String> = redis::from_redis_value(f.eval(FORCE, &["op#7"]).unwrap()).unwrap();
    assert_eq!(first.as_deref(), Some("a:1"));
    assert_eq!(f.holder().as_deref(), Some("b:1"), "handed to the waiter");
    let again: Option<String> = redis::from_redis_value(f.eval(FORCE, &["op#7"]).unwrap()).unwrap();
    assert_eq!(
        again.as_deref(),
        Some("a:1"),
        "the same call answers as the first did"
    );
    assert_eq!(
        f.holder().as_deref(),
        Some("b:1"),
        "and does not free the new holder"
    );
    let next: Option<String> = redis::from_redis_value(f.eval(FORCE, &["op#8"]).unwrap()).unwrap();
    assert_eq!(next.as_deref(), Some("b:1"), "another call does");
    assert_eq!(f.holder(), None);
    // On a free lock: nothing held, and a repeat of it frees no later holder.
    assert_eq!(f.eval(FORCE, &["op#9"]).unwrap(), Value::Nil);
    f.acquire_raw("c:1", "first", "3", "0");
    assert_eq!(f.eval(FORCE, &["op#9"]).unwrap(), Value::Nil);
    assert_eq!(f.holder().as_deref(), Some("c:1"));
    f.assert_every_key_expires();
}

#[test]
fn a_heartbeat_in_flight_never_stretches_a_fixed_lease_taken_since() {
    let mut f = fixture("heartbeat-token");
    let a_token = f.acquire_raw("a:1", "first", "1", "0")[1].to_string();
    assert_eq!(f.acquire_raw("w:1", "first", "5", "0")[0], 0);
    assert_eq!(
        f.release_raw("a:1", &a_token, "1"),
        0,
        "handed to w:1 (call 5)"
    );
    let w_token = f.token();
    assert_eq!(f.release_raw("w:1", &w_token, "5"), 0);
    // The same thread takes it again with a fixed 500 ms lease (call 6) ...
    let reply = f.ints(ACQUIRE, &["w:1", "6", "500", "1 10000 first 0"]);
    assert_eq!(reply[0], 1);
    // ... and a heartbeat sent for call 5 arrives only now.
    let beat = f.ints(HEARTBEAT, &["10000", "w:1 5 60000 0"]);
    assert_eq!(&beat[2..], &[-1, 0], "call 5 holds nothing any more");
    assert!(
        f.lease_left() <= 500,
        "the fixed lease was stretched to {} ms",
        f.lease_left()
    );
    // For the call that holds, the heartbeat reports the hold (and leaves a
    // fixed lease as it is).
    let beat = f.ints(HEARTBEAT, &["10000", "w:1 6 500 1"]);
    assert_eq!(beat[2], 1);
    assert!(f.lease_left() <= 500);
}

#[test]
fn a_call_is_abandoned_exactly_once_by_its_id() {
    let mut f = fixture("abandon-by-id");
    let token = f.acquire_raw("a:1", "first", "1", "0")[1];
    let live = token.to_string();
    assert_eq!(f.acquire_raw("a:1", "first", "2", &live)[0], 1, "re-entry");
    assert_eq!(f.calls(), ["1", "2"]);
    assert_eq!(
        f.int(ABANDON, &["a:1 2 10000 0"]),
        1,
        "call 2's count abandoned"
    );
    assert_eq!(f.int(ABANDON, &["a:1 2 10000 0"]), 0, "once");
    assert_eq!(f.calls(), ["1"]);
    assert_eq!(
        f.int(ABANDON, &["a:1 9 10000 0"]),
        0,
        "a call that took nothing"
    );
    // A queued call: only its own entry is removed.
    assert_eq!(f.acquire_raw("b:1", "first", "7", "0")[0], 0);
    assert_eq!(f.int(ABANDON, &["b:1 6 10000 0"]), 0);
    assert_eq!(f.int(ABANDON, &["b:1 7 10000 0"]), 2, "b's entry removed");
    let queued: i64 = f.conn.zcard(&f.keys.all[1]).unwrap();
    assert_eq!(queued, 0, "no entry, no deadline");
    // The last count of a hold frees the lock for the next waiter.
    assert_eq!(f.acquire_raw("c:1", "first", "8", "0")[0], 0);
    assert_eq!(f.int(ABANDON, &["a:1 1 10000 0"]), 1);
    assert_eq!(f.holder().as_deref(), Some("c:1"));
    assert_eq!(f.calls(), ["8"]);
    f.assert_every_key_expires();
}

#[test]
fn a_hold_whose_owner_id_holds_a_hash_is_released_call_by_call() {
    // An election's owner id ends with its value, which may hold a '#': a
    // release names its call key "<owner>#<call>", and its slow path (a
    // re-entered hold) reads the owner up to the last '#'.
    let mut f = fixture("hash-owner");
    let owner = "c:1@v#2";
    let token = f.acquire_raw(owner, "first", "1", "0")[1].to_string();
    assert_eq!(
        f.acquire_raw(owner, "first", "2", &token)[0],
        1,
        "re-entered"
    );
    assert_eq!(f.calls(), ["1", "2"]);
    assert_eq!(f.release_raw(owner, &token, "1"), 1, "one hold left");
    assert_eq!(f.holder().as_deref(), Some(owner));
    assert_eq!(f.release_raw(owner, &token, "2"), 0);
    assert_eq!(f.holder(), None);
    assert_eq!(
        f.release_raw(owner, &token, "2"),
        0,
        "a repeat answers as the first did"
    );
    // An owner whose id the first's begins with released nothing.
    assert_eq!(f.release_raw("c:1@v", &token, "2"), -1);
    f.assert_every_key_expires();
}

#[test]
fn an_orphaned_hold_is_never_re_entered() {
    let mut f = fixture("orphan");
    let orphan = f.acquire_raw("a:1", "first", "1", "0")[1];
    // The same owner asks again with no live guard: a fresh hold, count 1.
    let reply = f.acquire_raw("a:1", "first", "2", "0");
    assert_eq!(reply[0], 1);
    assert!(reply[1] > orphan, "a new acquisition, new token");
    assert_eq!(f.calls(), ["2"], "the orphan's count is gone");
    // With someone queued, the orphan goes to them and the caller queues.
    assert_eq!(f.acquire_raw("b:1", "first", "3", "0")[0], 0);
    let reply = f.acquire_raw("a:1", "first", "4", "0");
    assert_eq!(reply[0], 0, "queued behind b");
    assert_eq!(f.holder().as_deref(), Some("b:1"));
    // A handoff to a waiting call is its own, not an orphan, in poll mode.
    let b_token = f.token();
    assert_eq!(f.release_raw("b:1", &b_token, "3"), 0);
    let reply = f.acquire_raw("a:1", "poll", "4", "0");
    assert_eq!(reply[0], 1, "a's call 4 was handed the lock");
    assert_eq!(f.calls(), ["4"]);
}

#[test]
fn every_expiry_a_script_sets_is_checked_before_it_writes() {
    let mut f = fixture("ranges");
    let max_ms = "31536000000";
    for lease in [
        "99999999999999999",
        "31536000001",
        "0",
        "-5",
        "1.5",
        "abc",
        "",
        // Forms Lua's tonumber takes that are no whole number of ms as
        // written: an exponent, hex, spaces.
        "6e5",
        "0x10",
        " 5",
    ] {
        let err = f
            .eval(ACQUIRE, &["a:1", "1", lease, "1 1000 try 0"])
            .expect_err(lease);
        assert!(
            err.to_string().contains("lease must be"),
            "{lease:?}: {err}"
        );
        assert_eq!(f.holder(), None, "nothing written for lease {lease:?}");
    }
    let reply = f.ints(ACQUIRE, &["a:1", "1", max_ms, "1 1000 try 0"]);
    assert_eq!(reply[0], 1, "the longest lease is taken");
    // The waiter timeout is read where a call may queue (a free lock
    // nobody waits for is taken without it), and checked there before
    // anything is written.
    let value: String = f.conn.get(&f.keys.all[0]).unwrap();
    for timeout in [
        "99999999999999999",
        "31536000001",
        "0",
        "-5",
        "1.5",
        "abc",
        "",
        // Forms Lua's tonumber takes that are no whole number of ms as
        // written: an exponent, hex, spaces.
        "6e5",
        "0x10",
    ] {
        let err = f
            .eval(
                ACQUIRE,
                &["b:1", "2", "1000", &format!("0 {timeout} first 0")],
            )
            .expect_err(timeout);
        assert!(
            err.to_string().contains("waiter timeout must be"),
            "{timeout:?}: {err}"
        );
        let now: String = f.conn.get(&f.keys.all[0]).unwrap();
        assert_eq!(now, value, "nothing written for waiter timeout {timeout:?}");
        let queued: bool = f.conn.exists(&f.keys.all[1]).unwrap();
        assert!(!queued, "nobody queued for waiter timeout {timeout:?}");
    }
    let token = reply[1].to_string();
    assert!(f.lease_left() > 31_535_000_000);
    let before = f.lease_left();
    assert!(f.eval(RENEW, &["a:1", &token, "31536000001"]).is_err());
    assert!(f
        .eval(HEARTBEAT, &["1000", "a:1 1 99999999999999999 0"])
        .is_err());
    assert!(
        f.lease_left() <= before && f.lease_left() > 31_535_000_000,
        "the lease is as it was"
    );
    // A queue entry that is not one is refused before any write.
    for (script, args) in [
        (ABANDON, vec!["a:1 1"]),
        (HEARTBEAT, vec!["1000", "a:1 1 1000 2"]),
        (mutex(Op::Cancel), vec!["a:1 x 1000 0"]),
    ] {
        let err = f.eval(script, &args).expect_err("a malformed entry");
        assert!(
            err.to_string().contains("a queue entry must be"),
            "{script:?}: {err}"
        );
    }
    f.assert_every_key_expires();
    assert!(f.server.pid().is_some());
}
