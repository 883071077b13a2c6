//! `fairlock`: flock(1) for a fleet of machines.
//!
//! ```text
//! fairlock [-v] [--url URL] [--identity ID] [--connect-timeout DURATION] run NAME [--mutex] [--wait DURATION] [--lease DURATION | --fixed-lease DURATION] [--max-hold DURATION] -- COMMAND [ARGS...]
//! fairlock [--url URL] run NAME --semaphore N [--wait DURATION] -- COMMAND [ARGS...]
//! fairlock [--url URL] run NAME --read|--write [--wait DURATION] -- COMMAND [ARGS...]
//! fairlock [--url URL] status NAME [--mutex] [--semaphore] [--rwlock] [--election] [--json]
//! fairlock [--url URL] status NAME --watch [INTERVAL] [--json] [--count N]
//! fairlock [--url URL] unlock NAME --force [--mutex|--semaphore|--rwlock|--election]
//! fairlock [--url URL] revoke NAME [--mutex|--semaphore|--rwlock|--election]
//! fairlock [--url URL] elect NAME [--value VALUE] [--wait DURATION] [--lease DURATION | --fixed-lease DURATION] [--kill-on-loss] [--on-revoke SIGNAL] -- COMMAND [ARGS...]
//! fairlock [--url URL] elect NAME --watch [--json]
//! fairlock [--url URL] permits NAME N
//! ```
//!
//! The words are the library's: a kind of lock is named as `LockKind`
//! labels it (`--mutex`, `--semaphore`, `--rwlock`, `--election`; `run`
//! takes the reader-writer lock with `--read` or `--write`, its
//! `read()` and `write()`), following an election is `--watch`
//! (`Election::watch`), a leader leads and resigns. The spellings of
//! before are hidden aliases (CHANGELOG.md lists them).
//!
//! The `fairlock-cli` package of the workspace: `cargo install --path cli`.

// std's `print!`, `println!` and `eprintln!` panic when the write fails:
// a closed pipe (`fairlock -v run ... 2>&1 | head -1`) fails it with EPIPE,
// as Rust ignores SIGPIPE, and the panic (exit 101) would end fairlock
// before its command ran or its lock was released. These, in scope in
// every module declared below, drop the text instead; stdout's other
// failures are kept for the exit (`output_failed`).
macro_rules! print {
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*)) };
}
macro_rules! println {
    ($($arg:tt)*) => { print!("{}\n", format_args!($($arg)*)) };
}
macro_rules! eprintln {
    ($($arg:tt)*) => {
        $crate::write_out(&mut std::io::stderr(), format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes `text` to `to`, ignoring a failure: the output of [`eprintln!`].
fn write_out(to: &mut dyn std::io::Write, text: std::fmt::Arguments<'_>) {
    let _ = to.write_fmt(text);
}

/// Writes `text` to stdout: the output of [`println!`].
fn write_stdout(text: std::fmt::Arguments<'_>) {
    if let Err(err) = std::io::Write::write_fmt(&mut std::io::stdout(), text) {
        output_failed(&err);
    }
}

/// The first failure to write stdout that was not a closed pipe (a full
/// disk, an I/O error): what `status`, `unlock`, `revoke`, `permits` and
/// `elect --watch` answer is their output, so they exit with
/// [`exit::IO_ERROR`] for it. A reader that went away (`| head -1`) fails
/// nothing.
static OUTPUT_FAILURE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Keeps `err`, a failure to write stdout, for the exit (`OUTPUT_FAILURE`).
pub fn output_failed(err: &std::io::Error) {
    if err.kind() != std::io::ErrorKind::BrokenPipe {
        let mut failure = OUTPUT_FAILURE.lock().unwrap_or_else(|p| p.into_inner());
        failure.get_or_insert_with(|| err.to_string());
    }
}

/// `code`, or [`exit::IO_ERROR`] (said on stderr) when it is 0 and stdout,
/// flushed here, could not be written.
fn with_output_checked(code: i32) -> i32 {
    if let Err(err) = std::io::Write::flush(&mut std::io::stdout()) {
        output_failed(&err);
    }
    let failure = OUTPUT_FAILURE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match failure {
        Some(err) if code == 0 => {
            eprintln!("fairlock: error: cannot write the output: {err}");
            exit::IO_ERROR
        }
        _ => code,
    }
}

mod changes;
mod commands;
mod deathwatch;
mod duration;
mod identity;
mod kinds;
mod progress;
mod report;
mod signals;
mod terminal;
mod watch;

use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use fairlock::{Client, ClientBuilder, MAX_TIMEOUT};

use commands::{elect, permits, revoke, run, status, unlock};

/// Exit codes of fairlock itself; a command that ran passes its own through.
/// Those of a failure tell a script what to do: 69 and 75 may pass if
/// tried again later, 77 and 78 not before someone fixes the credentials,
/// the grants or the configuration (sysexits(3)).
pub mod exit {
    use fairlock::ErrorKind;

    /// Bad usage: an unknown option, a bad duration, lock name, identity or
    /// key prefix.
    pub const USAGE: i32 = 2;
    /// Redis could not be reached or failed (EX_UNAVAILABLE): trying again
    /// later may succeed; nothing was run.
    pub const UNAVAILABLE: i32 = 69;
    /// The lock was lost while the command ran (lease ran out, or someone
    /// ran `unlock --force`).
    pub const LEASE_LOST: i32 = 70;
    /// `status`, `unlock`, `revoke`, `permits` or `elect --watch` could
    /// not write its answer to stdout (EX_IOERR: a full disk, an I/O error; not a reader
    /// that went away).
    pub const IO_ERROR: i32 = 74;
    /// `--wait` ran out (EX_TEMPFAIL: try again later); nothing was run.
    /// `-E/--conflict-exit-code` changes it.
    pub const TIMED_OUT: u8 = 75;
    /// Redis refused the credentials, or its ACL denies what fairlock
    /// needs (EX_NOPERM): trying again cannot help until the URL's user
    /// and password or the user's grants are fixed; nothing was run.
    pub const NO_PERMISSION: i32 = 77;
    /// The configuration is wrong for this server or this fleet
    /// (EX_CONFIG): a URL the library refuses or a database the server
    /// lacks, a lock's data of another data format, `--semaphore N`
    /// against the N the semaphore is in use with, a key of another
    /// program's under the key prefix. Not usage (2): the command line
    /// may be right once the URL, the fleet or the server agree; trying
    /// the same again cannot help. Nothing was run.
    pub const CONFIG: i32 = 78;
    /// The command was found but could not be run.
    pub const CANNOT_EXECUTE: i32 = 126;
    /// The command was not found.
    pub const NOT_FOUND: i32 = 127;
    /// Added to a signal's number when the command died of it, or when
    /// fairlock was interrupted while waiting (130 for SIGINT, 143 for SIGTERM).
    pub const SIGNAL_BASE: i32 = 128;

    /// The exit code of a library error: the one place that decides it,
    /// from the error's kind (the library's predicates say the same:
    /// `is_connection` is true of 69's kinds only).
    pub fn of(kind: ErrorKind) -> i32 {
        match kind {
            ErrorKind::InvalidName => USAGE,
            ErrorKind::LeaseLost => LEASE_LOST,
            ErrorKind::Auth | ErrorKind::Permission => NO_PERMISSION,
            ErrorKind::InvalidConfig
            | ErrorKind::FormatMismatch
            | ErrorKind::PermitsMismatch
            | ErrorKind::PermitsExceeded
            | ErrorKind::KeyConflict => CONFIG,
            // Connection, NotReplicated, Server, Internal and any later
            // kind: Redis failing, as far as a script can tell.
            _ => UNAVAILABLE,
        }
    }
}

pub const EXIT_CODES: &str = "\
Exit codes of `fairlock run`:
  0-255  the command's own exit status, when it ran and held the lock throughout
  2      bad usage: unknown option, bad duration, bad lock name, identity or key prefix
  69     Redis unreachable or failing: try again later (nothing was run)
  70     the lock was lost while the command ran (lease ran out, or unlock --force),
         or it reached its --max-hold (the command was stopped)
  75     --wait ran out before our turn came: try again later (nothing was run);
         -E changes it
  77     Redis refused the credentials, or its ACL denies a command or key
         fairlock needs: fix the URL's user and password, or the grants
  78     the configuration is wrong: a bad URL, a database the server lacks,
         another data format, --semaphore N against the N in force, a foreign
         key under the key prefix (nothing was run)
  126    the command could not be executed
  127    the command was not found
  128+N  the command died of signal N; or fairlock got SIGINT (130),
         SIGTERM (143), SIGHUP or SIGQUIT while waiting (nothing was run),
         or a second one while releasing the lock (N of the first)
`fairlock elect` exits as `run` (70: the leadership was lost);
`elect --watch`, `status`, `unlock`, `revoke` and `permits` exit with 0, 2,
69, 77 or 78; or 74 when they cannot write their answer (a full disk;
not a reader that went away).";

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
        value_parser = key_prefix,
        display_order = 901
    )]
    key_prefix: String,

    /// Who this caller is, shown with its hold and its wait in every
    /// status (`fairlock status`, the library's): 1 to 64 ASCII letters,
    /// digits and `. _ - / @ : +`, e.g. `cron@web-3`. Default: USER@HOST:PID
    /// of this fairlock. (An `elect` candidate is named by its --value.)
    #[arg(
        long,
        global = true,
        value_name = "IDENTITY",
        env = "FAIRLOCK_IDENTITY",
        value_parser = identity::parse,
        display_order = 902
    )]
    identity: Option<String>,

    /// Give up connecting to Redis after this long (default 5s; up to
    /// 24h): a refused port or an unreachable host fails within it
    /// (exit 69); a server that accepts and never answers, within 5s.
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        value_parser = connect_timeout,
        display_order = 903
    )]
    connect_timeout: Option<Duration>,

    /// Say more on stderr: when `run` acquired and released, when `elect`
    /// leads and resigned; and the library's warnings (a watchdog's
    /// failures, a server that may evict, a semaphore's permits set with
    /// `fairlock permits`). Before or after the subcommand.
    #[arg(short, long, global = true, display_order = 904)]
    verbose: bool,

    /// The password the Sentinels of a `redis+sentinel://` URL require
    /// (theirs: the URL's is the master's). Prefer the variable: arguments
    /// show in `ps`.
    #[arg(
        long,
        global = true,
        value_name = "PASSWORD",
        env = "FAIRLOCK_SENTINEL_PASSWORD",
        hide_env_values = true,
        display_order = 905
    )]
    sentinel_password: Option<String>,

    /// The ACL user the Sentinels are asked for, with --sentinel-password
    /// (default: their `default` user).
    #[arg(
        long,
        global = true,
        value_name = "USER",
        env = "FAIRLOCK_SENTINEL_USERNAME",
        requires = "sentinel_password",
        display_order = 906
    )]
    sentinel_username: Option<String>,

    /// PEM root certificate(s) a `rediss://` server is checked against (a
    /// private CA), instead of the system's roots: every server of the
    /// URL, Sentinels too.
    #[cfg(feature = "tls")]
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "FAIRLOCK_TLS_CA_CERT",
        value_parser = pem_file,
        display_order = 907
    )]
    tls_ca_cert: Option<String>,

    /// PEM certificate (chain) presented to `rediss://` servers that ask
    /// for one (mutual TLS), with --tls-key.
    #[cfg(feature = "tls")]
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "FAIRLOCK_TLS_CERT",
        value_parser = pem_file,
        requires = "tls_key",
        display_order = 908
    )]
    tls_cert: Option<String>,

    /// PEM private key of --tls-cert.
    #[cfg(feature = "tls")]
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "FAIRLOCK_TLS_KEY",
        value_parser = pem_file,
        requires = "tls_cert",
        display_order = 909
    )]
    tls_key: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    // Each subcommand's help text is its arguments' doc comment, in commands/.
    Run(run::RunArgs),
    Status(status::StatusArgs),
    Unlock(unlock::UnlockArgs),
    Revoke(revoke::RevokeArgs),
    Elect(elect::ElectArgs),
    Permits(permits::PermitsArgs),
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

    /// A library error with what was being done, and its exit code
    /// ([`exit::of`]).
    pub fn redis(err: fairlock::Error, doing: impl std::fmt::Display) -> Self {
        // The library's Display ends with its cause already.
        Failure::new(exit::of(err.kind()), anyhow::anyhow!("{doing}: {err}"))
    }
}

/// Parses `--connect-timeout`: a duration above zero, at most the
/// library's MAX_TIMEOUT.
fn connect_timeout(text: &str) -> Result<Duration, String> {
    let timeout = duration::parse(text)?;
    if timeout.is_zero() || timeout > MAX_TIMEOUT {
        return Err(format!(
            "must be above zero and at most {}h, got {}",
            MAX_TIMEOUT.as_secs() / 3600,
            duration::human(timeout)
        ));
    }
    Ok(timeout)
}

/// Parses `--key-prefix` as the library checks it: a usage error (2), not
/// the library's InvalidConfig (78), which would blame the URL.
fn key_prefix(text: &str) -> Result<String, String> {
    if (1..=256).contains(&text.len()) && !text.contains(['{', '}']) {
        Ok(text.to_owned())
    } else {
        Err("a key prefix must be 1 to 256 bytes, without '{' or '}'".to_owned())
    }
}

/// Reads the PEM file a `--tls-*` option names: one that cannot be read
/// is a usage error (2), naming the option.
#[cfg(feature = "tls")]
fn pem_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|err| format!("cannot read {path:?}: {err}"))
}

/// The library's command timeout, which every client of fairlock keeps
/// (its default, set explicitly so that what is counted on it holds).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// The library's connect timeout, when `--connect-timeout` is not given.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Global settings every subcommand connects with.
pub struct Connection {
    pub url: String,
    /// `--connect-timeout`; the library's default without it.
    pub connect_timeout: Option<Duration>,
    /// A client of `url` with every global setting (`--identity`, or
    /// USER@HOST:PID).
    pub builder: ClientBuilder,
}

impl Connection {
    /// The least a request that timed out had waited: for a pooled
    /// connection (the connect timeout) or for its reply (the command
    /// timeout).
    pub fn least_timeout(&self) -> Duration {
        (self.connect_timeout.unwrap_or(CONNECT_TIMEOUT)).min(COMMAND_TIMEOUT)
    }

    pub fn connect(&self) -> Result<Client, Failure> {
        self.connect_leased(None)
    }

    /// A client whose watchdog renews leases of `lease` (`--lease`; or
    /// heartbeats the queued waits of `--fixed-lease`'s at its pace), or
    /// of the library's default.
    pub fn connect_leased(&self, lease: Option<Duration>) -> Result<Client, Failure> {
        let mut builder = self.builder.clone();
        if let Some(lease) = lease {
            builder = builder.lease(lease);
        }
        let client = builder.build().map_err(|err| {
            // The library names the server it met an error at, not a setting
            // it refused before any I/O.
            let shown = shown_url(&self.url);
            let named = err.to_string().contains(&shown);
            Failure::redis(
                err,
                format!("cannot use {}", if named { "redis" } else { &shown }),
            )
        })?;
        // What the client found wrong with its servers, once, whether or
        // not the library's log is shown (`StderrLogger` leaves it out).
        for warning in client.warnings() {
            eprintln!("warning: {warning}");
        }
        Ok(client)
    }
}

/// The URL as messages show it: without its password, by the library's
/// rule; quoted when it is not a URL at all.
fn shown_url(url: &str) -> String {
    if url.contains("://") {
        fairlock::redact_url(url)
    } else {
        format!("{url:?}")
    }
}

/// Ends the process with `code`. Whichever thread calls it first wins; a
/// second caller blocks until the process is gone. Stdout is flushed by
/// `process::exit` only if no other thread holds it: one blocked writing
/// to a reader that stopped reading would block the exit too.
pub fn exit_now(code: i32) -> ! {
    static EXITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _only_one = EXITING.lock();
    std::process::exit(code)
}

/// From now on, prints the library's warnings and errors on stderr.
pub fn show_library_warnings() {
    let _ = log::set_logger(&StderrLogger);
    log::set_max_level(log::LevelFilter::Warn);
}

/// Prints the library's log records (warnings and errors) on stderr.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        // The servers' warnings are printed from `Client::warnings`.
        metadata.level() <= log::Level::Warn && metadata.target() != fairlock::SERVER_WARNING_TARGET
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

/// The first paragraph of clap's error on one line, without "error: ":
/// a list under a line that ends with ':' (the arguments a group's member
/// conflicts with) joins it, comma-separated.
fn first_paragraph(text: &str) -> String {
    let mut lines = text
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    let mut first = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    if first.ends_with(':') {
        let rest: Vec<&str> = lines.map(str::trim).collect();
        first.push(' ');
        first.push_str(&rest.join(", "));
    }
    first
}

/// One line, whatever the error chain holds.
fn one_line(error: &anyhow::Error) -> String {
    format!("{error:#}").replace(['\n', '\r'], " ")
}

fn main() {
    // An empty variable is as unset, as most Unix tools take one.
    let mut command = Cli::command();
    let empty: Vec<_> = (command.get_arguments())
        .filter(|arg| {
            (arg.get_env()).is_some_and(|var| std::env::var_os(var).is_some_and(|v| v.is_empty()))
        })
        .map(|arg| arg.get_id().clone())
        .collect();
    for arg in empty {
        command = command.mut_arg(arg, |arg| arg.env(None));
    }
    let parsed = command.try_get_matches();
    let cli = match parsed.and_then(|matches| Cli::from_arg_matches(&matches)) {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind as K;
            if matches!(
                err.kind(),
                K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                err.exit();
            }
            let mut first = first_paragraph(&err.to_string());
            // An over-long value (a lock name of 64 KiB) is cut to its start.
            use clap::error::{ContextKind, ContextValue};
            if let Some(ContextValue::String(value)) = err.get(ContextKind::InvalidValue) {
                if let Some((cut, _)) = value.char_indices().nth(60).filter(|_| value.len() > 80) {
                    let short = format!("{}... ({} bytes)", &value[..cut], value.len());
                    first = first.replacen(value.as_str(), &short, 1);
                }
            }
            eprintln!("fairlock: error: {first} (see fairlock --help)");
            exit_now(exit::USAGE);
        }
    };
    if cli.verbose {
        show_library_warnings();
    }
    let mut builder = Client::builder(&cli.url)
        .key_prefix(cli.key_prefix)
        .identity(cli.identity.unwrap_or_else(identity::default))
        .waiter_timeout(run::WAITER_TIMEOUT)
        .command_timeout(COMMAND_TIMEOUT);
    if let Some(timeout) = cli.connect_timeout {
        builder = builder.connect_timeout(timeout);
    }
    if let Some(password) = cli.sentinel_password {
        builder = builder.sentinel_password(password);
    }
    if let Some(user) = cli.sentinel_username {
        builder = builder.sentinel_username(user);
    }
    #[cfg(feature = "tls")]
    if let Some(pem) = cli.tls_ca_cert {
        builder = builder.tls_root_cert_pem(pem);
    }
    #[cfg(feature = "tls")]
    if let (Some(cert), Some(key)) = (cli.tls_cert, cli.tls_key) {
        builder = builder.tls_client_cert_pem(cert, key);
    }
    let connection = Connection {
        url: cli.url,
        connect_timeout: cli.connect_timeout,
        builder,
    };
    let verbose = cli.verbose;
    // Whether the output is the answer: not for a command run under the
    // lock, whose own status is passed on.
    let answers = match &cli.command {
        Command::Run(_) => false,
        Command::Elect(args) => args.watch,
        _ => true,
    };
    let result = match cli.command {
        Command::Run(args) => run::exec(&connection, args, verbose),
        Command::Status(args) => status::exec(&connection, args),
        Command::Unlock(args) => unlock::exec(&connection, args),
        Command::Revoke(args) => revoke::exec(&connection, args),
        Command::Elect(args) => elect::exec(&connection, args, verbose),
        Command::Permits(args) => permits::exec(&connection, args),
    };
    match result {
        Ok(code) if answers => exit_now(with_output_checked(code)),
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
    fn the_kinds_flags_conflict_in_one_line() {
        for args in [
            &["--read", "--write"][..],
            &["--semaphore", "2", "--read"],
            &["--write", "--semaphore", "2"],
            &["--mutex", "--write"],
            &["--read", "--write", "--semaphore", "2"],
            // The spellings of before, hidden aliases, likewise.
            &["-s", "-x"],
            &["--permits", "2", "--shared"],
            &["--exclusive", "--permits", "2"],
        ] {
            let err =
                Cli::try_parse_from(["fairlock", "run", "n"].iter().chain(args).chain(&["true"]))
                    .unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{args:?}"
            );
            let line = first_paragraph(&err.to_string());
            assert!(
                line.contains("cannot be used with") && !line.ends_with(':'),
                "{line}"
            );
        }
        let run_of = |args: &[&str]| {
            let cli = Cli::try_parse_from(["fairlock", "run", "n"].iter().chain(args))
                .unwrap_or_else(|err| panic!("{args:?}: {err}"));
            let Command::Run(run) = cli.command else {
                panic!("not run")
            };
            run
        };
        // Each kind by its name, and by the spelling of before.
        for args in [
            &["--read", "true"][..],
            &["-s", "true"],
            &["--shared", "true"],
        ] {
            let run = run_of(args);
            assert!(
                run.read && !run.write && run.semaphore.is_none(),
                "{args:?}"
            );
        }
        for args in [
            &["--write", "true"][..],
            &["-x", "true"],
            &["--exclusive", "true"],
        ] {
            let run = run_of(args);
            assert!(
                run.write && !run.read && run.semaphore.is_none(),
                "{args:?}"
            );
        }
        for args in [
            &["--semaphore", "3", "true"][..],
            &["--permits", "3", "true"],
        ] {
            assert_eq!(run_of(args).semaphore, Some(3), "{args:?}");
        }
        let run = run_of(&["--mutex", "true"]);
        assert!(run.mutex && !run.read && !run.write && run.semaphore.is_none());
        // A renewed or a fixed lease goes with every kind.
        for kind in [&["--write"][..], &["--read"], &["--semaphore", "2"], &[]] {
            for flag in ["--lease", "--fixed-lease"] {
                let args = ["fairlock", "run", "n", flag, "1s"];
                let cli = Cli::try_parse_from(args.iter().chain(kind).chain(&["true"])).unwrap();
                let Command::Run(run) = cli.command else {
                    panic!("not run")
                };
                let lease = if flag == "--lease" {
                    run.lease
                } else {
                    run.fixed_lease
                };
                assert_eq!(lease, Some(Duration::from_secs(1)), "{flag} {kind:?}");
            }
        }
    }

    /// The old spellings are hidden aliases: they parse, and no help
    /// names them.
    #[test]
    fn the_spellings_of_before_are_hidden() {
        let mut cli = Cli::command();
        let help = |cli: &mut clap::Command, sub: &str| -> String {
            cli.find_subcommand_mut(sub)
                .unwrap()
                .render_long_help()
                .to_string()
        };
        let run = help(&mut cli, "run");
        for old in ["--permits", "--shared", "--exclusive", "-s,", "-x,"] {
            assert!(!run.contains(old), "run --help names {old}: {run}");
        }
        for new in ["--semaphore <N>", "--read", "--write", "--mutex"] {
            assert!(run.contains(new), "run --help lacks {new}");
        }
        let elect = help(&mut cli, "elect");
        assert!(!elect.contains("--observe"), "{elect}");
        assert!(elect.contains("--watch"), "{elect}");
        let cli = Cli::try_parse_from(["fairlock", "elect", "n", "--observe"]).unwrap();
        let Command::Elect(elect) = cli.command else {
            panic!("not elect")
        };
        assert!(elect.watch);
    }

    /// `-v` is global: before the subcommand or after it, for every one
    /// (`-q` with it is refused by `run` and `elect` themselves:
    /// cli/tests/cli.rs).
    #[test]
    fn verbose_goes_before_or_after_the_subcommand() {
        for args in [
            &["fairlock", "-v", "run", "n", "true"][..],
            &["fairlock", "run", "-v", "n", "true"],
            &["fairlock", "run", "n", "--verbose", "true"],
            &["fairlock", "--verbose", "elect", "n", "true"],
            &["fairlock", "elect", "n", "-v", "true"],
            &["fairlock", "-v", "status", "n"],
            &["fairlock", "permits", "n", "2", "-v"],
        ] {
            let cli = Cli::try_parse_from(args).unwrap_or_else(|err| panic!("{args:?}: {err}"));
            assert!(cli.verbose, "{args:?}");
        }
        let cli = Cli::try_parse_from(["fairlock", "run", "n", "true"]).unwrap();
        assert!(!cli.verbose);
    }

    /// A fixed lease is its own maximum and renewed by nobody:
    /// `--fixed-lease` goes with neither `--max-hold` (the library's
    /// with_fixed_lease and with_max_hold exclude each other too) nor
    /// `--lease` (the renewed lease); `--lease` and `--max-hold` go
    /// together.
    #[test]
    fn a_fixed_lease_conflicts_with_a_max_hold_and_a_renewed_lease() {
        for other in ["--max-hold", "--lease"] {
            let args = ["fairlock", "run", "n", "--fixed-lease", "10s", other, "1m"];
            let err = Cli::try_parse_from(args.iter().chain(&["true"])).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
            let args = [
                "fairlock",
                "elect",
                "n",
                "--fixed-lease",
                "10s",
                other,
                "1m",
            ];
            let err = Cli::try_parse_from(args.iter().chain(&["true"])).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        }
        let args = ["fairlock", "run", "n", "--lease", "5s", "--max-hold", "1m"];
        let cli = Cli::try_parse_from(args.iter().chain(&["true"])).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.lease, Some(Duration::from_secs(5)));
        assert_eq!(run.max_hold, Some(Duration::from_secs(60)));
    }

    /// The leases within the library's MIN_LEASE..=MAX_LEASE, the connect
    /// timeout above zero and at most MAX_TIMEOUT; each refusal names the
    /// option and the bounds.
    #[test]
    fn leases_and_the_connect_timeout_are_bounded() {
        for flag in ["--lease", "--fixed-lease", "--max-hold"] {
            for bad in ["10ms", "8770h"] {
                let args = ["fairlock", "run", "n", flag, bad, "true"];
                let err = Cli::try_parse_from(args).unwrap_err();
                let line = first_paragraph(&err.to_string());
                assert!(
                    line.contains(flag) && line.contains("must be from 30ms to 8760h"),
                    "{line}"
                );
            }
            let args = ["fairlock", "run", "n", flag, "30ms", "true"];
            assert!(Cli::try_parse_from(args).is_ok(), "{flag} 30ms");
        }
        for bad in ["0s", "25h"] {
            let args = ["fairlock", "--connect-timeout", bad, "status", "n"];
            let err = Cli::try_parse_from(args).unwrap_err();
            let line = first_paragraph(&err.to_string());
            assert!(
                line.contains("--connect-timeout") && line.contains("at most 24h"),
                "{line}"
            );
        }
        let cli = Cli::try_parse_from(["fairlock", "status", "n", "--connect-timeout", "250ms"]);
        assert_eq!(
            cli.unwrap().connect_timeout,
            Some(Duration::from_millis(250))
        );
    }

    /// `elect --watch` campaigns for nothing: every flag of a campaign is
    /// a usage error with it, `-q` and `-E` too (they were taken and
    /// ignored, as if they meant something there).
    #[test]
    fn elect_watch_refuses_every_flag_of_a_campaign() {
        for flag in [
            &["-q"][..],
            &["-E", "3"],
            &["--value", "v"],
            &["-n"],
            &["--wait", "1s"],
            &["--lease", "1s"],
            &["--kill-on-loss"],
            &["--on-revoke", "INT"],
        ] {
            let args = ["fairlock", "elect", "n", "--watch"];
            let err = Cli::try_parse_from(args.iter().chain(flag)).unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{flag:?}"
            );
        }
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            shown_url("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(shown_url("redis://:secret@host"), "redis://:***@host");
        assert_eq!(shown_url("redis://host:6379"), "redis://host:6379");
        // A lone userinfo is the password, as the library reads it.
        assert_eq!(shown_url("redis://user@host"), "redis://***@host");
        assert_eq!(shown_url("nonsense"), "\"nonsense\"");
    }
}
