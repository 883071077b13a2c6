//! A fair semaphore: eight workers share three permits, and never more
//! than three run at once; then a weighted request (three permits at once)
//! at the head of the queue is not passed by a one-permit request behind
//! it, even while a permit is free, so it cannot starve.
//!
//! ```sh
//! cargo run --example semaphore   # REDIS_URL defaults to redis://127.0.0.1:6379
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fairlock::Client;

const PERMITS: u32 = 3;
const WORKERS: usize = 8;

fn main() -> fairlock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let name = format!("example:semaphore:{}", std::process::id());
    let client = Client::open(&url)?;

    // At most PERMITS of the WORKERS at once.
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let sem = Client::open(&url)?.fair_semaphore(&name, PERMITS);
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            Ok(thread::spawn(move || -> fairlock::Result<()> {
                let permit = sem.acquire()?;
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                println!("worker {worker} runs ({now} running)");
                thread::sleep(Duration::from_millis(50));
                running.fetch_sub(1, Ordering::SeqCst);
                permit.unlock()
            }))
        })
        .collect::<fairlock::Result<_>>()?;
    for worker in workers {
        worker.join().expect("worker thread panicked")?;
    }
    let most = most.load(Ordering::SeqCst);
    println!("at most {most} of {WORKERS} workers ran at once ({PERMITS} permits)");

    // Weighted: one permit held, a 3-permit job queues at the head; a
    // 1-permit request may not pass it, though 2 permits are free.
    let sem = client.fair_semaphore(&name, PERMITS);
    let one = sem.acquire()?;
    let big_sem = Client::open(&url)?.fair_semaphore(&name, PERMITS);
    let big = thread::spawn(move || -> fairlock::Result<u32> {
        let permit = big_sem.acquire_many(PERMITS)?;
        let n = permit.num_permits();
        permit.unlock()?;
        Ok(n)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while sem.queue_len()? < 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    let small = Client::open(&url)?
        .fair_semaphore(&name, PERMITS)
        .try_acquire()?;
    println!(
        "{} permits free, a {PERMITS}-permit job queued: a 1-permit try_acquire {}",
        sem.available()?,
        if small.is_some() {
            "got one"
        } else {
            "waits its turn"
        }
    );
    one.unlock()?;
    let taken = big.join().expect("big job panicked")?;
    println!("the queued job then took {taken} permits at once");
    assert!(most <= PERMITS as usize && small.is_none() && taken == PERMITS);
    Ok(())
}
