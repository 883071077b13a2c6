//! `fairlock run`: wait for our turn, run the command holding the lock
//! (the mutex, a permit of a semaphore, or a read or write hold of a
//! reader-writer lock), release it however the command ends.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use clap::{ArgGroup, Args};
use fairlock::{AnyGuard, LeaseEnd, LockKind, Revocation, Wait, MAX_LEASE, MAX_PERMITS, MIN_LEASE};

use super::lock_name;
use crate::deathwatch::DeathWatch;
use crate::duration::{self, human};
use crate::kinds::{Lease, Lock, Request};
use crate::signals::{self, Control, SpawnError};
use crate::{exit, progress, Connection, Failure, EXIT_CODES};

/// How long a queued entry of a silent client keeps its place; set
/// explicitly so the messages can say it.
pub const WAITER_TIMEOUT: Duration = Duration::from_secs(5);
/// Between SIGTERM and SIGKILL with `--kill-on-loss`.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How often the main thread looks at the command while it runs, at the
/// least: its end is noticed at once (SIGCHLD), and so is a lost lock (the
/// guard's lease signal wakes it).
const CHECK_PERIOD: Duration = Duration::from_millis(100);

/// Wait for our turn on NAME, run COMMAND holding the lock, release it.
///
/// The lock is NAME's mutex; or with --semaphore N one of the N permits
/// of the semaphore NAME (at most N commands at once, fleet-wide); or with
/// --read or --write the reader-writer lock NAME, to read (shared) or to
/// write (alone).
/// Waits in arrival order, forever unless --wait or -n. The lock is held
/// while COMMAND runs (a watchdog renews its --lease, unless --fixed-lease) and
/// released whenever COMMAND ends. COMMAND's exit status is fairlock's.
/// COMMAND gets FAIRLOCK_TOKEN (the fencing token), FAIRLOCK_NAME and
/// FAIRLOCK_CLIENT_ID in its environment. SIGINT, SIGTERM, SIGHUP and SIGQUIT are
/// passed on to COMMAND (unless they came from the terminal, which
/// already sent them to COMMAND too); while still waiting they end the
/// wait with 128+N and nothing is run; a second one while the lock is
/// released exits at once. When someone asks the holders of
/// NAME to let go (`fairlock revoke`), COMMAND gets SIGTERM (--on-revoke).
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
#[command(group(ArgGroup::new("kind").args(["mutex", "semaphore", "read", "write"])))]
pub struct RunArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Give up after waiting this long (500ms, 10s, 5m, 2h); 0s means do not
    /// wait. Waits forever when not given.
    #[arg(short, long, value_name = "DURATION", value_parser = duration::parse)]
    pub wait: Option<Duration>,

    /// Do not wait at all: the same as --wait 0s (flock's -n).
    #[arg(short, long, conflicts_with = "wait")]
    pub nonblock: bool,

    /// Take the mutex NAME (the default).
    #[arg(long)]
    pub mutex: bool,

    /// Take one of the N permits of the semaphore NAME instead of the
    /// mutex: at most N commands hold NAME at once, in arrival order. Every
    /// user of NAME must give the same N (exit 78 otherwise), unless
    /// `fairlock permits` set the number in force.
    #[arg(long, value_name = "N", value_parser = permits, alias = "permits")]
    pub semaphore: Option<u32>,

    /// Take the reader-writer lock NAME to read (flock's -s): shared with
    /// the other --read commands, never with a --write one. In arrival
    /// order: a reader behind a queued writer waits for it.
    #[arg(long, short_alias = 's', alias = "shared")]
    pub read: bool,

    /// Take the reader-writer lock NAME to write (flock's -x): alone, after
    /// the readers ahead of it. Not the mutex NAME, which is another lock.
    #[arg(long, short_alias = 'x', alias = "exclusive")]
    pub write: bool,

    /// The lease the watchdog renews while COMMAND runs (default 30s): if
    /// fairlock is killed or cut off from Redis, the lock frees this long
    /// after its last renewal (as etcdctl lock --ttl). From 30ms to 8760h
    /// (365 days). Not with --fixed-lease, which nobody renews.
    #[arg(long, value_name = "DURATION", value_parser = lease)]
    pub lease: Option<Duration>,

    /// Hold the lock (or the permit, or the read or write hold) for at
    /// most this long, with no watchdog renewing it: a killed holder's
    /// hold frees by then. If COMMAND outlives it, that is a lost lock
    /// (exit 70). From 30ms to 8760h.
    #[arg(long, value_name = "DURATION", value_parser = lease, conflicts_with = "lease")]
    pub fixed_lease: Option<Duration>,

    /// Hold the lock for at most this long: then the watchdog stops
    /// renewing it, COMMAND is stopped (SIGTERM, then SIGKILL 5 s later)
    /// and fairlock exits 70; the lock passes on by then (within a third
    /// of the shorter of the lease and 5 s) even if this
    /// machine hangs. Unlike --fixed-lease, the lease is renewed until
    /// then, so a killed holder's lock still frees within one --lease. Not
    /// with --fixed-lease, which is its own maximum.
    #[arg(long, value_name = "DURATION", value_parser = lease, conflicts_with = "fixed_lease")]
    pub max_hold: Option<Duration>,

    /// Exit code when --wait or -n runs out (flock's -E).
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = exit::TIMED_OUT)]
    pub conflict_exit_code: u8,

    /// Kill COMMAND (SIGTERM, then SIGKILL 5 s later) as soon as the lock is
    /// found lost, instead of letting it finish.
    #[arg(long)]
    pub kill_on_loss: bool,

    /// When someone asks the holders of NAME to let go (`fairlock revoke`
    /// NAME, with its kind option), send COMMAND this signal: TERM, INT,
    /// HUP, USR1, USR2, QUIT, KILL or a number; or `none` to let it run.
    /// The lock is not taken away: fairlock waits for COMMAND, releases,
    /// and exits with COMMAND's status.
    #[arg(long, value_name = "SIGNAL", default_value = "TERM", value_parser = on_revoke)]
    pub on_revoke: OnRevoke,

    /// No live waiting line and no notice when --wait runs out.
    #[arg(short, long)]
    pub quiet: bool,

    /// The command to run and its arguments (after `--`, or after NAME and
    /// the options; an unknown option before it is a usage error).
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// The lease its options ask for (`elect`'s too).
    pub fn lease(&self) -> Lease {
        match (self.fixed_lease, self.max_hold) {
            (Some(lease), _) => Lease::Fixed(lease),
            (None, Some(max_hold)) => Lease::MaxHold(max_hold),
            (None, None) => Lease::Renewed,
        }
    }
}

/// Parses `--lease`, `--fixed-lease` and `--max-hold`: a duration within
/// the library's MIN_LEASE..=MAX_LEASE.
pub fn lease(text: &str) -> Result<Duration, String> {
    let lease = duration::parse(text)?;
    if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Err(format!(
            "must be from {} to {}h (365 days), got {}",
            human(MIN_LEASE),
            MAX_LEASE.as_secs() / 3600,
            human(lease)
        ));
    }
    Ok(lease)
}

/// The signal `--on-revoke` sends, if any.
#[derive(Debug, Clone, Copy)]
pub struct OnRevoke(Option<i32>);

/// Parses `--on-revoke` (also `fairlock elect`'s).
pub fn on_revoke(text: &str) -> Result<OnRevoke, String> {
    signals::parse(text).map(OnRevoke)
}

/// A semaphore's number of permits (also `permits`' N), a usage error
/// outside 1..=MAX_PERMITS.
pub fn permits(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (1..=MAX_PERMITS).contains(&n) => Ok(n),
        _ => Err(format!(
            "the permits must be a whole number from 1 to {MAX_PERMITS}"
        )),
    }
}

/// The lock the arguments ask for.
fn lock_of(client: &fairlock::Client, args: &RunArgs) -> Lock {
    let request = if let Some(permits) = args.semaphore {
        Request::Permit { of: permits }
    } else if args.read {
        Request::Read
    } else if args.write {
        Request::Write
    } else {
        Request::Mutex
    };
    Lock::new(client, &args.name, request, args.lease())
}

/// Runs the command holding the lock; its exit code, or fairlock's own.
/// `verbose`: the global -v.
pub fn exec(connection: &Connection, args: RunArgs, verbose: bool) -> Result<i32, Failure> {
    run_holding(connection, args, verbose, lock_of)
}

/// Waits for the lock `lock_of` makes of the arguments, runs the command
/// holding it, stops it when the lock is lost if asked, releases it
/// however the command ends; its exit code, or fairlock's own: what
/// `run` and `elect` share. `verbose` (the global -v) says when the hold
/// began and ended.
pub fn run_holding(
    connection: &Connection,
    mut args: RunArgs,
    verbose: bool,
    lock_of: impl FnOnce(&fairlock::Client, &RunArgs) -> Lock,
) -> Result<i32, Failure> {
    if verbose && args.quiet {
        // A global argument is no subcommand argument's conflict in clap.
        let usage = anyhow!("the argument '--quiet' cannot be used with '--verbose'");
        return Err(Failure::new(exit::USAGE, usage));
    }
    if args.nonblock {
        args.wait = Some(Duration::ZERO);
    }
    let control = Control::install().map_err(|err| {
        Failure::new(
            exit::UNAVAILABLE,
            anyhow!(err).context("cannot handle signals"),
        )
    })?;
    // A fixed lease nobody renews still sets the heartbeats' pace while
    // queued: a handoff is counted from the last one, which must be recent.
    let client = connection.connect_leased(args.lease.or(args.fixed_lease))?;
    let lock = lock_of(&client, &args);
    let mut held = false;
    let result = wait_and_run(&control, &client, &lock, args, verbose, &mut held);
    // Once it held the lock, a release that failed is given back by the
    // client's drop, if Redis answers by then: waited for, as the warning
    // says. A wait that ended without it (given up, interrupted, failed)
    // exits at once, as asked: what it left queued is a waiter that
    // sends no heartbeat, whose entry Redis drops within WAITER_TIMEOUT;
    // and so does one whose release Redis confirmed.
    let nothing_left = !held || control.has_released();
    close(client, lock, nothing_left.then_some(CLOSE_GRACE));
    result
}

/// How long fairlock's exit waits for its client to stop after a wait
/// that ended without the lock, or a release Redis confirmed: its
/// watchdog's last round waits up to a command timeout for a reply when
/// Redis does not answer (a stalled link); the exit does not.
const CLOSE_GRACE: Duration = Duration::from_millis(300);

/// Drops `client` (its last handles, `lock`'s with it), waiting for its
/// threads to stop for `grace` at most (`None`: for as long as that takes,
/// about a command timeout at most).
fn close(client: fairlock::Client, lock: Lock, grace: Option<Duration>) {
    let Some(grace) = grace else {
        return drop((lock, client));
    };
    let (stopped, stop) = std::sync::mpsc::channel();
    let closing = std::thread::Builder::new()
        .name("fairlock-close".into())
        .spawn(move || {
            drop((lock, client));
            let _ = stopped.send(());
        });
    if closing.is_ok() {
        let _ = stop.recv_timeout(grace);
    }
}

/// [`run_holding`] once connected, with its `client` and `lock`; `held`
/// is set once the lock was had.
fn wait_and_run(
    control: &Arc<Control>,
    client: &fairlock::Client,
    lock: &Lock,
    args: RunArgs,
    verbose: bool,
    held: &mut bool,
) -> Result<i32, Failure> {
    // Wait for our turn, on this thread: the guard stays on the thread that took it.
    let started = Instant::now();
    control.waiting();
    let line = (!args.quiet && std::io::stderr().is_terminal()).then(|| {
        progress::start(progress::Watch {
            lock: lock.clone(),
            client_id: client.id().to_owned(),
            started,
            patience: args.wait,
        })
    });
    let wait = match args.wait {
        Some(patience) => Wait::at_most(patience),
        None => Wait::forever(),
    };
    let outcome = lock.wait(wait.cancelled_by(control.canceller()));
    if let Some(line) = line {
        line.stop();
    }
    let waited = started.elapsed();
    // Named after the call: a semaphore's permits in force are what its
    // reply found.
    let name = lock.describe();
    let interrupted = control.acquired();
    *held = matches!(outcome, Ok(Some(_)));
    let guard = match (outcome, interrupted) {
        (Ok(Some(guard)), Some(signal)) => {
            let released = give_back(control, guard, &name, lock);
            eprintln!(
                "fairlock: interrupted by {} while waiting for {name}; {}nothing was run",
                signals::name(signal),
                // "released it", "resigned": the words of -v.
                match (released, lock.kind()) {
                    (false, _) => "",
                    (true, LockKind::Election) => "resigned, ",
                    (true, _) => "released it, ",
                }
            );
            return Ok(exit::SIGNAL_BASE + signal);
        }
        // Its leave of the queue may not have reached Redis: one whose
        // pooled connection came too late on a busy machine sends nothing
        // (the library's `Ok(None)` then says only that nothing was had),
        // and one that failed (Redis unreachable) is an error. What it
        // left is a waiter that sends no heartbeat, which Redis drops
        // within the waiter timeout (a grant of that moment with it, whose
        // lease its liveness bounds).
        (Ok(None), Some(signal)) => {
            eprintln!(
                "fairlock: interrupted by {} while waiting for {name}; gave up its place in the \
                 queue (if Redis did not hear of it, it drops the entry within {}), nothing was run",
                signals::name(signal),
                human(WAITER_TIMEOUT)
            );
            return Ok(exit::SIGNAL_BASE + signal);
        }
        (Err(err), Some(signal)) => {
            eprintln!(
                "fairlock: interrupted by {} while waiting for {name}; could not leave the queue \
                 ({err}): Redis drops its entry within {} (the waiter timeout); nothing was run",
                signals::name(signal),
                human(WAITER_TIMEOUT)
            );
            return Ok(exit::SIGNAL_BASE + signal);
        }
        (Ok(Some(guard)), None) => guard,
        (Ok(None), None) => {
            if !args.quiet {
                let why = match args.wait {
                    Some(Duration::ZERO) => format!("{name} is busy"),
                    _ => format!("gave up waiting for {name} after {}", human(waited)),
                };
                eprintln!("fairlock: {why}; nothing was run");
            }
            return Ok(i32::from(args.conflict_exit_code));
        }
        (Err(err), None) => {
            return Err(Failure::redis(err, format!("waiting for {name} failed")));
        }
    };
    let verbs = lock.verbs();
    if verbose {
        eprintln!(
            "fairlock: {} {name} after {} ({} {}, client {})",
            verbs.began,
            human(waited),
            verbs.token,
            guard.fencing_token(),
            client.id()
        );
    }

    // Run the command with the lock held.
    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("FAIRLOCK_TOKEN", guard.fencing_token().to_string())
        .env("FAIRLOCK_NAME", lock.name())
        .env("FAIRLOCK_CLIENT_ID", client.id());
    if let Some(value) = lock.value() {
        command.env("FAIRLOCK_VALUE", value);
    }
    let deathwatch = DeathWatch::arm(&mut command).map_err(|err| {
        Failure::new(
            exit::CANNOT_EXECUTE,
            anyhow!(err).context("cannot watch for fairlock's own death"),
        )
    });
    let deathwatch = match deathwatch {
        Ok(deathwatch) => deathwatch,
        Err(failure) => {
            give_back(control, guard, &name, lock);
            return Err(failure);
        }
    };
    let held_since = Instant::now();
    let mut child = match control.spawn(&mut command) {
        Ok(child) => child,
        Err(SpawnError::Interrupted(signal)) => {
            deathwatch.done();
            let released = give_back(control, guard, &name, lock);
            eprintln!(
                "fairlock: interrupted by {} before the command started; {}nothing was run",
                signals::name(signal),
                if released {
                    format!("{} {name}, ", lock.verbs().ended)
                } else {
                    String::new()
                }
            );
            return Ok(exit::SIGNAL_BASE + signal);
        }
        Err(SpawnError::Io(err)) => {
            deathwatch.done();
            give_back(control, guard, &name, lock);
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
            let program = args.command[0].to_string_lossy().into_owned();
            return Err(Failure::new(
                code,
                anyhow!(err).context(format!("cannot run {program:?}")),
            ));
        }
    };

    // The lease signal wakes the main thread the moment the lock is lost:
    // at the guard's own end of the lease, before anyone else can take it.
    // Its end is the first that came (a maximum hold even when the lease
    // it capped has run out too by the time the main thread looks).
    let signal = guard.lease_signal();
    let watcher = Arc::clone(control);
    let mut ended = Some(std::thread::spawn(move || {
        let end = signal.wait();
        if matches!(end, LeaseEnd::Lost | LeaseEnd::MaxHold) {
            watcher.lease_lost();
        }
        end
    }));
    // The revocation signal, likewise, when someone asks us to let go.
    let revocation = guard.revocation_signal();
    let asked = Arc::clone(control);
    std::thread::spawn(move || {
        if revocation.wait() == Revocation::Requested {
            asked.revoked();
        }
    });
    let mut lost = false;
    let mut gave_up = false;
    let mut kill_at = None;
    let status = loop {
        match control.try_wait(&mut child) {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(err) => {
                eprintln!("fairlock: warning: cannot poll the command ({err}); waiting for it");
                match child.wait() {
                    Ok(status) => break status,
                    Err(err) => {
                        return Err(Failure::new(
                            exit::UNAVAILABLE,
                            anyhow!(err).context("cannot wait for the command"),
                        ))
                    }
                }
            }
        }
        let told = control.take_lease_lost();
        if !lost && (told || guard.is_lease_lost()) {
            lost = true;
            let end = ended.take().and_then(|watcher| watcher.join().ok());
            let over = end == Some(LeaseEnd::MaxHold)
                || args.max_hold.is_some_and(|max| held_since.elapsed() >= max);
            gave_up = over;
            let stop = args.kill_on_loss || over;
            if stop {
                // Before the message: its read of the new holder may wait
                // out the stall that lost the lock.
                control.kill_child(libc::SIGTERM);
                kill_at = Some(Instant::now() + KILL_GRACE);
            }
            eprintln!(
                "fairlock: {} {} on {name} while the command runs: {}; {}",
                if over { "gave up" } else { "lost" },
                lock.what(),
                if over {
                    format!(
                        "it reached its --max-hold of {}",
                        human(args.max_hold.unwrap_or_default())
                    )
                } else {
                    why_lost(lock, &args, held_since.elapsed())
                },
                if stop {
                    "stopping the command"
                } else {
                    "letting it finish"
                }
            );
        }
        if control.take_revocation() {
            let OnRevoke(signal) = args.on_revoke;
            eprintln!(
                "fairlock: asked to let go of {name} (fairlock revoke); {}",
                signal.map_or_else(
                    || "letting the command finish".to_owned(),
                    |signal| format!("sending {} to the command", signals::name(signal))
                )
            );
            if let Some(signal) = signal {
                control.kill_child(signal);
            }
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            control.kill_child(libc::SIGKILL);
            kill_at = None;
        }
        control.sleep(CHECK_PERIOD);
    };
    deathwatch.done();
    let code = exit_code(status);
    let held = held_since.elapsed();

    // Release, whatever the command did. A command that ended as its
    // maximum hold did leaves a hold given up, not one lost: the lease
    // signal, which the release ends, says which came first.
    let released = release(control, guard, &name, lost, lock);
    let found_lost = released == Released::Lost;
    if found_lost && !lost {
        gave_up = ended.take().and_then(|watcher| watcher.join().ok()) == Some(LeaseEnd::MaxHold);
    }
    lost |= found_lost;
    if lost {
        eprintln!(
            "fairlock: the command {}; exiting with {} because {} {}",
            describe(status),
            exit::LEASE_LOST,
            lock.what(),
            if gave_up {
                "reached its --max-hold"
            } else {
                "was lost"
            }
        );
        return Ok(exit::LEASE_LOST);
    }
    if verbose && released == Released::Yes {
        eprintln!(
            "fairlock: {} {name} after {} it {}; the command {}",
            verbs.ended,
            verbs.holding,
            human(held),
            describe(status)
        );
    } else if verbose {
        // Not released: the warning said what becomes of it.
        eprintln!(
            "fairlock: {} {name} for {} (not {}: see the warning); the command {}",
            verbs.holding,
            human(held),
            verbs.ended,
            describe(status)
        );
    }
    Ok(code)
}

/// What a release after the command came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Released {
    Yes,
    /// It found the hold lost (and said so).
    Lost,
    /// It failed otherwise (and warned).
    Failed,
}

/// Releases a lock held for a command that was not run; true if it was
/// released. A failure is said as `release` says it, a lost hold in the
/// library's words alone (no command ran while it was lost).
fn give_back(control: &Control, guard: AnyGuard, name: &str, lock: &Lock) -> bool {
    release(control, guard, name, true, lock) == Released::Yes
}

/// Releases the lock after the command; a lost hold or a failure is said
/// (`known_lost`: the loss was said already, or no command ran, so the
/// library's words alone).
fn release(
    control: &Control,
    guard: AnyGuard,
    name: &str,
    known_lost: bool,
    lock: &Lock,
) -> Released {
    // A second signal ends a release Redis does not answer (a stall).
    let verbs = lock.verbs();
    control.releasing(format!(
        "while trying to {} {name}; exiting without it: {}",
        verbs.end,
        verbs.late()
    ));
    match guard.unlock() {
        Ok(()) => {
            control.released();
            Released::Yes
        }
        // The library's words say why, where the loss's first line guessed.
        Err(err) if err.is_lease_lost() => {
            match known_lost {
                true => eprintln!("fairlock: {err}"),
                false => eprintln!(
                    "fairlock: lost {} on {name} while the command ran: {err}{}",
                    lock.what(),
                    held_now(lock)
                ),
            }
            Released::Lost
        }
        // The client gave the hold to its watchdog, whose last round, as
        // the client is dropped (`close`), gives it back if Redis answers
        // within about a command timeout; a release that reached Redis
        // late frees it too.
        Err(err) => {
            eprintln!(
                "fairlock: warning: cannot {} {name} ({err}); fairlock gives it back as it \
                 exits if Redis answers within {}, else {}",
                verbs.end,
                human(crate::COMMAND_TIMEOUT),
                verbs.late()
            );
            Released::Failed
        }
    }
}

/// Why the lease is gone, as far as can be told, `held` after the grant.
fn why_lost(lock: &Lock, args: &RunArgs, held: Duration) -> String {
    let why = match args.fixed_lease {
        // A queued run's fixed lease counts from its last heartbeat before
        // the handoff, at most a third of it earlier, and its grant's reply
        // takes a round trip more: one gone within a third of it did not
        // run out, it was taken away.
        Some(lease) if held >= lease / 3 => {
            format!("its --fixed-lease of {} ran out", human(lease))
        }
        Some(_) => "someone ran unlock --force, or redis lost its data".to_owned(),
        None => "the lease was not renewed in time, someone ran unlock --force, or redis lost \
                 its data"
            .to_owned(),
    };
    why + &held_now(lock)
}

/// "; it is now held by ..." ("led by", an election) when someone holds
/// the lock now.
fn held_now(lock: &Lock) -> String {
    (lock.holder_now()).map_or_else(String::new, |holder| {
        format!("; it is now {} {holder}", lock.verbs().held_by)
    })
}

/// The shell's convention: the exit status, or 128 + the signal that killed it.
fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => exit::SIGNAL_BASE + signal,
        (None, None) => exit::CANNOT_EXECUTE,
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with {code}"),
        (None, Some(signal)) => format!("was killed by {}", signals::name(signal)),
        (None, None) => format!("ended: {status}"),
    }
}
