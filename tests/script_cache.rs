//! A server that lost its script cache (and, from Redis 7.0 on, fairlock's
//! Functions library) under a running client costs latency only: after
//! `SCRIPT FLUSH` and `FUNCTION FLUSH`, a restart (data kept in the AOF,
//! scripts not, from Redis 7.0 on; the library is kept) and a failover to
//! a replica that never loaded the scripts (the library it has from its
//! master), every call returns without an error, the held lock keeps its
//! hold, the waiters keep their places, and the watchdog's next pipeline
//! (renewal, heartbeat and `WAIT` under `sync_replicas`) reloads what was
//! lost and succeeds before any user call could have reloaded it. An
//! abandon pending over a flush (an unlock cut off by a relay) reloads
//! them too.
//!
//! What the server did is read with plain commands, never a script (which
//! would reload the cache itself): the lock's expiry (`TIME` + `PTTL`), the
//! waiters' deadlines (`ZRANGEBYSCORE ... WITHSCORES` of the queue), the loads the clients
//! sent (`SCRIPT LOAD` and `FUNCTION LOAD` in `INFO commandstats`) and
//! `FUNCTION LIST`.

use std::time::{Duration, Instant};

use fairlock::{Client, ClientBuilder, FairMutexGuard};
use fairlock_test_support::*;

/// Watchdog period `min(LEASE, WAITER_TIMEOUT)/3` = 1.33 s. The lease
/// outlives a restart plus the replica's resync (about 1 s), during which
/// renewals are not acknowledged and so not counted.
const LEASE: Duration = Duration::from_secs(4);
const WAITER_TIMEOUT: Duration = Duration::from_secs(4);
/// Two watchdog periods plus a margin for a loaded machine.
const RENEWED_WITHIN: Duration = Duration::from_secs(6);
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);

fn key(kind: &str, name: &str) -> String {
    lock_key(name).replacen(":lock:", &format!(":{kind}:"), 1)
}

/// The server's clock, in ms.
fn server_ms(conn: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
    secs * 1000 + micros / 1000
}

/// Script and library loads the server has run (`SCRIPT LOAD` and
/// `FUNCTION LOAD` calls in `INFO commandstats`): a running client loads
/// only when it finds its scripts or its library lost. Redis 6.2 counts
/// every `SCRIPT` subcommand as one, so read this after any `SCRIPT FLUSH`.
fn reloads(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    [
        "cmdstat_script|load:calls=",
        "cmdstat_function|load:calls=",
        "cmdstat_script:calls=",
    ]
    .iter()
    .filter_map(|prefix| info.lines().find_map(|l| l.strip_prefix(prefix)))
    .map(|rest| rest.split(',').next().unwrap().parse::<i64>().unwrap())
    .sum()
}

/// Whether the clients call fairlock's library here (Redis 7.0 and later,
/// Valkey) rather than EVALSHA.
fn calls_functions() -> bool {
    script_command() == "FCALL"
}

/// Whether the server has fairlock's library (`FUNCTION LIST`).
fn has_library(conn: &mut redis::Connection) -> bool {
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("fairlock_*")
        .query(conn)
        .unwrap();
    !libraries.is_empty()
}

/// Waits (plain commands only) until the watchdog renewed `name`'s lease
/// and heartbeated all of its `waiters` after server time `since_ms`;
/// returns how long that took. A renewal at t sets the expiry to
/// t + LEASE, a heartbeat the deadline to t + WAITER_TIMEOUT.
fn watchdog_round_after(
    conn: &mut redis::Connection,
    name: &str,
    waiters: usize,
    since_ms: i64,
) -> Duration {
    let started = Instant::now();
    let mut last = String::new();
    let done = wait_until(RENEWED_WITHIN, || {
        let now = server_ms(conn);
        let pttl = lease_left_of(conn, &lock_key(name)).unwrap_or(-2);
        // The deadlines: the queue's members scored 2^50 + the deadline
        // (lua/lib/queue.lua).
        let deadlines: Vec<(String, i64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(key("queue", name))
            .arg(DEADLINE_BASE)
            .arg("+inf")
            .arg("WITHSCORES")
            .query::<Vec<(String, i64)>>(conn)
            .unwrap()
            .into_iter()
            .map(|(member, score)| (member, score - DEADLINE_BASE))
            .collect();
        last = format!("now {now}, pttl {pttl}, deadlines {deadlines:?}, since {since_ms}");
        now + pttl >= since_ms + LEASE.as_millis() as i64
            && deadlines.len() == waiters
            && deadlines
                .iter()
                .all(|(_, d)| *d >= since_ms + WAITER_TIMEOUT.as_millis() as i64)
    });
    assert!(
        done,
        "no renewal and heartbeat within {RENEWED_WITHIN:?}: {last}"
    );
    started.elapsed()
}

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .lease(LEASE)
        .waiter_timeout(WAITER_TIMEOUT)
        .connect_timeout(Duration::from_secs(2))
        .sync_replicas(1, SYNC_TIMEOUT)
}

/// A holder (this thread) and two waiters of other clients, queued in
/// order.
struct Scene {
    holder: Client,
    b: Client,
    c: Client,
    guard: FairMutexGuard,
    first: LockThread,
    second: LockThread,
    owners: Vec<String>,
}

const NAME: &str = "cache";

fn scene(url: &str) -> Scene {
    let holder = builder(url).build().unwrap();
    let b = builder(url).build().unwrap();
    let c = builder(url).build().unwrap();
    let m = holder.fair_mutex(NAME);
    let guard = m.lock().unwrap();
    let first = LockThread::lock(b.fair_mutex(NAME));
    assert!(wait_until(Duration::from_secs(5), || m
        .queue_len()
        .unwrap()
        == 1));
    let second = LockThread::lock(c.fair_mutex(NAME));
    assert!(wait_until(Duration::from_secs(5), || m
        .queue_len()
        .unwrap()
        == 2));
    let owners = queue_owners(&holder);
    Scene {
        holder,
        b,
        c,
        guard,
        first,
        second,
        owners,
    }
}

/// The queue, first waiter first, as `status` reports it.
fn queue_owners(client: &Client) -> Vec<String> {
    let status = client.fair_mutex(NAME).status(10).unwrap();
    status
        .waiters
        .iter()
        .map(|w| format!("{:?}", w.who))
        .collect()
}

impl Scene {
    /// After a lost cache: the hold and the queue are as they were.
    fn check_kept(&self, what: &str) {
        assert!(!self.guard.is_lease_lost(), "{what}: hold lost");
        assert_eq!(
            queue_owners(&self.holder),
            self.owners,
            "{what}: the queue changed"
        );
        assert!(
            self.holder
                .fair_mutex(NAME)
                .is_held_by_current_thread()
                .unwrap(),
            "{what}"
        );
    }

    /// Unlocks; the waiters get the lock in their order.
    fn finish(self) {
        let Scene {
            holder,
            b,
            c,
            guard,
            first,
            second,
            ..
        } = self;
        guard.unlock().unwrap();
        let (first_at, first_token) = first.granted_within(Duration::from_secs(5), "first");
        assert!(
            !second.is_granted_within(Duration::from_millis(50)),
            "the second waiter went first"
        );
        first.release("first");
        let (second_at, second_token) = second.granted_within(Duration::from_secs(5), "second");
        assert!(second_at > first_at && second_token > first_token);
        second.release("second");
        drop((holder, b, c));
    }
}

/// A user call (`try_lock` + unlock of a free name: acquire and release,
/// each with its `WAIT`), timed.
fn timed_call(client: &Client, name: &str) -> Duration {
    let started = Instant::now();
    let guard = client.fair_mutex(name).try_lock().unwrap().unwrap();
    guard.unlock().unwrap();
    started.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn script_flush_and_a_restart_cost_latency_only() {
    let _serial = serial();
    let mut master = RedisServer::start_with(&[
        // The restart keeps the data (not the scripts).
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let master_port = master.port().to_string();
    let _replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master_port]);
    let mut admin = master.conn();
    assert!(wait_until(
        Duration::from_secs(10),
        || replicas_acknowledge(&mut admin, 1)
    ));
    let scene = scene(&master.url());

    // (a) SCRIPT FLUSH and FUNCTION FLUSH: nobody but the watchdog runs a
    // script meanwhile.
    lose_scripts(&mut admin);
    let reloads_before = reloads(&mut admin);
    let since = server_ms(&mut admin);
    let took = watchdog_round_after(&mut admin, NAME, 2, since);
    let reloaded = reloads(&mut admin) - reloads_before;
    assert!(reloaded >= 1, "the watchdog never found the cache empty");
    scene.check_kept("after SCRIPT FLUSH");
    eprintln!(
        "SCRIPT FLUSH: renewal and heartbeats {:.0} ms later ({reloaded} loads)",
        ms(took)
    );

    // The cost of a reload on a user call: one NOSCRIPT (or "Function not
    // found") round trip plus the load.
    let steady = median(
        (0..7)
            .map(|i| timed_call(&scene.b, &format!("probe-{i}")))
            .collect(),
    );
    lose_scripts(&mut admin);
    let cold = timed_call(&scene.b, "probe-cold");
    eprintln!(
        "user call (try_lock + unlock, sync_replicas): {:.2} ms steady (median of 7), \
         {:.2} ms right after SCRIPT FLUSH",
        ms(steady),
        ms(cold)
    );
    assert!(cold < Duration::from_secs(1), "{cold:?}");

    // (b) A restart: the data comes back from the AOF, the scripts do not.
    drop(admin);
    master.restart();
    let mut admin = master.conn();
    let since = server_ms(&mut admin);
    let took = watchdog_round_after(&mut admin, NAME, 2, since);
    let reloaded = reloads(&mut admin);
    // Before 7.0, SCRIPT LOAD went into the AOF too: the scripts come back;
    // from 7.0 on, so does the library (the scripts do not).
    assert!(
        reloaded >= 1
            || server_version() < (7, 0, 0)
            || (calls_functions() && has_library(&mut admin)),
        "the watchdog never found the cache empty"
    );
    // Lock writes need the replica back and acknowledging (sync_replicas).
    assert!(wait_until(
        Duration::from_secs(10),
        || replicas_acknowledge(&mut admin, 1)
    ));
    scene.check_kept("after a restart");
    eprintln!(
        "restart: renewal and heartbeats {:.0} ms after the server was back \
         ({reloaded} loads)",
        ms(took)
    );
    scene.finish();
}

#[test]
fn a_failover_to_a_replica_without_the_scripts_costs_latency_only() {
    let _serial = serial();
    let set = SentinelSet::start();
    let old = set.master_port();
    let new = set
        .servers()
        .iter()
        .map(RedisServer::port)
        .find(|&p| p != old)
        .unwrap();
    let scene = scene(&set.url());

    // The replica never loaded the scripts (a 6.2 master replicates SCRIPT
    // LOAD; 7.0 does not): make sure of it. A replica has the library
    // (FUNCTION LOAD is replicated) and refuses FUNCTION FLUSH.
    let mut replica = set.conn_to(new);
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut replica)
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut replica)
        .unwrap();
    let failover_started = Instant::now();
    let () = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(SentinelSet::master_name())
        .query(&mut set.sentinels()[0].conn())
        .unwrap();
    let failover = set.wait_for_failover(old, Duration::from_secs(30));
    // The Sentinels turn the old master into a replica only about 8 s
    // later (four of their publish periods); until then it takes writes
    // no replica acknowledges, and under sync_replicas a hold renewed
    // there runs out. Done at once here, as they would do it.
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(new)
        .query(&mut set.conn_to(old))
        .unwrap();
    let mut admin = set.conn_to(new);
    let since = server_ms(&mut admin);
    let took = watchdog_round_after(&mut admin, NAME, 2, since);
    let reloaded = reloads(&mut admin);
    assert!(
        reloaded >= 1 || (calls_functions() && has_library(&mut admin)),
        "the watchdog never found the cache empty"
    );
    assert!(wait_until(
        Duration::from_secs(10),
        || replicas_acknowledge(&mut admin, 1)
    ));
    eprintln!(
        "failover: promoted {:.0} ms after SENTINEL FAILOVER; renewal and heartbeats \
         {:.0} ms later on the new master ({reloaded} loads); {:.0} ms in all",
        ms(failover),
        ms(took),
        ms(failover_started.elapsed())
    );
    scene.check_kept("after a failover");
    scene.finish();
}

/// An abandon pending while the server loses its scripts: an unlock that
/// never reached Redis (the link cut by a relay), `SCRIPT FLUSH` and
/// `FUNCTION FLUSH`, the link healed. The client's watchdog is the only one
/// to run a script after the flush (no other client, no hold, no waiter
/// left), so the lost script it finds is its abandon's, which reloads
/// them and frees the lock.
#[test]
fn an_abandon_after_a_script_flush_costs_latency_only() {
    let _serial = serial();
    let server = RedisServer::start();
    let relay = Relay::start(server.port());
    let client = Client::builder(&relay.url())
        // A lease that cannot run out within the test: only the abandon
        // frees the lock. Watchdog period 333 ms.
        .lease(Duration::from_secs(30))
        .waiter_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let guard = client.fair_mutex("abandon-pending").lock().unwrap();
    let mut admin = server.conn();
    let held = |admin: &mut redis::Connection| -> bool {
        holder_of(admin, &lock_key("abandon-pending")).is_some()
    };
    relay.cut();
    let err = guard.unlock().expect_err("unlock() over a cut link");
    assert!(err.is_connection(), "{err:?}");
    lose_scripts(&mut admin);
    let reloads_before = reloads(&mut admin);
    assert!(held(&mut admin), "the unlock reached Redis after all");
    relay.heal();
    let healed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(3), || !held(&mut admin)),
        "the abandon did not free the lock within 3 s of the link healing"
    );
    let took = healed.elapsed();
    let reloaded = reloads(&mut admin) - reloads_before;
    assert!(reloaded >= 1, "the abandon never found the cache empty");
    eprintln!(
        "abandon: the lock free {:.0} ms after the link healed ({reloaded} loads; \
         watchdog period 333 ms)",
        ms(took)
    );
    let other = server.client();
    assert!(other
        .fair_mutex("abandon-pending")
        .try_lock()
        .unwrap()
        .is_some());
    drop(client);
}

/// How many `EVALSHA` calls the server has run (`INFO commandstats`).
fn evalsha_calls(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A library lost (`FUNCTION FLUSH`) while the server is over its
/// `maxmemory` (`noeviction`), and a client started then: the reload's
/// `FUNCTION LOAD` is refused (`OOM`) and the call fails as any call
/// refused for memory does; once memory is back, both clients load the
/// library and call it (`FCALL`) again. Before, a refused `FUNCTION LOAD`
/// was taken for a server without Functions: both called EVALSHA for good
/// (6-8% more of the server's work per cycle).
#[test]
fn a_library_load_refused_for_memory_is_not_taken_for_a_server_without_functions() {
    if !calls_functions() {
        return; // Redis 6.2: EVALSHA is the only way
    }
    let server = RedisServer::start();
    let mut admin = server.conn();
    let running = server.client();
    let mutex = running.fair_mutex("reload-oom");
    drop(mutex.lock().unwrap());
    lose_scripts(&mut admin);
    server.set_eviction("1", "noeviction");
    let err = mutex.try_lock().expect_err("refused for memory");
    assert!(err.to_string().contains("OOM"), "{err}");
    let started = server.client();
    // A status writes nothing: it runs over maxmemory too (by EVALSHA).
    for client in [&running, &started] {
        assert!(!client.fair_mutex("reload-oom").is_locked().unwrap());
    }
    server.set_eviction("0", "noeviction");
    let before = evalsha_calls(&mut admin);
    for client in [&running, &started] {
        for _ in 0..5 {
            drop(client.fair_mutex("reload-oom").lock().unwrap());
        }
    }
    let evalshas = evalsha_calls(&mut admin) - before;
    eprintln!("after the limit was lifted: {evalshas} EVALSHA calls in 10 lock cycles");
    assert_eq!(evalshas, 0, "the clients call EVALSHA, not the library");
    assert!(has_library(&mut admin));
}

/// The same for a client started while the server refuses writes after a
/// failed snapshot (`MISCONF`, `stop-writes-on-bgsave-error`): its
/// `FUNCTION LOAD` is refused for now, not for good; once the server takes
/// writes, the client loads the library and calls it. Before, it called
/// EVALSHA for good.
#[test]
fn a_library_load_refused_after_a_failed_snapshot_is_not_taken_for_a_server_without_functions() {
    if !calls_functions() {
        return; // Redis 6.2: EVALSHA is the only way
    }
    let server = RedisServer::start();
    let mut admin = server.conn();
    let config = |conn: &mut redis::Connection, name: &str| -> String {
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(conn)
            .unwrap();
        got[1].clone()
    };
    // The snapshot cannot take its file's name: a directory has it.
    let dir = std::path::PathBuf::from(config(&mut admin, "dir"));
    std::fs::create_dir_all(dir.join(config(&mut admin, "dbfilename")).join("taken")).unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("save")
        .arg("3600 1")
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("BGSAVE").query(&mut admin).unwrap();
    assert!(wait_until(Duration::from_secs(5), || {
        let refused = redis::cmd("SET")
            .arg("misconf-probe")
            .arg(1)
            .query::<()>(&mut admin);
        refused.is_err_and(|err| err.code() == Some("MISCONF"))
    }));
    let started = server.client();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("stop-writes-on-bgsave-error")
        .arg("no")
        .query(&mut admin)
        .unwrap();
    let before = evalsha_calls(&mut admin);
    for _ in 0..5 {
        drop(started.fair_mutex("reload-misconf").lock().unwrap());
    }
    let evalshas = evalsha_calls(&mut admin) - before;
    eprintln!("after writes were allowed: {evalshas} EVALSHA calls in 5 lock cycles");
    assert_eq!(evalshas, 0, "the client calls EVALSHA, not the library");
    assert!(has_library(&mut admin));
}

/// The `FCALL` calls the server has run (`INFO commandstats`).
fn fcalls(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_fcall:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A client starting on a server that has its library already does not
/// load it again (at every start it sent the whole library, about 180 KB,
/// which took the server's one thread about 2 ms to load): the first
/// client loads it, the next ones only call the function that does
/// nothing and go on calling the library; after `FUNCTION FLUSH` the next
/// start loads it again.
#[test]
fn a_client_starting_where_its_library_is_loaded_does_not_load_it_again() {
    if !calls_functions() {
        eprintln!("skipped: the server has no Functions (every client calls EVALSHA)");
        return;
    }
    let server = RedisServer::start();
    let mut conn = server.conn();
    let first = Client::open(&server.url()).unwrap();
    assert!(has_library(&mut conn));
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .unwrap();
    let later: Vec<Client> = (0..3)
        .map(|_| Client::open(&server.url()).unwrap())
        .collect();
    assert_eq!(
        reloads(&mut conn),
        0,
        "a client found the library and loaded it again"
    );
    assert_eq!(
        fcalls(&mut conn),
        3,
        "one call of the library at each start"
    );
    for client in later.iter().chain([&first]) {
        client.fair_mutex("found").lock().unwrap().unlock().unwrap();
    }
    assert!(
        fcalls(&mut conn) >= 3 + 4 * 2,
        "every lock and unlock by FCALL"
    );
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut conn)
        .unwrap();
    let after_flush = Client::open(&server.url()).unwrap();
    assert_eq!(
        reloads(&mut conn),
        1,
        "a start where the library is gone loads it"
    );
    assert!(has_library(&mut conn));
    after_flush
        .fair_mutex("found")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
}
