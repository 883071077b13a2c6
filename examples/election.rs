//! A leader election: three candidates, each on a client of its own,
//! campaign in turn; each leads for a moment and resigns, and the next in
//! arrival order leads at once with a larger term. A watcher on a client
//! of its own sees every leader, in the order of their terms.
//!
//! ```sh
//! cargo run --example election   # REDIS_URL defaults to redis://127.0.0.1:6379
//! ```

use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Client, LeaderEvent};

const CANDIDATES: usize = 3;

fn main() -> fairlock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let name = format!("example:election:{}", std::process::id());
    let client = Client::open(&url)?;
    let election = client.election(&name);

    // The watcher subscribes before anyone campaigns.
    let mut watch = Client::open(&url)?.election(&name).watch()?;
    let watcher = thread::spawn(move || -> fairlock::Result<Vec<(u64, String)>> {
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.len() < CANDIDATES && Instant::now() < deadline {
            match watch.next(Duration::from_secs(1))? {
                Some(LeaderEvent::Leads(leader)) => {
                    println!("watcher: {} leads, term {}", leader.value, leader.term);
                    seen.push((leader.term, leader.value));
                }
                Some(other) => println!("watcher: {other}"), // a vacancy
                None => {}
            }
        }
        Ok(seen)
    });

    let mut candidates = Vec::new();
    for i in 0..CANDIDATES {
        let candidate = Client::open(&url)?.election(&name);
        candidates.push(thread::spawn(move || -> fairlock::Result<u64> {
            let value = format!("node-{i}");
            let leadership = candidate.with_value(&value).campaign()?; // waits its turn
            println!(
                "{value} leads (term {}) after waiting {:?}",
                leadership.term(),
                leadership.waited()
            );
            thread::sleep(Duration::from_millis(200)); // leading: pass term() to what it writes
            let term = leadership.term();
            leadership.unlock()?; // resigns: the next candidate leads at once
            Ok(term)
        }));
        // The next candidate campaigns once this one leads or waits.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = election.status(0)?;
            let in_line = status.holder_count + status.queue_len;
            if in_line > i || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
    let terms = candidates
        .into_iter()
        .map(|c| c.join().expect("candidate panicked"))
        .collect::<fairlock::Result<Vec<u64>>>()?;
    let seen = watcher.join().expect("watcher panicked")?;
    let values: Vec<&str> = seen.iter().map(|(_, v)| v.as_str()).collect();
    println!("led in arrival order: {}", values.join(", then "));
    println!(
        "terms increasing: {}",
        terms.windows(2).all(|w| w[1] > w[0])
    );
    println!("now leading: {:?}", election.leader()?.map(|l| l.value));
    assert_eq!(values, ["node-0", "node-1", "node-2"]);
    Ok(())
}
