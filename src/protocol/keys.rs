//! Lock names and the Redis keys that hold one lock's state.

use crate::error::{Error, ErrorKind, Result};

/// Longest lock name accepted, in bytes (64 KiB).
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// Which primitive a family of keys belongs to. The mutex, the semaphore and
/// the reader-writer lock of one name are separate locks in separate
/// keys, so a key of one kind never meets a script of another; all kinds of
/// one name share the `{tag}`, hence one cluster slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// A fair mutex: keys lock, queue, deadlines.
    Mutex,
    /// A fair semaphore: keys holders, queue, deadlines, tokens, meta.
    Semaphore,
    /// A fair reader-writer lock: keys holders, queue, deadlines, tokens,
    /// meta (as a semaphore's: both run on the counted engine).
    RwLock,
}

/// The keys of one lock, in the order every script of its kind expects them.
///
/// Layout: `<prefix>:{<tag>}:<kind>:<name>`. The tag is 16 hex digits of the
/// name's SHA-1, so all keys of a lock share one cluster hash slot whatever
/// braces the name contains, and different names spread over the slots. The
/// full name follows the fixed-width part, so distinct names never share keys.
///
/// A mutex has three keys (`lock`, `queue`, `deadlines`). A semaphore and
/// a reader-writer lock have five each, laid out alike for the counted
/// engine: holders (zset `"<owner> <call> <units>"` -> lease end, server
/// ms), queue and deadlines (entries as the mutex's with the units asked
/// for as a fifth field), tokens (hash: holder member -> fencing token and
/// token -> member) and meta (string `"<capacity> <used> <last token>[
/// <mark>]"`); a semaphore's are `sem`, `semq`, `semd`, `semt`,
/// `semmeta`, a reader-writer lock's `rw`, `rwq`, `rwd`, `rwt`, `rwmeta`.
/// The queue keys are 2nd and 3rd in every kind, so lua/lib.lua's queue
/// steps serve both engines.
#[derive(Debug)]
pub struct LockKeys {
    /// Mutex: lock (the hold, or the last token of a free lock), queue,
    /// deadlines. Semaphore and RwLock: holders, queue, deadlines, tokens,
    /// meta.
    pub all: Vec<String>,
    /// The Redis Cluster slot of all of them (CRC16 of the tag, as Redis has it).
    pub slot: u16,
    kind: LockKind,
}

impl LockKeys {
    /// The keys of the mutex `name` under `prefix`; an empty or oversized
    /// name is [`ErrorKind::InvalidName`].
    #[cfg(any(test, feature = "test-support"))]
    pub fn new(prefix: &str, name: &str) -> Result<Self> {
        Self::of_kind(prefix, name, LockKind::Mutex)
    }

    /// The keys of the semaphore `name` under `prefix` (see [`LockKeys::new`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn semaphore(prefix: &str, name: &str) -> Result<Self> {
        Self::of_kind(prefix, name, LockKind::Semaphore)
    }

    /// The keys of the reader-writer lock `name` under `prefix` (see
    /// [`LockKeys::new`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn rwlock(prefix: &str, name: &str) -> Result<Self> {
        Self::of_kind(prefix, name, LockKind::RwLock)
    }

    /// The keys of the `kind` of lock called `name` under `prefix`.
    pub fn of_kind(prefix: &str, name: &str, kind: LockKind) -> Result<Self> {
        validate_name(name)?;
        let digest = sha1_smol::Sha1::from(name).digest().to_string();
        let tag = &digest[..16];
        let key = |kind: &str| format!("{prefix}:{{{tag}}}:{kind}:{name}");
        let kinds: &[&str] = match kind {
            LockKind::Mutex => &["lock", "queue", "deadlines"],
            LockKind::Semaphore => &["sem", "semq", "semd", "semt", "semmeta"],
            LockKind::RwLock => &["rw", "rwq", "rwd", "rwt", "rwmeta"],
        };
        Ok(LockKeys {
            all: kinds.iter().map(|k| key(k)).collect(),
            slot: crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % 16384,
            kind,
        })
    }

    /// Which primitive these keys belong to.
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// The first key: the mutex's lock key (the only key its renew script
    /// needs), a semaphore's or a rwlock's holders. Unique per lock and kind, so the
    /// client's registries key their entries by it.
    pub fn lock(&self) -> &str {
        &self.all[0]
    }
}

fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::new(ErrorKind::InvalidName, "lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::new(
            ErrorKind::InvalidName,
            format!(
                "lock name is {} bytes long, more than the {MAX_NAME_LEN} allowed",
                name.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis Cluster's rule: the slot comes from the first `{...}` with content.
    fn hash_tag(key: &str) -> &str {
        if let Some(open) = key.find('{') {
            if let Some(len) = key[open + 1..].find('}') {
                if len > 0 {
                    return &key[open + 1..open + 1 + len];
                }
            }
        }
        key
    }

    #[test]
    fn all_keys_of_a_lock_share_a_tag_whatever_the_name() {
        for name in ["orders:42", "{x}", "}{", "a{b}c", "名前 \n\0", "{}"] {
            let keys = LockKeys::new("fairlock", name).unwrap();
            let tag = hash_tag(&keys.all[0]);
            assert_eq!(tag.len(), 16, "{name:?}");
            assert!(keys.all.iter().all(|k| hash_tag(k) == tag), "{name:?}");
        }
    }

    #[test]
    fn distinct_names_get_distinct_keys() {
        let a = LockKeys::new("p", "a:lock:b").unwrap();
        let b = LockKeys::new("p", "a").unwrap();
        for ka in &a.all {
            assert!(!b.all.contains(ka));
        }
    }

    #[test]
    fn the_mutex_keeps_its_keys_and_a_semaphore_of_the_name_has_its_own_in_the_slot() {
        let mutex = LockKeys::new("p", "jobs").unwrap();
        let sem = LockKeys::semaphore("p", "jobs").unwrap();
        let tag = hash_tag(&mutex.all[0]).to_owned();
        assert_eq!(mutex.kind(), LockKind::Mutex);
        assert_eq!(
            mutex.all,
            ["lock", "queue", "deadlines"].map(|k| format!("p:{{{tag}}}:{k}:jobs"))
        );
        assert_eq!(sem.kind(), LockKind::Semaphore);
        assert_eq!(
            sem.all,
            ["sem", "semq", "semd", "semt", "semmeta"].map(|k| format!("p:{{{tag}}}:{k}:jobs"))
        );
        assert_eq!(sem.slot, mutex.slot);
        assert!(sem.all.iter().all(|k| !mutex.all.contains(k)));
        assert_eq!(
            LockKeys::semaphore("p", "").unwrap_err().kind(),
            ErrorKind::InvalidName
        );
    }

    #[test]
    fn a_rwlock_of_the_name_has_its_own_keys_in_the_slot_queue_keys_2nd_and_3rd() {
        let mutex = LockKeys::new("p", "jobs").unwrap();
        let sem = LockKeys::semaphore("p", "jobs").unwrap();
        let rw = LockKeys::rwlock("p", "jobs").unwrap();
        let tag = hash_tag(&mutex.all[0]).to_owned();
        assert_eq!(rw.kind(), LockKind::RwLock);
        assert_eq!(
            rw.all,
            ["rw", "rwq", "rwd", "rwt", "rwmeta"].map(|k| format!("p:{{{tag}}}:{k}:jobs"))
        );
        assert_eq!(rw.slot, mutex.slot);
        assert!(rw
            .all
            .iter()
            .all(|k| !mutex.all.contains(k) && !sem.all.contains(k)));
        assert_eq!(rw.lock(), rw.all[0]);
        assert_eq!(
            LockKeys::rwlock("p", "").unwrap_err().kind(),
            ErrorKind::InvalidName
        );
    }

    #[test]
    fn empty_and_oversized_names_are_invalid() {
        let kind = |n: &str| LockKeys::new("p", n).unwrap_err().kind();
        assert_eq!(kind(""), ErrorKind::InvalidName);
        assert_eq!(kind(&"x".repeat(MAX_NAME_LEN + 1)), ErrorKind::InvalidName);
        assert!(LockKeys::new("p", &"x".repeat(MAX_NAME_LEN)).is_ok());
    }
}
