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
