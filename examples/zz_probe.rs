use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
fn main() {
    let url = std::env::var("REDIS_URL").unwrap();
    let threads: usize = std::env::var("THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let secs: u64 = std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let one: bool = std::env::var("ONE").is_ok();
    let clients: Vec<fairlock::Client> = (0..if one { 1 } else { threads })
        .map(|_| fairlock::Client::open(&url).unwrap())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let name = format!("probe:{}", std::process::id());
    for c in &clients {
        drop(c.fair_mutex(&name).lock().unwrap());
    }
    let started = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let m = clients[i % clients.len()].fair_mutex(&name);
            let (stop, count) = (stop.clone(), count.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let g = m.lock().unwrap();
                    drop(g);
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let n = count.load(Ordering::Relaxed);
    let el = started.elapsed().as_secs_f64();
    eprintln!("{} acquisitions in {:.2}s = {:.0}/s", n, el, n as f64 / el);
}
