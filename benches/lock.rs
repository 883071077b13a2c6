//! fairlock against the round-trip floor, measured in the same run on a
//! private redis-server (started through the test support).
//!
//! `cargo bench --bench lock` runs everything in a few minutes; then
//! `scripts/bench-report` turns the results into BENCHMARKS.md. Figures that
//! criterion cannot hold (percentiles, inversion counts, per-thread counts,
//! server time and memory) are written to `target/fairlock-bench/*.json`.
//!
//! `FAIRLOCK_BENCH_LINK_DELAY_US=500 cargo bench --bench lock` runs only the
//! latency benches (round trips with their floor, both handoffs, contended)
//! on an emulated link of ~1 ms round trip (see `common::Link`), writes
//! their JSON to `target/fairlock-bench/link/` and names their criterion
//! groups `<group>_link`, so a loopback run and a link run both stay.

mod breakdown;
mod breakdown_kinds;
mod common;
mod kinds;
mod turns;

use std::sync::Mutex;
use std::time::Duration;

use common::{link_delay_json, link_delay_us, measuring, write_json, Link};
use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use fairlock::{Client, FairMutex};
use fairlock_test_support::{fake_queue, info_field, thread_count, wait_until, RedisServer};
use turns::{handoffs, median_us_json, timed_each, write_latencies};

/// Criterion's samples per bench; the last this many `iter_custom` calls
/// of a bench are its measured samples (the ones before are warm-up).
const SAMPLES: usize = 30;

/// A client with the library's default timings (lease 30 s, waiters 10 s).
fn client(server: &RedisServer) -> Client {
    Client::builder(&server.url()).build().unwrap()
}

/// The same, connected over `link` (an emulated network when asked).
fn client_over(link: &Link) -> Client {
    Client::builder(link.url()).build().unwrap()
}

/// The floor (a no-op EVALSHA), the unfair cycle (`SET key token NX PX
/// 30000`, then a compare-and-delete EVALSHA: what a barging lock costs in
/// two round trips, on the floor's plain connection) and an uncontended
/// lock + unlock (two round trips as well). Besides criterion's estimates,
/// `round_trips.json` keeps the medians of every single call timed here,
/// which a later run in the other mode (loopback or link) does not
/// overwrite.
fn round_trips(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    let mut conn = link.conn();
    let noop = redis::Script::new("return 1");
    let unfair_release = redis::Script::new(common::UNFAIR_RELEASE);
    let client = client_over(&link);
    let mutex = client.fair_mutex("bench:uncontended");
    let (floor, cycle) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    let unfair = Mutex::new(Vec::new());
    // Each acquisition's token is new, as a real lock's must be.
    let mut unfair_tokens = 0u64;

    let mut group = c.benchmark_group(common::group_name("round_trips"));
    group.throughput(Throughput::Elements(1));
    group.bench_function("floor_evalsha_noop", |b| {
        b.iter_custom(|iters| {
            timed_each(iters, &floor, || {
                noop.invoke::<i64>(&mut conn).unwrap();
            })
        })
    });
    group.bench_function("unfair_set_nx_cycle", |b| {
        b.iter_custom(|iters| {
            timed_each(iters, &unfair, || {
                unfair_tokens += 1;
                common::unfair_cycle(&mut conn, &unfair_release, unfair_tokens);
            })
        })
    });
    group.bench_function("uncontended_lock_unlock", |b| {
        b.iter_custom(|iters| timed_each(iters, &cycle, || mutex.lock().unwrap().unlock().unwrap()))
    });
    group.finish();
    write_json(
        "round_trips",
        &format!(
            "{{\"link_delay_us\": {}, \"floor_us\": {}, \"floor_samples\": {}, \"unfair_cycle_us\": {}, \"unfair_cycle_samples\": {}, \"cycle_us\": {}, \"cycle_samples\": {}}}",
            link_delay_json(),
            median_us_json(&floor),
            floor.lock().unwrap().len(),
            median_us_json(&unfair),
            unfair.lock().unwrap().len(),
            median_us_json(&cycle),
            cycle.lock().unwrap().len(),
        ),
    );
}

/// Two threads take turns on one lock; each sample is the time from the
/// holder's release call to the other thread's `lock()` returning. Between
/// two clients (`handoff.json`), and between two threads of one client
/// (`handoff_same_client.json`: the release reply names the new holder,
/// so that client wakes it without waiting for the pub/sub message).
fn handoff(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    let clients = [client_over(&link), client_over(&link)];
    let one = client_over(&link);
    let mut group = c.benchmark_group(common::group_name("handoff"));
    group.throughput(Throughput::Elements(1));
    let name = "bench:handoff";
    let between = [clients[0].fair_mutex(name), clients[1].fair_mutex(name)];
    let samples = handoffs(&mut group, "release_to_next_lock", &between);
    write_latencies("handoff", samples);
    let name = "bench:handoff:same_client";
    let within = [one.fair_mutex(name), one.fair_mutex(name)];
    let samples = handoffs(&mut group, "same_client_release_to_next_lock", &within);
    write_latencies("handoff_same_client", samples);
    group.finish();
}

/// `threads` threads lock and unlock one lock with an empty critical
/// section, as fast as they can: each on a client of its own (2, 8, 32),
/// and all in one client (8, 32). `contended.json` has, for each, the
/// median acquisitions/s of criterion's samples, each thread's count, the
/// busiest thread's share against the fair one, and FIFO inversions.
fn contended(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    let mut group = c.benchmark_group(common::group_name("contended"));
    group.throughput(Throughput::Elements(1));
    let mut rows = Vec::new();
    for (threads, one_client) in [(2, false), (8, false), (32, false), (8, true), (32, true)] {
        let clients: Vec<Client> = (0..if one_client { 1 } else { threads })
            .map(|_| client_over(&link))
            .collect();
        if let Some(row) = contended_run(&mut group, threads, &clients) {
            rows.push(row);
        }
    }
    group.finish();
    if !rows.is_empty() {
        write_json("contended", &format!("[{}]", rows.join(",\n")));
    }
}

/// One contended bench: `threads` threads over `clients` (thread `i` on
/// `clients[i % len]`), then its FIFO workload on the same clients; its
/// `contended.json` row, or None when the bench was filtered out.
fn contended_run(
    group: &mut BenchmarkGroup<WallTime>,
    threads: usize,
    clients: &[Client],
) -> Option<String> {
    let (id, name) = match clients.len() {
        1 => (
            "acquisitions_one_client",
            format!("bench:contended:one:{threads}"),
        ),
        _ => ("acquisitions", format!("bench:contended:{threads}")),
    };
    let on = |name: &str, i: usize| clients[i % clients.len()].fair_mutex(name);
    let handles: Vec<FairMutex> = (0..threads).map(|i| on(&name, i)).collect();
    let samples = turns::contended_samples(group, BenchmarkId::new(id, threads), &handles);
    if samples.is_empty() {
        return None;
    }
    let measured = &samples[samples.len().saturating_sub(SAMPLES)..];
    let fifo_name = format!("{name}:fifo");
    let waiters: Vec<FairMutex> = (1..threads).map(|i| on(&fifo_name, i)).collect();
    let fifo = turns::fifo_inversions(&on(&fifo_name, 0), &waiters, 5);
    Some(format!(
        "{{\"clients\": {}, \"link_delay_us\": {}, {}, \"inversions\": {}, \"grants\": {}}}",
        clients.len(),
        link_delay_json(),
        turns::contended_fields(measured),
        fifo.0,
        fifo.1,
    ))
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
    let (threads_waiting, conns_waiting, with_connections, memory_per_waiter) =
        std::thread::scope(|s| {
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
                queue_bytes(&mut conn, "bench:footprint") as f64 / waiting as f64,
            );
            holder.unlock().unwrap();
            figures
        });
    write_json(
        "footprint",
        &format!(
            "{{\"pool_size\": 16, \"idle\": {{\"threads\": {idle_threads}, \"connections\": {idle_conns}}}, \
             \"waiting_1000\": {{\"threads_besides_waiters\": {threads_waiting}, \"connections\": {conns_waiting}}}, \
             \"server_bytes_per_waiter\": {memory_per_waiter:.0}, \
             \"server_bytes_per_waiter_with_connections\": {with_connections:.0}}}"
        ),
    );
}

/// Bytes of the queue key of lock `name` (its entries and their deadlines:
/// MEMORY USAGE, every
/// element counted): what its queued waiters cost the server, without the
/// connections a burst of waiting threads also opens.
fn queue_bytes(conn: &mut redis::Connection, name: &str) -> i64 {
    let keys =
        fairlock::__test_support::LockKeys::of_kind("fairlock", name, fairlock::LockKind::Mutex)
            .unwrap();
    keys.all[1..]
        .iter()
        .map(|key| {
            redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query::<Option<i64>>(conn)
                .unwrap()
                .unwrap_or(0)
        })
        .sum()
}

/// Server memory per held lock and per released name: one client locks
/// many distinct names, holds them all, then releases them all
/// (`used_memory` and key count against before). A released name keeps its
/// lock key (the last token) for the fence life, so a service that locks
/// 1 000 000 distinct names an hour keeps 1 000 000 x fence life / 1 h of
/// them at any time; `memory.json` has that too.
fn memory(_: &mut Criterion) {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = client(&server);
    let names = if measuring() { 10_000 } else { 100 };
    client
        .fair_mutex("bench:memory:warm-up")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let mut used = || -> (i64, i64) {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
        (info_field(&mut conn, "memory", "used_memory"), keys)
    };
    let before = used();
    let guards: Vec<_> = (0..names)
        .map(|i| client.fair_mutex(&format!("order:{i:08}")).lock().unwrap())
        .collect();
    let held = used();
    for guard in guards {
        guard.unlock().unwrap();
    }
    let released = used();
    let per = |(bytes, keys): (i64, i64)| {
        (
            (bytes - before.0) as f64 / names as f64,
            (keys - before.1) as f64 / names as f64,
        )
    };
    let ((held_bytes, held_keys), (released_bytes, released_keys)) = (per(held), per(released));
    let fence_life = fairlock::DEFAULT_FENCE_LIFE.as_secs_f64();
    let alive = 1e6 * fence_life / 3600.0;
    write_json(
        "memory",
        &format!(
            "{{\"names\": {names}, \"bytes_per_held_lock\": {held_bytes:.0}, \"keys_per_held_lock\": {held_keys:.2}, \
             \"bytes_per_released_name\": {released_bytes:.0}, \"keys_per_released_name\": {released_keys:.2}, \
             \"fence_life_s\": {fence_life:.0}, \"names_per_hour\": 1000000, \"released_names_alive\": {alive:.0}, \
             \"released_names_mb\": {:.1}}}",
            released_bytes * alive / 1e6
        ),
    );
}

criterion_group! {
    name = latency;
    config = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = round_trips, handoff, contended, kinds::semaphore, kinds::rwlock
}

criterion_group! {
    name = server_side;
    config = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = queue_scaling, footprint, memory, breakdown::run, breakdown_kinds::run
}

/// Criterion's `criterion_main!`, except that a link run skips the
/// server-side benches: no link changes what the server does.
fn main() {
    latency();
    if link_delay_us().is_none() {
        server_side();
    }
    Criterion::default().configure_from_args().final_summary();
}
