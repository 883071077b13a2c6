//! The suite's one driver: a lock of any kind on a fresh server, its
//! scripts run as the client runs them (the script its kind's engine has
//! for an operation, the lock's keys, the common arguments of a client with
//! the default settings, then the operation's own, all from the library's
//! protocol layer), and what its keys hold read back. What a call asks for
//! is an [`Ask`]; a hold is named by its owner, call, units and token.
//!
//! After every operation it runs, every key has a TTL; on a counted lock
//! (a semaphore, a rwlock) the meta (capacity, used units, last token, last
//! release, and a lone hold) outlives the holders and the queue, the
//! meta's used units are the units of its lone hold or of the holds in the
//! holders zset, and each hold there has its token beside it.

use std::time::Duration;

pub use fairlock::__test_support::{
    error_from_redis, Abandon, AbandonReply, Access, Acquire, AcquireReply, Ask, Cancel,
    CancelReply, CommonArgs, Engine, ForceRelease, Freed, HandedOver, Heartbeat, HeartbeatReply,
    Lease, LockKeys, LockKind, Mode, Op, Operation, PermitsSet, QueueEntry, Release, ReleaseReply,
    Renew, Script, SetPermits, Status, StatusReply, WaiterStatus, RW_CAPACITY,
};
pub use fairlock::__test_support::{
    Downgrade, DowngradeReply, Upgrade, UpgradeReply, UpgradeStep, RW_UPGRADABLE,
};
pub use fairlock_test_support::*;
pub use redis::{Commands, Value};
pub use std::thread::sleep;

/// The library's default key prefix.
pub const PREFIX: &str = "fairlock";
/// A lease that outlives any test step.
pub const LONG: Duration = Duration::from_secs(60);
/// A lease a test waits out.
pub const SHORT: Duration = Duration::from_millis(150);
/// What a release of a counted lock answers when it admits nobody: it
/// counts no re-entries, so no holds are left of the call.
pub const RELEASED: ReleaseReply = ReleaseReply::Released { left: 0 };
/// A rwlock's read (1 unit) and write (all of RW_CAPACITY).
pub const READ: Ask = Ask::RwLock(Access::Read);
pub const WRITE: Ask = Ask::RwLock(Access::Write);

/// `n` of a semaphore's `of` permits.
pub const fn permits(n: u32, of: u32) -> Ask {
    Ask::Permits { n, of }
}

/// What a shared scenario asks of a lock of each kind: an ask of one unit
/// (a permit of a semaphore of `of`, a read) and of every unit (all `of`
/// permits, a write); a mutex's hold (an election's too) is both.
pub trait Kind: Copy {
    fn one(self, of: u32) -> Ask;
    fn all(self, of: u32) -> Ask;
    /// A fresh lock of this kind named `name`.
    fn lock(self, name: &str) -> Lock;
}

impl Kind for LockKind {
    fn one(self, of: u32) -> Ask {
        match self {
            LockKind::Mutex | LockKind::Election => Ask::Mutex,
            LockKind::Semaphore => permits(1, of),
            LockKind::RwLock => READ,
            other => unreachable!("no lock of kind {other:?} here"),
        }
    }

    fn all(self, of: u32) -> Ask {
        match self {
            LockKind::Mutex | LockKind::Election => Ask::Mutex,
            LockKind::Semaphore => permits(of, of),
            LockKind::RwLock => WRITE,
            other => unreachable!("no lock of kind {other:?} here"),
        }
    }

    fn lock(self, name: &str) -> Lock {
        Lock::new(self, name)
    }
}

/// One lock's scripts on a fresh server.
pub struct Lock {
    pub server: RedisServer,
    pub keys: LockKeys,
    /// Runs the checks (an admin connection), and the scripts unless
    /// `runner` is set.
    pub conn: redis::Connection,
    /// Runs the scripts, when not `conn` (the ACL user of docs/security.md).
    pub runner: Option<redis::Connection>,
    /// The waiter timeout attempts send (60 s unless a test sets it).
    pub waiter_timeout: Duration,
}

/// A hold: owner, call, the units it took (a mutex's: 1), token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub owner: String,
    pub call: u64,
    pub units: u32,
    pub token: u64,
}

impl Lock {
    pub fn new(kind: LockKind, name: &str) -> Lock {
        let server = RedisServer::start();
        let conn = server.conn();
        Lock {
            keys: LockKeys::of_kind(PREFIX, name, kind).unwrap(),
            server,
            conn,
            runner: None,
            waiter_timeout: LONG,
        }
    }

    pub fn kind(&self) -> LockKind {
        self.keys.kind()
    }

    fn counted(&self) -> bool {
        !matches!(self.kind(), LockKind::Mutex | LockKind::Election)
    }

    /// Runs `script` with all the lock's keys, the common arguments of a
    /// client with the default settings, then `args` (raw: arguments no
    /// client sends too).
    pub fn eval<S: AsRef<str>>(&mut self, script: Script, args: &[S]) -> redis::RedisResult<Value> {
        let keys = self.keys.all.clone();
        let conn = self.runner.as_mut().unwrap_or(&mut self.conn);
        eval_on(conn, &keys, script, args)
    }

    /// Runs `op` as the client does: the script its operation has on the
    /// lock's kind, its keys and arguments; then checks every key expires.
    pub fn run<O: Operation>(&mut self, op: &O) -> fairlock::Result<O::Reply> {
        let keys = op.keys(&self.keys).to_vec();
        assert!(self.keys.all.starts_with(&keys), "{keys:?}");
        if self.counted() {
            assert!(keys.len() >= 3, "every counted script takes its 3 keys");
        }
        assert_eq!(
            keys.len() == self.keys.all.len(),
            O::OP == Op::ForceRelease,
            "only the force release takes its record"
        );
        let script = op.script(&self.keys);
        let engine = match self.kind() {
            LockKind::Mutex => Engine::Mutex,
            LockKind::Election => Engine::Election,
            LockKind::Semaphore | LockKind::RwLock => Engine::Counted,
            other => unreachable!("no lock of kind {other:?} here"),
        };
        assert_eq!(
            script,
            Script { engine, op: O::OP },
            "a {:?} runs the {engine:?} engine's script",
            self.kind()
        );
        let args = op.args_on(self.kind());
        let conn = self.runner.as_mut().unwrap_or(&mut self.conn);
        let reply = match eval_on(conn, &keys, script, &args) {
            Ok(reply) => op.parse(reply),
            Err(e) => Err(error_from_redis(e)),
        };
        self.assert_every_key_expires();
        reply
    }

    /// One attempt asking for `ask` with the live guard `guard` (or 0) and
    /// `lease` (fixed or renewed).
    pub fn attempt_with(
        &mut self,
        owner: &str,
        call: u64,
        mode: Mode,
        ask: Ask,
        guard: u64,
        lease: Lease,
    ) -> fairlock::Result<AcquireReply> {
        self.run(&Acquire {
            ask,
            owner,
            lease,
            waiter_timeout: self.waiter_timeout,
            mode,
            call,
            live_token: guard,
        })
    }

    /// One attempt of call `call` of `owner` for `ask` (a watchdog lease of
    /// 60 s, no live guard).
    pub fn attempt(&mut self, owner: &str, call: u64, mode: Mode, ask: Ask) -> AcquireReply {
        self.attempt_with(owner, call, mode, ask, 0, Lease::Renewed(LONG))
            .unwrap()
    }

    /// A fixed lease of `lease` taken at once, or a panic.
    pub fn take_fixed(&mut self, owner: &str, call: u64, ask: Ask, lease: Duration) -> Hold {
        match self
            .attempt_with(owner, call, Mode::First, ask, 0, Lease::Fixed(lease))
            .unwrap()
        {
            AcquireReply::Acquired { token, .. } => hold(owner, call, ask, token),
            other => panic!("{owner} did not get {ask:?}: {other:?}"),
        }
    }

    /// A hold taken at once (with the live guard `guard`, or 0), or a panic.
    pub fn take_with(&mut self, owner: &str, call: u64, ask: Ask, guard: u64) -> Hold {
        match self
            .attempt_with(owner, call, Mode::First, ask, guard, Lease::Renewed(LONG))
            .unwrap()
        {
            AcquireReply::Acquired { token, .. } => hold(owner, call, ask, token),
            other => panic!("{owner} did not get {ask:?}: {other:?}"),
        }
    }

    pub fn take(&mut self, owner: &str, call: u64, ask: Ask) -> Hold {
        self.take_with(owner, call, ask, 0)
    }

    /// Queues call `call` of `owner` for `ask`; returns its position.
    pub fn queue(&mut self, owner: &str, call: u64, ask: Ask) -> u64 {
        match self.attempt(owner, call, Mode::First, ask) {
            AcquireReply::Waiting {
                position: Some(p), ..
            } => p,
            other => panic!("{owner} did not queue: {other:?}"),
        }
    }

    pub fn release(&mut self, hold: &Hold) -> ReleaseReply {
        self.run(&Release {
            owner: &hold.owner,
            token: hold.token,
            call: hold.call,
            vouched_until: None,
        })
        .unwrap()
    }

    /// The holds a release handed over.
    pub fn handed(&mut self, hold: &Hold) -> Vec<Hold> {
        match self.release(hold) {
            ReleaseReply::HandedOver(grants) => {
                grants.into_iter().map(|g| self.granted(g)).collect()
            }
            ReleaseReply::Released { left } => {
                assert_eq!(left, 0, "a counted hold is one call: none left");
                Vec::new()
            }
            ReleaseReply::NotHeld | ReleaseReply::Gone => panic!("{hold:?} was not held"),
        }
    }

    /// The hold `grant` made. A counted grant names no units: they are read
    /// from the hold its token names (the meta's lone hold, or the holders
    /// zset's member scored by minus the token), which must be the grant's
    /// call and name the token back. A mutex's is the holder its lock key
    /// records.
    pub fn granted(&mut self, grant: HandedOver) -> Hold {
        if !self.counted() {
            let holder = holder_of(&mut self.conn, &self.keys.all[0]);
            let expected = (
                grant.owner.clone(),
                grant.token.to_string(),
                grant.call.to_string(),
            );
            assert_eq!(holder, Some(expected), "{grant:?}");
            return Hold {
                owner: grant.owner,
                call: grant.call,
                units: 1,
                token: grant.token,
            };
        }
        let member = self
            .member_of_token(grant.token)
            .unwrap_or_else(|| panic!("no hold has the token of {grant:?}"));
        let parts: Vec<&str> = member.split(' ').collect();
        assert_eq!(
            parts[..2],
            [grant.owner.as_str(), grant.call.to_string().as_str()],
            "{member}: {grant:?}"
        );
        assert_eq!(self.token_of(&member), grant.token, "{member}");
        Hold {
            units: parts[2].parse().unwrap(),
            owner: grant.owner,
            call: grant.call,
            token: grant.token,
        }
    }

    /// The hold of call `call` of `owner` for `ask`, its token read from
    /// the lock's keys (a hold handed over, or taken by a re-entry; a
    /// mutex's: the holder's, whoever it is).
    pub fn hold_of(&mut self, owner: &str, call: u64, ask: Ask) -> Hold {
        let token = if self.counted() {
            self.token_of(&format!("{owner} {call} {}", ask.units()))
        } else {
            let (_, token, _) = holder_of(&mut self.conn, &self.keys.all[0]).unwrap();
            token.parse().unwrap()
        };
        hold(owner, call, ask, token)
    }

    pub fn renew(&mut self, hold: &Hold, lease: Option<Duration>) -> bool {
        self.run(&Renew {
            owner: &hold.owner,
            token: hold.token,
            first: hold.token,
            call: hold.call,
            lease,
        })
        .unwrap()
        .is_held()
    }

    /// A heartbeat of `entries` with a waiter timeout of `timeout`.
    pub fn heartbeat(&mut self, timeout: Duration, entries: &[QueueEntry]) -> HeartbeatReply {
        self.run(&Heartbeat {
            waiter_timeout: timeout,
            waiters: entries.to_vec(),
        })
        .unwrap()
    }

    pub fn cancel(&mut self, entry: QueueEntry) -> CancelReply {
        self.run(&Cancel { entry }).unwrap()
    }

    pub fn abandon(&mut self, entry: QueueEntry) -> AbandonReply {
        self.run(&Abandon { entry }).unwrap()
    }

    /// A force release sent as call `call_key` ("<client id>#<call id>").
    pub fn force_release(&mut self, call_key: &str) -> Freed {
        self.run(&ForceRelease {
            call_key: call_key.to_owned(),
        })
        .unwrap()
    }

    /// A semaphore's permits set to `permits`.
    pub fn set_permits(&mut self, permits: u32) -> PermitsSet {
        self.run(&SetPermits { permits }).unwrap()
    }

    /// The status, listing at most `waiters` and `holders`; it must change
    /// nothing, and when it lists every live hold their units must be the
    /// units it says are used.
    pub fn status(&mut self, waiters: usize, holders: usize) -> StatusReply {
        let before = self.snapshot();
        let reply = self
            .run(&Status {
                kind: self.kind(),
                waiters,
                holders,
            })
            .unwrap();
        assert_eq!(self.snapshot(), before, "status changes nothing");
        if reply.holders.len() as u64 == reply.live_holds {
            let units: u64 = reply.holders.iter().map(|h| h.units).sum();
            assert_eq!(units, reply.used, "{reply:?}");
        }
        reply
    }

    /// The meta's lone hold: (its name "<owner> <call> <units>", its
    /// token, its lease end in server ms), the meta being "<capacity>
    /// <token> <owner>#<call> [+]<fence ms> <units> <mark or ->" with the
    /// lease end its PTTL less its fence ms from now.
    pub fn lone(&mut self) -> Option<(String, u64, i64)> {
        let (parts, fence) = self.lone_parts()?;
        let (owner, call) = parts[2].rsplit_once('#').unwrap();
        let pttl = self.pttl(2);
        let now = self.now_ms();
        Some((
            format!("{owner} {call} {}", parts[4]),
            parts[1].parse().unwrap(),
            now + pttl - fence,
        ))
    }

    /// The words of a meta with a lone hold, and its fence ms.
    fn lone_parts(&mut self) -> Option<(Vec<String>, i64)> {
        let meta = self.meta()?;
        let parts: Vec<String> = meta.split(' ').map(str::to_owned).collect();
        if parts.len() != 6 || !parts[2].contains('#') {
            return None;
        }
        let fence = parts[3].trim_start_matches('+').parse().unwrap();
        Some((parts, fence))
    }

    /// The lease end of hold `member` (the meta's lone hold, or its member
    /// in the holders zset), server ms.
    pub fn lease_end(&mut self, member: &str) -> Option<i64> {
        match self.lone() {
            Some((name, _, end)) if name == member => Some(end),
            _ => self.conn.zscore(&self.keys.all[0], member).unwrap(),
        }
    }

    /// Sets the lease end of hold `member` (as the scripts keep it: the
    /// meta's lone hold, its PTTL its fence ms past the end, or its member
    /// in the holders zset), server ms.
    pub fn set_lease_end(&mut self, member: &str, end: i64) {
        match self.lone() {
            Some((name, _, _)) if name == member => {
                let (_, fence) = self.lone_parts().unwrap();
                let now = self.now_ms();
                let _: () = self
                    .conn
                    .pexpire(&self.keys.all[2], (fence + end - now).max(1))
                    .unwrap();
            }
            _ => {
                let _: () = self.conn.zadd(&self.keys.all[0], member, end).unwrap();
            }
        }
    }

    /// The token the lock keeps for hold `member`: the lone hold's, or
    /// minus the score of "#<member>" in the holders zset.
    pub fn token_of(&mut self, member: &str) -> u64 {
        if let Some((name, token, _)) = self.lone() {
            if name == member {
                return token;
            }
        }
        let score: f64 = self
            .conn
            .zscore(&self.keys.all[0], format!("#{member}"))
            .unwrap();
        assert!(score < 0.0, "{member}: {score}");
        (-score) as u64
    }

    /// The hold whose token is `token`, if the lock keeps it.
    pub fn member_of_token(&mut self, token: u64) -> Option<String> {
        if let Some((name, lone_token, _)) = self.lone() {
            if lone_token == token {
                return Some(name);
            }
        }
        let score = format!("-{token}");
        let found: Vec<String> = self
            .conn
            .zrangebyscore(&self.keys.all[0], &score, &score)
            .unwrap();
        found.first().map(|m| m.trim_start_matches('#').to_owned())
    }

    /// Every hold the lock keeps, live or run out, with its token, sorted:
    /// the lone hold, or each holders member with the token beside it
    /// (which must be there, and no token without its hold).
    pub fn tokens(&mut self) -> Vec<(String, u64)> {
        let mut all = Vec::new();
        if let Some((name, token, _)) = self.lone() {
            all.push((name, token));
        }
        let scored: Vec<(String, f64)> = self
            .conn
            .zrange_withscores(&self.keys.all[0], 0, -1)
            .unwrap();
        let (marks, holds): (Vec<_>, Vec<_>) = scored.iter().partition(|(_, s)| *s < 0.0);
        for (member, _) in &holds {
            all.push((member.clone(), self.token_of(member)));
        }
        assert_eq!(
            marks.len(),
            holds.len(),
            "a token beside each hold: {scored:?}"
        );
        all.sort();
        all
    }

    /// The TTL of the key that keeps the holds: the meta when it has the
    /// lone hold, else the holders zset.
    pub fn holds_pttl(&mut self) -> i64 {
        if self.lone().is_some() {
            self.pttl(2)
        } else {
            self.pttl(0)
        }
    }

    pub fn now_ms(&mut self) -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut self.conn).unwrap();
        s * 1000 + us / 1000
    }

    /// Live holds "<owner> <call> <units>" (lease end not passed), sorted;
    /// a mutex's live holder as "<owner> <first call> 1".
    pub fn holders(&mut self) -> Vec<String> {
        if !self.counted() {
            let lock = &self.keys.all[0];
            let live = matches!(lease_left_of(&mut self.conn, lock), Some(left) if left > 0);
            return match holder_of(&mut self.conn, lock) {
                Some((owner, _, call)) if live => vec![format!("{owner} {call} 1")],
                _ => Vec::new(),
            };
        }
        let now = self.now_ms();
        let mut live: Vec<String> = self
            .conn
            .zrangebyscore(&self.keys.all[0], now, "+inf")
            .unwrap();
        if let Some((name, _, end)) = self.lone() {
            assert!(live.is_empty(), "a lone hold and holders {live:?}");
            if end >= now {
                live.push(name);
            }
        }
        live.sort();
        live
    }

    /// Live write holds (the holds of all the units), sorted.
    pub fn writers(&mut self) -> Vec<String> {
        let write = format!(" {RW_CAPACITY}");
        self.holders()
            .into_iter()
            .filter(|m| m.ends_with(&write))
            .collect()
    }

    /// The queue's entries, in order (not their deadlines, scored after
    /// them: lua/lib/queue.lua).
    pub fn queued(&mut self) -> Vec<String> {
        self.conn
            .zrangebyscore(
                &self.keys.all[1],
                "-inf",
                format!("({}", fairlock_test_support::fake_queue::DEADLINE_BASE),
            )
            .unwrap()
    }

    /// The meta's value without its data format word.
    pub fn meta(&mut self) -> Option<String> {
        let stored: Option<String> = self.conn.get(&self.keys.all[2]).unwrap();
        stored.map(|m| unversioned(&m).to_owned())
    }

    /// The units the meta says the holds take (None without a meta, or for
    /// a meta fairlock did not write, as a test leaves one).
    pub fn meta_used(&mut self) -> Option<u64> {
        if let Some((parts, _)) = self.lone_parts() {
            return parts[4].parse().ok();
        }
        self.meta().and_then(|m| m.split(' ').nth(1)?.parse().ok())
    }

    pub fn pttl(&mut self, key: usize) -> i64 {
        self.conn.pttl(&self.keys.all[key]).unwrap()
    }

    /// Every key has a TTL; the anchor outlives the revoke's and the force
    /// release's records, when there is an anchor; on a counted lock the
    /// meta outlives the holders and the queue, and counts the holds' units.
    pub fn assert_every_key_expires(&mut self) {
        let left = keys_without_ttl(&mut self.conn, "fairlock:*");
        assert!(left.is_empty(), "keys without a TTL: {left:?}");
        let anchor = self.pttl(if self.counted() { 2 } else { 0 });
        for at in [self.keys.all.len() - 2, self.keys.all.len() - 1] {
            let record = self.pttl(at);
            assert!(
                anchor == -2 || record <= anchor,
                "{} lives {record} ms, the anchor {anchor} ms",
                self.keys.all[at]
            );
        }
        if !self.counted() {
            // The lock key, the anchor whose format word stands for the
            // queue's keys, lives as long as they do.
            let lock = self.pttl(0);
            let ttl = self.pttl(1);
            assert!(
                ttl == -2 || (lock != -2 && (lock == -1 || ttl <= lock)),
                "{} lives {ttl} ms, the lock key {lock} ms",
                self.keys.all[1]
            );
            return;
        }
        let meta = self.pttl(2);
        for key in [0, 1] {
            let ttl = self.pttl(key);
            assert!(
                ttl == -2 || ttl < meta,
                "{} lives {ttl} ms, the meta {meta} ms",
                self.keys.all[key]
            );
        }
        // The meta's used units are the units of its lone hold or of the
        // holds in the holders zset (what the rwlock's writers zset was to
        // the write holds before the counted engine), each there with its
        // token beside it.
        let members: Vec<String> = self.tokens().into_iter().map(|(m, _)| m).collect();
        let units: u64 = members.iter().map(|m| u64::from(units_of(m))).sum();
        // (A holders key that ran out by itself counts as none: the next
        // call reads its used units as 0.)
        if let (Some(used), false) = (self.meta_used(), members.is_empty()) {
            assert_eq!(used, units, "the meta counts the holds' units: {members:?}");
        }
    }

    /// Every key's dumped value (with its TTL state), for "nothing written".
    pub fn snapshot(&mut self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut keys: Vec<String> = self.conn.keys("fairlock:*").unwrap();
        keys.sort();
        keys.into_iter()
            .map(|k| {
                let dump: Option<Vec<u8>> =
                    redis::cmd("DUMP").arg(&k).query(&mut self.conn).unwrap();
                (k, dump)
            })
            .collect()
    }

    /// The scripts run from now on as the ACL user of docs/security.md (`password`),
    /// the ACL log emptied of the denials of the redis crate's CLIENT
    /// SETINFO at connect, which are not the scripts'.
    pub fn as_acl_user(&mut self, password: &str) {
        create_acl_user(&mut self.conn, password);
        self.run_as("fairlock", password);
    }

    /// The scripts run from now on as the ACL user `user` (made already),
    /// the ACL log emptied of the denials of the redis crate's CLIENT
    /// SETINFO at connect, which are not the scripts'.
    pub fn run_as(&mut self, user: &str, password: &str) {
        let runner = redis::Client::open(self.server.url_as(user, password))
            .unwrap()
            .get_connection()
            .unwrap();
        self.runner = Some(runner);
        let () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query(&mut self.conn)
            .unwrap();
    }
}

/// Runs `script` on `keys` with the common arguments, then `args`.
pub fn eval_on<S: AsRef<str>>(
    conn: &mut redis::Connection,
    keys: &[String],
    script: Script,
    args: &[S],
) -> redis::RedisResult<Value> {
    let script = redis::Script::new(script.source());
    let mut inv = script.prepare_invoke();
    for key in keys {
        inv.key(key);
    }
    let common = CommonArgs {
        wake_prefix: format!("{PREFIX}:wake:"),
        fence_life: fairlock::DEFAULT_FENCE_LIFE,
    };
    inv.arg(&common.args());
    for arg in args {
        inv.arg(arg.as_ref());
    }
    inv.invoke(conn)
}

/// The hold of call `call` of `owner` for `ask` with `token`.
pub fn hold(owner: &str, call: u64, ask: Ask, token: u64) -> Hold {
    Hold {
        owner: owner.to_owned(),
        call,
        units: ask.units(),
        token,
    }
}

/// The holders member of `hold`: "<owner> <call> <units>".
pub fn member(hold: &Hold) -> String {
    format!("{} {} {}", hold.owner, hold.call, hold.units)
}

/// The units of a holders member "<owner> <call> <units>".
pub fn units_of(member: &str) -> u32 {
    member.rsplit(' ').next().unwrap().parse().unwrap()
}

pub fn owners(holds: &[Hold]) -> Vec<&str> {
    holds.iter().map(|h| h.owner.as_str()).collect()
}

/// The queue entry of call `call` of `owner` for `ask` with `lease` (fixed
/// or renewed). A counted entry names the units it asks for, never the
/// lock's capacity (the scripts it goes to read that from the meta).
pub fn entry_with(owner: &str, call: u64, ask: Ask, lease: Lease) -> QueueEntry<'_> {
    QueueEntry {
        owner,
        call,
        lease,
        ask,
    }
}

/// The queue entry `Lock::queue` makes: a 60 s watchdog lease.
pub fn entry(owner: &str, call: u64, ask: Ask) -> QueueEntry<'_> {
    entry_with(owner, call, ask, Lease::Renewed(LONG))
}

/// The queue member `Lock::queue` leaves: "<owner> <call> 60000 0[ <units>]".
pub fn queued(owner: &str, call: u64, ask: Ask) -> String {
    entry(owner, call, ask).to_string()
}

/// An error with its sources, as one line.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text = format!("{text}: {inner}");
        source = inner.source();
    }
    text
}

/// The units a status says are free: its capacity less the units used
/// (what the semaphore's former status called "available").
pub fn available(status: &StatusReply) -> u64 {
    status
        .capacity
        .unwrap_or(0)
        .checked_sub(status.used)
        .unwrap_or_else(|| panic!("more units used than there are: {status:?}"))
}

/// A subscription of `conn` to every wake channel (5 s read timeout).
pub fn subscribe(conn: &mut redis::Connection) -> redis::PubSub<'_> {
    let mut pubsub = conn.as_pubsub();
    pubsub.psubscribe("fairlock:wake:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    pubsub
}

/// The next message on `pubsub`: channel and payload.
pub fn message(pubsub: &mut redis::PubSub) -> (String, String) {
    let m = pubsub.get_message().unwrap();
    (
        m.get_channel_name().to_owned(),
        m.get_payload::<String>().unwrap(),
    )
}
