//! The GEMMs that do not run on the persistent wgmma kernels: a few rows of A in a linear
//! layer's layout, where the work is streaming the weight (B) once from HBM, and small problems,
//! where the work is the launch. Three kernels ([`GemmPath`]):
//! - `gemm_decode_*_sm90` ([`GemmPath::Decode`]): `mma.sync` with the operands swapped, B's rows
//!   on the instruction's 16-row side and up to [`DECODE_MAX_ROWS`] rows of A on its 8-column
//!   side, a block per 16 rows of B whose eight warps split K, read as 16-byte vectors: A
//!   row-major, B column-major (a linear layer's N × K weight), K, both pitches and both batch
//!   strides multiples of 8 elements, both buffers 16-byte aligned.
//! - `gemm_gather_*_sm90` ([`GemmPath::Gather`]): the same body reading element by element
//!   through any layout, pitch and alignment, blocks of 32 × 16 of D over any M: the small
//!   GEMM, one launch where the wgmma path would first repack misaligned operands.
//! - `gemm_skinny_*_sm90` ([`GemmPath::Skinny`]): the CUDA cores, up to [`SKINNY_MAX_ROWS`] rows
//!   with the decode kernel's layout rules, every warp of a resident grid streaming two rows of
//!   B: `Auto`'s choice for one row of a wide weight (≥ 16384 columns), where it streams faster
//!   than the decode kernel.
//!
//! [`Cores`] says which runs; [`Cores::Auto`]'s rules are measured (docs/PERF.md, the sweep).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::signatures::{GemmDecode, GemmSkinny};
use warpforge_abi::{DecodeOperands, Entry, GemmParams, SkinnyOperands, entries};
use warpforge_host::{Error, LaunchConfig, Result};

use super::variant::by_types;
use super::{Clusters, Consumers, EpilogueMath, GemmExtents, GemmPath, GemmProblem, KSplit, Layout, TileWidth};
use crate::Warpforge;

/// Most rows the CUDA-core decode kernel takes.
pub const SKINNY_MAX_ROWS: usize = 8;
/// [`Cores::Auto`] leaves problems of at least this many columns (and K ≥ [`WIDE_MIN_K`]) to
/// the CUDA-core kernel at one row and to the wgmma kernels above (runs 7 and 8 against run 3
/// on the sweep: below it the decode kernel was 1.05–1.9× faster, at and above it 1.05–1.45×
/// slower).
const DECODE_MAX_COLUMNS: usize = 16_384;
/// Shortest K for which [`DECODE_MAX_COLUMNS`] applies (shorter: the decode kernel, whose
/// warps split K, still wins: 1 × 65536 × 64 in 11 µs against 27).
const WIDE_MIN_K: usize = 256;
/// Most rows the `mma.sync` decode kernel takes (one block's rows of A: the kernel's
/// `DECODE_BLOCK_M`).
pub const DECODE_MAX_ROWS: usize = 32;
/// Threads per block of the CUDA-core kernel (eight warps).
const THREADS: u32 = 256;
/// Threads per block of the `mma.sync` kernels (their eight `WARPS`, splitting K).
const MMA_THREADS: u32 = 256;
/// Columns of D per warp of the CUDA-core kernel (its `COLS_PER_WARP`).
const COLS_PER_WARP: u64 = 2;
/// Rows × columns of D per block (per column group) of the `mma.sync` kernels.
const MMA_BLOCK: (u64, u64) = (32, 16);
/// Warps per block of the `mma.sync` kernels.
const MMA_WARPS: u32 = MMA_THREADS / 32;
/// K chunks a gather warp takes before its block splits K further ([`gather_col_groups`]).
const GATHER_CHUNKS_PER_WARP: usize = 4;
/// One-group blocks per SM per column group the gather grid needs before it groups columns.
const GATHER_GROUP_WAVES: u128 = 4;

/// [`Cores::Auto`] gathers problems of at most this many flops (2·M·N·K·batch) whose operands
/// the wgmma path would have to repack (a layout, pitch or K that TMA cannot read in place)...
const GATHER_MAX_FLOPS_REPACKED: u128 = 1 << 28;
/// ... and of at most this many when it would read them in place.
const GATHER_MAX_FLOPS: u128 = 1 << 24;
/// [`Cores::Auto`] gathers at most this many elements of D...
const GATHER_MAX_OUTPUTS: u128 = 1 << 18;
/// ... over a K of at most this.
const GATHER_MAX_K: usize = 1536;

/// Which kernels a GEMM runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cores {
    /// warpforge's choice, with no wgmma variant forced: the decode kernel ([`Cores::Decode`])
    /// wherever it fits, except for weights of at least 16384 columns and K ≥ 256 (the
    /// CUDA-core kernel at one row, the wgmma kernels above); else the gather kernel ([`Cores::Gather`]) for small problems (at most
    /// 2^28 flops when the wgmma path would repack an operand, 2^24 otherwise); else the
    /// persistent wgmma kernels.
    #[default]
    Auto,
    /// The persistent warp-specialised wgmma kernels.
    Tensor,
    /// The `mma.sync` decode kernel; refused (typed error) unless the problem fits it: at most
    /// [`DECODE_MAX_ROWS`] rows, A row-major, B column-major, K and the pitches and batch strides
    /// multiples of 8 elements, A and B 16-byte aligned.
    Decode,
    /// The `mma.sync` gather kernel: any shape, layout, pitch and alignment (its speed is a
    /// small problem's: it reads operands element by element).
    Gather,
    /// The CUDA-core decode kernel; refused (typed error) unless the problem fits it: at most
    /// [`SKINNY_MAX_ROWS`] rows and the layout rules of [`Cores::Decode`].
    Cuda,
}

/// Whether a vector-reading decode kernel can run `p` with up to `max_rows` rows (buffer
/// alignment is checked at launch).
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

/// Whether the wgmma path reads both operands in place (TMA: K-major, 16-byte pitches; buffer
/// alignment aside) rather than repacking one.
pub(crate) fn reads_in_place(p: &GemmProblem, e: &GemmExtents) -> bool {
    let pitched = |elems: usize| elems.is_multiple_of(8);
    let a = p.a_layout == Layout::RowMajor && pitched(e.lda) && (p.batch == 1 || pitched(e.strides[0]));
    let b = p.b_layout == Layout::ColMajor && pitched(e.ldb) && (p.batch == 1 || pitched(e.strides[1]));
    a && b
}

/// Blocks of an `mma.sync` kernel's grid for `p` with `col_groups` groups of 16 columns per
/// block: one per 32 rows of A and `16 · col_groups` rows of B, per batch.
fn mma_blocks(p: &GemmProblem, col_groups: u32) -> u128 {
    let (rows, cols) = MMA_BLOCK;
    let block_cols = cols as u128 * col_groups as u128;
    (p.m as u128).div_ceil(rows as u128) * (p.n as u128).div_ceil(block_cols) * p.batch as u128
}

/// Column groups per block of the gather kernel on `sms` SMs: where the one-group grid is many
/// waves deep ([`GATHER_GROUP_WAVES`] blocks per SM per group), its eight warps split K only as
/// far as each still has about [`GATHER_CHUNKS_PER_WARP`] 32-element chunks and take columns of
/// their own otherwise; a small grid keeps one group, since there the kernel is latency-bound
/// and more blocks finish sooner (13 × 251 × 251: 4.5 µs with one group, 9.8 with four). Never
/// more groups than `p` has 16-column tiles.
pub(crate) fn gather_col_groups(p: &GemmProblem, sms: u32) -> u32 {
    let prev_pow2 = |v: u128| if v >= MMA_WARPS as u128 { MMA_WARPS } else { 1 << v.max(1).ilog2() };
    let chunks = p.k.div_ceil(32).max(1);
    let group_warps = chunks.div_ceil(GATHER_CHUNKS_PER_WARP).next_power_of_two().min(MMA_WARPS as usize) as u32;
    let by_columns = prev_pow2(p.n.div_ceil(MMA_BLOCK.1 as usize) as u128);
    let by_grid = prev_pow2(mma_blocks(p, 1) / (GATHER_GROUP_WAVES * sms.max(1) as u128));
    (MMA_WARPS / group_warps).min(by_columns).min(by_grid)
}

/// Whether [`Cores::Auto`] gathers `p`: few flops, a short K and a small output (the gather
/// kernel reads element by element; on the sweep it lost above 2^18 outputs or K ≈ 1500).
fn gathers(p: &GemmProblem, e: &GemmExtents) -> bool {
    let outputs = p.m as u128 * p.n as u128 * p.batch as u128;
    let flops = 2 * outputs * p.k as u128;
    let limit = if reads_in_place(p, e) { GATHER_MAX_FLOPS } else { GATHER_MAX_FLOPS_REPACKED };
    flops <= limit && outputs <= GATHER_MAX_OUTPUTS && p.k <= GATHER_MAX_K
}

/// The kernel `p` runs on when not the wgmma path: forced by [`Cores`] (a typed error when it
/// does not fit), or [`Cores::Auto`]'s rules with no wgmma variant forced. A decode kernel
/// whose buffers turn out misaligned at launch falls back (`Auto`) or is refused (forced).
pub(crate) fn path(p: &GemmProblem, e: &GemmExtents) -> Result<Option<GemmPath>> {
    let refuse = |kernel: &str, rows: usize| {
        Err(Error::InvalidArgument(format!(
            "{kernel} runs at most {rows} rows, A row-major, B column-major, K, pitches and batch \
             strides multiples of 8: {p:?}"
        )))
    };
    let grid_fits = mma_blocks(p, 1) <= i32::MAX as u128;
    match p.cores {
        Cores::Tensor => Ok(None),
        Cores::Decode if fits(p, e, DECODE_MAX_ROWS) => Ok(Some(GemmPath::Decode)),
        Cores::Decode => refuse("Cores::Decode", DECODE_MAX_ROWS),
        Cores::Gather if grid_fits => Ok(Some(GemmPath::Gather)),
        Cores::Gather => {
            Err(Error::InvalidArgument(format!("Cores::Gather: a grid of {} blocks: {p:?}", mma_blocks(p, 1))))
        }
        Cores::Cuda if fits(p, e, SKINNY_MAX_ROWS) => Ok(Some(GemmPath::Skinny)),
        Cores::Cuda => refuse("Cores::Cuda", SKINNY_MAX_ROWS),
        Cores::Auto => {
            let unforced = p.consumers == Consumers::Auto
                && p.tile_width == TileWidth::Auto
                && p.clusters == Clusters::Auto
                && p.k_split == KSplit::Auto;
            // Weights of many columns and a real K fill the GPU on the other kernels, which
            // stream them faster (the sweep: LM heads and large gate/up projections at
            // 3.6–4.1 TB/s against the decode kernel's 3.0–3.2).
            let wide = p.n >= DECODE_MAX_COLUMNS && p.k >= WIDE_MIN_K;
            Ok(match () {
                _ if !unforced || !grid_fits => None,
                _ if wide && p.m == 1 && fits(p, e, SKINNY_MAX_ROWS) => Some(GemmPath::Skinny),
                _ if wide && fits(p, e, DECODE_MAX_ROWS) => None,
                _ if fits(p, e, DECODE_MAX_ROWS) => Some(GemmPath::Decode),
                _ if gathers(p, e) => Some(GemmPath::Gather),
                _ => None,
            })
        }
    }
}

/// A decode path's kernel entry.
#[derive(Clone, Copy, Debug)]
pub(crate) enum DecodeEntry {
    /// The CUDA-core kernel.
    Skinny(Entry<GemmSkinny>),
    /// The `mma.sync` kernels (decode or gather).
    Mma(Entry<GemmDecode>),
}

impl DecodeEntry {
    /// The entry of `path` for the (input, output) names.
    pub(crate) fn of(path: GemmPath, input: &str, output: &str) -> Self {
        use entries::*;
        match path {
            GemmPath::Skinny => Self::Skinny(by_types(
                input,
                output,
                [
                    GEMM_SKINNY_BF16_BF16,
                    GEMM_SKINNY_BF16_F16,
                    GEMM_SKINNY_BF16_F32,
                    GEMM_SKINNY_F16_BF16,
                    GEMM_SKINNY_F16_F16,
                    GEMM_SKINNY_F16_F32,
                ],
            )),
            GemmPath::Gather => Self::Mma(by_types(
                input,
                output,
                [
                    GEMM_GATHER_BF16_BF16,
                    GEMM_GATHER_BF16_F16,
                    GEMM_GATHER_BF16_F32,
                    GEMM_GATHER_F16_BF16,
                    GEMM_GATHER_F16_F16,
                    GEMM_GATHER_F16_F32,
                ],
            )),
            GemmPath::Decode | GemmPath::TensorCores => Self::Mma(by_types(
                input,
                output,
                [
                    GEMM_DECODE_BF16_BF16,
                    GEMM_DECODE_BF16_F16,
                    GEMM_DECODE_BF16_F32,
                    GEMM_DECODE_F16_BF16,
                    GEMM_DECODE_F16_F16,
                    GEMM_DECODE_F16_F32,
                ],
            )),
        }
    }

    /// Column groups per block the entry runs `p` with on `sms` SMs (1 but for the gather
    /// kernel).
    pub(crate) fn col_groups(self, p: &GemmProblem, sms: u32) -> u32 {
        if self.gathers() { gather_col_groups(p, sms) } else { 1 }
    }

    /// Whether this is a gather (element-reading) entry.
    fn gathers(self) -> bool {
        matches!(self, Self::Mma(mma) if mma.name().starts_with("gemm_gather"))
    }

    /// The entry's kernel name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Skinny(entry) => entry.name(),
            Self::Mma(entry) => entry.name(),
        }
    }
}

impl Warpforge {
    /// Blocks launched for `p` on `entry`: for `mma.sync`, one per 32 × 16 of D per batch
    /// (`path` checked that they fit); on the CUDA cores, one warp per pair of columns per
    /// batch, capped at the blocks the device holds at once (the warps then loop).
    pub(crate) fn decode_grid(&self, entry: DecodeEntry, p: &GemmProblem) -> Result<u32> {
        match entry {
            DecodeEntry::Mma(_) => {
                let blocks = mma_blocks(p, entry.col_groups(p, self.sm_count()));
                u32::try_from(blocks).map_err(|_| Error::InvalidArgument(format!("a grid of {blocks} blocks: {p:?}")))
            }
            DecodeEntry::Skinny(entry) => {
                let warps = (p.n as u64).div_ceil(COLS_PER_WARP) * p.batch as u64;
                let blocks = warps.div_ceil((THREADS / 32) as u64).max(1);
                Ok(self.entry(entry)?.kernel().plan_persistent(THREADS, 0, None, blocks)?.blocks)
            }
        }
    }

    /// Launches `entry` for `p`; `Ok(false)` (nothing launched) when a vector-reading kernel's
    /// buffers are not 16-byte aligned, for the caller to take the wgmma path.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_decode<I, O>(
        &self,
        stream: &Arc<CudaStream>,
        p: &GemmProblem,
        e: &GemmExtents,
        entry: DecodeEntry,
        a: &impl DevicePtr<I>,
        b: &impl DevicePtr<I>,
        math: &EpilogueMath,
        d: &mut impl DevicePtrMut<O>,
    ) -> Result<bool> {
        let (a_ptr, a_access) = a.device_ptr(stream);
        let (b_ptr, b_access) = b.device_ptr(stream);
        let vectors = !entry.gathers();
        if vectors && !(a_ptr.is_multiple_of(16) && b_ptr.is_multiple_of(16)) {
            return Ok(false);
        }
        let grid = self.decode_grid(entry, p)?;
        let col_groups = entry.col_groups(p, self.sm_count());
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
        let threads = if matches!(entry, DecodeEntry::Skinny(_)) { THREADS } else { MMA_THREADS };
        let config = LaunchConfig::linear(grid, threads);
        let guards = [a_access, b_access, d_access];
        // Both launches' contract: the caller checked A, B, C, D and bias against the problem's
        // extents (`e`, for `p`'s layouts, pitches and strides); M, N, K ≥ 1 (`GemmProblem::check`
        // refuses empty problems); the grid is the one each kernel expects (`decode_grid`). The
        // vector kernels run only where `fits` held (rows within their limit, K, pitches and
        // strides multiples of 8 elements, the linear layout) and both bases are 16-byte aligned
        // (above), so every vector read is inside A or B; the gather kernel reads element
        // (row, k) at `row·row_step + k·k_step` within the same extents, clamped to the last row
        // and element. In place, each element of D is read as C and then written by the one
        // thread that owns it.
        match entry {
            DecodeEntry::Skinny(entry) => {
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
                // SAFETY: above (the CUDA-core kernel's contract).
                unsafe { self.entry(entry)?.launch(stream, &config, (params, operands), guards)? };
            }
            DecodeEntry::Mma(entry) => {
                let steps = |row_major: bool, ld: usize| if row_major { (ld as u64, 1) } else { (1, ld as u64) };
                let (a_row_step, a_k_step) = steps(p.a_layout == Layout::RowMajor, e.lda);
                let (b_row_step, b_k_step) = steps(p.b_layout == Layout::ColMajor, e.ldb);
                let operands = DecodeOperands {
                    a: a_ptr,
                    b: b_ptr,
                    a_row_step,
                    a_k_step,
                    b_row_step,
                    b_k_step,
                    stride_a: e.strides[0] as u64,
                    stride_b: e.strides[1] as u64,
                    k: p.k as u32,
                    batch: p.batch as u32,
                    col_groups,
                    _pad: 0,
                };
                // SAFETY: above (the mma.sync kernels' contract; `col_groups` is 1, 2, 4 or 8 and
                // the grid `decode_grid`'s for it).
                unsafe { self.entry(entry)?.launch(stream, &config, (params, operands), guards)? };
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::{gather_col_groups, mma_blocks};
    use crate::GemmProblem;

    #[test]
    fn mma_grids_cover_d_in_32_by_16_blocks() {
        assert_eq!(mma_blocks(&GemmProblem::new(1, 4096, 4096), 1), 256);
        assert_eq!(mma_blocks(&GemmProblem::new(32, 17, 8), 1), 2);
        assert_eq!(mma_blocks(&GemmProblem { batch: 3, ..GemmProblem::new(33, 100, 1000) }, 1), 2 * 7 * 3);
        assert_eq!(mma_blocks(&GemmProblem::new(1, 1, 1), 1), 1);
        // Column groups widen a block to 16·G columns.
        assert_eq!(mma_blocks(&GemmProblem::new(6360, 513, 30), 8), 199 * 5);
        assert_eq!(mma_blocks(&GemmProblem::new(33, 100, 1000), 4), 2 * 2);
    }

    #[test]
    fn gather_blocks_split_k_only_while_it_is_long() {
        let groups = |m, n, k| gather_col_groups(&GemmProblem::new(m, n, k), 132);
        // Short K over a grid many waves deep: every warp on its own 16 columns.
        assert_eq!(groups(6360, 513, 30), 8);
        assert_eq!(groups(1000, 4096, 128), 8);
        // About four chunks per warp: 5–8 chunks, two warps per group.
        assert_eq!(groups(1000, 4096, 200), 4);
        assert_eq!(groups(1000, 4096, 512), 2);
        // Long K: all eight warps on K (the decode kernel's split).
        assert_eq!(groups(1000, 4096, 1536), 1);
        assert_eq!(groups(1, 1, 65536), 1);
        // A small grid stays one group (latency-bound: more blocks finish sooner).
        assert_eq!(groups(13, 251, 251), 1);
        assert_eq!(groups(127, 127, 13), 1);
        assert_eq!(groups(9, 83283, 220), 4);
        // Never more groups than 16-column tiles.
        assert_eq!(groups(52405, 8, 122), 1);
        assert_eq!(groups(13151, 76, 49), 2); // five column tiles, a grid three waves deep
        assert_eq!(groups(100_000, 40, 8), 2);
        for (m, n, k) in [(1, 1, 1), (7, 3000, 7), (999, 17, 5000), (3, 129, 33)] {
            let g = groups(m, n, k);
            assert!(g.is_power_of_two() && g <= 8, "{m}×{n}×{k}: {g}");
        }
    }
}
