//! The "candidate" role (tests/election.rs): campaigns in an election and
//! leads until told to resign. See `roles::candidate` for the protocol.

use std::time::Duration;

use fairlock::Client;

use crate::roles::candidate::{LEASE_MS, NAME, URL, VALUE, WAITER_TIMEOUT_MS};
use crate::{child_arg, child_commands, say};

pub fn candidate() {
    let lease = Duration::from_millis(child_arg(LEASE_MS));
    let waiter_timeout = Duration::from_millis(child_arg(WAITER_TIMEOUT_MS));
    let client = Client::builder(&child_arg::<String>(URL))
        .lease(lease)
        .waiter_timeout(waiter_timeout)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("child: client connects");
    let election = client.election(&child_arg::<String>(NAME));
    let value: String = child_arg(VALUE);
    let commands = child_commands();
    say("ready");
    let leadership = election
        .with_value(&value)
        .campaign()
        .expect("child: campaign");
    say(format!(
        "leads {} {}",
        leadership.term(),
        leadership.value()
    ));
    let mut leadership = Some(leadership);
    for line in commands {
        match line.trim() {
            "resign" => {
                let outcome = match leadership.take().map(|l| l.unlock()) {
                    Some(Err(err)) => format!("{:?}", err.kind()),
                    _ => "ok".to_owned(),
                };
                say(format!("resigned {outcome}"));
            }
            other => panic!("child: unknown command {other:?}"),
        }
    }
}
