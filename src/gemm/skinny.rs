//! The decode path: GEMMs of at most [`SKINNY_MAX_ROWS`] rows run on the CUDA cores
//! (`gemm_skinny_*_sm90`), every warp of a resident grid streaming the weight (B) once, instead
//! of on 64- or 128-row wgmma tiles that leave most of each tile and most SMs idle.
//!
//! The kernel reads the operands in 16-byte vectors without a repack: A row-major, B
//! column-major (a linear layer's N × K weight), K, both pitches and both batch strides
//! multiples of 8 elements, both buffers 16-byte aligned. [`Cores`] says when it runs.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::signatures::GemmSkinny;
use warpforge_abi::{Entry, GemmParams, SkinnyOperands, entries};
use warpforge_host::{Error, LaunchConfig, Result};

use super::variant::by_types;
use super::{Clusters, Consumers, EpilogueMath, GemmExtents, GemmProblem, Layout, TileWidth};
use crate::Warpforge;

/// Most rows the decode path takes.
pub const SKINNY_MAX_ROWS: usize = 8;
/// Threads per block of the skinny kernels (eight warps).
const THREADS: u32 = 256;
/// Columns of D per warp (the kernel's `COLS_PER_WARP`).
const COLS_PER_WARP: u64 = 2;

/// Which cores a GEMM runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cores {
    /// The measured rule: the CUDA-core decode path for one-row problems with K ≥ 256 in a
    /// linear layer's layout, the tensor cores otherwise (docs/PERF.md, the shape sweep: at
    /// M = 1 the decode path streamed the weight at up to 3.7 TB/s where the 64-row wgmma tile
    /// reached 2.2; at M = 2 it won only on small weights and at M ≥ 4 it lost, its
    /// activation loads and conversions growing with the rows; below K = 256 lanes idle).
    #[default]
    Auto,
    /// The persistent warp-specialised wgmma kernels.
    Tensor,
    /// The CUDA-core decode path; refused (typed error) unless the problem fits it: at most
    /// [`SKINNY_MAX_ROWS`] rows, A row-major, B column-major, K and the pitches and batch
    /// strides multiples of 8 elements, A and B 16-byte aligned.
    Cuda,
}

/// Rows up to which [`Cores::Auto`] takes the decode path.
const AUTO_ROWS: usize = 1;
/// Shortest K for which [`Cores::Auto`] takes it: one 16-byte vector per lane of a warp.
const AUTO_MIN_K: usize = 256;

/// Whether the decode kernel can run `p` (buffer alignment is checked at launch).
fn fits(p: &GemmProblem, e: &GemmExtents) -> bool {
    let vectors = |elems: usize| elems.is_multiple_of(8);
    p.m <= SKINNY_MAX_ROWS
        && p.a_layout == Layout::RowMajor
        && p.b_layout == Layout::ColMajor
        && vectors(p.k)
        && vectors(e.lda)
        && vectors(e.ldb)
        && (p.batch == 1 || (vectors(e.strides[0]) && vectors(e.strides[1])))
}

/// Whether `p` takes the decode path: forced by [`Cores::Cuda`] (a typed error when it does
/// not fit), or by [`Cores::Auto`]'s rule with no tensor-core variant forced. With `Auto`, a
/// misaligned buffer at launch falls back to the tensor cores.
pub(crate) fn takes(p: &GemmProblem, e: &GemmExtents) -> Result<bool> {
    match p.cores {
        Cores::Tensor => Ok(false),
        Cores::Cuda if fits(p, e) => Ok(true),
        Cores::Cuda => Err(Error::InvalidArgument(format!(
            "Cores::Cuda runs at most {SKINNY_MAX_ROWS} rows, A row-major, B column-major, K, pitches \
             and batch strides multiples of 8: {p:?}"
        ))),
        Cores::Auto => Ok(fits(p, e)
            && p.m <= AUTO_ROWS
            && p.k >= AUTO_MIN_K
            && p.consumers == Consumers::Auto
            && p.tile_width == TileWidth::Auto
            && p.clusters == Clusters::Auto),
    }
}

/// The skinny entry for the (input, output) names.
pub(crate) fn entry(input: &str, output: &str) -> Entry<GemmSkinny> {
    by_types(
        input,
        output,
        [
            entries::GEMM_SKINNY_BF16_BF16,
            entries::GEMM_SKINNY_BF16_F16,
            entries::GEMM_SKINNY_BF16_F32,
            entries::GEMM_SKINNY_F16_BF16,
            entries::GEMM_SKINNY_F16_F16,
            entries::GEMM_SKINNY_F16_F32,
        ],
    )
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
