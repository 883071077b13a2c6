//! Least privilege, authentication, TLS, and one client's holds safe from
//! another: the library works as an ACL user limited to `fairlock:*` keys
//! and channels and to the commands in docs/security.md's ACL line (the very line
//! these tests apply, plus its additions for Redis Cluster, Sentinel and
//! `sync_replicas`), authenticates from the URL, speaks TLS with the `tls`
//! feature, and no client can release, renew or dequeue another's hold
//! except through `force_unlock`.

use std::thread;
use std::time::{Duration, Instant};

use fairlock::{redact_url, Client, ErrorKind, Guard, LeaderEvent, Wait, WaitCanceller};
use fairlock_test_support::cluster::{lock_key, slot_of, RedisCluster};
use fairlock_test_support::sentinel::SentinelSet;
use fairlock_test_support::server::try_conn;
use fairlock_test_support::*;

const LEASE: Duration = Duration::from_secs(1);
/// The lease and waiter timeout of the TLS tests that hold past their
/// lease: a client's watchdog opens its own connection at its first round,
/// and a handshake took over a second on a busy machine (a hold of a 1 s
/// lease was lost after 958 ms, no renewal through). Each hold lasts
/// [`past`] it.
const TLS_LEASE: Duration = Duration::from_secs(2);

/// How long a test holds to see its lease renewed: past the lease by a
/// quarter of it (a renewal every third).
fn past(lease: Duration) -> Duration {
    lease + lease / 4
}

/// The lease and waiter timeout of a waiter whose fallbacks are slow:
/// its client's watchdog (whose heartbeat would find the lock handed over)
/// first runs a third of it, 5 s, after the client was built, and it polls
/// when the holder's lease, as long, would run out. Within
/// [`PUSH_BOUND`] of a release, only the push message hands it the lock.
const SLOW: Duration = Duration::from_secs(15);

/// How soon after the release a waiter of [`SLOW`] settings has the lock
/// by the push message.
const PUSH_BOUND: Duration = Duration::from_millis(500);

/// Hands `holder`'s lock, held with a fixed [`SLOW`] lease, to a waiter of
/// a client built from `waiter` with [`SLOW`] settings; returns the
/// handoff time, checked below [`PUSH_BOUND`], far below what either
/// fallback would give.
fn hand_over_by_push(
    holder: &fairlock::FairMutex,
    waiter: fairlock::ClientBuilder,
    what: &str,
) -> Duration {
    let waiter_built = Instant::now();
    let waiter = waiter.lease(SLOW).waiter_timeout(SLOW).build().unwrap();
    let guard = holder.with_fixed_lease(SLOW).lock().unwrap();
    let (handoff, _) = hand_over(
        guard,
        holder,
        waiter.fair_mutex(holder.name()),
        Duration::from_secs(2),
        &format!("{what} (no push message?)"),
    );
    // The release came before this: neither fallback could have served it
    // within the bound.
    assert!(
        Instant::now() + PUSH_BOUND < waiter_built + SLOW / 3,
        "{what}: too slow a handoff to tell the push message from the first heartbeat"
    );
    assert!(
        handoff < PUSH_BOUND,
        "{what}: handed over in {handoff:?}: no push message?"
    );
    handoff
}

fn is_denied(result: redis::RedisResult<redis::Value>) -> bool {
    match result {
        Err(err) => {
            let text = err.to_string().to_lowercase();
            err.code() == Some("NOPERM")
                || text.contains("noperm")
                || text.contains("permission")
                || text.contains("can't run this command")
        }
        Ok(_) => false,
    }
}

/// Builds with `connect_timeout` and expects failure; returns the error,
/// the time it took and its message chain (error / source).
fn failed_build(
    builder: fairlock::ClientBuilder,
    connect_timeout: Duration,
) -> (fairlock::Error, Duration, String) {
    let started = Instant::now();
    let err = builder
        .connect_timeout(connect_timeout)
        .build()
        .unwrap_err();
    let took = started.elapsed();
    let chain = error_chain(&err);
    (err, took, chain)
}

#[test]
fn the_readme_acl_line_allows_every_command_the_library_sends() {
    let line = readme_acl_line();
    let allowed: Vec<String> = line
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('+'))
        .map(str::to_lowercase)
        .collect();
    assert!(line.contains(" ~fairlock:* "), "{line}");
    assert!(line.contains(" &fairlock:* "), "{line}");
    assert!(
        line.contains(" resetkeys ") && line.contains(" resetchannels "),
        "{line}"
    );
    assert!(
        line.contains(" nocommands ") || line.contains(" -@all "),
        "{line}"
    );
    // Commands the scripts call (a pcall's too: an election's history
    // write is best effort, yet wanted; and what they call through
    // lib/common.lua's `emptied`, whose own pcall names none): in Redis 7
    // they run under the caller's ACL.
    let mut needed: Vec<String> = Vec::new();
    let sources = lua_sources();
    assert_eq!(
        sources.len(),
        26,
        "the 5 files of lua/lib/ and the 21 operations"
    );
    for (_, code) in &sources {
        let calls = code.split("redis.call(").skip(1);
        let pcalls = code.split("redis.pcall(").skip(1);
        for call in calls.chain(pcalls).chain(code.split("emptied(").skip(1)) {
            let command: String = call
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            if !command.is_empty() {
                needed.push(command.to_lowercase());
            }
        }
    }
    // Commands the client sends itself (its scripts as the library's
    // functions, or by EVALSHA where it cannot); the redis crate
    // unsubscribes when a subscriber stops.
    needed.extend(
        [
            "fcall",
            "function|load",
            "evalsha",
            "script|load",
            "subscribe",
            "unsubscribe",
            "punsubscribe",
            "publish",
            // The eviction check at start (`INFO memory` only).
            "info|memory",
        ]
        .map(String::from),
    );
    needed.sort();
    needed.dedup();
    // A wake-up on a cluster's shard channels, which the cluster's
    // additions grant (`the_readme_acl_additions_suffice_on_a_cluster_...`).
    needed.retain(|c| c != "spublish");
    let missing: Vec<&String> = needed.iter().filter(|c| !allowed.contains(c)).collect();
    assert!(
        missing.is_empty(),
        "docs/security.md's ACL line lacks {missing:?}: {line}"
    );
    let unused: Vec<&String> = allowed.iter().filter(|c| !needed.contains(c)).collect();
    assert!(
        unused.is_empty(),
        "docs/security.md's ACL line allows unneeded {unused:?}: {line}"
    );
}

#[test]
fn a_least_privilege_acl_user_can_do_everything_the_library_does_and_nothing_else() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "s3cret-fl");
    let () = redis::cmd("SET")
        .arg("other:key")
        .arg("precious")
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let url = server.url_as("fairlock", "s3cret-fl");
    let builder = || Client::builder(&url).lease(LEASE).waiter_timeout(LEASE);
    let a = builder().build().expect("the ACL user connects");
    let b = builder().build().unwrap();

    // Lock, re-enter, inspect, hold past two watchdog rounds with a waiter
    // queued (renew + heartbeat), hand over by push message.
    let m = a.fair_mutex("acl");
    let guard = m.lock().unwrap();
    let again = m.lock().unwrap();
    assert_eq!(m.hold_count().unwrap(), 2);
    drop(again);
    let other = b.fair_mutex("acl");
    assert!(other.try_lock().unwrap().is_none());
    assert!(other.is_locked().unwrap());
    assert!(!other.is_held_by_current_thread().unwrap());
    assert!(other.remaining_lease().unwrap().is_some());
    let waiter = LockThread::lock(b.fair_mutex("acl"));
    assert!(wait_until(Duration::from_secs(5), || m
        .queue_len()
        .unwrap()
        == 1));
    let status = other.status(10).unwrap();
    assert_eq!(status.waiters.len(), 1);
    assert!(status.holder().is_some());
    std::thread::sleep(LEASE + LEASE / 2);
    assert!(!guard.is_lease_lost(), "renewals denied?");
    assert_eq!(m.queue_len().unwrap(), 1, "heartbeats denied?");
    let released = Instant::now();
    guard.unlock().unwrap();
    let (granted, _) = waiter.granted_within(Duration::from_secs(2), "the waiter");
    // Prompt, but this waiter's heartbeat (every 333 ms) would be too:
    // the push message itself is checked next, with slow fallbacks.
    assert!(
        granted - released < Duration::from_millis(500),
        "neither the push message nor the heartbeat handed it over?"
    );
    waiter.release("the waiter");
    let handoff = hand_over_by_push(&m, Client::builder(&url), "the waiter with slow fallbacks");
    eprintln!("ACL user: handoff by push message in {:.2} ms", ms(handoff));

    // A timed-out wait (cancel), force_unlock, a fixed lease taken over by
    // the head of the queue.
    let guard = m.lock().unwrap();
    assert!(other
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert!(other.force_unlock().unwrap());
    assert_eq!(guard.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
    let fixed = m
        .with_fixed_lease(Duration::from_millis(300))
        .lock()
        .unwrap();
    let waiter = LockThread::lock(b.fair_mutex("acl"));
    waiter.granted_within(Duration::from_secs(2), "the head after a fixed lease");
    waiter.release("the head after a fixed lease");
    assert_eq!(fixed.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);

    // The server forgets its scripts: they are loaded again, as this user,
    // by a call and by the watchdog.
    let guard = m.lock().unwrap();
    lose_scripts(&mut admin);
    std::thread::sleep(LEASE);
    assert!(!guard.is_lease_lost());
    lose_scripts(&mut admin);
    assert!(b.fair_mutex("acl-2").try_lock().unwrap().is_some());
    guard.unlock().unwrap();

    // An election: a campaign announces itself on the election's channel,
    // a watch subscribes to it, a resignation announces itself too.
    let mut watch = b.election("acl").watch().unwrap();
    let leading = a
        .election("acl")
        .with_value("acl-leader")
        .campaign()
        .unwrap();
    // (Its first event is the state it first reads: the leader, or the
    // vacancy before it.)
    let mut seen = watch.next(Duration::from_secs(5)).unwrap();
    if let Some(fairlock::LeaderEvent::Vacant { .. }) = seen {
        seen = watch.next(Duration::from_secs(5)).unwrap();
    }
    match seen {
        Some(fairlock::LeaderEvent::Leads(seen)) => assert_eq!(seen.value, "acl-leader"),
        other => panic!("a leader expected, not {other:?}"),
    }
    leading.unlock().unwrap();
    drop(watch);

    // A revocation: one client asks another's holds to let go (its
    // message on the holder's channel, its record beside the holds).
    let guard = m.lock().unwrap();
    let permit = a.fair_semaphore("acl", 2).acquire().unwrap();
    assert_eq!(other.revoke().unwrap(), 1);
    assert_eq!(b.fair_semaphore("acl", 2).revoke().unwrap(), 1);
    for signal in [guard.revocation_signal(), permit.revocation_signal()] {
        assert_eq!(
            signal.wait_timeout(Duration::from_secs(5)),
            Some(fairlock::Revocation::Requested)
        );
    }
    guard.unlock().unwrap();
    permit.unlock().unwrap();

    // Every connection of the library is the ACL user's.
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    let users: Vec<&str> = clients
        .lines()
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("user=")))
        .collect();
    assert_eq!(
        users.iter().filter(|u| **u == "default").count(),
        1,
        "{clients}"
    );
    assert!(
        users.iter().filter(|u| **u == "fairlock").count() >= 4,
        "{clients}"
    );
    drop(a);
    drop(b);
    let denials = acl_denials(&mut admin);
    assert!(denials.is_empty(), "the library was denied: {denials:?}");

    // And nothing else: other keys, other channels, other commands, and
    // scripts (which run under the same ACL).
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let q = |conn: &mut redis::Connection, args: &[&str]| {
        redis::cmd(args[0])
            .arg(&args[1..])
            .query::<redis::Value>(conn)
    };
    for args in [
        &["GET", "other:key"][..],
        &["SET", "other:key", "mine"],
        &["DEL", "other:key"],
        &["GET", "fairlockx"],
        &["KEYS", "*"],
        &["SCAN", "0"],
        &["FLUSHALL"],
        &["CONFIG", "GET", "maxmemory"],
        &["ACL", "LIST"],
        &["SCRIPT", "FLUSH"],
        &["EVAL", "return 1", "0"],
        &["PUBLISH", "other", "hello"],
        &["SUBSCRIBE", "other"],
        // A command the library does not need, even on its own keys.
        &["SADD", "fairlock:set", "v"],
    ] {
        assert!(is_denied(q(&mut conn, args)), "{args:?} was allowed");
    }
    let sha: String = q(
        &mut conn,
        &["SCRIPT", "LOAD", "return redis.call('GET', KEYS[1])"],
    )
    .map(|v| redis::from_redis_value::<String>(v).unwrap())
    .unwrap();
    assert!(is_denied(q(
        &mut conn,
        &["EVALSHA", &sha, "1", "other:key"]
    )));
    assert!(q(&mut conn, &["EVALSHA", &sha, "1", "fairlock:x"]).is_ok());
    let flush: String = q(
        &mut conn,
        &["SCRIPT", "LOAD", "return redis.call('FLUSHALL')"],
    )
    .map(|v| redis::from_redis_value::<String>(v).unwrap())
    .unwrap();
    let flushed = q(&mut conn, &["EVALSHA", &flush, "0"]);
    assert!(is_denied(flushed.clone()), "{flushed:?}");
    let kept: String = redis::cmd("GET")
        .arg("other:key")
        .query(&mut admin)
        .unwrap();
    assert_eq!(kept, "precious");
    eprintln!("ACL line applied and proven: {}", readme_acl_line());
}

/// A user made with docs/security.md's line without `+fcall
/// +function|load` (where loading a library is not wanted, or an earlier
/// version's line): on a server with Functions the client calls its
/// scripts by EVALSHA instead, every call works, the library is never
/// loaded, and the refused `FCALL` that looks for it (one per client start) is all
/// that `ACL LOG` shows.
#[test]
fn a_user_without_functions_runs_every_call_by_evalsha() {
    if script_command() != "FCALL" {
        eprintln!("skipped: the server has no Functions (every client calls EVALSHA)");
        return;
    }
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user_without(&mut admin, "no-fn", &FUNCTION_RULES);
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut admin)
        .unwrap();
    let url = server.url_as("fairlock", "no-fn");
    let build = || {
        Client::builder(&url)
            .lease(LEASE)
            .waiter_timeout(LEASE)
            .build()
            .unwrap()
    };
    let (a, b) = (build(), build());
    hold_and_hand_over(&a, &b, "no-functions", LEASE);
    let sem = a.fair_semaphore("no-functions-sem", 2);
    let permit = sem.acquire().unwrap();
    assert_eq!(sem.available().unwrap(), 1);
    permit.unlock().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut admin)
        .unwrap();
    // (The start's call that looks for the library is refused: counted as
    // rejected, not as run.)
    assert!(
        !info.contains("cmdstat_fcall:") || info.contains("cmdstat_fcall:calls=0,"),
        "an FCALL ran: {info}"
    );
    assert!(info.contains("cmdstat_evalsha:"), "no EVALSHA ran: {info}");
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut admin)
        .unwrap();
    assert!(libraries.is_empty(), "a library was loaded: {libraries:?}");
    let denials = acl_denials(&mut admin);
    let text = format!("{denials:?}");
    assert_eq!(denials.len(), 1, "one entry, counted per client: {text}");
    assert!(text.contains("fcall"), "{text}");
    assert!(
        !text.contains("evalsha") && !text.contains("function|load"),
        "{text}"
    );
}

/// A command a script runs that the user's ACL lacks (an ACL line older
/// than the scripts, one rule left out) is refused inside the script with
/// an `ERR`, not a `NOPERM`, in each version's words: it is a
/// `Permission` error all the same, not retryable, naming the call and the
/// lock (it was a `Server` error, "redis returned an error", before).
#[test]
fn a_command_a_script_may_not_run_is_a_permission_error() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "no-set");
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("fairlock")
        .arg("-set")
        .query(&mut admin)
        .unwrap();
    let client = Client::builder(&server.url_as("fairlock", "no-set"))
        .build()
        .unwrap();
    let err = client.fair_mutex("denied").try_lock().unwrap_err();
    let said = err.to_string();
    eprintln!("{said}");
    assert_eq!(err.kind(), ErrorKind::Permission, "{err:?}");
    assert!(!err.is_retryable(), "{err:?}");
    assert!(
        said.starts_with("acquire of mutex \"denied\": redis's ACL denies"),
        "{said}"
    );
    assert!(
        acl_denials(&mut admin).len() == 1,
        "the server logged the denial"
    );
}

#[test]
fn credentials_in_the_url_authenticate_and_never_show_up_in_errors_or_debug_output() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    let password = "p@ss:w/rd%#?&=hunter2";
    create_acl_user(&mut admin, password);
    // Reserved characters percent-encoded.
    let encoded: String = password
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' | '~' => c.to_string(),
            other => format!("%{:02X}", other as u32),
        })
        .collect();
    let client =
        Client::open(&server.url_as("fairlock", &encoded)).expect("percent-encoded password");
    client.fair_mutex("auth").lock().unwrap().unlock().unwrap();

    let connect_timeout = Duration::from_secs(1);
    for (user, password) in [("fairlock", "wrong-hunter2"), ("nobody", "hunter2x")] {
        let url = server.url_as(user, password);
        let (err, took, chain) = failed_build(Client::builder(&url), connect_timeout);
        eprintln!(
            "{user}: bad credentials -> {:?} after {:.0} ms: {chain}",
            err.kind(),
            ms(took)
        );
        assert!(took < connect_timeout + Duration::from_secs(1), "{took:?}");
        assert!(chain.to_lowercase().contains("authentication"), "{chain}");
        for text in [chain, format!("{err:?}")] {
            assert!(!text.contains("hunter2"), "password shown: {text}");
        }
    }
}

/// A password written as it is, with a `?` in it (a Sentinel URL's
/// credentials are fairlock's to read, and take it so): redaction took the
/// `?` for the start of a query and showed the URL whole, password and
/// all, in `Debug`, in the errors that name the URL, and in the command's
/// messages (`redact_url`).
#[test]
fn a_password_with_a_question_mark_never_shows() {
    for url in [
        "redis://:hunter2?x@127.0.0.1:1",
        "redis://fairlock:hunter2?x@127.0.0.1:1/0",
        "redis+cluster://fairlock:hunter2?x@127.0.0.1:1,127.0.0.1:2",
        "redis+sentinel://:hunter2?x@127.0.0.1:1/fairlock-master",
        // No master name: the error quotes the URL.
        "redis+sentinel://fairlock:hunter2?x@127.0.0.1:1",
    ] {
        let builder = Client::builder(url).connect_timeout(Duration::from_millis(200));
        let mut shown = vec![redact_url(url), format!("{builder:?}")];
        if let Err(err) = builder.build() {
            shown.extend([err.to_string(), format!("{err:?}")]);
        }
        for text in shown {
            assert!(!text.contains("hunter2"), "{url}: password shown: {text}");
        }
    }
    let unix = "redis+unix:///run/a@b.sock?user=u&pass=hunter2";
    assert_eq!(
        redact_url(unix),
        "redis+unix:///run/a@b.sock?user=u&pass=***"
    );
}

#[test]
fn debug_output_of_a_builder_or_client_never_shows_the_password() {
    let url = "redis://fairlock:hunter2@127.0.0.1:6379/0";
    let builder = Client::builder(url);
    let shown = format!("{builder:?}");
    assert!(
        !shown.contains("hunter2"),
        "ClientBuilder's Debug shows the password: {shown}"
    );
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "hunter2");
    let client = Client::open(&server.url_as("fairlock", "hunter2")).unwrap();
    let m = client.fair_mutex("debug");
    let guard = m.lock().unwrap();
    for shown in [
        format!("{client:?}"),
        format!("{m:?}"),
        format!("{guard:?}"),
    ] {
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}

#[test]
fn one_client_cannot_release_renew_or_dequeue_another_clients_hold() {
    let _serial = serial();
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let name = "mine";

    // Same thread, another client: another owner, no re-entry, no view of
    // A's hold count, no way to take it.
    let mine = a.fair_mutex(name);
    let guard = mine.lock().unwrap();
    let theirs = b.fair_mutex(name);
    assert!(theirs.try_lock().unwrap().is_none());
    assert_eq!(theirs.hold_count().unwrap(), 0);
    assert!(!theirs.is_held_by_current_thread().unwrap());
    assert!(theirs
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_eq!(mine.hold_count().unwrap(), 1);

    // B's timed-out waits leave A's queued waiter in place and in order.
    let a_waiter = LockThread::lock(server.client().fair_mutex(name));
    assert!(wait_until(Duration::from_secs(5), || mine
        .queue_len()
        .unwrap()
        == 1));
    for _ in 0..3 {
        assert!(theirs
            .try_lock_for(Duration::from_millis(100))
            .unwrap()
            .is_none());
        assert_eq!(
            mine.queue_len().unwrap(),
            1,
            "B's cancel dequeued A's waiter"
        );
    }
    let token = guard.fencing_token();
    guard.unlock().unwrap();
    let (_, next) = a_waiter.granted_within(Duration::from_secs(2), "A's waiter");
    assert!(next > token);
    a_waiter.release("A's waiter");

    // A stale guard's watchdog keeps renewing its own (lost) hold: that must
    // not extend the fixed lease of the next holder.
    let stale = mine.lock().unwrap();
    assert!(
        theirs.force_unlock().unwrap(),
        "force_unlock is the documented way"
    );
    let fixed_lease = Duration::from_millis(800);
    let taken = Instant::now();
    let fixed = theirs.with_fixed_lease(fixed_lease).lock().unwrap();
    assert!(wait_until(Duration::from_secs(2), || stale.is_lease_lost()));
    let freed = wait_until(fixed_lease + Duration::from_millis(500), || {
        !theirs.is_locked().unwrap()
    });
    let lasted = taken.elapsed();
    eprintln!(
        "a {fixed_lease:?} fixed lease next to a stale guard's renewals freed after {:.0} ms",
        ms(lasted)
    );
    assert!(freed, "another client's renewals extended B's lease");
    assert!(fixed.is_lease_lost());
    assert_eq!(stale.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
    assert_eq!(fixed.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);

    // A stale unlock never releases the new holder's lock.
    let stale = mine.lock().unwrap();
    assert!(theirs.force_unlock().unwrap());
    let current = theirs.lock().unwrap();
    assert_eq!(stale.unlock().unwrap_err().kind(), ErrorKind::LeaseLost);
    assert!(theirs.is_held_by_current_thread().unwrap());
    assert!(!current.is_lease_lost());
    current.unlock().unwrap();
    assert!(!mine.is_locked().unwrap());
}

#[cfg(feature = "tls")]
mod tls {
    use super::*;
    use fairlock::{FairMutex, FairMutexGuard};

    /// An admin connection over TLS, presenting the client certificate
    /// (which a server without `tls-auth-clients` ignores).
    fn admin_conn(server: &RedisServer, files: &TlsFiles) -> redis::Connection {
        let certificates = redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: files.client_cert_pem(),
                client_key: files.client_key_pem(),
            }),
            root_cert: Some(files.ca_pem()),
        };
        redis::Client::build_with_tls(server.url(), certificates)
            .unwrap()
            .get_connection()
            .expect("TLS admin connection")
    }

    #[test]
    fn rediss_with_a_private_ca_works_as_the_acl_user() {
        let _serial = serial();
        let files = TlsFiles::generate();
        let server = RedisServer::start_tls(&files);
        let mut admin = admin_conn(&server, &files);
        create_acl_user(&mut admin, "tls-pw");
        let url = server.url_as("fairlock", "tls-pw");
        assert!(url.starts_with("rediss://"));
        let builder = || {
            Client::builder(&url)
                .lease(TLS_LEASE)
                .waiter_timeout(TLS_LEASE)
                .tls_root_cert_pem(files.ca_pem())
        };
        let a = builder().build().expect("a TLS client");
        let b = builder().build().unwrap();
        let m = a.fair_mutex("tls");
        let guard = m.lock().unwrap();
        let waiter = LockThread::lock(b.fair_mutex("tls"));
        assert!(wait_until(Duration::from_secs(5), || m
            .queue_len()
            .unwrap()
            == 1));
        std::thread::sleep(past(TLS_LEASE));
        assert!(!guard.is_lease_lost());
        let released = Instant::now();
        guard.unlock().unwrap();
        let (granted, _) = waiter.granted_within(Duration::from_secs(2), "the TLS waiter");
        // Prompt, but this waiter's heartbeat (every 333 ms) would be too:
        // the push message itself is checked next, with slow fallbacks.
        assert!(granted - released < Duration::from_millis(500));
        waiter.release("the TLS waiter");
        let handoff = hand_over_by_push(
            &m,
            Client::builder(&url).tls_root_cert_pem(files.ca_pem()),
            "the TLS waiter with slow fallbacks",
        );
        eprintln!("TLS: handoff by push message in {:.2} ms", ms(handoff));
        assert!(acl_denials(&mut admin).is_empty());
        // The server has no plaintext port: every connection above was TLS.
        let port: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("port")
            .query(&mut admin)
            .unwrap();
        assert_eq!(port[1], "0");
    }

    /// A `rediss` URL to a plain port: the server reads the TLS handshake
    /// as a command never ended and answers nothing. The timeout's error
    /// said only "accepted the connection and sent no reply", as for a
    /// stalled server; it now says the port may not speak TLS.
    #[test]
    fn a_tls_url_to_a_plain_port_says_the_port_may_not_speak_tls() {
        let files = TlsFiles::generate();
        let server = RedisServer::start();
        let started = Instant::now();
        let err = Client::builder(&format!("rediss://127.0.0.1:{}", server.port()))
            .tls_root_cert_pem(files.ca_pem())
            .connect_timeout(Duration::from_secs(1))
            .command_timeout(Duration::from_secs(1))
            .build()
            .unwrap_err();
        let took = started.elapsed();
        eprintln!(
            "TLS to a plain port: {:?} after {took:?}: {err}",
            err.kind()
        );
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        assert!(err.to_string().contains("does not speak TLS"), "{err}");
        assert!(took < Duration::from_secs(4), "{took:?}");
    }

    #[test]
    fn an_untrusted_certificate_or_a_plaintext_client_is_refused_within_the_connect_timeout() {
        let files = TlsFiles::generate();
        let server = RedisServer::start_tls(&files);
        let connect_timeout = Duration::from_secs(1);
        let port = server.port();
        for (what, builder) in [
            ("system roots only", Client::builder(&server.url())),
            (
                "another CA",
                Client::builder(&server.url()).tls_root_cert_pem(TlsFiles::generate().ca_pem()),
            ),
            (
                "plaintext to the TLS port",
                Client::builder(&format!("redis://127.0.0.1:{port}")),
            ),
        ] {
            let (err, took, chain) = failed_build(builder, connect_timeout);
            let bound = connect_timeout + Duration::from_secs(1);
            if what == "plaintext to the TLS port" {
                // The server resets it: "redis is unreachable" said no more.
                assert_connection_error_within(&format!("TLS, {what}"), &err, took, bound);
                assert!(err.to_string().contains("rediss://"), "{err}");
                continue;
            }
            // The same server shows the same certificate: not an outage
            // (it said "redis is unreachable", `Connection`, retryable).
            eprintln!("TLS, {what}: {:?} after {took:?}: {chain}", err.kind());
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err:?}");
            assert!(!err.is_retryable() && took < bound, "{what}: {took:?}");
            let message = err.to_string();
            assert!(!message.contains("unreachable"), "{what}: {message}");
            assert!(message.contains("certificate"), "{what}: {message}");
        }
    }

    /// What the redis crate refuses of the TLS settings as it connects,
    /// before the handshake: a URL's `#insecure` (its fragment that turns
    /// certificate checks off, behind a feature fairlock does not enable),
    /// a client certificate given with another's key. Each was `Server`,
    /// "redis returned an error", though no server had said anything.
    #[test]
    fn a_tls_setting_the_redis_crate_refuses_is_invalid_config_not_a_server_error() {
        let files = TlsFiles::generate();
        let other = TlsFiles::generate();
        let server = RedisServer::start_tls(&files);
        let insecure = format!("rediss://127.0.0.1:{}/#insecure", server.port());
        for (what, builder, says) in [
            ("#insecure", Client::builder(&insecure), "insecure"),
            (
                "another certificate's key",
                Client::builder(&server.url())
                    .tls_root_cert_pem(files.ca_pem())
                    .tls_client_cert_pem(files.client_cert_pem(), other.client_key_pem()),
                "KeyMismatch",
            ),
        ] {
            let (err, took, chain) = failed_build(builder, Duration::from_secs(1));
            eprintln!("{what}: {:?} after {took:?}: {chain}", err.kind());
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err:?}");
            assert!(!err.to_string().contains("redis returned"), "{what}: {err}");
            assert!(chain.contains(says), "{what}: {chain}");
        }
    }

    #[test]
    fn mutual_tls_with_a_client_certificate_locks_and_hands_over() {
        let _serial = serial();
        let files = TlsFiles::generate();
        let server = RedisServer::start_tls_auth(&files, true);
        let builder = || {
            Client::builder(&server.url())
                .lease(LEASE)
                .waiter_timeout(LEASE)
                .tls_root_cert_pem(files.ca_pem())
                .tls_client_cert_pem(files.client_cert_pem(), files.client_key_pem())
        };
        let started = Instant::now();
        let a = builder().build().expect("a client with a certificate");
        eprintln!("mTLS: client built in {:.0} ms", ms(started.elapsed()));
        let b = builder().build().unwrap();
        let m = a.fair_mutex("mtls");
        let guard = m.lock().unwrap();
        let next = b.fair_mutex("mtls");
        let (handoff, _) = hand_over(guard, &m, next, Duration::from_secs(2), "the mTLS waiter");
        eprintln!("mTLS: handoff by push message in {:.2} ms", ms(handoff));
        // The server asks every client for a certificate and has no
        // plaintext port: every connection above presented one.
        let mut admin = admin_conn(&server, &files);
        let config: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("tls-auth-clients")
            .query(&mut admin)
            .unwrap();
        assert_eq!(config[1], "yes");
    }

    #[test]
    fn without_a_client_certificate_a_mutual_tls_server_refuses_within_the_connect_timeout() {
        let files = TlsFiles::generate();
        let server = RedisServer::start_tls_auth(&files, true);
        let stranger = TlsFiles::generate();
        // Time for the handshake to reach the server's check of the
        // certificate on a busy machine (one timed out at 1 s before).
        let connect_timeout = Duration::from_secs(3);
        for (what, builder) in [
            (
                "no client certificate",
                Client::builder(&server.url()).tls_root_cert_pem(files.ca_pem()),
            ),
            (
                "a certificate of another CA",
                Client::builder(&server.url())
                    .tls_root_cert_pem(files.ca_pem())
                    .tls_client_cert_pem(stranger.client_cert_pem(), stranger.client_key_pem()),
            ),
        ] {
            // TLS 1.3 lets the client finish its handshake before the
            // server checks the certificate: the refusal may only come with
            // the first command, so a build that succeeds is followed by a
            // lock call, and the first of the two must fail.
            let started = Instant::now();
            let outcome = builder
                .connect_timeout(connect_timeout)
                .command_timeout(connect_timeout)
                .lease(LEASE)
                .build()
                .and_then(|client| client.fair_mutex("mtls").try_lock().map(|_| ()));
            let took = started.elapsed();
            let err = outcome.expect_err(what);
            let bound = connect_timeout * 2 + Duration::from_secs(1);
            assert_refused_client_certificate(&format!("mTLS, {what}"), &err, took, bound);
        }
        // The client may read the server's alert or find the connection
        // closed first (a broken pipe): the server's log says why.
        let refusals = |log: &str| {
            log.lines()
                .filter(|l| l.contains("Error accepting a client connection"))
                .filter(|l| l.to_lowercase().contains("certificate"))
                .count()
        };
        assert!(
            wait_until(Duration::from_secs(2), || refusals(&server.log()) >= 2),
            "the server did not refuse both for their certificates: {}",
            server.log()
        );
    }

    /// The server's certificate signed again by the CA of `files`, with
    /// `extensions`, made by `openssl` under `faketime` at `now` when given
    /// (valid 2 days from then).
    fn sign_server_cert_again(files: &TlsFiles, extensions: &str, now: Option<&str>) {
        std::fs::write(files.dir.join("again.ext"), extensions).unwrap();
        let mut command =
            std::process::Command::new(if now.is_some() { "faketime" } else { "openssl" });
        command.args(now.map(|now| [now, "openssl"]).iter().flatten());
        let out = command
            .args([
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
            ])
            .args([
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "again.ext",
                "-out",
                "server.crt",
            ])
            .current_dir(&files.dir)
            .output()
            .expect("openssl (and faketime) run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A server's certificate of the trusted CA that has expired, or that
    /// names another host, is refused as a setting, saying why.
    #[test]
    fn an_expired_or_misnamed_server_certificate_is_invalid_config() {
        let server_ext = "basicConstraints=critical,CA:FALSE\n\
                          keyUsage=critical,digitalSignature\n\
                          extendedKeyUsage=serverAuth\n";
        for (what, san, now, why) in [
            (
                "expired",
                "IP:127.0.0.1",
                Some("2020-01-01 00:00:00"),
                "expired",
            ),
            (
                "another host's",
                "DNS:elsewhere.example",
                None,
                "not valid for name",
            ),
        ] {
            let files = TlsFiles::generate();
            let extensions = format!("{server_ext}subjectAltName={san}\n");
            sign_server_cert_again(&files, &extensions, now);
            let server = RedisServer::start_tls(&files);
            let builder = Client::builder(&server.url()).tls_root_cert_pem(files.ca_pem());
            let (err, took, chain) = failed_build(builder, Duration::from_secs(1));
            eprintln!("{what}: {:?} after {took:?}: {chain}", err.kind());
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err:?}");
            assert!(took < Duration::from_secs(2), "{what}: {took:?}");
            let message = err.to_string();
            assert!(
                message.contains("showed a TLS certificate"),
                "{what}: {message}"
            );
            assert!(message.contains(why), "{what}: {message}");
        }
    }

    /// `err` came within `bound` from a server that refused this client's
    /// certificate: when the client read the server's alert, a setting
    /// (`InvalidConfig`, it was "redis is unreachable: received fatal
    /// alert: CertificateRequired", `Connection`, retryable); when it found
    /// the connection closed first (a broken pipe), a `Connection` error.
    fn assert_refused_client_certificate(
        label: &str,
        err: &fairlock::Error,
        took: Duration,
        bound: Duration,
    ) {
        let chain = error_chain(err);
        eprintln!("{label}: {:?} after {took:?}: {chain}", err.kind());
        assert!(took < bound, "{label}: {took:?}, over {bound:?}");
        if !chain.contains("alert") {
            assert_eq!(err.kind(), ErrorKind::Connection, "{label}: {err:?}");
            return;
        }
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{label}: {err:?}");
        assert!(!err.is_retryable(), "{label}");
        let message = err.to_string();
        assert!(!message.contains("unreachable"), "{label}: {message}");
        assert!(
            message.contains("tls_client_cert_pem"),
            "{label}: {message}"
        );
    }

    #[test]
    fn behind_tls_sentinels_the_certificates_and_the_sentinel_password_reach_both() {
        let _serial = serial();
        let files = TlsFiles::generate();
        // A TLS-only master and a TLS-only Sentinel with a password, both
        // asking every client for a certificate of the CA.
        let master = RedisServer::start_tls_auth(&files, true);
        let sentinel = fairlock_test_support::sentinel::Sentinel::start_tls(
            master.port(),
            &files,
            Some("sent-s3cret"),
        );
        let url = format!(
            "rediss+sentinel://127.0.0.1:{}/{}",
            sentinel.port(),
            SentinelSet::master_name()
        );
        let builder = || {
            Client::builder(&url)
                .lease(TLS_LEASE)
                .waiter_timeout(TLS_LEASE)
                .connect_timeout(Duration::from_secs(1))
                .tls_root_cert_pem(files.ca_pem())
                .sentinel_password("sent-s3cret")
        };
        let with_cert =
            || builder().tls_client_cert_pem(files.client_cert_pem(), files.client_key_pem());
        // The Sentinel may still be connecting to the master: it names the
        // master once its link is up (bounded).
        let started = Instant::now();
        let a = loop {
            match with_cert().build() {
                Ok(client) => break client,
                Err(err) if started.elapsed() < Duration::from_secs(10) => {
                    eprintln!("TLS sentinel not ready: {err}");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(err) => panic!("no client behind the TLS sentinel: {err:?}"),
            }
        };
        eprintln!(
            "mTLS behind a TLS sentinel: first client in {:.0} ms",
            ms(started.elapsed())
        );
        let b = with_cert().build().unwrap();
        hold_and_hand_over(&a, &b, "mtls-sentinel", TLS_LEASE);

        // Without the client certificate, the Sentinel refuses at once.
        let (err, took, _) = failed_build(builder(), Duration::from_secs(1));
        let bound = Duration::from_secs(2);
        assert_refused_client_certificate("TLS sentinel, no client certificate", &err, took, bound);
        // The root alone decides trust: with another CA's root, refused
        // as a setting (the Sentinel shows the same certificate again).
        let stranger = TlsFiles::generate();
        let (err, _, chain) = failed_build(
            with_cert().tls_root_cert_pem(stranger.ca_pem()),
            Duration::from_secs(1),
        );
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        assert!(chain.to_lowercase().contains("certificate"), "{chain}");
    }

    #[test]
    fn on_a_mutual_tls_cluster_the_certificates_reach_every_master_and_are_required() {
        let _serial = serial();
        let files = TlsFiles::generate();
        let cluster = RedisCluster::start_tls(&files);
        let url = cluster.url();
        assert!(url.starts_with("rediss+cluster://"), "{url}");
        let connect_timeout = Duration::from_secs(1);
        let builder = || {
            Client::builder(&url)
                .lease(TLS_LEASE)
                .waiter_timeout(TLS_LEASE)
                .connect_timeout(connect_timeout)
                .command_timeout(connect_timeout)
                .tls_root_cert_pem(files.ca_pem())
        };
        let with_cert =
            || builder().tls_client_cert_pem(files.client_cert_pem(), files.client_key_pem());
        let started = Instant::now();
        let a = with_cert()
            .build()
            .expect("a cluster client with a certificate");
        eprintln!(
            "mTLS cluster: client built in {:.0} ms",
            ms(started.elapsed())
        );
        let b = with_cert().build().unwrap();
        // A name on each master: the script goes to its node, the renewals
        // too (the watchdog's own connection to each master), and the
        // grant comes back by the push message of that node's subscriber:
        // connections of their own, all made with the certificates.
        let per_master = cluster.one_name_per_master("mtls-cluster");
        assert_eq!(per_master.len(), 3, "{per_master:?}");
        let held: Vec<(u16, &String, FairMutex, FairMutexGuard)> = per_master
            .iter()
            .map(|(master, name)| {
                let m = a.fair_mutex(name);
                let guard = m.lock().unwrap();
                (*master, name, m, guard)
            })
            .collect();
        // Held past their lease: only renewals keep them.
        std::thread::sleep(past(TLS_LEASE));
        for (master, name, m, guard) in held {
            assert!(
                !guard.is_lease_lost(),
                "{name}: renewals on {master} failed?"
            );
            let key = lock_key(name);
            assert_eq!(cluster.master_for_slot(slot_of(&key)), master, "{name}");
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(&key)
                .query(&mut cluster.conn(master))
                .unwrap();
            assert_eq!(keys, vec![key], "{name}: its lock hash on master {master}");
            let before = guard.fencing_token();
            let (handoff, token) = hand_over(
                guard,
                &m,
                b.fair_mutex(name),
                Duration::from_secs(2),
                "the mTLS cluster waiter",
            );
            assert!(token > before, "{name}: token {token} after {before}");
            eprintln!(
                "mTLS cluster: master {master}: {name:?} renewed, handed over in {:.2} ms, \
                 token {before} -> {token}",
                ms(handoff)
            );
        }
        // The nodes have no plaintext port and ask every client for a
        // certificate: every connection above presented one.
        for port in cluster.ports() {
            let config: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("tls-auth-clients")
                .query(&mut cluster.conn(port))
                .unwrap();
            assert_eq!(config[1], "yes", "node {port}");
        }

        // Without the client certificate, the first of build and lock
        // fails (TLS 1.3 may let the handshake finish and refuse the first
        // command), within its bound. A seed's own connection says why
        // only if the cluster client failed within the connect timeout: 3 s,
        // for a busy machine's handshakes with every node.
        let name = per_master.values().next().unwrap();
        let connect_timeout = Duration::from_secs(3);
        let started = Instant::now();
        let outcome = builder()
            .connect_timeout(connect_timeout)
            .build()
            .and_then(|client| client.fair_mutex(name).try_lock().map(|_| ()));
        let took = started.elapsed();
        let err = outcome.expect_err("a cluster client without a certificate");
        let bound = connect_timeout * 2 + Duration::from_secs(1);
        let label = "mTLS cluster, no client certificate";
        assert_refused_client_certificate(label, &err, took, bound);
        // Trusting another CA: the seeds' certificates are refused, said
        // as a setting, as on one server (it was "redis is unreachable").
        let stranger = TlsFiles::generate();
        let (err, took, chain) = failed_build(
            with_cert().tls_root_cert_pem(stranger.ca_pem()),
            connect_timeout,
        );
        eprintln!(
            "TLS cluster, another CA: {:?} after {took:?}: {chain}",
            err.kind()
        );
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        assert!(err.to_string().contains("certificate"), "{err}");
    }

    #[test]
    fn a_malformed_client_certificate_or_key_is_invalid_config() {
        let files = TlsFiles::generate();
        let (cert, key) = (files.client_cert_pem(), files.client_key_pem());
        let cases: [(&str, fairlock::ClientBuilder); 5] = [
            (
                "a certificate that is no PEM",
                Client::builder("rediss://127.0.0.1:1")
                    .tls_client_cert_pem(b"not a certificate".to_vec(), key.clone()),
            ),
            (
                "a key that is no PEM",
                Client::builder("rediss://127.0.0.1:1")
                    .tls_client_cert_pem(cert.clone(), b"not a key".to_vec()),
            ),
            (
                "certificate and key swapped",
                Client::builder("rediss://127.0.0.1:1")
                    .tls_client_cert_pem(key.clone(), cert.clone()),
            ),
            (
                "a client certificate for a plain url",
                Client::builder("redis://127.0.0.1:1")
                    .tls_client_cert_pem(cert.clone(), key.clone()),
            ),
            (
                "a root for a plain sentinel url",
                Client::builder("redis+sentinel://127.0.0.1:1/m").tls_root_cert_pem(files.ca_pem()),
            ),
        ];
        for (what, builder) in cases {
            let started = Instant::now();
            let err = builder.build().unwrap_err();
            eprintln!("{what}: {err}");
            assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{what}: {err:?}");
            assert!(started.elapsed() < Duration::from_millis(100), "{what}");
            let shown = format!("{err:?}");
            assert!(
                !shown.contains("PRIVATE KEY"),
                "{what}: the key shown: {shown}"
            );
        }
    }

    #[test]
    fn a_malformed_root_certificate_is_invalid_config() {
        let err = Client::builder("rediss://127.0.0.1:6379")
            .tls_root_cert_pem(b"not a certificate".to_vec())
            .build()
            .unwrap_err();
        eprintln!("malformed root: {err:?}");
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        // A PEM block whose body is no certificate: it said "invalid redis
        // url (a scheme fairlock takes is ...)", of a URL that was fine.
        let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let err = Client::builder("rediss://127.0.0.1:6379")
            .tls_root_cert_pem(garbage.to_vec())
            .build()
            .unwrap_err();
        eprintln!("a root that is no certificate: {err}");
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err:?}");
        assert!(err.to_string().contains("tls_root_cert_pem"), "{err}");
        assert!(!err.to_string().contains("url"), "{err}");
        let err = Client::builder("redis://127.0.0.1:6379")
            .tls_root_cert_pem(TlsFiles::generate().ca_pem())
            .build()
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::InvalidConfig,
            "a root for a plain URL: {err:?}"
        );
    }
}

/// The `ACL SETUSER fairlock +...` line of docs/cluster-and-sentinel.md
/// whose comment names `deployment`: the rules to add to the main line for
/// it.
fn readme_acl_addition(deployment: &str) -> Vec<String> {
    let readme = include_str!("../docs/cluster-and-sentinel.md");
    let lines: Vec<&str> = readme
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("ACL SETUSER fairlock +") && l.contains(deployment))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "docs/cluster-and-sentinel.md must print one ACL addition for {deployment}: {lines:?}"
    );
    let rules = lines[0].split('#').next().unwrap();
    rules
        .split_whitespace()
        .skip(3)
        .map(str::to_owned)
        .collect()
}

/// Creates the user of docs/security.md plus the additions of
/// docs/cluster-and-sentinel.md for
/// `deployments` on every server in `ports` (ACL rules are per node), and
/// clears their ACL logs.
fn create_acl_user_on(ports: &[u16], password: &str, deployments: &[&str]) {
    let additions: Vec<String> = deployments
        .iter()
        .flat_map(|d| readme_acl_addition(d))
        .collect();
    for &port in ports {
        let mut conn = try_conn(port).unwrap();
        create_acl_user(&mut conn, password);
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("fairlock")
            .arg(&additions)
            .query(&mut conn)
            .unwrap_or_else(|e| {
                panic!("docs/cluster-and-sentinel.md's ACL additions {additions:?} rejected: {e}")
            });
        let () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query(&mut conn)
            .unwrap();
    }
}

/// Every denial logged on the servers in `ports`, as
/// `port: <reason> <object>` (e.g. `6379: command ping`).
fn acl_denials_on(ports: &[u16]) -> Vec<String> {
    let mut found = Vec::new();
    for &port in ports {
        let entries: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("ACL")
            .arg("LOG")
            .query(&mut try_conn(port).unwrap())
            .unwrap();
        for entry in entries {
            let text = |field: &str| {
                entry
                    .get(field)
                    .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
                    .unwrap_or_default()
            };
            found.push(format!("{port}: {} {}", text("reason"), text("object")));
        }
    }
    found
}

/// As the ACL user: hold `name` past two watchdog rounds with a waiter of
/// client `b` queued (renew + heartbeat), then hand it over; `lease` is
/// both clients' lease and waiter timeout.
fn hold_and_hand_over(a: &Client, b: &Client, name: &str, lease: Duration) {
    let m = a.fair_mutex(name);
    let guard = m.lock().unwrap();
    let waiter = LockThread::lock(b.fair_mutex(name));
    assert!(wait_until(Duration::from_secs(5), || m
        .queue_len()
        .unwrap()
        == 1));
    std::thread::sleep(past(lease));
    assert!(!guard.is_lease_lost(), "renewals denied?");
    assert_eq!(m.queue_len().unwrap(), 1, "heartbeats denied?");
    guard.unlock().unwrap();
    waiter.granted_within(Duration::from_secs(2), "the waiter");
    waiter.release("the waiter");
}

/// How long a lock write waits for its replica in the topology ACL tests:
/// generous, since six servers and two clients share two cores here and a
/// slow acknowledgement would fail the write (`NotReplicated`), which these
/// tests do not measure.
const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

#[test]
fn the_readme_acl_additions_suffice_on_a_cluster_with_sync_replicas() {
    let _serial = serial();
    let cluster = RedisCluster::start();
    let ports = cluster.ports();
    create_acl_user_on(&ports, "cl-s3cret", &["Redis Cluster", "sync_replicas"]);
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let url = format!("redis+cluster://fairlock:cl-s3cret@{}", hosts.join(","));
    let builder = || {
        Client::builder(&url)
            .lease(LEASE)
            .waiter_timeout(LEASE)
            .sync_replicas(1, SYNC_TIMEOUT)
    };
    let a = builder()
        .build()
        .unwrap_or_else(|e| panic!("{e:?}; denials: {:?}", acl_denials_on(&ports)));
    let b = builder().build().unwrap();
    let names = cluster.one_name_per_master("acl");
    for name in names.values() {
        hold_and_hand_over(&a, &b, name, LEASE);
    }
    // A first acquisition while its (empty) slot moves: the source answers
    // ASK, followed with ASKING.
    let name = "acl-moving";
    let slot = slot_of(&lock_key(name));
    let from = cluster.master_for_slot(slot);
    let to = cluster.masters().into_iter().find(|&m| m != from).unwrap();
    assert!(cluster.keys_in_slot(from, slot).is_empty());
    cluster.begin_slot_move(slot, from, to);
    let mutex = b.fair_mutex(name);
    let taker = std::thread::spawn(move || mutex.try_lock().map(|g| g.map(|g| g.unlock())));
    std::thread::sleep(Duration::from_millis(300));
    cluster.finish_slot_move(slot, from, to);
    let taken = join_within(taker, Duration::from_secs(15), "try_lock in a moving slot");
    assert!(matches!(taken, Ok(Some(Ok(())))), "{taken:?}");
    drop(a);
    drop(b);
    let denials = acl_denials_on(&ports);
    assert!(denials.is_empty(), "the library was denied: {denials:?}");

    // Without either sharded pub/sub command (on any node), the start is
    // refused, naming it: not a wake-up written then refused, nor a call
    // that waits the command timeout for its slot's subscription.
    for command in ["spublish", "ssubscribe"] {
        for port in &ports {
            let rules = [&format!("-{command}")[..], "+spublish", "+ssubscribe"];
            let (take, give) = rules.split_at(1);
            let mut conn = try_conn(*port).unwrap();
            let () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg("fairlock")
                .arg(give)
                .arg(take)
                .query(&mut conn)
                .unwrap();
        }
        let (err, took, chain) = failed_build(builder(), Duration::from_secs(2));
        eprintln!("without {command}: refused in {took:?}: {chain}");
        assert_eq!(err.kind(), ErrorKind::Permission, "{chain}");
        assert!(chain.contains(&format!("'{command}'")), "{chain}");
    }
}

#[test]
fn the_readme_acl_additions_suffice_behind_sentinel_across_a_failover() {
    let _serial = serial();
    let mut set = SentinelSet::start();
    let ports: Vec<u16> = set.servers().iter().map(RedisServer::port).collect();
    let url = set.url().replacen(
        "redis+sentinel://",
        "redis+sentinel://fairlock:se-s3cret@",
        1,
    );
    let builder = || {
        Client::builder(&url)
            .lease(LEASE)
            .waiter_timeout(LEASE)
            .sync_replicas(1, SYNC_TIMEOUT)
    };
    // Without the addition, building fails and says which command was denied.
    create_acl_user_on(&ports, "se-s3cret", &[]);
    let (err, took, chain) = failed_build(builder(), Duration::from_secs(1));
    assert_eq!(err.kind(), ErrorKind::Permission, "{chain}");
    assert!(!err.is_connection(), "retrying cannot mend an ACL: {chain}");
    assert!(
        chain.contains("'role'"),
        "the denied command is not named: {chain}"
    );
    eprintln!(
        "sentinel without +role: build failed in {:.0} ms: {chain}",
        ms(took)
    );
    create_acl_user_on(&ports, "se-s3cret", &["Sentinel", "sync_replicas"]);
    let a = builder()
        .build()
        .unwrap_or_else(|e| panic!("{e:?}; denials: {:?}", acl_denials_on(&ports)));
    let b = builder().build().unwrap();
    hold_and_hand_over(&a, &b, "acl-sentinel", LEASE);
    let (old_master, _) = set.kill_master();
    set.wait_for_failover(old_master, Duration::from_secs(20));
    // The promoted replica has no replica of its own: writes report
    // NotReplicated, which needs WAIT to be allowed to say so.
    let m = a.fair_mutex("acl-sentinel");
    let outcome = retry_while_unreachable(|| match m.try_lock() {
        Err(e) if e.kind() == ErrorKind::NotReplicated => Ok(true),
        Err(e) => Err(e),
        Ok(_) => Ok(false),
    });
    assert!(
        outcome,
        "an acquisition on a master without replicas was acknowledged"
    );
    drop(a);
    drop(b);
    let live: Vec<u16> = ports.into_iter().filter(|&p| p != old_master).collect();
    let denials = acl_denials_on(&live);
    assert!(denials.is_empty(), "the library was denied: {denials:?}");
}

#[test]
fn the_readme_acl_user_runs_every_semaphore_operation_with_nothing_denied() {
    let _serial = serial();
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "s3cret-sem");
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let url = server.url_as("fairlock", "s3cret-sem");
    let lease = Duration::from_secs(1);
    let builder = || Client::builder(&url).lease(lease).waiter_timeout(lease);
    let a = builder().build().expect("the ACL user connects");
    let b = builder().build().unwrap();

    // Take both permits, look, queue a waiter, hold past two watchdog
    // rounds (renewals and heartbeats), hand over by push message.
    let sem = a.fair_semaphore("acl-sem", 2);
    let first = sem.acquire().unwrap();
    let second = sem.try_acquire().unwrap().expect("a permit is free");
    let other = b.fair_semaphore("acl-sem", 2);
    assert!(other.try_acquire().unwrap().is_none());
    assert_eq!(other.available().unwrap(), 0);
    let waiter = {
        let sem = b.fair_semaphore("acl-sem", 2);
        LockThread::take(move || sem.acquire().map(Guard::into_any))
    };
    assert!(wait_until(Duration::from_secs(5), || sem
        .queue_len()
        .unwrap()
        == 1));
    let status = other.status(10).unwrap();
    assert_eq!((status.holder_count, status.waiters.len()), (2, 1));
    thread::sleep(lease + lease / 2);
    assert!(!first.is_lease_lost(), "renewals denied?");
    assert_eq!(sem.queue_len().unwrap(), 1, "heartbeats denied?");
    let released = Instant::now();
    first.unlock().unwrap();
    let (granted, _) = waiter.granted_within(Duration::from_secs(2), "the waiter");
    assert!(
        granted - released < Duration::from_millis(500),
        "no push message?"
    );

    // A timed-out wait and a cancelled one (each leaves the queue).
    assert!(other
        .try_acquire_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    let cancel = WaitCanceller::new();
    let canceller = cancel.clone();
    let stopper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        canceller.cancel();
    });
    assert!(other
        .acquire_with(Wait::forever().cancelled_by(&cancel))
        .unwrap()
        .is_none());
    stopper.join().unwrap();
    assert_eq!(sem.queue_len().unwrap(), 0);

    // The server forgets its scripts: loaded again, as this user, by a
    // call and by the watchdog.
    lose_scripts(&mut admin);
    thread::sleep(lease);
    assert!(!second.is_lease_lost());
    lose_scripts(&mut admin);
    waiter.release("the waiter");
    second.unlock().unwrap();
    assert_eq!(other.available().unwrap(), 2);
    drop(a);
    drop(b);
    let denials = acl_denials(&mut admin);
    assert!(denials.is_empty(), "the library was denied: {denials:?}");
}

/// A user that may not publish on its wake channels (a line without
/// `+publish`, or channels that leave them out) would have each handoff
/// written and its wake-up refused after it (a script's PUBLISH is checked
/// as it runs): its release failed with `Permission`, the lock handed over.
/// The client's start refuses it, naming the command and the channel, and
/// nothing a subscriber could read was sent; as it refuses a user without
/// `TIME`, or without `SCRIPT LOAD` where it may not call the library.
#[test]
fn a_user_that_may_not_publish_its_wake_ups_is_refused_at_start() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    // The line without the library's rules nor SCRIPT LOAD (6.2 removes
    // no subcommand).
    let no_library = [FUNCTION_RULES[0], FUNCTION_RULES[1], "+script|load"];
    let mut listener = server.conn();
    let () = redis::cmd("PSUBSCRIBE")
        .arg("*")
        .query(&mut listener)
        .unwrap();
    listener
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let cases: [(&[&str], &[&str], &str); 4] = [
        (&[], &["-publish"], "'publish'"),
        (&[], &["resetchannels", "&fairlock:election:*"], "channel"),
        (&[], &["-time"], "'time'"),
        (&no_library, &[], "'script"),
    ];
    for (i, (leave_out, rules, named)) in cases.into_iter().enumerate() {
        // Each line resets the user's keys, channels and commands.
        let password = format!("refused-{i}");
        match leave_out {
            [] => create_acl_user(&mut admin, &password),
            _ => create_acl_user_without(&mut admin, &password, leave_out),
        }
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("fairlock")
            .arg(rules)
            .query(&mut admin)
            .unwrap();
        let err = Client::builder(&server.url_as("fairlock", &password))
            .build()
            .map(|_| ())
            .unwrap_err();
        let said = error_chain(&err);
        eprintln!("{rules:?}: {said}");
        assert_eq!(err.kind(), ErrorKind::Permission, "{said}");
        assert!(said.contains(named), "{said}");
        if i < 2 {
            assert!(said.contains(":wake:"), "{said}");
        }
        let heard: redis::RedisResult<redis::Value> = listener.recv_response();
        assert!(heard.is_err(), "a message was published: {heard:?}");
    }
}

/// A user without `WAIT` given `sync_replicas`: every write's `WAIT`
/// rides in the same round trip after its script, so each call would
/// write (take a lock, hand it over) and then fail with `Permission`, its
/// hold unknown to the client. The client's start refuses it, naming the
/// command.
#[test]
fn a_user_that_may_not_wait_for_replicas_is_refused_at_start_under_sync_replicas() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "no-wait");
    let builder = Client::builder(&server.url_as("fairlock", "no-wait"))
        .sync_replicas(1, Duration::from_millis(100));
    let (err, _, chain) = failed_build(builder, Duration::from_secs(2));
    eprintln!("{chain}");
    assert_eq!(err.kind(), ErrorKind::Permission, "{chain}");
    assert!(chain.contains("'wait'"), "{chain}");
}

/// "A different `key_prefix` needs the same line with that prefix":
/// docs/security.md's line with `fairlock` made `app` serves a client of
/// key prefix `app` (a handoff by push message, a semaphore, an election
/// and its watch) with `ACL LOG` empty.
#[test]
fn the_readme_acl_line_with_another_prefix_serves_that_key_prefix() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user(&mut admin, "app-pw");
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "fairlock", "resetkeys", "~app:*"][..])
        .arg(&["resetchannels", "&app:*"][..])
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let builder = || {
        Client::builder(&server.url_as("fairlock", "app-pw"))
            .key_prefix("app")
            .build()
            .unwrap()
    };
    let (a, b) = (builder(), builder());
    let m = a.fair_mutex("prefixed");
    let guard = m.lock().unwrap();
    let waiter = LockThread::lock(b.fair_mutex("prefixed"));
    assert!(wait_until(Duration::from_secs(5), || m
        .queue_len()
        .unwrap()
        == 1));
    guard.unlock().unwrap();
    waiter.granted_within(Duration::from_secs(2), "the waiter");
    waiter.release("the waiter");
    let permit = a.fair_semaphore("prefixed-sem", 2).acquire().unwrap();
    permit.unlock().unwrap();
    let mut watch = b.election("prefixed-vote").watch().unwrap();
    let leader = a.election("prefixed-vote").campaign().unwrap();
    let seen = watch.next(Duration::from_secs(5)).unwrap();
    assert!(
        matches!(&seen, Some(LeaderEvent::Leads(l)) if l.term == leader.term()),
        "{seen:?}"
    );
    leader.unlock().unwrap();
    drop((a, b, watch));
    let denials = acl_denials(&mut admin);
    assert!(denials.is_empty(), "{denials:?}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
    assert!(keys.iter().all(|k| k.starts_with("app:")), "{keys:?}");
}

/// A user refused `FCALL` but allowed `FUNCTION LOAD` (a line that left
/// out `+fcall` alone) calls by EVALSHA; after a `SCRIPT FLUSH` its reload
/// loaded the library, moved its calls to FCALL, and every call after
/// failed with `Permission`. The reload now loads what the client calls.
#[test]
fn a_user_refused_fcall_keeps_calling_by_evalsha_after_a_script_flush() {
    if script_command() != "FCALL" {
        eprintln!("skipped: the server has no Functions (every client calls EVALSHA)");
        return;
    }
    let server = RedisServer::start();
    let mut admin = server.conn();
    create_acl_user_without(&mut admin, "no-fcall", &["+fcall"]);
    let client = Client::builder(&server.url_as("fairlock", "no-fcall"))
        .build()
        .unwrap();
    let m = client.fair_mutex("no-fcall");
    m.lock().unwrap().unlock().unwrap();
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut admin).unwrap();
    for call in ["the call that reloads", "the next call"] {
        let cycle = m.lock().and_then(|guard| guard.unlock());
        assert!(cycle.is_ok(), "{call}: {cycle:?}");
    }
}
