//! A fair reader-writer lock: three readers share it at once; a writer
//! waits for them, and a reader that arrives after the queued writer waits
//! behind it (so writers do not starve), then enters as soon as the writer
//! is done.
//!
//! ```sh
//! cargo run --example rwlock   # REDIS_URL defaults to redis://127.0.0.1:6379
//! ```

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{Client, FairRwLock};

/// Waits until `n` callers are queued for `lock`.
fn until_queued(lock: &FairRwLock, n: usize) -> fairlock::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while lock.queue_len()? < n && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn main() -> fairlock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let name = format!("example:rwlock:{}", std::process::id());
    let client = Client::open(&url)?;
    let lock = client.fair_rwlock(&name);

    // Three readers, each on a client of its own, all inside at once.
    let inside = Arc::new(Barrier::new(3));
    let readers: Vec<_> = (0..3)
        .map(|reader| {
            let lock = Client::open(&url)?.fair_rwlock(&name);
            let inside = Arc::clone(&inside);
            Ok(thread::spawn(move || -> fairlock::Result<()> {
                let guard = lock.read()?;
                inside.wait(); // every reader reaches this while holding its read
                println!("reader {reader} reads alongside the others");
                guard.unlock()
            }))
        })
        .collect::<fairlock::Result<_>>()?;
    for reader in readers {
        reader.join().expect("reader panicked")?;
    }
    println!("3 readers held it together");

    // A read held; a writer queues; a later reader queues behind it.
    let order = Arc::new(Mutex::new(Vec::new()));
    let first_read = lock.read()?;
    let spawn = |who: &'static str, write: bool| -> fairlock::Result<_> {
        let (lock, order) = (Client::open(&url)?.fair_rwlock(&name), Arc::clone(&order));
        Ok(thread::spawn(move || -> fairlock::Result<()> {
            if write {
                let guard = lock.write()?;
                order.lock().unwrap().push(who);
                thread::sleep(Duration::from_millis(30));
                guard.unlock()
            } else {
                let guard = lock.read()?;
                order.lock().unwrap().push(who);
                guard.unlock()
            }
        }))
    };
    let writer = spawn("writer", true)?;
    until_queued(&lock, 1)?;
    let late_reader = spawn("late reader", false)?;
    until_queued(&lock, 2)?;
    let status = lock.status(10)?;
    println!(
        "a read held, queued: {:?}",
        status.waiters.iter().map(|w| w.access).collect::<Vec<_>>()
    );
    first_read.unlock()?;
    writer.join().expect("writer panicked")?;
    late_reader.join().expect("late reader panicked")?;
    let order = order.lock().unwrap().clone();
    println!("after the first read: {}", order.join(", then "));
    assert_eq!(order, ["writer", "late reader"]);
    Ok(())
}
