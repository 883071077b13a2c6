//! The real side of the model test: one lock's scripts on a redis-server
//! whose clock stands still (libfaketime's absolute time, read from a file
//! on every clock call) until the test moves it, so the model knows server
//! time to the millisecond; each operation run as the client runs it
//! (protocol layer: keys, common arguments, its own, its reply parsed), or
//! with a planted change of its script's text; and every key read back in
//! one read-only EVAL per step.

use std::collections::HashMap;
use std::path::PathBuf;

use fairlock::__test_support::{error_from_redis, CommonArgs, LockKeys, LockKind, Operation};
use fairlock_test_support::server_clock::start_under_faketime;
use fairlock_test_support::{private_dir, RedisServer};
use redis::Value;

/// Server time when a run starts, ms since the epoch (2027-01-15).
pub const T0: i64 = 1_800_000_000_000;

/// A textual change of the Lua: in every script of the engine, `from`
/// becomes `to` (a planted bug).
pub type Plant = (&'static str, &'static str);

/// What the lock's keys hold after a step.
#[derive(Debug, Default)]
pub struct Seen {
    /// Every key of the server, with its PTTL.
    pub ttls: Vec<(String, i64)>,
    /// KEYS[1]'s value (a mutex's lock key) and PTTL, when a string.
    pub lock: Option<String>,
    pub lock_pttl: i64,
    /// KEYS[1] as a zset (a counted lock's holders), with scores.
    pub holders: Vec<(String, f64)>,
    /// The queue's entries in order, with their liveness deadlines.
    pub queue: Vec<(String, i64)>,
    /// KEYS[3] (a counted lock's meta) and its PTTL.
    pub meta: Option<String>,
    pub meta_pttl: i64,
    /// An election's history (KEYS[3]), newest first.
    pub history: Option<Vec<String>>,
    /// Whether the force release's record (the last key) is there.
    pub forced: bool,
    /// Whether the revoke's record (the key before) is there.
    pub revoked: bool,
}

/// Reads everything in one atomic step (KEYS is fine on a server that
/// holds one lock), in few calls: each costs the server clock reads, and
/// libfaketime reads its file on every one.
const OBSERVE: &str = r"
local ttls = {}
for _, key in ipairs(redis.call('KEYS', '*')) do
  ttls[#ttls + 1] = key
  ttls[#ttls + 1] = redis.call('PTTL', key)
end
local lock, holders, meta = false, {}, false
if ARGV[1] == 'counted' then
  holders = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  meta = redis.call('GET', KEYS[3])
else
  lock = redis.call('GET', KEYS[1])
end
local history = false
if ARGV[1] == 'election' then
  history = redis.call('LRANGE', KEYS[3], 0, -1)
end
-- The queue key: entries scored below 2^50, each entry's deadline as
-- '~<entry>' scored 2^50 + the deadline (lua/lib/queue.lua).
local base = 1125899906842624
local deadlines = {}
local marks = redis.call('ZRANGEBYSCORE', KEYS[2], base, '+inf', 'WITHSCORES')
for i = 1, #marks, 2 do
  deadlines[#deadlines + 1] = string.sub(marks[i], 2)
  deadlines[#deadlines + 1] = string.format('%d', marks[i + 1] - base)
end
return { ttls, lock, holders, deadlines,
  redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(1125899906842624'), meta, history }
";

/// One lock of `kind` on a frozen-clock server.
pub struct Frozen {
    _server: RedisServer,
    dir: PathBuf,
    file: PathBuf,
    conn: redis::Connection,
    pub keys: LockKeys,
    /// Server time, ms.
    pub now: i64,
    plant: Option<Plant>,
    shas: HashMap<usize, String>,
    observe_sha: String,
}

impl Frozen {
    pub fn start(kind: LockKind, plant: Option<Plant>) -> Frozen {
        let dir = private_dir("model").expect("a temporary directory");
        let file = dir.join("faketime");
        write_time(&file, T0);
        let server = start_under_faketime(&file);
        let mut conn = server.conn();
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
        assert_eq!(
            s * 1_000_000 + us,
            T0 * 1000 + 500,
            "the server's clock stands at T0"
        );
        Frozen {
            _server: server,
            dir,
            file,
            conn,
            keys: LockKeys::of_kind("fairlock", "model", kind).unwrap(),
            now: T0,
            plant,
            shas: HashMap::new(),
            observe_sha: String::new(),
        }
    }

    /// Empties the server and sets its clock back to T0 (a replay).
    pub fn reset(&mut self) {
        let () = redis::cmd("FLUSHALL").query(&mut self.conn).unwrap();
        self.set_time(T0);
    }

    /// Moves the server's clock to `ms` (no wait: every clock call reads
    /// the file).
    pub fn set_time(&mut self, ms: i64) {
        write_time(&self.file, ms);
        self.now = ms;
    }

    /// The SHA1 of `script`'s text (planted when a plant applies),
    /// loaded once.
    fn sha(&mut self, script: fairlock::__test_support::Script) -> String {
        if let Some(sha) = self.shas.get(&script.index()) {
            return sha.clone();
        }
        let mut source = script.source().to_owned();
        if let Some((from, to)) = self.plant {
            source = source.replace(from, to);
        }
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query(&mut self.conn)
            .unwrap();
        self.shas.insert(script.index(), sha.clone());
        sha
    }

    /// Runs `op` as the client does (on the planted script when a plant
    /// applies to it), and reads the keys back after it, in one round trip.
    pub fn run<O: Operation>(&mut self, op: &O) -> (fairlock::Result<O::Reply>, Seen) {
        let kind = self.keys.kind();
        let sha = self.sha(op.script(&self.keys));
        let common = CommonArgs {
            wake_prefix: "fairlock:wake:".to_owned(),
            fence_life: fairlock::DEFAULT_FENCE_LIFE,
        };
        let keys = op.keys(&self.keys);
        let mut pipe = redis::pipe();
        // An error reply comes back as a value, not as the pipeline's failure.
        pipe.ignore_errors();
        pipe.cmd("EVALSHA")
            .arg(sha)
            .arg(keys.len())
            .arg(keys)
            .arg(&common.args())
            .arg(op.args_on(kind));
        self.observe_in(&mut pipe);
        let (reply, seen): (Value, Value) = pipe.query(&mut self.conn).unwrap();
        let reply = match reply {
            Value::ServerError(e) => Err(error_from_redis(e.into())),
            reply => op.parse(reply),
        };
        (reply, read_seen(seen, &self.keys))
    }

    /// Whether `plant` changes any script of this lock's engine.
    pub fn plant_applies(plant: Plant, kind: LockKind) -> bool {
        use fairlock::__test_support::{Engine, Script};
        Script::ALL
            .iter()
            .any(|s| s.engine == Engine::of(kind) && s.source().contains(plant.0))
    }

    fn observe_in(&mut self, pipe: &mut redis::Pipeline) {
        if self.observe_sha.is_empty() {
            self.observe_sha = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(OBSERVE)
                .query(&mut self.conn)
                .unwrap();
        }
        let engine = match self.keys.kind() {
            LockKind::Semaphore | LockKind::RwLock => "counted",
            LockKind::Election => "election",
            _ => "mutex",
        };
        pipe.cmd("EVALSHA")
            .arg(&self.observe_sha)
            .arg(self.keys.all.len())
            .arg(&self.keys.all)
            .arg(engine);
    }

    /// What the lock's keys hold now.
    pub fn observe(&mut self) -> Seen {
        let mut pipe = redis::pipe();
        self.observe_in(&mut pipe);
        let (seen,): (Value,) = pipe.query(&mut self.conn).unwrap();
        read_seen(seen, &self.keys)
    }
}

fn read_seen(seen: Value, keys: &LockKeys) -> Seen {
    #[allow(clippy::type_complexity)]
    let (ttls, lock, holders, deadlines, queue, meta, history): (
        Vec<(String, i64)>,
        Option<String>,
        Vec<(String, f64)>,
        Vec<(String, i64)>,
        Vec<String>,
        Option<String>,
        Option<Vec<String>>,
    ) = redis::from_redis_value(seen).unwrap();
    let pttl = |key: &String| ttls.iter().find(|(k, _)| k == key).map_or(-2, |(_, t)| *t);
    let lock_pttl = pttl(&keys.all[0]);
    let forced = pttl(&keys.all[keys.all.len() - 1]) != -2;
    let revoked = pttl(&keys.all[keys.all.len() - 2]) != -2;
    let meta_pttl = match keys.kind() {
        LockKind::Semaphore | LockKind::RwLock => pttl(&keys.all[2]),
        _ => -2,
    };
    let queue = queue
        .into_iter()
        .map(|entry| {
            let deadline = deadlines
                .iter()
                .find(|(e, _)| *e == entry)
                .map_or(-1, |(_, d)| *d);
            (entry, deadline)
        })
        .collect();
    Seen {
        ttls,
        lock,
        lock_pttl,
        holders,
        queue,
        meta,
        meta_pttl,
        history,
        forced,
        revoked,
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes libfaketime's absolute time (no '@': a clock that stands still)
/// for `ms` since the epoch, UTC, whole (a rename). Half a ms more: it
/// reads the fraction as a double, and ".499" would be 498.999… ms.
fn write_time(file: &std::path::Path, ms: i64) {
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let line = format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{milli:03}5\n",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    );
    let next = file.with_extension("next");
    std::fs::write(&next, line).expect("write the faketime file");
    std::fs::rename(&next, file).expect("replace the faketime file");
}
