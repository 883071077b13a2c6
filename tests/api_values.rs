//! The public API's values without a server: handles, guards, permits
//! and errors cross threads (`Send`/`Sync`); an error keeps its message and
//! its cause, and the Redis error replies of every server version map to
//! their kinds (key conflict, permits mismatch, refused upgrade) and to
//! whether a retry may mend them; a URL's topology (one server, a cluster's
//! seeds, a Sentinel's master) is read as written; a URL's
//! password never reaches `Debug` output; and settings or URLs out of
//! bounds make `ClientBuilder::build` fail with `InvalidConfig` before any
//! connection is tried; so does a client identity out of bounds. Unbound
//! locks and their guards are `Send + Sync` (the guard `'static` too). Moved from the unit tests of `src/lib.rs`,
//! `src/error.rs`, `src/handles/` and `src/connections/topology.rs`.

use std::error::Error as StdError;
use std::time::Duration;

use fairlock::__test_support::{error_from_redis, topology_of};
use fairlock::{
    redact_url, AnyGuard, Client, ClientBuilder, Error, ErrorKind, FairMutex, FairMutexGuard,
    FairRwLock, FairSemaphore, ReadGuard, SemaphorePermit, Unbound, WriteGuard, MAX_LEASE,
    MAX_TIMEOUT,
};

#[test]
fn handles_are_send_sync_and_guards_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn sync<T: Sync>() {}
    send_sync::<Client>();
    send_sync::<FairMutex>();
    send_sync::<Error>();
    sync::<FairMutexGuard>();
    send_sync::<FairRwLock>();
    sync::<ReadGuard>();
    sync::<WriteGuard>();
    send_sync::<FairSemaphore>();
    send_sync::<SemaphorePermit>();
}

#[test]
fn unbound_locks_and_their_guards_cross_threads_and_live_on_their_own() {
    fn send_sync_clone<T: Send + Sync + Clone + 'static>() {}
    fn send_sync_static<T: Send + Sync + 'static>() {}
    send_sync_clone::<FairMutex<Unbound>>();
    send_sync_clone::<FairSemaphore<Unbound>>();
    send_sync_clone::<FairRwLock<Unbound>>();
    send_sync_static::<FairMutexGuard<Unbound>>();
    send_sync_static::<SemaphorePermit<Unbound>>();
    send_sync_static::<ReadGuard<Unbound>>();
    send_sync_static::<WriteGuard<Unbound>>();
    // The one guard type of every kind, when kinds mix.
    send_sync_static::<AnyGuard<Unbound>>();
}

/// An identity out of bounds (empty, longer than 64 bytes, a space, a
/// character outside ASCII letters, digits and `. _ - / @ : +`) fails the
/// build with `InvalidConfig`, before any connection is tried.
#[test]
fn a_bad_identity_is_invalid_config_before_any_io() {
    let long = "a".repeat(fairlock::MAX_IDENTITY_LEN + 1);
    for bad in [
        "",
        long.as_str(),
        "web 3",
        "tab\there",
        "caf\u{e9}",
        "a#b",
        "x;y",
    ] {
        // Port 1: nothing listens, so only validation can answer at once.
        let err = Client::builder("redis://127.0.0.1:1")
            .identity(bad)
            .build()
            .expect_err(bad);
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{bad:?}: {err}");
        assert!(err.to_string().contains("identity"), "{bad:?}: {err}");
    }
    let longest = "w".repeat(fairlock::MAX_IDENTITY_LEN);
    for good in [
        "web-3/worker-7",
        "cron@host.example:9",
        "a+b_c.d",
        longest.as_str(),
    ] {
        let err = Client::builder("redis://127.0.0.1:1")
            .identity(good)
            .connect_timeout(Duration::from_millis(200))
            .build()
            .expect_err("nothing listens on port 1");
        assert_eq!(err.kind(), ErrorKind::Connection, "{good:?}: {err}");
    }
}

// Errors (src/error.rs)

#[test]
fn error_is_send_sync_static() {
    fn assert_bounds<T: StdError + Send + Sync + Clone + 'static>() {}
    assert_bounds::<Error>();
}

#[test]
fn display_is_the_message_and_its_cause_and_source_is_kept() {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    let err = error_from_redis(redis::RedisError::from(io));
    assert_eq!(err.kind(), ErrorKind::Connection);
    assert!(err.is_connection());
    assert_eq!(err.to_string(), "redis is unreachable: refused");
    assert!(err.source().is_some());
}

/// The error reply `resp` (without its `-` and CRLF) as fairlock's error.
fn from_reply(resp: &str) -> Error {
    match redis::parse_redis_value(format!("-{resp}\r\n").as_bytes()) {
        Ok(redis::Value::ServerError(err)) => error_from_redis(redis::RedisError::from(err)),
        other => panic!("not an error reply: {other:?}"),
    }
}

#[test]
fn what_a_retry_may_mend_is_retryable_as_the_server_words_it() {
    assert!(!from_reply("WRONGPASS invalid username-password pair").is_retryable());
    assert!(!from_reply("NOPERM this user has no permissions").is_retryable());
    assert!(from_reply("LOADING Redis is loading the dataset in memory").is_retryable());
}

/// A refusal for now (`OOM`, `NOREPLICAS`, `MISCONF`) is a `Server` error
/// that says so, and the only `Server` error `from_redis` makes retryable.
fn refused_for_now(err: &Error) -> bool {
    let said = err
        .to_string()
        .starts_with("redis refused the call before running it");
    assert_eq!(said, err.is_retryable(), "{err}");
    said
}

#[test]
fn a_write_refused_by_a_replica_inside_a_script_is_a_demoted_master_on_every_version() {
    for reply in [
        // Redis 7.0+ and Valkey 8
        "READONLY You can't write against a read only replica. script: \
         e91400d7df4ac365ee130fc418c8c4183dac4414, on @user_script:242.",
        // Redis 6.2
        "ERR Error running script (call to f_e91400d7df4ac365ee130fc418c8c4183dac4414): \
         @user_script:242: @user_script: 242: -READONLY You can't write against a read \
         only replica.",
    ] {
        let err = from_reply(reply);
        assert_eq!(err.kind(), ErrorKind::Connection, "{reply}");
        // The words of a demoted master's error alone (`Retry::DemotedMaster`).
        assert!(
            err.to_string().contains("answered as a read-only replica"),
            "{err}"
        );
        assert!(err.is_retryable(), "{err}");
    }
    // Redis 6.2: refused for memory, not a demotion.
    let oom = from_reply(
        "ERR Error running script (call to f_a7f3): @user_script:1: @user_script: 1: \
         -OOM command not allowed when used memory > 'maxmemory'.",
    );
    assert_eq!(oom.kind(), ErrorKind::Server);
    assert!(refused_for_now(&oom), "{oom:?}");
    for reply in [
        "OOM command not allowed when used memory > 'maxmemory'.",
        "NOREPLICAS Not enough good replicas to write.",
    ] {
        let err = from_reply(reply);
        assert_eq!(err.kind(), ErrorKind::Server, "{reply}");
        assert!(refused_for_now(&err), "{reply}");
    }
    let unknown = from_reply("ERR unknown command");
    assert_eq!(unknown.kind(), ErrorKind::Server);
    assert!(!refused_for_now(&unknown));
}

#[test]
fn a_wrong_type_inside_a_script_is_a_key_conflict_as_every_version_words_it() {
    for reply in [
        // Redis 7.0+ and Valkey 8
        "WRONGTYPE Operation against a key holding the wrong kind of value script: \
         fd1f62702330c26137b50b4d8f15f201f6699d84, on @user_script:1.",
        // Redis 6.2
        "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): \
         @user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value",
        // outside a script
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        // Redis 6.2: the fence key check of lua/lib/common.lua
        "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): \
         @user_script:63: WRONGTYPE the fence key holds a value fairlock did not write",
    ] {
        assert_eq!(from_reply(reply).kind(), ErrorKind::KeyConflict, "{reply}");
    }
    for reply in [
        "ERR Error running script (call to f_fd1f): @user_script:12: \
         ERR fairlock: lease must be a whole number of ms",
        "ERR Error running script (call to f_fd1f): @user_script:12: \
         user_script:12: Script attempted to access nonexistent global variable 'WRONGTYPE'",
        "ERR unknown command 'WRONGTYPE Operation against a key'",
    ] {
        assert_eq!(from_reply(reply).kind(), ErrorKind::Server, "{reply}");
    }
    let denied = from_reply("NOPERM this user has no permissions to run the 'hget' command");
    assert_eq!(denied.kind(), ErrorKind::Permission);
    assert!(!denied.is_connection());
}

#[test]
fn a_permits_mismatch_is_its_own_kind_naming_both_numbers_as_every_version_words_it() {
    for reply in [
        // Redis 7.0+ and Valkey 8
        "FAIRLOCK_PERMITS_MISMATCH 4 3 600000 script: \
         fd1f62702330c26137b50b4d8f15f201f6699d84, on @user_script:120.",
        // Redis 6.2
        "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): \
         @user_script:120: FAIRLOCK_PERMITS_MISMATCH 4 3 600000",
    ] {
        let err = from_reply(reply);
        assert_eq!(err.kind(), ErrorKind::PermitsMismatch, "{reply}");
        let text = err.to_string();
        assert!(
            text.contains("this call says 4, the semaphore has 3"),
            "{text}"
        );
        assert!(text.contains("for 600s (the fence life)"), "{text}");
        assert!(text.contains("set_permits"), "{text}");
        assert!(err.source().is_some());
    }
    // Another script error that mentions permits is not one, nor is a
    // code with fields that are not numbers.
    assert_eq!(
        from_reply("FAIRLOCK_PERMITS_MISMATCH four 3 600000").kind(),
        ErrorKind::Server
    );
    let other =
        from_reply("ERR fairlock: permits must be a whole number from 1 to 4294967295, got 0");
    assert_eq!(other.kind(), ErrorKind::Server);
}

#[test]
fn a_refused_upgrade_is_its_own_kind_as_every_version_words_it() {
    let refusal = "FAIRLOCK_UPGRADE_REFUSED c:1 7 write";
    for reply in [
        // Redis 7.0+ and Valkey 8
        format!("{refusal} script: fd1f62702330c26137b50b4d8f15f201f6699d84, on @user_script:66."),
        // Redis 6.2
        format!(
            "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): \
             @user_script:66: {refusal}"
        ),
    ] {
        let err = from_reply(&reply);
        assert_eq!(err.kind(), ErrorKind::UpgradeRefused, "{reply}");
        assert!(err.to_string().contains("release its read guards"), "{err}");
        assert!(err.to_string().contains("(owner c:1, token 7)"), "{err}");
    }
    // A thread that holds an upgradable read is told to upgrade it.
    let err = from_reply("FAIRLOCK_UPGRADE_REFUSED c:1 7 write upgradable script: f, on @x:1.");
    assert!(
        err.to_string().contains("upgrade that read instead"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("take an upgradable read"),
        "{err}"
    );
    assert_eq!(
        from_reply("ERR fairlock: mode must be try, first or poll").kind(),
        ErrorKind::Server
    );
}

#[test]
fn data_of_another_format_is_a_format_mismatch_naming_both_and_the_lock_as_every_version_words_it()
{
    for reply in [
        // Redis 7.0+ and Valkey 8
        "FAIRLOCK_FORMAT 2 1 fairlock:{0123456789abcdef}:lock:a b script: \
         fairlock_0123_mutex_acquire, on @user_function:24.",
        // Redis 6.2
        "ERR Error running script (call to f_e91400d7df4ac365ee130fc418c8c4183dac4414): \
         @user_script:42: FAIRLOCK_FORMAT 2 1 fairlock:{0123456789abcdef}:lock:a b",
    ] {
        let err = from_reply(reply);
        assert_eq!(err.kind(), ErrorKind::FormatMismatch, "{reply}");
        assert!(!err.is_retryable(), "{reply}");
        let text = err.to_string();
        assert!(text.contains("data format 2"), "{text}");
        assert!(text.contains("data format 1"), "{text}");
        assert!(text.contains(":lock:a b holds"), "{text}");
    }
    let err = from_reply("FAIRLOCK_FORMAT unversioned 1 p:{0123456789abcdef}:semmeta:n");
    assert!(err.to_string().contains("before data formats"), "{err}");
}

// Client settings and URLs (src/handles/builder.rs, src/connections/topology.rs)

/// The error `build` stops at: a bad setting or URL fails before any I/O.
fn rejected(builder: ClientBuilder) -> Error {
    builder.build().unwrap_err()
}

#[test]
fn passwords_never_reach_debug_output() {
    assert_eq!(redact_url("redis://u:p%40ss@h:1/0"), "redis://u:***@h:1/0");
    assert_eq!(redact_url("redis://:pw@h"), "redis://:***@h");
    assert_eq!(redact_url("redis://pw@h"), "redis://***@h");
    assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
    let debug = format!("{:?}", Client::builder("rediss://user:hunter2@host:6380"));
    assert!(!debug.contains("hunter2"), "{debug}");
}

#[test]
fn bad_settings_are_invalid_config() {
    let b = || Client::builder("redis://x");
    for err in [
        rejected(b().lease(Duration::ZERO)),
        rejected(b().waiter_timeout(Duration::ZERO)),
        rejected(b().lease(Duration::from_millis(29))),
        rejected(b().lease(MAX_LEASE + Duration::from_millis(1))),
        rejected(b().lease(Duration::MAX)),
        rejected(b().waiter_timeout(Duration::MAX)),
        rejected(b().command_timeout(Duration::MAX)),
        rejected(b().connect_timeout(MAX_TIMEOUT + Duration::from_millis(1))),
        rejected(b().pool_size(0)),
        rejected(b().key_prefix("")),
        rejected(b().key_prefix("a{b")),
        rejected(b().key_prefix("p".repeat(257))),
        rejected(b().connect_timeout(Duration::ZERO)),
        rejected(b().command_timeout(Duration::ZERO)),
        rejected(b().sync_replicas(0, Duration::from_millis(100))),
        rejected(b().sync_replicas(1, Duration::ZERO)),
        rejected(b().sync_replicas(1, Duration::from_secs(5))),
        rejected(Client::builder("redis+cluster://a")),
        rejected(b().clock_drift(-0.01, Duration::ZERO)),
        rejected(b().clock_drift(0.26, Duration::ZERO)),
        rejected(b().clock_drift(f64::NAN, Duration::ZERO)),
        rejected(b().clock_drift(0.01, Duration::MAX)),
        // 30 ms lease: 10 ms margin leaves less than two thirds.
        rejected(
            b().lease(Duration::from_millis(30))
                .clock_drift(0.0, Duration::from_millis(11)),
        ),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{err}");
    }
}

#[test]
fn malformed_urls_are_invalid_config() {
    for url in [
        "redis+cluster://",
        "redis+cluster://a:1,,b:2",
        "redis+cluster://a:1/5",
        "redis+sentinel://a:1",
        "redis+sentinel://a:1/m/x",
        "redis+sentinel://a:1/m/0/x",
        "redis+sentinel://a:1/m/-1",
        // Port 0, as `builder_from` refuses it: not a retryable `Connection`.
        "redis://127.0.0.1:0",
        "redis+cluster://127.0.0.1:0",
        "redis+sentinel://127.0.0.1:0/m",
        "redis+shards://a:1",
        "http+cluster://a:1",
        "redis+cluster://host-without-port",
    ] {
        let err = rejected(Client::builder(url));
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{url}: {err}");
    }
}

/// A URL the redis crate cannot read is named in the error (its password
/// hidden; a cluster's seed, of which there are several), and the schemes
/// fairlock takes are listed only when its scheme is not one of them.
#[test]
fn an_unreadable_url_is_named_and_its_scheme_blamed_only_when_unknown() {
    for (url, named) in [
        (
            "redis://u:hunter2@127.0.0.1:99999",
            "redis://u:***@127.0.0.1:99999",
        ),
        ("redis+cluster://a:1,b:99999", "redis://b:99999"),
        ("redis+sentinel://a:99999/m", "redis://a:99999"),
    ] {
        let err = rejected(Client::builder(url)).to_string();
        assert!(err.contains(named), "{url}: {err}");
        assert!(!err.contains("hunter2"), "{url}: {err}");
        assert!(!err.contains("scheme"), "{url}: {err}");
    }
    let err = rejected(Client::builder("http://a:1")).to_string();
    assert!(err.contains("scheme"), "{err}");
}

/// What `url` parses to (src/connections/topology.rs), as `Debug` writes it.
fn topology(url: &str) -> String {
    topology_of(url).unwrap_or_else(|err| panic!("{url}: {err}"))
}

#[test]
fn plain_urls_stay_as_they_are() {
    assert_eq!(topology("redis://h:1/2"), r#"Single("redis://h:1/2")"#);
}

#[test]
fn unix_socket_urls_are_one_server_and_never_cluster_seeds() {
    for url in ["redis+unix:///tmp/r.sock?db=1", "unix:///tmp/r.sock"] {
        assert_eq!(topology(url), format!("Single({url:?})"));
    }
    let err = rejected(Client::cluster_builder(["unix:///tmp/r.sock"]));
    assert_eq!(err.kind(), ErrorKind::InvalidConfig);
}

#[test]
fn cluster_urls_list_every_seed_with_the_credentials() {
    assert_eq!(
        topology("rediss+cluster://u:p@a:1, b:2,c:3"),
        r#"Cluster(["rediss://u:p@a:1", "rediss://u:p@b:2", "rediss://u:p@c:3"])"#
    );
}

/// A query or a fragment, which a `redis://` URL may carry for the redis
/// crate, has no place in a cluster's or Sentinels' URL: it was kept on
/// the last seed alone (`?protocol=resp3`, `#insecure` for one seed of
/// many), read as part of the master's name, or said to be a database.
#[test]
fn a_query_or_fragment_in_a_cluster_or_sentinel_url_is_invalid_config() {
    for url in [
        "redis+cluster://a:1,b:2?protocol=resp3",
        "rediss+cluster://a:1,b:2#insecure",
        "rediss+cluster://a:1,b:2/#insecure",
        "redis+sentinel://a:1,b:2/orders?protocol=resp3",
        "rediss+sentinel://a:1/orders#insecure",
    ] {
        let err = topology_of(url).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidConfig, "{url}: {err}");
        assert!(err.to_string().contains("query"), "{url}: {err}");
    }
}

#[test]
fn sentinel_urls_name_the_master_and_keep_credentials_for_it() {
    assert_eq!(
        topology("redis+sentinel://:pw@a:1,b:2/orders/3"),
        r#"Sentinel { sentinels: ["redis://a:1", "redis://b:2"], node: MasterNode { name: "orders", tls: false, username: None, password: Some("pw"), db: 3 } }"#
    );
}
