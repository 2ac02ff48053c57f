//! Helpers both side-by-side benches share: random non-zero inputs, the SM clock, the median.
//! Included by each bench with `#[path]` (benches are separate crates; this is not a bench).

use half::bf16;

/// `n` values uniform in (-1, 1), none of them zero (xorshift from `seed`).
pub fn random_bf16(seed: u64, n: usize) -> Vec<bf16> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            let v = 2.0 * unit - 1.0;
            bf16::from_f32(if v == 0.0 { 0.5 } else { v })
        })
        .collect()
}

/// The SM clock nvidia-smi reports now, MHz ("?" without nvidia-smi).
pub fn sm_clock_mhz() -> String {
    std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=clocks.sm", "--format=csv,noheader,nounits"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
