//! The shape every Redis-side operation shares, and the scripts behind them.

use redis::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{LockKeys, LockKind};

/// Which family of scripts runs a kind of lock: the mutex keeps its own
/// single-key engine (its hold is one string, the fastest path fairlock
/// has), the semaphore and the reader-writer lock share the counted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// `lua/mutex/`: one holder, re-entrant, in one string key.
    Mutex,
    /// `lua/counted/`: holds that each take some units of a capacity.
    Counted,
}

impl Engine {
    /// The engine that runs a lock of `kind`.
    pub fn of(kind: LockKind) -> Engine {
        match kind {
            LockKind::Mutex => Engine::Mutex,
            LockKind::Semaphore | LockKind::RwLock => Engine::Counted,
        }
    }
}

/// A Redis-side operation, whatever the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `acquire.lua`
    Acquire,
    /// `release.lua`
    Release,
    /// `renew.lua`
    Renew,
    /// `heartbeat.lua`
    Heartbeat,
    /// `cancel.lua`
    Cancel,
    /// `abandon.lua`
    Abandon,
    /// `force_release.lua`
    ForceRelease,
    /// `status.lua`
    Status,
}

/// The Lua scripts, one per operation and engine: the operation's own file
/// preceded by only the helpers of `lua/lib.lua` it uses, picked by
/// `build.rs` (Redis reruns a script's every definition on each call) and
/// embedded here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Script {
    /// The engine's folder.
    pub engine: Engine,
    /// The operation's file in it.
    pub op: Op,
}

macro_rules! with_lib {
    ($file:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/", $file))
    };
}

impl Script {
    /// Every script, e.g. to load them all at once.
    pub const ALL: [Script; 16] = {
        const OPS: [Op; 8] = [
            Op::Acquire,
            Op::Release,
            Op::Renew,
            Op::Heartbeat,
            Op::Cancel,
            Op::Abandon,
            Op::ForceRelease,
            Op::Status,
        ];
        let mut all = [Script {
            engine: Engine::Mutex,
            op: Op::Acquire,
        }; 16];
        let mut i = 0;
        while i < 8 {
            all[i].op = OPS[i];
            all[8 + i] = Script {
                engine: Engine::Counted,
                op: OPS[i],
            };
            i += 1;
        }
        all
    };

    /// The script of `op` for a lock of `kind`.
    pub fn of(kind: LockKind, op: Op) -> Script {
        Script {
            engine: Engine::of(kind),
            op,
        }
    }

    /// The script's whole source, the helpers it uses included.
    pub fn source(self) -> &'static str {
        match (self.engine, self.op) {
            (Engine::Mutex, Op::Acquire) => with_lib!("mutex/acquire.lua"),
            (Engine::Mutex, Op::Release) => with_lib!("mutex/release.lua"),
            (Engine::Mutex, Op::Renew) => with_lib!("mutex/renew.lua"),
            (Engine::Mutex, Op::Heartbeat) => with_lib!("mutex/heartbeat.lua"),
            (Engine::Mutex, Op::Cancel) => with_lib!("mutex/cancel.lua"),
            (Engine::Mutex, Op::Abandon) => with_lib!("mutex/abandon.lua"),
            (Engine::Mutex, Op::ForceRelease) => with_lib!("mutex/force_release.lua"),
            (Engine::Mutex, Op::Status) => with_lib!("mutex/status.lua"),
            (Engine::Counted, Op::Acquire) => with_lib!("counted/acquire.lua"),
            (Engine::Counted, Op::Release) => with_lib!("counted/release.lua"),
            (Engine::Counted, Op::Renew) => with_lib!("counted/renew.lua"),
            (Engine::Counted, Op::Heartbeat) => with_lib!("counted/heartbeat.lua"),
            (Engine::Counted, Op::Cancel) => with_lib!("counted/cancel.lua"),
            (Engine::Counted, Op::Abandon) => with_lib!("counted/abandon.lua"),
            (Engine::Counted, Op::ForceRelease) => with_lib!("counted/force_release.lua"),
            (Engine::Counted, Op::Status) => with_lib!("counted/status.lua"),
        }
    }
}

/// The two arguments every script takes first, the same for every call of
/// one client: ARGV[1] the wake channel prefix (a client's channel is it
/// followed by the client id), ARGV[2] how long a free lock's key (its
/// last fencing token) outlives the release that freed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonArgs {
    /// `<key prefix>:wake:`.
    pub wake_prefix: String,
    /// How long a free lock's key outlives its release.
    pub fence_life: std::time::Duration,
}

impl CommonArgs {
    /// ARGV[1] and ARGV[2].
    pub fn args(&self) -> [String; 2] {
        [self.wake_prefix.clone(), ms(self.fence_life)]
    }
}

/// One Redis-side operation on one lock: which script it runs, with which
/// KEYS and ARGV (after the [`CommonArgs`] every script takes), and what its
/// reply means. The order of both lives here only.
pub trait Operation {
    /// The reply, parsed.
    type Reply;

    /// The operation, whose script follows from the lock's kind.
    const OP: Op;

    /// The script it runs on the lock `keys`.
    fn script(&self, keys: &LockKeys) -> Script {
        Script::of(keys.kind(), Self::OP)
    }

    /// KEYS: all the lock's keys unless the script needs fewer.
    fn keys<'k>(&self, keys: &'k LockKeys) -> &'k [String] {
        &keys.all
    }

    /// ARGV after the common arguments, in the script's order.
    fn args(&self) -> Vec<String>;

    /// The script's reply, typed.
    fn parse(&self, reply: Value) -> Result<Self::Reply>;
}

/// A reply no fairlock script gives.
pub fn unexpected(what: &dyn std::fmt::Debug) -> Error {
    Error::new(
        ErrorKind::Server,
        format!("unexpected reply from a fairlock script: {what:?}"),
    )
}

/// A reply made only of integers (an error reply is the error).
pub fn int_list(value: Value) -> Result<Vec<i64>> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Int(n) => Ok(n),
                other => Err(unexpected(&other)),
            })
            .collect(),
        Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
        other => Err(unexpected(&other)),
    }
}

/// A string in a script's reply.
pub fn text(value: &Value) -> Result<String> {
    redis::from_redis_value_ref(value).map_err(|_| unexpected(value))
}

/// An integer in a script's reply.
pub fn int(value: &Value) -> Result<i64> {
    redis::from_redis_value_ref(value).map_err(|_| unexpected(value))
}

/// A count, token or call id in a script's reply: a non-negative integer.
pub fn count(value: &Value) -> Result<u64> {
    u64::try_from(int(value)?).map_err(|_| unexpected(value))
}

/// The listed holders and waiters of a status reply shaped as
/// `counted/status.lua`'s: `head` fixed fields, the last
/// of them the number of holders listed (at most `max_holders`), then those
/// holders of `holder_width` fields each, then waiters of `waiter_width`
/// fields each.
pub fn listed_parts(
    items: &[Value],
    head: usize,
    max_holders: usize,
    holder_width: usize,
    waiter_width: usize,
) -> Result<(&[Value], &[Value])> {
    let listed = count(&items[head - 1])? as usize;
    let rest = &items[head..];
    let holders_len = holder_width * listed;
    if listed > max_holders
        || rest.len() < holders_len
        || !(rest.len() - holders_len).is_multiple_of(waiter_width)
    {
        return Err(unexpected(&items));
    }
    Ok(rest.split_at(holders_len))
}

/// A duration as whole milliseconds, for ARGV.
pub fn ms(duration: std::time::Duration) -> String {
    duration.as_millis().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIB: &str = include_str!("../../lua/lib.lua");

    /// Each script's own file.
    fn own_file(script: Script) -> &'static str {
        match (script.engine, script.op) {
            (Engine::Mutex, Op::Acquire) => include_str!("../../lua/mutex/acquire.lua"),
            (Engine::Mutex, Op::Release) => include_str!("../../lua/mutex/release.lua"),
            (Engine::Mutex, Op::Renew) => include_str!("../../lua/mutex/renew.lua"),
            (Engine::Mutex, Op::Heartbeat) => include_str!("../../lua/mutex/heartbeat.lua"),
            (Engine::Mutex, Op::Cancel) => include_str!("../../lua/mutex/cancel.lua"),
            (Engine::Mutex, Op::Abandon) => include_str!("../../lua/mutex/abandon.lua"),
            (Engine::Mutex, Op::ForceRelease) => {
                include_str!("../../lua/mutex/force_release.lua")
            }
            (Engine::Mutex, Op::Status) => include_str!("../../lua/mutex/status.lua"),
            (Engine::Counted, Op::Acquire) => include_str!("../../lua/counted/acquire.lua"),
            (Engine::Counted, Op::Release) => include_str!("../../lua/counted/release.lua"),
            (Engine::Counted, Op::Renew) => include_str!("../../lua/counted/renew.lua"),
            (Engine::Counted, Op::Heartbeat) => include_str!("../../lua/counted/heartbeat.lua"),
            (Engine::Counted, Op::Cancel) => include_str!("../../lua/counted/cancel.lua"),
            (Engine::Counted, Op::Abandon) => include_str!("../../lua/counted/abandon.lua"),
            (Engine::Counted, Op::ForceRelease) => {
                include_str!("../../lua/counted/force_release.lua")
            }
            (Engine::Counted, Op::Status) => include_str!("../../lua/counted/status.lua"),
        }
    }

    /// Lua with comments and string literals blanked out, byte for byte (a
    /// reading of its own, so that a slip in build.rs's is not repeated).
    fn code_only(src: &str) -> Vec<u8> {
        let b = src.as_bytes();
        let mut out = b.to_vec();
        let mut i = 0;
        while i < b.len() {
            let end = if b[i..].starts_with(b"--[[") {
                find(b, i, b"]]")
            } else if b[i..].starts_with(b"--") {
                find(b, i, b"\n") - 1
            } else if b[i..].starts_with(b"[[") {
                find(b, i, b"]]")
            } else if b[i] == b'\'' || b[i] == b'"' {
                let mut j = i + 1;
                while b[j] != b[i] {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                j + 1
            } else {
                i += 1;
                continue;
            };
            for c in &mut out[i..end] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
            i = end;
        }
        out
    }

    /// Past the first `close` after `from` (or the end).
    fn find(b: &[u8], from: usize, close: &[u8]) -> usize {
        b[from + 1..]
            .windows(close.len())
            .position(|w| w == close)
            .map_or(b.len(), |p| from + 1 + p + close.len())
    }

    /// Every identifier of `code` that is not a field (after `.` or `:`),
    /// with its offset, and whether it is defined there: a name before the
    /// `=` (or the function's name) of a `local` at column 0.
    fn identifiers(code: &[u8]) -> Vec<(String, usize, bool)> {
        let word = |c: u8| c == b'_' || c.is_ascii_alphanumeric();
        let mut found = Vec::new();
        let mut line_start = 0;
        let mut i = 0;
        while i < code.len() {
            if code[i] == b'\n' {
                line_start = i + 1;
            }
            if !word(code[i]) || (i > 0 && word(code[i - 1])) {
                i += 1;
                continue;
            }
            let start = i;
            while i < code.len() && word(code[i]) {
                i += 1;
            }
            if code[start].is_ascii_digit()
                || (start > 0 && code[start - 1] == b':')
                || (start > 0 && code[start - 1] == b'.' && code[start - 2] != b'.')
            {
                continue;
            }
            let line = &code[line_start..];
            let head = &line[..line.iter().position(|&c| c == b'\n').unwrap_or(line.len())];
            let lhs_end = line_start
                + if head.starts_with(b"local function ") {
                    head.iter().position(|&c| c == b'(').unwrap_or(head.len())
                } else if head.starts_with(b"local ") {
                    head.iter().position(|&c| c == b'=').unwrap_or(head.len())
                } else {
                    0
                };
            let name = String::from_utf8(code[start..i].to_vec()).unwrap();
            let defined = start < lhs_end && name != "local" && name != "function";
            found.push((name, start, defined));
        }
        found
    }

    /// The names lib.lua defines at the top level.
    fn lib_names() -> Vec<String> {
        let mut names: Vec<String> = identifiers(&code_only(LIB))
            .into_iter()
            .filter(|(_, _, defined)| *defined)
            .map(|(name, _, _)| name)
            .collect();
        names.dedup();
        names
    }

    /// Where the operation's own code lies in its assembled `source`: one
    /// range per section between its `-- @helpers` lines (build.rs puts the
    /// helpers they name after the first line of each run).
    fn own_parts(source: &str, own: &str) -> Vec<std::ops::Range<usize>> {
        let mut sections = vec![String::new()];
        let mut in_marker = false;
        for line in own.lines() {
            if line.starts_with("-- @helpers") {
                if !in_marker {
                    sections.push(String::new());
                }
                in_marker = true;
                continue;
            }
            in_marker = false;
            let section = sections.last_mut().unwrap();
            section.push_str(line);
            section.push('\n');
        }
        let mut from = 0;
        let parts: Vec<_> = sections
            .iter()
            .map(|section| {
                let at = from
                    + source[from..]
                        .find(section.as_str())
                        .expect("each section in order");
                from = at + section.len();
                at..from
            })
            .collect();
        assert_eq!(from, source.len(), "the last section ends the script");
        parts
    }

    /// The operation's own code as one part, from `from` to the end.
    fn own_from(source: &str, from: usize) -> Vec<std::ops::Range<usize>> {
        std::iter::once(from..source.len()).collect()
    }

    /// What is wrong with `source` (helpers, and the operation's own code
    /// in the ranges `own`) as to lib.lua's names: one defined twice, used
    /// before (or without) its definition, or defined though neither the
    /// operation nor a helper it needs (transitively) uses it.
    fn problems(source: &str, own: &[std::ops::Range<usize>]) -> Vec<String> {
        let names = lib_names();
        let found = identifiers(&code_only(source));
        let in_own = |at: usize| own.iter().any(|r| r.contains(&at));
        let mut problems = Vec::new();
        // Each definition of a lib name reaches to the next one, or to the
        // next part of the operation's own code.
        let mut defs: Vec<(&str, usize)> = found
            .iter()
            .filter(|(n, at, d)| *d && !in_own(*at) && names.contains(n))
            .map(|(n, at, _)| (n.as_str(), *at))
            .collect();
        defs.sort_by_key(|d| d.1);
        let (found_ref, names_ref) = (&found, &names);
        let uses_in = |from: usize, to: usize| {
            found_ref
                .iter()
                .filter(move |(n, at, d)| !*d && (from..to).contains(at) && names_ref.contains(n))
                .map(|(n, _, _)| n.as_str())
        };
        let mut needed: Vec<&str> = own.iter().flat_map(|r| uses_in(r.start, r.end)).collect();
        let mut i = 0;
        while i < needed.len() {
            for (k, &(name, at)) in defs.iter().enumerate() {
                if name == needed[i] {
                    let next_own = own.iter().map(|r| r.start).filter(|&s| s > at).min();
                    let next_def = defs.get(k + 1).map(|next| next.1);
                    let to = [next_own, next_def]
                        .into_iter()
                        .flatten()
                        .min()
                        .unwrap_or(source.len());
                    needed.extend(uses_in(at, to).filter(|n| *n != name));
                }
            }
            i += 1;
        }
        for name in &names {
            let at: Vec<usize> = defs.iter().filter(|d| d.0 == name).map(|d| d.1).collect();
            let first_use = found.iter().find(|(n, _, d)| n == name && !*d).map(|f| f.1);
            match (at.as_slice(), first_use) {
                ([], None) => {}
                ([], Some(_)) => problems.push(format!("{name} is used, never defined")),
                ([def], Some(used)) if *def > used => {
                    problems.push(format!("{name} is used before its definition"))
                }
                ([_], _) if !needed.contains(&name.as_str()) => {
                    problems.push(format!("{name} is defined and never used"))
                }
                ([_], _) => {}
                _ => problems.push(format!("{name} is defined {} times", at.len())),
            }
        }
        problems
    }

    #[test]
    fn each_script_defines_the_helpers_it_uses_and_no_other() {
        let names = lib_names();
        for must in ["LOCK", "FENCE_LIFE", "fmt", "hand_over", "extend_lease"] {
            assert!(names.iter().any(|n| n == must), "{must} not in {names:?}");
        }
        for script in Script::ALL {
            let source = script.source();
            let own = own_parts(source, own_file(script));
            assert_eq!(problems(source, &own), Vec::<String>::new(), "{script:?}");
        }
        // Renew, the watchdog's most frequent call, needs only these.
        let renew = identifiers(&code_only(Script::of(LockKind::Mutex, Op::Renew).source()));
        let defined: Vec<&str> = renew
            .iter()
            .filter(|f| f.2 && names.contains(&f.0))
            .map(|f| f.0.as_str())
            .collect();
        assert_eq!(defined, ["LOCK", "fail", "ms_arg"]);
        // The fast paths of acquire and release (a free lock or permit
        // nobody waits for), and of the rwlock's cancel (a hold kept) and
        // abandon (a hold given back with nobody waiting, or nothing to
        // undo), build only the closures they call, none of the queue's.
        let mutex = |op| Script::of(LockKind::Mutex, op);
        let counted = |op| Script::of(LockKind::Semaphore, op);
        for (script, fast) in [
            (
                mutex(Op::Acquire),
                ["fail", "ms_arg", "read_lock", "server_time", "take"].as_slice(),
            ),
            (
                mutex(Op::Release),
                ["fail", "ms_arg", "read_lock", "write_free"].as_slice(),
            ),
            (
                counted(Op::Acquire),
                ["read_meta", "drop_expired", "take_hold", "keep_counted"].as_slice(),
            ),
            (
                counted(Op::Release),
                ["read_meta", "hold_by_token", "drop_hold", "keep_counted"].as_slice(),
            ),
            (
                counted(Op::Cancel),
                ["read_meta", "hold_of", "extend_hold", "keep_counted"].as_slice(),
            ),
            (
                counted(Op::Abandon),
                ["read_meta", "hold_of", "drop_hold", "keep_counted"].as_slice(),
            ),
        ] {
            let source = script.source();
            let fast_end = own_parts(source, own_file(script))[1].end;
            let found = identifiers(&code_only(&source[..fast_end]));
            let functions: Vec<&str> = found
                .iter()
                .filter(|f| f.2 && names.contains(&f.0))
                .map(|f| f.0.as_str())
                .collect();
            for f in fast {
                assert!(functions.contains(f), "{script:?} fast path lacks {f}");
            }
            for slow in ["hand_over", "admit_waiters", "live_head", "join_queue"] {
                assert!(
                    !functions.contains(&slow),
                    "{script:?} fast path builds {slow}: {functions:?}"
                );
            }
        }
    }

    #[test]
    fn the_check_sees_a_helper_missing_or_unused() {
        let has = |problems: Vec<String>, what: &str| problems.iter().any(|p| p == what);
        // The whole library in front (how scripts were built before):
        // renew.lua leaves most of it unused, helpers used only by other
        // unused helpers too.
        let whole = format!("{LIB}{}", own_file(Script::of(LockKind::Mutex, Op::Renew)));
        let unused = problems(&whole, &own_from(&whole, LIB.len()));
        assert!(has(unused.clone(), "hand_over is defined and never used"));
        assert!(has(unused.clone(), "leave_queue is defined and never used"));
        assert!(!unused
            .iter()
            .any(|p| p.starts_with("ms_arg") || p.starts_with("fail ")));
        // Its own file alone calls a helper nobody defined.
        let renew = own_file(Script::of(LockKind::Mutex, Op::Renew));
        let bare = problems(renew, &own_from(renew, 0));
        assert!(has(bare, "ms_arg is used, never defined"));
        // A name in a comment or a string is no use of it.
        let quoted = "local function fmt(n)\nend\n-- fmt(1)\nreturn 'fmt(2)'\n";
        assert!(has(
            problems(quoted, &own_from(quoted, quoted.find("--").unwrap())),
            "fmt is defined and never used"
        ));
        // A helper's own recursion or a helper defined after its use.
        let late = "local function fail(m)\n  return fmt(m)\nend\nlocal function fmt(n)\nend\nreturn fail(1)\n";
        assert!(has(
            problems(late, &own_from(late, late.find("return fail").unwrap())),
            "fmt is used before its definition"
        ));
    }
}
