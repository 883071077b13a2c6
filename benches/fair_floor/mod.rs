//! The least a fair lock through one Redis can do per handoff, as two rows
//! of the peers bench: what any fair (first come, first served) Redis lock
//! pays on this machine, beside the unfair locks that let the releasing
//! thread take the lock again.
//!
//! Both are a FIFO lock and nothing more: no lease, no fencing token, no
//! liveness of waiters, no re-entry, one tiny script per step. The holder
//! key names the holder, a list queues the waiters; a release pops the
//! next waiter and makes it the holder in the same script, so nobody can
//! take the lock between two waiters. They differ in how a waiter learns
//! of its grant:
//!
//! - BLPOP: each waiting thread blocks on its own connection in `BLPOP` of
//!   a grant list of its own, sent in the same write as its queueing
//!   script; the release pushes to that list, and Redis answers the
//!   blocked `BLPOP`. One thread is woken per grant, the waiter itself: no
//!   hand-over to another thread wakes fewer.
//! - pub/sub: the release publishes on the waiter's channel, which a
//!   subscriber thread of the waiter's client reads on its own connection
//!   and passes on to the waiting thread through a condvar: fairlock's way
//!   of waking (two threads woken per grant), without its scripts' work.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{warm_key, Locker, Peer};
use crate::common::connect;

/// KEYS[1] holder, KEYS[2] queue; ARGV[1] the caller's id, ARGV[2] "list"
/// or "channel" (how a grant is told). Takes a free lock nobody waits for
/// (telling its own grant at once when grants go by list, so that the
/// caller's BLPOP returns), else queues the caller. Returns 1 when taken,
/// 0 when queued.
const ACQUIRE: &str = "
if redis.call('LLEN', KEYS[2]) == 0 and redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  if ARGV[2] == 'list' then redis.call('RPUSH', KEYS[1] .. ':grant:' .. ARGV[1], '1') end
  return 1
end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 0";

/// KEYS[1] holder, KEYS[2] queue; ARGV as ACQUIRE's. Hands the lock to the
/// first queued caller and tells it, or frees it. Returns 1 when handed
/// over, 0 when freed, -1 when the caller does not hold it.
const RELEASE: &str = "
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local next = redis.call('LPOP', KEYS[2])
if not next then redis.call('DEL', KEYS[1]) return 0 end
redis.call('SET', KEYS[1], next)
local grant = KEYS[1] .. ':grant:' .. next
if ARGV[2] == 'list' then redis.call('RPUSH', grant, '1') else redis.call('PUBLISH', grant, '1') end
return 1";

/// How a waiter learns of its grant.
#[derive(Clone, Copy)]
pub enum Told {
    /// By its own `BLPOP` (one thread woken per grant).
    Blpop,
    /// By pub/sub, through a subscriber thread (two threads woken).
    PubSub,
}

/// The floor lock as a peer of the bench, one of the two ways.
pub struct FairFloor {
    url: String,
    told: Told,
    watcher: Mutex<redis::Connection>,
}

impl FairFloor {
    pub fn new(url: &str, told: Told) -> FairFloor {
        FairFloor {
            url: url.to_owned(),
            told,
            watcher: Mutex::new(connect(url, "fair floor: a connection")),
        }
    }
}

/// The list, or channel, on which `id`'s grant of lock `key` is told.
fn grant(key: &str, id: &str) -> String {
    format!("{key}:grant:{id}")
}

impl Peer for FairFloor {
    fn name(&self) -> &'static str {
        match self.told {
            Told::Blpop => "fair floor (BLPOP)",
            Told::PubSub => "fair floor (pub/sub)",
        }
    }
    fn config(&self) -> String {
        let how = match self.told {
            Told::Blpop => {
                "the waiter blocks in BLPOP of its own grant list, sent with its queueing script: one \
                 thread woken per grant"
            }
            Told::PubSub => {
                "the release publishes on the waiter's channel; a subscriber thread per client wakes the \
                 waiting thread by a condvar (fairlock's way): two threads woken per grant"
            }
        };
        format!(
            "the least a fair lock through one Redis does (benches/fair_floor): a holder key and a list \
             of waiters, one script to take or queue, one to hand over to the next or free; no lease, \
             token or liveness; {how}"
        )
    }
    fn locker(&self, key: &str) -> Box<dyn Locker> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let id = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let warm = warm_key(key);
        let subscriber = match self.told {
            Told::Blpop => None,
            Told::PubSub => Some(Subscriber::start(
                &self.url,
                [&warm, key].map(|k| grant(k, &id)),
            )),
        };
        let mut conn = connect(&self.url, "fair floor: a connection");
        for script in [ACQUIRE, RELEASE] {
            let _: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(script)
                .query(&mut conn)
                .expect("fair floor: SCRIPT LOAD");
        }
        let mut locker = FloorLocker {
            key: warm,
            id,
            conn,
            subscriber,
            acquire: redis::Script::new(ACQUIRE),
            release: redis::Script::new(RELEASE),
        };
        locker.locked(&mut || ());
        locker.key = key.to_owned();
        Box::new(locker)
    }
    fn queued(&self, key: &str) -> Option<usize> {
        let mut conn = self.watcher.lock().unwrap();
        Some(
            redis::cmd("LLEN")
                .arg(format!("{key}:queue"))
                .query(&mut *conn)
                .expect("fair floor: LLEN"),
        )
    }
}

struct FloorLocker {
    key: String,
    id: String,
    conn: redis::Connection,
    subscriber: Option<Subscriber>,
    acquire: redis::Script,
    release: redis::Script,
}

impl FloorLocker {
    fn script<'a>(&self, body: &'a redis::Script) -> redis::ScriptInvocation<'a> {
        let how = if self.subscriber.is_some() {
            "channel"
        } else {
            "list"
        };
        let mut call = body.prepare_invoke();
        call.key(&self.key)
            .key(format!("{}:queue", self.key))
            .arg(&self.id)
            .arg(how);
        call
    }
}

impl Locker for FloorLocker {
    fn locked(&mut self, critical: &mut dyn FnMut()) {
        match &self.subscriber {
            None => {
                // The queueing script and the wait in one write.
                let mut p = redis::pipe();
                p.invoke_script(&self.script(&self.acquire)).ignore();
                p.cmd("BLPOP").arg(grant(&self.key, &self.id)).arg(0);
                let _: ((String, String),) = p.query(&mut self.conn).expect("fair floor: acquire");
            }
            Some(subscriber) => {
                let seen = subscriber.grants();
                let taken: i64 = self
                    .script(&self.acquire)
                    .invoke(&mut self.conn)
                    .expect("fair floor: acquire");
                if taken == 0 {
                    subscriber.wait_past(seen);
                }
            }
        }
        critical();
        let released: i64 = self
            .script(&self.release)
            .invoke(&mut self.conn)
            .expect("fair floor: release");
        assert!(released >= 0, "fair floor: released a lock it did not hold");
    }
}

/// A client's subscriber thread: counts the grants told on its channels.
struct Subscriber {
    grants: Arc<(Mutex<u64>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Subscriber {
    /// Subscribed to `channels` before it returns: no grant can be missed.
    fn start(url: &str, channels: [String; 2]) -> Subscriber {
        let grants = Arc::new((Mutex::new(0), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut conn = connect(url, "fair floor: a connection");
        // A read gives up this often to look at `stop`.
        conn.set_read_timeout(Some(Duration::from_millis(20)))
            .expect("fair floor: read timeout");
        let (subscribed, is_subscribed) = std::sync::mpsc::channel();
        let thread = {
            let (grants, stop) = (grants.clone(), stop.clone());
            std::thread::spawn(move || {
                // (A PubSub dropped leaves its channels: this one lives here.)
                let mut pubsub = conn.as_pubsub();
                pubsub
                    .subscribe(&channels[..])
                    .expect("fair floor: SUBSCRIBE");
                subscribed.send(()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    if pubsub.get_message().is_ok() {
                        *grants.0.lock().unwrap() += 1;
                        grants.1.notify_one();
                    }
                }
            })
        };
        is_subscribed.recv().expect("fair floor: subscriber failed");
        Subscriber {
            grants,
            stop,
            thread: Some(thread),
        }
    }

    fn grants(&self) -> u64 {
        *self.grants.0.lock().unwrap()
    }

    fn wait_past(&self, seen: u64) {
        let (count, told) = &*self.grants;
        drop(
            told.wait_while(count.lock().unwrap(), |n| *n == seen)
                .unwrap(),
        );
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
