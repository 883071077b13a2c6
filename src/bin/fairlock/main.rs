//! `fairlock`: flock(1) for a fleet of machines.
//!
//! ```text
//! fairlock [--url URL] run NAME [--wait DURATION] [--lease DURATION] -- COMMAND [ARGS...]
//! fairlock [--url URL] status NAME [--json]
//! fairlock [--url URL] unlock NAME --force
//! ```
//!
//! Built only with the `cli` feature: `cargo install --path . --features cli`.

mod duration;
mod inspect;
mod progress;
mod run;
mod signals;

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fairlock::{Client, ErrorKind, MIN_LEASE};

/// Exit codes of fairlock itself; a command that ran passes its own through.
pub mod exit {
    /// Bad usage: an unknown option, a bad duration, URL or lock name.
    pub const USAGE: i32 = 2;
    /// Redis could not be reached or failed (EX_UNAVAILABLE); nothing was run.
    pub const UNAVAILABLE: i32 = 69;
    /// The lock was lost while the command ran (lease ran out, or someone
    /// ran `unlock --force`).
    pub const LEASE_LOST: i32 = 70;
    /// `--wait` ran out (EX_TEMPFAIL: try again later); nothing was run.
    /// `-E/--conflict-exit-code` changes it.
    pub const TIMED_OUT: u8 = 75;
    /// The command was found but could not be run.
    pub const CANNOT_EXECUTE: i32 = 126;
    /// The command was not found.
    pub const NOT_FOUND: i32 = 127;
    /// Added to a signal's number when the command died of it, or when
    /// fairlock was interrupted while waiting (130 for SIGINT, 143 for SIGTERM).
    pub const SIGNAL_BASE: i32 = 128;
}

const EXIT_CODES: &str = "\
Exit codes of `fairlock run`:
  0-255  the command's own exit status, when it ran and held the lock throughout
  2      bad usage: unknown option, bad duration, bad URL, bad lock name
  69     Redis unreachable or failing (nothing was run)
  70     the lock was lost while the command ran (lease ran out, or unlock --force)
  75     --wait ran out before our turn came (nothing was run); -E changes it
  126    the command could not be executed
  127    the command was not found
  128+N  the command died of signal N; or fairlock got SIGINT (130) or
         SIGTERM (143) while waiting (nothing was run)
`status` and `unlock` exit with 0, 2 or 69.";

/// flock(1) for a fleet of machines: run a command only when it is this
/// caller's turn on a named lock in Redis, in arrival order.
#[derive(Debug, Parser)]
#[command(name = "fairlock", version, after_help = EXIT_CODES, arg_required_else_help = true)]
struct Cli {
    /// Redis server (`redis://[user:password@]host:port[/db]`).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379",
        display_order = 900
    )]
    url: String,

    /// Start of every key and channel; must match the library's `key_prefix`.
    #[arg(
        long,
        global = true,
        value_name = "PREFIX",
        default_value = "fairlock",
        display_order = 901
    )]
    key_prefix: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Wait for our turn on NAME, run COMMAND holding the lock, release it.
    ///
    /// Waits in arrival order, forever unless --wait or -n. The lock is held
    /// while COMMAND runs (a watchdog renews its lease unless --lease) and
    /// released whenever COMMAND ends. COMMAND's exit status is fairlock's.
    /// COMMAND gets FAIRLOCK_TOKEN (the fencing token), FAIRLOCK_NAME and
    /// FAIRLOCK_CLIENT_ID in its environment. SIGINT, SIGTERM and SIGHUP are
    /// passed on to COMMAND (unless they came from the terminal, which
    /// already sent them to COMMAND too); while still waiting they end the
    /// wait with 128+N and nothing is run.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Show who holds NAME, who waits for it in order, and the last token.
    Status(StatusArgs),
    /// Free NAME whoever holds it (with --force), and say who held it.
    ///
    /// The next waiter in line gets the lock at once. The old holder's
    /// command keeps running until its fairlock notices the loss and
    /// reports it (exit 70, or killed with --kill-on-loss).
    Unlock(UnlockArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    name: String,

    /// Give up after waiting this long (500ms, 10s, 5m, 2h); 0s means do not
    /// wait. Waits forever when not given.
    #[arg(short, long, value_name = "DURATION", value_parser = duration::parse)]
    wait: Option<Duration>,

    /// Do not wait at all: the same as --wait 0s (flock's -n).
    #[arg(short, long, conflicts_with = "wait")]
    nonblock: bool,

    /// Hold the lock for at most this long, with no watchdog renewing it.
    /// If COMMAND outlives it, that is a lost lock (exit 70). Without
    /// --lease a watchdog renews the lease while COMMAND runs.
    #[arg(long, value_name = "DURATION", value_parser = lease)]
    lease: Option<Duration>,

    /// Exit code when --wait or -n runs out (flock's -E).
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = exit::TIMED_OUT)]
    conflict_exit_code: u8,

    /// Kill COMMAND (SIGTERM, then SIGKILL 5 s later) as soon as the lock is
    /// found lost, instead of letting it finish.
    #[arg(long)]
    kill_on_loss: bool,

    /// No live waiting line and no notice when --wait runs out.
    #[arg(short, long)]
    quiet: bool,

    /// Say on stderr when the lock was acquired and released, and show the
    /// library's warnings (watchdog failures).
    #[arg(short, long, conflicts_with = "quiet")]
    verbose: bool,

    /// The command to run and its arguments (after `--`, or after NAME).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    name: String,

    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,

    /// List at most this many waiters from the head of the queue.
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: usize,
}

#[derive(Debug, Args)]
struct UnlockArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    name: String,

    /// Required: unlocking frees the lock whoever holds it.
    #[arg(long)]
    force: bool,
}

fn lock_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        Err("the lock name is empty".to_owned())
    } else if name.len() > fairlock::MAX_NAME_LEN {
        Err(format!(
            "the lock name is {} bytes long, more than the {} allowed",
            name.len(),
            fairlock::MAX_NAME_LEN
        ))
    } else {
        Ok(name.to_owned())
    }
}

fn lease(text: &str) -> Result<Duration, String> {
    let lease = duration::parse(text)?;
    if lease < MIN_LEASE {
        return Err(format!("a lease must be at least {MIN_LEASE:?}"));
    }
    Ok(lease)
}

/// Why fairlock stops before or around the command, with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn new(code: i32, error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code,
            error: error.into(),
        }
    }

    /// Maps a library error to its exit code, with what was being done.
    pub fn redis(err: fairlock::Error, doing: impl std::fmt::Display) -> Self {
        let code = match err.kind() {
            ErrorKind::InvalidName | ErrorKind::InvalidConfig => exit::USAGE,
            ErrorKind::LeaseLost => exit::LEASE_LOST,
            _ => exit::UNAVAILABLE,
        };
        Failure::new(code, anyhow::Error::new(err).context(doing.to_string()))
    }
}

/// Global settings every subcommand connects with.
pub struct Connection {
    pub url: String,
    pub key_prefix: String,
}

impl Connection {
    pub fn connect(&self) -> Result<Client, Failure> {
        Client::builder(&self.url)
            .key_prefix(self.key_prefix.clone())
            .waiter_timeout(run::WAITER_TIMEOUT)
            .build()
            .map_err(|err| Failure::redis(err, format!("cannot use {}", redact(&self.url))))
    }
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return format!("{url:?}");
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority
        .rsplit_once('@')
        .and_then(|(userinfo, host)| Some((userinfo.split_once(':')?.0, host)))
    {
        Some((user, host)) => format!("{scheme}://{user}:***@{host}{path}"),
        None => url.to_owned(),
    }
}

/// Ends the process with `code`. Whichever thread calls it first wins; a
/// second caller blocks until the process is gone.
pub fn exit_now(code: i32) -> ! {
    static EXITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _only_one = EXITING.lock();
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::process::exit(code)
}

/// Prints the library's log records (warnings and errors) on stderr.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let text = record.args().to_string();
            let text = text.strip_prefix("fairlock: ").unwrap_or(&text);
            eprintln!(
                "fairlock: {}: {text}",
                record.level().as_str().to_lowercase()
            );
        }
    }

    fn flush(&self) {}
}

/// One line, whatever the error chain holds.
fn one_line(error: &anyhow::Error) -> String {
    format!("{error:#}").replace(['\n', '\r'], " ")
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind as K;
            if matches!(
                err.kind(),
                K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                err.exit();
            }
            let text = err.to_string();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("fairlock: error: {first} (see fairlock --help)");
            exit_now(exit::USAGE);
        }
    };
    let connection = Connection {
        url: cli.url,
        key_prefix: cli.key_prefix,
    };
    let result = match cli.command {
        Command::Run(args) => {
            if args.verbose {
                let _ = log::set_logger(&StderrLogger);
                log::set_max_level(log::LevelFilter::Warn);
            }
            run::run(
                &connection,
                run::Options {
                    name: args.name,
                    wait: if args.nonblock {
                        Some(Duration::ZERO)
                    } else {
                        args.wait
                    },
                    lease: args.lease,
                    conflict_exit_code: i32::from(args.conflict_exit_code),
                    kill_on_loss: args.kill_on_loss,
                    quiet: args.quiet,
                    verbose: args.verbose,
                    command: args.command,
                },
            )
        }
        Command::Status(args) => inspect::status(&connection, &args.name, args.json, args.limit),
        Command::Unlock(args) => {
            if args.force {
                inspect::unlock(&connection, &args.name)
            } else {
                Err(Failure::new(
                    exit::USAGE,
                    anyhow::anyhow!(
                        "unlock frees {:?} whoever holds it: add --force if that is what you want",
                        args.name
                    ),
                ))
            }
        }
    };
    match result {
        Ok(code) => exit_now(code),
        Err(failure) => {
            progress::clear_any();
            eprintln!("fairlock: error: {}", one_line(&failure.error));
            exit_now(failure.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_command_is_taken_literally_after_the_name() {
        let cli =
            Cli::try_parse_from(["fairlock", "run", "n", "--wait", "5s", "make", "-j4"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.wait, Some(Duration::from_secs(5)));
        assert_eq!(run.command, ["make", "-j4"]);
        let cli = Cli::try_parse_from(["fairlock", "run", "n", "--", "ls", "--wait", "x"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.wait, None);
        assert_eq!(run.command, ["ls", "--wait", "x"]);
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact("redis://:secret@host"), "redis://:***@host");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("redis://user@host"), "redis://user@host");
    }
}
