//! Child processes of a test, and the line protocol between a test and
//! its children.

use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

// Child processes: the test binary re-executes itself to run one test (the
// child's entry point, which does nothing without its environment), so a
// test can SIGKILL a real process that holds or waits for a lock.
//
// Protocol: the parent writes commands to the child's stdin, one a line; the
// child writes events to stdout as lines starting with "@@ ". A child exits
// when its stdin closes (so it never outlives its parent) and after at most
// CHILD_MAX_LIFE in any case.

/// The most a child process lives, whatever happens to its parent.
pub const CHILD_MAX_LIFE: Duration = Duration::from_secs(120);

/// One line a child printed after "@@ ", with when the parent read it.
#[derive(Debug, Clone)]
pub struct Event {
    pub child: usize,
    pub at: Instant,
    pub text: String,
}

impl Event {
    /// The words of the event.
    pub fn words(&self) -> Vec<&str> {
        self.text.split_whitespace().collect()
    }
}

struct Proc {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    reader: Option<JoinHandle<()>>,
    reaped: bool,
}

/// Child processes of one test; every one still running is SIGKILLed and
/// reaped on drop, also when the test fails.
pub struct Children {
    procs: Vec<Proc>,
    tx: std::sync::mpsc::Sender<Event>,
    rx: std::sync::mpsc::Receiver<Event>,
    backlog: std::collections::VecDeque<Event>,
}

impl Default for Children {
    fn default() -> Self {
        Self::new()
    }
}

impl Children {
    pub fn new() -> Children {
        let (tx, rx) = std::sync::mpsc::channel();
        Children {
            procs: Vec::new(),
            tx,
            rx,
            backlog: Default::default(),
        }
    }

    /// Starts this test binary running only the test `entry`, with `env`
    /// added; returns the child's index.
    pub fn spawn(&mut self, entry: &str, env: &[(&str, String)]) -> usize {
        use std::io::BufRead;
        let index = self.procs.len();
        let mut child = Command::new(std::env::current_exe().expect("test binary path"))
            .args(["--exact", entry, "--nocapture", "--test-threads=1"])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a child process");
        let stdout = child.stdout.take().expect("child stdout");
        let tx = self.tx.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                // The harness's "test <name> ... " may precede it on the line.
                if let Some((_, text)) = line.split_once("@@ ") {
                    let event = Event {
                        child: index,
                        at: Instant::now(),
                        text: text.trim().to_owned(),
                    };
                    if tx.send(event).is_err() {
                        break;
                    }
                }
            }
        });
        self.procs.push(Proc {
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
            reaped: false,
        });
        index
    }

    pub fn pid(&self, child: usize) -> u32 {
        self.procs[child].child.id()
    }

    /// Writes one command line to the child.
    pub fn send(&mut self, child: usize, command: &str) {
        use std::io::Write;
        let stdin = self.procs[child].stdin.as_mut().expect("child stdin open");
        writeln!(stdin, "{command}")
            .and_then(|_| stdin.flush())
            .unwrap_or_else(|err| panic!("child {child} is gone ({err}): cannot send {command:?}"));
    }

    /// The next event, oldest first, waiting up to `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Option<Event> {
        if let Some(event) = self.backlog.pop_front() {
            return Some(event);
        }
        self.rx.recv_timeout(timeout).ok()
    }

    /// Waits up to `timeout` for the first event `matches` accepts; events
    /// passed over are kept, in order, for later calls. Panics on timeout.
    pub fn expect(
        &mut self,
        timeout: Duration,
        what: &str,
        mut matches: impl FnMut(&Event) -> bool,
    ) -> Event {
        if let Some(i) = self.backlog.iter().position(&mut matches) {
            return self.backlog.remove(i).unwrap();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(event) if matches(&event) => return event,
                Ok(event) => self.backlog.push_back(event),
                Err(_) => panic!(
                    "no event {what} within {timeout:?}; unmatched: {:?}",
                    self.backlog
                ),
            }
        }
    }

    /// Waits for `text` exactly from `child`.
    pub fn expect_text(&mut self, child: usize, text: &str, timeout: Duration) -> Event {
        self.expect(timeout, &format!("{text:?} from child {child}"), |e| {
            e.child == child && e.text == text
        })
    }

    /// Waits for an event of `child` that starts with `prefix`.
    pub fn expect_prefix(&mut self, child: usize, prefix: &str, timeout: Duration) -> Event {
        self.expect(
            timeout,
            &format!("starting {prefix:?} from child {child}"),
            |e| e.child == child && e.text.starts_with(prefix),
        )
    }

    /// Events received so far (without waiting) that `matches` accepts;
    /// they are taken out, the others kept.
    pub fn take_ready(&mut self, mut matches: impl FnMut(&Event) -> bool) -> Vec<Event> {
        while let Ok(event) = self.rx.try_recv() {
            self.backlog.push_back(event);
        }
        let mut taken = Vec::new();
        for event in std::mem::take(&mut self.backlog) {
            if matches(&event) {
                taken.push(event);
            } else {
                self.backlog.push_back(event);
            }
        }
        taken
    }

    /// SIGKILLs the child and reaps it; returns when the signal was sent.
    pub fn kill(&mut self, child: usize) -> Instant {
        let proc = &mut self.procs[child];
        let at = Instant::now();
        let _ = proc.child.kill();
        let status = proc.child.wait().expect("reap the child");
        proc.reaped = true;
        assert!(
            !status.success(),
            "child {child} exited by itself: {status}"
        );
        at
    }

    /// Waits up to `timeout` for the child to exit by itself (after
    /// closing its stdin if `close_stdin`); SIGKILLs it and panics otherwise.
    pub fn wait_exit(
        &mut self,
        child: usize,
        timeout: Duration,
        close_stdin: bool,
    ) -> std::process::ExitStatus {
        let proc = &mut self.procs[child];
        if close_stdin {
            proc.stdin = None;
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = proc.child.try_wait().expect("wait for the child") {
                proc.reaped = true;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = proc.child.kill();
                let _ = proc.child.wait();
                proc.reaped = true;
                panic!("child {child} did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for proc in &mut self.procs {
            proc.stdin = None;
            if !proc.reaped {
                let _ = proc.child.kill();
                let _ = proc.child.wait();
            }
            // The pipe closed with the process: the reader ends at once.
            if let Some(reader) = proc.reader.take() {
                let _ = reader.join();
            }
        }
    }
}

/// In a child: the value of `name`, or None in a normal test run.
pub fn child_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// In a child: a required variable, parsed.
pub fn child_arg<T: std::str::FromStr>(name: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    std::env::var(name)
        .unwrap_or_else(|_| panic!("child: {name} is not set"))
        .parse()
        .unwrap_or_else(|err| panic!("child: {name}: {err:?}"))
}

/// In a child: prints one event line for the parent.
pub fn say(text: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {text}");
    let _ = out.flush();
}

/// In a child: the parent's command lines. The process exits (status 0)
/// when stdin closes, and with status 3 after [`CHILD_MAX_LIFE`].
pub fn child_commands() -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_MAX_LIFE);
        eprintln!("child: lived {CHILD_MAX_LIFE:?}, exiting");
        std::process::exit(3);
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
        std::process::exit(0);
    });
    rx
}

/// Milliseconds since the Unix epoch by this process's wall clock.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_else(|e| -(e.duration().as_millis() as i64))
}
