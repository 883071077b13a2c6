//! The semaphore's and the reader-writer lock's client-level rows, run in
//! the `latency` group of `benches/lock.rs`, so in the same run as the
//! round-trip floor and the mutex's rows they are read against (by
//! scripts/bench-report). Each drives the public API through the same
//! workloads as the mutex ([`crate::turns`]).
//!
//! Writes, like the mutex's files (and under `link/` on an emulated link):
//! `semaphore_round_trips.json` (the uncontended acquire + release cycle),
//! `semaphore_handoff.json` and `semaphore_handoff_same_client.json` (one
//! permit, two threads taking turns), `semaphore_contended.json` (8 threads
//! on 8 clients with 1 and with 4 permits; the most holders seen inside at
//! once, and FIFO inversions with 1 permit), and the rwlock's alike (see
//! [`rwlock`]).

use std::sync::Mutex;

use criterion::{BenchmarkId, Criterion, Throughput};
use fairlock::{Client, FairRwLock, FairSemaphore, ReadGuard, WriteGuard};
use fairlock_test_support::RedisServer;

use crate::client_over;
use crate::common::{self, link_delay_json, write_json, Link};
use crate::turns::{self, handoffs, median_us_json, timed_each, write_latencies};

/// Permits of the contended rows.
const CONTENDED_PERMITS: [u32; 2] = [1, 4];

/// Threads (each on a client of its own) of the contended rows: the
/// mutex's "8 threads on 8 clients" row is the one they compare with.
const CONTENDED_THREADS: usize = 8;

/// The semaphore's client-level rows; see the module comment.
pub fn semaphore(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    semaphore_round_trips(c, &link);
    semaphore_handoff(c, &link);
    semaphore_contended(c, &link);
}

/// The uncontended acquire + release of one permit (of 1), one thread.
fn semaphore_round_trips(c: &mut Criterion, link: &Link) {
    let client = client_over(link);
    let sem = client.fair_semaphore("bench:sem:uncontended", 1);
    let cycle = Mutex::new(Vec::new());
    let mut group = c.benchmark_group(common::group_name("semaphore_round_trips"));
    group.throughput(Throughput::Elements(1));
    group.bench_function("uncontended_acquire_release", |b| {
        b.iter_custom(|iters| {
            timed_each(iters, &cycle, || sem.acquire().unwrap().unlock().unwrap())
        })
    });
    group.finish();
    if cycle.lock().unwrap().is_empty() {
        return;
    }
    write_json(
        "semaphore_round_trips",
        &format!(
            "{{\"link_delay_us\": {}, \"permits\": 1, \"cycle_us\": {}, \"cycle_samples\": {}}}",
            link_delay_json(),
            median_us_json(&cycle),
            cycle.lock().unwrap().len(),
        ),
    );
}

/// Two threads take turns on a semaphore of one permit: from one's
/// release call to the other's `acquire()` returning; between two clients
/// and between two threads of one client (the release reply names the
/// new holder, so its client wakes it without the pub/sub message).
fn semaphore_handoff(c: &mut Criterion, link: &Link) {
    let (a, b, one) = (client_over(link), client_over(link), client_over(link));
    let mut group = c.benchmark_group(common::group_name("semaphore_handoff"));
    group.throughput(Throughput::Elements(1));
    let name = "bench:sem:handoff";
    let between = [a.fair_semaphore(name, 1), b.fair_semaphore(name, 1)];
    let samples = handoffs(&mut group, "release_to_next_acquire", &between);
    write_latencies("semaphore_handoff", samples);
    let name = "bench:sem:handoff:same_client";
    let within = [one.fair_semaphore(name, 1), one.fair_semaphore(name, 1)];
    let samples = handoffs(&mut group, "same_client_release_to_next_acquire", &within);
    write_latencies("semaphore_handoff_same_client", samples);
    group.finish();
}

/// [`CONTENDED_THREADS`] threads, each on a client of its own, acquire and
/// release one semaphore with an empty critical section as fast as they
/// can, for each of [`CONTENDED_PERMITS`]; with one permit, then the FIFO
/// workload on the same clients.
fn semaphore_contended(c: &mut Criterion, link: &Link) {
    let clients: Vec<Client> = (0..CONTENDED_THREADS).map(|_| client_over(link)).collect();
    let mut group = c.benchmark_group(common::group_name("semaphore_contended"));
    group.throughput(Throughput::Elements(1));
    let mut rows = Vec::new();
    for permits in CONTENDED_PERMITS {
        let name = format!("bench:sem:contended:{permits}");
        let on = |name: &str, i: usize| clients[i].fair_semaphore(name, permits);
        let handles: Vec<FairSemaphore> = (0..clients.len()).map(|i| on(&name, i)).collect();
        let id = BenchmarkId::new(format!("acquisitions_{permits}_permits"), clients.len());
        let limit = permits as usize;
        let Some(fields) = turns::checked_contended_fields(&mut group, id, &handles, limit) else {
            continue;
        };
        // Grant order is only well defined when one permit admits one
        // waiter at a time.
        let fifo = if permits == 1 {
            let fifo_name = format!("{name}:fifo");
            let waiters: Vec<FairSemaphore> =
                (1..clients.len()).map(|i| on(&fifo_name, i)).collect();
            let (inversions, grants) = turns::fifo_inversions(&on(&fifo_name, 0), &waiters, 5);
            format!("\"inversions\": {inversions}, \"grants\": {grants}")
        } else {
            "\"inversions\": null, \"grants\": null".into()
        };
        rows.push(format!(
            "{{\"permits\": {permits}, \"clients\": {}, \"link_delay_us\": {}, {fields}, {fifo}}}",
            clients.len(),
            link_delay_json(),
        ));
    }
    group.finish();
    if !rows.is_empty() {
        write_json("semaphore_contended", &format!("[{}]", rows.join(",\n")));
    }
}

/// A rwlock taken for reading or for writing, as one [`turns::Turns`]
/// type, so that one race can mix readers and writers.
enum RwTurns {
    Read(FairRwLock),
    Write(FairRwLock),
}

/// What an [`RwTurns`] turn holds.
enum RwHeld {
    Read(ReadGuard),
    Write(WriteGuard),
}

impl turns::Turns for RwTurns {
    type Held = RwHeld;
    fn take(&self) -> RwHeld {
        match self {
            RwTurns::Read(rw) => RwHeld::Read(rw.read().unwrap()),
            RwTurns::Write(rw) => RwHeld::Write(rw.write().unwrap()),
        }
    }
    fn give_back(&self, held: RwHeld) {
        match held {
            RwHeld::Read(guard) => guard.unlock().unwrap(),
            RwHeld::Write(guard) => guard.unlock().unwrap(),
        }
    }
    fn queue_len(&self) -> usize {
        match self {
            RwTurns::Read(rw) | RwTurns::Write(rw) => rw.queue_len().unwrap(),
        }
    }
}

/// Readers among the [`CONTENDED_THREADS`] of the rwlock's contended rows:
/// all writers (the mutex's workload), and a read-mostly mix.
const CONTENDED_READERS: [usize; 2] = [0, 6];

/// The reader-writer lock's client-level rows, as the semaphore's:
/// `rwlock_round_trips.json` (the uncontended read and write cycles),
/// `rwlock_handoff.json` and `rwlock_handoff_same_client.json` (writers
/// taking turns), `rwlock_contended.json` ([`CONTENDED_THREADS`] threads on
/// as many clients, [`CONTENDED_READERS`] of them readers).
pub fn rwlock(c: &mut Criterion) {
    let server = RedisServer::start();
    let link = Link::to(&server);
    rwlock_round_trips(c, &link);
    rwlock_handoff(c, &link);
    rwlock_contended(c, &link);
}

/// The uncontended read + release and write + release, one thread.
fn rwlock_round_trips(c: &mut Criterion, link: &Link) {
    let client = client_over(link);
    let rw = client.fair_rwlock("bench:rw:uncontended");
    let (read, write) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    let mut group = c.benchmark_group(common::group_name("rwlock_round_trips"));
    group.throughput(Throughput::Elements(1));
    group.bench_function("uncontended_read_release", |b| {
        b.iter_custom(|iters| timed_each(iters, &read, || rw.read().unwrap().unlock().unwrap()))
    });
    group.bench_function("uncontended_write_release", |b| {
        b.iter_custom(|iters| timed_each(iters, &write, || rw.write().unwrap().unlock().unwrap()))
    });
    group.finish();
    if read.lock().unwrap().is_empty() {
        return;
    }
    write_json(
        "rwlock_round_trips",
        &format!(
            "{{\"link_delay_us\": {}, \"read_cycle_us\": {}, \"read_cycle_samples\": {}, \
             \"write_cycle_us\": {}, \"write_cycle_samples\": {}}}",
            link_delay_json(),
            median_us_json(&read),
            read.lock().unwrap().len(),
            median_us_json(&write),
            write.lock().unwrap().len(),
        ),
    );
}

/// Two writers take turns: from one's release call to the other's
/// `write()` returning; between two clients and between two threads of
/// one client.
fn rwlock_handoff(c: &mut Criterion, link: &Link) {
    let (a, b, one) = (client_over(link), client_over(link), client_over(link));
    let mut group = c.benchmark_group(common::group_name("rwlock_handoff"));
    group.throughput(Throughput::Elements(1));
    let name = "bench:rw:handoff";
    let writer = |client: &Client| RwTurns::Write(client.fair_rwlock(name));
    let samples = handoffs(
        &mut group,
        "release_to_next_write",
        &[writer(&a), writer(&b)],
    );
    write_latencies("rwlock_handoff", samples);
    let name = "bench:rw:handoff:same_client";
    let writer = |client: &Client| RwTurns::Write(client.fair_rwlock(name));
    let within = [writer(&one), writer(&one)];
    let samples = handoffs(&mut group, "same_client_release_to_next_write", &within);
    write_latencies("rwlock_handoff_same_client", samples);
    group.finish();
}

/// [`CONTENDED_THREADS`] threads, each on a client of its own, take and
/// release one rwlock with an empty critical section as fast as they can,
/// the first [`CONTENDED_READERS`] of them reading, the others writing.
fn rwlock_contended(c: &mut Criterion, link: &Link) {
    let clients: Vec<Client> = (0..CONTENDED_THREADS).map(|_| client_over(link)).collect();
    let mut group = c.benchmark_group(common::group_name("rwlock_contended"));
    group.throughput(Throughput::Elements(1));
    let mut rows = Vec::new();
    for readers in CONTENDED_READERS {
        let name = format!("bench:rw:contended:{readers}");
        let handles: Vec<RwTurns> = clients
            .iter()
            .enumerate()
            .map(|(i, client)| {
                let rw = client.fair_rwlock(&name);
                if i < readers {
                    RwTurns::Read(rw)
                } else {
                    RwTurns::Write(rw)
                }
            })
            .collect();
        let id = BenchmarkId::new(format!("acquisitions_{readers}_readers"), clients.len());
        let limit = readers.max(1);
        let Some(fields) = turns::checked_contended_fields(&mut group, id, &handles, limit) else {
            continue;
        };
        rows.push(format!(
            "{{\"readers\": {readers}, \"clients\": {}, \"link_delay_us\": {}, {fields}}}",
            clients.len(),
            link_delay_json(),
        ));
    }
    group.finish();
    if !rows.is_empty() {
        write_json("rwlock_contended", &format!("[{}]", rows.join(",\n")));
    }
}
