//! A revocation (revoke.lua) driven directly, on every kind: it frees
//! nothing, records the request beside the holds of its time (the mutex's
//! lock key, the counted meta) and every renewal of such a hold says so
//! (renew.lua's 2), through every step that writes a hold again (a
//! re-entry and its release, a second hold beside a lone one, another
//! hold's release), but never of a hold taken after it; the marks that make
//! a release or a force release delivered twice count once work beside it,
//! and the record goes with the last hold.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fairlock::__test_support::{RenewReply, Revoke, Revoked};

use super::driver::*;

fn renewal(s: &mut Lock, hold: &Hold, lease: Option<Duration>) -> RenewReply {
    s.run(&Renew {
        owner: &hold.owner,
        token: hold.token,
        first: hold.token,
        call: hold.call,
        lease,
    })
    .unwrap()
}

/// A revoke of a call of its own.
fn revoke(s: &mut Lock) -> Revoked {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    revoke_as(s, &format!("r#{}", CALLS.fetch_add(1, Ordering::Relaxed)))
}

fn revoke_as(s: &mut Lock, call_key: &str) -> Revoked {
    let call_key = call_key.to_owned();
    s.run(&Revoke { call_key }).unwrap()
}

/// Holds asked are renewed and told so; the others are renewed.
fn assert_asked(s: &mut Lock, asked: &[&Hold], not_asked: &[&Hold]) {
    for hold in asked {
        assert_eq!(
            renewal(s, hold, Some(LONG)),
            RenewReply::Revoked,
            "{hold:?}"
        );
        assert_eq!(renewal(s, hold, None), RenewReply::Revoked, "{hold:?}");
    }
    for hold in not_asked {
        assert_eq!(
            renewal(s, hold, Some(LONG)),
            RenewReply::Renewed,
            "{hold:?}"
        );
    }
}

#[test]
fn a_revocation_asks_the_holds_of_its_time_and_no_later_one() {
    for kind in [
        LockKind::Mutex,
        LockKind::Election,
        LockKind::Semaphore,
        LockKind::RwLock,
    ] {
        let mut s = kind.lock("revoked");
        let one = kind.one(3);
        assert_eq!(
            revoke(&mut s),
            Revoked { holds: 0, up_to: 0 },
            "{kind:?}: free"
        );
        let a = s.take("a:1", 1, one);
        assert_eq!(
            revoke(&mut s),
            Revoked {
                holds: 1,
                up_to: a.token
            },
            "{kind:?}"
        );
        assert_asked(&mut s, &[&a], &[]);
        if kind == LockKind::Mutex || kind == LockKind::Election {
            // A re-entry shares the hold (and its token): asked; its
            // release writes the hold again, still asked.
            let again = s.take_with("a:1", 2, one, a.token);
            assert_eq!(again.token, a.token);
            assert_eq!(s.release(&again), ReleaseReply::Released { left: 1 });
            assert_asked(&mut s, &[&a], &[]);
            assert_eq!(s.release(&a), ReleaseReply::Released { left: 0 });
            // Delivered twice, it still counts once (the mark beside the
            // request is read as before).
            assert_eq!(s.release(&a), ReleaseReply::Released { left: 0 });
            let b = s.take("b:1", 3, one);
            assert_asked(&mut s, &[], &[&b]);
            // A force release of an asked hold, delivered twice, frees once.
            assert_eq!(revoke(&mut s).holds, 1);
            let freed = s.force_release("op#1");
            assert_eq!(freed.holder.as_deref(), Some("b:1"));
            assert_eq!(s.force_release("op#1"), freed);
            // Its renewal says why it is gone: the mark names the release.
            let renewed = renewal(&mut s, &b, Some(LONG));
            assert_eq!(renewed, RenewReply::ForceReleased);
            let c = s.take("c:1", 4, one);
            assert_asked(&mut s, &[], &[&c]);
        } else {
            // A second hold, after the request, moves the lone one into the
            // holders zset beside it: the first still asked, not the second.
            let b = s.take("b:1", 2, one);
            assert_asked(&mut s, &[&a], &[&b]);
            // Asked again: both, and a third hold after that is not.
            assert_eq!(
                revoke(&mut s),
                Revoked {
                    holds: 2,
                    up_to: b.token
                }
            );
            let c = s.take("c:1", 3, one);
            assert_asked(&mut s, &[&a, &b], &[&c]);
            assert_eq!(s.release(&a), RELEASED);
            assert_eq!(s.release(&a), RELEASED, "delivered twice");
            assert_asked(&mut s, &[&b], &[&c]);
            assert_eq!(s.release(&b), RELEASED);
            assert_asked(&mut s, &[], &[&c]);
            assert_eq!(s.release(&c), RELEASED);
            let meta = s.meta().unwrap();
            assert!(
                !meta.contains('^'),
                "the record goes with the last hold: {meta}"
            );
            let d = s.take("d:1", 4, one);
            assert_asked(&mut s, &[], &[&d]);
        }
    }
}

/// A revoke delivered again after the lock moved on (its reply lost, or
/// sent again after a stop) answers as the first did and asks nobody: the
/// record of its own (not the force release's, which a revoke must not
/// overwrite while that call's repeat may still come) says it ran.
#[test]
fn a_revoke_sent_again_after_the_lock_moved_on_asks_nobody() {
    for kind in [
        LockKind::Mutex,
        LockKind::Election,
        LockKind::Semaphore,
        LockKind::RwLock,
    ] {
        let mut s = kind.lock("revoke-again");
        let all = kind.all(1);
        // Free: nobody asked; then a takes, and the repeat asks nobody.
        let none = Revoked { holds: 0, up_to: 0 };
        assert_eq!(revoke_as(&mut s, "r#1"), none, "{kind:?}");
        let a = s.take("a:1", 1, all);
        assert_eq!(revoke_as(&mut s, "r#1"), none, "{kind:?}: the repeat");
        assert_asked(&mut s, &[], &[&a]);
        // a asked; a force release between the revoke and its repeat
        // (each keeps its record); b takes.
        let first = revoke_as(&mut s, "r#2");
        assert_eq!(first.holds, 1, "{kind:?}");
        let freed = s.force_release("f#1");
        assert_eq!(freed.holds, 1, "{kind:?}");
        let b = s.take("b:1", 2, all);
        assert_eq!(revoke_as(&mut s, "r#2"), first, "{kind:?}: the repeat");
        assert_eq!(s.force_release("f#1"), freed, "{kind:?}: the repeat");
        assert_asked(&mut s, &[], &[&b]);
        assert_eq!(s.holders(), [member(&b)], "{kind:?}: b still holds");
    }
}

/// A revoke of a lock whose hold ran out (its key kept less than a fence
/// life more) keeps its record no longer than that key (the driver checks
/// it after the step): a record kept a fence life outlived its anchor.
#[test]
fn a_revoke_of_a_run_out_hold_keeps_its_record_no_longer_than_the_lock() {
    for kind in [
        LockKind::Mutex,
        LockKind::Election,
        LockKind::Semaphore,
        LockKind::RwLock,
    ] {
        let mut s = kind.lock("revoke-run-out");
        s.take_fixed("a:1", 1, kind.all(1), SHORT);
        sleep(SHORT + Duration::from_millis(50));
        assert_eq!(revoke(&mut s).holds, 0, "{kind:?}");
    }
}
