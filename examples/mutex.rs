//! A fair mutex: four workers, each on a client of its own (as separate
//! processes would be), queue for one lock while it is held; once it is
//! released they get it one after another in the order they arrived, each
//! with a larger fencing token. Then a `try_lock_for` that times out
//! leaves the queue.
//!
//! ```sh
//! cargo run --example mutex   # REDIS_URL defaults to redis://127.0.0.1:6379
//! ```

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fairlock::Client;

const WORKERS: usize = 4;

fn main() -> fairlock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let name = format!("example:mutex:{}", std::process::id());
    let client = Client::open(&url)?;
    let mutex = client.fair_mutex(&name);

    // Hold the lock while the workers arrive, one after another.
    let holder = mutex.lock()?;
    println!("main holds {name:?} (token {})", holder.fencing_token());
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for arrival in 0..WORKERS {
        let worker_client = Client::open(&url)?;
        let (name, grants) = (name.clone(), Arc::clone(&grants));
        workers.push(thread::spawn(move || -> fairlock::Result<()> {
            let guard = worker_client.fair_mutex(&name).lock()?;
            println!(
                "worker {arrival} got the lock after {:?}, token {}",
                guard.waited(),
                guard.fencing_token()
            );
            grants
                .lock()
                .unwrap()
                .push((arrival, guard.fencing_token()));
            thread::sleep(Duration::from_millis(20)); // the critical section
            guard.unlock()
        }));
        // The next worker arrives only once this one is queued.
        let deadline = Instant::now() + Duration::from_secs(10);
        while mutex.queue_len()? < arrival + 1 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
    }
    println!("{} workers queued; main releases", mutex.queue_len()?);
    holder.unlock()?;
    for worker in workers {
        worker.join().expect("worker thread panicked")?;
    }

    let grants = grants.lock().unwrap().clone();
    let in_order = grants
        .iter()
        .enumerate()
        .all(|(i, (arrival, _))| i == *arrival);
    let increasing = grants.windows(2).all(|w| w[1].1 > w[0].1);
    println!("granted in arrival order: {in_order}; tokens increasing: {increasing}");

    // A bounded wait that gives up leaves no queue entry behind.
    let holder = mutex.lock()?;
    let other = Client::open(&url)?.fair_mutex(&name);
    let got = other.try_lock_for(Duration::from_millis(100))?;
    println!(
        "try_lock_for(100 ms) while held: {}; still queued: {}",
        if got.is_some() { "got it" } else { "timed out" },
        mutex.queue_len()?
    );
    holder.unlock()?;
    assert!(in_order && increasing && got.is_none());
    Ok(())
}
