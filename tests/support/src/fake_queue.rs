//! Drives one lock's scripts directly (the same Lua the client runs) to
//! build long queues cheaply: waiters with owner ids nobody listens for and
//! a long liveness deadline cost no threads. Used by tests/cost.rs and the
//! queue-scaling bench to measure server time against queue length; its
//! readers of a mutex's lock key ([`holder_of`], [`lease_left_of`]) serve
//! tests/protocol.rs too. Keys, scripts and arguments come from the
//! library's own protocol layer.

use std::time::Duration;

use fairlock::__test_support::{
    Acquire, Ask, CommonArgs, Lease, LockKeys, LockKind, Mode, Op, Operation, Release,
    ReleaseReply, Script,
};
use redis::Commands;

use crate::RedisServer;

/// Where a queue key's deadlines start (lua/lib/queue.lua's
/// DEADLINE_BASE): an entry is scored below it by its arrival number, and
/// `~<entry>` at it plus the entry's liveness deadline in server ms.
pub const DEADLINE_BASE: i64 = 1 << 50;

/// Waits (5 s each) until the lock `name` of `kind` has one waiter and
/// that waiter was heartbeated (its liveness deadline moved): its client
/// then has the reply that queued it (Redis queued it, the reply may still
/// be in a relay), as it heartbeats only waiters that had an answer.
pub fn wait_for_a_heartbeat(server: &RedisServer, kind: LockKind, name: &str) {
    let queue = LockKeys::of_kind("fairlock", name, kind).unwrap().all[1].clone();
    let mut conn = server.conn();
    let mut deadlines = || -> Vec<i64> {
        redis::cmd("ZRANGEBYSCORE")
            .arg(&queue)
            .arg(DEADLINE_BASE)
            .arg("+inf")
            .arg("WITHSCORES")
            .query::<Vec<(String, i64)>>(&mut conn)
            .unwrap()
            .into_iter()
            .map(|(_, score)| score)
            .collect()
    };
    let one = crate::wait_until(Duration::from_secs(5), || deadlines().len() == 1);
    assert!(one, "one waiter of the {kind:?} {name}");
    let first = deadlines();
    let beaten = crate::wait_until(Duration::from_secs(5), || deadlines() != first);
    assert!(
        beaten,
        "the waiter of the {kind:?} {name} is heartbeated ({first:?})"
    );
}

/// The entries in the queue key `queue` (a lock's second key): the
/// members scored below [`DEADLINE_BASE`], not their liveness deadlines.
pub fn queued_entries(conn: &mut redis::Connection, queue: &str) -> u64 {
    redis::cmd("ZCOUNT")
        .arg(queue)
        .arg("-inf")
        .arg(format!("({DEADLINE_BASE}"))
        .query(conn)
        .unwrap()
}

/// The library's default key prefix.
const PREFIX: &str = "fairlock";

/// The arguments every script takes first, as a client with the default
/// settings sends them.
fn common_args() -> [String; 2] {
    CommonArgs {
        wake_prefix: format!("{PREFIX}:wake:"),
        fence_life: fairlock::DEFAULT_FENCE_LIFE,
    }
    .args()
}

/// A hold as the lock key records it: owner id, fencing token, call id
/// (the first counted, when re-entered).
pub type Holder = (String, String, String);

/// A lock's anchor value (a lock key's, a meta's) without the data format
/// word "v<format> " this build writes first (src/protocol/format.rs); a
/// value without it as it is.
pub fn unversioned(stored: &str) -> &str {
    let word = format!("v{} ", fairlock::DATA_FORMAT);
    stored.strip_prefix(word.as_str()).unwrap_or(stored)
}

/// `fields` as a lock's anchor value of this build's data format.
pub fn versioned(fields: &str) -> String {
    format!("v{} {fields}", fairlock::DATA_FORMAT)
}

/// The hold recorded under the lock key `key`, if one is (the key reads
/// "v<format> <token> <owner>#<calls> <fence ms> <mark>" for a hold, the
/// fence ms after a '+' while waiters may be queued, whose lease may have
/// run out: see [`lease_left_of`], or "<token> - <mark>" once freed, "+"
/// for "-" while waiters may be queued).
pub fn holder_of(conn: &mut redis::Connection, key: &str) -> Option<Holder> {
    let stored: Option<String> = conn.get(key).unwrap();
    let stored = stored?;
    let mut parts = unversioned(&stored).split(' ');
    let (token, hold) = (parts.next()?, parts.next()?);
    let (owner, calls) = hold.rsplit_once('#')?;
    if ["-", "+"].contains(&hold) {
        return None;
    }
    let call = calls.split(',').next()?;
    Some((owner.to_owned(), token.to_owned(), call.to_owned()))
}

/// Ms of lease left to the hold under the lock key `key`: its PTTL less the
/// fence it keeps after the lease (-1: no expiry); `None` when no hold is
/// recorded.
pub fn lease_left_of(conn: &mut redis::Connection, key: &str) -> Option<i64> {
    let stored: Option<String> = conn.get(key).unwrap();
    let fence = unversioned(&stored?).split(' ').nth(2)?.to_owned();
    let fence: i64 = fence.trim_start_matches('+').parse().ok()?;
    let pttl: i64 = conn.pttl(key).unwrap();
    Some(if pttl == -1 { -1 } else { pttl - fence })
}

/// The keys of one lock, as the library names them, and its scripts.
pub struct ScriptedLock {
    pub keys: Vec<String>,
    acquire: redis::Script,
    release: redis::Script,
}

impl ScriptedLock {
    /// The keys of `name` (the library's own [`LockKeys`]); the server is
    /// only where the lock lives.
    pub fn new(_server: &RedisServer, name: &str) -> ScriptedLock {
        let keys = LockKeys::of_kind(PREFIX, name, LockKind::Mutex).expect("a valid lock name");
        ScriptedLock {
            keys: keys.common().to_vec(),
            acquire: redis::Script::new(Script::of(LockKind::Mutex, Op::Acquire).source()),
            release: redis::Script::new(Script::of(LockKind::Mutex, Op::Release).source()),
        }
    }

    /// Runs `op` as the client would, with its own KEYS and ARGV.
    fn invocation<'s>(
        &self,
        script: &'s redis::Script,
        args: Vec<String>,
    ) -> redis::ScriptInvocation<'s> {
        let mut inv = script.prepare_invoke();
        for k in &self.keys {
            inv.key(k);
        }
        inv.arg(&common_args());
        for arg in args {
            inv.arg(arg);
        }
        inv
    }

    fn acquire_invocation(&self, owner: &str, call: u64) -> redis::ScriptInvocation<'_> {
        // fixed 60 s lease, 10 min liveness: entries stay live for the run
        let op = Acquire {
            ask: Ask::Mutex,
            owner,
            lease: Lease::Fixed(Duration::from_secs(60)),
            waiter_timeout: Duration::from_secs(600),
            mode: Mode::First,
            call,
            live_token: 0,
        };
        self.invocation(&self.acquire, op.args())
    }

    /// Runs `script` on this lock's keys with ARGV = wake prefix, `args`
    /// (raw, for arguments no client sends); returns the reply or the error.
    pub fn eval(
        &self,
        conn: &mut redis::Connection,
        script: Script,
        args: &[&str],
    ) -> redis::RedisResult<redis::Value> {
        let script = redis::Script::new(script.source());
        self.invocation(&script, args.iter().map(|a| a.to_string()).collect())
            .invoke(conn)
    }

    /// Runs acquire ("first" mode) for `owner`; returns the script's reply
    /// (a free lock taken, a bare token, as `[1, token]`).
    pub fn acquire(&self, conn: &mut redis::Connection, owner: &str, call: u64) -> Vec<i64> {
        match self.acquire_invocation(owner, call).invoke(conn).unwrap() {
            redis::Value::Int(token) => vec![1, token],
            reply => redis::from_redis_value(fairlock::__test_support::words(reply)).unwrap(),
        }
    }

    /// Queues `count` waiters named `w<i>:1`, pipelined 1000 at a time.
    pub fn enqueue(&self, conn: &mut redis::Connection, count: u64) {
        let mut pipe = redis::pipe();
        for i in 0..count {
            pipe.invoke_script(&self.acquire_invocation(&format!("w{i}:1"), i))
                .ignore();
            if i % 1000 == 999 {
                pipe.query::<()>(conn).unwrap();
                pipe = redis::pipe();
            }
        }
        if !pipe.is_empty() {
            pipe.query::<()>(conn).unwrap();
        }
        assert_eq!(queued_entries(conn, &self.keys[1]), count);
    }

    /// Runs release for `owner` holding `token`, taken by acquire call
    /// `call`; returns holds left (0 also when handed over) or -1.
    pub fn release(&self, conn: &mut redis::Connection, (owner, token, call): &Holder) -> i64 {
        // Vouched for, as a client on the defaults (a lease well inside its
        // own count) sends it: no PTTL.
        let op = Release {
            owner,
            token: token.parse().expect("a numeric token"),
            call: call.parse().expect("a numeric call id"),
            vouched_until: Some(std::time::Instant::now() + std::time::Duration::from_secs(60)),
        };
        let reply: redis::Value = self
            .invocation(&self.release, op.args())
            .invoke(conn)
            .unwrap();
        match op.parse(reply).unwrap() {
            ReleaseReply::Released { left } => i64::from(left),
            ReleaseReply::HandedOver(_) => 0,
            ReleaseReply::NotHeld | ReleaseReply::Gone => -1,
        }
    }

    /// The current holder's owner id, token and (first) acquire call id.
    pub fn holder(&self, conn: &mut redis::Connection) -> Holder {
        holder_of(conn, &self.keys[0]).expect("the lock is held")
    }

    /// One lock cycle as the queue sees it. With a queue: the holder
    /// releases (handing over to the head) and a newcomer queues at the
    /// tail, so the length stays constant. Without: take, then release.
    pub fn cycle(&self, conn: &mut redis::Connection, queued: u64, n: u64) {
        let holder = self.holder(conn);
        assert_eq!(self.release(conn, &holder), 0);
        let reply = self.acquire(conn, &format!("n{n}:1"), queued + n);
        let expected = if queued == 0 { 1 } else { 0 };
        assert_eq!(reply[0], expected, "with {queued} queued");
    }
}

/// Total server microseconds spent in EVALSHA so far (INFO commandstats).
pub fn evalsha_usec(conn: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find(|f| f.starts_with("usec=")))
        .map(|f| f["usec=".len()..].parse().unwrap())
        .unwrap_or(0.0)
}

/// A lock named `name` held by a scripted owner, with `waiters` queued.
pub fn queue_of(
    server: &RedisServer,
    name: &str,
    waiters: u64,
) -> (ScriptedLock, redis::Connection) {
    let lock = ScriptedLock::new(server, name);
    let mut conn = server.conn();
    assert_eq!(
        lock.acquire(&mut conn, "holder:1", 0)[0],
        1,
        "the lock starts free"
    );
    lock.enqueue(&mut conn, waiters);
    (lock, conn)
}

/// Every Lua file of the library, with its text: those of `lua/lib/` and each
/// engine's folder of operations (`lua/mutex/`, `lua/counted/`), for tests
/// that check a property of all the scripts at the source level.
pub fn lua_sources() -> Vec<(std::path::PathBuf, String)> {
    let lua = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lua");
    let mut files: Vec<std::path::PathBuf> = ["lib", "mutex", "counted"]
        .into_iter()
        .flat_map(|dir| std::fs::read_dir(lua.join(dir)).expect("reading lua/"))
        .map(|entry| entry.expect("reading lua/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "lua"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("reading a script");
            (path, text)
        })
        .collect()
}

/// Removes every hold of a counted lock (`keys`: holders, queue, meta) by
/// hand, as an operator would: the holders
/// zset is deleted and a lone hold taken out of the meta ("<capacity>
/// <token> <owner>#<call> [+]<fence ms> <units> <mark>" becomes
/// "<capacity> <units> <token> <mark>[ +]": with no hold named, the
/// scripts count the used units as none). Returns how many holds it
/// removed from the meta (0 or 1).
pub fn remove_counted_holds(conn: &mut redis::Connection, keys: &[String]) -> usize {
    let () = redis::cmd("DEL").arg(&keys[0]).query(conn).unwrap();
    let stored: Option<String> = conn.get(&keys[2]).unwrap();
    let Some(stored) = stored else {
        return 0;
    };
    let fields: Vec<&str> = unversioned(&stored).split(' ').collect();
    // A lone hold: "<capacity> <token> <owner>#<call> [+]<fence ms> <units>
    // <mark>"; kept: "<capacity> <units> <token> <mark>[ +]", the units
    // still counted, as a holders key gone by itself leaves them.
    if fields.len() != 6 || !fields[2].contains('#') {
        return 0;
    }
    let waiters = if fields[3].starts_with('+') { " +" } else { "" };
    let kept = format!(
        "{} {} {} {}{waiters}",
        fields[0], fields[4], fields[1], fields[5]
    );
    let () = redis::cmd("SET")
        .arg(&keys[2])
        .arg(versioned(&kept))
        .arg("KEEPTTL")
        .query(conn)
        .unwrap();
    1
}

/// Every hold of a counted lock (`keys` as above) with its lease end,
/// server ms: the meta's lone hold, or the holders zset's hold members
/// (not their `#` token members).
pub fn counted_lease_ends(conn: &mut redis::Connection, keys: &[String]) -> Vec<(String, i64)> {
    if let Some((member, fence)) = lone_counted_hold(conn, keys) {
        // Its lease ends its fence ms before the meta expires: read from
        // the key's absolute expiry, so two readings of a hold nobody
        // renewed agree to the ms.
        return vec![(member, meta_expires_at(conn, &keys[2]) - fence)];
    }
    let members: Vec<(String, i64)> = conn.zrange_withscores(&keys[0], 0, -1).unwrap();
    members
        .into_iter()
        .filter(|(member, _)| !member.starts_with('#'))
        .collect()
}

/// Sets the lease end of counted hold `member` (server ms), where the
/// lock keeps it: the meta's lone hold (its expiry, the fence ms after the
/// lease end), or its holders zset member.
pub fn set_counted_lease_end(
    conn: &mut redis::Connection,
    keys: &[String],
    member: &str,
    end: i64,
) {
    if let Some((lone, fence)) = lone_counted_hold(conn, keys) {
        if lone == member {
            let set: i64 = redis::cmd("PEXPIREAT")
                .arg(&keys[2])
                .arg(end + fence)
                .query(conn)
                .unwrap();
            assert_eq!(set, 1, "the meta of {member:?} expires at its new end");
            return;
        }
    }
    let _: i64 = conn.zadd(&keys[0], member, end).unwrap();
}

/// The meta's lone hold, if it has one: its member name ("<owner> <call>
/// <units>") and its fence ms ("<capacity> <token> <owner>#<call>
/// [+]<fence ms> <units> <mark>").
fn lone_counted_hold(conn: &mut redis::Connection, keys: &[String]) -> Option<(String, i64)> {
    let stored: String = conn.get(&keys[2]).ok()?;
    let fields: Vec<&str> = unversioned(&stored).split(' ').collect();
    if fields.len() != 6 || !fields[2].contains('#') {
        return None;
    }
    let (owner, call) = fields[2].rsplit_once('#')?;
    let fence: i64 = fields[3].trim_start_matches('+').parse().ok()?;
    Some((format!("{owner} {call} {}", fields[4]), fence))
}

/// When `key` expires, server ms: `PEXPIRETIME` where the server has it
/// (Redis 7.0 and later, Valkey), else its clock and `PTTL` read in one
/// script.
fn meta_expires_at(conn: &mut redis::Connection, key: &str) -> i64 {
    if let Ok(at) = redis::cmd("PEXPIRETIME").arg(key).query::<i64>(conn) {
        return at;
    }
    let (s, us, pttl): (i64, i64, i64) = redis::Script::new(
        "local t = redis.call('TIME') return {tonumber(t[1]), tonumber(t[2]), redis.call('PTTL', KEYS[1])}",
    )
    .key(key)
    .invoke(conn)
    .unwrap();
    s * 1000 + us / 1000 + pttl
}
