//! fairlock against the round-trip floor, measured in the same run on a
//! private redis-server (started through the test support).
//!
//! `cargo bench --bench lock` runs everything in a few minutes; then
//! `scripts/bench-report` turns the results into BENCHMARKS.md. Figures that
//! criterion cannot hold (percentiles, inversion counts, thread and
//! connection counts) are written to `target/fairlock-bench/*.json`.
//!
//! `FAIRLOCK_BENCH_LINK_DELAY_US=500 cargo bench --bench lock` puts the
//! round-trip, handoff and contended benches (floor included) on an
//! emulated link of ~1 ms round trip (see `common::Link`).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use common::{measuring, percentile, write_json, Link};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fairlock::Client;
use fairlock_test_support::{fake_queue, info_field, thread_count, wait_until, RedisServer};

/// A client with the library's default timings (lease 30 s, waiters 10 s).
fn client(server: &RedisServer) -> Client {
    Client::builder(&server.url()).build().unwrap()
}

/// The same, connected over `link` (an emulated network when asked).
fn client_over(link: &Link) -> Client {
    Client::builder(link.url()).build().unwrap()
}

fn round_trips(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    let mut conn = link.conn();
    let noop = redis::Script::new("return 1");
    let client = client_over(&link);
    let mutex = client.fair_mutex("bench:uncontended");

    let mut group = c.benchmark_group("round_trips");
    group.throughput(Throughput::Elements(1));
    group.bench_function("floor_evalsha_noop", |b| {
        b.iter(|| noop.invoke::<i64>(&mut conn).unwrap())
    });
    group.bench_function("uncontended_lock_unlock", |b| {
        b.iter(|| mutex.lock().unwrap().unlock().unwrap())
    });
    group.finish();
}

/// Two threads on two clients take turns; each sample is the time from the
/// holder's release call to the other thread's `lock()` returning.
fn handoff(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    let clients = [client_over(&link), client_over(&link)];
    let all_samples = Arc::new(Mutex::new(Vec::new()));
    let mut group = c.benchmark_group("handoff");
    group.throughput(Throughput::Elements(1));
    group.bench_function("release_to_next_lock", |b| {
        b.iter_custom(|iters| {
            let samples = ping_pong(&clients, iters);
            let total = samples.iter().sum();
            all_samples.lock().unwrap().extend(samples);
            total
        })
    });
    group.finish();
    let mut samples = all_samples.lock().unwrap().clone();
    if samples.is_empty() {
        return; // filtered out on the command line
    }
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let histogram: Vec<String> = samples.iter().map(|d| format!("{:.1}", us(*d))).collect();
    write_json(
        "handoff",
        &format!(
            "{{\"samples\": {}, \"p50_us\": {:.1}, \"p90_us\": {:.1}, \"p99_us\": {:.1}, \"all_us\": [{}]}}",
            samples.len(),
            us(percentile(&samples, 0.5)),
            us(percentile(&samples, 0.9)),
            us(percentile(&samples, 0.99)),
            histogram.join(",")
        ),
    );
}

/// Runs `handoffs` handoffs between two threads; returns each one's latency.
fn ping_pong(clients: &[Client; 2], handoffs: u64) -> Vec<Duration> {
    let released_at: Mutex<Option<Instant>> = Mutex::new(None);
    let remaining = AtomicU64::new(handoffs + 1);
    let samples = Mutex::new(Vec::with_capacity(handoffs as usize));
    std::thread::scope(|s| {
        for client in clients {
            let (released_at, remaining, samples) = (&released_at, &remaining, &samples);
            let mutex = client.fair_mutex("bench:handoff");
            s.spawn(move || loop {
                let guard = mutex.lock().unwrap();
                if let Some(at) = released_at.lock().unwrap().take() {
                    samples.lock().unwrap().push(at.elapsed());
                }
                if remaining.fetch_sub(1, Ordering::SeqCst) <= 1 {
                    remaining.store(0, Ordering::SeqCst);
                    return;
                }
                *released_at.lock().unwrap() = Some(Instant::now());
                guard.unlock().unwrap();
            });
        }
    });
    samples.into_inner().unwrap()
}

/// `threads` threads on as many clients lock and unlock one lock with an
/// empty critical section, as fast as they can.
fn contended(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    let mut group = c.benchmark_group("contended");
    group.throughput(Throughput::Elements(1));
    let mut inversions = Vec::new();
    for threads in [2usize, 8, 32] {
        let clients: Vec<Client> = (0..threads).map(|_| client_over(&link)).collect();
        let name = format!("bench:contended:{threads}");
        group.bench_with_input(
            BenchmarkId::new("acquisitions", threads),
            &threads,
            |b, _| {
                b.iter_custom(|iters| {
                    let remaining = AtomicU64::new(iters);
                    let start = Barrier::new(threads + 1);
                    let started = std::thread::scope(|s| {
                        for client in &clients {
                            let (remaining, start, mutex) =
                                (&remaining, &start, client.fair_mutex(&name));
                            s.spawn(move || {
                                start.wait();
                                loop {
                                    let guard = mutex.lock().unwrap();
                                    // Count down without wrapping past zero.
                                    let counted = remaining
                                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                            n.checked_sub(1)
                                        })
                                        .is_ok();
                                    guard.unlock().unwrap();
                                    if !counted {
                                        return;
                                    }
                                }
                            });
                        }
                        start.wait();
                        Instant::now()
                    });
                    started.elapsed()
                })
            },
        );
        inversions.push((
            threads,
            fifo_inversions(&clients, &format!("{name}:fifo"), 5),
        ));
    }
    group.finish();
    let rows: Vec<String> = inversions
        .iter()
        .map(|(t, (inv, grants))| {
            format!("{{\"threads\": {t}, \"inversions\": {inv}, \"grants\": {grants}}}")
        })
        .collect();
    write_json("fifo", &format!("[{}]", rows.join(",")));
}

/// The queued-waiters workload: a holder holds, every client's thread
/// queues one after another (each only once the previous is queued), the
/// holder releases; grant order is compared with arrival order. Repeated
/// `rounds` times; returns (inversions, grants).
fn fifo_inversions(clients: &[Client], name: &str, rounds: usize) -> (usize, usize) {
    let holder_client = &clients[0];
    let watcher = holder_client.fair_mutex(name);
    let (mut inversions, mut grants_total) = (0, 0);
    for _ in 0..rounds {
        let holder = watcher.lock().unwrap();
        let grants = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (arrival, client) in clients.iter().enumerate().skip(1) {
                let (grants, mutex) = (&grants, client.fair_mutex(name));
                s.spawn(move || {
                    let _guard = mutex.lock().unwrap();
                    grants.lock().unwrap().push(arrival);
                });
                assert!(wait_until(Duration::from_secs(10), || {
                    watcher.queue_len().unwrap() == arrival
                }));
            }
            holder.unlock().unwrap();
        });
        let order = grants.into_inner().unwrap();
        inversions += order.windows(2).filter(|w| w[1] < w[0]).count();
        grants_total += order.len();
    }
    (inversions, grants_total)
}

/// Server time (INFO commandstats) per lock cycle while 0 to 10 000
/// waiters are queued; see `ScriptedLock::cycle`.
fn queue_scaling(c: &mut Criterion) {
    let server = RedisServer::start();
    let mut group = c.benchmark_group("queue_scaling_server_time");
    group.throughput(Throughput::Elements(1));
    for waiters in [0u64, 100, 1_000, 10_000] {
        let (lock, mut conn) =
            fake_queue::queue_of(&server, &format!("bench:scaling:{waiters}"), waiters);
        let mut n = 0;
        group.bench_with_input(
            BenchmarkId::new("waiters", waiters),
            &waiters,
            |b, &waiters| {
                b.iter_custom(|iters| {
                    let before = fake_queue::evalsha_usec(&mut conn);
                    for _ in 0..iters {
                        lock.cycle(&mut conn, waiters, n);
                        n += 1;
                    }
                    Duration::from_secs_f64((fake_queue::evalsha_usec(&mut conn) - before) / 1e6)
                })
            },
        );
    }
    group.finish();
}

/// Threads and connections a client costs, idle and with 1 000 threads
/// waiting; server memory per queued waiter.
fn footprint(_: &mut Criterion) {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let (threads_before, conns_before) = (
        thread_count(),
        info_field(&mut conn, "clients", "connected_clients"),
    );
    let client = client(&server);
    assert!(wait_until(Duration::from_secs(5), || thread_count()
        == threads_before + 3));
    let idle_threads = thread_count() - threads_before;
    let idle_conns = info_field(&mut conn, "clients", "connected_clients") - conns_before;
    let mutex = client.fair_mutex("bench:footprint");
    let holder = mutex.lock().unwrap();
    let memory_before = info_field(&mut conn, "memory", "used_memory");
    let waiting = if measuring() { 1000 } else { 20 };
    let (threads_waiting, conns_waiting, memory_per_waiter) = std::thread::scope(|s| {
        for _ in 0..waiting {
            let mutex = mutex.clone();
            s.spawn(move || drop(mutex.lock().unwrap()));
        }
        assert!(wait_until(Duration::from_secs(60), || mutex
            .queue_len()
            .unwrap()
            == waiting));
        let figures = (
            thread_count() - threads_before - waiting,
            info_field(&mut conn, "clients", "connected_clients") - conns_before,
            (info_field(&mut conn, "memory", "used_memory") - memory_before) as f64
                / waiting as f64,
        );
        holder.unlock().unwrap();
        figures
    });
    write_json(
        "footprint",
        &format!(
            "{{\"pool_size\": 16, \"idle\": {{\"threads\": {idle_threads}, \"connections\": {idle_conns}}}, \
             \"waiting_1000\": {{\"threads_besides_waiters\": {threads_waiting}, \"connections\": {conns_waiting}}}, \
             \"server_bytes_per_waiter\": {memory_per_waiter:.0}}}"
        ),
    );
}

/// Where a handoff's time goes: the server's own time for each script path
/// (EVALSHA's usec in INFO commandstats over many calls of one kind; a path
/// that cannot run alone is a whole cycle less the part that can), and one
/// thread wake-up through a parking_lot condvar on this machine.
fn breakdown(_: &mut Criterion) {
    let server = RedisServer::start();
    let rounds: u64 = if measuring() { 3000 } else { 20 };
    let usec = fake_queue::evalsha_usec;
    let per_call = |conn: &mut redis::Connection,
                    run: &mut dyn FnMut(&mut redis::Connection, u64)| {
        let before = usec(conn);
        for n in 0..rounds {
            run(conn, n);
        }
        (usec(conn) - before) / rounds as f64
    };

    let (free, mut conn) = fake_queue::queue_of(&server, "bench:breakdown:free", 0);
    let noop = redis::Script::new("return 1");
    let noop_us = per_call(&mut conn, &mut |c, _| {
        let _: i64 = noop.invoke(c).unwrap();
    });
    let cycle_free = per_call(&mut conn, &mut |c, n| free.cycle(c, 0, n));
    let lock_key = free.keys[0].clone();
    let take = per_call(&mut conn, &mut |c, n| {
        let _: () = redis::cmd("DEL").arg(&lock_key).query(c).unwrap();
        free.acquire(c, &format!("t{n}:1"), n);
    });

    let (queued, mut qconn) = fake_queue::queue_of(&server, "bench:breakdown:queued", 100);
    let cycle_queued = per_call(&mut qconn, &mut |c, n| queued.cycle(c, 100, 10_000 + n));
    let enqueue = per_call(&mut qconn, &mut |c, n| {
        queued.acquire(c, &format!("e{n}:1"), 20_000 + n);
    });

    let wake = condvar_wake(rounds as usize);
    write_json(
        "breakdown",
        &format!(
            "{{\"take_us\": {:.1}, \"release_free_us\": {:.1}, \"release_handoff_us\": {:.1}, \
             \"enqueue_us\": {:.1}, \"condvar_wake_p50_us\": {:.1}, \"noop_us\": {noop_us:.1}, \"calls_each\": {rounds}}}",
            take,
            cycle_free - take,
            cycle_queued - enqueue,
            enqueue,
            wake.as_secs_f64() * 1e6,
        ),
    );
}

/// Median time for a parked thread to run after a condvar notify.
fn condvar_wake(rounds: usize) -> Duration {
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
            samples.sort();
            samples[samples.len() / 2]
        })
    };
    for _ in 0..rounds {
        // Hand over the next stamp only once the last one was taken, so no
        // wake-up is lost and the waiter gets exactly `rounds` of them.
        while state.0.lock().is_some() {
            std::thread::sleep(Duration::from_micros(50));
        }
        std::thread::sleep(Duration::from_micros(200));
        *state.0.lock() = Some(Instant::now());
        state.1.notify_one();
    }
    waiter.join().unwrap()
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = round_trips, handoff, contended, queue_scaling, footprint, breakdown
}
criterion_main!(benches);
