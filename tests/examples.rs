//! Every example in `examples/` runs against a fresh redis-server and exits
//! 0, printing the line that shows its primitive's point. The examples are
//! built once, by a nested `cargo build --examples` with this test's own
//! features (so nothing else is rebuilt), then run one at a time with
//! `REDIS_URL` set, each within 120 s; the demo beside another client's
//! long scripts, as on a shared Redis, where no floor it prints may be
//! above the figure it bounds.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fairlock_test_support::RedisServer;

/// Each example and a line its output must contain.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "mutex",
        "granted in arrival order: true; tokens increasing: true",
    ),
    ("semaphore", "at most 3 of 8 workers ran at once"),
    ("semaphore", "a 1-permit try_acquire waits its turn"),
    ("rwlock", "after the first read: writer, then late reader"),
    (
        "multi_lock",
        "200 transfers in opposite orders, no deadlock",
    ),
    ("multi_lock", "try_lock got nothing"),
    (
        "election",
        "led in arrival order: node-0, then node-1, then node-2",
    ),
    ("demo", "grant order == arrival order: yes"),
    // Each figure beside its floor, measured in the same run.
    ("demo", " RTT; floor here: 2 RTT "),
    ("demo", " RTT; floor here: RTT "),
    ("demo", " µs + release script "),
    ("demo", " µs + wake-up "),
    #[cfg(feature = "metrics")]
    ("metrics", "fairlock_acquisitions_total"),
];

/// The arguments each example runs with (the demo: 3 workers, 3 rounds).
fn args_of(example: &str) -> &'static [&'static str] {
    match example {
        "demo" => &["3", "3"],
        _ => &[],
    }
}

/// This test's features, passed on so the nested build reuses its artifacts.
fn features() -> Vec<&'static str> {
    let mut on = Vec::new();
    if cfg!(feature = "tls") {
        on.push("tls");
    }
    if cfg!(feature = "metrics") {
        on.push("metrics");
    }
    on
}

/// Builds every example; returns each one's executable by name.
fn build_examples() -> HashMap<String, PathBuf> {
    let mut cargo = Command::new(env!("CARGO"));
    // Without the variables cargo sets for a test run (its package's
    // CARGO_PKG_*, the library path, ...): build scripts that watch them
    // would otherwise see a change and rebuild, here and in the next
    // `cargo test`.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let set_by_cargo = (key.starts_with("CARGO_")
            && !key.starts_with("CARGO_HOME")
            && !key.starts_with("CARGO_TARGET_DIR")
            && !key.starts_with("CARGO_INCREMENTAL")
            && !key.starts_with("CARGO_BUILD_")
            && !key.starts_with("CARGO_NET_")
            && !key.starts_with("CARGO_REGISTRIES_"))
            || ["OUT_DIR", "LD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH"].contains(&key.as_str());
        if set_by_cargo {
            cargo.env_remove(&key);
        }
    }
    let output = cargo
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args([
            "build",
            // The whole workspace, as scripts/test builds it: the same
            // feature set for every dependency, so nothing is rebuilt.
            "--workspace",
            "--examples",
            "--message-format=json-render-diagnostics",
        ])
        .args(["--features", &features().join(",")])
        .stderr(Stdio::inherit())
        .output()
        .expect("running cargo build --examples");
    assert!(output.status.success(), "cargo build --examples failed");
    let mut built = HashMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        // A compiler-artifact message of an example: its name and executable.
        if !line.contains("\"reason\":\"compiler-artifact\"") || !line.contains("\"example\"") {
            continue;
        }
        let field = |key: &str| -> Option<String> {
            let start = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
            let end = start + line[start..].find('"')?;
            Some(line[start..end].replace("\\\\", "\\"))
        };
        if let (Some(name), Some(exe)) = (field("name"), field("executable")) {
            built.insert(name, PathBuf::from(exe));
        }
    }
    built
}

#[test]
fn every_example_runs_and_shows_its_point() {
    let built = build_examples();
    let server = RedisServer::start();
    let mut outputs: HashMap<&str, String> = HashMap::new();
    for &(example, _) in EXAMPLES {
        if outputs.contains_key(example) {
            continue;
        }
        let exe = built
            .get(example)
            .unwrap_or_else(|| panic!("example {example} was not built: {built:?}"));
        // Beside the demo, another client's long scripts (20 ms apart),
        // as on a shared Redis: its floors must stay below its figures.
        let _others = (example == "demo").then(|| OtherScripts::start(&server));
        let started = Instant::now();
        let mut child = Command::new(exe)
            .args(args_of(example))
            .env("REDIS_URL", server.url())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("starting example {example}: {err}"));
        // Read both pipes on threads of their own, so a full pipe never
        // stalls the example.
        let pipe = |mut from: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                from.read_to_string(&mut text).map(|_| text)
            })
        };
        let stdout = pipe(Box::new(child.stdout.take().unwrap()));
        let stderr = pipe(Box::new(child.stderr.take().unwrap()));
        let status = loop {
            if let Some(status) = child.try_wait().expect("waiting for an example") {
                break status;
            }
            if started.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                panic!("example {example} ran over 120 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stdout = stdout.join().unwrap().expect("reading its stdout");
        let stderr = stderr.join().unwrap().expect("reading its stderr");
        println!("example {example}: {status} in {:.2?}", started.elapsed());
        assert!(
            status.success(),
            "example {example} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        outputs.insert(example, stdout);
    }
    for line in outputs["demo"]
        .lines()
        .filter(|l| l.contains("floor here:"))
    {
        let number = |after: &str| -> f64 {
            let rest = line.rsplit(after).next().unwrap().trim_start();
            rest.split(' ').next().unwrap().parse().unwrap()
        };
        assert!(
            number("p50") >= number("= "),
            "the demo's floor is above its figure: {line}"
        );
    }
    // No worker or no round: told, before any server is asked.
    let nothing = Command::new(&built["demo"])
        .args(["0", "3"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&nothing.stderr);
    assert!(
        !nothing.status.success() && said.contains("at least 1") && !said.contains("panicked"),
        "demo 0 3: {said}"
    );
    for &(example, expected) in EXAMPLES {
        let stdout = &outputs[example];
        assert!(
            stdout.contains(expected),
            "example {example} did not print {expected:?}:\n{stdout}"
        );
    }
}

/// Another client running a script of about 50 ms (15 million turns of
/// an empty loop) every 20 ms until dropped.
struct OtherScripts {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl OtherScripts {
    fn start(server: &RedisServer) -> OtherScripts {
        let stop = Arc::new(AtomicBool::new(false));
        let mut conn = server.conn();
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            // (A count, not TIME: a script sees the time it began at on
            // Valkey 8.)
            let busy = redis::Script::new("for i = 1, 15000000 do end");
            while !stopped.load(SeqCst) {
                let () = busy.invoke(&mut conn).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        OtherScripts {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for OtherScripts {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        let _ = self.thread.take().unwrap().join();
    }
}
