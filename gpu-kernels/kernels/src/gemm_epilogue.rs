//! The GEMM epilogue's element math, shared by the GEMM kernels and the split-K finalize
//! kernels: `D = act(alpha·acc + beta·C + bias)`, and the output element types.
//!
//! Split-K: when a problem has too few output tiles to fill the GPU, the GEMM splits K over
//! several workers that add `alpha·acc` into a zeroed f32 workspace with atomics; the
//! `gemm_splitk_finalize_*` kernels here then apply `beta·C + bias`, the activation and the
//! rounding, one thread per element.

use warpforge_dsl::abi::{Activation, GemmParams};
use warpforge_dsl::kernel;
use warpforge_dsl::math;
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::thread::{global_x, grid_stride_x};

/// An output element type of the epilogue.
pub trait Output: Copy {
    /// The 16-bit type staged in shared memory for TMA stores (16-bit outputs are staged as
    /// themselves; f32 output is always stored directly and never uses its staging type).
    type Staged: Copy;
    /// Rounds an f32 result.
    fn from_f32(v: f32) -> Self;
    /// Reads an element of C as f32.
    fn to_f32(self) -> f32;
    /// Bits of a rounded f32 result in the staged type.
    fn staged_bits(v: f32) -> u16;
}
impl Output for Bf16 {
    type Staged = Bf16;
    fn from_f32(v: f32) -> Self {
        Bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
    fn staged_bits(v: f32) -> u16 {
        Bf16::from_f32(v).0
    }
}
impl Output for F16 {
    type Staged = F16;
    fn from_f32(v: f32) -> Self {
        F16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }
    fn staged_bits(v: f32) -> u16 {
        F16::from_f32(v).0
    }
}
impl Output for f32 {
    type Staged = Bf16;
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn staged_bits(v: f32) -> u16 {
        Bf16::from_f32(v).0
    }
}

/// `alpha·value + beta·C + bias`, activated: the value of D at (`row`, `col`) of `batch`.
///
/// # Safety
/// `p.c` (when non-zero) and `p.bias` (when non-zero) are valid for every in-bounds element.
#[inline(always)]
pub unsafe fn finish<O: Output>(p: &GemmParams, value: f32, alpha: f32, batch: u32, row: u32, col: u32) -> f32 {
    let mut v = alpha * value;
    let inside = row < p.m && col < p.n;
    if p.c != 0 && inside {
        let at = batch as u64 * p.stride_c + row as u64 * p.ldc + col as u64;
        // SAFETY: an in-bounds element of C (function contract).
        v += p.beta * unsafe { *(p.c as *const O).add(at as usize) }.to_f32();
    }
    if p.bias != 0 && inside {
        // SAFETY: col < n, the bias length.
        v += unsafe { *(p.bias as *const f32).add(col as usize) };
    }
    match Activation::from_code(p.activation) {
        Activation::None => v,
        Activation::Relu => math::relu(v),
        Activation::Silu => math::silu(v),
        Activation::GeluTanh => math::gelu_tanh(v),
    }
}

macro_rules! finalize_entries {
    ($($name:ident: $output:ty;)*) => {$(
        /// Split-K finalize: `D[b][i][j] = act(ws[b][i][j] + beta·C + bias)` rounded to the
        /// output type, for every element of the problem (`ws` holds `alpha·A·B`, packed M × N
        /// per batch).
        ///
        /// # Safety
        /// `params` describes D, C, bias as for the GEMM; `workspace` holds `batch·m·n` f32.
        #[kernel(max_threads = 1024)]
        pub unsafe fn $name(params: GemmParams, workspace: *const f32) {
            let p = &params;
            let per_batch = p.m as u64 * p.n as u64;
            let total = p.batch as u64 * per_batch;
            let mut i = global_x() as u64;
            while i < total {
                let (b, within) = (i / per_batch, i % per_batch);
                let (row, col) = ((within / p.n as u64) as u32, (within % p.n as u64) as u32);
                // SAFETY: i < batch·m·n, inside the workspace (contract).
                let partial = unsafe { *workspace.add(i as usize) };
                // SAFETY: (row, col) is inside the problem; C and bias as the contract says.
                let v = unsafe { finish::<$output>(p, partial, 1.0, b as u32, row, col) };
                let at = b * p.stride_d + row as u64 * p.ldd + col as u64;
                // SAFETY: an in-bounds element of D (contract).
                unsafe { *(p.d as *mut $output).add(at as usize) = <$output as Output>::from_f32(v) };
                i += grid_stride_x() as u64;
            }
        }
    )*};
}

finalize_entries! {
    gemm_splitk_finalize_bf16: Bf16;
    gemm_splitk_finalize_f16: F16;
    gemm_splitk_finalize_f32: f32;
}
