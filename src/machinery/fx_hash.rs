//! The hasher of the client's own maps (waiters by wait id, holds by lock
//! key): FxHash, rustc's, a rotate, a xor and a multiply per word.
//!
//! Every lock call looks up both maps a few times; std's SipHash cost more
//! than the rest of the bookkeeping. Its protection against keys chosen to
//! collide buys nothing here: the keys are this client's own wait ids and
//! the names its caller gave.

use std::hash::{BuildHasherDefault, Hasher};

/// A map's hasher state.
pub(crate) type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// One hash being computed.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

/// rustc's constant (from Firefox's hash).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let mut tail = [0u8; 8];
        let rest = words.remainder();
        if !rest.is_empty() {
            tail[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(tail));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn equal_keys_hash_alike_and_near_ones_apart() {
        let build = FxBuildHasher::default();
        assert_eq!(
            build.hash_one("p:{t}:lock:a"),
            build.hash_one("p:{t}:lock:a")
        );
        assert_ne!(
            build.hash_one("p:{t}:lock:a"),
            build.hash_one("p:{t}:lock:b")
        );
        // A tail shorter than a word still counts.
        assert_ne!(build.hash_one("abcdefgh1"), build.hash_one("abcdefgh2"));
        assert_ne!(build.hash_one(1u64), build.hash_one(2u64));
    }

    #[test]
    fn a_map_of_sequential_ids_finds_every_one() {
        let mut map: HashMap<u64, u64, FxBuildHasher> = HashMap::default();
        for id in 1..=10_000u64 {
            map.insert(id, id * 2);
        }
        assert!((1..=10_000u64).all(|id| map.get(&id) == Some(&(id * 2))));
        map.retain(|id, _| id % 2 == 0);
        assert_eq!(map.len(), 5_000);
    }
}
