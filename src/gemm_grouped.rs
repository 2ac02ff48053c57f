//! Grouped GEMMs for mixture-of-experts layers on Hopper: every expert's `D_e = A_e·B_eᵀ` in one
//! persistent launch, bf16 (f32 accumulation, bf16 D) or block-scaled FP8 (e4m3 with
//! [`fp8_gemm`](crate::gemm_fp8)'s scales, bf16 D), in the two layouts a MoE layer hands its
//! experts:
//!
//! - **contiguous** ([`GroupedContiguousProblem`]): the rows routed to every expert back to back
//!   in one `rows × K` A and one `rows × N` D, each expert's segment padded to a multiple of
//!   [`GROUPED_ROW_ALIGN`] rows, with one i32 per row naming its expert (`m_indices`, `-1` for
//!   padding). [`ContiguousRows::from_counts`] builds the indices and segment offsets from
//!   per-expert counts; [`check_contiguous_indices`] checks indices made elsewhere.
//! - **masked** ([`GroupedMaskedProblem`]): `[experts, capacity, K]` A and
//!   `[experts, capacity, N]` D with each expert's valid-row count on the device (`masked_m`),
//!   so a decode step is one launch whatever the routing (a CUDA graph can replay it).
//!
//! B is `[experts, N, K]` (each expert's weight row-major, pitch K) in both. FP8 scales: A's as
//! the per-token quantiser writes them for A's rows (contiguous: one `rows`-row matrix;
//! masked: one `capacity`-row matrix per expert, `round_up(capacity, 4) · ceil(K / 128)` f32
//! apart), B's per 128 × 128 block for each expert (`ceil(N / 128) · ceil(K / 128)` f32 apart).
//!
//! What the device values mean (clamped by the kernel, never trusted): a contiguous tile of 128
//! rows takes the expert of its first row, and is skipped when that index is negative or
//! `≥ experts`. A masked count is clamped to `0..=capacity`, and tiles wholly past an expert's
//! count are skipped. D is written a tile at a time: a skipped tile's rows are left as they are,
//! and a computed tile writes all its 128 rows (padding or past-the-count rows from whatever A
//! holds there). The indices within a
//! 128-row block must name one expert (or be `-1`): [`check_contiguous_indices`] says whether
//! they do; the kernel reads only each block's first.
//!
//! **Rules** (refused with [`Error::InvalidArgument`] naming the rule): experts, N ≥ 1; bf16: K
//! a positive multiple of 8, FP8: of 16; contiguous rows a positive multiple of 128, masked
//! capacity ≥ 1; every extent and the products below 2^31; A, B and the FP8 scales 16-byte
//! aligned; buffers at least as long as the problem reads or writes; every buffer on
//! warpforge's context; sm_90a.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;
use warpforge_abi::{
    BlockScaleParams, GemmParams, GroupedParams, TensorMap, TilePlan, entries, gemm_fp8_sm90, gemm_sm90,
};
use warpforge_host::tensor_map::{Swizzle, TensorMapBuilder, TmaElement};
use warpforge_host::{Error, LaunchConfig, Result};
use warpforge_logic::blockscaled::k_blocks;
use warpforge_logic::quant::group_scale_pitch;
use warpforge_logic::schedule::grouped::{DATA_PARALLEL_BAND, GroupedLayout};
use warpforge_logic::schedule::stream_k::{StreamKMode, StreamKScheduler};
use warpforge_logic::schedule::swizzled::{Raster, Rasterization};

use crate::Warpforge;
use crate::gemm::check;
use crate::gemm_fp8::{MAX_SCALE_INDEX, scale_maps};

/// Rows per tile of the grouped kernels: contiguous segments are padded to it.
pub const GROUPED_ROW_ALIGN: usize = 128;

/// A contiguous-layout grouped GEMM: `rows` rows of A and D over `experts` weights of N × K.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedContiguousProblem {
    /// Rows of A, D and `m_indices`: all experts' padded segments.
    pub rows: usize,
    /// Rows of each expert's B, columns of D.
    pub n: usize,
    /// The reduction length.
    pub k: usize,
    /// Experts: B's batch count.
    pub experts: usize,
}

/// A masked-layout grouped GEMM: `capacity` rows per expert in A and D.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedMaskedProblem {
    /// Experts: the batch count of A, B, D and `masked_m`'s length.
    pub experts: usize,
    /// Rows per expert in A and D.
    pub capacity: usize,
    /// Rows of each expert's B, columns of D.
    pub n: usize,
    /// The reduction length.
    pub k: usize,
}

/// Which element type a grouped launch multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupedInput {
    Bf16,
    Fp8,
}

impl GroupedInput {
    fn k_align(self) -> usize {
        match self {
            GroupedInput::Bf16 => 8,
            GroupedInput::Fp8 => 16,
        }
    }
}

/// What a valid grouped problem reads and writes (elements of each buffer) and how the launch
/// sees it: `batches` batches of `rows` rows for A and D.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedExtents {
    /// The layout.
    pub layout: GroupedLayout,
    /// A's and D's batches: 1 (contiguous) or the experts (masked).
    pub batches: usize,
    /// Rows per batch of A and D.
    pub rows: usize,
    /// Experts.
    pub experts: usize,
    /// Columns of D.
    pub n: usize,
    /// The reduction length.
    pub k: usize,
    /// Elements of A: `batches · rows · K`.
    pub a: usize,
    /// Elements of B: `experts · N · K`.
    pub b: usize,
    /// Elements of D: `batches · rows · N`.
    pub d: usize,
    /// i32 of the index (contiguous: `rows`) or count (masked: `experts`) buffer.
    pub groups: usize,
    /// FP8: f32 between two batches' A scales, `round_up(rows, 4) · ceil(K / 128)` (the whole
    /// A scale buffer holds `batches` of them).
    pub a_scales_stride: usize,
    /// FP8: f32 between two experts' B scales, `ceil(N / 128) · ceil(K / 128)`.
    pub b_scales_stride: usize,
}

impl GroupedExtents {
    /// FP8: f32 of A's scales: `batches · a_scales_stride`.
    pub fn a_scales(&self) -> usize {
        self.batches * self.a_scales_stride
    }

    /// FP8: f32 of B's scales: `experts · b_scales_stride`.
    pub fn b_scales(&self) -> usize {
        self.experts * self.b_scales_stride
    }
}

impl GroupedContiguousProblem {
    /// Checks the rules for `bf16` (FP8: `fp8 = true`) inputs and returns the extents.
    pub fn check(&self, fp8: bool) -> Result<GroupedExtents> {
        let input = if fp8 { GroupedInput::Fp8 } else { GroupedInput::Bf16 };
        check(self.rows >= GROUPED_ROW_ALIGN && self.rows.is_multiple_of(GROUPED_ROW_ALIGN), || {
            format!(
                "contiguous grouped GEMM needs rows a positive multiple of {GROUPED_ROW_ALIGN} (each expert's \
                 segment padded to the tile); got {}",
                self.rows
            )
        })?;
        extents(GroupedLayout::Contiguous, 1, self.rows, self.experts, self.n, self.k, input)
    }
}

impl GroupedMaskedProblem {
    /// Checks the rules for `bf16` (FP8: `fp8 = true`) inputs and returns the extents.
    pub fn check(&self, fp8: bool) -> Result<GroupedExtents> {
        let input = if fp8 { GroupedInput::Fp8 } else { GroupedInput::Bf16 };
        check(self.capacity >= 1, || "masked grouped GEMM needs a capacity ≥ 1 row per expert".to_string())?;
        extents(GroupedLayout::Masked, self.experts, self.capacity, self.experts, self.n, self.k, input)
    }
}

fn extents(
    layout: GroupedLayout,
    batches: usize,
    rows: usize,
    experts: usize,
    n: usize,
    k: usize,
    input: GroupedInput,
) -> Result<GroupedExtents> {
    check(experts >= 1 && n >= 1, || format!("grouped GEMM needs experts, N ≥ 1 (got {experts}, {n})"))?;
    let align = input.k_align();
    check(k >= align && k.is_multiple_of(align), || {
        format!("grouped GEMM needs K a positive multiple of {align} (16-byte rows for TMA); got {k}")
    })?;
    let limit = 1usize << 31;
    check(experts < limit && rows < limit && n < limit && k < limit, || {
        format!("grouped GEMM needs experts, rows, N, K < 2^31 (got {experts}, {rows}, {n}, {k})")
    })?;
    let product = |x: usize, y: usize| {
        x.checked_mul(y).filter(|&v| v < limit).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "grouped GEMM {experts} experts × {rows} rows × {n} × {k}: an extent reaches 2^31 elements per row or \
                 batch, or overflows"
            ))
        })
    };
    // Per-batch extents stay below 2^31 (the kernel's 32-bit row arithmetic); totals are usize.
    let (a_batch, d_batch, b_expert) = (product(rows, k)?, product(rows, n)?, product(n, k)?);
    let total = |x: usize, y: usize| {
        x.checked_mul(y).ok_or_else(|| Error::InvalidArgument("grouped GEMM: buffer sizes overflow usize".into()))
    };
    let kb = k_blocks(k);
    let a_scales_stride = match input {
        GroupedInput::Fp8 => product(group_scale_pitch(rows).unwrap_or(usize::MAX), kb)?,
        GroupedInput::Bf16 => 0,
    };
    let b_scales_stride = match input {
        GroupedInput::Fp8 => product(n.div_ceil(128), kb)?,
        GroupedInput::Bf16 => 0,
    };
    let groups = match layout {
        GroupedLayout::Contiguous => rows,
        GroupedLayout::Masked => experts,
    };
    // The kernels address B's scales through one TMA coordinate (an i32).
    let b_scales = total(experts, b_scales_stride)?;
    check(b_scales < MAX_SCALE_INDEX, || {
        format!("grouped FP8 GEMM: B's scales number {b_scales} ({experts} experts), above 2^31 − 1")
    })?;
    Ok(GroupedExtents {
        layout,
        batches,
        rows,
        experts,
        n,
        k,
        a: total(batches, a_batch)?,
        b: total(experts, b_expert)?,
        d: total(batches, d_batch)?,
        groups,
        a_scales_stride,
        b_scales_stride,
    })
}

/// The contiguous layout of a routing: each expert's rows padded to [`GROUPED_ROW_ALIGN`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContiguousRows {
    /// One i32 per row: its expert, or `-1` for padding (the kernel's `m_indices`).
    pub indices: Vec<i32>,
    /// Expert `e`'s rows start at `offsets[e]` (`offsets[experts]` is the total, a multiple of
    /// the alignment).
    pub offsets: Vec<usize>,
}

impl ContiguousRows {
    /// The layout of `counts[e]` rows for expert `e`; experts with no rows take no rows.
    pub fn from_counts(counts: &[usize]) -> Result<Self> {
        check(!counts.is_empty() && counts.len() < 1 << 31, || {
            format!("a routing needs 1 to 2^31 - 1 experts (got {})", counts.len())
        })?;
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        let mut rows = 0usize;
        for &count in counts {
            offsets.push(rows);
            rows = count
                .checked_next_multiple_of(GROUPED_ROW_ALIGN)
                .and_then(|padded| rows.checked_add(padded))
                .filter(|&r| r < 1 << 31)
                .ok_or_else(|| Error::InvalidArgument("a routing of 2^31 rows or more".into()))?;
        }
        offsets.push(rows);
        let mut indices = vec![-1i32; rows];
        for (expert, &count) in counts.iter().enumerate() {
            indices[offsets[expert]..offsets[expert] + count].fill(expert as i32);
        }
        Ok(ContiguousRows { indices, offsets })
    }
}

/// Checks contiguous-layout `indices` for `experts`: a multiple of [`GROUPED_ROW_ALIGN`] rows,
/// each aligned block of them naming one expert in `0..experts` or `-1` (padding) throughout,
/// where the expert's rows come first. The kernel reads only each block's first index; this is
/// what makes that enough.
pub fn check_contiguous_indices(indices: &[i32], experts: usize) -> Result<()> {
    check(!indices.is_empty() && indices.len().is_multiple_of(GROUPED_ROW_ALIGN), || {
        format!("contiguous indices need a positive multiple of {GROUPED_ROW_ALIGN} rows; got {}", indices.len())
    })?;
    for (block, rows) in indices.chunks(GROUPED_ROW_ALIGN).enumerate() {
        let first = rows[0];
        check(first == -1 || (first >= 0 && (first as usize) < experts), || {
            format!("rows {}..: expert index {first} is neither -1 nor below {experts}", block * GROUPED_ROW_ALIGN)
        })?;
        let valid = rows.iter().take_while(|&&e| e == first).count();
        let rest_padding = rows[valid..].iter().all(|&e| e == -1);
        check(rest_padding, || {
            format!(
                "rows {}..{}: a 128-row block mixes experts (starts with {first}, then {}); pad each expert's \
                 segment to {GROUPED_ROW_ALIGN} rows",
                block * GROUPED_ROW_ALIGN,
                (block + 1) * GROUPED_ROW_ALIGN,
                rows[valid]
            )
        })?;
    }
    Ok(())
}

/// The per-launch plan: data-parallel over every `block_m × block_n` tile of every batch (tile
/// rows of each batch stacked along M), skipped tiles included (the kernel passes over them),
/// and the grid: one CTA per tile up to the persistent capacity. The balanced (bf16 masked)
/// entry takes only the tile columns and K slices from it and plans its units on the device.
fn grouped_plan(
    e: &GroupedExtents,
    (block_m, block_n): (u32, u32),
    k_slices: u32,
    capacity: u32,
) -> Result<(u32, TilePlan)> {
    let rows_per_batch = e.rows.div_ceil(block_m as usize) as u32;
    let too_many = || Error::InvalidArgument(format!("grouped GEMM {e:?}: too many tiles (at most 2^32 - 1)"));
    let tiles_m = rows_per_batch.checked_mul(e.batches as u32).ok_or_else(too_many)?;
    let tiles_n = e.n.div_ceil(block_n as usize) as u32;
    // Bands of 4 tile rows: an expert's rows share its B columns from L2 within a band (the
    // masked plan's data-parallel walk over its tiles with rows keeps this order).
    let raster = Rasterization::try_new(tiles_m, tiles_n, DATA_PARALLEL_BAND, Raster::AlongM).ok_or_else(too_many)?;
    let grid = raster.tile_count().clamp(1, capacity.max(1));
    let units = StreamKScheduler::try_new(raster.tile_count(), k_slices, grid, StreamKMode::DataParallel)
        .ok_or_else(too_many)?;
    // The balanced masked plan's stream-K tail (fewer tiles than the grid) then fits u32
    // iterations (`MaskedBalance::units`).
    grid.checked_mul(k_slices).ok_or_else(too_many)?;
    Ok((grid, TilePlan { raster, units, raster_rows: rows_per_batch }))
}

/// Whether a grouped FP8 problem runs on the wide 64 × 256 tiles: masked with a capacity of at
/// most 64 rows (one wide tile row per expert: the decode regime, where the kernel streams each
/// expert's weight and a 128 × 128 tile spends half of each slot on A rows), and B's scale
/// index of a wide tile's second 128 columns within one TMA coordinate.
fn prefer_fp8_grouped_wide(e: &GroupedExtents) -> bool {
    e.layout == GroupedLayout::Masked
        && e.rows <= gemm_fp8_sm90::WIDE_BLOCK_M as usize
        && e.b_scales().saturating_add(k_blocks(e.k)) < MAX_SCALE_INDEX
}

/// The FP8 operands' scales (device addresses, lengths in f32).
struct Scales {
    a: (u64, usize),
    b: (u64, usize),
}

impl Warpforge {
    /// Runs the contiguous-layout grouped bf16 GEMM on `stream` (see [`crate::gemm_grouped`]):
    /// `D[r] = A[r]·B[m_indices[r]]ᵀ` for the rows of every 128-row block whose first index names
    /// an expert.
    pub fn grouped_gemm_contiguous(
        &self,
        stream: &Arc<CudaStream>,
        problem: &GroupedContiguousProblem,
        a: &impl DevicePtr<bf16>,
        b: &impl DevicePtr<bf16>,
        m_indices: &impl DevicePtr<i32>,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        let e = problem.check(false)?;
        self.launch_grouped(stream, &e, a, b, None, m_indices, d)
    }

    /// Runs the masked-layout grouped bf16 GEMM on `stream` (see [`crate::gemm_grouped`]):
    /// `D[e, r] = A[e, r]·B[e]ᵀ` for the tiles of rows below `masked_m[e]` (clamped to the
    /// capacity).
    pub fn grouped_gemm_masked(
        &self,
        stream: &Arc<CudaStream>,
        problem: &GroupedMaskedProblem,
        a: &impl DevicePtr<bf16>,
        b: &impl DevicePtr<bf16>,
        masked_m: &impl DevicePtr<i32>,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        let e = problem.check(false)?;
        self.launch_grouped(stream, &e, a, b, None, masked_m, d)
    }

    /// Runs the contiguous-layout grouped block-scaled FP8 GEMM (bf16 D) on `stream`; A, B and
    /// their scales as for [`Warpforge::fp8_gemm`], B and its scales per expert (see
    /// [`crate::gemm_grouped`]).
    #[allow(clippy::too_many_arguments)]
    pub fn fp8_grouped_gemm_contiguous(
        &self,
        stream: &Arc<CudaStream>,
        problem: &GroupedContiguousProblem,
        a: &impl DevicePtr<u8>,
        a_scales: &impl DevicePtr<f32>,
        b: &impl DevicePtr<u8>,
        b_scales: &impl DevicePtr<f32>,
        m_indices: &impl DevicePtr<i32>,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        let e = problem.check(true)?;
        self.launch_grouped(
            stream,
            &e,
            a,
            b,
            Some((a_scales as &dyn DevicePtr<f32>, b_scales as &dyn DevicePtr<f32>)),
            m_indices,
            d,
        )
    }

    /// Runs the masked-layout grouped block-scaled FP8 GEMM (bf16 D) on `stream`; A's scales per
    /// expert `round_up(capacity, 4) · ceil(K / 128)` f32 apart (see [`crate::gemm_grouped`]).
    #[allow(clippy::too_many_arguments)]
    pub fn fp8_grouped_gemm_masked(
        &self,
        stream: &Arc<CudaStream>,
        problem: &GroupedMaskedProblem,
        a: &impl DevicePtr<u8>,
        a_scales: &impl DevicePtr<f32>,
        b: &impl DevicePtr<u8>,
        b_scales: &impl DevicePtr<f32>,
        masked_m: &impl DevicePtr<i32>,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        let e = problem.check(true)?;
        self.launch_grouped(
            stream,
            &e,
            a,
            b,
            Some((a_scales as &dyn DevicePtr<f32>, b_scales as &dyn DevicePtr<f32>)),
            masked_m,
            d,
        )
    }

    /// Checks the buffers of a grouped launch against `e` and launches it.
    #[allow(clippy::too_many_arguments)]
    fn launch_grouped<T>(
        &self,
        stream: &Arc<CudaStream>,
        e: &GroupedExtents,
        a: &impl DevicePtr<T>,
        b: &impl DevicePtr<T>,
        scales: Option<(&dyn DevicePtr<f32>, &dyn DevicePtr<f32>)>,
        groups: &impl DevicePtr<i32>,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        self.check_sm90("grouped GEMM")?;
        let mut owners = vec![&**a.stream(), &**b.stream(), &**groups.stream(), &**d.stream()];
        if let Some((sa, sb)) = scales {
            owners.extend([&**sa.stream(), &**sb.stream()]);
        }
        self.module().check_context(stream, &owners)?;
        check(a.len() >= e.a, || format!("A holds {} elements, the problem reads {}", a.len(), e.a))?;
        check(b.len() >= e.b, || format!("B holds {} elements, the problem reads {}", b.len(), e.b))?;
        check(d.len() >= e.d, || format!("D holds {} elements, the problem writes {}", d.len(), e.d))?;
        let what = match e.layout {
            GroupedLayout::Contiguous => "m_indices (one i32 per row)",
            GroupedLayout::Masked => "masked_m (one i32 per expert)",
        };
        check(groups.len() >= e.groups, || format!("{what} holds {}, the problem reads {}", groups.len(), e.groups))?;
        if let Some((sa, sb)) = scales {
            check(sa.len() >= e.a_scales(), || {
                format!("A's scales hold {} f32, the problem reads {}", sa.len(), e.a_scales())
            })?;
            check(sb.len() >= e.b_scales(), || {
                format!("B's scales hold {} f32, the problem reads {}", sb.len(), e.b_scales())
            })?;
        }
        // The read guards live to the end of this function, after the launch.
        let (a_ptr, _a_access) = a.device_ptr(stream);
        let (b_ptr, _b_access) = b.device_ptr(stream);
        let (groups_ptr, _groups_access) = groups.device_ptr(stream);
        let scale_guards = scales.map(|(sa, sb)| (sa.device_ptr(stream), sb.device_ptr(stream)));
        let mut aligned = vec![("A", a_ptr), ("B", b_ptr)];
        if let Some(((sa_ptr, _), (sb_ptr, _))) = &scale_guards {
            aligned.extend([("A's scales", *sa_ptr), ("B's scales", *sb_ptr)]);
        }
        for (name, addr) in aligned {
            check(addr.is_multiple_of(16), || format!("{name} must start 16-byte aligned (device address {addr:#x})"))?;
        }
        let scales = scales
            .zip(scale_guards.as_ref())
            .map(|((sa, sb), ((sa_ptr, _), (sb_ptr, _)))| Scales { a: (*sa_ptr, sa.len()), b: (*sb_ptr, sb.len()) });
        let (a_len, b_len) = (a.len() * size_of::<T>(), b.len() * size_of::<T>());
        self.launch_grouped_kernel(stream, e, (a_ptr, a_len), (b_ptr, b_len), scales, groups_ptr, d)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_grouped_kernel(
        &self,
        stream: &Arc<CudaStream>,
        e: &GroupedExtents,
        (a_ptr, a_bytes): (u64, usize),
        (b_ptr, b_bytes): (u64, usize),
        scales: Option<Scales>,
        groups: u64,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        let fp8 = scales.is_some();
        let masked = e.layout == GroupedLayout::Masked;
        // FP8 decode (a masked capacity within one wide tile row): the wide 64 × 256 tiles,
        // which write exactly the rows a 128 × 128 tile would (all of an expert's, or none).
        let wide = fp8 && masked && prefer_fp8_grouped_wide(e);
        // K per ring slot, rows of an A box, rows of a B box (the tile's columns, or half of a
        // wide tile's).
        let (block_k, a_box, block_n) = if fp8 {
            (gemm_fp8_sm90::BLOCK_K, gemm_fp8_sm90::A_BOX_ROWS, gemm_fp8_sm90::BLOCK_N)
        } else {
            (gemm_sm90::BLOCK_K, gemm_sm90::A_BOX_ROWS, gemm_sm90::BLOCK_N)
        };
        let tile = if wide {
            (gemm_fp8_sm90::WIDE_BLOCK_M, gemm_fp8_sm90::WIDE_BLOCK_N)
        } else {
            (GROUPED_ROW_ALIGN as u32, block_n)
        };
        let (rows, n, k) = (e.rows as u64, e.n as u64, e.k as u64);
        let operand = |ptr: u64, bytes: usize, dims: [u64; 3], box_rows: u32| {
            let boxes = [block_k, box_rows, 1];
            // SAFETY: `ptr` addresses `bytes` bytes of the caller's A or B, borrowed for this call
            // (`launch_grouped`); the map is used only by the launch below.
            unsafe {
                if fp8 {
                    packed_map::<u8>(ptr, bytes, dims, boxes)
                } else {
                    packed_map::<bf16>(ptr, bytes, dims, boxes)
                }
            }
        };
        let a_map = operand(a_ptr, a_bytes, [k, rows, e.batches as u64], a_box)?;
        let b_map = operand(b_ptr, b_bytes, [k, n, e.experts as u64], block_n)?;

        let (threads, smem) = if wide {
            (gemm_fp8_sm90::THREADS, gemm_fp8_sm90::WIDE_SMEM_BYTES)
        } else if fp8 {
            (gemm_fp8_sm90::THREADS, gemm_fp8_sm90::SMEM_BYTES)
        } else {
            (gemm_sm90::THREADS, gemm_sm90::SMEM_BYTES)
        };
        let k_slices = e.k.div_ceil(block_k as usize) as u32;
        let d_len = d.len();
        let (d_ptr, d_access) = d.device_ptr_mut(stream);
        // D through TMA stores when its base and rows are whole 16-byte chunks; direct otherwise.
        let d_tma = d_ptr.is_multiple_of(16) && (n * 2).is_multiple_of(16);
        let d_map = if d_tma {
            let (dims, boxes) = ([n, rows, e.batches as u64], [gemm_sm90::STORE_BOX_COLS, gemm_sm90::A_BOX_ROWS, 1]);
            // SAFETY: `d_ptr` addresses `d_len` elements of the caller's D, borrowed mutably for
            // this call; the map is used only by the launch below.
            unsafe { packed_map::<bf16>(d_ptr, d_len * 2, dims, boxes)? }
        } else {
            TensorMap::ZEROED
        };
        let params = GemmParams {
            m: e.rows as u32,
            n: e.n as u32,
            d: d_ptr,
            c: 0,
            bias: 0,
            ldd: n,
            ldc: 0,
            stride_d: n * rows,
            stride_c: 0,
            alpha: 1.0,
            beta: 0.0,
            activation: 0,
            d_tma: d_tma as u32,
            workspace: 0,
            flags: 0,
        };
        let grouped =
            GroupedParams { experts: e.experts as u32, capacity: if masked { e.rows as u32 } else { 0 }, groups };
        // With more than one tile row of capacity per expert, the bf16 masked launch balances
        // the tiles with rows over the grid on the device (`MaskedBalanced`: the last partial
        // wave streamed over K), so it takes this stream's stream-K buffers for the grid; the
        // others (decode capacities among them) are data-parallel over the capacity tiles.
        let balanced = masked && !fp8 && e.rows > gemm_sm90::BLOCK_M as usize;
        let mode = if balanced { StreamKMode::Hybrid } else { StreamKMode::DataParallel };
        let mut stream_k_cache = self.stream_k_cache().lock()?;
        // Both launches below: the A/B maps cover the caller's buffers (lengths checked against
        // the problem, 16-byte aligned); the D map is used only when `d_tma` is set and covers
        // exactly D; D, the index/count buffer and the scales were checked against the problem
        // (the kernel clamps every index and count it reads: `logic::schedule::grouped`); the
        // plan covers exactly the launch's grid, on the entry's tile (wide: B's scale index of
        // every tile's second 128 columns fits, `prefer_fp8_grouped_wide`); a balanced launch
        // has this stream's partial slots and zeroed flags for the grid, which is resident (the
        // persistent capacity), so every awaited CTA runs.
        if let Some(s) = scales {
            let entry = match (masked, wide) {
                (true, true) => entries::GEMM_FP8_GROUPED_MASKED_BF16_WIDE,
                (true, false) => entries::GEMM_FP8_GROUPED_MASKED_BF16,
                (false, _) => entries::GEMM_FP8_GROUPED_CONTIGUOUS_BF16,
            };
            let kernel = self.entry(entry)?;
            let capacity = kernel.kernel().plan_persistent(threads, smem, None, u64::MAX)?.blocks;
            let (grid, plan) = grouped_plan(e, tile, k_slices, capacity)?;
            let ((workspace, workspace_access), (flags, flags_access)) =
                stream_k_cache.launch_ptrs(stream, mode, grid)?;
            let params = GemmParams { workspace, flags, ..params };
            let keep = [Some(d_access), workspace_access, flags_access].into_iter().flatten();
            let config = LaunchConfig::linear(grid, threads).with_dynamic_smem(smem);
            let scales = BlockScaleParams { k_blocks: k_blocks(e.k) as u32, b_stride: e.b_scales_stride as u32 };
            let a_layout = (e.rows, k_blocks(e.k), e.batches, e.a_scales_stride);
            // SAFETY: both scale buffers are the caller's, borrowed for this call and checked
            // against the problem (`launch_grouped`); the maps are used only by this launch.
            let (sa_map, sb_map) = unsafe { scale_maps(s.a, s.b, a_layout, e.b_scales())? };
            // SAFETY: as above, with both scale buffers checked against the problem.
            unsafe {
                kernel.launch(
                    stream,
                    &config,
                    (a_map, b_map, d_map, sa_map, sb_map, params, plan, scales, grouped),
                    keep,
                )?
            };
        } else {
            let entry = match (masked, balanced) {
                (true, true) => entries::GEMM_GROUPED_MASKED_BALANCED_BF16,
                (true, false) => entries::GEMM_GROUPED_MASKED_BF16,
                (false, _) => entries::GEMM_GROUPED_CONTIGUOUS_BF16,
            };
            let kernel = self.entry(entry)?;
            let capacity = kernel.kernel().plan_persistent(threads, smem, None, u64::MAX)?.blocks;
            let (grid, plan) = grouped_plan(e, tile, k_slices, capacity)?;
            let ((workspace, workspace_access), (flags, flags_access)) =
                stream_k_cache.launch_ptrs(stream, mode, grid)?;
            let params = GemmParams { workspace, flags, ..params };
            let keep = [Some(d_access), workspace_access, flags_access].into_iter().flatten();
            let config = LaunchConfig::linear(grid, threads).with_dynamic_smem(smem);
            // SAFETY: as above.
            unsafe { kernel.launch(stream, &config, (a_map, b_map, d_map, params, plan, grouped), keep)? };
        }
        drop(stream_k_cache);
        Ok(())
    }
}

/// A 3-D tensor map over a packed `dims` tensor of `T` (128-byte swizzle, `boxes` per load).
///
/// # Safety
/// `ptr` addresses `bytes` bytes of a live buffer that outlives every use of the map.
unsafe fn packed_map<T: TmaElement>(ptr: u64, bytes: usize, dims: [u64; 3], boxes: [u32; 3]) -> Result<TensorMap> {
    let elem = size_of::<T>() as u64;
    let builder = TensorMapBuilder::<T>::new(&dims, &boxes)
        .global_strides(&[dims[0] * elem, dims[0] * dims[1] * elem])
        .swizzle(Swizzle::B128);
    // SAFETY: the caller's contract.
    Ok(unsafe { builder.encode_raw(ptr, bytes as u64)? })
}

#[cfg(test)]
mod tests;
