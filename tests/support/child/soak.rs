//! The "soak" role of tests/soak.rs: SOAK_THREADS threads of one client
//! lock SOAK_NAMES at random (plain `lock`, `try_lock_for` with a short
//! timeout, `lock_with` a wait cancelled from another thread), hold 0 to
//! [`MAX_HOLD_MS`] ms, and write to the test's protected resource while
//! holding (each write after a check and some work), until the parent says
//! `stop`. Line formats: see
//! `roles::soak`. When a call's first request has queued it in Redis, the
//! library says so on the caller's thread (a trace line, `fairlock: queued
//! ...`): the logger here notes that moment for the call, which the test
//! takes as the latest its call could have reached Redis.
//!
//! Its own stdin handling instead of `child_commands`: a soak may run for
//! longer than that one's two-minute limit.

use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use fairlock::{ErrorKind, FairMutex, FairMutexGuard, Wait, WaitCanceller};

use crate::roles::soak::{
    builder, mono_ns, MAX_HOLD_MS, MAX_LIFE_MS, NAMES, RESOURCE, SEED, THREADS, URL, WORKER,
};
use crate::roles::Rng;
use crate::{child_arg, say};

/// A cancellation to fire at an instant.
type Cancel = (Instant, WaitCanceller);

pub fn soak() {
    // A panicking thread ends the process with a failure status the parent
    // sees, instead of leaving a process with a thread less.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(101);
    }));
    log::set_logger(&QueuedAt).expect("soak child: the one logger");
    log::set_max_level(log::LevelFilter::Trace);
    let max_life = Duration::from_millis(child_arg(MAX_LIFE_MS));
    thread::spawn(move || {
        thread::sleep(max_life);
        eprintln!("soak child: lived {max_life:?}, exiting");
        std::process::exit(3);
    });
    spawn_starvation_watch();
    let threads: u64 = child_arg(THREADS);
    let seed: u64 = child_arg(SEED);
    let worker: u64 = child_arg(WORKER);
    let resource: u16 = child_arg(RESOURCE);
    let names: Vec<String> = child_arg::<String>(NAMES)
        .split(',')
        .map(str::to_owned)
        .collect();
    let client = builder(&child_arg::<String>(URL))
        .build()
        .expect("soak child: client connects");
    let mutexes: Vec<(String, FairMutex)> = names
        .iter()
        .map(|n| (n.clone(), client.fair_mutex(n)))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let cancels = spawn_canceller();
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let ctx = Thread {
                index: i,
                worker,
                mutexes: mutexes.clone(),
                rng: Rng::new(seed.wrapping_mul(1_000_003) ^ (worker << 8) ^ i),
                resource: connect_resource(resource),
                cancels: cancels.clone(),
            };
            let (stop, calls) = (Arc::clone(&stop), Arc::clone(&calls));
            thread::Builder::new()
                .name(format!("soak-{i}"))
                .spawn(move || ctx.run(&stop, &calls))
                .expect("soak child: spawn a thread")
        })
        .collect();
    say(format!("ready {}", std::process::id()));
    // `stop`: finish the calls under way and exit 0. Stdin closed: the
    // parent is gone; exit at once.
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => std::process::exit(0),
        Ok(_) if line.trim() == "stop" => {}
        Ok(_) => panic!("soak child: unknown command {line:?}"),
    }
    stop.store(true, SeqCst);
    for handle in handles {
        handle.join().expect("soak child: a thread panicked");
    }
    drop(mutexes);
    drop(client);
    say(format!("done {}", calls.load(SeqCst)));
}

thread_local! {
    /// When the library said this thread's current call was queued
    /// ([`mono_ns`]), if it did.
    static QUEUED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The logger that notes [`QUEUED`]; every other line is dropped.
struct QueuedAt;

impl log::Log for QueuedAt {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() == log::Level::Trace && metadata.target().starts_with("fairlock")
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata())
            && record.args().to_string().starts_with("fairlock: queued ")
        {
            let now = mono_ns();
            QUEUED.with(|queued| queued.set(Some(queued.get().unwrap_or(now))));
        }
    }

    fn flush(&self) {}
}

/// How much later than asked this process's threads may wake before it
/// says so (`starved <from> <to>`): a worker not scheduled for that long
/// (an overloaded machine) may send its waiters' heartbeats too late for
/// them to stay queued (waiter timeout 1 s, a heartbeat every third of it),
/// which the soak's FIFO check must not count against the library.
const STARVED: Duration = Duration::from_millis(250);

/// A thread that sleeps 20 ms at a time and says when it woke more than
/// [`STARVED`] late.
fn spawn_starvation_watch() {
    let nap = Duration::from_millis(20);
    let late = (nap + STARVED).as_nanos() as u64;
    thread::Builder::new()
        .name("soak-starved".to_owned())
        .spawn(move || loop {
            let before = mono_ns();
            thread::sleep(nap);
            let after = mono_ns();
            if after - before > late {
                say(format!("starved {before} {after}"));
            }
        })
        .expect("soak child: spawn the starvation watch");
}

/// One thread that cancels waits when their moment comes, so a cancelled
/// wait costs no thread of its own.
fn spawn_canceller() -> mpsc::Sender<Cancel> {
    let (tx, rx) = mpsc::channel::<Cancel>();
    thread::Builder::new()
        .name("soak-canceller".to_owned())
        .spawn(move || {
            let mut due: Vec<Cancel> = Vec::new();
            loop {
                let now = Instant::now();
                due.retain(|(at, canceller)| {
                    let fire = *at <= now;
                    if fire {
                        canceller.cancel();
                    }
                    !fire
                });
                let wait = due
                    .iter()
                    .map(|(at, _)| at.saturating_duration_since(now))
                    .min()
                    .unwrap_or(Duration::from_millis(100));
                match rx.recv_timeout(wait) {
                    Ok(cancel) => due.push(cancel),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .expect("soak child: spawn the canceller");
    tx
}

fn connect_resource(port: u16) -> (BufReader<TcpStream>, TcpStream) {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("soak child: reach the resource");
    stream.set_nodelay(true).unwrap();
    (BufReader::new(stream.try_clone().unwrap()), stream)
}

struct Thread {
    index: u64,
    worker: u64,
    mutexes: Vec<(String, FairMutex)>,
    rng: Rng,
    resource: (BufReader<TcpStream>, TcpStream),
    cancels: mpsc::Sender<Cancel>,
}

impl Thread {
    fn run(mut self, stop: &AtomicBool, calls: &AtomicU64) {
        while !stop.load(SeqCst) {
            self.one_call();
            calls.fetch_add(1, SeqCst);
            thread::sleep(self.rng.millis(0, 3));
        }
    }

    /// One acquire call on a random name, and the hold if it got one.
    fn one_call(&mut self) {
        let (name, mutex) =
            self.mutexes[self.rng.below(self.mutexes.len() as u64) as usize].clone();
        let roll = self.rng.below(100);
        QUEUED.with(|queued| queued.set(None));
        let t0 = mono_ns();
        let (mode, result) = if roll < 60 {
            ("lock", mutex.lock().map(Some))
        } else if roll < 85 {
            ("try", mutex.try_lock_for(self.rng.millis(5, 150)))
        } else {
            let canceller = WaitCanceller::new();
            let at = Instant::now() + self.rng.millis(0, 80);
            self.cancels.send((at, canceller.clone())).unwrap();
            (
                "cancel",
                mutex.lock_with(Wait::at_most(Duration::from_secs(10)).cancelled_by(&canceller)),
            )
        };
        let t1 = mono_ns();
        let queued = QUEUED
            .with(Cell::get)
            .map_or("-".to_owned(), |tq| tq.to_string());
        let i = self.index;
        match result {
            Ok(Some(guard)) => {
                let token = guard.fencing_token();
                let lost = self.hold(&name, guard, t0, t1);
                say(format!(
                    "acq {i} {name} {mode} {t0} {t1} ok {token} {} {queued}",
                    u8::from(lost)
                ));
            }
            Ok(None) => {
                let outcome = if mode == "cancel" {
                    "cancelled"
                } else {
                    "timeout"
                };
                say(format!(
                    "acq {i} {name} {mode} {t0} {t1} {outcome} - 0 {queued}"
                ));
            }
            Err(err) => {
                say(format!(
                    "acq {i} {name} {mode} {t0} {t1} {:?} - 0 {queued}",
                    err.kind()
                ));
                // Redis is away (restart, partition): do not spin.
                thread::sleep(self.rng.millis(10, 50));
            }
        }
    }

    /// Holds 0 to MAX_HOLD_MS ms, made of 2 to 4 steps: check that the
    /// guard does not know its lease lost, do the step's work (sleep), then
    /// write what the check allowed. A pause or partition during the work is
    /// what the fencing token is for: by the write, another holder may have
    /// written with a larger token. Releases; returns whether the lease was
    /// lost (found at a check or at the release, or `unlock` said
    /// `LeaseLost`).
    fn hold(&mut self, name: &str, guard: FairMutexGuard, t0: u64, t1: u64) -> bool {
        let token = guard.fencing_token();
        let hold = self.rng.millis(0, MAX_HOLD_MS);
        let steps = 2 + self.rng.below(3) as u32;
        let start = Instant::now();
        let mut lost = false;
        for k in 1..=steps {
            // The time first, then the check: the hold is known to be
            // believed at `t` (a delay in between only makes `t` earlier).
            let t = mono_ns();
            if guard.is_lease_lost() {
                lost = true;
                break;
            }
            let work_done = start + hold * k / steps;
            thread::sleep(work_done.saturating_duration_since(Instant::now()));
            self.write(&format!(
                "W {name} {token} {} {} {t0} {t1} {t}",
                self.worker, self.index
            ));
        }
        lost |= guard.is_lease_lost();
        match guard.unlock() {
            Err(err) if err.kind() == ErrorKind::LeaseLost => true,
            _ => lost,
        }
    }

    /// One write to the resource; it answers `ok` or `stale`.
    fn write(&mut self, line: &str) {
        let (reader, writer) = &mut self.resource;
        writeln!(writer, "{line}").expect("soak child: write to the resource");
        let mut reply = String::new();
        reader
            .read_line(&mut reply)
            .expect("soak child: the resource's reply");
        assert!(
            matches!(reply.trim(), "ok" | "stale"),
            "soak child: resource replied {reply:?}"
        );
    }
}
