//! Redisson's fair lock (`RedissonFairLock`), replayed as its client sends
//! it, so that the server-cost bench counts the anchor a user would pick
//! instead on the same server, in the same run, by the same measure as
//! fairlock's paths.
//!
//! The scripts (`acquire.lua`, `unlock.lua`) are written for this bench
//! from the public description of Redisson's (the three structures, the
//! steps of each script, the commands each sends); the keys, owner ids,
//! channel names and arguments are Redisson's: a lock named `<name>` is the
//! hash `<name>`, the list `redisson_lock_queue:{<name>}`, the zset
//! `redisson_lock_timeout:{<name>}`; an owner is `<client uuid>:<thread
//! id>`; its wake channel `redisson_lock__channel:{<name>}:<owner>`; the
//! lease 30 s (the watchdog's), the waiting slot 300 s, and the client's
//! clock goes in as an argument, as Redisson sends its `currentTimeMillis`.
//! Both run by EVALSHA. [`check`] drives the replay through a fair lock's
//! life (take, re-enter, queue, no barging, wake the head only, drop stale
//! waiters) so that what is counted is a lock that works.
//! (A directory module, so cargo does not take it for a bench target.)

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fairlock_test_support::RedisServer;

/// The lease a lock gets when its holder names none (the watchdog's).
pub const LEASE_MS: u64 = 30_000;
/// How long a queued waiter counts as alive past its predecessor's turn
/// (Redisson's `fairLockWaitTimeout` default).
pub const WAIT_SLOT_MS: u64 = 300_000;
/// The id of the one Redisson client the bench plays (a random UUID).
const CLIENT_ID: &str = "9b2f4c1e-5d7a-4e3b-8c6f-1a0e2d3b4c5f";
/// What Redisson's unlock publishes to the woken waiter.
const UNLOCK_MESSAGE: &str = "0";

/// Thread `thread`'s owner id in the bench's client.
pub fn owner(thread: u64) -> String {
    format!("{CLIENT_ID}:{thread}")
}

/// The client's clock in ms, as Redisson sends it.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One fair lock as Redisson keeps it: its keys, its wake channels'
/// prefix and the two scripts.
pub struct FairLock {
    /// The lock hash, the queue list, the deadlines zset.
    pub keys: [String; 3],
    channel_prefix: String,
    acquire: redis::Script,
    unlock: redis::Script,
}

impl FairLock {
    pub fn new(name: &str) -> FairLock {
        FairLock {
            keys: [
                name.to_owned(),
                format!("redisson_lock_queue:{{{name}}}"),
                format!("redisson_lock_timeout:{{{name}}}"),
            ],
            channel_prefix: format!("redisson_lock__channel:{{{name}}}"),
            acquire: redis::Script::new(include_str!("acquire.lua")),
            unlock: redis::Script::new(include_str!("unlock.lua")),
        }
    }

    /// The channel `owner` is woken on.
    pub fn channel(&self, owner: &str) -> String {
        format!("{}:{owner}", self.channel_prefix)
    }

    /// `lock()`'s and `tryLock()`'s attempt at the client's time `now`:
    /// `None` when `owner` holds the lock now (taken or re-entered), else
    /// the ms to wait, `owner` queued.
    pub fn acquire_at(&self, conn: &mut redis::Connection, owner: &str, now: u64) -> Option<i64> {
        self.acquire
            .key(&self.keys[..])
            .arg(LEASE_MS)
            .arg(owner)
            .arg(WAIT_SLOT_MS)
            .arg(now)
            .invoke(conn)
            .unwrap()
    }

    /// [`FairLock::acquire_at`] now.
    pub fn acquire(&self, conn: &mut redis::Connection, owner: &str) -> Option<i64> {
        self.acquire_at(conn, owner, now_ms())
    }

    /// `unlock()`: `Some(1)` when the lock is free now (its head woken),
    /// `Some(0)` when `owner` still holds it, `None` when `owner` did not
    /// hold it.
    pub fn unlock(&self, conn: &mut redis::Connection, owner: &str) -> Option<i64> {
        self.unlock
            .key(&self.keys[..])
            .key(&self.channel_prefix)
            .arg(UNLOCK_MESSAGE)
            .arg(LEASE_MS)
            .arg(owner)
            .arg(now_ms())
            .invoke(conn)
            .unwrap()
    }

    /// Deletes the lock's keys.
    pub fn clear(&self, conn: &mut redis::Connection) {
        let () = redis::cmd("DEL").arg(&self.keys[..]).query(conn).unwrap();
    }

    /// The queue, head first.
    pub fn queue(&self, conn: &mut redis::Connection) -> Vec<String> {
        redis::cmd("LRANGE")
            .arg(&self.keys[1])
            .arg(0)
            .arg(-1)
            .query(conn)
            .unwrap()
    }

    fn deadline(&self, conn: &mut redis::Connection, owner: &str) -> Option<i64> {
        redis::cmd("ZSCORE")
            .arg(&self.keys[2])
            .arg(owner)
            .query(conn)
            .unwrap()
    }
}

/// Drives the replay through a fair lock's life on `server` and panics at
/// the first step that is not what Redisson's fair lock does.
pub fn check(server: &RedisServer) {
    let lock = FairLock::new("bench:redisson:check");
    let mut conn = server.conn();
    let mut listener = server.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    lock.clear(&mut conn);
    let (a, b, c, d) = (owner(1), owner(2), owner(3), owner(4));
    pubsub.subscribe(lock.channel(&b)).unwrap();
    pubsub.subscribe(lock.channel(&c)).unwrap();

    assert_eq!(lock.acquire(&mut conn, &a), None, "a free lock is taken");
    assert_eq!(lock.acquire(&mut conn, &a), None, "its holder re-enters");
    let count: i64 = redis::cmd("HGET")
        .arg(&lock.keys[0])
        .arg(&a)
        .query(&mut conn)
        .unwrap();
    assert_eq!(count, 2);
    let wait_b = lock.acquire(&mut conn, &b).expect("b queues");
    assert!(wait_b > 0 && wait_b <= LEASE_MS as i64, "b waits the lease");
    let wait_c = lock.acquire(&mut conn, &c).expect("c queues");
    assert!(
        wait_c > WAIT_SLOT_MS as i64,
        "c waits b's slot too: {wait_c}"
    );
    assert!(
        lock.acquire(&mut conn, &b).is_some(),
        "b asks again, queued"
    );
    assert_eq!(lock.queue(&mut conn), [b.as_str(), c.as_str()]);
    assert_eq!(lock.unlock(&mut conn, &c), None, "c does not hold it");
    assert_eq!(lock.unlock(&mut conn, &a), Some(0), "a re-entry is left");
    assert_eq!(lock.unlock(&mut conn, &a), Some(1), "a frees it");
    let woken = pubsub.get_message().unwrap();
    assert_eq!(woken.get_channel_name(), lock.channel(&b), "b is woken");
    assert_eq!(woken.get_payload::<String>().unwrap(), UNLOCK_MESSAGE);
    assert!(
        lock.acquire(&mut conn, &c).is_some(),
        "c cannot take it past b"
    );
    let c_before = lock.deadline(&mut conn, &c).unwrap();
    assert_eq!(lock.acquire(&mut conn, &b), None, "b, the head, takes it");
    assert_eq!(lock.queue(&mut conn), [c.as_str()]);
    assert_eq!(
        c_before - lock.deadline(&mut conn, &c).unwrap(),
        WAIT_SLOT_MS as i64,
        "the waiters left move one slot earlier"
    );
    assert_eq!(lock.unlock(&mut conn, &b), Some(1));
    let woken = pubsub.get_message().unwrap();
    assert_eq!(woken.get_channel_name(), lock.channel(&c), "c is woken");
    // c never comes: d queues behind it, and once c's deadline (b's lease
    // and one slot) has passed, as the client's clock says, d takes the
    // lock past it before its own (one slot later) has.
    assert!(lock.acquire(&mut conn, &d).is_some(), "d queues behind c");
    let later = now_ms() + LEASE_MS + WAIT_SLOT_MS + 60_000;
    assert_eq!(lock.acquire_at(&mut conn, &d, later), None, "c was dropped");
    assert!(lock.queue(&mut conn).is_empty());
    assert_eq!(lock.unlock(&mut conn, &d), Some(1));
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&lock.keys[..])
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, 0, "nothing is left behind");
}
