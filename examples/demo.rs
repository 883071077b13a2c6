//! Demo: workers on separate clients contend for one lock. Shows that the
//! grant order equals the arrival order, and how long a handoff takes.
//!
//! Uses `$REDIS_URL` when set; otherwise starts a throwaway `redis-server`
//! on a free loopback port and stops it at the end.
//!
//! ```text
//! cargo run --release --example demo [-- WORKERS ROUNDS]
//! ```

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use fairlock::Client;

/// A redis-server started for the demo, killed on drop.
struct ThrowawayServer {
    child: Child,
    url: String,
}

impl ThrowawayServer {
    fn start() -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--logfile", ""])
            .stdout(Stdio::null())
            .spawn()
            .context("starting redis-server (install it, or set REDIS_URL)")?;
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = redis::Client::open(url.as_str())?
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ping.is_ok() {
                return Ok(ThrowawayServer { child, url });
            }
            if Instant::now() > deadline {
                bail!("redis-server on port {port} did not answer within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(25);

    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = ThrowawayServer::start()?;
            let url = server.url.clone();
            (Some(server), url)
        }
    };
    println!("fairlock demo against {url}: {workers} workers, {rounds} rounds\n");
    let name = format!("demo:{}", std::process::id());

    // Round-trip floor, for scale.
    let mut conn = redis::Client::open(url.as_str())?.get_connection()?;
    let mut rtts: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            redis::cmd("PING")
                .query::<String>(&mut conn)
                .map(|_| t.elapsed())
        })
        .collect::<redis::RedisResult<_>>()?;
    rtts.sort();
    let rtt = percentile(&rtts, 0.5);

    // Uncontended lock + unlock.
    let client = Client::open(&url)?;
    let mutex = client.fair_mutex(&name);
    let mut cycles: Vec<Duration> = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        mutex.lock()?.unlock()?;
        cycles.push(t.elapsed());
    }
    cycles.sort();

    // Contended rounds: the coordinator holds the lock, workers arrive one
    // after another (each waits until the previous one is queued), then the
    // coordinator releases and the lock travels down the queue.
    let clients: Vec<Client> = (0..workers)
        .map(|_| Client::open(&url))
        .collect::<Result<_, _>>()?;
    let mut inversions = 0;
    let mut handoffs: Vec<Duration> = Vec::new();
    let mut first_round = None;
    for _ in 0..rounds {
        let grants = Arc::new(Mutex::new(Vec::<(usize, u64)>::new()));
        let released_at = Arc::new(Mutex::new(Instant::now()));
        let latencies = Arc::new(Mutex::new(Vec::<Duration>::new()));
        let holder = mutex.lock()?;
        let mut threads = Vec::new();
        for (arrival, worker_client) in clients.iter().enumerate() {
            let m = worker_client.fair_mutex(&name);
            let (grants, released_at, latencies) = (
                Arc::clone(&grants),
                Arc::clone(&released_at),
                Arc::clone(&latencies),
            );
            threads.push(std::thread::spawn(move || -> Result<()> {
                let guard = m.lock()?;
                latencies
                    .lock()
                    .unwrap()
                    .push(released_at.lock().unwrap().elapsed());
                grants
                    .lock()
                    .unwrap()
                    .push((arrival, guard.fencing_token()));
                *released_at.lock().unwrap() = Instant::now();
                guard.unlock()?;
                Ok(())
            }));
            let deadline = Instant::now() + Duration::from_secs(10);
            while mutex.queue_len()? < arrival + 1 {
                if Instant::now() > deadline {
                    bail!("worker {arrival} did not queue within 10 s");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        *released_at.lock().unwrap() = Instant::now();
        holder.unlock()?;
        for t in threads {
            t.join().expect("worker thread panicked")?;
        }
        let grants = grants.lock().unwrap().clone();
        inversions += grants.windows(2).filter(|w| w[1].0 < w[0].0).count();
        assert!(
            grants.windows(2).all(|w| w[1].1 > w[0].1),
            "fencing tokens must increase"
        );
        handoffs.extend(latencies.lock().unwrap().iter());
        first_round.get_or_insert(grants);
    }
    handoffs.sort();

    println!("first round, in grant order:");
    println!(
        "  {:>7}  {:>7}  {:>18}",
        "granted", "arrived", "fencing token"
    );
    for (granted, (arrived, token)) in first_round.unwrap_or_default().iter().enumerate() {
        println!("  {granted:>7}  {arrived:>7}  {token:>18}");
    }
    println!();
    println!(
        "grant order == arrival order: {} ({} FIFO inversions in {} grants)",
        if inversions == 0 { "yes" } else { "NO" },
        inversions,
        handoffs.len()
    );
    println!("round trip (PING)          p50 {:>9.1?}", rtt);
    println!(
        "uncontended lock+unlock    p50 {:>9.1?}  ({:.2} RTT)",
        percentile(&cycles, 0.5),
        percentile(&cycles, 0.5).as_secs_f64() / rtt.as_secs_f64()
    );
    println!("handoff (release -> next lock() returns)");
    println!(
        "                           p50 {:>9.1?}  ({:.2} RTT)",
        percentile(&handoffs, 0.5),
        percentile(&handoffs, 0.5).as_secs_f64() / rtt.as_secs_f64()
    );
    println!(
        "                           p99 {:>9.1?}",
        percentile(&handoffs, 0.99)
    );
    if inversions > 0 {
        bail!("FIFO order was violated");
    }
    Ok(())
}
