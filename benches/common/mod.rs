//! What the benches share: whether this run measures, whether it runs over
//! an emulated link, where results go, medians and percentiles, and the CPU
//! a redis-server and the bench process have used. (A
//! directory module, so cargo does not take it for a bench target of its
//! own.)
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

/// The environment variable that puts the latency benches on an emulated
/// link: the one-way delay in microseconds (500 emulates a ~1 ms round trip).
pub const LINK_DELAY_ENV: &str = "FAIRLOCK_BENCH_LINK_DELAY_US";

/// True under `cargo bench`; false when `cargo test` runs a bench once as a
/// smoke test (then bounds shrink and nothing is written).
pub fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The emulated link's one-way delay, when [`LINK_DELAY_ENV`] asks for one.
pub fn link_delay_us() -> Option<u64> {
    std::env::var(LINK_DELAY_ENV).ok().map(|us| {
        us.parse()
            .unwrap_or_else(|_| panic!("{LINK_DELAY_ENV}: microseconds, not {us:?}"))
    })
}

/// `link_delay_us` as a JSON value (`null` on loopback).
pub fn link_delay_json() -> String {
    link_delay_us().map_or("null".into(), |us| us.to_string())
}

/// Where results go: `target/fairlock-bench/`, or its `link/` under an
/// emulated link, so that one loopback run and one link run both stay for
/// scripts/bench-report.
pub fn results_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fairlock-bench");
    match link_delay_us() {
        Some(_) => dir.join("link"),
        None => dir,
    }
}

/// A criterion group name that a link run does not share with a loopback
/// run (`<name>_link`), so neither overwrites the other's estimates.
pub fn group_name(name: &str) -> String {
    match link_delay_us() {
        Some(_) => format!("{name}_link"),
        None => name.to_owned(),
    }
}

/// Writes `<results_dir>/<name>.json` for scripts/bench-report, only when
/// measuring.
pub fn write_json(name: &str, json: &str) {
    if !measuring() {
        return;
    }
    let dir = results_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
}

/// The `p` quantile (0..=1) of sorted, non-empty samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The median of non-empty samples.
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Microseconds, for the JSON files.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Where a latency bench's clients connect: straight to the server, or
/// through an emulated network link when [`LINK_DELAY_ENV`] is set (the
/// test support's relay, holding each chunk that many microseconds each
/// way). The round-trip floor of the same run goes through the same link.
pub struct Link {
    _relay: Option<fairlock_test_support::Relay>,
    url: String,
}

impl Link {
    pub fn to(server: &fairlock_test_support::RedisServer) -> Link {
        match link_delay_us() {
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
        connect(&self.url, "a connection over the link")
    }
}

/// A plain connection to `url`; panics saying `what` it was for.
pub fn connect(url: &str, what: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|err| panic!("{what}: {err}"))
}

/// The unfair cycle every bench compares with: `SET key token NX PX 30000`,
/// then a compare-and-delete script, on one connection; `token` must be new
/// each cycle, as a real lock's is. Both steps are checked.
pub fn unfair_cycle(conn: &mut redis::Connection, release: &redis::Script, token: u64) {
    let token = token.to_string();
    let taken: Option<String> = redis::cmd("SET")
        .arg("bench:unfair")
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(conn)
        .unwrap();
    assert!(taken.is_some(), "the unfair lock was free");
    let deleted: i64 = release
        .key("bench:unfair")
        .arg(&token)
        .invoke(conn)
        .unwrap();
    assert_eq!(deleted, 1);
}

/// The unfair cycle's release: delete the key if it still holds `token`.
pub const UNFAIR_RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// CPU seconds (user + system) a redis-server has used, from `INFO cpu`:
/// all its threads' (`scope` ""), or its main thread's
/// (`"_main_thread"`, the one that runs commands and scripts).
pub fn server_cpu(conn: &mut redis::Connection, scope: &str) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(conn).unwrap();
    ["used_cpu_user", "used_cpu_sys"]
        .iter()
        .map(|field| {
            let field = format!("{field}{scope}");
            info.lines()
                .find_map(|l| l.strip_prefix(field.as_str())?.strip_prefix(':'))
                .unwrap_or_else(|| panic!("no {field} in INFO cpu"))
                .trim()
                .parse::<f64>()
                .unwrap()
        })
        .sum()
}

/// CPU seconds (user + system) this process has used, from /proc/self/stat
/// (in clock ticks of 1/100 s, the Linux value of `sysconf(_SC_CLK_TCK)`).
pub fn own_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name, which is in parentheses: state is
    // field 3, utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}
