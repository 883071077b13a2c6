//! The server versions fairlock is tested on: the system's `redis-server`
//! (7.0 on Debian 12), Redis 6.2 and Valkey 8.1 (the binaries
//! `scripts/ensure-servers` puts under `target/servers/`). On each, the
//! least-privilege ACL user of docs/security.md runs a whole lock cycle (pool,
//! subscriber and watchdog connections all used) and leaves `ACL LOG`
//! empty: in particular no `CLIENT SETINFO`, which the user may not run
//! and which Redis 6.2, 7.2+ and Valkey log as denied (7.0 refuses it as
//! unknown before checking the ACL).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fairlock::Client;
use fairlock_test_support::*;

const LEASE: Duration = Duration::from_secs(1);

/// The server binaries to test, by name: the system's, and those of
/// `scripts/ensure-servers` (a note, and no test, for one not there).
fn binaries() -> Vec<(&'static str, PathBuf)> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut found = vec![("system redis-server", PathBuf::from("redis-server"))];
    for (name, path) in [
        ("Redis 6.2", "target/servers/redis-6.2/redis-server"),
        ("Valkey 8.1", "target/servers/valkey-8.1/valkey-server"),
    ] {
        let path = root.join(path);
        if path.is_file() {
            found.push((name, path));
        } else {
            eprintln!(
                "NOTE: {name} not tested: {} is missing (run scripts/ensure-servers)",
                path.display()
            );
        }
    }
    found
}

/// The lines of `CLIENT LIST` for `user`'s connections.
fn connections_of(admin: &mut redis::Connection, user: &str) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
    list.lines()
        .filter(|line| line.split(' ').any(|f| f == format!("user={user}")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_readme_acl_user_leaves_acl_log_empty_on_every_server_version() {
    let _serial = serial();
    for (name, binary) in binaries() {
        let version = binary_version(&binary).unwrap_or_else(|e| panic!("{name}: {e}"));
        // 7.2+ knows CLIENT SETINFO and denies it; 6.2 does not know it but
        // checks the ACL (on `client`) first; 7.0 refuses the unknown
        // subcommand before any ACL check.
        let setinfo_logged = !((7, 0, 0)..(7, 2, 0)).contains(&version);
        let server = RedisServer::start_binary(&binary, &[]);
        let mut admin = server.conn();
        create_acl_user(&mut admin, "v3rsions");
        let () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query(&mut admin)
            .unwrap();
        let url = server.url_as("fairlock", "v3rsions");
        let builder = || Client::builder(&url).lease(LEASE).waiter_timeout(LEASE);
        let a = builder().build().expect("the ACL user connects");
        let b = builder().build().expect("the ACL user connects");

        // Held past two watchdog rounds (renewals) with a waiter of another
        // client queued (heartbeats), looked at, handed over by push message.
        let m = a.fair_mutex("versions");
        let guard = m.lock().unwrap();
        let waiter = LockThread::lock(b.fair_mutex("versions"));
        assert!(wait_until(Duration::from_secs(5), || m
            .queue_len()
            .unwrap()
            == 1));
        let status = b.fair_mutex("versions").status(10).unwrap();
        assert!(status.holder().is_some(), "{name}: {status:?}");
        assert_eq!(status.waiters.len(), 1, "{name}: {status:?}");
        std::thread::sleep(LEASE + LEASE / 2);
        assert!(!guard.is_lease_lost(), "{name}: renewals failed");
        assert_eq!(m.queue_len().unwrap(), 1, "{name}: heartbeats failed");
        let unlocked = Instant::now();
        guard.unlock().unwrap();
        let (granted, _) = waiter.granted_within(Duration::from_secs(2), "the waiter");
        let handoff = granted - unlocked;
        waiter.release("the waiter");
        assert!(!m.is_locked().unwrap());

        // Every connection of both clients is the user's, and none told the
        // server its library (7.2+ lists `lib-name=` for every connection).
        let mine = connections_of(&mut admin, "fairlock");
        assert!(
            mine.len() >= 6,
            "{name}: pools, subscribers, watchdogs: {mine:?}"
        );
        for line in &mine {
            assert!(
                !line.contains("lib-name=redis-rs"),
                "{name}: CLIENT SETINFO was sent: {line}"
            );
        }
        let connections = mine.len();
        drop(a);
        drop(b);
        let denials = acl_denials(&mut admin);
        assert!(
            denials.is_empty(),
            "{name}: the library was denied: {denials:?}"
        );

        // The check can fail: a plain redis crate connection as the same
        // user sends `CLIENT SETINFO`, which all but 7.0 deny and log.
        let mut plain = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: redis::Value = redis::cmd("TIME").query(&mut plain).unwrap();
        let denials = acl_denials(&mut admin);
        assert_eq!(
            !denials.is_empty(),
            setinfo_logged,
            "{name} {version:?}: a connection with CLIENT SETINFO left {denials:?}"
        );
        eprintln!(
            "{name} {}.{}.{}: docs/security.md ACL user, {connections} connections, ACL LOG empty; \
             handoff {:.1} ms; a connection sending CLIENT SETINFO logs {} denials",
            version.0,
            version.1,
            version.2,
            ms(handoff),
            denials.len()
        );
    }
}
