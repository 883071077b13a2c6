//! What both benches share: whether this run measures, where results go,
//! and percentiles. (A directory module, so cargo does not take it for a
//! bench target of its own.)
#![allow(dead_code)]

use std::time::Duration;

/// True under `cargo bench`; false when `cargo test` runs a bench once as a
/// smoke test (then bounds shrink and nothing is written).
pub fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Writes `target/fairlock-bench/<name>.json` for scripts/bench-report,
/// only when measuring.
pub fn write_json(name: &str, json: &str) {
    if !measuring() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fairlock-bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
}

/// The `p` quantile (0..=1) of sorted, non-empty samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Where a latency bench's clients connect: straight to the server, or
/// through an emulated network link when `FAIRLOCK_BENCH_LINK_DELAY_US` is
/// set (the test support's relay, holding each chunk that many microseconds
/// each way: 500 emulates a ~1 ms round trip). The round-trip floor of the
/// same run goes through the same link.
pub struct Link {
    _relay: Option<fairlock_test_support::Relay>,
    url: String,
}

impl Link {
    pub fn to(server: &fairlock_test_support::RedisServer) -> Link {
        let delay = std::env::var("FAIRLOCK_BENCH_LINK_DELAY_US")
            .ok()
            .map(|us| {
                us.parse::<u64>()
                    .expect("FAIRLOCK_BENCH_LINK_DELAY_US: microseconds")
            });
        match delay {
            Some(us) => {
                let relay = fairlock_test_support::Relay::with_delay(
                    server.port(),
                    Duration::from_micros(us),
                );
                let url = relay.url();
                Link {
                    _relay: Some(relay),
                    url,
                }
            }
            None => Link {
                _relay: None,
                url: server.url(),
            },
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// A plain connection over the link, for the round-trip floor.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .expect("a connection over the link")
    }
}
