//! The rwlock's own scenarios (the counted engine: a read takes 1 unit of
//! RW_CAPACITY, a write all of them): readers share, a writer waits for the
//! readers ahead of it and then holds alone, a reader behind a queued
//! writer waits, consecutive readers at the head enter together, re-entry
//! (read in read, read in write, write in write granted; read -> write
//! refused, nothing written) and its tokens, every call delivered again
//! after each upgrade and downgrade of its hold answering with that hold
//! and taking no second one, a long random mix against a
//! model of readers shared, writers alone and FIFO, and the ACL user of
//! docs/security.md running every script, each path that writes.

use super::driver::*;
use Access::{Read, Write};

fn rw(name: &str) -> Lock {
    Lock::new(LockKind::RwLock, name)
}

#[test]
fn readers_share() {
    let mut s = rw("share");
    let a = s.take("a:1", 1, READ);
    let b = s.take("b:1", 2, READ);
    let c = s.take("c:1", 3, READ);
    assert!(a.token < b.token && b.token < c.token);
    assert_eq!(s.holders(), ["a:1 1 1", "b:1 2 1", "c:1 3 1"]);
    assert!(s.writers().is_empty());
    // A try reader enters too: no writer holds or waits.
    assert!(matches!(
        s.attempt("d:1", 4, Mode::Try, READ),
        AcquireReply::Acquired { .. }
    ));
    assert_eq!(s.holders().len(), 4);
}

/// A read's or a write's release delivered again after another release
/// came in between is answered as the first was, not as a lease lost.
#[test]
fn a_release_delivered_again_after_another_release_counts_once() {
    let mut s = rw("release-again");
    let a = s.take("a:1", 1, READ);
    let b = s.take("b:1", 2, READ);
    s.queue("w:1", 3, WRITE);
    assert_eq!(s.release(&a), RELEASED);
    let w = s.handed(&b);
    assert_eq!(owners(&w), ["w:1"]);
    assert_eq!(s.release(&a), RELEASED, "a's repeat after b's release");
    s.queue("r:1", 4, READ);
    let r = s.handed(&w[0]);
    assert_eq!(owners(&r), ["r:1"]);
    assert_eq!(
        s.release(&b),
        RELEASED,
        "b's repeat after the write's release"
    );
    let _q = s.take("q:1", 5, READ);
    assert_eq!(s.release(&r[0]), RELEASED);
    assert_eq!(
        s.release(&w[0]),
        RELEASED,
        "the write's repeat after r's release"
    );
    assert_eq!(s.holders(), ["q:1 5 1"]);
}

#[test]
fn a_writer_waits_for_the_readers_ahead_then_excludes_all() {
    let mut s = rw("writer");
    let a = s.take("a:1", 1, READ);
    let b = s.take("b:1", 2, READ);
    assert_eq!(s.queue("w:1", 3, WRITE), 0);
    // A try writer neither enters nor queues.
    assert!(matches!(
        s.attempt("t:1", 9, Mode::Try, WRITE),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert!(s.handed(&a).is_empty(), "a reader still holds");
    assert_eq!(s.holders(), ["b:1 2 1"]);
    let w = s.handed(&b);
    assert_eq!(owners(&w), ["w:1"]);
    assert!(w[0].token > b.token);
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    assert_eq!(s.writers(), ["w:1 3 4294967295"]);
    // While it holds, nobody else enters: readers and writers queue, a try
    // of either gets nothing.
    for (owner, call, access) in [("r:1", 4, Read), ("x:1", 5, Write)] {
        assert!(matches!(
            s.attempt(owner, call, Mode::Try, Ask::RwLock(access)),
            AcquireReply::Waiting { position: None, .. }
        ));
    }
    assert_eq!(s.queue("r:1", 4, READ), 0);
    assert_eq!(s.queue("x:1", 5, WRITE), 1);
    assert_eq!(s.holders(), ["w:1 3 4294967295"]);
    // Its poll finds its hold.
    match s.attempt("w:1", 3, Mode::Poll, WRITE) {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, w[0].token),
        other => panic!("{other:?}"),
    }
    // Released: the reader enters, the writer behind it waits for it.
    let r = s.handed(&w[0]);
    assert_eq!(owners(&r), ["r:1"]);
    assert_eq!(s.holders(), ["r:1 4 1"]);
    let x = s.handed(&r[0]);
    assert_eq!(owners(&x), ["x:1"]);
    assert_eq!(s.holders(), ["x:1 5 4294967295"]);
    assert_eq!(s.release(&x[0]), ReleaseReply::Released { left: 0 });
    assert!(s.holders().is_empty() && s.queued().is_empty());
}

#[test]
fn a_reader_behind_a_queued_writer_waits() {
    let mut s = rw("reader-behind");
    let a = s.take("a:1", 1, READ);
    assert_eq!(s.queue("w:1", 2, WRITE), 0);
    // Only readers hold, but a writer is queued: a new reader queues
    // behind it, and a try reader gets nothing.
    assert!(matches!(
        s.attempt("t:1", 8, Mode::Try, READ),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert_eq!(s.queue("r:1", 3, READ), 1);
    assert!(matches!(
        s.attempt("r:1", 3, Mode::Poll, READ),
        AcquireReply::Waiting {
            position: Some(1),
            ..
        }
    ));
    assert_eq!(s.holders(), ["a:1 1 1"]);
    let w = s.handed(&a);
    assert_eq!(owners(&w), ["w:1"]);
    let r = s.handed(&w[0]);
    assert_eq!(owners(&r), ["r:1"]);
}

#[test]
fn consecutive_readers_at_the_head_enter_together() {
    let mut s = rw("reader-run");
    let w = s.take("w:1", 1, WRITE);
    for (i, (owner, access)) in [
        ("r1:1", Read),
        ("r2:1", Read),
        ("r3:1", Read),
        ("x:1", Write),
        ("r4:1", Read),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(s.queue(owner, 10 + i as u64, Ask::RwLock(access)), i as u64);
    }
    let mut sub = s.server.conn();
    let mut pubsub = subscribe(&mut sub);
    let run = s.handed(&w);
    assert_eq!(owners(&run), ["r1:1", "r2:1", "r3:1"]);
    assert!(run.windows(2).all(|p| p[0].token < p[1].token));
    assert!(run[0].token > w.token);
    assert_eq!(s.holders(), ["r1:1 10 1", "r2:1 11 1", "r3:1 12 1"]);
    // Each reader heard its grant; the writer, now heading the queue, hears
    // nothing (its client's heartbeat tells it).
    for (hold, channel) in run.iter().zip(["r1", "r2", "r3"]) {
        let (got, payload) = message(&mut pubsub);
        assert_eq!(got, format!("fairlock:wake:{channel}"));
        assert!(
            payload.starts_with(&format!("G {} {} ", hold.call, hold.token)),
            "{payload}"
        );
    }
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    assert!(pubsub.get_message().is_err(), "a message after the grants");
    // r4 stays behind the writer; the writer enters once all three left.
    assert!(s.handed(&run[0]).is_empty());
    assert!(s.handed(&run[1]).is_empty());
    let x = s.handed(&run[2]);
    assert_eq!(owners(&x), ["x:1"]);
    let r4 = s.handed(&x[0]);
    assert_eq!(owners(&r4), ["r4:1"]);
}

#[test]
fn reentry_read_in_read_read_in_write_write_in_write_granted() {
    let mut s = rw("reentry");
    // Read in read, even past a queued writer.
    let a = s.take("a:1", 1, READ);
    assert_eq!(s.queue("w:1", 2, WRITE), 0);
    let a2 = s.take_with("a:1", 3, READ, a.token);
    assert!(a2.token > a.token);
    assert_eq!(s.holders(), ["a:1 1 1", "a:1 3 1"]);
    // Another owner's guard token is no guard: that reader queues.
    assert_eq!(
        match s
            .attempt_with("b:1", 4, Mode::First, READ, a.token, Lease::Renewed(LONG))
            .unwrap()
        {
            AcquireReply::Waiting { position, .. } => position,
            other => panic!("{other:?}"),
        },
        Some(1)
    );
    assert!(s.handed(&a).is_empty());
    let w = s.handed(&a2);
    assert_eq!(owners(&w), ["w:1"]);
    // Read in write and write in write, past the queued reader b.
    let w = w[0].clone();
    let r = s.take_with("w:1", 5, READ, w.token);
    let ww = s.take_with("w:1", 6, WRITE, w.token);
    assert!(w.token < r.token && r.token < ww.token);
    assert_eq!(
        s.holders(),
        ["w:1 2 4294967295", "w:1 5 1", "w:1 6 4294967295"]
    );
    assert_eq!(s.writers(), ["w:1 2 4294967295", "w:1 6 4294967295"]);
    // A repeat of the re-entry call answers with its hold.
    match s
        .attempt_with("w:1", 6, Mode::First, WRITE, w.token, Lease::Renewed(LONG))
        .unwrap()
    {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, ww.token),
        other => panic!("{other:?}"),
    }
    // The reader b enters only once every write hold is gone.
    assert!(s.handed(&ww).is_empty());
    let b = s.handed(&w);
    assert_eq!(owners(&b), ["b:1"]);
    assert_eq!(s.holders(), ["b:1 4 1", "w:1 5 1"]);
}

#[test]
fn read_to_write_is_refused_and_writes_nothing() {
    let mut s = rw("upgrade");
    let a = s.take("a:1", 1, READ);
    s.queue("w:1", 2, WRITE);
    let before = s.snapshot();
    let err = s
        .attempt_with("a:1", 3, Mode::First, WRITE, a.token, Lease::Renewed(LONG))
        .unwrap_err();
    let text = chain(&err);
    assert!(text.contains("FAIRLOCK_UPGRADE_REFUSED"), "{text}");
    assert!(text.contains("a:1"), "{text}");
    assert_eq!(s.snapshot(), before, "nothing written");
    // A try is refused the same way.
    assert!(s
        .attempt_with("a:1", 4, Mode::Try, WRITE, a.token, Lease::Renewed(LONG))
        .is_err());
    assert_eq!(s.snapshot(), before, "nothing written");
    // Without the guard it is no re-entry: it queues behind the writer
    // (the client's rule is to send its guard).
    assert_eq!(s.queue("a:1", 5, WRITE), 1);
    assert_eq!(s.holders(), ["a:1 1 1"]);
}

#[test]
fn tokens_strictly_increase_across_takes_handoffs_and_reentries() {
    let mut s = rw("tokens");
    let mut tokens = Vec::new();
    let a = s.take("a:1", 1, READ);
    tokens.push(a.token);
    let b = s.take("b:1", 2, READ);
    tokens.push(b.token);
    s.queue("w:1", 3, WRITE);
    s.queue("r:1", 4, READ);
    s.queue("q:1", 5, READ);
    tokens.push(s.take_with("a:1", 6, READ, a.token).token);
    s.handed(&a);
    s.release(&hold("a:1", 6, READ, tokens[2]));
    let w = s.handed(&b);
    tokens.push(w[0].token);
    tokens.push(s.take_with("w:1", 7, WRITE, w[0].token).token);
    s.release(&hold("w:1", 7, WRITE, tokens[4]));
    let run = s.handed(&w[0]);
    assert_eq!(run.len(), 2);
    tokens.extend(run.iter().map(|h| h.token));
    for h in &run {
        s.release(h);
    }
    tokens.push(s.take("z:1", 8, WRITE).token);
    assert!(
        tokens.windows(2).all(|p| p[0] < p[1]),
        "tokens in order of issue: {tokens:?}"
    );
    // The meta keeps the last one ("<capacity> <used> <last token>...",
    // or with a lone hold "<capacity> <its token> ...": the last).
    let meta = s.meta().unwrap();
    let at = if s.lone().is_some() { 1 } else { 2 };
    assert_eq!(
        meta.split(' ').nth(at),
        Some(tokens.last().unwrap().to_string().as_str()),
        "{meta}"
    );
}

/// The model's waiters the lock can take, admitted as the scripts admit
/// them (a writer alone when nobody holds, readers while no writer holds),
/// their tokens read back and checked to increase.
fn admit_model(
    s: &mut Lock,
    held: &mut Vec<(Hold, Access)>,
    queue: &mut Vec<(String, u64, Access)>,
    last_token: &mut u64,
) {
    while let Some((_, _, access)) = queue.first() {
        let writer = held.iter().any(|(_, a)| *a == Write);
        let admits = match access {
            Write => held.is_empty(),
            Read => !writer,
            other => unreachable!("a rwlock's access is a read or a write: {other:?}"),
        };
        if !admits {
            break;
        }
        let (owner, call, access) = queue.remove(0);
        let token = s.token_of(&format!("{owner} {call} {}", Ask::RwLock(access).units()));
        assert!(token > *last_token, "{token} after {last_token}");
        *last_token = token;
        held.push((hold(&owner, call, Ask::RwLock(access), token), access));
    }
}

#[test]
fn a_random_mix_keeps_readers_shared_writers_alone_and_fifo() {
    let mut s = rw("mix");
    let mut rng = Lcg(14);
    let mut held: Vec<(Hold, Access)> = Vec::new();
    // The model's queue: (owner, call, access).
    let mut queue: Vec<(String, u64, Access)> = Vec::new();
    let mut last_token = 0;
    for step in 0..200u64 {
        let call = 100 + step;
        let owner = format!("o{}:1", step % 13);
        let op = rng.below(8);
        if op < 4 || held.is_empty() {
            let access = if rng.below(3) == 0 { Write } else { Read };
            if held.iter().any(|(h, _)| h.owner == owner) || queue.iter().any(|q| q.0 == owner) {
                continue; // one thing at a time per thread
            }
            match s.attempt(&owner, call, Mode::First, Ask::RwLock(access)) {
                AcquireReply::Acquired { token, .. } => {
                    assert!(queue.is_empty(), "step {step}: entered past a waiter");
                    assert!(token > last_token);
                    last_token = token;
                    held.push((hold(&owner, call, Ask::RwLock(access), token), access));
                }
                AcquireReply::Waiting { position, .. } => {
                    assert_eq!(position, Some(queue.len() as u64), "step {step}");
                    queue.push((owner, call, access));
                }
            }
        } else if op < 6 {
            let k = rng.below(held.len() as u64) as usize;
            let (hold, _) = held.remove(k);
            let handed = s.handed(&hold);
            for grant in handed {
                let (owner, call, access) = queue.remove(0);
                assert_eq!((grant.owner.as_str(), grant.call), (owner.as_str(), call));
                assert!(grant.token > last_token);
                last_token = grant.token;
                held.push((grant, access));
            }
        } else if op == 6 {
            // A heartbeat of every waiter and of one holder: each waiter
            // keeps its place, the holder learns it holds, nobody enters.
            let k = rng.below(held.len() as u64) as usize;
            let mut beaten: Vec<QueueEntry> = queue
                .iter()
                .map(|(o, c, a)| entry(o, *c, Ask::RwLock(*a)))
                .collect();
            beaten.push(entry(
                &held[k].0.owner,
                held[k].0.call,
                Ask::RwLock(held[k].1),
            ));
            let mut want: Vec<WaiterStatus> =
                (0..queue.len() as u64).map(WaiterStatus::Queued).collect();
            want.push(WaiterStatus::Owns(held[k].0.token));
            let beat = s.heartbeat(LONG, &beaten);
            assert_eq!(beat.statuses, want, "step {step}");
            assert_eq!(beat.last_token, last_token, "step {step}");
        } else if !queue.is_empty() && rng.below(2) == 0 {
            // A waiter cancels (or is given back): the waiters its leaving
            // unblocks enter.
            let k = rng.below(queue.len() as u64) as usize;
            let (owner, call, access) = queue.remove(k);
            if rng.below(2) == 0 {
                assert_eq!(
                    s.cancel(entry(&owner, call, Ask::RwLock(access))),
                    CancelReply::Left,
                    "step {step}"
                );
            } else {
                assert_eq!(
                    s.abandon(entry(&owner, call, Ask::RwLock(access))),
                    AbandonReply::LeftQueue,
                    "step {step}"
                );
            }
            admit_model(&mut s, &mut held, &mut queue, &mut last_token);
        } else {
            // A holder's cancel gives its hold back (as its abandon would),
            // once, and the release it could not send answers released.
            let k = rng.below(held.len() as u64) as usize;
            let (hold, access) = held[k].clone();
            let e = entry(&hold.owner, hold.call, Ask::RwLock(access));
            assert_eq!(s.cancel(e), CancelReply::GivenBack, "step {step}");
            held.remove(k);
            assert_eq!(s.abandon(e), AbandonReply::Nothing, "step {step}");
            assert_eq!(
                s.release(&hold),
                ReleaseReply::Released { left: 0 },
                "step {step}"
            );
            admit_model(&mut s, &mut held, &mut queue, &mut last_token);
        }
        // Readers share, a writer holds alone, and the head waits only
        // because the lock cannot admit it.
        let writers = held.iter().filter(|(_, a)| *a == Write).count();
        assert!(writers == 0 || held.len() == 1, "step {step}: {held:?}");
        if let Some((_, _, head)) = queue.first() {
            match head {
                Write => assert!(!held.is_empty(), "step {step}"),
                Read => assert!(writers > 0, "step {step}"),
                other => unreachable!("a rwlock's access is a read or a write: {other:?}"),
            }
        }
        let mut model: Vec<String> = held
            .iter()
            .map(|(h, a)| format!("{} {} {}", h.owner, h.call, Ask::RwLock(*a).units()))
            .collect();
        model.sort();
        assert_eq!(s.holders(), model, "step {step}");
    }
}

#[test]
fn the_readme_acl_user_runs_every_rwlock_script() {
    let mut s = rw("acl");
    s.as_acl_user("rw-pw");
    // Every path that writes: takes, re-entries, a refusal, queueing, an
    // expired hold dropped, renewals, handoffs to a writer and to a run of
    // readers, a repeated release.
    let short = s
        .attempt_with("e:1", 1, Mode::First, READ, 0, Lease::Fixed(SHORT))
        .unwrap();
    assert!(matches!(short, AcquireReply::Acquired { .. }));
    let a = s.take("a:1", 2, READ);
    s.take_with("a:1", 3, READ, a.token);
    assert!(s
        .attempt_with("a:1", 4, Mode::First, WRITE, a.token, Lease::Renewed(LONG))
        .is_err());
    assert_eq!(s.queue("w:1", 5, WRITE), 0);
    assert_eq!(s.queue("r:1", 6, READ), 1);
    assert_eq!(s.queue("q:1", 7, READ), 2);
    sleep(SHORT * 2);
    assert!(s.renew(&a, Some(LONG)));
    assert!(s.renew(&a, None));
    assert!(s.handed(&a).is_empty());
    let a3 = s.token_of("a:1 3 1");
    let w = s.handed(&hold("a:1", 3, READ, a3));
    assert_eq!(owners(&w), ["w:1"]);
    assert!(s.renew(&w[0], Some(LONG)));
    let run = s.handed(&w[0]);
    assert_eq!(owners(&run), ["r:1", "q:1"]);
    assert_eq!(s.release(&w[0]), ReleaseReply::Released { left: 0 });
    for h in &run {
        s.release(h);
    }
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

#[test]
fn the_readme_acl_user_runs_the_heartbeat_cancel_abandon_and_status_scripts() {
    let mut s = rw("acl-2");
    s.as_acl_user("rw-pw");
    // Each path that writes: a heartbeat that admits a run of readers past
    // an expired writer (its token dropped) and keeps a queued one, one
    // that keeps a handed write lease, a cancel that keeps a hold and one
    // that leaves and lets readers in, abandons of a hold (with and without
    // waiters) and of a queue entry, a status listing both.
    let short = s
        .attempt_with("e:1", 1, Mode::First, WRITE, 0, Lease::Fixed(SHORT))
        .unwrap();
    assert!(matches!(short, AcquireReply::Acquired { .. }));
    s.queue("r1:1", 2, READ);
    s.queue("r2:1", 3, READ);
    s.queue("w:1", 4, WRITE);
    s.queue("r3:1", 5, READ);
    sleep(SHORT * 2);
    let beat = s.heartbeat(LONG, &[entry("w:1", 4, WRITE), entry("r3:1", 5, READ)]);
    assert_eq!(
        beat.statuses,
        [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
    );
    assert_eq!(s.holders(), ["r1:1 2 1", "r2:1 3 1"]);
    let status = s.status(10, 10);
    assert_eq!((status.holders.len(), status.waiters.len()), (2, 2));
    assert_eq!(s.abandon(entry("r1:1", 2, READ)), AbandonReply::Released);
    assert_eq!(s.cancel(entry("r3:1", 5, READ)), CancelReply::Left);
    s.queue("r4:1", 6, READ);
    // The writer at the head leaves: r4 enters beside r2.
    assert_eq!(s.cancel(entry("w:1", 4, WRITE)), CancelReply::Left);
    assert_eq!(s.holders(), ["r2:1 3 1", "r4:1 6 1"]);
    s.queue("v:1", 7, WRITE);
    assert_eq!(s.abandon(entry("r2:1", 3, READ)), AbandonReply::Released);
    let r4 = s.hold_of("r4:1", 6, READ);
    assert_eq!(owners(&s.handed(&r4)), ["v:1"]);
    let kept = entry_with("v:1", 7, WRITE, Lease::Renewed(LONG));
    // Shorten v's lease so the heartbeat pushes it back.
    let now = s.now_ms();
    s.set_lease_end("v:1 7 4294967295", now + 5_000);
    assert!(matches!(
        s.heartbeat(LONG, &[kept]).statuses.as_slice(),
        [WaiterStatus::Owns(_)]
    ));
    s.queue("z:1", 8, READ);
    s.queue("y:1", 9, READ);
    assert_eq!(s.abandon(entry("z:1", 8, READ)), AbandonReply::LeftQueue);
    // A cancel of the handed write gives it back, to the read behind it.
    assert_eq!(s.cancel(kept), CancelReply::GivenBack);
    assert_eq!(s.abandon(entry("y:1", 9, READ)), AbandonReply::Released);
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

/// An upgradable read: 2^31 units, beside reads but not a write or another.
const UPGRADABLE: Ask = Ask::RwLock(Access::UpgradableRead);

/// One run of upgrade.lua for `hold` (made with a 60 s watchdog lease).
fn upgrade(s: &mut Lock, hold: &Hold, step: UpgradeStep) -> UpgradeReply {
    let waiter_timeout = s.waiter_timeout;
    s.run(&Upgrade {
        owner: &hold.owner,
        token: hold.token,
        call: hold.call,
        lease: Lease::Renewed(LONG),
        waiter_timeout,
        step,
    })
    .unwrap()
}

/// One run of downgrade.lua for `hold`, to `to`.
fn downgrade(s: &mut Lock, hold: &Hold, to: Access) -> DowngradeReply {
    s.run(&Downgrade {
        owner: &hold.owner,
        token: hold.token,
        call: hold.call,
        to,
    })
    .unwrap()
}

#[test]
fn an_upgrade_claims_the_head_and_the_last_read_before_it_hands_it_the_write() {
    let mut s = rw("upgrade");
    let u = s.take("u:1", 1, UPGRADABLE);
    assert_eq!(u.units, RW_UPGRADABLE);
    let r = s.take("r:1", 2, READ);
    // Excluded: another upgradable read and a write queue (or a try
    // gets nothing).
    assert!(matches!(
        s.attempt("x:1", 9, Mode::Try, UPGRADABLE),
        AcquireReply::Waiting { position: None, .. }
    ));
    // A try upgrade never claims.
    assert!(matches!(
        upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::Try)),
        UpgradeReply::Waiting { position: None, .. }
    ));
    assert!(s.queued().is_empty());
    assert_eq!(s.queue("w:1", 3, WRITE), 0);
    // The claim goes ahead of the writer queued first; a repeat finds it.
    for mode in [Mode::First, Mode::First, Mode::Poll] {
        assert!(matches!(
            upgrade(&mut s, &u, UpgradeStep::Attempt(mode)),
            UpgradeReply::Waiting {
                position: Some(0),
                ..
            }
        ));
    }
    let claim = queued("u:1", 1, Ask::Upgrade);
    assert_eq!(s.queued(), [claim.clone(), queued("w:1", 3, WRITE)]);
    // A read arriving now waits behind the claim.
    assert_eq!(s.queue("q:1", 4, READ), 2);
    // The watchdog's heartbeat keeps the claim (its entry is the claim's).
    let beat = s.heartbeat(LONG, &[entry("u:1", 1, Ask::Upgrade)]);
    assert_eq!(beat.statuses, [WaiterStatus::Queued(0)]);

    // The last read before it goes: the write, with a new token, its "G"
    // in the release's reply; nobody else gets in.
    let granted = match s.release(&r) {
        ReleaseReply::HandedOver(grants) => grants,
        other => panic!("{other:?}"),
    };
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!((granted[0].owner.as_str(), granted[0].call), ("u:1", 1));
    let w = s.granted(granted[0].clone());
    assert!(w.token > r.token && w.token > u.token);
    assert_eq!(s.holders(), ["u:1 1 4294967295"]);
    assert_eq!(
        s.queued(),
        [queued("w:1", 3, WRITE), queued("q:1", 4, READ)]
    );
    // Its poll (with the read's token: the reply it waits for) answers
    // with the write; so does a repeat of the first call.
    for mode in [Mode::Poll, Mode::First] {
        match upgrade(&mut s, &u, UpgradeStep::Attempt(mode)) {
            UpgradeReply::Upgraded { token, .. } => assert_eq!(token, w.token),
            other => panic!("{other:?}"),
        }
    }
    // The writer queued first goes next, then the read.
    let next = s.handed(&w);
    assert_eq!(owners(&next), ["w:1"]);
    let last = s.handed(&next[0]);
    assert_eq!(owners(&last), ["q:1"]);
    assert_eq!(s.release(&last[0]), RELEASED);

    // Alone, the upgrade is one call; the read it was is gone.
    let u = s.take("u:1", 5, UPGRADABLE);
    match upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::Try)) {
        UpgradeReply::Upgraded { token, .. } => assert!(token > u.token),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.holders(), ["u:1 5 4294967295"]);
}

#[test]
fn a_downgrade_admits_the_reads_behind_in_its_step_and_counts_once() {
    let mut s = rw("downgrade");
    let w = s.take("w:1", 1, WRITE);
    assert_eq!(s.queue("a:1", 2, READ), 0);
    assert_eq!(s.queue("b:1", 3, UPGRADABLE), 1);
    assert_eq!(s.queue("c:1", 4, UPGRADABLE), 2);
    assert_eq!(s.queue("x:1", 5, WRITE), 3);
    // To an upgradable read: the read behind comes in; the upgradable
    // read behind it does not fit beside this one, and nobody passes it.
    let (token, handed) = match downgrade(&mut s, &w, Access::UpgradableRead) {
        DowngradeReply::Downgraded { token, handed, .. } => (token, handed),
        other => panic!("{other:?}"),
    };
    assert!(token > w.token);
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "a:1");
    assert_eq!(handed[0].token, token + 1, "in the same step");
    // A repeat answers with the hold, admitting nobody again.
    match downgrade(&mut s, &w, Access::UpgradableRead) {
        DowngradeReply::Downgraded {
            token: again,
            handed,
            ..
        } => assert_eq!((again, handed), (token, Vec::new())),
        other => panic!("{other:?}"),
    }
    let u = hold("w:1", 1, UPGRADABLE, token);
    // Down to a read: the upgradable read queued behind comes in beside
    // it, the next one and the writer wait.
    let handed = match downgrade(&mut s, &u, Access::Read) {
        DowngradeReply::Downgraded { handed, .. } => handed,
        other => panic!("{other:?}"),
    };
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "b:1");
    assert_eq!(
        s.queued(),
        [queued("c:1", 4, UPGRADABLE), queued("x:1", 5, WRITE)]
    );
    assert_eq!(s.meta_used(), Some(2 + u64::from(RW_UPGRADABLE)));
    // A read is no write to downgrade; nothing is written.
    let read = s.hold_of("w:1", 1, READ);
    let before = s.snapshot();
    let err = s
        .run(&Downgrade {
            owner: "w:1",
            token: read.token,
            call: 1,
            to: Access::Read,
        })
        .unwrap_err();
    assert!(chain(&err).contains("downgrade"), "{}", chain(&err));
    assert_eq!(s.snapshot(), before);
}

#[test]
fn a_withdrawn_claim_lets_in_who_it_held_back_and_a_lost_read_drops_its_claim() {
    let mut s = rw("withdraw");
    let u = s.take("u:1", 1, UPGRADABLE);
    let r = s.take("r:1", 2, READ);
    assert!(matches!(
        upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::First)),
        UpgradeReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    assert_eq!(s.queue("q:1", 3, READ), 1);
    // Withdrawn: the read it held back enters, the upgradable read stays.
    assert!(matches!(
        upgrade(&mut s, &u, UpgradeStep::Withdraw),
        UpgradeReply::Waiting { position: None, .. }
    ));
    assert!(s.queued().is_empty());
    assert_eq!(s.holders().len(), 3);
    let q = s.hold_of("q:1", 3, READ);
    for h in [&r, &q] {
        assert_eq!(s.release(h), RELEASED);
    }
    // Claimed again, then force released: the claim goes with the hold,
    // and the upgrade says lost.
    let r = s.take("r:1", 4, READ);
    assert!(matches!(
        upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::First)),
        UpgradeReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    assert_eq!(s.force_release("c#1").holds, 2);
    assert!(s.queued().is_empty(), "{:?}", s.queued());
    assert_eq!(
        upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::Poll)),
        UpgradeReply::Lost
    );
    assert_eq!(s.release(&r), ReleaseReply::NotHeld);
    assert_eq!(downgrade(&mut s, &u, Access::Read), DowngradeReply::Lost);
}

/// A claim settled in place tells its waiting upgrade by its "G" (as any
/// grant: the release's reply goes to the releaser); a claim whose
/// upgradable read ran out is dropped and told "H <call> 0", so that it
/// asks at once and learns its hold is lost.
#[test]
fn a_settled_claim_hears_its_grant_and_a_claim_of_a_lost_read_hears_to_ask() {
    let mut s = rw("claim-told");
    let mut sub = s.server.conn();
    let mut pubsub = subscribe(&mut sub);
    for (owner, lost) in [("u", false), ("v", true)] {
        let u = s.take(&format!("{owner}:1"), 1, UPGRADABLE);
        let r = s.take("r:1", 2, READ);
        assert!(matches!(
            upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::First)),
            UpgradeReply::Waiting {
                position: Some(0),
                ..
            }
        ));
        if lost {
            let end = s.now_ms() - 1;
            s.set_lease_end(&member(&u), end);
        }
        let told = match s.release(&r) {
            ReleaseReply::HandedOver(grants) if !lost => {
                let w = s.granted(grants[0].clone());
                assert_eq!(s.release(&w), RELEASED);
                format!("G 1 {} ", w.token)
            }
            RELEASED if lost => "H 1 0".to_owned(),
            other => panic!("{other:?}"),
        };
        let (channel, payload) = message(&mut pubsub);
        assert_eq!(channel, format!("fairlock:wake:{owner}"));
        assert!(payload.starts_with(&told), "{payload}, not {told}");
        assert!(s.queued().is_empty() && s.holders().is_empty());
    }
}

/// A change of a hold's access: the upgrade of an upgradable read to the
/// write, or a downgrade to a read or an upgradable read.
#[derive(Debug, Clone, Copy)]
enum Change {
    Upgrade,
    Downgrade(Access),
}

/// The call that made `now` (asking for `ask`) delivered again in every
/// mode a call is sent in (a retry after a lost reply sends the same call
/// id again): each answers with the hold as it is now, its token, and
/// takes nothing: the holders, their units and the queue stay as they
/// were.
fn delivered_again(s: &mut Lock, ask: Ask, now: &Hold, after: &str) {
    let (holders, used, queued) = (s.holders(), s.meta_used(), s.queued());
    assert!(holders.contains(&member(now)), "{after}: {holders:?}");
    for mode in [Mode::First, Mode::Try, Mode::Poll] {
        match s.attempt(&now.owner, now.call, mode, ask) {
            AcquireReply::Acquired { token, .. } => {
                assert_eq!(token, now.token, "{ask:?} {mode:?} {after}")
            }
            other => panic!("{ask:?} {mode:?} {after}: {other:?}"),
        }
        assert_eq!(
            s.holders(),
            holders,
            "{ask:?} {mode:?} {after}: a second hold"
        );
        assert_eq!(s.meta_used(), used, "{ask:?} {mode:?} {after}");
        assert_eq!(s.queued(), queued, "{ask:?} {mode:?} {after}");
    }
}

/// Every kind of call (a read, a write, an upgradable read) delivered
/// again after each upgrade and each downgrade its hold went through
/// (write -> upgradable read -> write -> read, write -> read, write ->
/// upgradable read -> read, upgradable read -> write -> upgradable read ->
/// read, upgradable read -> write -> read, upgradable read -> read; a read
/// changes no access) answers with the hold as it is now and takes no
/// second one: the meta's lone hold, and beside another read (the holders
/// zset) whenever the hold is a read or an upgradable read; so do the
/// calls a downgrade admits, and an upgradable read whose upgrade waited
/// for the read before it.
#[test]
fn a_call_delivered_again_after_its_hold_changed_access_takes_no_second_hold() {
    use Access::UpgradableRead;
    use Change::{Downgrade, Upgrade};
    let mut s = rw("again");
    let paths: [(Ask, &[Change]); 7] = [
        (READ, &[]),
        (
            WRITE,
            &[Downgrade(UpgradableRead), Upgrade, Downgrade(Read)],
        ),
        (WRITE, &[Downgrade(Read)]),
        (WRITE, &[Downgrade(UpgradableRead), Downgrade(Read)]),
        (
            UPGRADABLE,
            &[Upgrade, Downgrade(UpgradableRead), Downgrade(Read)],
        ),
        (UPGRADABLE, &[Upgrade, Downgrade(Read)]),
        (UPGRADABLE, &[Downgrade(Read)]),
    ];
    let mut companion = 100;
    for (i, (ask, path)) in paths.into_iter().enumerate() {
        let call = i as u64 + 1;
        let mut now = s.take("a:1", call, ask);
        let mut after = format!("path {i}, no change");
        for step in std::iter::once(None).chain(path.iter().map(Some)) {
            if let Some(&change) = step {
                after = format!("path {i}, after {change:?}");
                let (token, units) = match change {
                    Upgrade => match upgrade(&mut s, &now, UpgradeStep::Attempt(Mode::First)) {
                        UpgradeReply::Upgraded { token, .. } => (token, RW_CAPACITY),
                        other => panic!("{after}: {other:?}"),
                    },
                    Downgrade(to) => match downgrade(&mut s, &now, to) {
                        DowngradeReply::Downgraded { token, .. } => {
                            (token, Ask::RwLock(to).units())
                        }
                        other => panic!("{after}: {other:?}"),
                    },
                };
                assert!(token > now.token, "{after}");
                now = Hold {
                    token,
                    units,
                    ..now
                };
                assert_eq!(s.holders(), [member(&now)], "{after}");
            }
            // Alone: the meta's lone hold.
            delivered_again(&mut s, ask, &now, &after);
            if now.units != RW_CAPACITY {
                // Beside another read: the holders zset.
                companion += 1;
                let c = s.take("c:1", companion, READ);
                let beside = format!("{after}, beside a read");
                delivered_again(&mut s, ask, &now, &beside);
                assert_eq!(s.release(&c), RELEASED, "{beside}");
                delivered_again(&mut s, ask, &now, &format!("{after}, the read gone"));
            }
        }
        assert_eq!(s.release(&now), RELEASED, "path {i}");
        assert!(s.holders().is_empty(), "path {i}: {:?}", s.holders());
    }

    // The calls a downgrade admits, delivered again: their holds.
    let w = s.take("w:1", 20, WRITE);
    assert_eq!(s.queue("r:1", 21, READ), 0);
    assert_eq!(s.queue("u:1", 22, UPGRADABLE), 1);
    let down = match downgrade(&mut s, &w, Read) {
        DowngradeReply::Downgraded { handed, .. } => {
            assert_eq!(handed.len(), 2, "{handed:?}");
            handed.into_iter().map(|g| s.granted(g)).collect::<Vec<_>>()
        }
        other => panic!("{other:?}"),
    };
    for (held, ask) in down.iter().zip([READ, UPGRADABLE]) {
        delivered_again(&mut s, ask, held, "admitted by a downgrade");
    }
    // The upgradable read's upgrade waits for the reads before it (its
    // claim heads the queue), and is settled by their release: its call
    // delivered again finds the upgradable read while it waits, then the
    // write.
    let u = down[1].clone();
    assert!(matches!(
        upgrade(&mut s, &u, UpgradeStep::Attempt(Mode::First)),
        UpgradeReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    delivered_again(&mut s, UPGRADABLE, &u, "while its upgrade waits");
    let w = s.hold_of("w:1", 20, READ);
    assert_eq!(s.release(&w), RELEASED);
    let granted = match s.release(&down[0]) {
        ReleaseReply::HandedOver(grants) => grants,
        other => panic!("{other:?}"),
    };
    let write = s.granted(granted[0].clone());
    assert_eq!(write.units, RW_CAPACITY);
    delivered_again(&mut s, UPGRADABLE, &write, "after its upgrade was settled");
    assert_eq!(s.release(&write), RELEASED);
    assert!(s.holders().is_empty() && s.queued().is_empty());
}
