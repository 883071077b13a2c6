//! Fencing tokens: increasing from hold to hold across clients and across a
//! restart that lost the data or kept it all (the AOF; not one from an older
//! snapshot, which gives a token out again), and when the server's clock steps back: a token is
//! last + 1 while the lock key keeps the last one (max(last + 1, server
//! clock in µs) where a step reads the clock) and the clock when the key is
//! gone, and the lock key keeps the last one
//! for `fence_life` after a hold ends. The first three tests run the server
//! under libfaketime (see `ClockedServer`) and step its wall clock back
//! 5 s, as an NTP step would; its monotonic clock keeps running.
//!
//! Measured: within the fence life a freed lock's next token comes from
//! its key; after it, a step back gives a smaller token (what a fence life
//! shorter than a clock step risks). A step moves every expiry the server
//! counts with it, so a freed lock's key lives that much longer, and a hold
//! whose lease ran out less than the step ago is held again until the
//! clock is back past its end (by then the clock alone is past its token).
//! A step forward ends a hold at Redis early, before its holder's next
//! renewal tells it.

use std::time::{Duration, Instant};

use fairlock::__test_support::LockKeys;
use fairlock::{Client, ErrorKind};
use fairlock_test_support::*;
use redis::Commands;

const STEP: Duration = Duration::from_secs(5);

/// A client of `server` with the test timings and `fence_life`.
fn client(server: &RedisServer, fence_life: Duration) -> Client {
    server
        .builder()
        .fence_life(fence_life)
        .build()
        .expect("client connects")
}

/// The lock key of `name` under the default prefix.
fn lock_key(name: &str) -> String {
    LockKeys::of_kind("fairlock", name, fairlock::LockKind::Mutex)
        .unwrap()
        .all[0]
        .clone()
}

/// Locks and unlocks `name`; returns the token.
fn lock_and_unlock(client: &Client, name: &str) -> u64 {
    let guard = client.fair_mutex(name).lock().unwrap();
    let token = guard.fencing_token();
    guard.unlock().unwrap();
    token
}

/// Steps the server's clock back by [`STEP`] and checks that a token from
/// the clock alone would now be below `token`.
fn step_back_below(clocked: &mut ClockedServer, conn: &mut redis::Connection, token: u64) {
    clocked.step_back(STEP);
    let now = server_time_us(conn);
    assert!(
        now < token as i64,
        "after the step the server clock ({now} µs) should be below token {token}"
    );
}

#[test]
fn a_freed_lock_keeps_its_last_token_through_a_step_back() {
    let mut clocked = ClockedServer::start();
    let mut conn = clocked.server.conn();
    let client = client(&clocked.server, Duration::from_secs(5));
    let (name, key) = ("fence-freed", lock_key("fence-freed"));
    let first = lock_and_unlock(&client, name);
    let counted = counted_holds(&client, name);

    step_back_below(&mut clocked, &mut conn, first.min(counted.0).min(counted.1));
    // The step moved the free key's expiry too: 5 s became about 5 s + STEP.
    let pttl: i64 = conn.pttl(&key).unwrap();
    assert!(
        pttl > STEP.as_millis() as i64,
        "free key PTTL {pttl} ms after the step"
    );

    let next = lock_and_unlock(&client, name);
    eprintln!(
        "freed, step -{STEP:?}: token {first} then {next}; key PTTL {pttl} ms after the step"
    );
    assert_eq!(next, first + 1, "the next token comes from the key");
    counted_holds_after_a_step_back(&client, name, counted);
}

/// A permit and a write of the semaphore and rwlock `name`, taken and
/// released: their tokens.
fn counted_holds(client: &Client, name: &str) -> (u64, u64) {
    let permit = client.fair_semaphore(name, 3).acquire().unwrap();
    let write = client.fair_rwlock(name).write().unwrap();
    (permit.fencing_token(), write.fencing_token())
}

/// The counted kinds keep their last token through a step back as the
/// mutex does: a freed semaphore's or rwlock's meta keeps it for the fence
/// life, so every next hold's token is above it, whichever path takes it
/// (a free lock's take, `last + 1`; a weighted or upgradable take, an
/// upgrade and a downgrade, `max(last + 1, server clock in µs)`, the clock
/// now behind). `before`: [`counted_holds`]'s tokens, before the step.
fn counted_holds_after_a_step_back(client: &Client, name: &str, before: (u64, u64)) {
    let (semaphore, rwlock) = (client.fair_semaphore(name, 3), client.fair_rwlock(name));
    let permit = semaphore.acquire().unwrap().fencing_token();
    let mut tokens = vec![("permit", before.0, permit)];
    tokens.push((
        "permits",
        permit,
        semaphore.acquire_many(2).unwrap().fencing_token(),
    ));
    let write = rwlock.write().unwrap().fencing_token();
    tokens.push(("write", before.1, write));
    let upgradable = rwlock.upgradable_read().unwrap();
    let u_token = upgradable.fencing_token();
    tokens.push(("upgradable", write, u_token));
    let upgraded = upgradable.upgrade().unwrap();
    let w_token = upgraded.fencing_token();
    tokens.push(("upgrade", u_token, w_token));
    let read = upgraded.downgrade().unwrap();
    tokens.push(("downgrade", w_token, read.fencing_token()));
    drop(read);
    eprintln!("counted, step -{STEP:?}: (what, before, after) {tokens:?}");
    for (what, before, after) in tokens {
        assert!(after > before, "{what}: token {after} after {before}");
    }
}

#[test]
fn a_lease_that_ran_out_is_held_again_after_a_step_back_and_the_next_token_is_larger() {
    let mut clocked = ClockedServer::start();
    let mut conn = clocked.server.conn();
    let fence = Duration::from_secs(5);
    let (holder, other) = (
        client(&clocked.server, fence),
        client(&clocked.server, fence),
    );
    let (name, key) = ("fence-lapsed", lock_key("fence-lapsed"));
    let lease = Duration::from_millis(200);

    let guard = holder
        .fair_mutex(name)
        .with_fixed_lease(lease)
        .lock()
        .unwrap();
    let lapsed = guard.fencing_token();
    std::mem::forget(guard);
    assert!(
        wait_until(Duration::from_secs(3), || lease_left_of(&mut conn, &key)
            .is_some_and(|left| left <= 0)),
        "the 200 ms lease did not run out"
    );
    assert!(!other.fair_mutex(name).is_locked().unwrap());

    step_back_below(&mut clocked, &mut conn, lapsed);
    // The key's expiry moved back with the clock: the hold that ran out is
    // a hold again, with about the step (less the time since it ran out)
    // of lease left.
    let (owner, token, _) = holder_of(&mut conn, &key).expect("a hold under the lock key");
    assert!(owner.starts_with(holder.id()), "{owner}");
    assert_eq!(token, lapsed.to_string());
    let left = lease_left_of(&mut conn, &key).unwrap();
    let step_ms = STEP.as_millis() as i64;
    assert!(
        (step_ms - 1_000..step_ms).contains(&left),
        "lease left {left} ms"
    );
    let mutex = other.fair_mutex(name);
    assert!(
        mutex.try_lock().unwrap().is_none(),
        "the lapsed hold is back"
    );

    let asked = Instant::now();
    let next = mutex
        .try_lock_for(STEP + Duration::from_secs(10))
        .unwrap()
        .expect("the lock once the clock is past the old lease end again");
    let waited = asked.elapsed();
    let next_token = next.fencing_token();
    next.unlock().unwrap();
    eprintln!(
        "lapsed, step -{STEP:?}: token {lapsed} held again with {left} ms left; \
         next token {next_token} (+{} µs) after {:.0} ms",
        next_token - lapsed,
        ms(waited)
    );
    assert!(
        waited >= Duration::from_millis(left as u64 * 9 / 10),
        "got it after {waited:?}, {left} ms of the revived lease left"
    );
    // From the clock, back past the old lease end, not from the key: the
    // key's last token was not needed.
    assert!(next_token >= lapsed + lease.as_micros() as u64 - 2_000);
}

#[test]
fn a_step_back_after_the_fence_life_gives_a_smaller_token() {
    let mut clocked = ClockedServer::start();
    let mut conn = clocked.server.conn();
    let client = client(&clocked.server, fairlock::MIN_FENCE_LIFE);
    let (name, key) = ("fence-gone", lock_key("fence-gone"));
    let first = lock_and_unlock(&client, name);
    let freed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(3), || !conn
            .exists::<_, bool>(&key)
            .unwrap()),
        "the lock key outlived its 1 s fence life by 2 s"
    );
    let gone = freed.elapsed();

    step_back_below(&mut clocked, &mut conn, first);
    let next = lock_and_unlock(&client, name);
    let behind = first as i64 - next as i64;
    eprintln!(
        "fence life {:?}, key gone {:.0} ms after the unlock, step -{STEP:?}: \
         token {first} then {next}, {behind} µs smaller",
        fairlock::MIN_FENCE_LIFE,
        ms(gone)
    );
    assert!(next < first, "token {next} after {first}");
    // The new token is the stepped clock: the step less the time between.
    assert!(
        (STEP.as_micros() as i64 - 2_000_000..STEP.as_micros() as i64).contains(&behind),
        "{behind} µs"
    );
}

#[test]
fn the_key_outlives_a_release_by_the_fence_life_and_no_longer() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = client(&server, Duration::from_secs(1));
    let (name, key) = ("fence-life", lock_key("fence-life"));
    let token = lock_and_unlock(&client, name);
    let freed = Instant::now();
    let pttl: i64 = conn.pttl(&key).unwrap();
    assert!(
        (1..=1000).contains(&pttl),
        "PTTL {pttl} ms after the unlock"
    );
    let stored: String = conn.get(&key).unwrap();
    let free = format!("v{} {token} - ", fairlock::DATA_FORMAT);
    assert!(stored.starts_with(&free), "{stored:?}");
    assert!(
        wait_until(Duration::from_secs(2), || !conn
            .exists::<_, bool>(&key)
            .unwrap()),
        "the lock key still there 2 s after the unlock"
    );
    eprintln!(
        "fence life 1 s: PTTL {pttl} ms right after the unlock, gone after {:.0} ms",
        ms(freed.elapsed())
    );
}

#[test]
fn tokens_increase_across_clients_and_a_restart_that_lost_data() {
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

/// Tokens of `name` from `count` holds taken and released one after another.
fn holds(client: &Client, name: &str, count: usize) -> Vec<u64> {
    let mutex = client.fair_mutex(name);
    (0..count)
        .map(|_| mutex.lock().unwrap().fencing_token())
        .collect()
}

/// The first token a lock of `name` gets once the server is back.
fn first_after_restart(client: &Client, name: &str) -> u64 {
    retry_while_unreachable(|| client.fair_mutex(name).lock()).fencing_token()
}

/// A server that comes back with its data keeps tokens increasing only if
/// that data is all it had: from its AOF (every write is there before its
/// reply, so a process killed loses none) the next token is above every
/// earlier one; from an RDB snapshot taken before the last holds, the lock's
/// key names an older last token, and the next hold gets again a token one
/// of those holds had (what docs/guarantees.md says of a server that comes
/// back with older data, and of a failover to a replica that lags).
#[test]
fn a_restart_keeps_tokens_increasing_from_the_aof_but_not_from_an_older_snapshot() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes"]);
    let client = server.client();
    let issued = holds(&client, "persisted", 3);
    server.kill();
    server.start_again();
    let after = first_after_restart(&client, "persisted");
    eprintln!("from the AOF: {after} after {issued:?}");
    assert!(after > issued[2], "token {after} after {issued:?}");

    let mut server = RedisServer::start();
    let client = server.client();
    let mut issued = holds(&client, "snapshot", 1);
    let () = redis::cmd("SAVE").query(&mut server.conn()).unwrap();
    issued.extend(holds(&client, "snapshot", 3));
    server.kill();
    server.start_again();
    let after = first_after_restart(&client, "snapshot");
    eprintln!("from an older snapshot: {after} after {issued:?}");
    assert_eq!(after, issued[1], "the snapshot's last token + 1");
}

/// A step forward of the server's clock ends every lease and liveness
/// deadline at Redis early by as much: a hold with less of its lease left
/// than the step is over at once, and the next waiter may take the lock
/// before the holder's next renewal tells it (its token still larger);
/// the waiters, their deadlines passed too, rejoin in their order (one
/// client's: the heartbeat that finds them gone has them ask again in
/// order; waiters of three clients rejoined as their heartbeats came,
/// [1, 2, 0] once on a busy machine). The step comes just after the
/// holder's renewal (a 9 s lease, renewed every 3 s), the waiters
/// heartbeating every 0.67 s.
#[test]
fn a_step_forward_ends_a_hold_at_redis_before_its_holder_knows() {
    let mut clocked = ClockedServer::start();
    let mut conn = clocked.server.conn();
    let build = |secs: u64| {
        let time = Duration::from_secs(secs);
        let builder = clocked.server.builder().lease(time).waiter_timeout(time);
        builder.build().expect("client connects")
    };
    let waiters = build(2);
    let holder = build(9);
    let (name, key) = ("fence-forward", lock_key("fence-forward"));
    let guard = holder.fair_mutex(name).lock().unwrap();
    let signal = guard.lease_signal();
    let (sent, got) = std::sync::mpsc::channel();
    let mut threads = Vec::new();
    for i in 0..3 {
        let (mutex, sent) = (waiters.fair_mutex(name), sent.clone());
        threads.push(std::thread::spawn(move || {
            let guard = mutex.lock().unwrap();
            sent.send((i, Instant::now(), guard.fencing_token()))
                .unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }));
        let observer = holder.fair_mutex(name);
        assert!(wait_until(Duration::from_secs(5), || observer
            .queue_len()
            .unwrap()
            == i + 1));
    }
    // Just after a renewal: the key's PTTL goes up.
    let mut last: i64 = conn.pttl(&key).unwrap();
    assert!(wait_until(Duration::from_secs(5), || {
        let pttl: i64 = conn.pttl(&key).unwrap();
        std::mem::replace(&mut last, pttl) + 1000 < pttl
    }));
    clocked.set_offset(10);
    let stepped = Instant::now();
    let lost = signal.wait_timeout(Duration::from_secs(5));
    let lost_after = stepped.elapsed();
    for thread in threads {
        join_within(thread, Duration::from_secs(5), "a waiter");
    }
    let held: Vec<_> = got.try_iter().collect();
    let order: Vec<usize> = held.iter().map(|(i, _, _)| *i).collect();
    let first_after = held[0].1 - stepped;
    eprintln!(
        "step +10 s: the first waiter held {first_after:?} after it, the holder heard \
         {lost:?} {lost_after:?} after it; order {order:?}"
    );
    assert_eq!(lost, Some(fairlock::LeaseEnd::Lost));
    assert!(lost_after < Duration::from_millis(4500), "{lost_after:?}");
    assert!(
        first_after < lost_after,
        "{first_after:?} vs {lost_after:?}"
    );
    assert_eq!(order, vec![0, 1, 2]);
    assert!(held
        .iter()
        .all(|(_, _, token)| *token > guard.fencing_token()));
    assert!(held.windows(2).all(|w| w[0].2 < w[1].2));
}

/// The same for a fixed lease of 4 s, which no renewal checks: its holder
/// hears `Lost` at its own count's end, the waiter holding long before.
#[test]
fn a_step_forward_ends_a_fixed_lease_at_redis_before_its_own_end() {
    let mut clocked = ClockedServer::start();
    let build = |secs: u64| {
        let time = Duration::from_secs(secs);
        let builder = clocked.server.builder().lease(time).waiter_timeout(time);
        builder.build().expect("client connects")
    };
    let (waiter, holder) = (build(2), build(9));
    let name = "fence-forward-fixed";
    let fixed = holder
        .fair_mutex(name)
        .with_fixed_lease(Duration::from_secs(4));
    let guard = fixed.lock().unwrap();
    let signal = guard.lease_signal();
    let mutex = waiter.fair_mutex(name);
    let waiting = std::thread::spawn(move || {
        let guard = mutex.lock().unwrap();
        (Instant::now(), guard.fencing_token())
    });
    assert!(wait_until(Duration::from_secs(5), || holder
        .fair_mutex(name)
        .queue_len()
        .unwrap()
        == 1));
    clocked.set_offset(10);
    let stepped = Instant::now();
    let lost = signal.wait_timeout(Duration::from_secs(10));
    let lost_after = stepped.elapsed();
    let (held_at, token) = join_within(waiting, Duration::from_secs(5), "the waiter");
    let held_after = held_at - stepped;
    eprintln!(
        "step +10 s, fixed lease 4 s: the waiter held {held_after:?} after it, the holder \
         heard {lost:?} {lost_after:?} after it"
    );
    assert_eq!(lost, Some(fairlock::LeaseEnd::Lost));
    assert!(held_after < lost_after, "{held_after:?} vs {lost_after:?}");
    assert!(lost_after > Duration::from_secs(3), "{lost_after:?}");
    assert!(token > guard.fencing_token());
}

/// A semaphore's meta deleted by hand (or evicted) while two permits are
/// held, a call queueing and leaving meanwhile (which writes the meta
/// anew): once both holds are released, the next permit's token is still
/// above theirs, as the clock alone keeps it after the meta is gone.
#[test]
fn a_semaphores_meta_deleted_while_held_gives_no_smaller_token() {
    let server = RedisServer::start();
    let client = server.client();
    let semaphore = client.fair_semaphore("meta-gone", 2);
    let (a, b) = (semaphore.acquire().unwrap(), semaphore.acquire().unwrap());
    let last = a.fencing_token().max(b.fencing_token());
    let keys = LockKeys::of_kind("fairlock", "meta-gone", fairlock::LockKind::Semaphore).unwrap();
    let () = server.conn().del(&keys.all[2]).unwrap();
    let waited = semaphore
        .try_acquire_for(Duration::from_millis(50))
        .unwrap();
    assert!(waited.is_none(), "both permits are held");
    a.unlock().unwrap();
    b.unlock().unwrap();
    let next = semaphore.acquire().unwrap().fencing_token();
    assert!(
        next > last,
        "token {next} after the meta was gone is not above {last}"
    );
}

/// As above, for a reader-writer lock's meta deleted while an upgradable
/// read and a read are held, its upgrade queueing and giving up meanwhile.
#[test]
fn a_rwlocks_meta_deleted_while_held_gives_no_smaller_token() {
    let server = RedisServer::start();
    let (client, other) = (server.client(), server.client());
    let upgradable = client.fair_rwlock("meta-gone").upgradable_read().unwrap();
    let read = other.fair_rwlock("meta-gone").read().unwrap();
    let last = upgradable.fencing_token().max(read.fencing_token());
    let keys = LockKeys::of_kind("fairlock", "meta-gone", fairlock::LockKind::RwLock).unwrap();
    let () = server.conn().del(&keys.all[2]).unwrap();
    let upgradable = (upgradable
        .try_upgrade_for(Duration::from_millis(50))
        .unwrap())
    .expect_err("a read is held beside it");
    upgradable.unlock().unwrap();
    read.unlock().unwrap();
    let next = client
        .fair_rwlock("meta-gone")
        .read()
        .unwrap()
        .fencing_token();
    assert!(
        next > last,
        "token {next} after the meta was gone is not above {last}"
    );
}

/// A semaphore's meta deleted while two permits are held: a revocation,
/// then a force unlock, reach both holds by their messages at once (they
/// named the meta's last token, 0 when it was gone, which no hold is up
/// to), not at a watchdog round 10 s later, or for a revocation never.
#[test]
fn the_holds_a_deleted_meta_left_are_revoked_and_force_unlocked() {
    let server = RedisServer::start();
    let client = (server.builder())
        .lease(Duration::from_secs(60))
        .waiter_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let semaphore = client.fair_semaphore("meta-gone", 2);
    let (a, b) = (semaphore.acquire().unwrap(), semaphore.acquire().unwrap());
    let keys = LockKeys::of_kind("fairlock", "meta-gone", fairlock::LockKind::Semaphore).unwrap();
    let () = server.conn().del(&keys.all[2]).unwrap();
    assert_eq!(semaphore.revoke().unwrap(), 2);
    let told = || wait_until(Duration::from_secs(2), || a.is_revoked() && b.is_revoked());
    assert!(told(), "the holds were not asked to let go");
    assert!(semaphore.force_unlock().unwrap());
    let lost = wait_until(Duration::from_secs(2), || {
        a.is_lease_lost() && b.is_lease_lost()
    });
    assert!(lost, "the holds were not told they were force unlocked");
}
