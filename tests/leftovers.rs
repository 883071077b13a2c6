//! Every failed call leaves nothing behind in Redis: no hold, queue entry or
//! grant that nobody will release, no key without a TTL, no guard the hold
//! count does not know of. A call whose outcome is unknown (it timed out,
//! and Redis may run it later) counts as possibly applied, and the client
//! undoes exactly that call once Redis answers again; a setting out of its
//! documented range fails before any I/O. And what a lock leaves when all
//! went well: every key has a TTL while waiters queue and after the last
//! release, so an idle lock's keys all expire.
use fairlock_test_support::*;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use fairlock::{Bound, Client, ClientBuilder, ErrorKind, FairMutex, FairMutexGuard, Status, Wait};

/// How long `CLIENT PAUSE ... WRITE` holds every script back.
const PAUSE: Duration = Duration::from_millis(1000);
/// The impatient client's command timeout: well inside the pause.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);
/// The impatient client's lease: an orphaned hold would last this long, far
/// beyond every bound below, while its watchdog period stays a third of the
/// 1 s waiter timeout (333 ms).
const ORPHAN_LEASE: Duration = Duration::from_secs(10);

/// The documented bounds: leases up to 365 days, timeouts up to 24 hours.
const DAY: Duration = fairlock::MAX_TIMEOUT;
const YEAR: Duration = fairlock::MAX_LEASE;
const MS: Duration = Duration::from_millis(1);

#[test]
fn the_documented_bounds_are_a_year_and_a_day() {
    assert_eq!(YEAR, Duration::from_secs(365 * 24 * 3600));
    assert_eq!(DAY, Duration::from_secs(24 * 3600));
}

/// A client whose calls time out while Redis holds writes back.
fn impatient_client(server: &RedisServer) -> Client {
    server
        .builder()
        .lease(ORPHAN_LEASE)
        .command_timeout(COMMAND_TIMEOUT)
        .build()
        .expect("the impatient client connects")
}

/// Pauses writes (every script) for [`PAUSE`], runs `call`, which must time
/// out, and waits until Redis runs writes again. Returns when it did: by
/// then Redis has run the timed-out call too (paused clients resume in
/// arrival order, and the call was sent before the probe).
fn time_out_during_a_write_pause(
    server: &RedisServer,
    what: &str,
    call: impl FnOnce() -> fairlock::Result<()>,
) -> Instant {
    let paused = pause_clients(&mut server.conn(), "WRITE", PAUSE);
    let err = match call() {
        Ok(()) => panic!("{what} succeeded while Redis held every script back"),
        Err(err) => err,
    };
    assert!(err.is_connection(), "{what}: {err:?}");
    eprintln!(
        "leftovers: {what} failed after {:.0} ms with {:?}",
        ms(paused.elapsed()),
        err.to_string()
    );
    let resumed = writes_resumed(server);
    eprintln!(
        "leftovers: writes resumed {:.0} ms after the pause began",
        ms(resumed.duration_since(paused))
    );
    resumed
}

/// Waits (at most 10 s) until a write goes through on a plain connection.
/// `PING` is not held back by a `WRITE` pause; a `DEL` of a key nobody
/// uses is, and changes nothing.
fn writes_resumed(server: &RedisServer) -> Instant {
    let mut probe = server.conn();
    probe
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg("leftovers-probe")
        .query(&mut probe)
        .expect("writes resume after the pause");
    Instant::now()
}

/// Who holds the lock, in words, naming `suspect`'s client.
fn holder_of(status: &Status, suspect: &Client) -> String {
    holder_named(status, suspect.id(), "the timed-out client")
}

/// Who holds the lock, in words: `name` for client `id`.
fn holder_named(status: &Status, id: &str, name: &str) -> String {
    match status.holder() {
        None => "free".to_owned(),
        Some(holder) => format!(
            "held by {} (count {}, lease left {:?})",
            if holder.who.client_id() == id {
                name
            } else {
                "another client"
            },
            holder.hold_count,
            holder.remaining_lease
        ),
    }
}

/// True when `client` has an entry in the lock's queue (live or not).
fn queued(status: &Status, client: &Client) -> bool {
    status
        .waiters
        .iter()
        .any(|w| w.who.client_id() == client.id())
}

fn no_key_without_ttl(server: &RedisServer, when: &str) {
    let mut conn = server.conn();
    assert_eq!(
        keys_without_ttl(&mut conn, "fairlock:*"),
        Vec::<String>::new(),
        "keys without a TTL {when}"
    );
}

/// A `lock()` that times out on a free lock is run by Redis afterwards and
/// takes the lock for the caller's thread, with no guard to release it and
/// no watchdog renewing it. The client must undo that call; until it has,
/// the orphaned hold must not count as a re-entry: the thread's next
/// `lock()` gives a guard whose release frees the lock.
#[test]
fn a_timed_out_lock_on_a_free_lock_leaves_no_hold_behind() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = impatient_client(&server);
    let other = server.client();
    let mutex = client.fair_mutex("free");
    let resumed =
        time_out_during_a_write_pause(&server, "lock() on a free lock", || mutex.lock().map(drop));
    eprintln!(
        "leftovers: right after the pause the lock is {}",
        holder_of(&mutex.status(10).unwrap(), &client)
    );

    let started = Instant::now();
    let guard = mutex.lock().expect("the same thread locks again");
    eprintln!(
        "leftovers: the same thread's next lock() took {:.0} ms",
        ms(started.elapsed())
    );
    assert_eq!(
        mutex.hold_count().unwrap(),
        1,
        "one guard, but the hold left by the timed-out lock() counted as a re-entry"
    );
    guard.unlock().unwrap();
    assert_eq!(
        mutex.hold_count().unwrap(),
        0,
        "every guard released, yet the thread still holds the lock ({})",
        holder_of(&mutex.status(10).unwrap(), &client)
    );

    let got = other
        .fair_mutex("free")
        .try_lock_for(Duration::from_secs(5))
        .unwrap();
    eprintln!(
        "leftovers: the other client's try_lock_for returned {} {:.0} ms after the pause ended",
        if got.is_some() { "the lock" } else { "nothing" },
        ms(resumed.elapsed())
    );
    assert!(got.is_some(), "another client could not get the free lock");
    drop(got);
    no_key_without_ttl(&server, "after the lock was taken and released");
}

/// A `lock()` that timed out and was run by Redis later is undone by the
/// client on its own (its watchdog, about one period after Redis answers
/// again): another client gets the lock long before the orphaned hold's
/// 10 s lease would have run out, though the first thread calls nothing.
#[test]
fn a_timed_out_lock_is_undone_without_any_further_call() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = impatient_client(&server);
    let other = server.client();
    let mutex = client.fair_mutex("idle");
    let resumed =
        time_out_during_a_write_pause(&server, "lock() on a free lock", || mutex.lock().map(drop));

    let got = other
        .fair_mutex("idle")
        .try_lock_for(Duration::from_secs(5))
        .unwrap();
    let took = resumed.elapsed();
    let status = mutex.status(10).unwrap();
    eprintln!(
        "leftovers: the other client's try_lock_for(5 s) returned {} {:.0} ms after the pause \
         ended; the lock is {}",
        if got.is_some() { "the lock" } else { "nothing" },
        ms(took),
        holder_of(&status, &client)
    );
    assert!(
        got.is_some(),
        "the hold left by the timed-out lock() was not undone within 5 s: {}",
        holder_of(&status, &client)
    );
    assert_eq!(mutex.hold_count().unwrap(), 0);
    drop(got);
    no_key_without_ttl(&server, "after the other client's hold");
}

/// A `lock()` that times out on a held lock is run by Redis afterwards and
/// queues under a call id nobody waits for; when the holder unlocks, that
/// entry is handed the lock. The client must undo the call (leave the queue,
/// or abandon a grant it got): a client queued behind it gets the lock
/// soon after the holder unlocks. The timed-out handle has a fixed 30 s
/// lease so that a grant to the orphaned entry would outlast every bound
/// here (a watchdog-renewed grant is capped by the entry's 1 s liveness).
#[test]
fn a_timed_out_lock_on_a_held_lock_leaves_no_queue_entry_or_grant_behind() {
    let _serial = serial();
    let server = RedisServer::start();
    let holder = server.client();
    let client = impatient_client(&server);
    let other = server.client();
    let held = holder.fair_mutex("held").lock().unwrap();
    let mutex = client
        .fair_mutex("held")
        .with_fixed_lease(Duration::from_secs(30));
    let resumed =
        time_out_during_a_write_pause(&server, "lock() on a held lock", || mutex.lock().map(drop));

    let waiting = LockThread::lock(other.fair_mutex("held"));
    assert!(
        wait_until(Duration::from_secs(5), || queued(
            &mutex.status(10).unwrap(),
            &other
        )),
        "the other client did not queue"
    );
    let before = mutex.status(10).unwrap();
    eprintln!(
        "leftovers: {:.0} ms after the pause ended the timed-out client {} queued ({} live \
         waiters); the holder unlocks",
        ms(resumed.elapsed()),
        if queued(&before, &client) {
            "is"
        } else {
            "is not"
        },
        before.queue_len
    );
    let unlocked = Instant::now();
    held.unlock().unwrap();

    let mut timed_out_client_held = false;
    let granted = loop {
        if waiting.is_granted_within(Duration::from_millis(20)) {
            break Some(unlocked.elapsed());
        }
        let status = mutex.status(10).unwrap();
        if !timed_out_client_held && holder_of(&status, &client).contains("timed-out") {
            timed_out_client_held = true;
            eprintln!(
                "leftovers: {:.0} ms after the unlock the lock is {}",
                ms(unlocked.elapsed()),
                holder_of(&status, &client)
            );
        }
        if unlocked.elapsed() > Duration::from_secs(5) {
            break None;
        }
    };
    let status = mutex.status(10).unwrap();
    eprintln!(
        "leftovers: the client queued behind got the lock: {}; the lock is {}; \
         the timed-out client held it meanwhile: {timed_out_client_held}",
        granted.map_or("not within 5 s".to_owned(), |t| format!(
            "{:.0} ms after the unlock",
            ms(t)
        )),
        holder_of(&status, &client)
    );
    if granted.is_none() {
        // Clean up before failing: the queued thread gets the lock and ends.
        mutex.force_unlock().unwrap();
        let _ = waiting.is_granted_within(Duration::from_secs(5));
        waiting.release("the other client's lock thread");
        panic!(
            "the client queued behind did not get the lock within 5 s of the unlock: {}",
            holder_of(&status, &client)
        );
    }
    let who = status.holder().map(|h| h.who.client_id().to_owned());
    assert_eq!(who.as_deref(), Some(other.id()), "the waiter holds it");
    assert_eq!(mutex.hold_count().unwrap(), 0);
    waiting.release("the other client's lock thread");
    let after = mutex.status(10).unwrap();
    assert!(
        !queued(&after, &client),
        "the orphaned entry is still queued"
    );
    no_key_without_ttl(&server, "after the waiter released");
}

/// As the `lock()` tests, with `try_lock()`: a timed-out attempt that Redis
/// runs later takes the free lock. First the thread calls again at once:
/// the orphaned hold is never a re-entry. Then, on another lock, the thread
/// calls nothing: the client undoes the hold by itself.
#[test]
fn a_timed_out_try_lock_leaves_no_hold_behind() {
    let _serial = serial();
    let server = RedisServer::start();
    let client = impatient_client(&server);
    let other = server.client();

    let mutex = client.fair_mutex("try-again");
    time_out_during_a_write_pause(&server, "try_lock() on a free lock", || {
        mutex.try_lock().map(drop)
    });
    match mutex.try_lock().unwrap() {
        Some(guard) => {
            assert_eq!(
                mutex.hold_count().unwrap(),
                1,
                "one guard, but the hold left by the timed-out try_lock() counted as a re-entry"
            );
            guard.unlock().unwrap();
        }
        None => eprintln!("leftovers: try_lock() found the orphaned hold not yet undone"),
    }
    let got = other
        .fair_mutex("try-again")
        .try_lock_for(Duration::from_secs(5))
        .unwrap();
    assert!(
        got.is_some(),
        "another client could not get the lock: {}",
        holder_of(&mutex.status(10).unwrap(), &client)
    );
    assert_eq!(mutex.hold_count().unwrap(), 0);
    drop(got);

    let mutex = client.fair_mutex("try-idle");
    let resumed = time_out_during_a_write_pause(&server, "try_lock() on a free lock", || {
        mutex.try_lock().map(drop)
    });
    let got = other
        .fair_mutex("try-idle")
        .try_lock_for(Duration::from_secs(5))
        .unwrap();
    let status = mutex.status(10).unwrap();
    eprintln!(
        "leftovers: the other client's try_lock_for(5 s) returned {} {:.0} ms after the pause \
         ended; the lock is {}",
        if got.is_some() { "the lock" } else { "nothing" },
        ms(resumed.elapsed()),
        holder_of(&status, &client)
    );
    assert!(
        got.is_some(),
        "the hold left by the timed-out try_lock() was not undone within 5 s: {}",
        holder_of(&status, &client)
    );
    assert_eq!(mutex.hold_count().unwrap(), 0);
    drop(got);
    no_key_without_ttl(&server, "after both locks were released");
}

/// One of the acquiring calls of a handle.
type AcquireCall = fn(&FairMutex) -> fairlock::Result<Option<FairMutexGuard>>;

/// What one acquiring call came to, in words.
fn outcome(result: fairlock::Result<Option<FairMutexGuard>>) -> String {
    match result {
        Ok(Some(_)) => "a guard".to_owned(),
        Ok(None) => "no guard".to_owned(),
        Err(err) => format!("{:?}", err.kind()),
    }
}

/// Every key under `fairlock:*` with its PTTL.
fn keys_and_ttls(conn: &mut redis::Connection) -> Vec<(String, i64)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("fairlock:*").query(conn).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let pttl = redis::cmd("PTTL").arg(&k).query(conn).unwrap();
            (k, pttl)
        })
        .collect()
}

/// What `build()` came to: the error kind, "built", or the panic.
fn build_outcome(builder: ClientBuilder) -> String {
    match catch_unwind(AssertUnwindSafe(|| builder.build())) {
        Ok(Ok(_)) => "built".to_owned(),
        Ok(Err(err)) => format!("{:?}", err.kind()),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            format!("panicked: {text}")
        }
    }
}

/// A lease or timeout outside its documented range (lease, waiter timeout
/// and fixed lease: 30 ms to 365 days; connect and command timeouts: above
/// zero up to 24 hours) is `InvalidConfig` before any I/O: no script runs,
/// no key is written. A huge fixed lease used to reach Redis, fail there as
/// `Server` and leave the lock's hash behind with no TTL. A lease of exactly
/// 365 days works.
#[test]
fn leases_and_timeouts_out_of_range_are_invalid_config_before_any_io() {
    let server = RedisServer::start();
    let client = server.client();
    let mut conn = server.conn();
    let mutex = client.fair_mutex("huge-lease");
    let mut seen = Vec::new();
    for (lease_label, lease) in [("MAX", Duration::MAX), ("365 d + 1 ms", YEAR + MS)] {
        let handle = mutex.with_fixed_lease(lease);
        let calls: [(&str, AcquireCall); 3] = [
            ("try_lock", |m| m.try_lock()),
            ("lock", |m| m.lock().map(Some)),
            ("try_lock_for(100 ms)", |m| {
                m.try_lock_for(Duration::from_millis(100))
            }),
        ];
        for (call_label, call) in calls {
            let scripts_before = script_calls(&mut conn);
            let result = outcome(call(&handle));
            let scripts_run = script_calls(&mut conn) - scripts_before;
            let keys = keys_and_ttls(&mut conn);
            seen.push((
                format!("with_fixed_lease({lease_label}).{call_label}"),
                result,
                scripts_run,
                keys,
            ));
            // Each call starts from an empty server (guards are dropped above).
            let () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
        }
    }
    for (call, result, scripts_run, keys) in &seen {
        eprintln!("leftovers: {call}: {result}, {scripts_run} scripts run, keys left {keys:?}");
    }
    let expected: Vec<_> = seen
        .iter()
        .map(|(call, ..)| (call.clone(), "InvalidConfig".to_owned(), 0, Vec::new()))
        .collect();
    assert_eq!(
        seen, expected,
        "(call, outcome, scripts run, keys left with their PTTL)"
    );

    let builders: Vec<(&str, ClientBuilder)> = vec![
        ("lease(MAX)", server.builder().lease(Duration::MAX)),
        ("lease(365 d + 1 ms)", server.builder().lease(YEAR + MS)),
        (
            "waiter_timeout(MAX)",
            server.builder().waiter_timeout(Duration::MAX),
        ),
        (
            "waiter_timeout(365 d + 1 ms)",
            server.builder().waiter_timeout(YEAR + MS),
        ),
        (
            "command_timeout(MAX)",
            server.builder().command_timeout(Duration::MAX),
        ),
        (
            "command_timeout(24 h + 1 ms)",
            server.builder().command_timeout(DAY + MS),
        ),
        (
            "connect_timeout(MAX)",
            server.builder().connect_timeout(Duration::MAX),
        ),
        (
            "connect_timeout(24 h + 1 ms)",
            server.builder().connect_timeout(DAY + MS),
        ),
    ];
    let built: Vec<(&str, String)> = builders
        .into_iter()
        .map(|(label, builder)| (label, build_outcome(builder)))
        .collect();
    eprintln!("leftovers: builders past the bounds: {built:?}");
    let expected: Vec<(&str, String)> = built
        .iter()
        .map(|(label, _)| (*label, "InvalidConfig".to_owned()))
        .collect();
    assert_eq!(built, expected);
    let at_bounds = server
        .builder()
        .lease(YEAR)
        .waiter_timeout(YEAR)
        .command_timeout(DAY)
        .connect_timeout(DAY);
    assert_eq!(
        build_outcome(at_bounds),
        "built",
        "every bound is inclusive"
    );

    let guard = mutex
        .with_fixed_lease(YEAR)
        .try_lock()
        .unwrap()
        .expect("a lease of exactly 365 days works");
    let lock_keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*:lock:huge-lease")
        .query(&mut conn)
        .unwrap();
    assert_eq!(lock_keys.len(), 1, "{lock_keys:?}");
    let pttl = lease_left_of(&mut conn, &lock_keys[0]).unwrap();
    eprintln!("leftovers: a 365-day lease: {pttl} ms left");
    let year_ms = YEAR.as_millis() as i64;
    assert!(
        pttl <= year_ms && pttl > year_ms - 1000,
        "PTTL {pttl} ms, not within a second of 365 days"
    );
    no_key_without_ttl(&server, "while held for 365 days");
    guard.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap());
    no_key_without_ttl(&server, "after the 365-day hold was released");
}

/// `status(usize::MAX)` means "every waiter": it must not reach Redis as a
/// number Lua turns into a float that `ZRANGE` rejects.
#[test]
fn status_with_no_practical_bound_lists_every_waiter() {
    let server = RedisServer::start();
    let holder = server.client();
    let mutex = holder.fair_mutex("everyone");
    let guard = mutex.lock().unwrap();
    let clients: Vec<Client> = (0..3).map(|_| server.client()).collect();
    let waiters: Vec<LockThread> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let waiting = LockThread::lock(c.fair_mutex("everyone"));
            assert!(
                wait_until(Duration::from_secs(5), || mutex.queue_len().unwrap()
                    == i + 1),
                "waiter {i} did not queue"
            );
            waiting
        })
        .collect();

    let status = mutex.status(usize::MAX);
    eprintln!(
        "leftovers: status(usize::MAX) returned {:?}",
        status
            .as_ref()
            .map(|s| s.waiters.len())
            .map_err(|e| e.to_string())
    );
    // Clean up first: the holder unlocks, each waiter in turn gets the
    // lock and releases it.
    guard.unlock().unwrap();
    for (i, waiting) in waiters.into_iter().enumerate() {
        waiting.granted_within(Duration::from_secs(5), &format!("waiter {i}"));
        waiting.release(&format!("waiter {i}"));
    }

    let status = status.expect("status(usize::MAX) works");
    let listed: Vec<&str> = status.waiters.iter().map(|w| w.who.client_id()).collect();
    let arrived: Vec<&str> = clients.iter().map(Client::id).collect();
    assert_eq!(listed, arrived, "every waiter, in arrival order");
    assert_eq!(status.queue_len, 3);
}

/// A re-entry that fails in Redis (here: out of memory, so its count is
/// never incremented) must report the failure, not hand out a second guard
/// the hold count does not know of: that guard's release would free the
/// lock under the first one.
#[test]
fn a_failed_reentry_never_hands_out_an_uncounted_guard() {
    let server = RedisServer::start();
    let client = server.client();
    let mut admin = server.conn();
    let mutex = client.fair_mutex("reentry");
    let outer = mutex.lock().unwrap();
    assert_eq!(mutex.hold_count().unwrap(), 1);

    // With the default noeviction policy every write that may grow memory
    // fails with OOM; reads (and so hold_count) still work.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut admin)
        .unwrap();
    let result = mutex.try_lock_for(Duration::from_secs(1));
    let count = mutex.hold_count().unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut admin)
        .unwrap();
    let described = match &result {
        Ok(Some(guard)) => format!("a second guard (token {})", guard.fencing_token()),
        Ok(None) => "no guard".to_owned(),
        Err(err) => format!("{:?}: {err}", err.kind()),
    };
    eprintln!("leftovers: the re-entry under OOM returned {described}; hold count {count}");
    let kind = result.as_ref().map(|_| ()).map_err(|e| e.kind());
    if let Ok(Some(second)) = result {
        // Released before failing, so the test can report what it did.
        let released = second.unlock();
        eprintln!(
            "leftovers: releasing the uncounted guard: {:?}; the lock is then held: {}",
            released.map_err(|e| e.kind()),
            mutex.is_locked().unwrap()
        );
    }
    assert_eq!(
        kind,
        Err(ErrorKind::Server),
        "the re-entry failed in Redis but returned {described}"
    );
    assert_eq!(count, 1, "the hold count after the failed re-entry");
    outer.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap());
}

/// A lock key with no expiry (written by something other than fairlock, as
/// a failed `PEXPIRE` used to leave one) makes the head of the queue ask
/// again at most once a second, never in a tight loop; its release by
/// force still hands the lock to that waiter at once.
#[test]
fn a_lock_without_expiry_is_not_polled_in_a_tight_loop() {
    let server = RedisServer::start();
    let client = server.client();
    let mut admin = server.conn();
    let name = "no-expiry";
    let key = lock_key(name);
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(format!(
            "v{} 1 elsewhere:1#1 600000 -",
            fairlock::DATA_FORMAT
        ))
        .query(&mut admin)
        .unwrap();
    let mutex = client.fair_mutex(name);
    let waiting = Duration::from_secs(2);
    let before = script_calls(&mut admin);
    let started = Instant::now();
    let outcome = mutex.try_lock_for(waiting).unwrap();
    let calls = script_calls(&mut admin) - before;
    eprintln!(
        "leftovers: {calls} scripts in {:?} waiting at the head for a lock without expiry",
        started.elapsed()
    );
    assert!(outcome.is_none(), "the lock is someone else's");
    // First attempt, one poll a second, a heartbeat every 333 ms, the
    // cancel: about 12; a tight loop ran thousands.
    assert!(calls <= 30, "{calls} scripts in {waiting:?}");

    let waiter = LockThread::lock(client.fair_mutex(name));
    assert!(wait_until(Duration::from_secs(5), || {
        mutex.status(1).unwrap().queue_len == 1
    }));
    assert!(mutex.force_unlock().unwrap());
    let (_, token) =
        waiter.granted_within(Duration::from_secs(5), "the waiter behind the forced lock");
    assert!(token > 1, "granted with a fresh token");
    waiter.release("the waiter");
    no_key_without_ttl(&server, "after the lock without expiry was forced free");
}

// ---------------------------------------------------------------------------
// An unlock lost in a partition: the client connects through a relay that
// can cut the link (open connections severed, new ones refused) while Redis
// and every other client go on.

use fairlock_test_support::relay::Relay;

/// The cut-off client's command and connect timeouts: a call over the cut
/// link fails within a fraction of a second.
const CUT_COMMAND_TIMEOUT: Duration = Duration::from_millis(300);
const CUT_CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

/// A client that reaches `relay`'s server only through the relay.
fn client_through(relay: &Relay, lease: Duration, waiter_timeout: Duration) -> Client {
    Client::builder(&relay.url())
        .lease(lease)
        .waiter_timeout(waiter_timeout)
        .command_timeout(CUT_COMMAND_TIMEOUT)
        .connect_timeout(CUT_CONNECT_TIMEOUT)
        .build()
        .expect("the client connects through the relay")
}

/// True when `client` holds the lock, as `status` says.
fn held_by(status: &Status, client: &Client) -> bool {
    status
        .holder()
        .is_some_and(|holder| holder.who.client_id() == client.id())
}

/// Cuts the link of `client` (which holds `guard`, through `relay`) and
/// unlocks: the release cannot reach Redis, so it must fail as a connection
/// error, and the lock must still be the client's (asked by `observer`,
/// connected directly).
fn unlock_over_a_cut_link(
    relay: &Relay,
    client: &Client,
    guard: FairMutexGuard,
    observer: &FairMutex,
) {
    assert!(
        relay.open_connections() > 0,
        "the client's connections do not go through the relay"
    );
    relay.cut();
    eprintln!(
        "leftovers: the cut severed {} connections of the client",
        relay.severed_connections()
    );
    let unlocking = Instant::now();
    let err = guard
        .unlock()
        .expect_err("unlock() succeeded though the link to Redis was cut");
    eprintln!(
        "leftovers: unlock() over the cut link failed after {:.0} ms with {:?}",
        ms(unlocking.elapsed()),
        err.to_string()
    );
    assert!(err.is_connection(), "unlock() over a cut link: {err:?}");
    let status = observer.status(10).unwrap();
    assert!(
        held_by(&status, client),
        "the failed unlock() reached Redis after all (the test needs it not to): the lock is {}",
        holder_named(&status, client.id(), "the client behind the relay")
    );
}

/// Asserts that `client` keeps holding the lock for `period` (polled by
/// `observer`), `while_what` describing what goes on meanwhile.
fn still_held_throughout(
    observer: &FairMutex,
    client: &Client,
    period: Duration,
    while_what: &str,
) {
    let mut seen = None;
    let let_go = wait_until(period, || {
        let status = observer.status(10).unwrap();
        let held = held_by(&status, client);
        seen = Some(status);
        if !held {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
        false
    });
    assert!(
        !let_go,
        "the lock was freed {while_what}: it is {}",
        holder_named(&seen.unwrap(), client.id(), "the client behind the relay")
    );
}

/// An `unlock()` that never reached Redis (the link was cut: its
/// connections severed, new ones refused) fails with a connection error
/// and leaves the lock held. The client must give the hold back by itself
/// once Redis answers: its watchdog (period 333 ms here) retries the
/// release's abandon, failing while the link stays cut (1 s, the lock
/// checked held throughout), so another client gets the lock within about
/// a period of the link healing, though the user calls nothing more, long
/// before the 10 s lease would have freed it.
#[test]
fn an_unlock_that_never_reached_redis_is_abandoned_once_redis_answers() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = client_through(&relay, ORPHAN_LEASE, Duration::from_secs(1));
    let observer_client = server.client();
    let observer = observer_client.fair_mutex("cut-unlock");
    let guard = client.fair_mutex("cut-unlock").lock().unwrap();

    unlock_over_a_cut_link(&relay, &client, guard, &observer);
    // Long enough for the watchdog's first tries (one at once, then one a
    // period) to fail on the cut link: what frees the lock is a retry.
    still_held_throughout(
        &observer,
        &client,
        Duration::from_secs(1),
        "while the link was cut",
    );
    relay.heal();
    let healed = Instant::now();

    let got = observer.try_lock_for(Duration::from_secs(3)).unwrap();
    let took = healed.elapsed();
    let status = observer.status(10).unwrap();
    eprintln!(
        "leftovers: the other client's try_lock_for(3 s) returned {} {:.0} ms after the link \
         healed (watchdog period 333 ms, lease 10 s)",
        if got.is_some() { "the lock" } else { "nothing" },
        ms(took)
    );
    assert!(
        got.is_some(),
        "the hold of the failed unlock() was not abandoned within 3 s of the link healing: \
         the lock is {}",
        holder_named(&status, client.id(), "the client behind the relay")
    );
    drop(got);
    drop(client);
    no_key_without_ttl(&server, "after the unlock abandoned");
}

/// Many calls to give back do not hold the watchdog's renewals back: forty
/// unlocks fail while the link is cut, and it heals with an 80 ms round
/// trip. The round that gives them back sends them all at once (one round
/// trip, as the renewals), so a hold taken once the link healed (lease
/// 2 s, renewed every 667 ms) keeps its lease; sent one by one, the round
/// took forty round trips (3.2 s) and that hold was lost. It is taken after
/// the heal so that its lease does not depend on how long the cut lasts:
/// forty failed unlocks took 1.8 s of a cut on a loaded machine, and a hold
/// kept through them lost its lease to the cut itself.
#[test]
fn many_abandons_over_a_slow_link_do_not_hold_renewals_back() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = client_through(&relay, Duration::from_secs(2), Duration::from_secs(2));
    let names: Vec<String> = (0..40).map(|i| format!("given-back-{i}")).collect();
    let guards: Vec<_> = (names.iter())
        .map(|name| client.fair_mutex(name).lock().unwrap())
        .collect();
    relay.set_delay(Duration::from_millis(40));
    relay.cut();
    let cut = Instant::now();
    for guard in guards {
        assert!(guard.unlock().is_err(), "an unlock went through a cut link");
    }
    relay.heal();
    let healed = cut.elapsed();
    let kept = client.fair_mutex("kept").lock().unwrap();
    let signal = kept.lease_signal();
    let ended = signal.wait_timeout(Duration::from_secs(4));
    let observer = server.client();
    let freed = wait_until(Duration::from_secs(5), || {
        (names.iter()).all(|name| !observer.fair_mutex(name).is_locked().unwrap())
    });
    eprintln!(
        "leftovers: 40 unlocks failed in {:.0} ms of a cut, then an 80 ms round trip: the hold \
         taken after it {:?} 4 s on (lease 2 s); the 40 given back: {freed}",
        ms(healed),
        ended
    );
    assert_eq!(
        ended, None,
        "the kept hold ended while calls were given back"
    );
    assert!(freed, "the failed unlocks were not given back");
    kept.unlock().unwrap();
}

/// A client dropped with many calls still to give back gives them back in
/// one round trip (per slot on a cluster), not one each: twenty unlocks
/// fail while the link is cut, the link heals with a 200 ms round trip,
/// and the client is dropped before its watchdog's next round (lease 30 s:
/// a round every 10 s). Sent one by one, the drop took twenty round trips
/// (about 4 s).
#[test]
fn a_client_dropped_with_many_calls_to_give_back_gives_them_back_at_once() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = client_through(&relay, Duration::from_secs(30), Duration::from_secs(10));
    let names: Vec<String> = (0..20).map(|i| format!("dropped-{i}")).collect();
    let guards: Vec<_> = (names.iter())
        .map(|name| client.fair_mutex(name).lock().unwrap())
        .collect();
    relay.set_delay(Duration::from_millis(100));
    relay.cut();
    for guard in guards {
        assert!(guard.unlock().is_err(), "an unlock went through a cut link");
    }
    relay.heal();
    let dropping = Instant::now();
    drop(client);
    let dropped = dropping.elapsed();
    let observer = server.client();
    let freed = (names.iter()).all(|name| !observer.fair_mutex(name).is_locked().unwrap());
    eprintln!(
        "leftovers: a client dropped with 20 calls to give back over a 200 ms round trip took \
         {:.0} ms; all given back: {freed}",
        ms(dropped)
    );
    assert!(freed, "the drop did not give the failed unlocks back");
    assert!(
        dropped < Duration::from_millis(1500),
        "the drop took {dropped:?}: a round trip per call to give back"
    );
}

/// The same, with the server over its `maxmemory` (`noeviction`) when the
/// link heals: the watchdog's abandon adds nothing, so it runs there (its
/// function is flagged `allow-oom`) and frees the lock within a watchdog
/// round (333 ms), not once memory allows. (Redis 6.2's scripts, called by
/// EVALSHA, carry no flags: it refuses the abandon's first write, and the
/// client sends it again, as for a failed snapshot below.)
#[test]
fn an_abandon_runs_over_maxmemory() {
    if server_version().0 < 7 {
        eprintln!("skipped: redis 6.2's scripts carry no allow-oom flag");
        return;
    }
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::recording(server.port());
    let client = client_through(&relay, ORPHAN_LEASE, Duration::from_secs(1));
    let observer_client = server.client();
    let observer = observer_client.fair_mutex("oom-abandon");
    let guard = client.fair_mutex("oom-abandon").lock().unwrap();
    unlock_over_a_cut_link(&relay, &client, guard, &observer);
    server.set_eviction("1", "noeviction");
    relay.heal();
    let free = wait_until(Duration::from_secs(3), || !observer.is_locked().unwrap());
    server.set_eviction("0", "noeviction");
    assert!(free, "the abandon did not run over maxmemory");
}

/// The same, with the server refusing writes because its last snapshot
/// failed (`MISCONF`: `stop-writes-on-bgsave-error`, a full or broken
/// disk): refused before anything ran, as `OOM` is, the abandon must be
/// kept until the server takes writes again (here the setting turned off),
/// not dropped.
#[test]
fn an_abandon_refused_for_a_failed_snapshot_is_tried_again() {
    abandon_refused_then_allowed("misconf-abandon", "MISCONF", |server| {
        let mut conn = server.conn();
        let config = |conn: &mut redis::Connection, name: &str| -> String {
            let got: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query(conn)
                .unwrap();
            got[1].clone()
        };
        // The snapshot cannot take its file's name: a directory has it.
        let file =
            std::path::Path::new(&config(&mut conn, "dir")).join(config(&mut conn, "dbfilename"));
        let _ = std::fs::remove_file(&file);
        std::fs::create_dir_all(file.join("taken")).unwrap();
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("save")
            .arg("3600 1")
            .query(&mut conn)
            .unwrap();
        let () = redis::cmd("BGSAVE").query(&mut conn).unwrap();
        let refused = |conn: &mut redis::Connection| {
            redis::cmd("SET")
                .arg("misconf-probe")
                .arg(1)
                .query::<()>(conn)
                .is_err_and(|err| err.code() == Some("MISCONF"))
        };
        assert!(
            wait_until(Duration::from_secs(5), || refused(&mut conn)),
            "the failed snapshot did not stop writes"
        );
        Box::new(move || {
            let () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("stop-writes-on-bgsave-error")
                .arg("no")
                .query(&mut conn)
                .unwrap();
        })
    });
}

/// The same, with the server busy running someone's long script when the
/// link heals: the watchdog's abandon is refused with `BUSY` (the server
/// ran nothing), which says no more than a stalled server would; the
/// client must keep the abandon and try again once the script is over
/// (killed here), not drop it.
#[test]
fn an_abandon_refused_by_a_busy_server_is_tried_again() {
    abandon_refused_then_allowed("busy-abandon", "BUSY", |server| {
        let busy = BusyScript::start(server);
        Box::new(move || busy.kill())
    });
}

/// An `unlock()` on `name` that never reached Redis, and a server that
/// refuses the watchdog's abandon with `code` when the link heals (for a
/// reason that passes: `refuse` makes it so, and returns what ends it).
/// Once the relay has seen the watchdog send the abandon twice, so that
/// the first was refused, the refusal ends; the client must have kept the
/// abandon and send it again, so another client gets the lock within 3 s,
/// not when its 10 s lease runs out.
fn abandon_refused_then_allowed(
    name: &str,
    code: &str,
    refuse: impl FnOnce(&RedisServer) -> Box<dyn FnOnce()>,
) {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::recording(server.port());
    let client = client_through(&relay, ORPHAN_LEASE, Duration::from_secs(1));
    let observer_client = server.client();
    let observer = observer_client.fair_mutex(name);
    let guard = client.fair_mutex(name).lock().unwrap();
    unlock_over_a_cut_link(&relay, &client, guard, &observer);

    let allow = refuse(&server);
    let before = relay.sent().len();
    let script = script_command();
    relay.heal();
    let sent = || {
        relay.sent()[before..]
            .iter()
            .filter(|name| *name == script)
            .count()
    };
    let twice = wait_until(Duration::from_secs(3), || sent() >= 2);
    allow();
    let allowed = Instant::now();
    eprintln!(
        "leftovers: {} {script}s sent while the server replied {code} (the second: {twice})",
        sent()
    );

    let got = observer.try_lock_for(Duration::from_secs(3)).unwrap();
    let took = allowed.elapsed();
    let status = observer.status(10).unwrap();
    eprintln!(
        "leftovers: the other client's try_lock_for(3 s) returned {} {:.0} ms after the \
         server stopped replying {code} (watchdog period 333 ms, lease 10 s)",
        if got.is_some() { "the lock" } else { "nothing" },
        ms(took)
    );
    assert!(
        got.is_some(),
        "the abandon refused with {code} was dropped: the lock is {}",
        holder_named(&status, client.id(), "the client behind the relay")
    );
    drop(got);
    drop(client);
    no_key_without_ttl(&server, &format!("after the abandon refused with {code}"));
}

/// A client dropped right after an `unlock()` that never reached Redis
/// frees the lock as it stops: its watchdog gives the release back once
/// before the drop returns. The watchdog period is 10 s (lease and waiter
/// timeout 30 s), and the test first checks that the lock stays held for
/// 1 s while the link is cut; it drops the client as soon as the link
/// heals, before the subscriber, which tries every 100 ms, is back (that
/// too would have the watchdog give it back at once); dropping must also
/// return within about a command timeout.
#[test]
fn a_client_dropped_after_a_failed_unlock_abandons_it_before_it_stops() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let long = Duration::from_secs(30);
    let client = client_through(&relay, long, long);
    let observer_client = server.client();
    let observer = observer_client.fair_mutex("cut-unlock");
    let mutex = client.fair_mutex("cut-unlock");
    let guard = mutex.lock().unwrap();

    unlock_over_a_cut_link(&relay, &client, guard, &observer);
    let hold = Duration::from_secs(1);
    still_held_throughout(&observer, &client, hold, "while the link was cut");
    let client_id = client.id().to_owned();
    drop(mutex);
    relay.heal();
    let dropping = Instant::now();
    drop(client);
    let dropped = Instant::now();
    let drop_took = dropped.duration_since(dropping);
    let got = observer.try_lock_for(Duration::from_secs(1)).unwrap();
    let free_after = dropped.elapsed();
    let status = observer.status(10).unwrap();
    eprintln!(
        "leftovers: dropping the client took {:.0} ms; the other client's try_lock_for(1 s) \
         returned {} {:.0} ms after the drop returned (watchdog period 10 s, lease 30 s)",
        ms(drop_took),
        if got.is_some() { "the lock" } else { "nothing" },
        ms(free_after)
    );
    assert!(
        got.is_some(),
        "the client was dropped, yet the hold of its failed unlock() was not abandoned: the \
         lock is {}",
        holder_named(&status, &client_id, "the client behind the relay")
    );
    let drop_bound = CUT_COMMAND_TIMEOUT + Duration::from_secs(1);
    assert!(
        drop_took <= drop_bound,
        "dropping the client took {drop_took:?}, more than {drop_bound:?}"
    );
    drop(got);
    no_key_without_ttl(&server, "after the unlock abandoned on drop");
}

/// Self-test of the support's [`Relay`], with raw `PING`s to a real
/// redis-server: a stall holds a request back (on an open connection and
/// on one made during the stall) and resume delivers it in order; a cut
/// ends open connections (end-of-stream) and closes new ones at once; after
/// the heal new connections work.
#[test]
fn the_relay_holds_bytes_back_while_stalled_and_drops_them_while_cut() {
    use std::io::{Read, Write};
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let connect = || {
        let conn = std::net::TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        conn
    };
    // What one read gets: the bytes, "eof", or "nothing" (timed out).
    let read = |conn: &mut std::net::TcpStream| {
        let mut buf = [0u8; 64];
        match conn.read(&mut buf) {
            Ok(0) => "eof".to_owned(),
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                "nothing".to_owned()
            }
            Err(err) => format!("error {:?}", err.kind()),
        }
    };
    let mut open = connect();
    open.write_all(b"PING\r\n").unwrap();
    assert_eq!(read(&mut open), "+PONG\r\n");

    relay.stall();
    open.write_all(b"ECHO one\r\nECHO two\r\n").unwrap();
    let mut during = connect();
    during.write_all(b"PING\r\n").unwrap();
    assert_eq!(
        read(&mut open),
        "nothing",
        "a stalled relay let a reply through"
    );
    assert_eq!(
        read(&mut during),
        "nothing",
        "a stalled relay let a reply through"
    );
    assert!(
        wait_until(Duration::from_secs(5), || relay.held_bytes() > 0),
        "held {} bytes",
        relay.held_bytes()
    );
    relay.resume();
    let (expected, mut replies) = ("$3\r\none\r\n$3\r\ntwo\r\n", String::new());
    wait_until(Duration::from_secs(5), || {
        match read(&mut open).as_str() {
            "nothing" => {}
            got => replies += got,
        }
        replies.len() >= expected.len()
    });
    assert_eq!(replies, expected, "the held requests' replies after resume");
    assert_eq!(read(&mut during), "+PONG\r\n");
    assert_eq!(relay.open_connections(), 2);

    relay.cut();
    assert_eq!(relay.severed_connections(), 2);
    assert_eq!(relay.open_connections(), 0);
    assert_eq!(read(&mut open), "eof", "a severed connection stayed open");
    let _ = during.write_all(b"PING\r\n");
    assert_ne!(
        read(&mut during),
        "+PONG\r\n",
        "a severed connection passed a request"
    );
    let mut refused = connect();
    let _ = refused.write_all(b"PING\r\n");
    let outcome = read(&mut refused);
    assert!(
        outcome == "eof" || outcome.starts_with("error"),
        "a connection made during the cut got {outcome:?}"
    );
    assert!(relay.refused_connections() >= 1);

    relay.heal();
    let mut healed = connect();
    healed.write_all(b"PING\r\n").unwrap();
    assert_eq!(read(&mut healed), "+PONG\r\n");
    eprintln!(
        "leftovers: relay self-test: {} bytes held, {} accepted, {} severed, {} refused",
        relay.held_bytes(),
        relay.accepted_connections(),
        relay.severed_connections(),
        relay.refused_connections()
    );
}

/// A `try_lock_for` whose deadline passes while its link is stalled, just
/// after the lock was handed to it: the grant message waits in the link
/// and the cancel that leaves the queue gets no reply by the deadline, so
/// the call returns nothing, on time. Once the link flows again, the hold
/// it was handed (a fixed 30 s lease) is abandoned at once instead of
/// being kept by a call that already returned.
#[test]
fn a_wait_that_times_out_as_it_is_handed_the_lock_abandons_the_grant() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let name = "grant-at-timeout";
    let client = client_through(&relay, Duration::from_secs(2), Duration::from_secs(1));
    let observer_client = server.client();
    let observer = observer_client.fair_mutex(name);
    let guard = observer.lock().unwrap();

    let patience = Duration::from_millis(1500);
    let waiting = client
        .fair_mutex(name)
        .with_fixed_lease(Duration::from_secs(30));
    let started = Instant::now();
    let waiter = std::thread::spawn(move || {
        let outcome = waiting.try_lock_for(patience);
        let kind = outcome.map(|guard| guard.map(|g| g.fencing_token()));
        (kind.map_err(|err| err.kind()), Instant::now())
    });
    assert!(
        wait_until(Duration::from_secs(1), || observer
            .status(1)
            .unwrap()
            .queue_len
            == 1),
        "the waiter did not queue"
    );
    // Stall 300 ms before its deadline, then hand it the lock.
    std::thread::sleep(
        (started + patience - CUT_COMMAND_TIMEOUT).saturating_duration_since(Instant::now()),
    );
    relay.stall();
    guard.unlock().unwrap();
    let handed = observer.status(1).unwrap();
    assert!(
        held_by(&handed, &client),
        "the lock was not handed to the stalled waiter: {handed:?}"
    );

    let (outcome, returned) = join_within(waiter, Duration::from_secs(5), "the stalled waiter");
    eprintln!(
        "leftovers: the stalled try_lock_for({patience:?}) returned {outcome:?} after {:.0} ms",
        ms(returned - started)
    );
    assert_eq!(outcome, Ok(None));
    assert!(
        returned - started <= patience + Duration::from_millis(400),
        "returned {:?} after a wait of {patience:?}",
        returned - started
    );
    assert!(
        held_by(&observer.status(1).unwrap(), &client),
        "still handed to the call that returned, while the link is stalled"
    );
    relay.resume();
    let resumed = Instant::now();
    let got = observer.try_lock_for(Duration::from_secs(3)).unwrap();
    let took = resumed.elapsed();
    let status = observer.status(1).unwrap();
    eprintln!(
        "leftovers: after the link resumed the other client got the lock in {:.0} ms",
        ms(took)
    );
    assert!(
        got.is_some(),
        "the grant to the call that gave up was kept: the lock is {}",
        holder_named(&status, client.id(), "the client that gave up")
    );
    drop(got);
    drop(client);
    no_key_without_ttl(&server, "after the grant was abandoned");
}

/// A guard's drop waits at most one command timeout, the wait for a pooled
/// connection included, and hands a release that got no answer to the
/// watchdog, which frees the lock once Redis answers: for a mutex guard, a
/// semaphore permit and a read guard alike (one guard core). The client
/// has one pooled connection, taken by a status call stuck behind the
/// stalled link, and a connect timeout three times its command timeout:
/// waiting out the pool and then a command of its own (as an explicit
/// unlock may) would take about two command timeouts.
#[test]
fn a_guard_dropped_while_redis_does_not_answer_returns_within_one_command_timeout() {
    let _serial = serial();
    let server = RedisServer::start();
    let observer_client = server.client();
    let command_timeout = Duration::from_millis(1000);
    // What the client holds, and what another client then asks for.
    for (kind, held_as, then) in [
        ("mutex", Kind::Mutex, Kind::Mutex),
        ("semaphore", Kind::Semaphore, Kind::Semaphore),
        ("rwlock", Kind::Read, Kind::Write),
    ] {
        let relay = Relay::start(server.port());
        let client = Client::builder(&relay.url())
            .lease(Duration::from_secs(30))
            .waiter_timeout(Duration::from_secs(30))
            .command_timeout(command_timeout)
            .connect_timeout(3 * command_timeout)
            .pool_size(1)
            .build()
            .expect("the client connects through the relay");
        let name = format!("drop-bound-{kind}");
        let guard = take::<Bound>(
            &client,
            held_as,
            &name,
            LeasePolicy::Client,
            Wait::forever(),
        )
        .unwrap()
        .expect("free");
        // A call that takes the pooled connection (stuck behind the
        // stalled link).
        let (mine, stuck_name) = (client.clone(), name.clone());
        let stuck = move || mine.status(held_as.lock_kind(), &stuck_name, 0).is_ok();
        // Whether another client then gets the lock.
        let free = || {
            take::<Bound>(
                &observer_client,
                then,
                &name,
                LeasePolicy::Client,
                Duration::from_secs(5),
            )
            .unwrap()
            .is_some()
        };
        relay.stall();
        let held_before = relay.held_bytes();
        let blocker = std::thread::spawn(stuck);
        assert!(
            wait_until(Duration::from_secs(5), || relay.held_bytes() > held_before),
            "{kind}: the status call never went out on the pooled connection"
        );
        let dropping = Instant::now();
        drop(guard);
        let took = dropping.elapsed();
        relay.resume();
        let _ = blocker.join();
        let freed = Instant::now();
        let got = free();
        eprintln!(
            "leftovers: {kind}: the drop took {:.0} ms (command timeout {:.0} ms); the lock was \
             {} {:.0} ms after the link came back (lease 30 s)",
            ms(took),
            ms(command_timeout),
            if got { "free" } else { "still held" },
            ms(freed.elapsed())
        );
        let bound = command_timeout + Duration::from_millis(500);
        assert!(
            took <= bound,
            "{kind}: the drop took {took:?}, more than {bound:?}"
        );
        assert!(
            got,
            "{kind}: the release the drop handed to the watchdog never freed the lock"
        );
        drop(client);
        no_key_without_ttl(&server, "after a release abandoned by the watchdog");
    }
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
        keys_without_ttl(&mut conn, "fairlock:*"),
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
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fairlock:*")
        .query(&mut conn)
        .unwrap();
    assert!(
        !keys.is_empty(),
        "the free lock's key (its last token) stays, with a TTL"
    );
    assert_eq!(
        keys_without_ttl(&mut conn, "fairlock:*"),
        Vec::<String>::new(),
        "after release"
    );
}

/// An upgrade whose reply is lost leaves three calls of one call id to
/// undo: its claim, the write it may have become, and the upgradable read
/// its guard could not release. Each is an entry or a hold of its own in
/// Redis, so the client must undo each once Redis answers, not only the
/// last it recorded. Here the upgrade went through (nobody else reads): a
/// write left behind would hold the lock until its lease ran out (10 s).
#[test]
fn an_upgrade_whose_reply_is_lost_leaves_no_write_behind() {
    upgrade_with_a_lost_reply(false);
}

/// As above, with another read held, so the upgrade's claim queues: the
/// claim must go (with the read it belongs to) rather than hold every
/// later call back until its waiter timeout (30 s here).
#[test]
fn an_upgrade_whose_reply_is_lost_leaves_no_claim_behind() {
    upgrade_with_a_lost_reply(true);
}

/// As above, for a downgrade of a write to a read: the read it became
/// must go as well as the write its guard could not release.
#[test]
fn a_downgrade_whose_reply_is_lost_leaves_no_read_behind() {
    change_with_a_lost_reply("cut-downgrade", false, "Some(Read) held", |client, name| {
        let write = client.fair_rwlock(name).write().unwrap();
        Box::new(move || write.downgrade().map(drop))
    });
}

/// Upgrades an upgradable read of a client behind a relay, `queued`
/// behind another client's read or not.
fn upgrade_with_a_lost_reply(queued: bool) {
    let (name, effect) = match queued {
        true => ("cut-claim", "Some(Write) queued"),
        false => ("cut-upgrade", "Some(Write) held"),
    };
    change_with_a_lost_reply(name, queued, effect, |client, name| {
        let upgradable = client.fair_rwlock(name).upgradable_read().unwrap();
        Box::new(move || upgradable.upgrade().map(drop))
    });
}

/// A change of access that fails.
type Change<'a> = Box<dyn FnOnce() -> fairlock::Result<()> + 'a>;

/// Makes the change `prepare` returns on the rwlock `name` of a client
/// behind a relay (500 ms each way), another client's read held first if
/// `queued`; cuts the link as soon as Redis shows the change's `effect`,
/// while its reply is still in the relay, so that neither a withdrawal nor
/// the guard's release reaches Redis; heals it, and checks that within 5 s
/// nothing of the client's is left and a write is granted at once.
fn change_with_a_lost_reply(
    name: &str,
    queued: bool,
    effect: &str,
    prepare: impl for<'c> FnOnce(&'c Client, &str) -> Change<'c>,
) {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        .lease(ORPHAN_LEASE)
        .waiter_timeout(Duration::from_secs(30))
        .command_timeout(Duration::from_secs(5))
        .connect_timeout(CUT_CONNECT_TIMEOUT)
        .build()
        .expect("the client connects through the relay");
    let observer = server.client();
    let rwlock = observer.fair_rwlock(name);
    let read = queued.then(|| rwlock.read().unwrap());
    let change = prepare(&client, name);
    let left_behind = || {
        let status = observer.fair_rwlock(name).status(10).unwrap();
        let holds = status.holders.iter().map(|h| (&h.who, h.access, "held"));
        let waits = status.waiters.iter().map(|w| (&w.who, w.access, "queued"));
        let ours = holds
            .chain(waits)
            .filter(|(who, ..)| who.client_id() == client.id());
        ours.map(|(_, access, how)| format!("{access:?} {how}"))
            .collect::<Vec<_>>()
    };

    relay.set_delay(Duration::from_millis(500));
    let err = std::thread::scope(|scope| {
        let cutter = scope.spawn(|| {
            let seen = wait_until(Duration::from_secs(5), || {
                left_behind().iter().any(|what| what == effect)
            });
            relay.cut();
            seen
        });
        let changed = change();
        let seen = cutter.join().unwrap();
        assert!(seen, "Redis did not show {effect}: {:?}", left_behind());
        changed.expect_err("the change succeeded though its reply was lost")
    });
    assert!(err.is_connection(), "a change over a cut link: {err:?}");
    eprintln!(
        "leftovers: while the link is cut the client left {:?}",
        left_behind()
    );
    relay.set_delay(Duration::ZERO);
    relay.heal();
    let healed = Instant::now();

    let undone = wait_until(Duration::from_secs(5), || left_behind().is_empty());
    assert!(
        undone,
        "5 s after the link healed the lost change still left {:?}",
        left_behind()
    );
    eprintln!(
        "leftovers: nothing of the client's left {:.0} ms after the link healed",
        ms(healed.elapsed())
    );
    drop(read);
    let write = rwlock
        .write_with(Wait::at_most(Duration::from_secs(5)))
        .unwrap()
        .expect("a write after the others left waited 5 s");
    write.unlock().unwrap();
    drop(client);
    no_key_without_ttl(&server, "after the write released");
}

/// Under `sync_replicas` with no replica to acknowledge, an acquisition
/// that took a free lock is rolled back as soon as its reply says too few
/// replicas saw it, and `lock()` returns `NotReplicated` after one sync
/// timeout: the call is given back once, with nothing more sent for it (a
/// cancel of a queue entry it never had, carrying a `WAIT` of its own,
/// made it two).
#[test]
fn a_lock_too_few_replicas_saw_fails_after_one_sync_timeout() {
    let server = RedisServer::start();
    let sync = Duration::from_millis(500);
    let client = (server.builder())
        .sync_replicas(1, sync)
        .build()
        .expect("the client connects");
    let name = "unreplicated-take";
    let started = Instant::now();
    let err = client
        .fair_mutex(name)
        .lock()
        .expect_err("no replica saw it");
    let took = started.elapsed();
    eprintln!(
        "leftovers: lock() without a replica: {err} after {:.0} ms",
        ms(took)
    );
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
    assert!(
        took < sync + Duration::from_millis(400),
        "{took:?} for one sync timeout of {sync:?}"
    );
    assert!(!server.client().fair_mutex(name).is_locked().unwrap());
}

/// A shortfall of replicas is an error like any other: it names the call
/// and the lock (docs/guarantees.md, "first contact"). It said only "0 of
/// the 1 replicas asked for acknowledged the write within 200ms".
#[test]
fn an_error_for_too_few_replicas_names_the_call_and_the_lock() {
    let server = RedisServer::start();
    let client = (server.builder())
        .sync_replicas(1, Duration::from_millis(200))
        .build()
        .expect("the client connects");
    let name = "unreplicated-named";
    let errors = [
        ("acquire of mutex", client.fair_mutex(name).lock().map(drop)),
        (
            "force release of mutex",
            client.fair_mutex(name).force_unlock().map(drop),
        ),
        (
            "revoke of rwlock",
            client.fair_rwlock(name).revoke().map(drop),
        ),
        (
            "set permits of semaphore",
            client.fair_semaphore(name, 2).set_permits(3).map(drop),
        ),
    ];
    for (call, got) in errors {
        let err = got.expect_err("no replica saw it");
        eprintln!("leftovers: without a replica: {err}");
        assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
        let named = format!("{call} {name:?}: ");
        assert!(err.to_string().starts_with(&named), "{named} in {err}");
    }
}

/// The same for a lock handed over to a waiter: its confirmation (a
/// renewal and a `WAIT`) finds too few replicas, and the grant is given
/// back at once, once; the watchdog has nothing left to abandon for it
/// (it abandoned it again, as if its outcome were unknown). Counted in
/// script calls, the watchdog's own rounds 10 s and more apart.
#[test]
fn a_handoff_too_few_replicas_saw_is_given_back_once() {
    let server = RedisServer::start();
    let quiet = |builder: ClientBuilder| {
        (builder.lease(Duration::from_secs(60)))
            .waiter_timeout(Duration::from_secs(60))
            .build()
            .expect("the client connects")
    };
    let holder = quiet(server.builder());
    // The confirming renewal's own reply must come within the command
    // timeout (the WAIT's 200 ms come on top): 700 ms, as a busy machine
    // once took more than 400 ms (`Connection`, not `NotReplicated`).
    let waiter = quiet(
        (server.builder())
            .sync_replicas(1, Duration::from_millis(200))
            .command_timeout(Duration::from_millis(700)),
    );
    let name = "unreplicated-handoff";
    let mutex = holder.fair_mutex(name);
    let held = mutex.lock().unwrap();
    let queued = waiter.fair_mutex(name);
    let blocked = std::thread::spawn(move || queued.lock().map(drop));
    assert!(wait_until(Duration::from_secs(5), || mutex
        .queue_len()
        .unwrap()
        == 1));
    let mut conn = server.conn();
    let before = script_calls(&mut conn);
    held.unlock().unwrap();
    let err = join_within(blocked, Duration::from_secs(5), "the waiter")
        .expect_err("no replica saw the handoff");
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
    // Named as the call the program made, not the renewal it sent.
    let named = format!("acquire of mutex {name:?}: ");
    assert!(err.to_string().starts_with(&named), "{named} in {err}");
    // Long past the abandon's linger (the command timeout): anything the
    // watchdog was asked to abandon has gone out.
    std::thread::sleep(Duration::from_millis(1000));
    let calls = script_calls(&mut conn) - before;
    eprintln!("leftovers: a handoff without a replica: {calls} script calls from the release on");
    // The release, the waiter's confirming renewal, its abandon.
    assert_eq!(calls, 3, "script calls from the release on");
    assert!(!mutex.is_locked().unwrap(), "the grant was given back");
}

/// A lock call Redis refuses before running it, for a reason that passes
/// (`OOM`: over its `maxmemory` with `noeviction`; `NOREPLICAS`: fewer
/// replicas than `min-replicas-to-write`): nothing changed, and the same
/// call sent again once the condition passes succeeds, so `is_retryable`
/// says so (its doc: "the same call, sent again later, may succeed";
/// before: false), the kind stays `Server` with the server's words, and
/// the retry takes the lock.
#[test]
fn a_lock_call_refused_for_now_is_retryable_and_a_retry_takes_the_lock() {
    let server = RedisServer::start();
    let client = server.client();
    let mut conn = server.conn();
    let set = |conn: &mut redis::Connection, name: &str, value: &str| {
        let () = (redis::cmd("CONFIG").arg("SET").arg(name).arg(value))
            .query(conn)
            .unwrap();
    };
    set(&mut conn, "maxmemory-policy", "noeviction");
    for (code, name, value, lifted) in [
        ("OOM", "maxmemory", "1", "0"),
        ("NOREPLICAS", "min-replicas-to-write", "1", "0"),
    ] {
        set(&mut conn, name, value);
        let mutex = client.fair_mutex("refused-for-now");
        let err = mutex.lock().map(drop).expect_err("refused");
        eprintln!(
            "leftovers: a lock refused with {code}: retryable {}: {err}",
            err.is_retryable()
        );
        assert_eq!(err.kind(), ErrorKind::Server, "{err:?}");
        assert!(err.to_string().contains(code), "{err}");
        assert!(err.is_retryable(), "{code}: {err:?}");
        set(&mut conn, name, lifted);
        assert!(!mutex.is_locked().unwrap(), "{code}: the refused call held");
        mutex.lock().unwrap().unlock().unwrap();
    }
}

/// A call that consumes its guard (a mutex's unlock, a write's downgrade,
/// a multi-lock's unlock, an upgradable read's upgrade), refused by Redis for a reason that
/// passes (`NOREPLICAS`: fewer replicas than `min-replicas-to-write`), says what becomes
/// of the hold: given back all the same, by the watchdog once Redis
/// accepts it; not "try again once this passes" (before), which a caller
/// whose guard is gone cannot do, and which reads as if the hold were
/// still its own. Each lock is free within 3 s of the setting lifted (the
/// watchdog's round is a third of the 1 s lease).
#[test]
fn a_call_that_consumes_its_guard_refused_for_now_says_its_hold_is_given_back() {
    type Consume = Box<dyn FnOnce() -> fairlock::Result<()>>;
    let server = RedisServer::start();
    let client = server
        .builder()
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let replicas = |n: &str| {
        let () = (redis::cmd("CONFIG")
            .arg("SET")
            .arg("min-replicas-to-write")
            .arg(n))
        .query(&mut server.conn())
        .unwrap();
    };
    let (over, under) = (|| replicas("1"), || replicas("0"));
    let (mutex, rwlock) = (
        client.fair_mutex("consumed"),
        client.fair_rwlock("consumed"),
    );
    let unlock = mutex.lock().unwrap();
    let write = rwlock.write().unwrap();
    let set_of_two = client.fair_multi_lock(["consumed-a", "consumed-b"]);
    let both = set_of_two.lock().unwrap();
    let cases: [(&str, Consume); 3] = [
        ("an unlock", Box::new(move || unlock.unlock())),
        ("a downgrade", Box::new(move || write.downgrade().map(drop))),
        ("a multi-lock's unlock", Box::new(move || both.unlock())),
    ];
    let upgradable = client.fair_rwlock("consumed-upgradable");
    let mut consumed = Vec::new();
    for (what, consume) in cases {
        over();
        consumed.push((what, consume()));
        under();
    }
    let read = upgradable.upgradable_read().unwrap();
    over();
    consumed.push(("an upgrade", read.upgrade().map(drop)));
    under();
    for (what, got) in consumed {
        let err = got.expect_err(what);
        eprintln!("leftovers: {what} refused for want of replicas: {err}");
        assert_eq!(err.kind(), ErrorKind::Server, "{what}: {err:?}");
        let said = err.to_string();
        assert!(said.contains("NOREPLICAS"), "{what}: {said}");
        assert!(!said.contains("try again"), "{what}: {said}");
        assert!(said.contains("given back"), "{what}: {said}");
    }
    let free = || {
        let parts = ["consumed-a", "consumed-b"].map(|name| client.fair_mutex(name));
        !(mutex.is_locked().unwrap()
            || rwlock.is_locked().unwrap()
            || upgradable.is_locked().unwrap()
            || parts.iter().any(|part| part.is_locked().unwrap()))
    };
    let lifted = Instant::now();
    assert!(wait_until(Duration::from_secs(3), free), "not given back");
    eprintln!(
        "leftovers: every lock free {:?} after the last lift",
        lifted.elapsed()
    );
}

/// Under `sync_replicas`, renewals too few replicas acknowledge (the
/// replica gone) are said at warn once, naming the client, not once a
/// round (every 200 ms here, each waiting up to 250 ms for the replica:
/// 50 ms was too short for a loaded machine's replica to acknowledge the
/// first lock), nor for rounds of heartbeats alone. Nor do they push out
/// the lease the guard counts on: its 1.5 s outlast three such rounds, and
/// the hold is counted lost once its last acknowledged lease runs out.
#[test]
fn renewals_too_few_replicas_saw_are_warned_of_once() {
    crate::semaphore::warnings("");
    // The master syncs its replica at once, not after 5 s.
    let server = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = server.port().to_string();
    let mut replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(10), || {
        replicas_acknowledge(&mut conn, 1)
    }));
    let client = (server.builder())
        .lease(Duration::from_millis(1500))
        .waiter_timeout(Duration::from_millis(600))
        .sync_replicas(1, Duration::from_millis(250))
        .build()
        .unwrap();
    let mutex = client.fair_mutex("renewals-short");
    // A loaded machine's replica may take longer than 250 ms to acknowledge
    // the take (which is then given back, `NotReplicated`): take it again.
    let started = Instant::now();
    let guard = loop {
        match mutex.lock() {
            Ok(guard) => break guard,
            Err(err)
                if err.kind() == ErrorKind::NotReplicated
                    && started.elapsed() < Duration::from_secs(10) => {}
            Err(err) => panic!("the lock, with its replica up: {err:?}"),
        }
    };
    // Its wait outlasts the steps before the release below (up to 12 s):
    // one that ran out first would return nothing, not the handoff's error.
    let waiter = {
        let mutex = mutex.clone();
        std::thread::spawn(move || mutex.try_lock_for(Duration::from_secs(15)).map(drop))
    };
    assert!(wait_until(Duration::from_secs(5), || mutex
        .status(1)
        .is_ok_and(|s| s.queue_len == 1)));
    replica.kill();
    assert!(wait_until(Duration::from_secs(5), || guard.is_lease_lost()));
    // Five rounds or more after the lease was lost.
    std::thread::sleep(Duration::from_secs(2));
    let said = crate::semaphore::warnings(&format!("client {}'s renewals", client.id()));
    assert_eq!(said.len(), 1, "{said:#?}");
    drop(guard);
    let handed = join_within(waiter, Duration::from_secs(10), "the waiter");
    assert_eq!(handed.map_err(|e| e.kind()), Err(ErrorKind::NotReplicated));
}

/// With `sync_replicas` the watchdog's round carries a `WAIT` after its
/// renewals. A `WAIT` Redis refuses (here an ACL that no longer lets the
/// client's user run it) fails the round as what Redis said, a
/// `Permission` refusal, as a lock call's refused `WAIT` does, not as "an
/// unexpected reply from a fairlock script" (the same for a `LOADING`,
/// which is then a `Connection` error, as the round's waiters count it).
#[test]
fn a_watchdog_round_whose_wait_is_refused_says_what_redis_said() {
    crate::semaphore::warnings("");
    let (server, _replica, mut admin) = crate::deadlines::server_with_replica();
    create_acl_user(&mut admin, "wait-refused");
    let allow = |rule: &str| {
        let () = (redis::cmd("ACL").arg("SETUSER").arg("fairlock").arg(rule))
            .query(&mut server.conn())
            .unwrap();
    };
    // docs/security.md: sync_replicas needs `WAIT` too.
    allow("+wait");
    let client = Client::builder(&server.url_as("fairlock", "wait-refused"))
        .lease(Duration::from_millis(600))
        .waiter_timeout(Duration::from_millis(600))
        .sync_replicas(1, Duration::from_secs(1))
        .build()
        .unwrap();
    let guard = client.fair_mutex("wait-refused").lock().unwrap();
    allow("-wait");
    let round = format!("client {}'s watchdog round", client.id());
    let said = || crate::semaphore::warnings(&round);
    assert!(
        wait_until(Duration::from_secs(5), || !said().is_empty()),
        "no round failed"
    );
    let said = said();
    eprintln!("{said:#?}");
    assert!(
        said[0].contains("ACL denies") && !said[0].contains("unexpected reply"),
        "{said:#?}"
    );
    allow("+wait");
    drop(guard);
}

/// docs/guarantees.md, "keys": once a hold is released, no key of its lock
/// lives longer than the lease the hold had left plus the fence life,
/// whichever kind (a release keeps the TTL the key had, rather than write
/// a new one, while that is at most two fence lives). The documented
/// bound said a fence life alone (600 s): the reader-writer lock's meta
/// lived 602.0 s, a mutex's key 601.95 s.
#[test]
fn a_released_locks_keys_live_no_longer_than_its_lease_and_the_fence_life() {
    let server = RedisServer::start();
    // (The test client's lease: 2 s.)
    let lease = Duration::from_secs(2);
    let client = server.client();
    client.fair_mutex("m").lock().unwrap().unlock().unwrap();
    client
        .fair_semaphore("s", 2)
        .acquire()
        .unwrap()
        .unlock()
        .unwrap();
    client.fair_rwlock("r").write().unwrap().unlock().unwrap();
    client.fair_rwlock("r").read().unwrap().unlock().unwrap();
    client.election("e").campaign().unwrap().unlock().unwrap();
    let bound = (lease + fairlock::DEFAULT_FENCE_LIFE).as_millis() as i64;
    let mut conn = server.conn();
    let keys = keys_and_ttls(&mut conn);
    assert!(keys.len() >= 5, "{keys:?}");
    for (key, ttl) in keys {
        assert!(
            (1..=bound).contains(&ttl),
            "{key} lives {ttl} ms, not at most {bound} ms"
        );
    }
}

/// A server over its `maxmemory` (`noeviction`) refuses what would add
/// data, not what keeps or gives back what it has, as Redis's own `PEXPIRE`
/// and `DEL` run there: holds of every kind (lease 600 ms, renewed every
/// 200 ms) outlive three leases of it, their unlocks free them, a write
/// downgrades to a read (in place), and a waiter whose deadline ends
/// leaves the queue. Redis 6.2 calls scripts by EVALSHA, which carry no flags:
/// their first write that may add data is refused there.
#[test]
fn holds_are_renewed_and_given_back_over_maxmemory() {
    if server_version().0 < 7 {
        eprintln!("skipped: redis 6.2's scripts carry no allow-oom flag");
        return;
    }
    let server = RedisServer::start();
    let client = (server.builder())
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    let other = server.client();
    let (mutex, semaphore, rwlock) = (
        client.fair_mutex("over-maxmemory"),
        client.fair_semaphore("over-maxmemory", 1),
        client.fair_rwlock("over-maxmemory"),
    );
    let holds = [
        mutex.lock().unwrap().into_any(),
        semaphore.acquire().unwrap().into_any(),
        rwlock.write().unwrap().into_any(),
    ];
    let write = client.fair_rwlock("over-maxmemory-downgraded").write();
    let waiter = other.fair_mutex("over-maxmemory");
    let impatient = std::thread::spawn(move || {
        let got = waiter.try_lock_for(Duration::from_millis(800));
        got.map(|got| got.is_none()).map_err(|err| err.to_string())
    });
    let queued = || mutex.queue_len().unwrap() == 1;
    assert!(
        wait_until(Duration::from_secs(5), queued),
        "the waiter queues"
    );
    server.set_eviction("1", "noeviction");
    let over = Instant::now();
    let ended = join_within(impatient, Duration::from_secs(5), "the waiter");
    let left = mutex.queue_len().unwrap();
    std::thread::sleep(Duration::from_millis(1800).saturating_sub(over.elapsed()));
    let lost = holds
        .iter()
        .map(|hold| hold.is_lease_lost())
        .collect::<Vec<_>>();
    let released = holds.map(|hold| hold.unlock().map_err(|err| err.to_string()));
    let downgraded = (write.unwrap().downgrade())
        .and_then(|read| read.unlock())
        .map_err(|err| err.to_string());
    let free = [mutex.is_locked(), semaphore.is_locked(), rwlock.is_locked()];
    server.set_eviction("0", "noeviction");
    eprintln!("leftovers: over maxmemory: waiter {ended:?}, {left} left queued; lost {lost:?}; released {released:?}");
    assert_eq!(ended, Ok(true), "the waiter's wait ends empty");
    assert_eq!(left, 0, "the waiter left the queue");
    assert_eq!(lost, [false; 3], "holds lost over maxmemory");
    assert!(released.iter().all(Result::is_ok), "{released:?}");
    assert_eq!(downgraded, Ok(()), "a write downgraded, the read unlocked");
    assert!(
        free.iter().all(|locked| !locked.as_ref().unwrap()),
        "{free:?}"
    );
}

/// A thread that panics while it holds (a guard of each kind, thread-bound,
/// one re-entered; a multi-lock; a leadership) releases every hold as it
/// unwinds, as a std guard does: nothing held or queued after it, each
/// lease signal told `Released`.
#[test]
fn a_thread_that_panics_while_holding_releases_every_hold_as_it_unwinds() {
    let server = RedisServer::start();
    let client = server.client();
    let holder = client.clone();
    let panicked = std::thread::spawn(move || {
        let mut signals = Vec::new();
        let mut held = Vec::new();
        for kind in [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write] {
            let name = format!("panics-{kind:?}");
            let guard = take::<Bound>(&holder, kind, &name, LeasePolicy::Client, Wait::forever());
            held.push(guard.unwrap().expect("free"));
        }
        held.push(holder.fair_mutex("panics-Mutex").lock().unwrap().into_any());
        signals.extend(held.iter().map(|guard| guard.lease_signal()));
        let set = holder
            .fair_multi_lock(["panics-a", "panics-b"])
            .lock()
            .unwrap();
        signals.extend(set.parts().iter().map(|part| part.lease_signal()));
        let leadership = holder.election("panics").campaign().unwrap();
        signals.push(leadership.lease_signal());
        std::panic::panic_any(signals);
    });
    let signals = panicked.join().expect_err("the thread panicked");
    let signals = signals.downcast::<Vec<fairlock::LeaseSignal>>().unwrap();
    for signal in signals.iter() {
        assert_eq!(signal.ended(), Some(fairlock::LeaseEnd::Released));
    }
    let locks = [Kind::Mutex, Kind::Semaphore, Kind::Read, Kind::Write]
        .map(|kind| (kind.lock_kind(), format!("panics-{kind:?}")));
    let others = [
        ("panics-a", fairlock::LockKind::Mutex),
        ("panics-b", fairlock::LockKind::Mutex),
    ];
    let others = others.map(|(name, kind)| (kind, name.to_owned()));
    let election = (fairlock::LockKind::Election, "panics".to_owned());
    for (kind, name) in locks.into_iter().chain(others).chain([election]) {
        let status = client.status(kind, &name, 10).unwrap();
        assert!(status.holders.is_empty(), "{kind:?} {name}: {status:?}");
        assert_eq!(status.queue_len, 0, "{kind:?} {name}");
    }
}

/// A wait whose end comes while Redis refuses writes for a reason that
/// passes (`NOREPLICAS`: fewer replicas than `min-replicas-to-write`; a
/// failed snapshot's `MISCONF` is refused the same way), so that its leave
/// of the queue is refused too: every kind (a mutex's, a semaphore's, a
/// write's and a read's `try_*_for`, an election's campaign, a multi-lock
/// queued for its second part, a wait cancelled by its canceller) ends by
/// its deadline as a wait does whose leave a stall holds, `Ok(None)`, not
/// with "nothing changed (try again once this passes)" while its entry
/// stayed queued (before); once the refusal passes, the watchdog gives back
/// what it left (the entry; a grant made to it meanwhile: the holders
/// unlock as the setting is lifted), so every lock is free and nobody
/// queued.
#[test]
fn a_wait_whose_leave_is_refused_for_now_ends_empty_and_its_entry_is_given_back() {
    use fairlock::LockKind::{Election, Mutex, RwLock, Semaphore};
    type Waiting = Box<dyn FnOnce() -> fairlock::Result<bool> + Send>;
    let server = RedisServer::start();
    let holder = server.client();
    let waiter = server.builder().lease(Duration::from_millis(600));
    let waiter = waiter.build().unwrap();
    let replicas = |n: &str| {
        let set = redis::cmd("CONFIG")
            .arg("SET")
            .arg("min-replicas-to-write")
            .arg(n)
            .clone();
        set.query::<()>(&mut server.conn()).unwrap();
    };
    let name = |what: &str| format!("refused-leave-{what}");
    let (mutex, rwlock) = (
        |what| holder.fair_mutex(&name(what)),
        |what| holder.fair_rwlock(&name(what)),
    );
    let guards = [
        mutex("mutex").lock().unwrap().into_any(),
        (holder
            .fair_semaphore(&name("semaphore"), 1)
            .acquire()
            .unwrap())
        .into_any(),
        rwlock("write").write().unwrap().into_any(),
        rwlock("read").write().unwrap().into_any(),
        (holder
            .election(&name("election"))
            .bound()
            .campaign()
            .unwrap())
        .into_any(),
        mutex("multi-b").lock().unwrap().into_any(),
        mutex("cancel").lock().unwrap().into_any(),
    ];
    let (wait, cancel) = (Duration::from_millis(800), fairlock::WaitCanceller::new());
    let c = waiter.clone();
    let waits: [(&str, Waiting); 7] = [
        (
            "mutex",
            Box::new(move || Ok(c.fair_mutex(&name("mutex")).try_lock_for(wait)?.is_none())),
        ),
        ("semaphore", {
            let semaphore = waiter.fair_semaphore(&name("semaphore"), 1);
            Box::new(move || Ok(semaphore.try_acquire_for(wait)?.is_none()))
        }),
        ("write", {
            let rwlock = waiter.fair_rwlock(&name("write"));
            Box::new(move || Ok(rwlock.try_write_for(wait)?.is_none()))
        }),
        ("read", {
            let rwlock = waiter.fair_rwlock(&name("read"));
            Box::new(move || Ok(rwlock.try_read_for(wait)?.is_none()))
        }),
        ("election", {
            let election = waiter.election(&name("election"));
            Box::new(move || Ok(election.try_campaign_for(wait)?.is_none()))
        }),
        ("multi-lock", {
            let set = waiter.fair_multi_lock([name("multi-a"), name("multi-b")]);
            Box::new(move || Ok(set.try_lock_for(wait)?.is_none()))
        }),
        ("cancel", {
            let (mutex, waiting) = (
                waiter.fair_mutex(&name("cancel")),
                Wait::forever().cancelled_by(&cancel),
            );
            Box::new(move || Ok(mutex.lock_with(waiting)?.is_none()))
        }),
    ];
    let locks = [
        (Mutex, "mutex"),
        (Semaphore, "semaphore"),
        (RwLock, "write"),
        (RwLock, "read"),
        (Election, "election"),
        (Mutex, "multi-b"),
        (Mutex, "cancel"),
        (Mutex, "multi-a"),
    ];
    // Each lock's queue length and holders, as Redis has them.
    let seen = || {
        locks.map(|(kind, what)| {
            let status = holder.status(kind, &name(what), 10).unwrap();
            (status.queue_len, status.holder_count)
        })
    };
    let started = Instant::now();
    let threads = waits.map(|(what, waiting)| (what, std::thread::spawn(waiting)));
    let queued = |status: [(usize, usize); 8]| status.map(|(queued, _)| queued);
    assert!(
        wait_until(Duration::from_millis(600), || queued(seen())
            == [1, 1, 1, 1, 1, 1, 1, 0]),
        "every waiter queues: {:?}",
        seen()
    );
    replicas("1");
    cancel.cancel();
    let ended = threads.map(|(what, thread)| {
        let got = join_within(thread, Duration::from_secs(5), what);
        (what, got.map_err(|err| err.to_string()), started.elapsed())
    });
    replicas("0");
    let unlocked = guards.map(|guard| guard.unlock().map_err(|err| err.to_string()));
    let lifted = Instant::now();
    let given_back = wait_until(Duration::from_secs(3), || seen() == [(0, 0); 8]);
    eprintln!(
        "leftovers: waits ended with their leave refused: {ended:?}; all given back {given_back} \
         {:?} after the lift",
        lifted.elapsed()
    );
    for (what, got, took) in ended {
        assert_eq!(got, Ok(true), "{what}: the wait ends empty");
        assert!(
            took < wait + Duration::from_millis(500),
            "{what}: ended after {took:?}"
        );
    }
    assert!(unlocked.iter().all(Result::is_ok), "{unlocked:?}");
    assert!(given_back, "left queued or held: {:?}", seen());
}
