//! The RMSNorm half of the example: argument checks and the launch of `rmsnorm_bf16`, a check
//! of every element against a float64 reference, and a bandwidth measurement.

use std::time::Instant;

use half::bf16;
use warpforge_host::cudarc::driver::{CudaSlice, CudaStream};
use warpforge_host::{Device, Kernel, KernelArgs, LaunchConfig, Module};

use crate::abi::{RMSNORM_MAX_COLS, RMSNORM_VECTOR, RMSNORM_VECTORS_PER_THREAD};
use crate::rng::SplitMix64;

/// The kernel's entry name.
pub const ENTRY: &str = "rmsnorm_bf16";
/// The epsilon under the square root.
const EPS: f32 = 1e-6;
/// Unit roundoff of f32 and bf16.
const U_F32: f64 = f32::EPSILON as f64 / 2.0;
const U_BF16: f64 = 1.0 / 256.0;
/// Relative error of `rsqrt.approx.f32` (PTX ISA).
const RSQRT_REL: f64 = 1.0 / 7_820_000.0; // 2^-22.9
/// Launches timed for the bandwidth figure (after one warm-up launch).
const TIMED_LAUNCHES: u32 = 20;

/// Threads per block for rows of `cols`: every thread holds up to four vectors; whole warps.
fn block_threads(cols: u32) -> u32 {
    (cols / RMSNORM_VECTOR).div_ceil(RMSNORM_VECTORS_PER_THREAD).next_multiple_of(32)
}

/// `y = rmsnorm(x) · w` on `stream` for `rows × cols` bf16 (row-major, rows packed), after
/// checking every argument the kernel's contract names.
pub fn launch(
    kernel: &Kernel,
    stream: &CudaStream,
    (x, w, y): (&CudaSlice<bf16>, &CudaSlice<bf16>, &mut CudaSlice<bf16>),
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    if cols == 0 || !cols.is_multiple_of(RMSNORM_VECTOR as usize) {
        return Err(format!(
            "{ENTRY}: {cols} columns is not a positive multiple of 8 (rows are read as 16-byte vectors)"
        ));
    }
    if cols > RMSNORM_MAX_COLS as usize {
        return Err(format!(
            "{ENTRY}: {cols} columns is more than {RMSNORM_MAX_COLS} (one block of 1024 threads per row)"
        ));
    }
    if rows == 0 || rows > i32::MAX as usize {
        return Err(format!("{ENTRY}: {rows} rows is outside 1..=2^31-1 (one block per row)"));
    }
    if x.len() != rows * cols || y.len() != rows * cols || w.len() != cols {
        return Err(format!(
            "{ENTRY}: buffers of {}, {} and {} elements for {rows} × {cols}",
            x.len(),
            w.len(),
            y.len()
        ));
    }
    let mut args = KernelArgs::new();
    args.push_buffer(x, stream).push_buffer(w, stream).push_buffer_mut(y, stream).push(cols as u32).push(EPS);
    let config = LaunchConfig::linear(rows as u32, block_threads(cols as u32));
    // SAFETY: 1. (x, w, y, cols, eps) as the kernel declares them. 2. x and y hold rows × cols
    // elements and w cols (checked above), cudarc allocations (256-byte aligned) whose rows are
    // whole 16-byte vectors; cols ≤ RMSNORM_MAX_COLS and the block covers a row in whole warps.
    // 3. y is borrowed mutably and x, w shared for the launch, with their stream guards.
    unsafe { kernel.launch(stream, &config, args) }.map_err(|e| e.to_string())
}

/// Runs RMSNorm on random non-zero `rows × cols` inputs and compares every element with the
/// reference; returns the largest error in units of its tolerance (≤ 1 passes).
pub fn check(device: &Device, module: &Module, rows: usize, cols: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let kernel = module.kernel(ENTRY)?;
    let stream = device.stream();
    let mut rng = SplitMix64(0x5eed ^ (rows * 131 + cols) as u64);
    // Magnitudes up to 8, varying along the row, so the scale is not close to 1.
    let x: Vec<bf16> = (0..rows * cols).map(|i| bf16::from_f32(rng.uniform_nonzero() * (1 + i % 8) as f32)).collect();
    let w: Vec<bf16> = (0..cols).map(|_| bf16::from_f32(rng.uniform_nonzero())).collect();
    let d_x = stream.clone_htod(&x)?;
    let d_w = stream.clone_htod(&w)?;
    // NaN everywhere, so an element the kernel never writes fails the check.
    let mut d_y = stream.clone_htod(&vec![bf16::NAN; rows * cols])?;
    launch(&kernel, stream, (&d_x, &d_w, &mut d_y), rows, cols)?;
    let y = stream.clone_dtoh(&d_y)?;

    // Per row: f32 sum of squares (≤ cols·u relative), its mean plus eps (u), rsqrt.approx, two
    // products (2u), then the rounding to bf16 (u_bf16).
    let rel = 1.01 * (U_BF16 + 0.5 * (cols as f64 + 1.0) * U_F32 + RSQRT_REL + 2.0 * U_F32);
    let mut worst = 0.0f64;
    for (xr, yr) in x.chunks(cols).zip(y.chunks(cols)) {
        let mean = xr.iter().map(|v| v.to_f64().powi(2)).sum::<f64>() / cols as f64;
        let scale = 1.0 / (mean + f64::from(EPS)).sqrt();
        for ((xv, wv), got) in xr.iter().zip(&w).zip(yr) {
            let want = xv.to_f64() * scale * wv.to_f64();
            let got = got.to_f64();
            let ratio = if got.is_finite() { (got - want).abs() / (rel * want.abs() + 1e-30) } else { f64::INFINITY };
            worst = worst.max(ratio);
        }
    }
    Ok(worst)
}

/// Bandwidth of `rows × cols` RMSNorm in GB/s: bytes of x read, y written and w read once,
/// over the mean time of [`TIMED_LAUNCHES`] back-to-back launches.
pub fn bandwidth(
    device: &Device,
    module: &Module,
    rows: usize,
    cols: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    let kernel = module.kernel(ENTRY)?;
    let stream = device.stream();
    let d_x = stream.clone_htod(&vec![bf16::ONE; rows * cols])?;
    let d_w = stream.clone_htod(&vec![bf16::ONE; cols])?;
    let mut d_y = stream.alloc_zeros::<bf16>(rows * cols)?;
    launch(&kernel, stream, (&d_x, &d_w, &mut d_y), rows, cols)?;
    stream.synchronize()?;
    let start = Instant::now();
    for _ in 0..TIMED_LAUNCHES {
        launch(&kernel, stream, (&d_x, &d_w, &mut d_y), rows, cols)?;
    }
    stream.synchronize()?;
    let seconds = start.elapsed().as_secs_f64() / f64::from(TIMED_LAUNCHES);
    let bytes = ((2 * rows * cols + cols) * size_of::<bf16>()) as f64;
    Ok(bytes / seconds / 1e9)
}
