//! Lock names and the Redis keys that hold one lock's state.

use crate::error::{Error, ErrorKind, Result};

/// Longest lock name accepted, in bytes (64 KiB).
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// The three keys of one lock, in the order every script expects them.
///
/// Layout: `<prefix>:{<tag>}:<kind>:<name>`. The tag is 16 hex digits of the
/// name's SHA-1, so all keys of a lock share one cluster hash slot whatever
/// braces the name contains, and different names spread over the slots. The
/// full name follows the fixed-width part, so distinct names never share keys.
#[derive(Debug)]
pub struct LockKeys {
    /// lock (the hold, or the last token of a free lock), queue, deadlines.
    pub all: [String; 3],
    /// The Redis Cluster slot of all three (CRC16 of the tag, as Redis has it).
    pub slot: u16,
}

impl LockKeys {
    /// The keys of the lock `name` under `prefix`; an empty or oversized
    /// name is [`ErrorKind::InvalidName`].
    pub fn new(prefix: &str, name: &str) -> Result<Self> {
        validate_name(name)?;
        let digest = sha1_smol::Sha1::from(name).digest().to_string();
        let tag = &digest[..16];
        let key = |kind: &str| format!("{prefix}:{{{tag}}}:{kind}:{name}");
        Ok(LockKeys {
            all: [key("lock"), key("queue"), key("deadlines")],
            slot: crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % 16384,
        })
    }

    /// The lock key, the only key the renew script needs.
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
    fn empty_and_oversized_names_are_invalid() {
        let kind = |n: &str| LockKeys::new("p", n).unwrap_err().kind();
        assert_eq!(kind(""), ErrorKind::InvalidName);
        assert_eq!(kind(&"x".repeat(MAX_NAME_LEN + 1)), ErrorKind::InvalidName);
        assert!(LockKeys::new("p", &"x".repeat(MAX_NAME_LEN)).is_ok());
    }
}
