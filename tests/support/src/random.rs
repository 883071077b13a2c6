//! A small deterministic random generator for the tests that draw their
//! steps (tests/model/, tests/protocol/'s random mixes): an LCG with no
//! dependency, so that a seed names one sequence and a failure repeats.

/// A linear congruential generator (Knuth's MMIX constants); its state is
/// the seed.
pub struct Lcg(pub u64);

impl Lcg {
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}
