//! The semaphore's own scenarios: the units held never above N, weighted
//! FIFO (a head that does not fit is never passed by a smaller call behind
//! it, not even by one that would fit, nor starved by them; when a head is
//! admitted, the calls right behind it that fit enter in the same step: on
//! a release, a cancel or an abandon of a head, the head's own poll, a
//! force release), a permits mismatch refused before any write (as
//! `ErrorKind::PermitsMismatch`), units of 0 or above N refused before any
//! write, a release delivered twice among permits, status's available
//! permits, a long random mix against a model of weighted FIFO, the
//! permits set (set_permits.lua: those that now fit admitted in order, the
//! calls that never will refused, holders kept; a call delivered again
//! after a change of the permits answering with its hold), and the ACL user of
//! docs/security.md running every script.

use std::time::Duration;

use super::driver::*;

/// One permit, as a queue entry names it (an entry names the units it
/// asks for, never the semaphore's permits: the scripts it goes to read
/// those from the meta, so the `of` of its ask is not sent).
const P1: Ask = permits(1, 1);

fn sem(name: &str) -> Lock {
    Lock::new(LockKind::Semaphore, name)
}

/// The counted engine's script of `op`, the one a semaphore runs.
fn script(op: Op) -> Script {
    Script::of(LockKind::Semaphore, op)
}

#[test]
fn never_more_holders_than_permits_with_more_callers() {
    let mut s = sem("never-more");
    let mut held: Vec<Hold> = (1..=3)
        .map(|i| s.take(&format!("h{i}:1"), i, permits(1, 3)))
        .collect();
    for i in 4..=10 {
        assert_eq!(s.queue(&format!("w{i}:1"), i, permits(1, 3)), i - 4);
    }
    // A try while all are held gets nothing and queues nothing.
    assert!(matches!(
        s.attempt("t:1", 99, Mode::Try, permits(1, 3)),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert_eq!(s.queued().len(), 7);
    // Release the oldest holder again and again: each release hands its
    // permit on, never more than three hold, until the queue is empty.
    while !held.is_empty() {
        let gone = held.remove(0);
        held.extend(s.handed(&gone));
        let holders = s.holders();
        assert!(holders.len() <= 3, "{holders:?}");
        assert_eq!(holders.len(), held.len().min(3));
        let mut expected: Vec<String> = held.iter().map(member).collect();
        let mut got = holders.clone();
        expected.sort();
        got.sort();
        assert_eq!(got, expected);
    }
    assert!(s.queued().is_empty());
    // Free again: three new callers take at once, the fourth queues.
    for i in 20..23 {
        s.take(&format!("n{i}:1"), i, permits(1, 3));
    }
    assert_eq!(s.queue("n23:1", 23, permits(1, 3)), 0);
}

#[test]
fn a_lease_that_ran_out_frees_its_permit_for_the_head() {
    let mut s = sem("expiry");
    let a = s
        .attempt_with("a:1", 1, Mode::First, permits(1, 2), 0, Lease::Fixed(SHORT))
        .unwrap();
    let AcquireReply::Acquired { token, .. } = a else {
        panic!("{a:?}")
    };
    let a = Hold {
        owner: "a:1".into(),
        call: 1,
        units: 1,
        token,
    };
    let b = s.take("b:1", 2, permits(1, 2));
    assert_eq!(s.queue("w:1", 3, permits(1, 2)), 0);
    assert_eq!(s.queue("x:1", 4, permits(1, 2)), 1);
    sleep(SHORT + Duration::from_millis(50));
    // The head's poll takes the permit a's lease left; x still waits.
    assert!(matches!(
        s.attempt("w:1", 3, Mode::Poll, permits(1, 2)),
        AcquireReply::Acquired { .. }
    ));
    assert!(matches!(
        s.attempt("x:1", 4, Mode::Poll, permits(1, 2)),
        AcquireReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    assert_eq!(s.holders(), ["b:1 2 1", "w:1 3 1"]);
    // a lost its lease: its release and renewal say so and change nothing.
    assert!(!s.renew(&a, Some(LONG)));
    assert_eq!(s.release(&a), ReleaseReply::NotHeld);
    assert_eq!(s.queued(), ["x:1 4 60000 0 1"]);
    // b's release goes to x.
    let handed = s.handed(&b);
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "x:1");
}

#[test]
fn a_permits_mismatch_is_an_error_naming_both_and_writes_nothing() {
    let mut s = sem("mismatch");
    s.take("a:1", 1, permits(1, 3));
    s.take("b:1", 2, permits(1, 3));
    s.take("c:1", 3, permits(1, 3));
    s.queue("w:1", 4, permits(1, 3));
    let before = s.snapshot();
    for mode in [Mode::Try, Mode::First, Mode::Poll] {
        for (owner, call) in [("n:1", 9), ("w:1", 4), ("a:1", 1)] {
            let err = s
                .attempt_with(owner, call, mode, permits(1, 4), 0, Lease::Renewed(LONG))
                .unwrap_err();
            assert_eq!(err.kind(), fairlock::ErrorKind::PermitsMismatch, "{err}");
            assert!(
                err.to_string()
                    .contains("this call says 4, the semaphore has 3"),
                "{err}"
            );
            let text = chain(&err);
            assert!(
                text.contains("FAIRLOCK_PERMITS_MISMATCH") && text.contains("4 3 600000"),
                "{text}"
            );
        }
    }
    assert_eq!(s.snapshot(), before);
}

#[test]
fn a_release_delivered_twice_counts_once() {
    let mut s = sem("release-twice");
    let a = s.take("a:1", 1, permits(1, 2));
    let b = s.take("b:1", 2, permits(1, 2));
    s.queue("w:1", 3, permits(1, 2));
    let handed = s.handed(&a);
    assert_eq!(handed.len(), 1);
    s.queue("x:1", 4, permits(1, 2));
    // The repeat answers as released, hands nothing and frees nothing.
    assert_eq!(s.release(&a), RELEASED);
    assert_eq!(s.holders(), ["b:1 2 1", "w:1 3 1"]);
    assert_eq!(s.queued(), ["x:1 4 60000 0 1"]);
    // x got b's permit; the repeat of b's release changes nothing.
    let handed = s.handed(&b);
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].owner, "x:1");
    assert_eq!(s.release(&b), RELEASED);
    assert_eq!(s.holders(), ["w:1 3 1", "x:1 4 1"]);
    // Without a queue: freed once, the repeat changes nothing.
    let w = Hold {
        owner: "w:1".into(),
        call: 3,
        units: 1,
        token: s.token_of("w:1 3 1"),
    };
    assert_eq!(s.release(&w), RELEASED);
    let d = s.take("d:1", 5, permits(1, 2));
    assert_eq!(s.release(&w), RELEASED);
    assert_eq!(s.holders().len(), 2, "x and d");
    assert_eq!(s.queue("e:1", 6, permits(1, 2)), 0);
    // Never held, or another call of the same owner: the lease is lost.
    let never = Hold {
        owner: "z:1".into(),
        call: 9,
        units: 1,
        token: d.token,
    };
    assert_eq!(s.release(&never), ReleaseReply::NotHeld);
    let other_call = Hold {
        call: 8,
        ..d.clone()
    };
    assert_eq!(s.release(&other_call), ReleaseReply::NotHeld);
}

/// A release delivered again after other releases came in between (a
/// stop of the caller's process, a Cluster client's own retry) is answered
/// as the first was, not as a lease lost, while the meta names it among
/// the last 8 releases.
#[test]
fn a_release_delivered_again_after_other_releases_counts_once() {
    let mut s = sem("release-again-later");
    let a = s.take("a:1", 1, permits(1, 3));
    let b = s.take("b:1", 2, permits(1, 3));
    let c = s.take("c:1", 3, permits(1, 3));
    assert_eq!(s.release(&a), RELEASED);
    assert_eq!(s.release(&b), RELEASED);
    assert_eq!(s.release(&a), RELEASED, "a's repeat after b's release");
    assert_eq!(s.holders(), ["c:1 3 1"]);
    assert_eq!(s.release(&c), RELEASED);
    assert_eq!(s.release(&b), RELEASED, "b's repeat after c's release");
    assert_eq!(s.release(&a), RELEASED, "a's repeat after c's release");
    // The last 8: a repeat after 7 others counts once, after 8 it is not
    // told from a hold lost.
    let mut n = sem("release-again-bound");
    let _kept = n.take("k:1", 1, permits(1, 2));
    let first = n.take("a:1", 2, permits(1, 2));
    assert_eq!(n.release(&first), RELEASED);
    for i in 3..=10 {
        let other = n.take(&format!("o{i}:1"), i, permits(1, 2));
        assert_eq!(n.release(&other), RELEASED);
        let again = if i < 10 {
            RELEASED
        } else {
            ReleaseReply::NotHeld
        };
        assert_eq!(n.release(&first), again, "after {} others", i - 2);
    }
    // Never released: still a lease lost.
    let never = Hold { call: 99, ..first };
    assert_eq!(n.release(&never), ReleaseReply::NotHeld);
}

#[test]
fn the_readme_acl_user_runs_every_semaphore_script() {
    let mut s = sem("acl");
    // (Denials of the redis crate's CLIENT SETINFO at connect are not the
    // scripts': the log is emptied of them.)
    s.as_acl_user("sem-pw");
    let a = s.take("a:1", 1, permits(1, 1));
    s.queue("w:1", 2, permits(1, 1));
    let stale = Hold {
        token: 1,
        ..a.clone()
    };
    assert!(!s.renew(&stale, Some(LONG)));
    assert!(s.renew(&a, Some(LONG)));
    assert!(s.renew(&a, None));
    assert_eq!(s.handed(&a).len(), 1);
    assert_eq!(s.release(&a), RELEASED);
    assert!(s
        .attempt_with("b:1", 3, Mode::Try, permits(1, 2), 0, Lease::Renewed(LONG))
        .is_err());
    // The heartbeat, cancel, abandon and status scripts, each path that
    // writes: a heartbeat that hands a permit on and keeps a queued one, a
    // cancel that leaves and one that gives a handed permit back (to the
    // next waiter), an abandon of a hold and of a queue entry, a status
    // listing both; then the force release script, freeing a hold and
    // admitting a waiter.
    let w = hold("w:1", 2, P1, s.token_of("w:1 2 1"));
    s.queue("x:1", 4, permits(1, 1));
    s.queue("y:1", 5, permits(1, 1));
    assert_eq!(
        s.heartbeat(LONG, &[entry("x:1", 4, P1), entry("y:1", 5, P1)])
            .statuses,
        [WaiterStatus::Queued(0), WaiterStatus::Queued(1)]
    );
    let status = s.status(10, 10);
    assert_eq!((status.holders.len(), status.waiters.len()), (1, 2));
    assert_eq!(s.abandon(entry("w:1", 2, P1)), AbandonReply::Released);
    assert_eq!(s.cancel(entry("y:1", 5, P1)), CancelReply::Left);
    s.queue("z:1", 6, permits(1, 1));
    assert_eq!(s.abandon(entry("z:1", 6, P1)), AbandonReply::LeftQueue);
    s.queue("q:1", 11, permits(1, 1));
    assert_eq!(s.cancel(entry("x:1", 4, P1)), CancelReply::GivenBack);
    assert_eq!(s.holders(), ["q:1 11 1"]);
    assert_eq!(s.release(&w), RELEASED);
    s.queue("v:1", 7, permits(1, 1));
    assert_eq!(
        s.force_release("op:1#1"),
        Freed {
            holds: 1,
            holder: None
        }
    );
    assert_eq!(s.holders(), ["v:1 7 1"]);
    // The set_permits script: a grow, a shrink that refuses a queued
    // call, a grow that admits one.
    assert_eq!(s.set_permits(3).previous, Some(1));
    s.take("t:1", 8, permits(2, 3));
    s.queue("r:1", 9, permits(2, 3));
    s.queue("u:1", 10, permits(1, 3));
    let set = s.set_permits(1);
    assert_eq!((set.in_use, set.refused), (3, 1));
    let set = s.set_permits(4);
    assert_eq!((set.in_use, set.admitted.len()), (4, 1));
    assert_eq!(acl_denials(&mut s.conn), Vec::<Value>::new());
}

/// Newcomers (first attempts and tries) of 1 to N permits, releases (and
/// their repeats) and polls, against a model of weighted FIFO: a newcomer
/// takes its permits only if nobody waits and they fit; a release admits
/// the head of the queue and those right behind it while each fits; so
/// live holds are always the model's, their units never above N, grants go
/// in arrival order, no call passes a queued head (a smaller one that
/// would fit included), and tokens increase.
#[test]
fn a_long_random_mix_keeps_every_invariant() {
    let mut s = sem("mix");
    const PERMITS: u32 = 3;
    // A fixed pseudo-random sequence (an LCG), so a failure repeats.
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut holding: Vec<Hold> = Vec::new();
    // Queued calls in arrival order: owner, call, permits asked for.
    let mut queued: Vec<(String, u64, u32)> = Vec::new();
    let mut arrivals: Vec<String> = Vec::new();
    let mut grants: Vec<String> = Vec::new();
    let mut tokens: Vec<u64> = Vec::new();
    // Holds made of more than one permit, and steps that ended with a head
    // waiting beside free permits: the weighted cases the mix must reach.
    let mut weighted = 0;
    let mut blocked_with_free = 0;
    // Newcomers whose permits were free but who came after a queued call.
    let mut held_back = 0;
    let mut call = 0;
    for _ in 0..400 {
        let used: u32 = holding.iter().map(|p| p.units).sum();
        match next(4) {
            // A newcomer for 1 to N permits: first attempt, or a try.
            0 | 1 => {
                call += 1;
                let owner = format!("c{}:1", next(12));
                let n = 1 + next(u64::from(PERMITS)) as u32;
                let mode = if next(3) == 0 { Mode::Try } else { Mode::First };
                match s.attempt(&owner, call, mode, permits(n, PERMITS)) {
                    AcquireReply::Acquired { token, .. } => {
                        assert!(
                            queued.is_empty(),
                            "{owner} took {n} permits past {queued:?}"
                        );
                        assert!(used + n <= PERMITS, "{owner} took {n} with {used} held");
                        tokens.push(token);
                        weighted += usize::from(n > 1);
                        holding.push(Hold {
                            owner,
                            call,
                            units: n,
                            token,
                        });
                    }
                    AcquireReply::Waiting { position, .. } => {
                        // Its permits were not free, or a call came first.
                        assert!(
                            !queued.is_empty() || used + n > PERMITS,
                            "{n} permits were free and nobody waited"
                        );
                        held_back += usize::from(used + n <= PERMITS);
                        match position {
                            Some(p) => {
                                assert_eq!(p as usize, queued.len());
                                arrivals.push(format!("{owner} {call}"));
                                queued.push((owner, call, n));
                            }
                            None => assert_eq!(mode, Mode::Try),
                        }
                    }
                }
            }
            // A holder releases (its repeat now and then): exactly the
            // head and those right behind it that fit are admitted.
            2 if !holding.is_empty() => {
                let gone = holding.remove(next(holding.len() as u64) as usize);
                let handed = s.handed(&gone);
                let mut free = PERMITS - holding.iter().map(|p| p.units).sum::<u32>();
                let mut admitted = Vec::new();
                while let Some(&(_, _, n)) = queued.first() {
                    if n > free {
                        break;
                    }
                    free -= n;
                    admitted.push(queued.remove(0));
                }
                let got: Vec<(String, u64, u32)> = handed
                    .iter()
                    .map(|p| (p.owner.clone(), p.call, p.units))
                    .collect();
                assert_eq!(got, admitted, "{gone:?} released");
                for p in handed {
                    grants.push(format!("{} {}", p.owner, p.call));
                    tokens.push(p.token);
                    weighted += usize::from(p.units > 1);
                    holding.push(p);
                }
                if next(4) == 0 {
                    assert_eq!(s.release(&gone), RELEASED);
                }
            }
            // A queued waiter polls: it stays where it is.
            3 if !queued.is_empty() => {
                let i = next(queued.len() as u64) as usize;
                let (owner, call, n) = queued[i].clone();
                match s.attempt(&owner, call, Mode::Poll, permits(n, PERMITS)) {
                    AcquireReply::Waiting {
                        position: Some(p), ..
                    } => assert_eq!(p as usize, i),
                    other => panic!("{owner} {call} polled: {other:?}"),
                }
            }
            _ => {}
        }
        let mut live = s.holders();
        let mut expected: Vec<String> = holding.iter().map(member).collect();
        live.sort();
        expected.sort();
        assert_eq!(live, expected);
        let held: u32 = live.iter().map(|m| units_of(m)).sum();
        assert!(held <= PERMITS, "{held} permits held: {live:?}");
        assert!(live.len() <= PERMITS as usize);
        assert_eq!(
            s.meta_used().unwrap_or(0),
            u64::from(held),
            "the meta counts the units held"
        );
        let in_queue: Vec<String> = s.queued();
        let model: Vec<String> = queued
            .iter()
            .map(|(owner, call, n)| format!("{owner} {call} 60000 0 {n}"))
            .collect();
        assert_eq!(in_queue, model);
        // A head that fit would have been admitted.
        if let Some((owner, call, n)) = queued.first() {
            assert!(
                held + n > PERMITS,
                "{owner} {call} waits for {n}, {held} held"
            );
            if held < PERMITS {
                blocked_with_free += 1;
            }
        }
    }
    assert!(grants.len() > 10, "the mix handed over {}", grants.len());
    assert_eq!(grants, arrivals[..grants.len()]);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(weighted > 10, "{weighted} holds of more than one permit");
    assert!(
        blocked_with_free > 10,
        "a head blocked {blocked_with_free} times"
    );
    assert!(held_back > 10, "{held_back} calls that fit held back");
}

#[test]
fn status_reports_permits_holders_available_and_the_queue() {
    let mut s = sem("status");
    let empty = s.status(10, 10);
    assert_eq!(
        (empty.capacity, empty.live_holds, empty.live_waiters),
        (None, 0, 0)
    );
    assert_eq!(empty.used, 0);
    let a = s.take("a:1", 1, permits(1, 3));
    let b = s.take("b:1", 2, permits(1, 3));
    let one = s.status(10, 10);
    assert_eq!(one.capacity, Some(3));
    assert_eq!((one.live_holds, available(&one)), (2, 1));
    assert_eq!(one.last_token, b.token);
    let c = s.take("c:1", 3, permits(1, 3));
    s.queue("w:1", 4, permits(1, 3));
    s.queue("x:1", 5, permits(1, 3));
    let full = s.status(10, 10);
    assert_eq!(
        (full.live_holds, available(&full), full.live_waiters),
        (3, 0, 2)
    );
    let listed: Vec<(String, Option<u64>, u64, u64)> = full
        .holders
        .iter()
        .map(|h| (h.owner.clone(), h.call, h.units, h.token))
        .collect();
    assert_eq!(
        listed,
        [
            ("a:1".to_owned(), Some(1), 1, a.token),
            ("b:1".to_owned(), Some(2), 1, b.token),
            ("c:1".to_owned(), Some(3), 1, c.token)
        ]
    );
    assert!(full.holders.iter().all(|h| h
        .lease_left_ms
        .is_some_and(|left| (59_000..=60_000).contains(&left))));
    let waiters: Vec<(&str, u64)> = full
        .waiters
        .iter()
        .map(|w| (w.owner.as_str(), w.units))
        .collect();
    assert_eq!(waiters, [("w:1", 1), ("x:1", 1)]);
    assert!(full
        .waiters
        .iter()
        .all(|w| (59_000..=60_000).contains(&w.liveness_left_ms)));
    // The bounds.
    let few = s.status(1, 2);
    assert_eq!((few.holders.len(), few.waiters.len()), (2, 1));
    assert_eq!(few.live_holds, 3);
    let none = s.status(0, 0);
    assert!(none.holders.is_empty() && none.waiters.is_empty());
    // After a handoff: w holds with the last token.
    let handed = s.handed(&a);
    let after = s.status(10, 10);
    assert_eq!(after.last_token, handed[0].token);
    assert_eq!(
        (after.live_holds, available(&after), after.live_waiters),
        (3, 0, 1)
    );
    assert!(after
        .holders
        .iter()
        .any(|h| h.owner == "w:1" && h.call == Some(4)));
    // An expired hold is no holder, and its permit counts as available.
    s.release(&b);
    s.release(&c);
    let w = hold("w:1", 4, P1, handed[0].token);
    s.release(&w);
    let x = s.hold_of("x:1", 5, P1);
    s.release(&x);
    s.attempt_with("d:1", 6, Mode::First, permits(1, 3), 0, Lease::Fixed(SHORT))
        .unwrap();
    sleep(SHORT + Duration::from_millis(50));
    let expired = s.status(10, 10);
    assert_eq!((expired.live_holds, available(&expired)), (0, 3));
    assert!(expired.holders.is_empty());
    // Weighted: a hold of two is one hold of two units, a waiter of three
    // is listed with its three.
    let e = s.take("e:1", 7, permits(2, 3));
    s.queue("y:1", 8, permits(3, 3));
    let weighted = s.status(10, 10);
    assert_eq!(
        (weighted.live_holds, weighted.used, available(&weighted)),
        (1, 2, 1)
    );
    assert_eq!(
        (weighted.holders[0].call, weighted.holders[0].units),
        (Some(7), 2)
    );
    assert_eq!(weighted.holders[0].token, e.token);
    assert_eq!(
        (
            weighted.waiters[0].owner.as_str(),
            weighted.waiters[0].units
        ),
        ("y:1", 3)
    );
}

/// Weighted FIFO, as tokio's batch semaphore: a head that does not fit
/// stops admission (a smaller call behind it that would fit queues
/// behind it, a try gets nothing), and when it is admitted the calls right
/// behind it that fit enter in the same step, each told by its own grant,
/// tokens in queue order; the first that does not fit waits, and hears it
/// now heads the queue.
#[test]
fn a_release_admits_a_large_head_and_the_calls_behind_it_that_fit_in_one_step() {
    let mut s = sem("weighted-fifo");
    const N: u32 = 5;
    let a = s.take("a:1", 1, permits(3, N));
    assert_eq!(s.queue("b:1", 2, permits(4, N)), 0);
    // C's one permit fits beside A's three, but B came first.
    assert_eq!(s.queue("c:1", 3, permits(1, N)), 1);
    assert_eq!(s.queue("d:1", 4, permits(1, N)), 2);
    assert!(matches!(
        s.attempt("t:1", 5, Mode::Try, permits(1, N)),
        AcquireReply::Waiting { position: None, .. }
    ));
    assert!(matches!(
        s.attempt("c:1", 3, Mode::Poll, permits(1, N)),
        AcquireReply::Waiting {
            position: Some(1),
            ..
        }
    ));
    assert_eq!(s.holders(), ["a:1 1 3"]);
    assert_eq!(
        s.queued(),
        ["b:1 2 60000 0 4", "c:1 3 60000 0 1", "d:1 4 60000 0 1"]
    );
    let mut sub = s.server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let grants = match s.release(&a) {
        ReleaseReply::HandedOver(grants) => grants,
        other => panic!("{other:?}"),
    };
    let admitted: Vec<(&str, u64)> = grants.iter().map(|g| (g.owner.as_str(), g.call)).collect();
    assert_eq!(admitted, [("b:1", 2), ("c:1", 3)], "B, then C: 4 + 1 <= 5");
    assert!(
        a.token < grants[0].token && grants[0].token < grants[1].token,
        "{grants:?}"
    );
    assert!(
        grants.iter().all(|g| (59_000..=60_000).contains(&g.ttl_ms)),
        "{grants:?}"
    );
    let (b_token, c_token) = (grants[0].token, grants[1].token);
    for (channel, prefix) in [
        ("fairlock:wake:b", format!("G 2 {b_token} ")),
        ("fairlock:wake:c", format!("G 3 {c_token} ")),
    ] {
        let m = pubsub.get_message().unwrap();
        let payload: String = m.get_payload().unwrap();
        assert_eq!(m.get_channel_name(), channel, "{payload}");
        assert!(payload.starts_with(&prefix), "{payload}");
    }
    assert_eq!(s.holders(), ["b:1 2 4", "c:1 3 1"]);
    assert_eq!(s.queued(), ["d:1 4 60000 0 1"]);
    let status = s.status(10, 10);
    assert_eq!(
        (status.used, status.live_holds, status.live_waiters),
        (5, 2, 1)
    );
    let waiting: Vec<(&str, u64)> = status
        .waiters
        .iter()
        .map(|w| (w.owner.as_str(), w.units))
        .collect();
    assert_eq!(waiting, [("d:1", 1)]);
    // (Its '+': waiters may be queued.)
    assert_eq!(s.meta().unwrap(), format!("5 5 {c_token} a:1#1 +"));
    // D enters with the first permit that comes back, not before.
    assert!(matches!(
        s.attempt("d:1", 4, Mode::Poll, permits(1, N)),
        AcquireReply::Waiting {
            position: Some(0),
            ..
        }
    ));
    let c = hold("c:1", 3, P1, c_token);
    let handed: Vec<String> = s.handed(&c).iter().map(member).collect();
    assert_eq!(handed, ["d:1 4 1"]);
}

/// A head asking for every permit while single permits are held: each one
/// that comes back stays free for it, whoever arrives (a try, a first
/// attempt, a poll or a heartbeat of those behind), until it has them all;
/// the calls that queued behind it enter when it releases.
#[test]
fn a_large_head_is_never_starved_by_smaller_calls() {
    let mut s = sem("large-head");
    const N: u32 = 4;
    let mut held: Vec<Hold> = (1..=3)
        .map(|i| s.take(&format!("h{i}:1"), i, permits(1, N)))
        .collect();
    assert_eq!(s.queue("big:1", 10, permits(N, N)), 0);
    let mut behind: Vec<(String, u64)> = Vec::new();
    while !held.is_empty() {
        let free = N - held.len() as u32;
        let call = 20 + behind.len() as u64;
        let owner = format!("n{call}:1");
        assert!(
            matches!(
                s.attempt(&owner, call, Mode::Try, permits(1, N)),
                AcquireReply::Waiting { position: None, .. }
            ),
            "a try passed the head with {free} free"
        );
        assert_eq!(
            s.queue(&owner, call, permits(1, N)),
            behind.len() as u64 + 1
        );
        behind.push((owner, call));
        for (i, (owner, call)) in behind.iter().enumerate() {
            assert!(
                matches!(
                    s.attempt(owner, *call, Mode::Poll, permits(1, N)),
                    AcquireReply::Waiting { position: Some(p), .. } if p == i as u64 + 1
                ),
                "{owner} polled past the head with {free} free"
            );
        }
        let entries: Vec<QueueEntry> = behind.iter().map(|(o, c)| entry(o, *c, P1)).collect();
        let beat = s.heartbeat(LONG, &entries);
        let expected: Vec<WaiterStatus> = (1..=behind.len() as u64)
            .map(WaiterStatus::Queued)
            .collect();
        assert_eq!(beat.statuses, expected);
        assert!(matches!(
            s.attempt("big:1", 10, Mode::Poll, permits(N, N)),
            AcquireReply::Waiting {
                position: Some(0),
                ..
            }
        ));
        let status = s.status(10, 10);
        assert_eq!(
            (status.used, status.live_holds),
            (held.len() as u64, held.len() as u64)
        );
        // A holder leaves: its permit waits for the head.
        let gone = held.remove(0);
        let handed: Vec<String> = s.handed(&gone).iter().map(member).collect();
        if held.is_empty() {
            assert_eq!(handed, ["big:1 10 4"], "the last permit back");
        } else {
            assert!(handed.is_empty(), "{handed:?}");
        }
    }
    // The head holds them all; those behind it enter when it releases.
    assert!(matches!(
        s.attempt("late:1", 30, Mode::Try, permits(1, N)),
        AcquireReply::Waiting { position: None, .. }
    ));
    let big = s.hold_of("big:1", 10, permits(N, N));
    let handed: Vec<String> = s.handed(&big).iter().map(member).collect();
    let expected: Vec<String> = behind.iter().map(|(o, c)| format!("{o} {c} 1")).collect();
    assert_eq!(handed, expected);
    assert!(s.queued().is_empty());
}

/// A large head that leaves (cancelled, abandoned) or dies (no heartbeat
/// within its waiter timeout) no longer blocks the smaller calls behind
/// it: those that fit enter in the step that removes it.
#[test]
fn a_large_head_that_leaves_or_dies_lets_the_calls_behind_it_in() {
    let mut s = sem("large-head-leaves");
    const N: u32 = 4;
    let a = s.take("a:1", 1, permits(2, N));
    s.queue("big:1", 2, permits(4, N));
    s.queue("c:1", 3, permits(1, N));
    s.queue("d:1", 4, permits(1, N));
    s.queue("e:1", 5, permits(1, N));
    // Cancelled: C and D fit beside A's two, E does not.
    assert_eq!(
        s.cancel(entry("big:1", 2, permits(4, 4))),
        CancelReply::Left
    );
    assert_eq!(s.holders(), ["a:1 1 2", "c:1 3 1", "d:1 4 1"]);
    assert_eq!(s.queued(), ["e:1 5 60000 0 1"]);
    let beat = s.heartbeat(
        LONG,
        &[
            entry("c:1", 3, P1),
            entry("d:1", 4, P1),
            entry("e:1", 5, P1),
        ],
    );
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
    let handed: Vec<String> = s.handed(&a).iter().map(member).collect();
    assert_eq!(handed, ["e:1 5 1"]);
    // Abandoned (its client never learned how its call ended): three held,
    // a head of three waits, F's one (which would fit) behind it.
    let c = s.hold_of("c:1", 3, P1);
    assert_eq!(s.queue("big:2", 6, permits(3, N)), 0);
    assert_eq!(s.queue("f:1", 7, permits(1, N)), 1);
    assert_eq!(
        s.abandon(entry("big:2", 6, permits(3, 3))),
        AbandonReply::LeftQueue
    );
    assert_eq!(s.holders(), ["c:1 3 1", "d:1 4 1", "e:1 5 1", "f:1 7 1"]);
    assert!(s.queued().is_empty());
    // Dead: a head of two that stops beating, G's one behind it.
    assert_eq!(s.release(&c), RELEASED);
    s.waiter_timeout = Duration::from_millis(300);
    assert_eq!(s.queue("big:3", 8, permits(2, N)), 0);
    s.waiter_timeout = LONG;
    assert_eq!(s.queue("g:1", 9, permits(1, N)), 1);
    sleep(Duration::from_millis(400));
    assert_eq!(
        s.heartbeat(LONG, &[entry("g:1", 9, P1)]).statuses,
        [WaiterStatus::Owns(s.token_of("g:1 9 1"))]
    );
    assert_eq!(s.holders(), ["d:1 4 1", "e:1 5 1", "f:1 7 1", "g:1 9 1"]);
    assert!(s.queued().is_empty());
    let status = s.status(10, 10);
    assert_eq!((status.used, status.live_waiters), (4, 0));
}

/// A call for no permit or for more than the semaphore has could never be
/// admitted (or would be a hold of nothing): the script refuses it with an
/// error naming what is wrong before it writes anything, on a semaphore
/// nobody used and on one in use, for a newcomer and for a repeat of a
/// holder's or a waiter's call.
#[test]
fn units_of_zero_or_above_the_permits_are_refused_before_any_write() {
    let mut s = sem("units-bounds");
    let refusals = [
        (
            0,
            "units must be a whole number from 1 to 4294967295, got 0",
        ),
        (4, "a call asks for 4 units of 3"),
    ];
    let refuse = |s: &mut Lock, owner: &str, call: u64| {
        for (n, what) in refusals {
            for mode in [Mode::Try, Mode::First, Mode::Poll] {
                let err = s
                    .attempt_with(
                        owner,
                        call,
                        mode,
                        Ask::Permits { n, of: 3 },
                        0,
                        Lease::Renewed(LONG),
                    )
                    .unwrap_err();
                assert_eq!(err.kind(), fairlock::ErrorKind::Server, "{err}");
                assert!(chain(&err).contains(what), "{n}: {}", chain(&err));
            }
        }
    };
    refuse(&mut s, "n:1", 1);
    assert!(s.snapshot().is_empty(), "nothing written");
    s.take("a:1", 1, permits(2, 3));
    s.queue("w:1", 2, permits(2, 3));
    let before = s.snapshot();
    for (owner, call) in [("n:1", 9), ("w:1", 2), ("a:1", 1)] {
        refuse(&mut s, owner, call);
        assert_eq!(s.snapshot(), before, "{owner} {call}");
    }
    // The same as raw ARGV: units after the capacity 3.
    for units in ["0", "4", "-1", "1.5", "", "4294967296"] {
        let args = ["n:1", "9", "60000", "3", units, "0 60000 first 0"].map(str::to_owned);
        let err = s.eval(script(Op::Acquire), &args).unwrap_err();
        assert!(err.to_string().contains("units"), "{units:?}: {err}");
        assert_eq!(s.snapshot(), before, "{units:?}");
    }
    assert_eq!(s.holders(), ["a:1 1 2"]);
    assert_eq!(s.queued(), ["w:1 2 60000 0 2"]);
}

/// A force release frees every live hold, whoever holds it, and admits the
/// waiters that fit in the same step; the same call delivered again
/// answers as the first did and frees nobody (not the holds just
/// admitted); the holders it freed learn they lost their leases.
#[test]
fn a_force_release_frees_every_hold_once_and_admits_the_waiters_that_fit() {
    let mut s = sem("force");
    const N: u32 = 4;
    let freed = |holds| Freed {
        holds,
        holder: None,
    };
    // Nothing held, nothing used: nothing freed, nothing written but the
    // call's record (delivered again, it frees nobody who took it since).
    assert_eq!(s.force_release("op:1#1"), freed(0));
    let written: Vec<String> = s.snapshot().into_iter().map(|(key, _)| key).collect();
    assert_eq!(written, [s.keys.all[4].clone()]);
    let a = s.take("a:1", 1, permits(1, N));
    let b = s.take("b:1", 2, permits(2, N));
    let c = s.take("c:1", 3, permits(1, N));
    s.queue("w:1", 4, permits(3, N));
    s.queue("x:1", 5, permits(1, N));
    s.queue("y:1", 6, permits(2, N));
    assert_eq!(s.force_release("op:1#2"), freed(3));
    assert_eq!(
        s.holders(),
        ["w:1 4 3", "x:1 5 1"],
        "W and X fit, Y does not"
    );
    assert_eq!(s.queued(), ["y:1 6 60000 0 2"]);
    let status = s.status(10, 10);
    assert_eq!(
        (status.used, status.live_holds, status.live_waiters),
        (4, 2, 1)
    );
    assert!(status.holders.iter().all(|h| h.token > c.token));
    let before = s.snapshot();
    assert_eq!(s.force_release("op:1#2"), freed(3), "the repeat");
    assert_eq!(s.snapshot(), before, "the repeat changes nothing");
    for old in [&a, &b, &c] {
        assert!(!s.renew(old, Some(LONG)), "{old:?}");
        assert_eq!(s.release(old), ReleaseReply::NotHeld, "{old:?}");
    }
    assert_eq!(s.snapshot(), before, "the old holders change nothing");
    // Another call is another force release: W and X go, Y enters.
    assert_eq!(s.force_release("op:1#3"), freed(2));
    assert_eq!(s.holders(), ["y:1 6 2"]);
    assert!(s.queued().is_empty());
}

/// Setting the permits: on a semaphore nobody uses, the number set is its
/// own, and a call that says another is served with it (no mismatch); a
/// grow admits the waiters that now fit in the same step, in FIFO order,
/// with their "G" messages (the next head hears nothing: its client's
/// heartbeat tells it), and stops at a head
/// that does not fit; a shrink takes nothing from holders (nobody is
/// admitted until the holds fit), takes the queued calls that ask for more
/// than the new number out of the queue and tells them to poll ("H <call
/// id> -2"), and their poll, like any later call for more, is refused as
/// `ErrorKind::PermitsExceeded` with nothing written; a lone hold and the
/// holders zset both keep the number set through releases; a number out of
/// range is refused before any write.
#[test]
fn set_permits_admits_those_that_now_fit_in_order_and_refuses_those_that_never_will() {
    let mut s = sem("resize");
    const OF: u32 = 3;
    let set = s.set_permits(2);
    assert_eq!(
        (set.previous, set.in_use, set.refused, set.admitted),
        (None, 0, 0, Vec::new())
    );
    // Made anew, its last token the server clock's (less one).
    let meta = s.meta().unwrap();
    let words: Vec<&str> = meta.split(' ').collect();
    assert_eq!((words[0], words[1], words[3]), ("=2", "0", "-"), "{meta}");
    assert!(words[2].parse::<u64>().unwrap() > 0, "{meta}");
    // Calls that say 3 are served with the 2 set: the first is the lone hold.
    let a = s.take("a:1", 1, permits(2, OF));
    assert!(s.lone().is_some());
    assert_eq!(s.queue("b:1", 2, permits(1, OF)), 0);
    assert_eq!(s.queue("c:1", 3, permits(2, OF)), 1);
    assert_eq!(s.queue("d:1", 4, permits(1, OF)), 2);
    let mut sub = s.server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut message = || {
        let m = pubsub.get_message().unwrap();
        let payload: String = m.get_payload().unwrap();
        format!("{} {payload}", m.get_channel_name())
    };

    // Grow to 4: B (2 + 1) enters, C (3 + 2) does not, and D behind it waits.
    let set = s.set_permits(4);
    assert_eq!((set.previous, set.in_use, set.refused), (Some(2), 3, 0));
    let admitted: Vec<(&str, u64)> = set
        .admitted
        .iter()
        .map(|g| (g.owner.as_str(), g.call))
        .collect();
    assert_eq!(admitted, [("b:1", 2)]);
    let b = s.granted(set.admitted[0].clone());
    assert!(a.token < b.token);
    assert!(message().starts_with(&format!("fairlock:wake:b G 2 {} ", b.token)));
    assert_eq!(s.holders(), ["a:1 1 2", "b:1 2 1"]);
    assert_eq!(s.queued(), ["c:1 3 60000 0 2", "d:1 4 60000 0 1"]);
    assert!(s.meta().unwrap().starts_with("=4 3 "), "{:?}", s.meta());

    // Shrink to 1: C (2) never fits and is told to poll; D (1) keeps its
    // place; A and B keep their 3.
    let set = s.set_permits(1);
    assert_eq!(
        (set.previous, set.in_use, set.refused, set.admitted),
        (Some(4), 3, 1, Vec::new())
    );
    assert_eq!(message(), "fairlock:wake:c H 3 -2");
    assert!(message().starts_with("fairlock:wake:d H 4 "));
    assert_eq!(s.holders(), ["a:1 1 2", "b:1 2 1"]);
    assert_eq!(s.queued(), ["d:1 4 60000 0 1"]);
    // C's queue deadline, the record of its refusal, goes at its poll.
    let poll = s.attempt_with(
        "c:1",
        3,
        Mode::Poll,
        permits(2, OF),
        0,
        Lease::Renewed(LONG),
    );
    assert_eq!(
        poll.unwrap_err().kind(),
        fairlock::ErrorKind::PermitsExceeded
    );
    let before = s.snapshot();
    for (owner, call) in [("c:1", 3), ("n:1", 9)] {
        for mode in [Mode::Try, Mode::First, Mode::Poll] {
            let err = s
                .attempt_with(owner, call, mode, permits(2, OF), 0, Lease::Renewed(LONG))
                .unwrap_err();
            assert_eq!(err.kind(), fairlock::ErrorKind::PermitsExceeded, "{err}");
            assert!(
                err.to_string().contains("asks for 2 permits")
                    && err.to_string().contains("has 1 now"),
                "{err}"
            );
        }
    }
    assert_eq!(s.snapshot(), before, "a refused call writes nothing");
    // A's 2 back: 1 still held, so D (1) waits; B's back: D enters.
    assert_eq!(s.release(&a), RELEASED);
    assert!(s.meta().unwrap().starts_with("=1 1 "), "{:?}", s.meta());
    assert_eq!(s.queued(), ["d:1 4 60000 0 1"]);
    let handed: Vec<String> = s.handed(&b).iter().map(member).collect();
    assert_eq!(handed, ["d:1 4 1"]);
    assert!(s.lone().is_some() && s.meta().unwrap().starts_with("=1 "));
    assert_eq!(s.meta_used(), Some(1));
    // Grow again, nobody queued: nothing else changes.
    let set = s.set_permits(3);
    assert_eq!(
        (set.previous, set.in_use, set.refused, set.admitted),
        (Some(1), 1, 0, Vec::new())
    );
    assert_eq!(s.status(10, 10).capacity, Some(3));
    assert!(message().starts_with("fairlock:wake:d G 4 "));

    // A call for more than a new number, queued behind a smaller head that
    // waits, holds nobody back: the shrink leaves it queued, and the
    // release that admits the head refuses it as it comes to the head.
    let e = s.take("e:1", 5, permits(2, OF));
    assert_eq!(s.queue("f:1", 6, permits(1, OF)), 0);
    assert_eq!(s.queue("g:1", 7, permits(3, OF)), 1);
    let set = s.set_permits(2);
    assert_eq!(
        (set.previous, set.in_use, set.refused, set.admitted),
        (Some(3), 3, 0, Vec::new())
    );
    assert_eq!(s.queued(), ["f:1 6 60000 0 1", "g:1 7 60000 0 3"]);
    let handed: Vec<String> = s.handed(&e).iter().map(member).collect();
    assert_eq!(handed, ["f:1 6 1"]);
    assert!(message().starts_with("fairlock:wake:f G 6 "));
    assert_eq!(message(), "fairlock:wake:g H 7 -2");
    assert!(s.queued().is_empty());
    let err = s
        .attempt_with(
            "g:1",
            7,
            Mode::Poll,
            permits(3, OF),
            0,
            Lease::Renewed(LONG),
        )
        .unwrap_err();
    assert_eq!(err.kind(), fairlock::ErrorKind::PermitsExceeded, "{err}");

    // Out of range, raw: refused before any write.
    let before = s.snapshot();
    for permits in ["0", "-1", "1.5", "", "4294967296", "x"] {
        let err = s.eval(script(Op::SetPermits), &[permits]).unwrap_err();
        assert!(
            err.to_string().contains("permits must be a whole number"),
            "{permits:?}: {err}"
        );
        assert_eq!(s.snapshot(), before, "{permits:?}");
    }
}

/// A call for 2 of 3 permits delivered again (a retry after a lost reply
/// sends the same call id again), in every mode a call is sent in, after
/// set_permits changed the permits (a grow, a shrink to its 2, a shrink
/// below them, the first number again) answers with its hold and takes no
/// second one, alone (the meta's lone hold) and beside another hold (the
/// holders zset); so does a call handed its hold while it waited, when a
/// shrink below its units came before its poll.
#[test]
fn a_call_delivered_again_after_the_permits_changed_takes_no_second_hold() {
    let mut s = sem("again");
    let ask = permits(2, 3);
    let a = s.take("a:1", 1, ask);
    let mut call = 10;
    for number in [5, 2, 1, 3] {
        s.set_permits(number);
        for beside in [false, true] {
            let after = format!("set to {number}{}", if beside { ", beside" } else { "" });
            let other = beside.then(|| {
                call += 1;
                // Beside it whatever the number: the other hold is taken
                // first, with room.
                s.set_permits(3);
                let other = s.take("b:1", call, permits(1, 3));
                s.set_permits(number);
                other
            });
            let (holders, used, queued) = (s.holders(), s.meta_used(), s.queued());
            for mode in [Mode::First, Mode::Try, Mode::Poll] {
                match s.attempt_with("a:1", 1, mode, ask, 0, Lease::Renewed(LONG)) {
                    Ok(AcquireReply::Acquired { token, .. }) => {
                        assert_eq!(token, a.token, "{mode:?} {after}")
                    }
                    other => panic!("{mode:?} {after}: {other:?}"),
                }
                assert_eq!(s.holders(), holders, "{mode:?} {after}: a second hold");
                assert_eq!(s.meta_used(), used, "{mode:?} {after}");
                assert_eq!(s.queued(), queued, "{mode:?} {after}");
            }
            if let Some(other) = other {
                assert_eq!(s.release(&other), RELEASED, "{after}");
            }
        }
    }
    // Handed while queued, then a shrink below its units, then its poll.
    s.set_permits(3);
    assert_eq!(s.queue("w:1", 2, ask), 0);
    let w = s.handed(&a);
    assert_eq!(owners(&w), ["w:1"]);
    s.set_permits(1);
    for mode in [Mode::Poll, Mode::First, Mode::Try] {
        match s.attempt_with("w:1", 2, mode, ask, 0, Lease::Renewed(LONG)) {
            Ok(AcquireReply::Acquired { token, .. }) => assert_eq!(token, w[0].token, "{mode:?}"),
            other => panic!("{mode:?}: {other:?}"),
        }
        assert_eq!(s.holders(), [member(&w[0])], "{mode:?}");
        assert_eq!(s.meta_used(), Some(2), "{mode:?}");
    }
    assert_eq!(s.release(&w[0]), RELEASED);
}
