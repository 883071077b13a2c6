//! A multi-lock: two workers move money between the same two accounts,
//! naming them in opposite orders, a hundred times each. Taking two
//! mutexes one by one that way can deadlock; a multi-lock takes them in
//! one order every client shares, all or none. Then a `try_lock` that
//! finds one part busy holds nothing.
//!
//! ```sh
//! cargo run --example multi_lock   # REDIS_URL defaults to redis://127.0.0.1:6379
//! ```

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;

use fairlock::Client;

const TRANSFERS: usize = 100;

fn main() -> fairlock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let pid = std::process::id();
    let (a, b) = (
        format!("example:account:a:{pid}"),
        format!("example:account:b:{pid}"),
    );
    // The balances the locks protect (in a real service: rows elsewhere).
    let balances = Arc::new([AtomicI64::new(1_000), AtomicI64::new(1_000)]);

    let workers: Vec<_> = [(0usize, 1usize), (1, 0)]
        .into_iter()
        .map(|(from, to)| {
            let client = Client::open(&url)?;
            // Worker 0 names [a, b], worker 1 [b, a].
            let names = if from == 0 { [&a, &b] } else { [&b, &a] };
            let both = client.fair_multi_lock(names);
            let balances = Arc::clone(&balances);
            Ok(thread::spawn(move || -> fairlock::Result<()> {
                for _ in 0..TRANSFERS {
                    let guard = both.lock()?;
                    // Read-modify-write of both balances, safe under both locks.
                    let (f, t) = (
                        balances[from].load(Ordering::SeqCst),
                        balances[to].load(Ordering::SeqCst),
                    );
                    balances[from].store(f - 1, Ordering::SeqCst);
                    balances[to].store(t + 1, Ordering::SeqCst);
                    // A failed release leaves nothing held: log it, go on.
                    if let Err(err) = guard.unlock() {
                        eprintln!("unlock: {err}");
                    }
                }
                Ok(())
            }))
        })
        .collect::<fairlock::Result<_>>()?;
    for worker in workers {
        worker.join().expect("worker panicked")?;
    }
    let (x, y) = (
        balances[0].load(Ordering::SeqCst),
        balances[1].load(Ordering::SeqCst),
    );
    println!(
        "{} transfers in opposite orders, no deadlock; balances {x} + {y} = {}",
        2 * TRANSFERS,
        x + y
    );

    // All or none: with b held elsewhere, try_lock takes neither.
    let client = Client::open(&url)?;
    let b_held = Client::open(&url)?.fair_mutex(&b).lock()?;
    let got = client.fair_multi_lock([&a, &b]).try_lock()?;
    println!(
        "with {b:?} held elsewhere, try_lock got {}; {a:?} left locked: {}",
        if got.is_some() { "both" } else { "nothing" },
        client.fair_mutex(&a).is_locked()?
    );
    b_held.unlock()?;
    assert!(x + y == 2_000 && got.is_none() && !client.fair_mutex(&a).is_locked()?);
    Ok(())
}
