//! Each Redis-side operation driven directly, for every kind of lock: the
//! same Lua the client runs (lua/mutex/ for the mutex, the counted engine
//! lua/counted/ for the semaphore and the rwlock), with the keys and
//! arguments the client sends, from the library's protocol layer
//! (`protocol::Ask` says what a call asks for: a semaphore's permit request
//! takes n units of its N permits, a rwlock's read 1 unit of RW_CAPACITY, a
//! write all of them). One driver (protocol/driver.rs) runs them; it
//! checks after every step that no key is left without a TTL, and on a
//! counted lock that the meta outlives the other keys and its used units
//! are the holds' units. This covers the interleavings a client cannot
//! produce on demand: a call delivered twice, a heartbeat still in flight,
//! a call abandoned by its id, an argument out of range. Each answers as
//! its script's header says.
//!
//! Written once and run for each kind they fit (a test per kind, named
//! `<scenario>::<kind>`; what a scenario asks for, an ask of one unit or of all
//! of them, follows from the kind): strict FIFO handoff, the grant reaching its
//! waiter by message and by poll, a new head told by message when the head
//! leaves a held lock, a dead waiter not dropped yet counted as no live one by
//! status, `try` never ahead of a queued waiter, an
//! arrival under contention sending seven commands and each fast path the
//! commands its header names (the server's INFO commandstats), heartbeats that keep waiters and push every TTL while the
//! unbeaten are dropped, and every key keeping a TTL through heartbeats,
//! cancels and abandons in a mix, on all three kinds and on an election (the
//! mutex's engine on an election's own keys); on the counted engine's two,
//! increasing fencing tokens, repeats (first calls, queued calls, releases)
//! that count once, renewals only of a live hold with its token, leases (fixed
//! ones too) that run out by themselves and free their units for the head (its
//! poll or anyone's heartbeat admits it and the calls behind it that fit),
//! heartbeats that keep a handed watchdog lease but leave a fixed one, cancels
//! and abandons that leave nothing and let in whom they unblock (a cancel after
//! a handoff gives the hold back, to whom it blocked), a force release that frees every hold once and
//! admits the head, status (its shape, its bounds, changing nothing), a hold's
//! units in the meta, bad input (arguments, queue entries, a meta fairlock did
//! not write) refused before any write, another format's lock refused by every
//! script before any write (a heartbeat's and set_permits' prune of its queue
//! too), keys that expire a fence life after the
//! last holder, and the mutex, the semaphore and the rwlock of one name apart.
//!
//! Each kind's own (protocol/mutex.rs, protocol/semaphore.rs,
//! protocol/rwlock.rs, protocol/election.rs): an election's scripts
//! announcing on its channel, in the same call, every holder they grant its
//! lock to and every hold that ends with nobody to hand it to (and nothing
//! else), where the mutex's publish nothing but wake messages, an
//! announcement its ACL user may not publish leaving the step standing; the
//! mutex's release and force release delivered
//! twice, a heartbeat in flight never stretching a fixed lease taken since,
//! re-entries abandoned by their call's id, orphaned holds never
//! re-entered, every expiry checked before it is written; the semaphore's
//! units held never above N, weighted FIFO (a head that does not fit is
//! never passed by a smaller call behind it, not even by one that would
//! fit, nor starved by them; when a head is admitted, the calls right
//! behind it that fit enter in the same step: on a release, a cancel or an
//! abandon of a head, the head's own poll, a force release), a permits
//! mismatch refused before any write (as `ErrorKind::PermitsMismatch`),
//! units of 0 or above N refused before any write, the permits set by
//! set_permits.lua (a grow admitting in order the waiters that now fit, a
//! shrink keeping holders' permits and refusing the queued calls that ask
//! for more, as `ErrorKind::PermitsExceeded`); the rwlock's readers
//! sharing, a writer waiting for the readers ahead of it and then holding
//! alone, a reader behind a queued writer waiting, consecutive readers at
//! the head entering together, re-entry (read in read, read in write, write
//! in write granted; read -> write refused, nothing written) with tokens
//! increasing across re-entries; a semaphore's release delivered twice
//! among permits and its status's available permits; long random
//! mixes against a model of each; and the ACL user of docs/security.md running every
//! script of the counted engine, each path that writes; a revocation
//! (protocol/revoke.rs) asking the holds of its time, and no later one,
//! on every kind.

#[path = "protocol/driver.rs"]
mod driver;
#[path = "protocol/election.rs"]
mod election;
#[path = "protocol/mutex.rs"]
mod mutex;
#[path = "protocol/revoke.rs"]
mod revoke;
#[path = "protocol/rwlock.rs"]
mod rwlock;
#[path = "protocol/semaphore.rs"]
mod semaphore;

use fairlock_test_support::DEADLINE_BASE;
use std::time::{Duration, Instant};

use driver::*;

/// For each scenario `fn name(k: LockKind)` listed with the kinds it fits,
/// a module `name` with one test per kind: `name::mutex`,
/// `name::semaphore`, `name::rwlock`, `name::election` (an election is
/// the mutex's engine on keys of its own).
macro_rules! per_kind {
    ($($(#[$attr:meta])* [$($kind:ident),+] fn $name:ident($k:ident: LockKind $(,)?) $body:block)*) => {$(
        $(#[$attr])*
        fn $name($k: LockKind) $body

        mod $name {$(
            #[test]
            fn $kind() {
                super::$name(super::kind_named(stringify!($kind)))
            }
        )+}
    )*};
}

fn kind_named(name: &str) -> LockKind {
    match name {
        "mutex" => LockKind::Mutex,
        "semaphore" => LockKind::Semaphore,
        "rwlock" => LockKind::RwLock,
        "election" => LockKind::Election,
        other => panic!("no kind {other}"),
    }
}

/// An ask of which `n` holds fit at once on a semaphore (one of its `n`
/// permits), and how many fit: one mutex hold, one write.
fn slots(kind: LockKind, n: u32) -> (Ask, u32) {
    match kind {
        LockKind::Mutex | LockKind::Election => (Ask::Mutex, 1),
        LockKind::Semaphore => (permits(1, n), n),
        LockKind::RwLock => (WRITE, 1),
        other => unreachable!("no lock of kind {other:?} here"),
    }
}

per_kind! {
    /// Each release hands the lock (a semaphore: the one permit it frees)
    /// to the next waiter in arrival order.
    [mutex, semaphore, rwlock, election]
    fn waiters_get_holds_in_arrival_order(k: LockKind) {
        let mut s = Lock::new(k, "fifo");
        let (ask, n) = slots(k, 2);
        let mut holding: Vec<Hold> = [("a:1", 1), ("b:1", 2)][..n as usize]
            .iter()
            .map(|&(owner, call)| s.take(owner, call, ask))
            .collect();
        let arrivals: Vec<String> = (1..=8).map(|i| format!("w{i}:1")).collect();
        for (i, owner) in arrivals.iter().enumerate() {
            assert_eq!(s.queue(owner, 10 + i as u64, ask), i as u64);
        }
        let mut granted = Vec::new();
        while !holding.is_empty() {
            let next = s.handed(&holding.remove(0));
            assert!(next.len() <= 1, "one release frees one hold: {next:?}");
            granted.extend(next.iter().map(|p| p.owner.clone()));
            holding.extend(next);
        }
        assert_eq!(granted, arrivals);
    }

    /// A holder's lease runs out while a waiter is queued: the lock is
    /// free, but the waiter came first.
    [mutex, semaphore, rwlock, election]
    fn try_never_passes_a_queued_waiter_even_with_the_lock_free(k: LockKind) {
        let mut s = Lock::new(k, "try-fifo");
        let (ask, _) = slots(k, 1);
        s.take_fixed("a:1", 1, ask, SHORT);
        assert_eq!(s.queue("w:1", 2, ask), 0);
        sleep(SHORT + Duration::from_millis(50));
        assert!(s.holders().is_empty(), "the lease ran out");
        match s.attempt("t:1", 3, Mode::Try, ask) {
            AcquireReply::Waiting { position, .. } => assert_eq!(position, None),
            other => panic!("try passed the queued waiter: {other:?}"),
        }
        // The try handed the free lock to the waiter instead.
        assert_eq!(s.holders(), [member(&hold("w:1", 2, ask, 0))]);
        assert!(s.queued().is_empty());
        // A newcomer's first attempt queues behind, as the try did not.
        assert_eq!(s.queue("n:1", 4, ask), 0);
    }

    [mutex, semaphore, rwlock, election]
    fn a_grant_reaches_its_waiter_by_message_and_by_poll(k: LockKind) {
        let mut s = k.lock("handoff");
        let ask = k.all(1);
        let a = s.take("a:1", 1, ask);
        s.queue("w:1", 2, ask);
        s.queue("x:1", 3, ask);
        let mut sub = s.server.conn();
        let mut pubsub = subscribe(&mut sub);
        let handed = s.handed(&a);
        assert_eq!(handed.len(), 1);
        let w = handed[0].clone();
        let (channel, payload) = message(&mut pubsub);
        assert_eq!(channel, "fairlock:wake:w");
        // The grant's lease: the waiter's 60 s, bounded by its liveness deadline.
        let ttl: u64 = payload
            .strip_prefix(&format!("G 2 {} ", w.token))
            .unwrap_or_else(|| panic!("{payload}"))
            .parse()
            .unwrap();
        assert!((59_000..=60_000).contains(&ttl), "{payload}");
        // The new head is sent nothing (a handoff would pay for it on every
        // grant): its client's next heartbeat says it heads the queue, with
        // the new lease's end, which it then polls at.
        pubsub
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert!(pubsub.get_message().is_err(), "a message after the grant");
        let beat = s.heartbeat(LONG, &[entry("x:1", 3, ask)]);
        assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
        assert!(
            (55_000..=60_000).contains(&beat.pttl_ms),
            "the new lease's end: {beat:?}"
        );
        // The waiter's next poll (or a repeat of its first call) finds its hold.
        for mode in [Mode::Poll, Mode::First] {
            match s.attempt("w:1", 2, mode, ask) {
                AcquireReply::Acquired { token, .. } => assert_eq!(token, w.token),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(s.holders(), [member(&w)]);
    }

    /// The head leaves the queue of a held lock (a cancel): the waiter
    /// behind it, the new head, is told at once, "H <call id> <lease ms
    /// left>" (lib/messages.lua), so it can claim the lock when that lease
    /// runs out rather than at its next heartbeat.
    [mutex, semaphore, rwlock, election]
    fn a_head_that_leaves_a_held_lock_tells_the_new_head(k: LockKind) {
        let mut s = k.lock("head-leaves");
        let ask = k.all(1);
        s.take("a:1", 1, ask);
        s.queue("w:1", 2, ask);
        s.queue("x:1", 3, ask);
        let mut sub = s.server.conn();
        let mut pubsub = subscribe(&mut sub);
        assert_eq!(s.cancel(entry("w:1", 2, ask)), CancelReply::Left);
        let (channel, payload) = message(&mut pubsub);
        assert_eq!(channel, "fairlock:wake:x");
        let left: i64 = payload
            .strip_prefix("H 3 ")
            .unwrap_or_else(|| panic!("{payload}"))
            .parse()
            .unwrap();
        assert!((55_000..=60_000).contains(&left), "{payload}");
    }

    /// A waiter whose client stopped beating, not dropped yet, is listed
    /// with its liveness run out (negative) and not counted among the live
    /// waiters (the status's queue length).
    [mutex, semaphore, rwlock, election]
    fn status_counts_a_dead_waiter_not_dropped_yet_as_no_live_one(k: LockKind) {
        let mut s = k.lock("status-dead-waiter");
        let ask = k.all(1);
        s.take("a:1", 1, ask);
        s.queue("w:1", 2, ask);
        s.queue("x:1", 3, ask);
        s.heartbeat(Duration::from_millis(1), &[entry("w:1", 2, ask)]);
        sleep(Duration::from_millis(50));
        let st = s.status(10, 10);
        assert_eq!(st.live_waiters, 1, "{st:?}");
        let listed: Vec<(&str, bool)> =
            st.waiters.iter().map(|w| (w.owner.as_str(), w.liveness_left_ms < 0)).collect();
        assert_eq!(listed, [("w:1", true), ("x:1", false)], "{st:?}");
    }

    /// A waiter admitted as units free up (not the handoff of every unit)
    /// hears the lease Redis gave it: its 60 s watchdog lease bounded by its
    /// liveness deadline (5 s here), so its client renews in time.
    [semaphore, rwlock]
    fn an_admitted_grant_tells_the_lease_its_liveness_deadline_bounds(k: LockKind) {
        let mut s = k.lock("admitted-lease");
        let a = s.take("a:1", 1, k.all(2));
        s.waiter_timeout = Duration::from_secs(5);
        s.queue("r:1", 2, k.one(2));
        let mut sub = s.server.conn();
        let mut pubsub = subscribe(&mut sub);
        let handed = s.handed(&a);
        assert_eq!(owners(&handed), ["r:1"]);
        let (channel, payload) = message(&mut pubsub);
        assert_eq!(channel, "fairlock:wake:r");
        let ttl: i64 = payload
            .strip_prefix(&format!("G 2 {} ", handed[0].token))
            .unwrap_or_else(|| panic!("{payload}"))
            .parse()
            .unwrap();
        let left = s.lease_end(&member(&handed[0])).unwrap() - s.now_ms();
        assert!(ttl <= 5_000 && ttl >= left, "{payload}: {left} ms left at Redis");
    }

    /// A call queued behind two holds (the holders zset, no lone hold)
    /// with a waiter timeout far past their leases: the meta, which keeps
    /// the capacity and the last token, outlives the queue it pushed out
    /// by a fence life.
    [semaphore, rwlock]
    fn a_long_wait_behind_two_holds_keeps_the_meta_past_the_queue(k: LockKind) {
        let mut s = k.lock("long-behind-two");
        s.take("a:1", 1, k.one(2));
        s.take("b:1", 2, k.one(2));
        s.waiter_timeout = Duration::from_secs(600);
        assert_eq!(s.queue("w:1", 3, k.all(2)), 0);
        let (meta, queue) = (s.pttl(2), s.pttl(1));
        let fence = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
        assert!(queue >= 600_000, "{queue} ms");
        assert!(meta >= queue + fence - 10, "the meta {meta} ms, the queue {queue} ms");
    }

    /// Acquire's ARGV after the common ones: owner, call, lease, capacity
    /// (the semaphore's permits, the rwlock's RW_CAPACITY), units (what
    /// this call takes: a read 1, a write all; it was the access, "r" or
    /// "w") and "<fixed> <waiter timeout> <mode> <live guard token>"; each
    /// bad in turn, the others good. Release and renew too; and a meta key
    /// fairlock did not write is a key conflict.
    [semaphore, rwlock]
    fn bad_arguments_are_refused_before_any_write(k: LockKind) {
        let mut s = k.lock("bad-input");
        let one = k.one(2);
        s.take("a:1", 1, one);
        let before = s.snapshot();
        let capacity = one.capacity().to_string();
        let all = k.all(2).units().to_string();
        let rest = |fixed: &str, timeout: &str, mode: &str, guard: &str| {
            format!("{fixed} {timeout} {mode} {guard}")
        };
        let good = [
            "n:1".to_owned(),
            "2".to_owned(),
            "60000".to_owned(),
            capacity.clone(),
            "1".to_owned(),
            rest("0", "60000", "first", "0"),
        ];
        // (at, bad value, what the error names, units of all of them)
        for (at, value, what, of_all) in [
            (3, "0".to_owned(), "capacity", false),
            (3, "x".to_owned(), "capacity", false),
            (3, "4294967296".to_owned(), "capacity", false),
            (4, "0".to_owned(), "units", false),
            (4, "x".to_owned(), "units", false),
            (4, String::new(), "units", false),
            (4, "4294967296".to_owned(), "units", false),
            (0, "n 1".to_owned(), "owner", false),
            (1, "x".to_owned(), "owner", false),
            (1, "x".to_owned(), "owner", true),
            (2, "0".to_owned(), "lease", false),
            (2, "6e4".to_owned(), "lease", false),
            (2, "0x10".to_owned(), "lease", false),
            (3, "3e0".to_owned(), "capacity", false),
            (4, "1e0".to_owned(), "units", false),
            (5, rest("2", "60000", "first", "0"), "fixed", false),
            (5, rest("0", "60000", "wait", "0"), "mode", false),
            (5, rest("0", "60000", "wait", "0"), "mode", true),
            (5, rest("0", "0", "first", "0"), "waiter timeout", false),
            (5, rest("0", "6e4", "first", "0"), "waiter timeout", false),
            (5, rest("0", "60000", "first", "x"), "live guard token", false),
            (5, rest("0", "60000", "first", "-1"), "guard", false),
            (5, "0 60000 first".to_owned(), "settings", false),
        ] {
            let mut bad = good.clone();
            if of_all {
                bad[4] = all.clone();
            }
            bad[at] = value;
            let err = s.eval(Script::of(k, Op::Acquire), &bad).unwrap_err();
            assert_eq!(s.snapshot(), before, "{bad:?}");
            assert!(err.to_string().contains(what), "{bad:?}: {err}");
        }
        for bad in [["a 1#1", "5"], ["a:1#x", "5"], ["a:1", "5"]] {
            assert!(s.eval(Script::of(k, Op::Release), &bad).is_err(), "{bad:?}");
            assert_eq!(s.snapshot(), before, "{bad:?}");
        }
        for bad in [["a:1", "5", "-3", "1"], ["a 1", "5", "100", "1"]] {
            assert!(s.eval(Script::of(k, Op::Renew), &bad).is_err(), "{bad:?}");
            assert_eq!(s.snapshot(), before, "{bad:?}");
        }
        // A meta key fairlock did not write.
        s.conn.set::<_, _, ()>(&s.keys.all[2], "junk").unwrap();
        s.conn.pexpire::<_, ()>(&s.keys.all[2], 60_000).unwrap();
        let before_junk = s.snapshot();
        let err = s
            .attempt_with("n:1", 2, Mode::First, one, 0, Lease::Renewed(LONG))
            .unwrap_err();
        assert_eq!(err.kind(), fairlock::ErrorKind::KeyConflict, "{err}");
        assert_eq!(s.snapshot(), before_junk);
        assert_ne!(before, before_junk);
    }

    /// Heartbeat, cancel and abandon: a waiter timeout or a queue entry
    /// that is not one is refused before any write (a good entry beside a
    /// bad one too). A counted entry has five fields, the last its units:
    /// the mutex's four-field entry (the semaphore's former one) is not one.
    [semaphore, rwlock]
    fn bad_heartbeat_cancel_and_abandon_input_is_refused_before_any_write(k: LockKind) {
        let mut s = k.lock("bad-input-2");
        s.take("a:1", 1, k.all(2));
        s.queue("w:1", 2, k.one(2));
        let before = s.snapshot();
        let of = |op| Script::of(k, op);
        let bad_entries = [
            "w:1 2 60000 0",
            "w:1 2 60000 0 x",
            "w:1 2 0 0 1",
            "w:1 2 60000 2 1",
            "w 1 2 60000 0 1",
            "w:1 x 60000 0 1",
            "",
        ];
        for bad in bad_entries {
            for (script, args) in [
                (of(Op::Cancel), vec![bad]),
                (of(Op::Abandon), vec![bad]),
                (of(Op::Heartbeat), vec!["60000", "w:1 2 60000 0 1", bad]),
            ] {
                let err = s.eval(script, &args).unwrap_err();
                assert_eq!(s.snapshot(), before, "{script:?} {args:?}");
                let text = chain(&err);
                assert!(
                    text.contains("queue entry") || text.contains("lease"),
                    "{script:?} {args:?}: {text}"
                );
            }
        }
        for timeout in ["0", "x", "-5"] {
            let args = [timeout, "w:1 2 60000 0 1"];
            let err = s.eval(of(Op::Heartbeat), &args).unwrap_err();
            assert!(chain(&err).contains("waiter timeout"), "{err}");
            assert_eq!(s.snapshot(), before, "{args:?}");
        }
        let good = "a:1 1 60000 0 1";
        for (op, bad) in [
            (Op::Heartbeat, vec!["0", good]),
            (Op::Heartbeat, vec!["60000", good, "a:1 x 60000 0 1"]),
            (Op::Heartbeat, vec!["60000", good, "a:1 2 0 0 1"]),
            (Op::Heartbeat, vec!["60000", good, "a:1 2 60000 0"]),
            (Op::Heartbeat, vec!["60000", good, "a:1 2 60000 0 0"]),
            (Op::Cancel, vec!["a:1 1 60000 2 1"]),
            (Op::Cancel, vec!["a 1 1 60000 0 1"]),
            (Op::Cancel, vec!["a:1 1 60000 0"]),
            (Op::Abandon, vec!["a:1 1"]),
            (Op::Abandon, vec!["a:1 1 1"]),
            (Op::Abandon, vec!["a:1 1 99999999999999 0 1"]),
            (Op::Abandon, vec!["a:1 1 60000 0 4294967296"]),
        ] {
            let err = s.eval(of(op), &bad).unwrap_err();
            assert_eq!(s.snapshot(), before, "{op:?} {bad:?}");
            let text = err.to_string();
            assert!(
                text.contains("queue entry") || text.contains("must be"),
                "{op:?} {bad:?}: {text}"
            );
        }
    }

    /// Takes, handoffs and renewals (three permits of three, one write at
    /// a time): every token larger than the last; the meta keeps the last.
    [semaphore, rwlock]
    fn tokens_strictly_increase_across_takes_handoffs_and_renewals(k: LockKind) {
        let mut s = k.lock("tokens");
        let (ask, n) = slots(k, 3);
        let mut tokens = Vec::new();
        let mut held: Vec<Hold> = (0..u64::from(n))
            .map(|i| s.take(&format!("h{i}:1"), i, ask))
            .collect();
        tokens.extend(held.iter().map(|p| p.token));
        for i in 10..20 {
            s.queue(&format!("w{i}:1"), i, ask);
        }
        while !held.is_empty() {
            let gone = held.remove(0);
            assert!(s.renew(&gone, Some(LONG)));
            let next = s.handed(&gone);
            tokens.extend(next.iter().map(|p| p.token));
            held.extend(next);
        }
        for i in 30..35 {
            let p = s.take(&format!("n{i}:1"), i, ask);
            tokens.push(p.token);
            s.release(&p);
        }
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
        // The meta keeps the last one (after the capacity and the units
        // used, none now).
        let meta = s.meta().unwrap();
        assert_eq!(meta.split(' ').nth(1).unwrap(), "0", "{meta}");
        assert_eq!(
            meta.split(' ').nth(2).unwrap(),
            tokens.last().unwrap().to_string()
        );
    }

    [semaphore, rwlock]
    fn a_call_delivered_twice_takes_one_hold(k: LockKind) {
        let mut s = k.lock("acquire-twice");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, one);
        match s.attempt("a:1", 1, Mode::First, one) {
            AcquireReply::Acquired { token, .. } => assert_eq!(token, a.token),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.holders(), [member(&a)]);
        // The same owner's other call is another hold.
        let a2 = s.take("a:1", 2, one);
        assert_ne!(a2.token, a.token);
        // A queued call delivered twice keeps its place.
        assert_eq!(s.queue("w:1", 3, all), 0);
        assert_eq!(s.queue("x:1", 4, all), 1);
        assert_eq!(s.queue("w:1", 3, all), 0);
        assert_eq!(s.queued().len(), 2);
    }

    [semaphore, rwlock]
    fn repeats_count_once(k: LockKind) {
        let mut s = k.lock("repeats");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, one);
        let b = s.take("b:1", 2, one);
        s.queue("w:1", 3, all);
        // A first call delivered twice takes one hold.
        match s.attempt("a:1", 1, Mode::First, one) {
            AcquireReply::Acquired { token, .. } => assert_eq!(token, a.token),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.holders(), [member(&a), member(&b)]);
        // A queued call delivered twice stays one entry.
        assert_eq!(s.queue("w:1", 3, all), 0);
        assert_eq!(s.queued().len(), 1);
        // A release delivered twice counts once: the head still waits for b.
        assert_eq!(s.release(&a), RELEASED);
        assert_eq!(s.release(&a), RELEASED);
        assert_eq!(s.holders(), [member(&b)]);
        assert_eq!(s.queued().len(), 1);
        let w = s.handed(&b);
        assert_eq!(owners(&w), ["w:1"]);
        // After another release, a's repeat still counts once (the meta
        // names the last releases); a stale one is NotHeld; neither
        // changes anything.
        let before = s.snapshot();
        assert_eq!(s.release(&a), RELEASED);
        let stale = Hold {
            token: w[0].token + 1,
            ..w[0].clone()
        };
        assert_eq!(s.release(&stale), ReleaseReply::NotHeld);
        assert_eq!(s.snapshot(), before);
    }

    [semaphore, rwlock]
    fn renewal_extends_only_a_live_hold_with_its_token(k: LockKind) {
        let mut s = k.lock("renew");
        let a = s.take_fixed("a:1", 1, k.all(1), SHORT);
        let before = s.lease_end(&member(&a)).unwrap();
        sleep(Duration::from_millis(20));
        assert!(s.renew(&a, Some(LONG)));
        assert!(s.lease_end(&member(&a)).unwrap() > before);
        assert!(
            s.holds_pttl() > 50_000,
            "the key that keeps the hold outlives the new lease"
        );
        assert!(s.pttl(2) > 50_000 + fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64);
        sleep(SHORT + Duration::from_millis(50));
        assert_eq!(s.holders(), [member(&a)], "renewed past its first lease");
        if k == LockKind::RwLock {
            assert_eq!(s.writers(), [member(&a)], "the renewed hold is still the write");
        }
        assert!(s.renew(&a, None), "a rewrite for WAIT");
        for stale in [
            Hold {
                token: a.token - 1,
                ..a.clone()
            },
            Hold {
                token: a.token + 1,
                ..a.clone()
            },
            Hold {
                call: 2,
                ..a.clone()
            },
            Hold {
                owner: "v:1".into(),
                ..a.clone()
            },
        ] {
            assert!(!s.renew(&stale, Some(LONG)), "{stale:?}");
        }
        assert_eq!(s.release(&a), RELEASED);
        assert!(!s.renew(&a, Some(LONG)), "released");
    }

    /// An arrival behind another's hold with a call queued already (every
    /// arrival under contention) sends seven commands and no more: GET and
    /// PTTL of the lock, TIME, the queue's ZCARD and ZRANGE (its last
    /// entry, by index), one ZADD for its entry and its deadline, the
    /// queue's PTTL. Counted by the server the script runs on (`INFO
    /// commandstats`); its arrival number, 2, prunes nothing (every fourth
    /// does).
    [mutex, semaphore, rwlock, election]
    fn an_arrival_behind_others_sends_seven_commands(k: LockKind) {
        let mut s = k.lock("arrival-cost");
        let (ask, _) = slots(k, 1);
        s.take("a:1", 1, ask);
        assert_eq!(s.queue("b:1", 2, ask), 0);
        let arrival = Acquire {
            ask,
            owner: "c:1",
            lease: Lease::Renewed(LONG),
            waiter_timeout: LONG,
            mode: Mode::First,
            call: 3,
            live_token: 0,
        };
        let (reply, sent) = commands_sent(&mut s, k, &arrival);
        let want = [("get", 1), ("pttl", 2), ("time", 1), ("zadd", 1), ("zcard", 1), ("zrange", 1)];
        assert_eq!(sent, want.map(|(c, n)| (c.to_owned(), n)));
        match reply {
            AcquireReply::Waiting { position, .. } => assert_eq!(position, Some(1)),
            other => panic!("{other:?}"),
        }
    }

    /// An arrival into the empty queue behind a hold that was handed over
    /// (which keeps its '+': waiters may be queued) with a waiter timeout
    /// over half the lease and fence life, yet within them, sends six
    /// commands: GET and PTTL of the lock key, TIME, ZCARD, ZADD and the
    /// new queue's PEXPIRE. The queue then lives as long as the lock key
    /// and no longer, so the lock key, which must outlive it, needs no SET
    /// to grow (it did: seven commands, and a handoff with others queued
    /// grew the new hold's fence every time).
    [mutex, election]
    fn an_arrival_into_an_empty_queue_with_a_long_waiter_timeout_sends_six_commands(
        k: LockKind,
    ) {
        let mut s = k.lock("long-waiter-timeout");
        let (ask, _) = slots(k, 1);
        let a = s.take("a:1", 1, ask);
        assert_eq!(s.queue("b:1", 2, ask), 0);
        assert_eq!(s.handed(&a).len(), 1, "b holds; the queue is empty");
        let fence_ms = fairlock::DEFAULT_FENCE_LIFE.as_millis() as u64;
        let arrival = Acquire {
            ask,
            owner: "c:1",
            lease: Lease::Renewed(LONG),
            waiter_timeout: Duration::from_millis(fence_ms),
            mode: Mode::First,
            call: 3,
            live_token: 0,
        };
        let lock_value: String = s.conn.get(&s.keys.all[0]).unwrap();
        let (reply, sent) = commands_sent(&mut s, k, &arrival);
        let want = [("get", 1), ("pexpire", 1), ("pttl", 1), ("time", 1), ("zadd", 1), ("zcard", 1)];
        assert_eq!(sent, want.map(|(c, n)| (c.to_owned(), n)));
        assert!(matches!(reply, AcquireReply::Waiting { position: Some(0), .. }), "{reply:?}");
        let after: String = s.conn.get(&s.keys.all[0]).unwrap();
        assert_eq!(after, lock_value, "the lock key is as it was");
        let (lock_ttl, queue_ttl) = (s.pttl(0), s.pttl(1));
        assert!(
            queue_ttl >= fence_ms as i64 && queue_ttl <= lock_ttl,
            "the queue outlives its entry's deadline and not the lock key: {queue_ttl} ms, \
             the lock key {lock_ttl} ms"
        );
    }

    /// An arrival into the queue a handoff emptied, with the waiter timeout
    /// of the waiter handed the hold, sends six commands on every kind:
    /// GET and PTTL of the anchor, TIME, ZCARD, ZADD and the new queue's
    /// PEXPIRE. The hold handed over keeps its '+' and an anchor that
    /// covers that queue (a counted lock's meta was written without the
    /// '+' and with a fence life alone, so the arrival wrote it again: a
    /// SET where the ZCARD is now).
    [mutex, semaphore, rwlock, election]
    fn an_arrival_after_a_handoff_that_emptied_the_queue_sends_six_commands(k: LockKind) {
        let mut s = k.lock("arrival-after-handoff");
        let (ask, _) = slots(k, 1);
        let a = s.take("a:1", 1, ask);
        assert_eq!(s.queue("b:1", 2, ask), 0);
        assert_eq!(owners(&s.handed(&a)), ["b:1"], "the queue is empty");
        let arrival = Acquire {
            ask,
            owner: "c:1",
            lease: Lease::Renewed(LONG),
            waiter_timeout: s.waiter_timeout,
            mode: Mode::First,
            call: 3,
            live_token: 0,
        };
        let (anchor, value, ttl) = anchor_of(&mut s);
        let (reply, sent) = commands_sent(&mut s, k, &arrival);
        let want = [("get", 1), ("pexpire", 1), ("pttl", 1), ("time", 1), ("zadd", 1), ("zcard", 1)];
        assert_eq!(sent, want.map(|(c, n)| (c.to_owned(), n)));
        assert!(matches!(reply, AcquireReply::Waiting { position: Some(0), .. }), "{reply:?}");
        let timeout = s.waiter_timeout;
        assert_queue_within_anchor(&mut s, timeout, anchor, &value, ttl);
        let b = s.hold_of("b:1", 2, ask);
        assert_eq!(owners(&s.handed(&b)), ["c:1"]);
    }

    /// An arrival behind a hold and a waiter, with a waiter timeout whose
    /// twice passes what the anchor (a mutex's lock key, a counted lock's
    /// meta, which outlives the queue by a fence life) covers, yet within
    /// it (long_waiter_timeout), while the queue lives less than that
    /// timeout (the first waiter's is 10 s): the queue is pushed out no
    /// further than the anchor covers, and the anchor is left as it was.
    /// Eight commands on every kind: GET and PTTL of the anchor, TIME,
    /// ZCARD, ZRANGE, ZADD, the queue's PTTL and PEXPIRE (the counted
    /// engine sent a SET of the meta too, growing its fence to cover a
    /// queue of twice the timeout). Both waiters keep their places.
    [mutex, semaphore, rwlock, election]
    fn an_arrival_with_a_long_waiter_timeout_leaves_the_anchor_as_it_was(k: LockKind) {
        let mut s = k.lock("long-arrival");
        let (ask, _) = slots(k, 1);
        let a = s.take("a:1", 1, ask);
        s.waiter_timeout = Duration::from_secs(10);
        assert_eq!(s.queue("b:1", 2, ask), 0);
        let timeout = long_waiter_timeout(k);
        let arrival = Acquire {
            ask,
            owner: "c:1",
            lease: Lease::Renewed(LONG),
            waiter_timeout: timeout,
            mode: Mode::First,
            call: 3,
            live_token: 0,
        };
        let (anchor, value, ttl) = anchor_of(&mut s);
        let (reply, sent) = commands_sent(&mut s, k, &arrival);
        let want = [
            ("get", 1),
            ("pexpire", 1),
            ("pttl", 2),
            ("time", 1),
            ("zadd", 1),
            ("zcard", 1),
            ("zrange", 1),
        ];
        assert_eq!(sent, want.map(|(c, n)| (c.to_owned(), n)));
        assert!(matches!(reply, AcquireReply::Waiting { position: Some(1), .. }), "{reply:?}");
        assert_queue_within_anchor(&mut s, timeout, anchor, &value, ttl);
        assert_eq!(owners(&s.handed(&a)), ["b:1"]);
        let b = s.hold_of("b:1", 2, ask);
        assert_eq!(owners(&s.handed(&b)), ["c:1"]);
    }

    /// A heartbeat with a long waiter timeout (long_waiter_timeout) of a
    /// waiter queued with a short one, behind a hold: the queue is pushed
    /// out no further than the anchor covers, and the anchor is left as it
    /// was (the mutex's lock key grew to twice the timeout, by a GET, a
    /// PTTL and a SET: eight commands now, eleven before; the counted
    /// engine's meta by a fence grown). The waiter keeps its place, and
    /// gets the lock next.
    [mutex, semaphore, rwlock, election]
    fn a_heartbeat_with_a_long_waiter_timeout_leaves_the_anchor_as_it_was(k: LockKind) {
        let mut s = k.lock("long-heartbeat");
        let (ask, _) = slots(k, 1);
        let a = s.take("a:1", 1, ask);
        s.waiter_timeout = Duration::from_secs(10);
        assert_eq!(s.queue("b:1", 2, ask), 0);
        let timeout = long_waiter_timeout(k);
        let (anchor, value, ttl) = anchor_of(&mut s);
        let heartbeat = Heartbeat {
            waiter_timeout: timeout,
            waiters: vec![entry("b:1", 2, ask)],
        };
        let (beat, sent) = commands_sent(&mut s, k, &heartbeat);
        assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
        if anchor == 0 {
            // TIME, the prune's ZRANGEBYSCORE, the lock key's GET and
            // PTTL, ZRANK, ZADD, the queue's PTTL and PEXPIRE: no GET,
            // PTTL and SET of the lock key after them.
            let want = [
                ("get", 1),
                ("pexpire", 1),
                ("pttl", 2),
                ("time", 1),
                ("zadd", 1),
                ("zrangebyscore", 1),
                ("zrank", 1),
            ];
            assert_eq!(sent, want.map(|(c, n)| (c.to_owned(), n)));
        }
        assert_queue_within_anchor(&mut s, timeout, anchor, &value, ttl);
        assert_eq!(owners(&s.handed(&a)), ["b:1"]);
    }

    /// An arrival with a long waiter timeout (long_waiter_timeout) at a
    /// lock whose fixed lease ran out, a waiter queued: the waiter gets
    /// the lock, the arrival heads the queue made anew, which is pushed
    /// out no further than the new hold's anchor covers (a lease and a
    /// fence life), so that anchor is not grown past it (it was, to twice
    /// the timeout; the counted engine's a fence life past that).
    [mutex, semaphore, rwlock, election]
    fn an_arrival_after_a_handoff_with_a_long_waiter_timeout_keeps_the_anchor_to_the_hold(
        k: LockKind,
    ) {
        let mut s = k.lock("long-handoff");
        let (ask, _) = slots(k, 1);
        s.take_fixed("a:1", 1, ask, SHORT);
        assert_eq!(s.queue("b:1", 2, ask), 0);
        sleep(SHORT + Duration::from_millis(50));
        let timeout = long_waiter_timeout(k);
        s.waiter_timeout = timeout;
        match s.attempt("c:1", 3, Mode::First, ask) {
            AcquireReply::Waiting { position, .. } => assert_eq!(position, Some(0)),
            other => panic!("{other:?}"),
        }
        let b = s.hold_of("b:1", 2, ask);
        let fence = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
        let (anchor, value, ttl) = anchor_of(&mut s);
        assert!(
            ttl <= LONG.as_millis() as i64 + fence,
            "the anchor lives {ttl} ms: {value}"
        );
        assert_queue_within_anchor(&mut s, timeout, anchor, &value, ttl);
        assert_eq!(owners(&s.handed(&b)), ["c:1"]);
    }

    /// A release its client vouches for (its own count of the lease has
    /// time to spare) frees the lone hold it names without reading the
    /// lease; one it does not vouch for ("check") reads it, and a hold
    /// whose lease ran out at Redis (its key's TTL within the fence) is no
    /// longer its own: nothing is written.
    [mutex, semaphore, rwlock, election]
    fn a_release_reads_the_lease_only_when_its_client_does_not_vouch_for_it(k: LockKind) {
        let mut s = k.lock("vouched");
        let (ask, _) = slots(k, 2);
        let a = s.take("a:1", 1, ask);
        let anchor = match k {
            LockKind::Mutex | LockKind::Election => s.keys.all[0].clone(),
            _ => s.keys.all[2].clone(),
        };
        let fence_ms = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
        s.conn.pexpire::<_, ()>(&anchor, fence_ms - 1_000).unwrap();
        let release = |vouched_until| Release {
            owner: &a.owner,
            token: a.token,
            call: a.call,
            vouched_until,
        };
        let before = s.snapshot();
        assert_eq!(s.run(&release(None)).unwrap(), ReleaseReply::NotHeld);
        assert_eq!(s.snapshot(), before, "a checked release wrote");
        // A lease check that is neither "check" nor absent stops the
        // release before it reads or writes (lease_check_arg).
        let (key, token) = (format!("{}#{}", a.owner, a.call), a.token.to_string());
        for odd in ["", "Check", "vouched"] {
            let err = s
                .eval(Script::of(k, Op::Release), &[key.as_str(), token.as_str(), odd])
                .unwrap_err();
            assert!(err.to_string().contains("lease check"), "{odd:?}: {err}");
            assert_eq!(s.snapshot(), before, "{odd:?}");
        }
        let vouched = Some(Instant::now() + Duration::from_secs(60));
        assert_eq!(s.run(&release(vouched)).unwrap(), RELEASED);
        let b = s.take("b:1", 2, ask);
        assert!(b.token > a.token, "{b:?} after {a:?}");
    }

    /// A release its client vouches for (no lease check) whose hold ran
    /// out at Redis before it arrived (the request held up past the
    /// lease), with a head queued that asks for less than every unit: the
    /// release is not the hold's any more (NotHeld), and the head, which
    /// its fast path took out of the queue to hand it the lock, is not
    /// lost: it holds, the units the run-out hold left being free (before
    /// the fix it neither held nor waited).
    [semaphore, rwlock]
    fn a_vouched_release_of_a_run_out_hold_keeps_the_head_it_took_out(k: LockKind) {
        let mut s = k.lock("vouched-late");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, all);
        assert_eq!(s.queue("w:1", 2, one), 0);
        // a's lease ends at Redis (its meta's TTL within the fence).
        let now = s.now_ms();
        s.set_lease_end(&member(&a), now - 10);
        let vouched = Some(Instant::now() + Duration::from_secs(60));
        let got = s.run(&Release {
            owner: &a.owner,
            token: a.token,
            call: a.call,
            vouched_until: vouched,
        });
        assert_eq!(got.unwrap(), ReleaseReply::NotHeld);
        let w = format!("w:1 2 {}", one.units());
        let (holders, waiting) = (s.holders(), s.queued());
        assert_eq!(
            (holders, waiting),
            (vec![w], vec![]),
            "the head neither holds nor waits"
        );
    }

    /// A meta deleted by hand while two holds are left in the holders zset
    /// and a call waits: an arrival that finds no room queues, and writes
    /// the meta anew (the holds' units, the capacity, outliving the holders
    /// and the queue), as an arrival that queues after admitting or
    /// dropping holds always did; `run` checks the keys after it. It used
    /// to leave the meta gone when the queue's TTL needed no push.
    [semaphore, rwlock]
    fn an_arrival_that_queues_writes_a_meta_deleted_by_hand_anew(k: LockKind) {
        let mut s = k.lock("meta-gone");
        let (one, all) = (k.one(2), k.all(2));
        s.take("a:1", 1, one);
        s.take("b:1", 2, one);
        assert_eq!(s.queue("c:1", 3, all), 0);
        let meta = s.keys.all[2].clone();
        s.conn.del::<_, ()>(&meta).unwrap();
        assert_eq!(s.queue("d:1", 4, all), 1);
        assert_eq!(s.meta_used(), Some(2), "the meta counts the two holds");
    }

    /// The lock key, which keeps the last token and says waiters are
    /// queued, outlives the queue (docs/guarantees.md, "keys"): a force
    /// release of a lock whose holder's lease ran out while a call waits
    /// with a waiter timeout above half the fence life (its queue key lives
    /// twice the waiter timeout) keeps it so, where it used to cut the key
    /// to a fence life under the queue's.
    [mutex, election]
    fn a_force_release_of_a_run_out_hold_keeps_the_key_past_the_queue(k: LockKind) {
        let mut s = k.lock("force-late");
        s.take_fixed("a:1", 1, Ask::Mutex, SHORT);
        s.waiter_timeout = fairlock::DEFAULT_FENCE_LIFE * 2;
        assert_eq!(s.queue("w:1", 2, Ask::Mutex), 0);
        assert!(s.pttl(0) >= s.pttl(1), "{} {}", s.pttl(0), s.pttl(1));
        // a's lease runs out: its key's TTL is within its fence ms.
        sleep(SHORT * 2);
        assert!(s.holders().is_empty());
        assert_eq!(s.force_release("f#1").holder, None);
        let (lock, queue) = (s.pttl(0), s.pttl(1));
        assert!(
            lock >= queue,
            "the lock key lives {lock} ms, the queue {queue} ms"
        );
        // The waiter still gets the lock, with a later token.
        assert!(matches!(
            s.attempt("w:1", 2, Mode::Poll, Ask::Mutex),
            AcquireReply::Acquired { .. }
        ));
    }

    /// A force release of a lock whose key is gone (unused for a fence
    /// life, or never used) has nobody to free, and leaves tokens
    /// increasing: the next hold's token is still above every token issued
    /// before (the server clock's, once the key that kept the last one is
    /// gone), where it used to write a free key with token 0, from which
    /// the next take counted on: token 1.
    [mutex, election]
    fn a_force_release_of_a_lock_whose_key_is_gone_keeps_tokens_increasing(k: LockKind) {
        let mut s = k.lock("force-gone");
        let a = s.take("a:1", 1, Ask::Mutex);
        assert_eq!(s.release(&a), ReleaseReply::Released { left: 0 });
        // A fence life later: the key, and the last token it kept, gone.
        let lock = s.keys.all[0].clone();
        s.conn.del::<_, ()>(&lock).unwrap();
        assert_eq!(s.force_release("f#1").holder, None);
        let b = s.take("b:1", 2, Ask::Mutex);
        assert!(b.token > a.token, "token {} after {}", b.token, a.token);
    }

    /// A force release sent again (its reply lost) after the lock moved
    /// on, a release and a new take in between, answers as the first did
    /// and frees nobody: whether the first handed a hold to a waiter (who
    /// released; a third took the lock), found the lock free (taken and
    /// released, then taken by another) or found no key at all. The
    /// repeat used to free the third holder: the mark that told it apart,
    /// in the lock key (a counted lock's meta), was the next release's.
    [mutex, semaphore, rwlock, election]
    fn a_force_release_sent_again_after_the_lock_moved_on_frees_nobody(k: LockKind) {
        let mut s = k.lock("force-again");
        let all = k.all(1);
        let nothing = Freed {
            holds: 0,
            holder: None,
        };
        // No key yet: nothing to free; then a takes.
        assert_eq!(s.force_release("f#1"), nothing);
        let a = s.take("a:1", 1, all);
        assert_eq!(s.force_release("f#1"), nothing, "the repeat");
        assert_eq!(s.holders(), [member(&a)], "a still holds");
        // a's hold, handed to b; b releases and c takes.
        s.queue("b:1", 2, all);
        let first = s.force_release("f#2");
        assert_eq!(first.holds, 1);
        let b = s.hold_of("b:1", 2, all);
        assert_eq!(s.release(&b), RELEASED);
        let c = s.take("c:1", 3, all);
        assert_eq!(s.force_release("f#2"), first, "the repeat");
        assert_eq!(s.holders(), [member(&c)], "c still holds");
        // A free lock: taken by d and released, then taken by e.
        assert_eq!(s.release(&c), RELEASED);
        assert_eq!(s.force_release("f#3"), nothing);
        let d = s.take("d:1", 4, all);
        assert_eq!(s.release(&d), RELEASED);
        let e = s.take("e:1", 5, all);
        assert_eq!(s.force_release("f#3"), nothing, "the repeat");
        assert_eq!(s.holders(), [member(&e)], "e still holds");
    }

    /// The meta outlives the holders key after every step (the driver
    /// checks it after each): an abandon that gives back the one live hold
    /// of the holders zset, beside a hold whose lease ran out and is not
    /// dropped yet, leaves the meta a fence life, and the holders key the
    /// TTL the given-back hold's lease had set (20 min here, past a fence
    /// life of 10 min), where the meta used to go first.
    [semaphore, rwlock]
    fn an_abandon_beside_a_run_out_hold_keeps_the_meta_past_the_holders(k: LockKind) {
        let mut s = k.lock("abandon-last");
        let one = k.one(2);
        let long = Lease::Renewed(fairlock::DEFAULT_FENCE_LIFE * 2);
        let got = s.attempt_with("a:1", 1, Mode::First, one, 0, long).unwrap();
        assert!(matches!(got, AcquireReply::Acquired { .. }), "{got:?}");
        let b = s.take_fixed("b:1", 2, one, LONG);
        // b's lease runs out; nothing drops it yet.
        let now = s.now_ms();
        s.set_lease_end(&member(&b), now - 10);
        assert_eq!(
            s.abandon(entry_with("a:1", 1, one, long)),
            AbandonReply::Released
        );
        let (holders, meta) = (s.pttl(0), s.pttl(2));
        assert!(holders == -2 || holders < meta, "holders {holders} ms, meta {meta} ms");
    }

    /// A hold's fixed lease runs out (a dead holder): the head's poll
    /// takes all the units; the expired hold's token is gone with it.
    [semaphore, rwlock]
    fn a_lease_that_ran_out_frees_the_lock_for_the_head(k: LockKind) {
        let mut s = k.lock("lease-out");
        let (one, all) = (k.one(2), k.all(2));
        s.take_fixed("a:1", 1, one, SHORT);
        assert_eq!(s.queue("w:1", 2, all), 0);
        sleep(SHORT * 2);
        assert!(matches!(
            s.attempt("w:1", 2, Mode::Poll, all),
            AcquireReply::Acquired { .. }
        ));
        let w = format!("w:1 2 {}", all.units());
        assert_eq!(s.holders(), [w.as_str()]);
        // Only w's token is kept (the run-out hold's went with it).
        let tokens = s.tokens();
        assert_eq!(tokens.len(), 1, "{tokens:?}");
        assert_eq!(tokens[0].0, w, "{tokens:?}");
    }

    [semaphore, rwlock]
    fn keys_expire_a_fence_life_after_the_last_holder(k: LockKind) {
        let mut s = k.lock("ttl");
        let (ask, _) = slots(k, 2);
        let a = s.take("a:1", 1, ask);
        s.release(&a);
        for (key, what) in [
            (0, "no holders, no holders key"),
            (1, "no queue"),
        ] {
            assert_eq!(s.pttl(key), -2, "{}: {what}", s.keys.all[key]);
        }
        let fence = fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64;
        // The freed meta keeps the TTL it had (the lease left and a fence
        // life) while that is at most two fence lives, as a mutex's key.
        let meta = s.pttl(2);
        assert!(meta > fence - 1000 && meta <= 2 * fence, "{meta}");
        // "<capacity> <used> <last token> <mark>": nothing held, the last
        // token and the release that freed it kept.
        let capacity = ask.capacity();
        assert_eq!(s.meta().unwrap(), format!("{capacity} 0 {} a:1#1", a.token));
    }

    /// The lock's keys are its own, in the name's slot: the locks of the
    /// other kinds of its name are free while it is held, and their holds
    /// do not stop it once its own holder is gone.
    [semaphore, rwlock]
    fn the_mutex_semaphore_and_rwlock_of_one_name_are_separate(k: LockKind) {
        let mut s = k.lock("one-name");
        let a = s.take("a:1", 1, k.all(1));
        for (other, ask) in [
            (LockKind::Mutex, Ask::Mutex),
            (LockKind::Semaphore, permits(1, 1)),
            (LockKind::RwLock, READ),
            (LockKind::Election, Ask::Mutex),
        ] {
            if other == k {
                continue;
            }
            let keys = LockKeys::of_kind(PREFIX, "one-name", other).unwrap();
            assert_eq!(keys.slot, s.keys.slot);
            let script = Script::of(other, Op::Acquire);
            let engine = match other {
                LockKind::Mutex => Engine::Mutex,
                LockKind::Election => Engine::Election,
                _ => Engine::Counted,
            };
            assert_eq!(
                script.engine, engine,
                "the mutex keeps its own engine, whose files an election's scripts are"
            );
            let op = Acquire {
                ask,
                owner: "b:1",
                lease: Lease::Renewed(LONG),
                waiter_timeout: LONG,
                mode: Mode::Try,
                call: 1,
                live_token: 0,
            };
            let reply = eval_on(&mut s.conn, &keys.all, script, &op.args()).unwrap();
            assert!(
                matches!(reply, Value::Int(_)),
                "the {other:?} is free: {reply:?}"
            );
        }
        assert_eq!(s.holders(), [member(&a)]);
        // And the other kinds' holds do not stop this lock's next holder,
        // once its holder is gone.
        s.release(&a);
        s.take("d:1", 2, k.one(1));
        s.assert_every_key_expires();
    }

    [mutex, semaphore, rwlock, election]
    fn arrivals_alone_clear_dead_entries_as_fast_as_they_come(k: LockKind) {
        let mut s = k.lock("prune");
        let (one, all) = (k.one(1), k.all(1));
        let _a = s.take("a:1", 1, all);
        // Eight waiters whose client stopped beating: their deadlines (the
        // queue's "~<entry>" members, scored 2^50 + the deadline) long past.
        let dead: Vec<String> = (0..8u64)
            .map(|i| {
                let owner = format!("d{i}:1");
                s.queue(&owner, 10 + i, one);
                queued(&owner, 10 + i, one)
            })
            .collect();
        let queue = s.keys.all[1].clone();
        for entry in &dead {
            let () = s.conn.zadd(&queue, format!("~{entry}"), DEADLINE_BASE).unwrap();
        }
        // Four newcomers, and no heartbeat: the dead are gone with them.
        for i in 0..4u64 {
            s.queue(&format!("n{i}:1"), 20 + i, one);
        }
        let left = s.queued();
        assert!(
            left.iter().all(|e| e.starts_with('n')),
            "dead entries left after four arrivals: {left:?}"
        );
        assert_eq!(left.len(), 4, "{left:?}");
        let members: usize = s.conn.zcard(&queue).unwrap();
        assert_eq!(members, 8, "each newcomer and its deadline: {left:?}");
        s.assert_every_key_expires();
    }

    [mutex, semaphore, rwlock, election]
    fn heartbeats_keep_waiters_alive_and_push_every_ttl_while_the_unbeaten_are_dropped(
        k: LockKind,
    ) {
        let mut s = k.lock("heartbeat");
        let (one, all) = (k.one(1), k.all(1));
        let a = s.take("a:1", 1, all);
        // Waiters that live 500 ms without a heartbeat (300 ms let a beat
        // come late on a CI run's busiest minute: Redis 6.2's semaphore).
        let timeout = Duration::from_millis(500);
        s.waiter_timeout = timeout;
        s.queue("w:1", 2, one);
        s.queue("w:2", 3, one);
        s.queue("x:1", 4, all);
        let mine = [entry("w:1", 2, one), entry("w:2", 3, one)];
        // Beaten every 100 ms for 1.2 s: more than twice their timeout.
        for _ in 0..12 {
            sleep(Duration::from_millis(100));
            let beat = s.heartbeat(timeout, &mine);
            assert_eq!(
                beat.statuses,
                [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
            );
            assert_eq!(beat.last_token, a.token);
            assert!(beat.pttl_ms > 50_000, "a's lease: {}", beat.pttl_ms);
            // The queue key lives past every deadline in it (its members
            // "~<entry>", scored 2^50 + the deadline), a counted lock's
            // meta past it (checked after every step).
            let now = s.now_ms();
            let deadlines: Vec<(String, i64)> = s
                .conn
                .zrangebyscore_withscores(&s.keys.all[1], DEADLINE_BASE, "+inf")
                .unwrap();
            let most = timeout.as_millis() as i64;
            for (member, score) in &deadlines {
                let deadline = score - DEADLINE_BASE;
                assert!(member.starts_with('~'), "{deadlines:?}");
                assert!(deadline > now && deadline <= now + most, "{deadlines:?}");
                assert!(s.pttl(1) >= deadline - now);
            }
        }
        // x sent none: its entry is gone, w's two kept their places.
        assert_eq!(s.queued(), [queued("w:1", 2, one), queued("w:2", 3, one)]);
        assert_eq!(
            s.heartbeat(timeout, &[entry("x:1", 4, all)]).statuses,
            [WaiterStatus::Gone]
        );
        // The release goes to the first of them (both, when both fit: two
        // reads), and the next beat says so.
        let run = s.handed(&a);
        assert_eq!(member(&run[0]), "w:1 2 1");
        if k == LockKind::RwLock {
            assert_eq!(owners(&run), ["w:1", "w:2"]);
            assert_eq!(
                s.heartbeat(timeout, &mine).statuses,
                [
                    WaiterStatus::Owns(run[0].token),
                    WaiterStatus::Owns(run[1].token)
                ]
            );
        } else {
            assert_eq!(owners(&run), ["w:1"]);
            assert_eq!(
                s.heartbeat(timeout, &mine).statuses,
                [WaiterStatus::Owns(run[0].token), WaiterStatus::Queued(0)]
            );
        }
    }

    /// A hold of all the units runs out with four waiters queued: one
    /// unit, one unit, all, one. The heartbeat of the third (not the
    /// head's) lets the two at the head in together, each told by its
    /// grant; the third now heads the queue and hears it, the fourth stays
    /// behind it.
    [semaphore, rwlock]
    fn a_heartbeat_admits_the_head_an_expired_holder_left_and_those_behind_it_that_fit(
        k: LockKind,
    ) {
        let mut s = k.lock("heartbeat-expiry");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take_fixed("a:1", 1, all, SHORT).token;
        s.queue("r1:1", 2, one);
        s.queue("r2:1", 3, one);
        s.queue("x:1", 4, all);
        s.queue("r3:1", 5, one);
        let mut sub = s.server.conn();
        let mut pubsub = subscribe(&mut sub);
        sleep(SHORT + Duration::from_millis(50));
        let beat = s.heartbeat(LONG, &[entry("x:1", 4, all)]);
        assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
        assert!(beat.last_token > a, "new tokens: {beat:?}");
        assert!(beat.pttl_ms > 59_000, "the new holds' leases: {}", beat.pttl_ms);
        assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
        assert!(s.writers().is_empty(), "the expired hold is dropped");
        assert_eq!(s.queued(), [queued("x:1", 4, all), queued("r3:1", 5, one)]);
        // Its token is gone both ways.
        let fields = s.tokens();
        let gone = format!("a:1 1 {}", all.units());
        assert!(
            !fields.iter().any(|(m, t)| *m == gone || *t == a),
            "{fields:?}"
        );
        assert_eq!(s.member_of_token(a), None);
        let r1 = s.token_of("r1:1 2 1");
        let r2 = s.token_of("r2:1 3 1");
        assert!(a < r1 && r1 < r2 && r2 == beat.last_token);
        for (channel, text) in [("r1", format!("G 2 {r1} ")), ("r2", format!("G 3 {r2} "))] {
            let (got, payload) = message(&mut pubsub);
            assert_eq!(got, format!("fairlock:wake:{channel}"));
            assert!(payload.starts_with(&text), "{payload}");
        }
        // x, left at the head, learnt it from its heartbeat's reply above:
        // no message.
        pubsub
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert!(pubsub.get_message().is_err(), "a message after the grants");
        // r1's own heartbeat learns it holds, with that token.
        assert_eq!(
            s.heartbeat(LONG, &[entry("r1:1", 2, one)]).statuses,
            [WaiterStatus::Owns(r1)]
        );
    }

    [semaphore, rwlock]
    fn a_heartbeat_keeps_a_handed_watchdog_lease_and_leaves_a_fixed_one(k: LockKind) {
        let mut s = k.lock("heartbeat-lease");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, all);
        // Watchdog leases of 2 s, a fixed one of 400 ms.
        let lease = Duration::from_secs(2);
        let renewed = entry_with("w:1", 3, one, Lease::Renewed(lease));
        let fixed = entry_with("f:1", 4, one, Lease::Fixed(Duration::from_millis(400)));
        let writer = entry_with("v:1", 5, all, Lease::Renewed(lease));
        for e in [renewed, fixed, writer] {
            assert!(matches!(
                s.attempt_with(e.owner, e.call, Mode::First, e.ask, 0, e.lease)
                    .unwrap(),
                AcquireReply::Waiting {
                    position: Some(_),
                    ..
                }
            ));
        }
        assert_eq!(owners(&s.handed(&a)), ["w:1", "f:1"]);
        let w_end = s.lease_end("w:1 3 1").unwrap();
        let f_end = s.lease_end("f:1 4 1").unwrap();
        sleep(Duration::from_millis(200));
        // Server time before the beat: the lease it keeps counts from a
        // moment no earlier (a bound no busy machine can break, unlike
        // one read after it).
        let before = s.now_ms();
        let beat = s.heartbeat(LONG, &[renewed, fixed, writer]);
        assert!(
            matches!(
                beat.statuses.as_slice(),
                [
                    WaiterStatus::Owns(_),
                    WaiterStatus::Owns(_),
                    WaiterStatus::Queued(0)
                ]
            ),
            "{beat:?}"
        );
        let w_new = s.lease_end("w:1 3 1").unwrap();
        assert!(
            w_new > w_end && w_new >= before + 2000,
            "kept at its lease: {w_end} -> {w_new}, beat after {before}"
        );
        assert_eq!(s.lease_end("f:1 4 1").unwrap(), f_end, "a fixed lease stays");
        // Another call of the same owner is not extended by this one's beat.
        sleep(Duration::from_millis(250));
        assert_eq!(
            s.heartbeat(LONG, &[entry_with("f:1", 9, one, Lease::Renewed(LONG))])
                .statuses,
            [WaiterStatus::Gone]
        );
        assert_eq!(s.holders(), ["w:1 3 1"], "f's fixed lease ran out");
        // A handed hold of all the units is kept the same way.
        let w = s.hold_of("w:1", 3, one);
        assert_eq!(owners(&s.handed(&w)), ["v:1"]);
        let v = format!("v:1 5 {}", all.units());
        let v_end = s.lease_end(&v).unwrap();
        sleep(Duration::from_millis(200));
        let before = s.now_ms();
        assert!(matches!(
            s.heartbeat(LONG, &[writer]).statuses.as_slice(),
            [WaiterStatus::Owns(_)]
        ));
        let v_new = s.lease_end(&v).unwrap();
        assert!(v_new > v_end && v_new >= before + 2000, "{v_end} -> {v_new}");
        // (The rwlock's writers zset that repeated it is gone: the member of
        // all the units is the write, with that lease end.)
        assert!(s.holders().contains(&v));
    }

    [semaphore, rwlock]
    fn a_cancel_leaves_nothing_and_lets_in_whom_it_unblocks(k: LockKind) {
        let mut s = k.lock("cancel");
        let (one, all) = (k.one(3), k.all(3));
        let a = s.take("a:1", 1, one);
        let keys = |s: &mut Lock| {
            let mut k: Vec<String> = s.conn.keys("fairlock:*").unwrap();
            k.sort();
            k
        };
        let keys_before = keys(&mut s);
        let before = s.snapshot();
        s.queue("w:1", 2, all);
        assert_eq!(s.cancel(entry("w:1", 2, all)), CancelReply::Left);
        assert_eq!(keys(&mut s), keys_before, "no queue keys left");
        assert_eq!(s.snapshot(), before, "as before the wait");
        assert_eq!(s.cancel(entry("w:1", 2, all)), CancelReply::Left, "again");
        assert_eq!(s.snapshot(), before, "as before the wait");
        // A head asking for all leaves while a hold of one unit is held: the
        // run of calls for one unit behind it enters, up to the next call
        // for all (which learns it heads from its client's heartbeat).
        s.queue("w:1", 3, all);
        s.queue("r1:1", 4, one);
        s.queue("r2:1", 5, one);
        s.queue("x:1", 6, all);
        s.queue("r3:1", 7, one);
        let mut sub = s.server.conn();
        let mut pubsub = subscribe(&mut sub);
        assert_eq!(s.cancel(entry("w:1", 3, all)), CancelReply::Left);
        assert_eq!(s.holders(), ["a:1 1 1", "r1:1 4 1", "r2:1 5 1"]);
        assert_eq!(s.queued(), [queued("x:1", 6, all), queued("r3:1", 7, one)]);
        for channel in ["r1", "r2"] {
            assert_eq!(message(&mut pubsub).0, format!("fairlock:wake:{channel}"));
        }
        // A waiter that does not head the queue leaves alone.
        assert_eq!(s.cancel(entry("r3:1", 7, one)), CancelReply::Left);
        assert_eq!(s.queued(), [queued("x:1", 6, all)]);
        assert_eq!(s.holders().len(), 3);
        // The head enters once the holds of one unit are gone.
        let r1 = s.hold_of("r1:1", 4, one);
        for h in [a, r1] {
            assert!(s.handed(&h).is_empty());
        }
        let r2 = s.hold_of("r2:1", 5, one);
        assert_eq!(owners(&s.handed(&r2)), ["x:1"]);
        let x = s.hold_of("x:1", 6, all);
        assert_eq!(s.release(&x), RELEASED);
        // The head leaves while the lock is free (its holder's lease ran
        // out): the lock goes to the next live waiter.
        s.take_fixed("b:1", 13, all, SHORT);
        s.queue("x:1", 14, all);
        s.queue("y:1", 15, all);
        s.queue("z:1", 16, all);
        sleep(SHORT + Duration::from_millis(50));
        assert_eq!(s.cancel(entry("y:1", 15, all)), CancelReply::Left);
        let x = format!("x:1 14 {}", all.units());
        assert_eq!(s.holders(), [x.as_str()], "what b left went to x");
        assert_eq!(s.queued(), [queued("z:1", 16, all)]);
        // Another call of the same owner that holds: its hold stays.
        s.queue("x:1", 17, one);
        assert_eq!(s.cancel(entry("x:1", 17, one)), CancelReply::Left);
        assert_eq!(s.holders(), [x]);
        assert_eq!(s.queued(), [queued("z:1", 16, all)]);
    }

    [semaphore, rwlock]
    fn a_cancel_after_a_handoff_gives_the_hold_back_to_whom_it_blocked(k: LockKind) {
        let mut s = k.lock("cancel-given-back");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, all);
        s.queue("w:1", 2, all);
        s.queue("x:1", 3, one);
        let handed = s.handed(&a);
        assert_eq!(owners(&handed), ["w:1"]);
        // The leave may come after its caller stopped waiting for the
        // answer: nobody takes the hold, it goes on to the next call.
        assert_eq!(s.cancel(entry("w:1", 2, all)), CancelReply::GivenBack);
        assert_eq!(s.holders(), ["x:1 3 1"]);
        if k == LockKind::RwLock {
            assert!(s.writers().is_empty());
        }
        assert!(s.queued().is_empty());
        assert_eq!(s.cancel(entry("w:1", 2, all)), CancelReply::Left, "again");
        // A release of that call sent later answers as released.
        assert_eq!(s.release(&handed[0]), RELEASED);
        assert_eq!(s.holders(), ["x:1 3 1"]);
        // Another call of the same owner is not this one: its hold stays.
        let x = s.hold_of("x:1", 3, one);
        assert_eq!(s.release(&x), RELEASED);
        let w = s.take("w:1", 8, all);
        s.queue("w:1", 9, one);
        assert_eq!(s.cancel(entry("w:1", 9, one)), CancelReply::Left);
        assert_eq!(s.holders(), [member(&w)]);
        assert!(s.queued().is_empty());
    }

    [semaphore, rwlock]
    fn an_abandon_by_entry_undoes_exactly_that_call_once(k: LockKind) {
        let mut s = k.lock("abandon");
        let (one, all) = (k.one(2), k.all(2));
        let a1 = s.take("a:1", 1, one);
        let a2 = s.take("a:1", 2, one);
        s.queue("w:1", 3, all);
        s.queue("r:1", 4, one);
        // The hold of call 1 only; a repeat changes nothing.
        assert_eq!(s.abandon(entry("a:1", 1, one)), AbandonReply::Released);
        assert_eq!(s.holders(), ["a:1 2 1"]);
        let before = s.snapshot();
        assert_eq!(s.abandon(entry("a:1", 1, one)), AbandonReply::Nothing);
        assert_eq!(s.snapshot(), before);
        assert_eq!(s.holders().len(), 1);
        // The release the client could not send answers as released.
        assert_eq!(s.release(&a1), RELEASED);
        // A queued call: its entry, once.
        s.queue("y:1", 5, one);
        assert_eq!(s.abandon(entry("y:1", 5, one)), AbandonReply::LeftQueue);
        assert_eq!(s.abandon(entry("y:1", 5, one)), AbandonReply::Nothing);
        assert_eq!(s.queued(), [queued("w:1", 3, all), queued("r:1", 4, one)]);
        // A call never made, or named with other units, is nothing.
        assert_eq!(s.abandon(entry("q:1", 9, one)), AbandonReply::Nothing);
        assert_eq!(s.abandon(entry("a:1", 2, all)), AbandonReply::Nothing);
        assert_eq!(s.holders(), ["a:1 2 1"]);
        // Call 2's hold was the last of one unit: the head enters, the call
        // behind it waits.
        assert_eq!(s.abandon(entry("a:1", 2, one)), AbandonReply::Released);
        assert_eq!(s.holders(), [format!("w:1 3 {}", all.units())]);
        assert_eq!(s.queued(), [queued("r:1", 4, one)]);
        assert_eq!(s.release(&a2), RELEASED);
        // The head's hold abandoned lets the call behind it in.
        assert_eq!(s.abandon(entry("w:1", 3, all)), AbandonReply::Released);
        assert_eq!(s.holders(), ["r:1 4 1"]);
        assert!(s.queued().is_empty());
        assert_eq!(s.abandon(entry("w:1", 3, all)), AbandonReply::Nothing);
        // With nobody waiting, a given-back hold leaves the keys as a release.
        assert_eq!(s.abandon(entry("r:1", 4, one)), AbandonReply::Released);
        assert!(s.holders().is_empty());
        for key in [0, 1] {
            assert_eq!(s.pttl(key), -2, "{}", s.keys.all[key]);
        }
        let meta = s.meta().unwrap();
        assert!(meta.contains(" r:1#4,w:1#3,"), "{meta}");
    }

    /// Holders with their units (a read's 1, a write's all), waiters with
    /// theirs, the last token, the bounds; whether all the units are held
    /// (a writer holds).
    [semaphore, rwlock]
    fn status_reports_holders_with_their_units_and_the_queue(k: LockKind) {
        let mut s = k.lock("status");
        let (one, all) = (k.one(3), k.all(3));
        let all_held = |st: &StatusReply| st.used >= u64::from(all.units());
        let empty = s.status(10, 10);
        assert_eq!(
            (empty.live_holds, all_held(&empty), empty.live_waiters, empty.last_token),
            (0, false, 0, 0)
        );
        let a = s.take("a:1", 1, one);
        let b = s.take("b:1", 2, one);
        s.queue("w:1", 3, all);
        s.queue("r:1", 4, one);
        let st = s.status(10, 10);
        assert_eq!(
            (st.live_holds, all_held(&st), st.live_waiters, st.last_token),
            (2, false, 2, b.token)
        );
        let listed: Vec<(&str, u64, u64, u64)> = st
            .holders
            .iter()
            .map(|h| (h.owner.as_str(), h.call.unwrap(), h.units, h.token))
            .collect();
        assert_eq!(listed, [("a:1", 1, 1, a.token), ("b:1", 2, 1, b.token)]);
        assert!(st
            .holders
            .iter()
            .all(|h| (59_000..=60_000).contains(&h.lease_left_ms.unwrap())));
        let waiters: Vec<(&str, u64)> = st
            .waiters
            .iter()
            .map(|w| (w.owner.as_str(), w.units))
            .collect();
        assert_eq!(waiters, [("w:1", u64::from(all.units())), ("r:1", 1)]);
        assert!(st
            .waiters
            .iter()
            .all(|w| (59_000..=60_000).contains(&w.liveness_left_ms)));
        // The bounds.
        let few = s.status(1, 1);
        assert_eq!((few.holders.len(), few.waiters.len()), (1, 1));
        assert_eq!((few.live_holds, few.live_waiters), (2, 2));
        let none = s.status(0, 0);
        assert!(none.holders.is_empty() && none.waiters.is_empty());
        // The head in: it holds alone, with the last token.
        s.release(&a);
        let w = s.handed(&b);
        let st = s.status(10, 10);
        assert_eq!(
            (st.live_holds, all_held(&st), st.live_waiters, st.last_token),
            (1, true, 1, w[0].token)
        );
        assert_eq!(
            (st.holders[0].owner.as_str(), st.holders[0].units),
            ("w:1", u64::from(all.units()))
        );
        // An expired hold is no holder.
        let r = s.handed(&w[0]);
        s.release(&r[0]);
        s.take_fixed("d:1", 5, all, SHORT);
        assert!(all_held(&s.status(10, 10)));
        sleep(SHORT + Duration::from_millis(50));
        let expired = s.status(10, 10);
        assert_eq!((expired.live_holds, all_held(&expired)), (0, false));
        assert!(expired.holders.is_empty());
    }

    /// Two holds of one unit freed at once; the head, asking for all, is
    /// admitted in the same step, alone; the calls behind it stay queued.
    [semaphore, rwlock]
    fn a_force_release_frees_every_hold_once_and_admits_the_head(k: LockKind) {
        let mut s = k.lock("force");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, one);
        let b = s.take("b:1", 2, one);
        s.queue("w:1", 3, all);
        s.queue("r1:1", 4, one);
        s.queue("r2:1", 5, one);
        let freed = s.force_release("f#1");
        assert_eq!((freed.holds, freed.holder), (2, None));
        assert_eq!(s.holders(), [format!("w:1 3 {}", all.units())]);
        assert_eq!(s.queued(), [queued("r1:1", 4, one), queued("r2:1", 5, one)]);
        assert!(s.status(10, 10).used >= u64::from(all.units()));
        // The same call again answers as the first and frees nothing more.
        let before = s.snapshot();
        assert_eq!(s.force_release("f#1").holds, 2);
        assert_eq!(s.snapshot(), before);
        // The old holds are gone: renewals and releases say so.
        for old in [&a, &b] {
            assert!(!s.renew(old, Some(LONG)), "{old:?}");
            assert_eq!(s.release(old), ReleaseReply::NotHeld, "{old:?}");
        }
        let w = s.hold_of("w:1", 3, all);
        assert_eq!(owners(&s.handed(&w)), ["r1:1", "r2:1"]);
        assert_eq!(s.force_release("f#2").holds, 2, "the two of one unit");
        // Nothing held: a forced release frees nothing.
        assert_eq!(s.force_release("f#3").holds, 0);
    }

    /// A fixed lease (no watchdog) ends by itself, the holders key with it:
    /// nobody has to call for its units to be free, and the next heartbeat
    /// of any waiter admits the head (and not a call behind it that does
    /// not fit); or the head's own poll takes its units, and lets in the
    /// calls behind it that fit in the same step; or the waiters' own
    /// heartbeats (queued before the lease ends) admit them together.
    [semaphore, rwlock]
    fn a_fixed_lease_runs_out_by_itself_and_a_heartbeat_or_a_poll_admits_the_head(
        k: LockKind,
    ) {
        let mut s = k.lock("fixed-lease");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take_fixed("a:1", 1, all, SHORT);
        assert_eq!(s.queue("w:1", 2, all), 0);
        assert_eq!(s.queue("x:1", 3, one), 1);
        sleep(SHORT + Duration::from_millis(50));
        assert!(s.holders().is_empty(), "the lease ran out");
        assert_eq!(s.pttl(0), -2, "the holders key ran out with it");
        let status = s.status(10, 10);
        assert_eq!(
            (status.live_holds, status.used, status.live_waiters),
            (0, 0, 2)
        );
        // X's heartbeat (not the head's): W's all admitted, X's one waits.
        let beat = s.heartbeat(LONG, &[entry("x:1", 3, one)]);
        assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);
        assert!(beat.last_token > a.token, "{beat:?}");
        assert!(beat.pttl_ms > 59_000, "W's lease: {}", beat.pttl_ms);
        let w = s.hold_of("w:1", 2, all);
        assert_eq!(s.holders(), [member(&w)]);
        assert_eq!(s.queued(), [queued("x:1", 3, one)]);
        assert_eq!(
            s.heartbeat(LONG, &[entry("w:1", 2, all)]).statuses,
            [WaiterStatus::Owns(beat.last_token)]
        );
        assert!(!s.renew(&a, Some(LONG)));
        assert_eq!(s.release(&a), ReleaseReply::NotHeld);
        // Again, with the head polling: Y's one and Z's one behind it.
        let handed: Vec<String> = s.handed(&w).iter().map(member).collect();
        assert_eq!(handed, ["x:1 3 1"]);
        let x = s.hold_of("x:1", 3, one);
        assert_eq!(s.release(&x), RELEASED);
        let b = s.take_fixed("b:1", 4, all, SHORT);
        assert_eq!(s.queue("y:1", 5, one), 0);
        assert_eq!(s.queue("z:1", 6, one), 1);
        sleep(SHORT + Duration::from_millis(50));
        let y = match s.attempt("y:1", 5, Mode::Poll, one) {
            AcquireReply::Acquired { token, .. } => token,
            other => panic!("{other:?}"),
        };
        assert!(y > b.token);
        assert_eq!(s.holders(), ["y:1 5 1", "z:1 6 1"], "Z entered with Y");
        assert!(s.queued().is_empty());
        match s.attempt("z:1", 6, Mode::Poll, one) {
            AcquireReply::Acquired { token, .. } => assert!(token > y, "{token} after {y}"),
            other => panic!("{other:?}"),
        }
        // Again, with the waiters beating: a heartbeat before the lease ends
        // keeps them queued; no release is ever sent for the fixed hold.
        for h in [s.hold_of("y:1", 5, one), s.hold_of("z:1", 6, one)] {
            assert_eq!(s.release(&h), RELEASED);
        }
        s.take_fixed("c:1", 7, all, SHORT);
        s.queue("r1:1", 8, one);
        s.queue("r2:1", 9, one);
        let waiters = [entry("r1:1", 8, one), entry("r2:1", 9, one)];
        let beat = s.heartbeat(LONG, &waiters);
        assert_eq!(
            beat.statuses,
            [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
        );
        sleep(SHORT + Duration::from_millis(50));
        let beat = s.heartbeat(LONG, &waiters);
        assert!(
            matches!(
                beat.statuses.as_slice(),
                [WaiterStatus::Owns(_), WaiterStatus::Owns(_)]
            ),
            "{beat:?}"
        );
        assert_eq!(s.holders(), ["r1:1 8 1", "r2:1 9 1"]);
        assert_eq!(s.meta_used(), Some(2));
    }

    /// A hold of all the units runs out (a dead holder) while calls for
    /// one unit wait: the head's poll admits it and the one right behind
    /// it; the call for all behind them waits.
    [semaphore, rwlock]
    fn a_head_that_polls_takes_the_calls_behind_it_that_fit_along(k: LockKind) {
        let mut s = k.lock("head-poll");
        let (one, all) = (k.one(2), k.all(2));
        let w = s.take("w:1", 1, all);
        assert_eq!(s.queue("r1:1", 2, one), 0);
        assert_eq!(s.queue("r2:1", 3, one), 1);
        assert_eq!(s.queue("x:1", 4, all), 2);
        // w's lease ends at Redis once all three wait (a fixed 150 ms one
        // ran out before the third queued, once, on a busy machine).
        let now = s.now_ms();
        s.set_lease_end(&member(&w), now - 10);
        assert!(matches!(
            s.attempt("r1:1", 2, Mode::Poll, one),
            AcquireReply::Acquired { .. }
        ));
        assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
        assert_eq!(s.queued(), [queued("x:1", 4, all)]);
    }

    /// Calls of the holds an ask of `slots` lets in at once (two permits,
    /// one write), with heartbeats, cancels and abandons in a mix: never
    /// more holds than fit, no unit free while a live waiter waits, and
    /// (checked after every step) every key keeps a TTL.
    [mutex, semaphore, rwlock, election]
    fn every_key_keeps_a_ttl_through_heartbeats_cancels_and_abandons_in_a_mix(k: LockKind) {
        let mut s = k.lock("ttl-mix");
        let (ask, n) = slots(k, 2);
        let mut rng = Lcg(0xbeef);
        let owners: Vec<String> = (0..6).map(|i| format!("c{i}:1")).collect();
        let mut calls: Vec<(usize, u64)> = Vec::new();
        for call in 1..=200u64 {
            let who = rng.below(owners.len() as u64) as usize;
            match rng.below(5) {
                0 | 1 => {
                    s.attempt(&owners[who], call, Mode::First, ask);
                    calls.push((who, call));
                }
                2 if !calls.is_empty() => {
                    let (w, c) = calls[rng.below(calls.len() as u64) as usize];
                    s.heartbeat(LONG, &[entry(&owners[w], c, ask)]);
                }
                3 if !calls.is_empty() => {
                    let (w, c) = calls.remove(rng.below(calls.len() as u64) as usize);
                    s.cancel(entry(&owners[w], c, ask));
                    s.abandon(entry(&owners[w], c, ask));
                }
                _ if !calls.is_empty() => {
                    let (w, c) = calls.remove(rng.below(calls.len() as u64) as usize);
                    s.abandon(entry(&owners[w], c, ask));
                }
                _ => {}
            }
            let status = s.status(100, 100);
            assert!(status.live_holds <= u64::from(n));
            assert!(
                status.live_waiters == 0 || available(&status) == 0,
                "{status:?}"
            );
        }
    }

    [semaphore, rwlock]
    fn a_hold_of_one_takes_one_unit_and_a_hold_of_all_every_unit(k: LockKind) {
        let mut s = k.lock("units");
        let (one, all) = (k.one(2), k.all(2));
        let a = s.take("a:1", 1, one);
        assert_eq!(s.meta_used(), Some(1));
        let b = s.take("b:1", 2, one);
        assert_eq!(s.meta_used(), Some(2));
        assert_eq!(s.holders(), ["a:1 1 1", "b:1 2 1"]);
        s.release(&a);
        assert_eq!(s.meta_used(), Some(1));
        s.release(&b);
        assert_eq!(s.meta_used(), Some(0));
        let w = s.take("w:1", 3, all);
        assert_eq!(s.holders(), [member(&w)]);
        assert_eq!(s.meta_used(), Some(u64::from(all.units())));
        let tokens = s.tokens();
        assert!(
            tokens == [(member(&w), w.token)]
                && s.member_of_token(w.token) == Some(member(&w)),
            "the hold and its token name each other: {tokens:?}"
        );
        s.release(&w);
        assert_eq!(s.meta_used(), Some(0));
    }
}

/// The commands `names`, each with how often it comes, as
/// [`commands_sent`] gives them.
fn counts(names: &[&str]) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = Vec::new();
    for &name in names {
        match counts.iter_mut().find(|(n, _)| n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name.to_owned(), 1)),
        }
    }
    counts.sort();
    counts
}

/// What `op` replied, run alone with the server's command counts reset
/// before it, and the commands its script sent (`INFO commandstats`),
/// sorted by name: the script's own call and the reset left out.
fn commands_sent<O: Operation>(
    s: &mut Lock,
    k: LockKind,
    op: &O,
) -> (O::Reply, Vec<(String, u64)>) {
    let (script, args) = (op.script(&s.keys), op.args_on(k));
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut s.conn)
        .unwrap();
    let reply = op.parse(s.eval(script, &args).unwrap()).unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut s.conn)
        .unwrap();
    let mut sent: Vec<(String, u64)> = info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(":calls="))
        .map(|(command, rest)| {
            (
                command.to_owned(),
                rest.split(',').next().unwrap().parse().unwrap(),
            )
        })
        // The script's own call, its SCRIPT LOAD when it is the first of
        // its script (eval_on) and the reset (Redis 6.2 counts CONFIG
        // RESETSTAT as "config", later servers as "config|resetstat").
        .filter(|(command, _)| {
            !["evalsha", "script", "config"].contains(&command.split('|').next().unwrap())
        })
        .collect();
    sent.sort();
    (reply, sent)
}

/// A waiter timeout whose twice passes what the anchor of a hold with a
/// lease of LONG covers, yet within it: a mutex's lock key lives the lease
/// and the fence life (660 s), and the queue may live that long; a counted
/// lock's meta outlives the queue by a fence life, so the queue may live
/// the lease (60 s).
fn long_waiter_timeout(k: LockKind) -> Duration {
    match k {
        LockKind::Mutex | LockKind::Election => fairlock::DEFAULT_FENCE_LIFE,
        _ => Duration::from_secs(45),
    }
}

/// The anchor's place in the lock's keys (a mutex's lock key, a counted
/// lock's meta), its value and its PTTL.
fn anchor_of(s: &mut Lock) -> (usize, String, i64) {
    let anchor = match s.kind() {
        LockKind::Mutex | LockKind::Election => 0,
        _ => 2,
    };
    let value: String = s.conn.get(&s.keys.all[anchor]).unwrap();
    (anchor, value, s.pttl(anchor))
}

/// The anchor holds `value` still and lives no longer than the `ttl` it
/// had, and the queue lives past a deadline `timeout` from now (within a
/// second of this check) but within what the anchor covers: its TTL, less
/// a fence life on a counted lock.
fn assert_queue_within_anchor(
    s: &mut Lock,
    timeout: Duration,
    anchor: usize,
    value: &str,
    ttl: i64,
) {
    let after: String = s.conn.get(&s.keys.all[anchor]).unwrap();
    assert_eq!(after, value, "the anchor is as it was");
    let (anchor_ttl, queue_ttl) = (s.pttl(anchor), s.pttl(1));
    let covered = if anchor == 0 {
        anchor_ttl
    } else {
        anchor_ttl - fairlock::DEFAULT_FENCE_LIFE.as_millis() as i64
    };
    // (A few ms for a PX counted from a later clock reading than its PTTL.)
    assert!(
        anchor_ttl <= ttl + 10,
        "the anchor grew: {anchor_ttl} ms, {ttl} before"
    );
    assert!(
        queue_ttl >= timeout.as_millis() as i64 - 1000 && queue_ttl <= covered,
        "the queue lives {queue_ttl} ms, the anchor covers {covered} ms"
    );
}

per_kind! {
    /// A lock whose anchor is another format's (its format word raised by
    /// one, the rest as this build wrote it: what a build that differs by
    /// its format alone writes), with a hold, a waiter whose client stopped
    /// beating and a live one queued (and with a hold alone, and free):
    /// every script this build sends, a
    /// heartbeat and set_permits too, is refused with `FormatMismatch`
    /// before any write (docs/compatibility.md), the other format's queue
    /// left as it was, its dead entry in it.
    [mutex, semaphore, rwlock, election]
    fn every_script_refuses_another_formats_lock_before_any_write(k: LockKind) {
        use fairlock::__test_support::Revoke;
        let (one, all) = (k.one(2), k.all(2));
        // A hold with waiters queued; a hold alone (the fast paths); a
        // free lock.
        for state in ["queued", "alone", "free"] {
            let mut s = k.lock("other-format");
            let a = s.take("a:1", 1, all);
            if state == "queued" {
                s.queue("d:1", 2, one);
                s.queue("w:1", 3, one);
                let queue = s.keys.all[1].clone();
                let dead = queued("d:1", 2, one);
                let () = s.conn.zadd(&queue, format!("~{dead}"), DEADLINE_BASE).unwrap();
            } else if state == "free" {
                s.release(&a);
            }
            let anchor = match k {
                LockKind::Mutex | LockKind::Election => s.keys.all[0].clone(),
                _ => s.keys.all[2].clone(),
            };
            let value: String = s.conn.get(&anchor).unwrap();
            let rest = value
                .strip_prefix(&format!("v{} ", fairlock::DATA_FORMAT))
                .unwrap_or_else(|| panic!("{value}"));
            let () = redis::cmd("SET")
                .arg(&anchor)
                .arg(format!("v{} {rest}", fairlock::DATA_FORMAT + 1))
                .arg("KEEPTTL")
                .query(&mut s.conn)
                .unwrap();
            let before = s.snapshot();
            let mut results: Vec<(&str, fairlock::Result<()>)> = Vec::new();
            // The calls that wrote, each seen by the keys it changed.
            let (last, mut writers) = (before.clone(), Vec::new());
            let ttls: Vec<i64> = before.iter().map(|(key, _)| s.conn.pttl(key).unwrap()).collect();
            type Keys = [(String, Option<Vec<u8>>)];
            fn wrote(
                s: &mut Lock,
                ttls: &[i64],
                last: &Keys,
                writers: &mut Vec<String>,
                what: &str,
            ) {
                let now = s.snapshot();
                if now != *last {
                    // Put back what it changed, for the next call.
                    writers.push(what.to_owned());
                    for ((key, dump), ttl) in last.iter().zip(ttls) {
                        let ttl = *ttl;
                        let dump = dump.as_ref().unwrap();
                        let () = redis::cmd("RESTORE")
                            .arg(key)
                            .arg(ttl)
                            .arg(&dump[..])
                            .arg("REPLACE")
                            .query(&mut s.conn)
                            .unwrap();
                    }
                }
            }
            let beat = Heartbeat {
                waiter_timeout: LONG,
                waiters: vec![entry("w:1", 3, one)],
            };
            results.push(("heartbeat", s.run(&beat).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let lease = Lease::Renewed(LONG);
            let take = s.attempt_with("n:1", 9, Mode::First, one, 0, lease);
            results.push(("acquire", take.map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let poll = s.attempt_with("w:1", 3, Mode::Poll, one, 0, lease);
            results.push(("poll", poll.map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let release = Release {
                owner: &a.owner,
                token: a.token,
                call: a.call,
                vouched_until: None,
            };
            results.push(("release", s.run(&release).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let renew = Renew {
                owner: &a.owner,
                token: a.token,
                first: a.token,
                call: a.call,
                lease: None,
            };
            results.push(("renew", s.run(&renew).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let cancel = Cancel {
                entry: entry("w:1", 3, one),
            };
            results.push(("cancel", s.run(&cancel).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let abandon = Abandon {
                entry: entry("w:1", 3, one),
            };
            results.push(("abandon", s.run(&abandon).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let force = ForceRelease {
                call_key: "f:1#1".to_owned(),
            };
            results.push(("force release", s.run(&force).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let revoke = Revoke {
                call_key: "r:1#1".to_owned(),
            };
            results.push(("revoke", s.run(&revoke).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            let status = Status {
                kind: k,
                waiters: 10,
                holders: 10,
            };
            results.push(("status", s.run(&status).map(drop)));
            wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            if k == LockKind::RwLock {
                for step in [UpgradeStep::Attempt(Mode::First), UpgradeStep::Withdraw] {
                    let upgrade = Upgrade {
                        owner: &a.owner,
                        token: a.token,
                        call: a.call,
                        lease,
                        waiter_timeout: LONG,
                        step,
                    };
                    results.push(("upgrade", s.run(&upgrade).map(drop)));
                    wrote(&mut s, &ttls, &last, &mut writers, "upgrade");
                }
                let downgrade = Downgrade {
                    owner: &a.owner,
                    token: a.token,
                    call: a.call,
                    to: Access::Read,
                };
                results.push(("downgrade", s.run(&downgrade).map(drop)));
                wrote(&mut s, &ttls, &last, &mut writers, "downgrade");
            }
            if k == LockKind::Semaphore {
                results.push(("set_permits", s.run(&SetPermits { permits: 3 }).map(drop)));
                wrote(&mut s, &ttls, &last, &mut writers, results.last().unwrap().0);
            }
            let wrong: Vec<String> = results
                .iter()
                .filter(|(_, r)| {
                    !matches!(r, Err(e) if e.kind() == fairlock::ErrorKind::FormatMismatch)
                })
                .map(|(what, r)| format!("{what}: {r:?}"))
                .collect();
            assert!(wrong.is_empty(), "{state}: not refused: {wrong:#?}");
            assert!(
                writers.is_empty(),
                "{state}: the other format's keys were written by {writers:?}"
            );
        }
    }
}

per_kind! {
    /// Each fast path sends the commands its script's header names
    /// (lua/mutex/, lua/counted/; docs/performance.md), counted by the
    /// server (`INFO commandstats`): the take of a free lock, its key gone
    /// and not, GET and SET (TIME and EXISTS too when the key is gone, and
    /// the counted engine's ZRANGEBYSCORE); a release with nobody waiting
    /// GET and SET (a PTTL first when checked); a handoff GET, ZPOPMIN,
    /// TIME, ZSCORE, ZREM, the queue's PTTL, SET and PUBLISH; the first
    /// release after it, nobody queued since, GET, ZPOPMIN and SET; a
    /// renewal of a lone hold GET, PTTL and a write (the counted engine's
    /// TIME too), a write even when it keeps the lease as it is (so that a
    /// WAIT after it covers the handoff that made the hold: sync_replicas
    /// with a fixed lease). An election's scripts add their announcement to each
    /// path that grants or frees: PUBLISH, LPUSH, LTRIM and PEXPIRE.
    [mutex, semaphore, rwlock, election]
    fn each_fast_path_sends_the_commands_its_header_names(k: LockKind) {
        let mut s = k.lock("fast-paths");
        let (ask, _) = slots(k, 1);
        let counted = matches!(k, LockKind::Semaphore | LockKind::RwLock);
        let want = |names: &[&str], announced: bool| {
            let mut names = names.to_vec();
            if announced && k == LockKind::Election {
                names.extend(["publish", "lpush", "ltrim", "pexpire"]);
            }
            counts(&names)
        };
        let take = |call: u64| Acquire {
            ask,
            owner: "a:1",
            lease: Lease::Renewed(LONG),
            waiter_timeout: LONG,
            mode: Mode::First,
            call,
            live_token: 0,
        };
        let release = |h: &Hold, checked: bool| Release {
            owner: "a:1",
            token: h.token,
            call: h.call,
            vouched_until: (!checked).then(|| Instant::now() + LONG),
        };
        let gone: &[&str] = if counted {
            &["get", "set", "time", "exists", "zrangebyscore"]
        } else {
            &["get", "set", "time", "exists"]
        };
        let sent = commands_sent(&mut s, k, &take(1)).1;
        assert_eq!(sent, want(gone, true), "the take, its key gone");
        let a = s.hold_of("a:1", 1, ask);
        let (token, lease) = (a.token, Some(LONG));
        let renew = Renew { owner: "a:1", token, first: token, call: 1, lease };
        let renewal: &[&str] =
            if counted { &["get", "time", "pttl", "set"] } else { &["get", "pttl", "pexpire"] };
        assert_eq!(commands_sent(&mut s, k, &renew).1, want(renewal, false), "the renewal");
        let rewrite = Renew { lease: None, ..renew };
        let rewritten: &[&str] =
            if counted { &["get", "time", "pttl", "set"] } else { &["get", "pttl", "set"] };
        let sent = commands_sent(&mut s, k, &rewrite).1;
        assert_eq!(sent, want(rewritten, false), "the renewal that keeps the lease");
        let sent = commands_sent(&mut s, k, &release(&a, false)).1;
        assert_eq!(sent, want(&["get", "set"], true), "the release");
        assert_eq!(commands_sent(&mut s, k, &take(2)).1, want(&["get", "set"], true), "the take");
        let a = s.hold_of("a:1", 2, ask);
        assert_eq!(
            commands_sent(&mut s, k, &release(&a, true)).1,
            want(&["get", "pttl", "set"], true),
            "the release checked"
        );
        let a = s.take("a:1", 3, ask);
        assert_eq!(s.queue("b:1", 4, ask), 0);
        let handoff = ["get", "zpopmin", "time", "zscore", "zrem", "pttl", "set", "publish"];
        let sent = commands_sent(&mut s, k, &release(&a, false)).1;
        assert_eq!(sent, want(&handoff, true), "the handoff");
        let b = s.hold_of("b:1", 4, ask);
        let after = Release { owner: "b:1", ..release(&b, false) };
        assert_eq!(
            commands_sent(&mut s, k, &after).1,
            want(&["get", "zpopmin", "set"], true),
            "the release after the handoff"
        );
        if !counted {
            return;
        }
        // Units of three: a take beside a lone hold, which moves into the
        // holders zset with it, and beside two; the release of one of them.
        let (one, mut s) = (k.one(3), k.lock("fast-paths-shared"));
        let beside = |owner, call| Acquire { ask: one, owner, call, ..take(0) };
        let x = s.take("x:1", 5, one);
        let shared = ["get", "pttl", "time", "zadd", "pexpire", "set"];
        let sent = commands_sent(&mut s, k, &beside("y:1", 6)).1;
        assert_eq!(sent, want(&shared, false), "beside one");
        let sent = commands_sent(&mut s, k, &beside("z:1", 7)).1;
        assert_eq!(sent, want(&shared, false), "beside two");
        let of_three = Release { owner: "x:1", ..release(&x, false) };
        let freed = ["get", "time", "zrangebyscore", "zscore", "zrem", "set"];
        assert_eq!(commands_sent(&mut s, k, &of_three).1, want(&freed, false), "one of three");
    }
}

per_kind! {
    /// A counted call that queues sends the commands
    /// lua/counted/acquire.lua's header names: behind a lone hold, with
    /// nobody waiting, GET, PTTL, TIME, ZADD, PEXPIRE and a SET of the meta
    /// (the header said "its four" where ZADD and PEXPIRE are two); beside
    /// two holds EXISTS, ZSCORE and two ZRANGEBYSCOREs more, two ZSCOREs
    /// more again for a write's call (the header named no EXISTS, and one
    /// ZSCORE); a read that fits behind a queued write GET, PTTL, TIME,
    /// EXISTS, ZRANGE, ZSCORE and join_queue's ZCARD, ZRANGE, ZADD and PTTL
    /// (the header named no PTTL of the meta), beside two reads the holders
    /// read in place of that PTTL.
    [semaphore, rwlock]
    fn a_counted_call_that_queues_sends_the_commands_its_header_names(k: LockKind) {
        let (one, all) = (k.one(2), k.all(2));
        let arrival = |owner, call, ask| Acquire {
            ask,
            owner,
            lease: Lease::Renewed(LONG),
            waiter_timeout: LONG,
            mode: Mode::First,
            call,
            live_token: 0,
        };
        let alone = ["get", "pttl", "time", "zadd", "pexpire", "set"];
        let holders = ["exists", "zscore", "zrangebyscore", "zrangebyscore"];
        let forms: &[&str] = if k == LockKind::RwLock { &["zscore", "zscore"] } else { &[] };
        let mut s = k.lock("queues-behind-one");
        s.take("a:1", 1, one);
        let sent = commands_sent(&mut s, k, &arrival("b:1", 2, all)).1;
        assert_eq!(sent, counts(&alone), "behind one");
        let joined = ["zcard", "zrange", "zadd", "pttl"];
        if k == LockKind::RwLock {
            let behind = ["get", "pttl", "time", "exists", "zrange", "zscore"];
            let want = counts(&[&behind[..], &joined].concat());
            let sent = commands_sent(&mut s, k, &arrival("c:1", 3, one)).1;
            assert_eq!(sent, want, "a read behind a write");
        }
        let mut s = k.lock("queues-behind-two");
        s.take("a:1", 1, one);
        s.take("b:1", 2, one);
        let want = counts(&[&alone[..], &holders, forms].concat());
        let sent = commands_sent(&mut s, k, &arrival("c:1", 3, all)).1;
        assert_eq!(sent, want, "behind two");
        if k == LockKind::RwLock {
            let no_pttl = ["get", "time", "exists", "zrange", "zscore"];
            let want = counts(&[&no_pttl[..], &joined, &holders].concat());
            let sent = commands_sent(&mut s, k, &arrival("d:1", 4, one)).1;
            assert_eq!(sent, want, "a read behind a write, beside two reads");
        }
    }
}
