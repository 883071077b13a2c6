//! How the latency benches drive a primitive, whatever it is: one trait
//! ([`Turns`]: take, give back, queue length) and the workloads written
//! once over it (single calls timed each, ping-pong handoffs, contended
//! races, the FIFO workload), so the mutex's rows and the semaphore's (and
//! the rwlock's, once it has a client API) measure exactly the same thing.
//! (A directory module, so cargo does not take it for a bench target.)

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId};
use fairlock::{FairMutex, FairMutexGuard, FairSemaphore, SemaphorePermit};
use fairlock_test_support::wait_until;

use crate::common::{link_delay_json, median, percentile, us, write_json};

/// One handle of a primitive a bench thread takes turns on.
pub trait Turns: Sync {
    /// What a taken turn holds (a guard, a permit).
    type Held;
    /// Waits for a turn (`lock`, `acquire`); panics on an error.
    fn take(&self) -> Self::Held;
    /// Ends the turn explicitly (`unlock`); panics on an error.
    fn give_back(&self, held: Self::Held);
    /// Waiters queued now.
    fn queue_len(&self) -> usize;
}

impl Turns for FairMutex {
    type Held = FairMutexGuard;
    fn take(&self) -> FairMutexGuard {
        self.lock().unwrap()
    }
    fn give_back(&self, held: FairMutexGuard) {
        held.unlock().unwrap()
    }
    fn queue_len(&self) -> usize {
        FairMutex::queue_len(self).unwrap()
    }
}

impl Turns for FairSemaphore {
    type Held = SemaphorePermit;
    fn take(&self) -> SemaphorePermit {
        self.acquire().unwrap()
    }
    fn give_back(&self, held: SemaphorePermit) {
        held.unlock().unwrap()
    }
    fn queue_len(&self) -> usize {
        FairSemaphore::queue_len(self).unwrap()
    }
}

/// Runs `call` `iters` times, timing each call into `samples`; returns
/// the total, for `iter_custom`.
pub fn timed_each(iters: u64, samples: &Mutex<Vec<Duration>>, mut call: impl FnMut()) -> Duration {
    let mut mine = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        let start = Instant::now();
        call();
        mine.push(start.elapsed());
    }
    let total = mine.iter().sum();
    samples.lock().unwrap().extend(mine);
    total
}

/// The median of `samples` in µs as JSON, `null` when there are none (the
/// bench was filtered out).
pub fn median_us_json(samples: &Mutex<Vec<Duration>>) -> String {
    let samples = samples.lock().unwrap();
    if samples.is_empty() {
        return "null".into();
    }
    format!("{:.2}", median(samples.iter().map(|d| us(*d)).collect()))
}

/// The criterion bench `id` of a ping-pong between `handles`; returns every
/// handoff's latency.
pub fn handoffs<T: Turns>(
    group: &mut BenchmarkGroup<WallTime>,
    id: &str,
    handles: &[T; 2],
) -> Vec<Duration> {
    let all_samples = Mutex::new(Vec::new());
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let samples = ping_pong(handles, iters);
            let total = samples.iter().sum();
            all_samples.lock().unwrap().extend(samples);
            total
        })
    });
    all_samples.into_inner().unwrap()
}

/// Writes `<name>.json`: count, p50/p90/p99 and every sample in µs
/// (nothing when the bench was filtered out).
pub fn write_latencies(name: &str, mut samples: Vec<Duration>) {
    if samples.is_empty() {
        return;
    }
    samples.sort();
    let histogram: Vec<String> = samples.iter().map(|d| format!("{:.1}", us(*d))).collect();
    write_json(
        name,
        &format!(
            "{{\"link_delay_us\": {}, \"samples\": {}, \"p50_us\": {:.1}, \"p90_us\": {:.1}, \"p99_us\": {:.1}, \"all_us\": [{}]}}",
            link_delay_json(),
            samples.len(),
            us(percentile(&samples, 0.5)),
            us(percentile(&samples, 0.9)),
            us(percentile(&samples, 0.99)),
            histogram.join(",")
        ),
    );
}

/// Runs `handoffs` handoffs between two threads, one on each of `handles`
/// (which must exclude each other: a mutex, a semaphore of one permit);
/// returns each one's latency, from the holder's give-back call to the
/// other thread's take returning.
pub fn ping_pong<T: Turns>(handles: &[T; 2], handoffs: u64) -> Vec<Duration> {
    let released_at: Mutex<Option<Instant>> = Mutex::new(None);
    let remaining = AtomicU64::new(handoffs + 1);
    let samples = Mutex::new(Vec::with_capacity(handoffs as usize));
    std::thread::scope(|s| {
        for handle in handles {
            let (released_at, remaining, samples) = (&released_at, &remaining, &samples);
            s.spawn(move || loop {
                let held = handle.take();
                if let Some(at) = released_at.lock().unwrap().take() {
                    samples.lock().unwrap().push(at.elapsed());
                }
                if remaining.fetch_sub(1, Ordering::SeqCst) <= 1 {
                    remaining.store(0, Ordering::SeqCst);
                    return;
                }
                *released_at.lock().unwrap() = Some(Instant::now());
                handle.give_back(held);
            });
        }
    });
    samples.into_inner().unwrap()
}

/// One contended sample: the time from the start to the last acquisition,
/// each thread's count, and the most threads holding at once.
pub struct Race {
    pub elapsed: Duration,
    pub counts: Vec<u64>,
    pub most_inside: usize,
}

/// One contended sample: one thread per handle (`handles[i]` is thread
/// `i`'s) takes and gives back with an empty critical section until
/// `iters` acquisitions are done in all.
pub fn race<T: Turns>(handles: &[T], iters: u64) -> Race {
    let threads = handles.len();
    let remaining = AtomicU64::new(iters);
    let (inside, most_inside) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let start = Barrier::new(threads + 1);
    let counts: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let started = std::thread::scope(|s| {
        for (handle, count) in handles.iter().zip(&counts) {
            let (remaining, start) = (&remaining, &start);
            let (inside, most_inside) = (&inside, &most_inside);
            s.spawn(move || {
                start.wait();
                loop {
                    let held = handle.take();
                    most_inside
                        .fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    // Count down without wrapping past zero.
                    let counted = remaining
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_ok();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    handle.give_back(held);
                    if !counted {
                        return;
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        start.wait();
        Instant::now()
    });
    Race {
        elapsed: started.elapsed(),
        counts: counts.into_iter().map(AtomicU64::into_inner).collect(),
        most_inside: most_inside.into_inner(),
    }
}

/// The queued-waiters workload on a primitive one holder fills (a mutex, a
/// semaphore of one permit): `watcher` holds; then one thread per handle
/// of `waiters` queues, one after another (each only once the previous is
/// queued), the holder gives back; grant order is compared with arrival
/// order. Repeated `rounds` times; returns (inversions, grants).
pub fn fifo_inversions<T: Turns>(watcher: &T, waiters: &[T], rounds: usize) -> (usize, usize) {
    let (mut inversions, mut grants_total) = (0, 0);
    for _ in 0..rounds {
        let holder = watcher.take();
        let grants = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (i, handle) in waiters.iter().enumerate() {
                let (arrival, grants) = (i + 1, &grants);
                s.spawn(move || {
                    let held = handle.take();
                    grants.lock().unwrap().push(arrival);
                    drop(held);
                });
                assert!(wait_until(Duration::from_secs(10), || {
                    watcher.queue_len() == arrival
                }));
            }
            watcher.give_back(holder);
        });
        let order = grants.into_inner().unwrap();
        inversions += order.windows(2).filter(|w| w[1] < w[0]).count();
        grants_total += order.len();
    }
    (inversions, grants_total)
}

/// One criterion sample of a contended bench.
pub struct ContendedSample {
    pub acquisitions_per_s: f64,
    /// Each thread's acquisitions.
    pub counts: Vec<u64>,
    /// The most threads inside at once.
    pub most_inside: usize,
}

/// The contended criterion bench `id`: one thread per handle races (see
/// [`race`]); returns every sample, warm-up ones first (none when the
/// bench was filtered out).
pub fn contended_samples<T: Turns>(
    group: &mut BenchmarkGroup<WallTime>,
    id: BenchmarkId,
    handles: &[T],
) -> Vec<ContendedSample> {
    let samples = Mutex::new(Vec::new());
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let race = race(handles, iters);
            samples.lock().unwrap().push(ContendedSample {
                acquisitions_per_s: iters as f64 / race.elapsed.as_secs_f64(),
                counts: race.counts,
                most_inside: race.most_inside,
            });
            race.elapsed
        })
    });
    samples.into_inner().unwrap()
}

/// A contended run of `handles` ([`contended_samples`]), checked never to
/// have had more than `limit` threads inside at once: the row's JSON
/// fields ([`contended_fields`] of criterion's last [`crate::SAMPLES`]
/// samples, and `most_inside`), or `None` when criterion measured nothing.
pub fn checked_contended_fields<T: Turns>(
    group: &mut BenchmarkGroup<WallTime>,
    id: BenchmarkId,
    handles: &[T],
    limit: usize,
) -> Option<String> {
    let samples = contended_samples(group, id, handles);
    if samples.is_empty() {
        return None;
    }
    let most_inside = samples.iter().map(|s| s.most_inside).max().unwrap_or(0);
    assert!(
        most_inside <= limit,
        "{most_inside} threads inside at once, at most {limit} allowed"
    );
    let measured = &samples[samples.len().saturating_sub(crate::SAMPLES)..];
    Some(format!(
        "{}, \"most_inside\": {most_inside}",
        contended_fields(measured)
    ))
}

/// The JSON fields (no braces) every contended row has, from its measured
/// samples (criterion's last ones; the ones before are warm-up): threads,
/// the median acquisitions/s, each thread's total, the busiest thread's
/// share and the fair one.
pub fn contended_fields(measured: &[ContendedSample]) -> String {
    let threads = measured[0].counts.len();
    let totals: Vec<u64> = (0..threads)
        .map(|i| measured.iter().map(|s| s.counts[i]).sum())
        .collect();
    let all: u64 = totals.iter().sum();
    let busiest = *totals.iter().max().unwrap() as f64 / all.max(1) as f64;
    let rate = median(measured.iter().map(|s| s.acquisitions_per_s).collect());
    let totals: Vec<String> = totals.iter().map(u64::to_string).collect();
    format!(
        "\"threads\": {threads}, \"acq_per_s\": {rate:.1}, \"samples\": {}, \"per_thread\": [{}], \
         \"busiest_share\": {busiest:.4}, \"fair_share\": {:.4}",
        measured.len(),
        totals.join(", "),
        1.0 / threads as f64,
    )
}
