//! Demo: workers on separate clients contend for one lock. Shows that the
//! grant order equals the arrival order, and how long a handoff takes
//! beside what no handoff can go below on this machine, measured in the
//! same run: a round trip, the release script's server time and the
//! wake-up of a parked thread.
//!
//! Uses `$REDIS_URL` when set; otherwise starts a throwaway `redis-server`
//! on a free loopback port and stops it at the end.
//!
//! ```text
//! cargo run --release --example demo [-- WORKERS ROUNDS]
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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

/// The quick end of `samples`, its 10th percentile.
fn quick_end(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    percentile(&samples, 0.1)
}

/// Round trips of a PING: over a bare socket where the URL is plain TCP,
/// so that no client library's own work counts (a floor must not hold more
/// than the trip), else through the redis crate. Sampled between the
/// demo's own calls, so both see the machine as it is at that moment.
enum Pinger {
    Socket(TcpStream),
    Redis(redis::Connection),
}

impl Pinger {
    fn open(url: &str) -> Result<Pinger> {
        let client = redis::Client::open(url)?;
        if let redis::ConnectionAddr::Tcp(host, port) = client.get_connection_info().addr() {
            let socket = TcpStream::connect((host.as_str(), *port))?;
            socket.set_nodelay(true)?;
            return Ok(Pinger::Socket(socket));
        }
        Ok(Pinger::Redis(client.get_connection()?))
    }

    /// One round trip.
    fn ping(&mut self) -> Result<Duration> {
        let t = Instant::now();
        match self {
            Pinger::Socket(socket) => {
                let mut reply = [0u8; 256];
                // An inline command; its one-line reply (PONG, or an error
                // such as NOAUTH: a round trip all the same) ends in \n.
                socket.write_all(b"PING\r\n")?;
                let mut n = 0;
                while n == 0 || reply[n - 1] != b'\n' {
                    match socket.read(&mut reply[n..])? {
                        0 => bail!("the server closed the connection during PING"),
                        read => n = (n + read) % reply.len(),
                    }
                }
            }
            Pinger::Redis(conn) => {
                redis::cmd("PING").query::<String>(conn)?;
            }
        }
        Ok(t.elapsed())
    }
}

/// Script calls and their server time so far (INFO commandstats: FCALL and
/// EVALSHA with their variants), so the difference of two readings is what
/// the scripts in between cost the server, without resetting its counters
/// (other clients' scripts too, on a shared server: a floor takes the
/// quick end of many such differences).
fn script_stats(conn: &mut redis::Connection) -> Result<(u64, Duration)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn)?;
    let (mut calls, mut usec) = (0, 0);
    for line in info.lines() {
        let Some((name, fields)) = line.split_once(':') else {
            continue;
        };
        if ![
            "fcall",
            "fcall_ro",
            "evalsha",
            "evalsha_ro",
            "eval",
            "eval_ro",
        ]
        .iter()
        .any(|c| name == format!("cmdstat_{c}"))
        {
            continue;
        }
        for field in fields.split(',') {
            match field.split_once('=') {
                Some(("calls", n)) => calls += n.parse::<u64>()?,
                Some(("usec", n)) => usec += n.parse::<u64>()?,
                _ => {}
            }
        }
    }
    Ok((calls, Duration::from_micros(usec)))
}

/// Times for a thread parked on a condvar for a millisecond (as a queued
/// waiter is) to run after another thread notifies it: the wake-up
/// every handoff between clients pays once its grant message is read.
fn wake_ups(rounds: usize) -> Vec<Duration> {
    let state = Arc::new((
        parking_lot::Mutex::new(None::<Instant>),
        parking_lot::Condvar::new(),
    ));
    let waiter = {
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let mut samples = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                let mut sent = state.0.lock();
                while sent.is_none() {
                    state.1.wait(&mut sent);
                }
                samples.push(sent.take().unwrap().elapsed());
            }
            samples
        })
    };
    for _ in 0..rounds {
        // The next stamp only once the last one was taken: none is lost.
        while state.0.lock().is_some() {
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_millis(1));
        *state.0.lock() = Some(Instant::now());
        state.1.notify_one();
    }
    waiter.join().expect("wake-up thread panicked")
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(25);
    if workers == 0 || rounds == 0 {
        bail!("WORKERS and ROUNDS are at least 1 (a handoff needs a worker and a round)");
    }

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

    // Round trips, for scale, sampled between the cycles below; `conn`
    // reads the server's counters.
    let mut pinger = Pinger::open(&url)?;
    let mut pings: Vec<Duration> = Vec::new();
    let mut conn = redis::Client::open(url.as_str())?.get_connection()?;

    // Uncontended lock + unlock, and its scripts' server time, cycle by
    // cycle.
    let client = Client::open(&url)?;
    let mutex = client.fair_mutex(&name);
    let (mut cycles, mut cycle_scripts) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        // Warm-up: the first call may load the scripts.
        mutex.lock()?.unlock()?;
    }
    let mut before = script_stats(&mut conn)?.1;
    for _ in 0..200 {
        pings.push(pinger.ping()?);
        let t = Instant::now();
        mutex.lock()?.unlock()?;
        cycles.push(t.elapsed());
        let after = script_stats(&mut conn)?.1;
        cycle_scripts.push(after - before);
        before = after;
    }
    let cycle_scripts = quick_end(cycle_scripts);
    cycles.sort();
    pings.sort();

    // Contended rounds: the coordinator holds the lock, workers arrive one
    // after another (each waits until the previous one is queued), then the
    // coordinator releases and the lock travels down the queue.
    let clients: Vec<Client> = (0..workers)
        .map(|_| Client::open(&url))
        .collect::<Result<_, _>>()?;
    let mut inversions = 0;
    let mut handoffs: Vec<Duration> = Vec::new();
    let mut releases: Vec<Duration> = Vec::new();
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
        // The coordinator's release hands over to the first worker: its
        // server time per script call (a worker that was quick may have
        // run its own release by the second reading: the same script).
        let (calls, usec) = script_stats(&mut conn)?;
        *released_at.lock().unwrap() = Instant::now();
        holder.unlock()?;
        let (calls_after, usec_after) = script_stats(&mut conn)?;
        if calls_after > calls {
            releases.push((usec_after - usec) / (calls_after - calls) as u32);
        }
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
    // What a figure cannot go below here, each step at its quick end (the
    // 10th percentile of its own samples, taken in the same run), so that
    // a floor is never above what it bounds: a cycle's two round trips and
    // its scripts' server time; a handoff's round trip (the release's trip
    // to the server and the grant's back), the release script and the
    // wake-up of the parked waiter.
    let release = quick_end(releases);
    let wake = quick_end(wake_ups(50));
    let (rtt, quick_rtt) = (percentile(&pings, 0.5), percentile(&pings, 0.1));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let in_rtt = |d: Duration| d.as_secs_f64() / rtt.as_secs_f64();
    println!(
        "round trip (PING)          p50 {:>8.1} µs, p10 {:.1} µs",
        us(rtt),
        us(quick_rtt)
    );
    let cycle = percentile(&cycles, 0.5);
    println!(
        "uncontended lock+unlock    p50 {:>8.1} µs = {:.1} RTT; floor here: 2 RTT {:.1} µs + scripts {:.1} µs = {:.1} µs",
        us(cycle),
        in_rtt(cycle),
        us(2 * quick_rtt),
        us(cycle_scripts),
        us(2 * quick_rtt + cycle_scripts)
    );
    let (p50, p99) = (percentile(&handoffs, 0.5), percentile(&handoffs, 0.99));
    println!("handoff (release -> next lock() returns)");
    println!(
        "                           p50 {:>8.1} µs = {:.1} RTT; floor here: RTT {:.1} µs + release script {:.1} µs + wake-up {:.1} µs = {:.1} µs",
        us(p50),
        in_rtt(p50),
        us(quick_rtt),
        us(release),
        us(wake),
        us(quick_rtt + release + wake)
    );
    println!("                           p99 {:>8.1} µs", us(p99));
    if inversions > 0 {
        bail!("FIFO order was violated");
    }
    Ok(())
}
