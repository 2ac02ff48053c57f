//! The GEMM half of the example: tensor maps built from the shared tile descriptions, the
//! launch of `gemm_bf16_tn` (Hopper only) sized from the shared shared-memory plan, and a check
//! of every element of D = A·Bᵀ against a float64 reference.

use half::bf16;
use warpforge_host::cudarc::driver::DevicePtrMut;
use warpforge_host::{Device, KernelArgs, KernelParam, LaunchConfig, Module, TensorMapBuilder};

use crate::abi::{GEMM_BLOCK_M, GEMM_BLOCK_N, GEMM_SMEM, GEMM_THREADS, GemmATile, GemmBTile, GemmParams};
use crate::rng::SplitMix64;

/// The kernel's entry name.
pub const ENTRY: &str = "gemm_bf16_tn";
/// TMA reads each row of A and B in place: row pitches are whole 16-byte chunks (8 bf16).
const K_MULTIPLE: usize = 8;
/// Unit roundoff of f32, and the relative rounding of a bf16 result with a factor of two spare.
const U_F32: f64 = f32::EPSILON as f64 / 2.0;
const EPS_BF16: f64 = 1.0 / 128.0;
/// Absolute slack for results that round to (almost) zero.
const ABS_FLOOR: f64 = 1e-6;

// SAFETY: #[repr(C)], one u64 and four u32 with no padding (asserted in `abi`); the address
// field is vouched for by the launch's own SAFETY comment.
unsafe impl KernelParam for GemmParams {}

/// Runs D = A·Bᵀ (A: M × K, B: N × K, both row-major) on random non-zero inputs and compares
/// every element of D; returns the largest error in units of its tolerance (≤ 1 passes).
pub fn check(
    device: &Device,
    module: &Module,
    (m, n, k): (usize, usize, usize),
) -> Result<f64, Box<dyn std::error::Error>> {
    if m == 0 || n == 0 || k == 0 || !k.is_multiple_of(K_MULTIPLE) || [m, n, k].iter().any(|&x| x > i32::MAX as usize) {
        return Err(format!("{m}×{n}×{k}: M, N, K in 1..2^31 and K a multiple of {K_MULTIPLE} (TMA row pitch)").into());
    }
    let scale = (3.0 / (k as f64).sqrt()).sqrt() as f32; // A·Bᵀ of order 1
    let mut rng = SplitMix64(0xfeed ^ (m * 31 + n * 17 + k) as u64);
    let a: Vec<bf16> = (0..m * k).map(|_| bf16::from_f32(scale * rng.uniform_nonzero())).collect();
    let b: Vec<bf16> = (0..n * k).map(|_| bf16::from_f32(scale * rng.uniform_nonzero())).collect();

    let stream = device.stream();
    let (d_a, d_b) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let mut d_d = stream.clone_htod(&vec![bf16::NAN; m * n])?;
    // K-major maps whose boxes and swizzle are the kernel's tiles (the same descriptions).
    let (a_map, a_read) = TensorMapBuilder::for_tile::<GemmATile>(&[k as u64, m as u64]).encode(&d_a, stream)?;
    let (b_map, b_read) = TensorMapBuilder::for_tile::<GemmBTile>(&[k as u64, n as u64]).encode(&d_b, stream)?;

    let kernel = module.kernel(ENTRY)?;
    let mut config = LaunchConfig::linear(n.div_ceil(GEMM_BLOCK_N as usize) as u32, GEMM_THREADS)
        .with_dynamic_smem(GEMM_SMEM.launch_bytes());
    config.grid[1] = m.div_ceil(GEMM_BLOCK_M as usize) as u32;
    {
        let (d_ptr, d_write) = d_d.device_ptr_mut(stream);
        let params = GemmParams { d: d_ptr, m: m as u32, n: n as u32, k: k as u32, ldd: n as u32 };
        let mut args = KernelArgs::new();
        args.push(a_map).keep(a_read).push(b_map).keep(b_read).push(params).keep(d_write);
        // SAFETY: 1. (a_map, b_map, params) as the kernel declares them (`GemmParams` is the
        // same source file on both sides). 2. The maps cover `d_a` and `d_b` (checked by the
        // encoder) with the kernel's tiles as boxes; `d_d` holds M × N elements at pitch N; all
        // live until the synchronising copy below. 3. Nothing else touches `d_d` meanwhile.
        unsafe { kernel.launch(stream, &config, args)? };
    }
    let got = stream.clone_dtoh(&d_d)?;

    let (a, b): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| v.to_f64()).collect(), b.iter().map(|v| v.to_f64()).collect());
    let mut worst = 0.0f64;
    for (i, row) in a.chunks(k).enumerate() {
        for (j, col) in b.chunks(k).enumerate() {
            let (dot, mag) = row.iter().zip(col).fold((0.0, 0.0), |(s, t), (x, y)| (s + x * y, t + (x * y).abs()));
            // f32 accumulation moves the sum by at most 2·K·u·Σ|xy|; then D rounds to bf16.
            let tol = EPS_BF16 * dot.abs() + 2.0 * k as f64 * U_F32 * mag + ABS_FLOOR;
            let d = got[i * n + j].to_f64();
            worst = worst.max(if d.is_finite() { (d - dot).abs() / tol } else { f64::INFINITY });
        }
    }
    Ok(worst)
}
