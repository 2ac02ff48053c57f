//! The decode path: GEMMs of at most [`SKINNY_MAX_ROWS`] rows run on the CUDA cores
//! (`gemm_skinny_*_sm90`), every warp of a resident grid streaming the weight (B) once, instead
//! of on 64- or 128-row wgmma tiles that leave most of each tile and most SMs idle.
//!
//! Taken by `Auto` problems (no forced consumer arrangement, tile width or clusters) whose
//! operands the kernel reads in 16-byte vectors without a repack: A row-major, B column-major
//! (a linear layer's N × K weight), K, both pitches and both batch strides multiples of 8
//! elements, both buffers 16-byte aligned. Anything else takes the tensor-core path.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::signatures::GemmSkinny;
use warpforge_abi::{Entry, GemmParams, SkinnyOperands, entries};
use warpforge_host::{LaunchConfig, Result};

use super::{Clusters, Consumers, EpilogueMath, GemmExtents, GemmProblem, Layout, TileWidth};
use crate::Warpforge;

/// Most rows the decode path takes.
pub const SKINNY_MAX_ROWS: usize = 8;
/// Threads per block of the skinny kernels (eight warps).
const THREADS: u32 = 256;
/// Columns of D per warp (the kernel's `COLS_PER_WARP`).
const COLS_PER_WARP: u64 = 2;

/// Whether `p` takes the decode path, judged on its shape and layout (buffer alignment is
/// checked at launch; a misaligned buffer falls back to the tensor-core path).
pub(crate) fn eligible(p: &GemmProblem, e: &GemmExtents) -> bool {
    let vectors = |elems: usize| elems.is_multiple_of(8);
    p.m <= SKINNY_MAX_ROWS
        && p.consumers == Consumers::Auto
        && p.tile_width == TileWidth::Auto
        && p.clusters == Clusters::Auto
        && p.a_layout == Layout::RowMajor
        && p.b_layout == Layout::ColMajor
        && vectors(p.k)
        && vectors(e.lda)
        && vectors(e.ldb)
        && (p.batch == 1 || (vectors(e.strides[0]) && vectors(e.strides[1])))
}

/// The skinny entry for the (input, output) names.
pub(crate) fn entry(input: &str, output: &str) -> Entry<GemmSkinny> {
    match (input, output) {
        ("bf16", "bf16") => entries::GEMM_SKINNY_BF16_BF16,
        ("bf16", "f16") => entries::GEMM_SKINNY_BF16_F16,
        ("bf16", "f32") => entries::GEMM_SKINNY_BF16_F32,
        ("f16", "bf16") => entries::GEMM_SKINNY_F16_BF16,
        ("f16", "f16") => entries::GEMM_SKINNY_F16_F16,
        _ => entries::GEMM_SKINNY_F16_F32,
    }
}

impl Warpforge {
    /// Blocks launched for `p` with `entry`: one warp per pair of columns per batch, capped at
    /// the blocks the device holds at once (the warps then loop over the rest).
    pub(crate) fn skinny_grid(&self, entry: Entry<GemmSkinny>, p: &GemmProblem) -> Result<u32> {
        let warps = (p.n as u64).div_ceil(COLS_PER_WARP) * p.batch as u64;
        let blocks = warps.div_ceil((THREADS / 32) as u64).max(1);
        Ok(self.entry(entry)?.kernel().plan_persistent(THREADS, 0, None, blocks)?.blocks)
    }
}

impl Warpforge {
    /// Launches the decode path when `a` and `b` are 16-byte aligned; `Ok(false)` (nothing
    /// launched) otherwise, for the caller to take the tensor-core path.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_skinny<I, O>(
        &self,
        stream: &Arc<CudaStream>,
        p: &GemmProblem,
        e: &GemmExtents,
        entry: Entry<GemmSkinny>,
        a: &impl DevicePtr<I>,
        b: &impl DevicePtr<I>,
        math: &EpilogueMath,
        d: &mut impl DevicePtrMut<O>,
    ) -> Result<bool> {
        let (a_ptr, a_access) = a.device_ptr(stream);
        let (b_ptr, b_access) = b.device_ptr(stream);
        if !a_ptr.is_multiple_of(16) || !b_ptr.is_multiple_of(16) {
            return Ok(false);
        }
        let kernel = self.entry(entry)?;
        let (d_ptr, d_access) = d.device_ptr_mut(stream);
        let params = GemmParams {
            m: p.m as u32,
            n: p.n as u32,
            d: d_ptr,
            c: if math.c_is_d { d_ptr } else { math.c },
            bias: math.bias,
            ldd: e.ldd as u64,
            ldc: math.ldc,
            stride_d: e.strides[3] as u64,
            stride_c: math.stride_c,
            alpha: math.alpha,
            beta: math.beta,
            activation: math.activation as u32,
            d_tma: 0,
            workspace: 0,
            flags: 0,
        };
        let operands = SkinnyOperands {
            a: a_ptr,
            b: b_ptr,
            lda: e.lda as u64,
            ldb: e.ldb as u64,
            stride_a: e.strides[0] as u64,
            stride_b: e.strides[1] as u64,
            k: p.k as u32,
            batch: p.batch as u32,
        };
        let config = LaunchConfig::linear(self.skinny_grid(entry, p)?, THREADS);
        // SAFETY: the caller checked A, B, C, D and bias against the problem's extents (`e`);
        // K, the pitches and strides are multiples of 8 elements (`eligible`) and both bases
        // 16-byte aligned (above), so every vector the kernel reads is inside A or B; in place,
        // each element of D is read as C and then written by the one lane that owns it.
        unsafe { kernel.launch(stream, &config, (params, operands), [a_access, b_access, d_access])? };
        Ok(true)
    }
}
