//! Deterministic pseudo-random numbers for the simulated fleet and the demo seed: the same
//! seed gives the same world and the same simulated failures on every run.

/// SplitMix64: tiny, fast, and fully specified, so seeds stay stable across dependency upgrades.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// A generator seeded from a number and a text (e.g. an effect key), for decisions that must
    /// come out the same every time they are asked.
    pub(crate) fn keyed(seed: u64, text: &str, n: u64) -> Rng {
        let mut rng = Rng(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for byte in text.bytes() {
            rng.0 = rng.0.rotate_left(5) ^ u64::from(byte);
            rng.next();
        }
        rng
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`/100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
