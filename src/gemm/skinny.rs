//! The decode paths: GEMMs of a few rows in a linear layer's layout, where the work is
//! streaming the weight (B) once from HBM, run on kernels built for that instead of on 64- or
//! 128-row wgmma tiles that leave most of each tile and most SMs idle:
//! - `gemm_decode_*_sm90` ([`GemmPath::Decode`]): `mma.sync` with the operands swapped, B's rows
//!   on the instruction's 16-row side, up to [`DECODE_MAX_ROWS`] rows of A on its 8-column side;
//!   a block per 16 rows of B, its eight warps splitting K.
//! - `gemm_skinny_*_sm90` ([`GemmPath::Skinny`]): the CUDA cores, up to [`SKINNY_MAX_ROWS`] rows,
//!   every warp of a resident grid streaming two rows of B.
//!
//! Both read the operands in 16-byte vectors without a repack: A row-major, B column-major (a
//! linear layer's N × K weight), K, both pitches and both batch strides multiples of 8
//! elements, both buffers 16-byte aligned. [`Cores`] says which runs.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::signatures::GemmSkinny;
use warpforge_abi::{Entry, GemmParams, SkinnyOperands, entries};
use warpforge_host::{Error, LaunchConfig, Result};

use super::variant::by_types;
use super::{Clusters, Consumers, EpilogueMath, GemmExtents, GemmPath, GemmProblem, Layout, TileWidth};
use crate::Warpforge;

/// Most rows the CUDA-core decode kernel takes.
pub const SKINNY_MAX_ROWS: usize = 8;
/// Most rows the `mma.sync` decode kernel takes (the kernel's `DECODE_MAX_ROWS`).
pub const DECODE_MAX_ROWS: usize = 32;
/// Threads per block of both decode kernels (eight warps).
const THREADS: u32 = 256;
/// Columns of D per warp of the CUDA-core kernel (its `COLS_PER_WARP`).
const COLS_PER_WARP: u64 = 2;
/// Columns of D per block of the `mma.sync` kernel (its `DECODE_BLOCK_N`).
const DECODE_BLOCK_N: u64 = 16;

/// Which kernels a GEMM runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cores {
    /// warpforge's choice: the `mma.sync` decode kernel ([`Cores::Decode`]) for problems of at
    /// most [`DECODE_MAX_ROWS`] rows that fit its layout rules with no wgmma variant forced,
    /// the persistent wgmma kernels otherwise (docs/PERF.md, the shape sweep).
    #[default]
    Auto,
    /// The persistent warp-specialised wgmma kernels.
    Tensor,
    /// The `mma.sync` decode kernel; refused (typed error) unless the problem fits it: at most
    /// [`DECODE_MAX_ROWS`] rows, A row-major, B column-major, K and the pitches and batch strides
    /// multiples of 8 elements, A and B 16-byte aligned.
    Decode,
    /// The CUDA-core decode kernel; refused (typed error) unless the problem fits it: at most
    /// [`SKINNY_MAX_ROWS`] rows and the layout rules of [`Cores::Decode`].
    Cuda,
}

/// Whether a decode kernel can run `p` with up to `max_rows` rows (buffer alignment is checked
/// at launch).
fn fits(p: &GemmProblem, e: &GemmExtents, max_rows: usize) -> bool {
    let vectors = |elems: usize| elems.is_multiple_of(8);
    p.m <= max_rows
        && p.a_layout == Layout::RowMajor
        && p.b_layout == Layout::ColMajor
        && vectors(p.k)
        && vectors(e.lda)
        && vectors(e.ldb)
        && (p.batch == 1 || (vectors(e.strides[0]) && vectors(e.strides[1])))
}

/// The decode kernel `p` takes, if any: forced by [`Cores::Decode`] or [`Cores::Cuda`] (a
/// typed error when it does not fit), or [`Cores::Auto`]'s rule with no wgmma variant forced.
/// With `Auto`, a misaligned buffer at launch falls back to the wgmma kernels.
pub(crate) fn path(p: &GemmProblem, e: &GemmExtents) -> Result<Option<GemmPath>> {
    let refuse = |kernel: &str, rows: usize| {
        Err(Error::InvalidArgument(format!(
            "{kernel} runs at most {rows} rows, A row-major, B column-major, K, pitches and batch \
             strides multiples of 8: {p:?}"
        )))
    };
    match p.cores {
        Cores::Tensor => Ok(None),
        Cores::Decode if fits(p, e, DECODE_MAX_ROWS) => Ok(Some(GemmPath::Decode)),
        Cores::Decode => refuse("Cores::Decode", DECODE_MAX_ROWS),
        Cores::Cuda if fits(p, e, SKINNY_MAX_ROWS) => Ok(Some(GemmPath::Skinny)),
        Cores::Cuda => refuse("Cores::Cuda", SKINNY_MAX_ROWS),
        Cores::Auto => {
            let unforced =
                p.consumers == Consumers::Auto && p.tile_width == TileWidth::Auto && p.clusters == Clusters::Auto;
            let grid_fits = decode_blocks(p) <= i32::MAX as u64;
            Ok((unforced && grid_fits && fits(p, e, DECODE_MAX_ROWS)).then_some(GemmPath::Decode))
        }
    }
}

/// Blocks of the `mma.sync` decode kernel: one per 16 columns of D per batch.
fn decode_blocks(p: &GemmProblem) -> u64 {
    (p.n as u64).div_ceil(DECODE_BLOCK_N) * p.batch as u64
}

/// The entry of decode `path` for the (input, output) names.
pub(crate) fn entry(path: GemmPath, input: &str, output: &str) -> Entry<GemmSkinny> {
    let table = if path == GemmPath::Skinny {
        [
            entries::GEMM_SKINNY_BF16_BF16,
            entries::GEMM_SKINNY_BF16_F16,
            entries::GEMM_SKINNY_BF16_F32,
            entries::GEMM_SKINNY_F16_BF16,
            entries::GEMM_SKINNY_F16_F16,
            entries::GEMM_SKINNY_F16_F32,
        ]
    } else {
        [
            entries::GEMM_DECODE_BF16_BF16,
            entries::GEMM_DECODE_BF16_F16,
            entries::GEMM_DECODE_BF16_F32,
            entries::GEMM_DECODE_F16_BF16,
            entries::GEMM_DECODE_F16_F16,
            entries::GEMM_DECODE_F16_F32,
        ]
    };
    by_types(input, output, table)
}

impl Warpforge {
    /// Blocks launched for `p` on decode `path`: for `mma.sync`, one block per 16 columns of D
    /// per batch (a typed error past the grid's limit); on the CUDA cores, one warp per pair of
    /// columns per batch, capped at the blocks the device holds at once (the warps then loop).
    pub(crate) fn decode_grid(&self, path: GemmPath, entry: Entry<GemmSkinny>, p: &GemmProblem) -> Result<u32> {
        if path == GemmPath::Decode {
            let blocks = decode_blocks(p);
            return u32::try_from(blocks).ok().filter(|&b| b <= i32::MAX as u32).ok_or_else(|| {
                Error::InvalidArgument(format!("the decode kernel's grid of {blocks} blocks is past the limit: {p:?}"))
            });
        }
        let warps = (p.n as u64).div_ceil(COLS_PER_WARP) * p.batch as u64;
        let blocks = warps.div_ceil((THREADS / 32) as u64).max(1);
        Ok(self.entry(entry)?.kernel().plan_persistent(THREADS, 0, None, blocks)?.blocks)
    }
}

impl Warpforge {
    /// Launches decode `path` when `a` and `b` are 16-byte aligned; `Ok(false)` (nothing
    /// launched) otherwise, for the caller to take the wgmma path.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_decode<I, O>(
        &self,
        stream: &Arc<CudaStream>,
        p: &GemmProblem,
        e: &GemmExtents,
        path: GemmPath,
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
        let config = LaunchConfig::linear(self.decode_grid(path, entry, p)?, THREADS);
        // SAFETY: the caller checked A, B, C, D and bias against the problem's extents (`e`);
        // K, the pitches and strides are multiples of 8 elements (`fits`), M, N, K ≥ 1
        // (`GemmProblem::check` refuses empty problems), rows ≤ the kernel's limit
        // (`fits`), the grid is the one each kernel expects (`decode_grid`), and both bases
        // 16-byte aligned (above), so every vector the kernel reads is inside A or B; in place,
        // each element of D is read as C and then written by the one lane that owns it.
        unsafe { kernel.launch(stream, &config, (params, operands), [a_access, b_access, d_access])? };
        Ok(true)
    }
}
