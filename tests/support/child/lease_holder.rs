//! The "lease_holder" role (tests/partitions.rs, tests/revoke.rs): takes
//! locks on command and reports the moment each lease signal fires, and
//! each revocation. See `roles::lease_holder` for the protocol.

use std::time::Duration;

use fairlock::{Client, FairMutexGuard, LeaseEnd, Revocation, SemaphorePermit};

use crate::roles::lease_holder::{DRIFT, FIXED, LEASE_MS, URL};
use crate::{child_arg, child_commands, say};

pub fn lease_holder() {
    let lease = Duration::from_millis(child_arg(LEASE_MS));
    let fixed = child_arg::<String>(FIXED) == "1";
    let mut builder = Client::builder(&child_arg::<String>(URL))
        .lease(lease)
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1));
    if child_arg::<String>(DRIFT) == "none" {
        builder = builder.clock_drift(0.0, Duration::ZERO);
    }
    let client = builder.build().expect("child: client connects");
    let commands = child_commands();
    let mut guard: Option<FairMutexGuard> = None;
    let mut permit: Option<SemaphorePermit> = None;
    say("ready");
    for line in commands {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["lock", name] => {
                let mutex = client.fair_mutex(name);
                let mutex = if fixed {
                    mutex.with_fixed_lease(lease)
                } else {
                    mutex
                };
                let taken = mutex.lock().expect("child: lock");
                let signal = taken.lease_signal();
                std::thread::spawn(move || {
                    let end = match signal.wait() {
                        LeaseEnd::Lost => "lost",
                        // Released (LeaseEnd is non-exhaustive).
                        _ => "released",
                    };
                    say(format!("ended {end} {}", signal.fencing_token()));
                });
                let revoked = taken.revocation_signal();
                std::thread::spawn(move || {
                    if revoked.wait() == Revocation::Requested {
                        say(format!("revoked {}", revoked.fencing_token()));
                    }
                });
                say(format!("locked {}", taken.fencing_token()));
                guard = Some(taken);
            }
            ["permit", name, permits] => {
                let semaphore = client.fair_semaphore(name, permits.parse().unwrap());
                let taken = semaphore
                    .with_fixed_lease(lease)
                    .acquire()
                    .expect("child: permit");
                say(format!("locked {}", taken.fencing_token()));
                permit = Some(taken);
            }
            ["lost?"] => {
                let lost = guard.as_ref().is_some_and(FairMutexGuard::is_lease_lost);
                say(format!("lost {lost}"));
            }
            ["unlock"] => {
                let unlocked = match permit.take() {
                    Some(permit) => Some(permit.unlock()),
                    None => guard.take().map(FairMutexGuard::unlock),
                };
                let outcome = match unlocked {
                    Some(Err(err)) => format!("{:?}", err.kind()),
                    _ => "ok".to_owned(),
                };
                say(format!("unlocked {outcome}"));
            }
            ["revoke", name] => match client.fair_mutex(name).revoke() {
                Ok(asked) => say(format!("asked {asked}")),
                Err(err) => say(format!("asked {:?}", err.kind())),
            },
            other => panic!("child: unknown command {other:?}"),
        }
    }
}
