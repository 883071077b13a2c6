//! Contended workers with a metrics recorder installed, printing what a
//! service's exporter would see: wait, hold and handoff times, counters and
//! gauges, by primitive.
//!
//! ```sh
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example metrics --features metrics
//! ```
//! (a local redis-server; `REDIS_URL` defaults to redis://127.0.0.1:6379).
//! A service would install its own exporter (Prometheus, StatsD, ...)
//! instead of this in-memory recorder; fairlock reports through the same
//! `metrics` facade either way.

use std::thread;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};

const WORKERS: usize = 6;
const SECTIONS: usize = 20;

fn main() -> anyhow::Result<()> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let client = fairlock::Client::builder(&url)
                .metrics_lock_names(true)
                .build()?;
            Ok(thread::spawn(move || -> fairlock::Result<()> {
                let (mutex, uploads) = (
                    client.fair_mutex("example:report"),
                    client.fair_semaphore("example:uploads", 2),
                );
                for section in 0..SECTIONS {
                    let guard = mutex.lock()?;
                    thread::sleep(Duration::from_millis(2));
                    // A failed release leaves nothing held: log it, go on.
                    if let Err(err) = guard.unlock() {
                        eprintln!("unlock: {err}");
                    }
                    if (worker + section) % 3 == 0 {
                        // Gives up after 5 ms: counted as timed out. A reply
                        // that has not come 50 ms past that is a Connection
                        // error (a stalled server, or a busy machine): skip
                        // this upload, as the timeout does.
                        match uploads.try_acquire_for(Duration::from_millis(5)) {
                            Ok(Some(permit)) => {
                                thread::sleep(Duration::from_millis(8));
                                drop(permit); // releases; an error is logged
                            }
                            Ok(None) => {}
                            Err(err) => eprintln!("upload slot: {err}"),
                        }
                    }
                }
                Ok(())
            }))
        })
        .collect::<fairlock::Result<_>>()?;
    for worker in workers {
        worker.join().expect("a worker panicked")?;
    }

    let mut lines = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels: Vec<String> = key
            .key()
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let what = format!("{}{{{}}}", key.key().name(), labels.join(","));
        let shown = match value {
            DebugValue::Counter(n) => format!("{n}"),
            DebugValue::Gauge(g) => format!("{}", g.0),
            DebugValue::Histogram(values) => summary(values.iter().map(|v| v.0).collect()),
        };
        lines.push(format!("{what:<80} {shown}"));
    }
    lines.sort();
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// Count, median, p99 and max of a histogram's samples (every fairlock
/// histogram is in seconds; shown in ms).
fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize] * 1e3;
    format!(
        "n={} p50={:.2} ms p99={:.2} ms max={:.2} ms",
        values.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    )
}
