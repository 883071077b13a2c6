//! The "holder" role of tests/liveness.rs (see [`crate::roles::holder`]).

use std::thread;
use std::time::Duration;

use fairlock::Client;

use crate::roles::holder::{ACCESS, LEASE_MS, LOCKED, NAME, PERMITS, URL};

/// Connects (waiter timeout 1 s, the given lease), blocks in `lock()`,
/// prints `FAIRLOCK_CHILD_LOCKED <token>` once it holds the lock, and keeps
/// holding until killed (at most a minute, so that a child whose parent
/// died goes away on its own). With `PERMITS` set, the same with a permit
/// of the semaphore of that name; with `ACCESS` ("read" or "write"), with a
/// hold of the rwlock of that name.
pub fn holder() {
    let url = std::env::var(URL).expect("child: server URL");
    let name = std::env::var(NAME).expect("child: lock name");
    let lease_ms: u64 = std::env::var(LEASE_MS)
        .expect("child: lease")
        .parse()
        .expect("child: lease is a number");
    let client = Client::builder(&url)
        .lease(Duration::from_millis(lease_ms))
        .waiter_timeout(Duration::from_secs(1))
        .build()
        .expect("child: client connects");
    if let Ok(permits) = std::env::var(PERMITS) {
        let permits = permits.parse().expect("child: permits is a number");
        let permit = client
            .fair_semaphore(&name, permits)
            .acquire()
            .expect("child: acquire");
        println!("{LOCKED} {}", permit.fencing_token());
        thread::sleep(Duration::from_secs(60));
        drop(permit);
        return;
    }
    if let Ok(access) = std::env::var(ACCESS) {
        let rwlock = client.fair_rwlock(&name);
        match access.as_str() {
            "read" => {
                let guard = rwlock.read().expect("child: read");
                println!("{LOCKED} {}", guard.fencing_token());
                thread::sleep(Duration::from_secs(60));
                drop(guard);
            }
            "write" => {
                let guard = rwlock.write().expect("child: write");
                println!("{LOCKED} {}", guard.fencing_token());
                thread::sleep(Duration::from_secs(60));
                drop(guard);
            }
            other => panic!("child: access is read or write, not {other:?}"),
        }
        return;
    }
    let guard = client.fair_mutex(&name).lock().expect("child: lock");
    println!("{LOCKED} {}", guard.fencing_token());
    thread::sleep(Duration::from_secs(60));
    drop(guard);
}
