//! Shared test helpers: the GPU handle, deterministic non-zero data, float tolerances.

use std::sync::OnceLock;

use warpforge::{Device, Warpforge};

/// Device 0 and warpforge's kernels on it, opened once per test binary.
pub fn gpu() -> &'static (Device, Warpforge) {
    static GPU: OnceLock<(Device, Warpforge)> = OnceLock::new();
    GPU.get_or_init(|| {
        let device = Device::new(0).expect("GPU tests need an NVIDIA GPU and driver");
        let wf = Warpforge::new(&device).expect("warpforge kernels load on this GPU");
        (device, wf)
    })
}

/// `n` values uniform in [-scale, scale] from `seed`, none of them zero (SplitMix64).
pub fn random_f32(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let unit = (z >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
            let v = (2.0 * unit - 1.0) * scale;
            if v == 0.0 { scale * 0.5 } else { v }
        })
        .collect()
}

/// Unit roundoff of f32.
pub const EPS_F32: f64 = f32::EPSILON as f64 / 2.0;
/// Unit roundoff of bf16 (8 significant bits).
pub const EPS_BF16: f64 = 1.0 / 256.0;
/// Unit roundoff of f16 (11 significant bits).
pub const EPS_F16: f64 = 1.0 / 2048.0;
