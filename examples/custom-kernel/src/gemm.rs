//! The GEMM half of the example: builds A's and B's tensor maps, launches the author's
//! `gemm_relu2_bf16` (Hopper only) on a persistent grid and checks every element of
//! D = relu(A·Bᵀ)² against a float64 CPU reference.

use half::bf16;
use warpforge_host::Device;
use warpforge_host::cudarc::driver::DevicePtrMut;
use warpforge_host::{KernelArgs, KernelParam, LaunchConfig, Module, TensorMapBuilder};

use crate::gemm_abi::{ATile, BLOCK_M, BLOCK_N, BTile, GemmRelu2Params, SMEM, THREADS};

/// The kernel's entry name.
pub const ENTRY: &str = "gemm_relu2_bf16";
/// TMA reads each row of A and B in place: row pitches are whole 16-byte chunks (8 bf16).
const K_MULTIPLE: usize = 8;
/// Half the distance between f32 numbers near 1 (unit roundoff).
const EPS_F32: f64 = f32::EPSILON as f64 / 2.0;
/// Relative rounding of a bf16 result, with a factor of two to spare over the unit roundoff.
const EPS_BF16: f64 = 1.0 / 128.0;
/// Absolute slack for results that round to (almost) zero.
const ABS_FLOOR: f64 = 1e-6;

// SAFETY: #[repr(C)], four u32 and one u64 with no padding (asserted in `gemm_abi`); the
// address field is vouched for by the launch's own SAFETY comment.
unsafe impl KernelParam for GemmRelu2Params {}

/// One problem, M × N × K.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Runs D = relu(A·Bᵀ)² on random inputs of `shape` and compares every element of D with the
/// reference; returns the largest error in units of its tolerance (≤ 1 passes).
pub fn check(device: &Device, module: &Module, shape: Shape) -> std::result::Result<f64, Box<dyn std::error::Error>> {
    let Shape { m, n, k } = shape;
    if m == 0 || n == 0 || k == 0 || !k.is_multiple_of(K_MULTIPLE) {
        return Err(format!("{m}×{n}×{k}: M, N, K ≥ 1 and K a multiple of {K_MULTIPLE} (TMA row pitch)").into());
    }
    if [m, n, k].iter().any(|&x| x > u32::MAX as usize) {
        return Err(format!("{m}×{n}×{k}: each extent fits u32").into());
    }
    // Products of K terms of uniform(−1, 1)² have variance K/9: scale both inputs so A·Bᵀ is O(1).
    let scale = (3.0 / (k as f64).sqrt()).sqrt() as f32;
    let mut rng = SplitMix64(0x5eed ^ (m * 31 + n * 17 + k) as u64);
    let a: Vec<bf16> = (0..m * k).map(|_| bf16::from_f32(scale * rng.uniform_nonzero())).collect();
    let b: Vec<bf16> = (0..n * k).map(|_| bf16::from_f32(scale * rng.uniform_nonzero())).collect();

    let stream = device.stream();
    let d_a = stream.clone_htod(&a)?;
    let d_b = stream.clone_htod(&b)?;
    // NaN everywhere, so an element the kernel never writes fails the check.
    let mut d_d = stream.clone_htod(&vec![bf16::NAN; m * n])?;
    // K-major maps, dims [K, rows, 1], whose boxes and swizzle are the kernel's shared-memory
    // tiles (the same descriptions); the encoder checks every driver rule first.
    let (a_map, a_read) = TensorMapBuilder::for_tile::<ATile>(&[k as u64, m as u64, 1]).encode(&d_a, stream)?;
    let (b_map, b_read) = TensorMapBuilder::for_tile::<BTile>(&[k as u64, n as u64, 1]).encode(&d_b, stream)?;

    let kernel = module.kernel(ENTRY)?;
    let tiles = (m.div_ceil(BLOCK_M as usize) * n.div_ceil(BLOCK_N as usize)) as u64;
    let smem = SMEM.launch_bytes();
    let plan = kernel.plan_persistent(THREADS, smem, None, tiles)?;
    {
        let (d_ptr, d_write) = d_d.device_ptr_mut(stream);
        let params = GemmRelu2Params { d: d_ptr, m: m as u32, n: n as u32, k: k as u32, ldd: n as u32 };
        // The launch holds every buffer's stream-ordering guard until the kernel is enqueued.
        let mut args = KernelArgs::new();
        args.push(a_map).keep(a_read).push(b_map).keep(b_read).push(params).keep(d_write);
        let config = LaunchConfig::linear(plan.blocks, THREADS).with_dynamic_smem(smem);
        // SAFETY: 1. (a_map, b_map, params) as the kernel declares them (`GemmRelu2Params` is
        // the same source file on both sides). 2. The maps cover `d_a` and `d_b` (M × K and
        // N × K, checked by the encoder) with the kernel's tiles as boxes and swizzle; `d_d` holds M × N
        // elements at pitch N; all three live until the synchronising copy below. 3. Nothing
        // else touches `d_d` meanwhile.
        unsafe { kernel.launch(stream, &config, args)? };
    }
    let got = stream.clone_dtoh(&d_d)?;
    Ok(worst_error(&a, &b, &got, shape))
}

/// The largest |D − reference| / tolerance over every element.
fn worst_error(a: &[bf16], b: &[bf16], d: &[bf16], Shape { m, n, k }: Shape) -> f64 {
    let a: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
    let b: Vec<f64> = b.iter().map(|v| v.to_f64()).collect();
    let mut worst = 0.0f64;
    for i in 0..m {
        let row = &a[i * k..][..k];
        for j in 0..n {
            let col = &b[j * k..][..k];
            let (mut dot, mut mag) = (0.0f64, 0.0f64);
            for (&x, &y) in row.iter().zip(col) {
                dot += x * y;
                mag += (x * y).abs();
            }
            let want = dot.max(0.0).powi(2);
            // f32 accumulation moves the sum by at most `sum_err`, and the square by
            // (2·|x| + sum_err)·sum_err; then the square is rounded to bf16.
            let sum_err = 2.0 * k as f64 * EPS_F32 * mag;
            let tol = EPS_BF16 * want + 1.01 * (2.0 * dot.abs() + sum_err) * sum_err + ABS_FLOOR;
            let got = d[i * n + j].to_f64();
            // NaN (unwritten or not finite) counts as infinitely wrong.
            let ratio = if got.is_finite() { (got - want).abs() / tol } else { f64::INFINITY };
            worst = worst.max(ratio);
        }
    }
    worst
}

/// SplitMix64: a small seeded generator, enough for test data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (−1, 1), never 0: an odd multiple of 2⁻²⁴ minus 1.
    fn uniform_nonzero(&mut self) -> f32 {
        let odd = (self.next() >> 40) as u32 * 2 + 1; // < 2²⁵
        (odd as f64 / (1u64 << 24) as f64 - 1.0) as f32
    }
}
