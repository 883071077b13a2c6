//! Proof by a model: random operation sequences against the
//! real scripts, checked step by step against a reference model of each
//! engine in plain Rust.
//!
//! Virtual clients (model/step.rs) issue every operation — acquire (first
//! attempt, poll, try; on the mutex engine a re-entry with a live guard),
//! release, renew, heartbeat, cancel, abandon, force release, revoke,
//! set_permits, a rwlock's upgrade and downgrade — with
//! the last call delivered again now and then (a retry after a lost
//! reply), replies the client never acts on (every reply is checked, none
//! is needed for the next step: tokens are named, not remembered),
//! clients that go silent (nothing makes a client beat or renew), and
//! steps of the server's clock, frozen between steps, to just before, at
//! and just after a lease end or a liveness deadline (model/server.rs).
//! After every step the reply must be one the model allows, and the keys
//! read back must hold what the model holds: never more holders than the
//! kind allows, grants in queue order, tokens strictly increasing, every
//! key with a TTL, and at the end of a run, once time passes every lease
//! and fence life, no key left. A divergence is shrunk to a minimal
//! sequence and printed with its seed (model/explore.rs).
//!
//! FAIRLOCK_MODEL_STEPS sets the steps per engine (default 50 000: the
//! mutex engine's half on a mutex, half on an election; the counted
//! engine's half on a semaphore, half on a rwlock, each pair on two
//! threads); FAIRLOCK_MODEL_SEED the first seed. The planted bugs (`planted_*`)
//! show that the check finds what it should: each changes one script's
//! text and must be caught within a bounded number of steps.

mod counted;
mod explore;
mod mutex;
mod server;
mod step;

use std::time::Instant;

use fairlock::__test_support::{LockKind, Mode, RW_CAPACITY, RW_UPGRADABLE};

use explore::{Gen, Machine, Run};
use fairlock_test_support::Lcg;
use server::Plant;
use step::{Call, Step, Token};

/// Steps per run: a failing run shrinks from at most this many.
const RUN: usize = 2_000;

fn steps() -> usize {
    std::env::var("FAIRLOCK_MODEL_STEPS").map_or(50_000, |s| s.parse().expect("a number of steps"))
}

fn first_seed() -> u64 {
    std::env::var("FAIRLOCK_MODEL_SEED").map_or(37, |s| s.parse().expect("a seed"))
}

fn gen(kind: LockKind) -> Gen {
    match kind {
        LockKind::Semaphore => Gen {
            kind,
            capacity: 3,
            units: vec![1, 1, 2, 3],
        },
        LockKind::RwLock => Gen {
            kind,
            capacity: RW_CAPACITY,
            units: vec![1, 1, RW_UPGRADABLE, RW_UPGRADABLE, RW_CAPACITY],
        },
        _ => Gen {
            kind,
            capacity: 1,
            units: vec![1],
        },
    }
}

/// `total` checked steps on a lock of `kind`, in runs of RUN steps; panics
/// with the shrunk sequence and its seed at a divergence.
fn check_engine<M: Machine>(kind: LockKind, total: usize) {
    let started = Instant::now();
    let mut run = Run::<M>::new(kind, None);
    let gen = gen(kind);
    let mut done = 0;
    let mut seed = first_seed();
    while done < total {
        let n = RUN.min(total - done);
        if let Err(d) = run.explore(seed, n, &gen) {
            panic!(
                "{kind:?}: the scripts diverge from the model (FAIRLOCK_MODEL_SEED={seed}), \
                 shrunk to {} steps:\n{:#?}\n{}",
                d.steps.len(),
                d.steps,
                d.what
            );
        }
        done += n;
        seed += 1;
        if done % 100_000 == 0 && done < total {
            eprintln!("model: {kind:?}: {done} steps, {:?}", started.elapsed());
        }
    }
    eprintln!(
        "model: {kind:?}: {done} steps, 0 divergences, {:?}",
        started.elapsed()
    );
}

/// The steps it took to catch `plant` on a lock of `kind` (runs from seed
/// 1 on), or a panic when `limit` steps do not.
fn catch<M: Machine>(kind: LockKind, plant: Plant, limit: usize) -> usize {
    let mut run = Run::<M>::new(kind, Some(plant));
    let gen = gen(kind);
    let mut done = 0;
    let mut seed = 1;
    while done < limit {
        if let Err(d) = run.explore(seed, RUN.min(limit - done), &gen) {
            let at = d.at;
            eprintln!(
                "model: planted {plant:?} on {kind:?}: caught at step {} (seed {seed}), shrunk to {} steps: {}",
                done + at,
                d.steps.len(),
                d.what
            );
            return done + at;
        }
        done += RUN.min(limit - done);
        seed += 1;
    }
    panic!("{plant:?} on {kind:?} not caught in {limit} steps");
}

#[test]
fn the_counted_engine_keeps_to_its_model() {
    let total = steps() / 2;
    let rwlock =
        std::thread::spawn(move || check_engine::<counted::Model>(LockKind::RwLock, total));
    check_engine::<counted::Model>(LockKind::Semaphore, total);
    rwlock.join().unwrap();
}

#[test]
fn the_mutex_engine_keeps_to_its_model() {
    let total = steps() / 2;
    let election =
        std::thread::spawn(move || check_engine::<mutex::Model>(LockKind::Election, total));
    check_engine::<mutex::Model>(LockKind::Mutex, total);
    election.join().unwrap();
}

/// How many steps a planted bug may take to be caught.
const PLANT_LIMIT: usize = 20_000;

/// (a) A grant that skips the queue's head: a free lock goes to the last
/// waiter instead of the first.
const SKIP_HEAD: Plant = (
    "local popped = redis.pcall('ZPOPMIN', QUEUE)",
    "local popped = redis.call('ZREVRANGEBYSCORE', QUEUE, '(1125899906842624', '-inf', 'LIMIT', 0, 1); if popped[1] then redis.call('ZREM', QUEUE, popped[1]) end",
);

/// (c) A missing TTL on one key: the queue is never given one.
const NO_TTL: Plant = (
    "redis.call('PEXPIRE', QUEUE, covered and room < 2 * ms and fmt(room) or queue_life_text(ms))",
    "",
);

/// (d) A release that does not check the token: any hold of the owner
/// goes, whatever token the release names.
const NO_TOKEN_CHECK: Plant = (
    "if holder ~= owner or held ~= token then",
    "if holder ~= owner then",
);

/// A force release that forgets its record: sent again, it frees whoever
/// holds the lock since (both engines' scripts read it with this line).
const NO_RECORD: Plant = ("local before = forced_before()", "local before = nil");

/// An election that does not announce the end of a hold nobody takes over.
const SILENT_RESIGN: Plant = ("ANNOUNCE(token, nil, token)", "");

#[test]
fn planted_bugs_in_the_mutex_engine_are_caught() {
    for plant in [SKIP_HEAD, NO_TTL, NO_TOKEN_CHECK, NO_RECORD] {
        catch::<mutex::Model>(LockKind::Mutex, plant, PLANT_LIMIT);
    }
    catch::<mutex::Model>(LockKind::Election, SILENT_RESIGN, PLANT_LIMIT);
}

/// Found by the model (seed 37, shrunk from 2 000 steps): a call joins a
/// queue whose only other waiter died. join_queue pruned the dead waiter
/// before writing the new one's deadline, so the deadlines zset emptied
/// (and went, with its TTL) and came back from that write without one,
/// while the queue key, whose TTL was long enough, was not pushed out.
/// (The deadlines were a second key then; one key holds both now, which
/// this run checks as well.)
#[test]
fn a_waiter_that_joins_behind_only_dead_ones_leaves_its_deadline_with_a_ttl() {
    let permit = |id| Call::new(id, LockKind::Semaphore, 1, 3);
    let steps = [
        Step::SetPermits(1),
        Step::Acquire {
            call: permit(414),
            mode: Mode::Try,
            guard: Token::Zero,
            timeout: 2000,
        },
        Step::Acquire {
            call: permit(409),
            mode: Mode::Poll,
            guard: Token::Zero,
            timeout: 3000,
        },
        Step::Acquire {
            call: permit(409),
            mode: Mode::First,
            guard: Token::Zero,
            timeout: 2000,
        },
        Step::Clock(2001),
        Step::Acquire {
            call: permit(410),
            mode: Mode::Poll,
            guard: Token::Zero,
            timeout: 3000,
        },
    ];
    let mut run = Run::<counted::Model>::new(LockKind::Semaphore, None);
    assert_eq!(run.replay(&steps), None);
}

/// A renewal at the very ms its lease runs out finds the hold lost, as
/// every other script then finds the lock free (lib/mutex.lua's
/// read_lock), and does not renew it. Its token is named as issued: the
/// random runs name a hold's token mostly as the model's live hold, none
/// at that ms, and did not catch renew.lua's check made `<` in 10 000
/// steps.
#[test]
fn a_renewal_at_the_end_of_its_lease_finds_the_hold_lost() {
    let call = Call::new(5, LockKind::Mutex, 1, 1);
    let steps = [
        Step::Acquire {
            call: call.clone(),
            mode: Mode::Try,
            guard: Token::Zero,
            timeout: 2000,
        },
        Step::Clock(call.lease()),
        Step::Renew {
            call,
            token: Token::Back(0),
            lease: Some(2000),
        },
    ];
    let mut run = Run::<mutex::Model>::new(LockKind::Mutex, None);
    assert_eq!(run.replay(&steps), None);
}

/// (b) A permit count off by one: a new call takes a unit more than there
/// are free.
const OFF_BY_ONE: Plant = (
    "if used + units <= capacity",
    "if used + units <= capacity + 1",
);

/// (e) An upgrade that lets a queued writer pass: its claim queues at the
/// tail instead of ahead of every waiter.
const CLAIM_AT_TAIL: Plant = (
    "redis.call('ZADD', QUEUE, fmt(first_number() - 1), claim)",
    "redis.call('ZADD', QUEUE, (tonumber(redis.call('ZRANGE', QUEUE, '(1125899906842624', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')[2]) or 0) + 1, claim)",
);

#[test]
fn planted_bugs_in_the_counted_engine_are_caught() {
    catch::<counted::Model>(LockKind::Semaphore, OFF_BY_ONE, PLANT_LIMIT);
    catch::<counted::Model>(LockKind::RwLock, CLAIM_AT_TAIL, PLANT_LIMIT);
    catch::<counted::Model>(LockKind::Semaphore, NO_RECORD, PLANT_LIMIT);
}

/// The model's own bug, found by a long run (seed 70): a dead waiter that
/// asks again may keep its place (not dropped yet) or, dropped meanwhile
/// (here by the handoff's look for the next head), be queued anew at the
/// tail; the model allowed only the first.
#[test]
fn a_dead_waiter_that_asks_again_may_be_queued_anew() {
    let call = |id| Call::new(id, LockKind::Mutex, 1, 1);
    let acquire = |id, mode, timeout| Step::Acquire {
        call: call(id),
        mode,
        guard: Token::Zero,
        timeout,
    };
    let steps = [
        acquire(131, Mode::First, 3000),
        acquire(121, Mode::First, 3000),
        Step::Clock(2700),
        acquire(136, Mode::First, 2000),
        acquire(131, Mode::Poll, 2000),
        Step::Heartbeat {
            calls: vec![call(136)],
            timeout: 3000,
        },
        acquire(140, Mode::Poll, 3000),
        Step::Clock(2001),
        acquire(131, Mode::First, 2000),
    ];
    let mut run = Run::<mutex::Model>::new(LockKind::Mutex, None);
    assert_eq!(run.replay(&steps), None);
}

/// Found by a long run (FAIRLOCK_MODEL_SEED=10143, after some 200 000
/// rwlock steps): a repeat of an acquire call whose upgradable read was
/// downgraded (a delivery of the call that arrives after the client, told
/// by another, downgraded) did not find its hold, which the scripts looked
/// up by a name that carries its units, and took a second one, although a
/// call delivered twice must answer with its hold; downgraded in turn, the
/// second hold took the first's name in the holders zset, and the first
/// was gone while the meta still counted its unit (a write could never be
/// admitted again while the lock stayed in use). The acquire script now
/// looks a call's hold up under the names an upgrade or a downgrade gives
/// it too (lua/lib/counted.lua's hold_of_call), as the model does.
#[test]
fn a_repeat_of_a_downgraded_call_takes_no_second_hold() {
    let call = Call::new(80, LockKind::RwLock, RW_UPGRADABLE, RW_CAPACITY);
    let acquire = |mode, timeout| Step::Acquire {
        call: call.clone(),
        mode,
        guard: Token::Zero,
        timeout,
    };
    let down = |token| Step::Downgrade {
        call: call.clone(),
        token,
        to: fairlock::__test_support::Access::Read,
    };
    let steps = [
        acquire(Mode::Try, 3000),
        down(Token::Held),
        acquire(Mode::First, 2000),
        down(Token::Back(0)),
    ];
    let mut run = Run::<counted::Model>::new(LockKind::RwLock, None);
    assert_eq!(run.replay(&steps), None);
}

/// Found by a long run (FAIRLOCK_MODEL_SEED=5001): a release of a lone
/// hold hands the lock to a head that takes every unit (here a write) by
/// its fast path, which reads nothing of the queue behind that head, so a
/// dead waiter there stays queued until a later call drops it (as a
/// mutex's handoff leaves it); the model dropped it at once.
#[test]
fn a_handoff_that_fills_the_lock_leaves_dead_waiters_behind_it() {
    let call = |id, units| Call::new(id, LockKind::RwLock, units, RW_CAPACITY);
    let acquire = |id, units, mode, timeout| Step::Acquire {
        call: call(id, units),
        mode,
        guard: Token::Zero,
        timeout,
    };
    let steps = [
        acquire(317, RW_UPGRADABLE, Mode::Try, 2000),
        acquire(301, RW_CAPACITY, Mode::Poll, 2000),
        acquire(319, RW_UPGRADABLE, Mode::First, 3000),
        Step::Clock(3001),
        acquire(301, RW_CAPACITY, Mode::Poll, 2000),
        Step::Release {
            call: call(317, RW_UPGRADABLE),
            token: Token::Held,
        },
    ];
    let mut run = Run::<counted::Model>::new(LockKind::RwLock, None);
    assert_eq!(run.replay(&steps), None);
}
