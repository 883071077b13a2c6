//! The server's and fairlock's scripts' error codes, read in one place, and
//! fairlock's own words for each: a script that stops on something the
//! client acts on raises a code and its fields (`FAIRLOCK_<WHAT> <field>
//! ...`), never prose to be matched; Redis's own refusals are read by their
//! codes too.

use std::borrow::Cow;
use std::time::Duration;

use super::ErrorKind;

/// The error code of `err`; for an error a script raised on Redis before
/// 7.0, the code of that error (see [`script_error_code`]).
pub(super) fn code_of(err: &redis::RedisError) -> Option<&str> {
    match err.code() {
        Some("ERR") => err.detail().and_then(script_error_code).or(Some("ERR")),
        code => code,
    }
}

/// True for the code of a refusal that passes, the call not run: `OOM`
/// (over its `maxmemory`), `NOREPLICAS` (fewer replicas than
/// `min-replicas-to-write`), `MISCONF` (its last snapshot failed).
pub(crate) fn refused_for_now(code: &str) -> bool {
    matches!(code, "OOM" | "NOREPLICAS" | "MISCONF")
}

/// True for a server that does not know a command fairlock starts with (a
/// Sentinel asked as a data server, a data server asked as a Sentinel).
pub(crate) fn is_unknown_command(err: &redis::RedisError) -> bool {
    err.detail()
        .is_some_and(|detail| detail.starts_with("unknown command"))
}

/// True for a call on a slot being moved away: `TRYAGAIN` (as `steady`
/// returns it), an `ASK` or `MOVED` not followed, or a script's command
/// refused half-way on a key no longer here ("... non local key ...": see
/// lua/lib/common.lua's `emptied`).
pub(super) fn is_slot_moving(err: &redis::RedisError) -> bool {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    err.detail().is_some_and(|d| d.contains("non local key"))
        || code_of(err) == Some("TRYAGAIN")
        || matches!(err.kind(), K::Server(S::Ask | S::Moved))
}

/// True for a new connection refused before anything was sent: the server
/// is at its `maxclients`.
pub(super) fn is_at_maxclients(err: &redis::RedisError) -> bool {
    err.detail()
        .is_some_and(|d| d.starts_with("max number of clients"))
}

/// The code of the error a script raised, from Redis 6.2's wording of it:
/// `Error running script (call to f_<sha>): @user_script:<line>: <error>`,
/// where `<error>` is what the script raised (`WRONGTYPE the fence key
/// ...`), a command's error as is (`WRONGTYPE Operation against a key
/// ...`), or a command refused before it ran as `@user_script: <line>:
/// -READONLY You can't write ...`. Redis 7.0 and later reply with the
/// inner error's own code.
fn script_error_code(detail: &str) -> Option<&str> {
    let rest = detail.strip_prefix("Error running script (call to f_")?;
    let (_, rest) = rest.split_once("): @user_script:")?;
    let mut error = after_line(rest)?;
    if let Some(refused) = error.strip_prefix("@user_script: ") {
        error = after_line(refused)?.strip_prefix('-')?;
    }
    let code = error.split(' ').next()?;
    let upper = |b: u8| b.is_ascii_uppercase() || b == b'_';
    (code.len() > 1 && code.bytes().all(upper)).then_some(code)
}

/// What follows `<line>: ` in `text`, where `<line>` is a script's line
/// number.
fn after_line(text: &str) -> Option<&str> {
    let (line, rest) = text.split_once(": ")?;
    line.bytes().all(|b| b.is_ascii_digit()).then_some(rest)
}

/// The text after `code` in `err`'s reply, on every version: after the
/// code (Redis 7.0 and later: the detail; 6.2: after the code inside its
/// script error), up to the `" script: <name>, on @user_function:<line>."`
/// that Redis 7.0 and later end a script's error with.
fn after_code<'e>(err: &'e redis::RedisError, code: &str) -> &'e str {
    let detail = err.detail().unwrap_or_default();
    let rest = detail
        .split_once(&format!("{code} ")[..])
        .map_or(detail, |(_, rest)| rest);
    rest.rsplit_once(" script: ").map_or(rest, |(rest, _)| rest)
}

/// For an error whose code fairlock knows (as [`code_of`] reads it), its
/// kind and what to say; `None` for any other error.
pub(super) fn known(err: &redis::RedisError) -> Option<(ErrorKind, Cow<'static, str>)> {
    let code = code_of(err).unwrap_or_default();
    let detail = err.detail().unwrap_or_default();
    // Field `n` of the code's fields; the last one (a key) may hold spaces.
    let field = |n: usize| after_code(err, code).splitn(3, ' ').nth(n);
    let number = |n: usize| field(n)?.parse::<u64>().ok();
    let auth_failed = matches!(code, "WRONGPASS" | "NOAUTH")
        || err.kind() == redis::ErrorKind::AuthenticationFailed;
    // NOPERM, or a command a script runs denied: ERR, in words of each
    // version's own (7.0 and 6.2; 7.2 and later, Valkey); or a NOPERM the
    // redis crate passes on without its code, as the detail of its own
    // error: a connection's `SELECT` of the URL's database ("this user
    // has no permissions to run the 'select' command"; 7.2 and later,
    // Valkey: "User <name> has ...").
    let denied = code == "NOPERM"
        || detail.contains("user executing the script can't run")
        || detail.contains("ACL failure in script")
        || detail.contains("has no permissions to run");
    Some(match code {
        // Scripts read every key before writing it, so they stopped here
        // before touching the foreign value.
        "WRONGTYPE" => (
            ErrorKind::KeyConflict,
            "a key of this lock holds data fairlock did not write; it was left untouched".into(),
        ),
        // "FAIRLOCK_FORMAT <found> <mine> <key>" (lua/lib/common.lua's fail):
        // the lock's key holds data format <found> ("unversioned": before
        // formats), this build reads <mine>.
        "FAIRLOCK_FORMAT" => {
            let found = match field(0)? {
                "unversioned" => "no data format (a fairlock from before data formats)".to_owned(),
                n => format!("data format {n}"),
            };
            let message = format!(
                "the lock's key {} holds {found}, and this fairlock reads and writes data \
                 format {}: nothing was read or changed, and retrying will not help; every \
                 client of one lock must use builds of one data format: finish the deploy, or \
                 drain the lock first (docs/compatibility.md)",
                field(2).unwrap_or("?"),
                field(1)?
            );
            (ErrorKind::FormatMismatch, message.into())
        }
        // "FAIRLOCK_PERMITS_MISMATCH <this call's> <the lock's> <fence ms>"
        // (lua/counted/acquire.lua's check of the capacity).
        "FAIRLOCK_PERMITS_MISMATCH" => {
            let fence = match number(2) {
                Some(ms) => format!("{:?} (the fence life)", Duration::from_millis(ms)),
                None => "the fence life".to_owned(),
            };
            let message = format!(
                "two clients disagree on the number of permits: this call says {}, the \
                 semaphore has {}, the number it was first used with, and keeps it while in \
                 use and for {fence} after its last use, so retrying helps only after that; \
                 use the same number in every client, or set one for every client with \
                 set_permits (`fairlock permits NAME N`); nothing was changed",
                number(0)?,
                number(1)?
            );
            (ErrorKind::PermitsMismatch, message.into())
        }
        // "FAIRLOCK_PERMITS_EXCEEDED <asked> <set>" (lua/counted/acquire.lua).
        "FAIRLOCK_PERMITS_EXCEEDED" => {
            let message = format!(
                "this call asks for {} permits and the semaphore has {} now (its number was \
                 changed with set_permits): it could never be admitted; nothing is held",
                number(0)?,
                number(1)?
            );
            (ErrorKind::PermitsExceeded, message.into())
        }
        // "FAIRLOCK_PERMITS_REFUSED <asked>" (counted/acquire.lua: a poll
        // of a call refused while it waited).
        "FAIRLOCK_PERMITS_REFUSED" => {
            let message = format!(
                "this call, queued for {} permits, was refused when set_permits cut the \
                 semaphore's number below that (it may have been raised since); it left the \
                 queue and holds nothing: ask again",
                number(0)?
            );
            (ErrorKind::PermitsExceeded, message.into())
        }
        // "FAIRLOCK_UPGRADE_REFUSED <owner> <hold's token> <asked: write |
        // upgradable | downgrade> <held: read | upgradable | write>"
        // (counted/acquire.lua, counted/downgrade.lua).
        "FAIRLOCK_UPGRADE_REFUSED" => {
            let (owner, token) = (field(0)?, number(1)?);
            let asked = field(2).map_or(("", ""), |f| f.split_once(' ').unwrap_or((f, "")));
            let message = match asked {
                ("downgrade", _) => format!(
                    "this thread holds an upgradable read (or another write) of the rwlock beside \
                     the write of token {token} (owner {owner}), and only one upgradable read is \
                     held at a time: the write was released, its other guards are kept"
                ),
                ("write", "upgradable") => format!(
                    "this thread holds an upgradable read (owner {owner}, token {token}) and asked \
                     to write: upgrade that read instead, its other guards released first \
                     (waiting would deadlock); nothing was changed"
                ),
                ("write", _) => format!(
                    "this thread holds the rwlock for reading (owner {owner}, token {token}) and \
                     asked to write: release its read guards first, or take an upgradable read \
                     and upgrade it (waiting would deadlock); nothing was changed"
                ),
                _ => format!(
                    "this thread holds the rwlock (owner {owner}, token {token}) and asked for an \
                     upgradable read: only one is held at a time, and none beside a hold of its \
                     thread; release its guards first; nothing was changed"
                ),
            };
            (ErrorKind::UpgradeRefused, message.into())
        }
        // Refusals no retry can mend: credentials, a denied command.
        _ if auth_failed => (ErrorKind::Auth, CREDENTIALS_REFUSED.into()),
        _ if denied => (ErrorKind::Permission, PERMISSION_DENIED.into()),
        // The server's reply to a SELECT of a database it does not have
        // ("ERR DB index is out of range"), which the redis crate passes
        // on as the detail of its own error.
        _ if detail.contains("DB index") => (
            ErrorKind::InvalidConfig,
            "redis has no such database as the URL names (retrying cannot help)".into(),
        ),
        // A CLUSTER command sent to a server not in cluster mode ("ERR This
        // instance has cluster support disabled").
        _ if detail.contains("cluster support disabled") => (
            ErrorKind::InvalidConfig,
            "a redis+cluster URL names a server not in cluster mode (its cluster support is \
             disabled): use a redis:// URL"
                .into(),
        ),
        _ => return None,
    })
}

/// What an [`ErrorKind::Auth`] error says (behind Sentinel, see
/// [`SENTINEL_CREDENTIALS_REFUSED`]).
const CREDENTIALS_REFUSED: &str =
    "redis refused this client's credentials (fix the URL's user and password: retrying \
     cannot help)";

/// What an [`ErrorKind::Auth`] error of a Sentinel deployment's lookup
/// says: the Sentinels, or the master they name, refused.
pub(crate) const SENTINEL_CREDENTIALS_REFUSED: &str =
    "the sentinels, or the master they name, refused this client's credentials (fix the URL's \
     user and password for the master, or sentinel_username and sentinel_password for the \
     sentinels: retrying cannot help)";

/// What an [`ErrorKind::Permission`] error says.
const PERMISSION_DENIED: &str = "redis's ACL denies this client's user a command or key \
                                 fairlock needs (see docs/security.md: retrying cannot help)";
