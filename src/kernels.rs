//! The small kernels' entry points (element-wise, the block sum, the persistent-schedule probe):
//! argument checks, grid choice, typed launch.
//!
//! Each method validates what the kernel's safety contract needs (lengths, the stream's and
//! every buffer's CUDA context) and then launches; the `unsafe` launch is justified right there
//! against that contract.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::elements::{Bf16, F16};
use warpforge_abi::signatures::Saxpy;
use warpforge_abi::{Entry, TileVisit, entries};
use warpforge_host::{BufferElement, Error, GridPlan, LaunchConfig, Result};

use crate::Warpforge;
use crate::swiglu::SwigluElement;

/// Threads per block of the element-wise kernels.
const ELEMENTWISE_THREADS: u32 = 256;
/// Resident element-wise blocks per SM the grid-stride loops are sized for.
const ELEMENTWISE_BLOCKS_PER_SM: u32 = 8;
/// Block size of `block_sum_f32` (fixed by its `.reqntid`).
const BLOCK_SUM_THREADS: u32 = 256;
/// Block size of `persistent_static_visit` (fixed by its `.reqntid`).
const VISIT_THREADS: u32 = 128;
/// Elements `silu_mul` moves per thread per step on its vector path (16 bytes of 16-bit data).
const SILU_MUL_VECTOR: usize = 8;

/// Element types `saxpy` supports (f32 arithmetic, storage in `Self`): `f32`, `bf16`, `f16`.
/// Sealed:
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Mine(f32);
/// // SAFETY: (doctest) a plain 32-bit value.
/// unsafe impl cudarc::driver::DeviceRepr for Mine {}
/// impl warpforge::kernels::SaxpyElement for Mine {
///     type Device = f32;
///     const SAXPY: warpforge::abi::Entry<warpforge::abi::signatures::Saxpy<f32>> = warpforge::abi::entries::SAXPY_F32;
/// }
/// ```
pub trait SaxpyElement: crate::sealed::Sealed + cudarc::driver::DeviceRepr + Copy + 'static {
    /// The element as the kernel's parameter list names it.
    type Device: BufferElement<Host = Self>;
    /// Kernel entry for this dtype.
    const SAXPY: Entry<Saxpy<Self::Device>>;
}
impl SaxpyElement for f32 {
    type Device = f32;
    const SAXPY: Entry<Saxpy<f32>> = entries::SAXPY_F32;
}
impl SaxpyElement for half::bf16 {
    type Device = Bf16;
    const SAXPY: Entry<Saxpy<Bf16>> = entries::SAXPY_BF16;
}
impl SaxpyElement for half::f16 {
    type Device = F16;
    const SAXPY: Entry<Saxpy<F16>> = entries::SAXPY_F16;
}

impl Warpforge {
    fn elementwise_grid(&self, n: usize) -> u32 {
        let blocks = n.div_ceil(ELEMENTWISE_THREADS as usize) as u64;
        blocks.clamp(1, (self.sm_count() * ELEMENTWISE_BLOCKS_PER_SM) as u64) as u32
    }

    /// `y = a·x + y`, element-wise. `x` and `y` must have the same length.
    pub fn saxpy<T: SaxpyElement>(
        &self,
        stream: &Arc<CudaStream>,
        a: f32,
        x: &impl DevicePtr<T>,
        y: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        self.module().check_context(stream, &[x.stream(), y.stream()])?;
        let n = same_len("saxpy", &[x.len(), y.len()])?;
        if n == 0 {
            return Ok(());
        }
        let kernel = self.entry(T::SAXPY)?;
        let config = LaunchConfig::linear(self.elementwise_grid(n), ELEMENTWISE_THREADS);
        // SAFETY: x and y hold n elements (checked above) and `y` is borrowed mutably, so it
        // aliases nothing.
        unsafe { kernel.launch(stream, &config, (n as u64, a, x, y), []) }
    }

    /// `out[r][c] = silu(h[r][c]) · h[r][I + c]` with `I = intermediate`: `h` is `m × 2I`
    /// row-major, its columns `0..I` the gate and `I..2I` the up projection (one GEMM over the
    /// stacked `[W_gate; W_up]`), and `out` is `m × I` row-major; f32 arithmetic, one rounding.
    /// The second half of the unfused gate-up + SwiGLU that [`Warpforge::swiglu`] fuses. Longer
    /// buffers are fine: only the first `m·2I` and `m·I` elements are touched. Runs eight
    /// elements per thread per step when `I % 8 == 0` and both buffers are 16-byte aligned.
    pub fn silu_mul<T: SwigluElement>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        intermediate: usize,
        h: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        self.module().check_context(stream, &[h.stream(), out.stream()])?;
        if m == 0 || intermediate == 0 {
            return Err(Error::InvalidArgument(format!(
                "silu_mul: m = {m} and intermediate = {intermediate} must be ≥ 1"
            )));
        }
        let overflow = || Error::InvalidArgument(format!("silu_mul: m·2·intermediate overflows ({m}, {intermediate})"));
        let out_len = m.checked_mul(intermediate).ok_or_else(overflow)?;
        let h_len = out_len.checked_mul(2).ok_or_else(overflow)?;
        if h.len() < h_len || out.len() < out_len {
            return Err(Error::InvalidArgument(format!(
                "silu_mul: h holds {} (needs {h_len}) and out {} (needs {out_len}) elements",
                h.len(),
                out.len()
            )));
        }
        let kernel = self.entry(T::SILU_MUL)?;
        let grid = self.elementwise_grid(out_len.div_ceil(SILU_MUL_VECTOR));
        let config = LaunchConfig::linear(grid, ELEMENTWISE_THREADS);
        // SAFETY: h holds at least m·2·intermediate and out m·intermediate elements (checked
        // above), and `out` is borrowed mutably, so it overlaps nothing `h` reaches.
        unsafe { kernel.launch(stream, &config, (m as u64, intermediate as u64, h, out), []) }
    }

    /// `out = a + b`, element-wise f32.
    pub fn vector_add_f32(
        &self,
        stream: &Arc<CudaStream>,
        a: &impl DevicePtr<f32>,
        b: &impl DevicePtr<f32>,
        out: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        self.module().check_context(stream, &[a.stream(), b.stream(), out.stream()])?;
        let n = same_len("vector_add_f32", &[a.len(), b.len(), out.len()])?;
        if n == 0 {
            return Ok(());
        }
        let kernel = self.entry(entries::VECTOR_ADD_F32)?;
        let config = LaunchConfig::linear(self.elementwise_grid(n), ELEMENTWISE_THREADS);
        // SAFETY: all three buffers hold n elements; `out` is borrowed mutably so it aliases
        // neither input.
        unsafe { kernel.launch(stream, &config, (n as u64, a, b, out), []) }
    }

    /// Sum of `x`, reduced per block on the GPU (warp shuffles) and across blocks on the host
    /// in f64. Synchronises `stream`.
    pub fn sum_f32(&self, stream: &Arc<CudaStream>, x: &impl DevicePtr<f32>) -> Result<f64> {
        self.module().check_context(stream, &[x.stream()])?;
        let n = x.len();
        if n == 0 {
            return Ok(0.0);
        }
        let kernel = self.entry(entries::BLOCK_SUM_F32)?;
        let blocks = (n.div_ceil(BLOCK_SUM_THREADS as usize) as u64).clamp(1, 2 * self.sm_count() as u64) as u32;
        let mut partials = stream.alloc_zeros::<f32>(blocks as usize).map_err(driver("cuMemAlloc"))?;
        let config = LaunchConfig::linear(blocks, BLOCK_SUM_THREADS);
        // SAFETY: `x` holds n elements and `partials` one f32 per block of the grid.
        unsafe { kernel.launch(stream, &config, (n as u64, x, &mut partials), [])? };
        let host = stream.clone_dtoh(&partials).map_err(driver("cuMemcpyDtoH"))?;
        Ok(host.iter().map(|&v| v as f64).sum())
    }

    /// Runs the persistent static-scheduler probe over a `tiles_m × tiles_n` tile grid on a
    /// grid planned from the device's occupancy; returns the plan and the per-tile record.
    /// Synchronises `stream`.
    pub fn persistent_visit(
        &self,
        stream: &Arc<CudaStream>,
        tiles_m: u32,
        tiles_n: u32,
    ) -> Result<(GridPlan, Vec<TileVisit>)> {
        self.module().check_context(stream, &[])?;
        let tiles = tiles_m as u64 * tiles_n as u64;
        if tiles == 0 || tiles > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!("tile grid {tiles_m}×{tiles_n} must hold 1..2^32 tiles")));
        }
        let kernel = self.entry(entries::PERSISTENT_STATIC_VISIT)?;
        let plan = kernel.kernel().plan_persistent(VISIT_THREADS, 0, None, tiles)?;
        let mut visits = stream.alloc_zeros::<u32>(tiles as usize * 4).map_err(driver("cuMemAlloc"))?;
        let config = LaunchConfig::linear(plan.blocks, VISIT_THREADS);
        // SAFETY: `visits` holds one zeroed 16-byte TileVisit per tile (4 u32 each).
        unsafe { kernel.launch(stream, &config, (tiles_m, tiles_n, &mut visits), [])? };
        let raw = stream.clone_dtoh(&visits).map_err(driver("cuMemcpyDtoH"))?;
        let records =
            raw.chunks_exact(4).map(|c| TileVisit { count: c[0], worker: c[1], iteration: c[2], sm: c[3] }).collect();
        Ok((plan, records))
    }
}

fn same_len(op: &str, lens: &[usize]) -> Result<usize> {
    let n = lens[0];
    if lens.iter().any(|&l| l != n) {
        return Err(Error::InvalidArgument(format!("{op}: buffers must have equal lengths, got {lens:?}")));
    }
    Ok(n)
}

fn driver(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |source| Error::Driver { call, source }
}
