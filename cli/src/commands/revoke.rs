//! `fairlock revoke`: ask the holders of a lock (the mutex, or with
//! `--semaphore`, `--rwlock` or `--election` that kind of lock of the name)
//! to let go. Nothing is freed: each holder decides.

use clap::Args;
use fairlock::{Client, LockKind};

use super::{kind_of, lock_name};
use crate::kinds::{plural, Verbs};
use crate::report::{lock_named, who};
use crate::{Connection, Failure};

/// Ask the holders of NAME to let go; they decide when (nothing is freed).
///
/// The mutex NAME (--mutex, the default), or with --semaphore, --rwlock or
/// --election that lock of the name: every hold of it there now (the mutex's holder, each permit,
/// each read and write hold, the leader) is asked, and no hold taken later.
/// A `fairlock run` holding it passes the request on to its command as
/// SIGTERM (or its --on-revoke signal) and releases when the command ends;
/// a program using the library sees its guard's revocation signal fire.
/// To free a lock whatever its holders do, use `unlock --force`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// Name of the lock.
    #[arg(value_parser = lock_name)]
    pub name: String,

    /// Ask the mutex NAME's holder (the default).
    #[arg(long, conflicts_with_all = ["semaphore", "rwlock", "election"])]
    pub mutex: bool,

    /// Ask the semaphore NAME's holders (every permit) instead of the
    /// mutex NAME's.
    #[arg(long, conflicts_with_all = ["rwlock", "election"])]
    pub semaphore: bool,

    /// Ask the reader-writer lock NAME's holders (every read and write
    /// hold) instead of the mutex NAME's.
    #[arg(long, conflicts_with = "election")]
    pub rwlock: bool,

    /// Ask the leader of the election NAME to step down.
    #[arg(long)]
    pub election: bool,
}

/// Most holders named.
const LISTED: usize = 100;

/// Asks the holders to let go and says whom it asked; exit code 0.
pub fn exec(connection: &Connection, args: RevokeArgs) -> Result<i32, Failure> {
    let name = args.name.as_str();
    let client = connection.connect()?;
    let failed = |err| Failure::redis(err, format!("cannot revoke {name:?}"));
    let kind = kind_of(args.semaphore, args.rwlock, args.election);
    let asked = revoke(&client, kind, name).map_err(failed)?;
    let lock = asked.lock;
    // In the kind's words: an election's leader, asked to step down.
    let verbs = Verbs::of(kind);
    let holder = verbs.holder;
    if asked.holds == 0 {
        let besides = super::held_besides(&client, kind, name);
        println!(
            "fairlock: {lock} {}; nobody to ask{besides}",
            verbs.is_not_held
        );
        return Ok(0);
    }
    // Read just before, at most LISTED: one beyond them, or that came
    // between the two calls, is asked too, and counted; with none read
    // (the lock was free then), every one asked came after the read. Fewer
    // asked than read: some let go between the two calls, and which the
    // revocation's count does not say.
    let mut named = asked.holders;
    let mut of = String::new();
    if named.is_empty() {
        named.push(match asked.holds {
            1 => format!("a {holder} that came after the last read"),
            n => format!("{n} {holder}s that came after the last read"),
        });
    } else if named.len() < asked.holds {
        named.push(format!("and {} more", asked.holds - named.len()));
    } else if named.len() > asked.holds {
        of = format!(", of the {} read just before", named.len());
    }
    println!(
        "fairlock: asked {} of {lock} to {}{of}: {}",
        plural(asked.holds, holder),
        verbs.let_go,
        named.join(", ")
    );
    Ok(0)
}

/// Whom a revocation asked.
struct Asked {
    /// The lock as messages name it, with a semaphore's permits.
    lock: String,
    /// The holders read just before, as "WHO (token N)" ("WHO (term N)",
    /// an election's leader).
    holders: Vec<String>,
    /// The holds the revocation asked.
    holds: usize,
}

/// Revokes the `kind` of lock `name`, naming its holders as read just
/// before.
fn revoke(client: &Client, kind: LockKind, name: &str) -> fairlock::Result<Asked> {
    let before = client.status(kind, name, LISTED)?;
    let holds = client.revoke(kind, name)?;
    let token = Verbs::of(kind).token;
    let holders = before
        .holders
        .iter()
        .map(|holder| format!("{} ({token} {})", who(&holder.who), holder.fencing_token))
        .collect();
    Ok(Asked {
        lock: lock_named(&before, name),
        holders,
        holds,
    })
}
