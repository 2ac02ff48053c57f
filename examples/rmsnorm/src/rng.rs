//! SplitMix64: a small seeded generator, enough for test data.

pub struct SplitMix64(pub u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (−1, 1), never 0: an odd multiple of 2⁻²⁴ minus 1.
    pub fn uniform_nonzero(&mut self) -> f32 {
        let odd = (self.next() >> 40) as u32 * 2 + 1; // < 2²⁵
        (odd as f64 / (1u64 << 24) as f64 - 1.0) as f32
    }
}
