//! `fairlock status`: who holds the locks of a name, who waits for them,
//! the last tokens: each kind of lock of the name that is in use (the
//! mutex, the semaphore, the reader-writer lock, the election), or the
//! kinds asked for, written once from the one status every kind has.

use std::time::Duration;

use clap::Args;
use fairlock::LockKind;

use super::lock_name;
use crate::report::{read, to_json, to_text, KINDS};
use crate::{watch, Connection, Failure};

/// Show who holds NAME, who waits for it in order, and the last token.
///
/// The mutex, the semaphore, the reader-writer lock and the election of a
/// name are four locks: each one in use (held, queued for, or with its
/// last token still recorded) is shown, or the mutex, free, when none is;
/// --mutex, --semaphore, --rwlock and --election show those kinds only,
/// in use or not. Each holder with its lease left and token (and read or
/// write, or its permits), the waiters in order.
///
/// With --watch, keeps showing it: redrawn in place on a terminal, else a
/// block each time it changes; with --json, an NDJSON line each time it
/// changes, wherever it goes. Ctrl-C stops.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Print one JSON object instead of text (its keys: docs/cli.md).
    #[arg(long)]
    pub json: bool,

    /// Show the mutex NAME, in use or not (with the other kind flags
    /// given, only those kinds).
    #[arg(long)]
    pub mutex: bool,

    /// Show the semaphore NAME, in use or not.
    #[arg(long)]
    pub semaphore: bool,

    /// Show the reader-writer lock NAME, in use or not.
    #[arg(long)]
    pub rwlock: bool,

    /// Show the election NAME, in use or not.
    #[arg(long)]
    pub election: bool,

    /// List at most this many holders and this many waiters of each lock,
    /// from the head of each queue.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,

    /// Keep watching, reading every INTERVAL (100ms to 1h; default 1s): on
    /// a terminal the view is redrawn in place, with what changed; else a
    /// timestamped block is printed each time the holders or the queue
    /// change (with --json, one JSON object per line, on a terminal too).
    /// SIGINT or SIGTERM (SIGHUP, SIGQUIT) stops it (exit 0).
    #[arg(
        long,
        value_name = "INTERVAL",
        num_args = 0..=1,
        default_missing_value = "1s",
        value_parser = watch::interval
    )]
    pub watch: Option<Duration>,

    /// With --watch: stop after N reads (the first one and N-1 more, one
    /// every INTERVAL, as top -n), whether they printed a change or not.
    #[arg(long, value_name = "N", requires = "watch", value_parser = watch::count)]
    pub count: Option<u64>,
}

impl StatusArgs {
    /// The kinds asked for with --mutex, --semaphore, --rwlock and
    /// --election; empty: those in use.
    pub fn asked(&self) -> Vec<LockKind> {
        let flags = [self.mutex, self.semaphore, self.rwlock, self.election];
        KINDS
            .into_iter()
            .zip(flags)
            .filter_map(|(kind, asked)| asked.then_some(kind))
            .collect()
    }
}

/// Prints the holders, the queues in order and the last tokens; exit code 0.
pub fn exec(connection: &Connection, args: StatusArgs) -> Result<i32, Failure> {
    let name = args.name.as_str();
    let asked = args.asked();
    if args.watch.is_some() {
        // A signal ends a watch with 0 from its start, connecting included.
        watch::stop_on_signals().map_err(|err| {
            let why = anyhow::anyhow!(err).context("cannot handle signals");
            Failure::new(crate::exit::UNAVAILABLE, why)
        })?;
    }
    let client = connection.connect()?;
    if let Some(interval) = args.watch {
        let watch = watch::Watch {
            name,
            asked: &asked,
            limit: args.limit,
            interval,
            json: args.json,
            count: args.count,
        };
        return watch::exec(&client, &watch);
    }
    let report = read(&client, name, &asked, args.limit)
        .map_err(|err| Failure::redis(err, format!("cannot read the status of {name:?}")))?;
    if args.json {
        println!("{}", to_json(name, &report));
    } else {
        print!("{}", to_text(name, &report));
    }
    Ok(0)
}
