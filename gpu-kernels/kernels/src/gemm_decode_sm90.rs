//! GEMMs on warp-level `mma.sync` with the operands swapped: `D = act(alpha·A·Bᵀ + beta·C +
//! bias)` computed as `Dᵀ = B·Aᵀ`, so that B (viewed N × K), the operand a decode call streams
//! from HBM, fills the instruction's 16-row side and A's rows its 8-column side
//! (`mma.sync.m16n8k16`, one 8-column tile per 8 rows of A, four per block).
//!
//! Two ways to read the operands, one body:
//! - `gemm_decode_*` ([`Vectors`]): 16-byte vectors, K contiguous — the decode GEMM of a linear
//!   layer (M ≤ 32 rows), where a 64- or 128-row wgmma tile would spend most of its math on
//!   padding rows and, with N/256 tiles, leave SMs idle. Each thread's eight K elements of a
//!   row are one vector (`mma::k32_steps`), so a warp reads 64 contiguous bytes of each of its
//!   16 weight rows per chunk; the weights are read once (`ld.global.nc.L1::no_allocate`), the
//!   activations from L1/L2.
//! - `gemm_gather_*` ([`Gathered`]): element by element through any row and K steps, so any
//!   layout, pitch, K or alignment — the small GEMM, whose cost is its launch, run without the
//!   repack launches the wgmma path needs for such operands.
//!
//! Work split: a block owns `16 · G` rows of B (columns of D) and 32 rows of A (of D) of one
//! batch, its [`WARPS`] warps in `G` column groups of 16 (`G = 1` when reading vectors; the
//! launch's `col_groups` when gathering, so a short K keeps every warp busy on columns of its
//! own); the warps of a group split K in 32-element chunks, each keeping [`UNROLL`] chunks of
//! weights in flight when reading vectors (one chunk at a time when gathering). The warps'
//! partial tiles meet in shared memory, and the block's threads apply the GEMM epilogue
//! (`gemm_epilogue::finish`) per element of D.
//!
//! Rows of B past N and rows of A past M are read clamped to the last valid row: they feed
//! only outputs that are never stored. K elements past K are zeroed in both operands, so the
//! tail adds nothing even with a non-finite element in a clamped row. Every `mma.sync` runs
//! under warp-uniform control flow.
//!
//! Contract (checked by the host): M, N, K ≥ 1; `G` is 1, 2, 4 or 8; the grid is
//! `ceil(N/(16·G))·ceil(M/32)·batch` blocks of [`WARPS`] warps; the [`Vectors`] entries need K,
//! the row steps and the batch strides multiples of 8 elements, K steps of 1 and both bases
//! 16-byte aligned.

use warpforge_dsl::abi::{DecodeOperands, GemmParams};
use warpforge_dsl::global::{self, Bf16x8, Cached, F16x8, LoadPolicy, ReadOnlyNoL1, Vector16, Words};
use warpforge_dsl::kernel;
use warpforge_dsl::mma::{self, Acc16x8, MmaInput};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::epilogue::Output;
use warpforge_dsl::regs::{RegArray, Regs4};
use warpforge_dsl::shared::StaticShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, lane_id, thread_rank};

use crate::gemm_epilogue::finish;

/// Rows of A (of D) per block: four 8-column tiles of the instruction.
pub const DECODE_BLOCK_M: u32 = 32;
/// Rows of B (columns of D) per block: the instruction's 16-row side.
pub const DECODE_BLOCK_N: u32 = 16;
/// Warps per block, splitting K.
pub const WARPS: u32 = 8;
/// 32-element K chunks of weights each warp keeps in flight.
pub const UNROLL: u64 = 4;
/// Elements of K per chunk (4 threads × 8).
const CHUNK: u64 = 32;
/// f32 partials per warp in shared memory: 4 tiles × 4 registers × 32 lanes.
const PARTIALS: u32 = 4 * 4 * 32;

/// 16-bit inputs: the vector they load as, and their `mma.sync` form.
pub trait DecodeInput: MmaInput {
    /// The 16-byte vector of eight elements.
    type Vector: Vector16<Elem = Self>;
}

impl DecodeInput for Bf16 {
    type Vector = Bf16x8;
}

impl DecodeInput for F16 {
    type Vector = F16x8;
}

/// How a thread reads eight consecutive K elements (`kv .. kv + 8`) of one operand row.
pub trait Access {
    /// Whether a warp keeps [`UNROLL`] chunks in flight (vectors: HBM latency to hide) or
    /// reads one chunk at a time (element loads: registers to spare).
    const UNROLLED: bool;
    /// Whether the block's warps split into the launch's column groups
    /// (`DecodeOperands::col_groups`); otherwise all of them split K over 16 columns.
    const GROUPED: bool;

    /// The eight elements as words, read under policy `P`; elements at or past `k` are zero.
    ///
    /// # Safety
    /// `row` is a valid row of the operand (`k` elements `k_step` apart); [`Vectors`] also
    /// needs `kv` a multiple of 8 and the row 16-byte aligned with `k_step = 1`.
    unsafe fn read<I: DecodeInput, P: LoadPolicy>(row: *const I, k_step: u64, kv: u64, k: u64) -> Words;

    /// As [`Access::read`] for `kv + 8 ≤ k` (a chunk wholly inside K): no masking needed.
    ///
    /// # Safety
    /// As [`Access::read`], and `kv + 8 ≤ k`.
    unsafe fn read_inside<I: DecodeInput, P: LoadPolicy>(row: *const I, k_step: u64, kv: u64, k: u64) -> Words;
}

/// One 16-byte vector per eight elements.
pub enum Vectors {}

impl Access for Vectors {
    const UNROLLED: bool = true;
    const GROUPED: bool = false;

    #[inline(always)]
    unsafe fn read<I: DecodeInput, P: LoadPolicy>(row: *const I, k_step: u64, kv: u64, k: u64) -> Words {
        // K is a multiple of 8, so the vector is wholly inside or wholly past K; past it, the
        // row's last vector is read and zeroed by the mask.
        let inside = kv < k;
        let mask = 0u32.wrapping_sub(inside as u32);
        // SAFETY: the read vector starts at most at k - 8 (caller: k ≥ 8, a multiple of 8).
        let w = unsafe { Self::read_inside::<I, P>(row, k_step, if inside { kv } else { k - 8 }, k) };
        (w.0 & mask, w.1 & mask, w.2 & mask, w.3 & mask)
    }

    #[inline(always)]
    unsafe fn read_inside<I: DecodeInput, P: LoadPolicy>(row: *const I, _k_step: u64, kv: u64, _k: u64) -> Words {
        // SAFETY: caller (kv + 8 ≤ k, 16-byte aligned, K steps of 1).
        unsafe { global::load::<I::Vector, P>(row.add(kv as usize)).words() }
    }
}

/// Eight 2-byte loads per eight elements, each at its own K step.
pub enum Gathered {}

impl Access for Gathered {
    const UNROLLED: bool = false;
    const GROUPED: bool = true;

    #[inline(always)]
    unsafe fn read<I: DecodeInput, P: LoadPolicy>(row: *const I, k_step: u64, kv: u64, k: u64) -> Words {
        let half = |e: u64| -> u32 {
            let at = kv + e;
            // Clamped to the row's last element, then zeroed past K: no branch, no stray read.
            // SAFETY: at.min(k - 1) < k indexes the row (caller); 16-bit elements.
            let bits = unsafe { row.add((at.min(k - 1) * k_step) as usize).cast::<u16>().read() } as u32;
            bits & 0u32.wrapping_sub((at < k) as u32)
        };
        (half(0) | half(1) << 16, half(2) | half(3) << 16, half(4) | half(5) << 16, half(6) | half(7) << 16)
    }

    #[inline(always)]
    unsafe fn read_inside<I: DecodeInput, P: LoadPolicy>(row: *const I, k_step: u64, kv: u64, k: u64) -> Words {
        // SAFETY: forwarded (the masks are all ones inside K).
        unsafe { Self::read::<I, P>(row, k_step, kv, k) }
    }
}

/// One thread's rows: its two weight rows (g and g + 8 of the block's 16) and its row of A in
/// each of the four tiles (g + 8j of the block's 32), all clamped to the operand.
struct Rows<I> {
    lo: *const I,
    hi: *const I,
    x: Regs4<*const I>,
    a_k_step: u64,
    b_k_step: u64,
    k: u64,
}

/// `acc[j] += W·Xⱼᵀ` over the chunk at `kv` whose weights are `w`, for the `tiles` live tiles;
/// `inside`: the chunk lies wholly inside K.
///
/// # Safety
/// Whole warp, converged (`tiles` and `inside` are warp-uniform); the rows as [`Access::read`].
#[inline(always)]
unsafe fn chunk<I: DecodeInput, X: Access, const INSIDE: bool>(
    acc: &mut Regs4<Acc16x8>,
    rows: &Rows<I>,
    w: (Words, Words),
    kv: u64,
    tiles: u32,
) {
    let activations = |x: *const I| {
        // SAFETY: caller.
        unsafe {
            if INSIDE {
                X::read_inside::<I, Cached>(x, rows.a_k_step, kv, rows.k)
            } else {
                X::read::<I, Cached>(x, rows.a_k_step, kv, rows.k)
            }
        }
    };
    macro_rules! tile {
        ($j:tt) => {
            if $j < tiles {
                // SAFETY: caller (warp converged, uniform branch).
                unsafe { mma::mma_k32::<I>(&mut acc.$j, w.0, w.1, activations(rows.x.$j)) };
            }
        };
    }
    tile!(0);
    tile!(1);
    tile!(2);
    tile!(3);
}

/// The weights of the chunk at `kv`, both rows.
///
/// # Safety
/// As [`Access::read`] (and `kv + 8 ≤ k` when `INSIDE`).
#[inline(always)]
unsafe fn weights<I: DecodeInput, X: Access, const INSIDE: bool>(rows: &Rows<I>, kv: u64) -> (Words, Words) {
    let read = |row: *const I| {
        // SAFETY: caller.
        unsafe {
            if INSIDE {
                X::read_inside::<I, ReadOnlyNoL1>(row, rows.b_k_step, kv, rows.k)
            } else {
                X::read::<I, ReadOnlyNoL1>(row, rows.b_k_step, kv, rows.k)
            }
        }
    };
    (read(rows.lo), read(rows.hi))
}

/// The body of every `gemm_decode_*_sm90` and `gemm_gather_*_sm90` entry.
///
/// # Safety
/// The module doc's contract; `p` and `s` describe live buffers of `I` (A, B) and `O` (C, D).
#[inline(always)]
pub unsafe fn decode<I: DecodeInput, O: Output, X: Access>(p: &GemmParams, s: &DecodeOperands) {
    // SAFETY: declared once, at the top; WARPS · PARTIALS f32.
    let partials = unsafe { StaticShared::<{ (WARPS * PARTIALS * 4) as usize }, 16>::declare::<f32>() };
    // Column groups of 16 per block, and the warps of each (splitting K).
    let col_groups = if X::GROUPED { s.col_groups.max(1) } else { 1 };
    let group_warps = WARPS / col_groups;
    let block_cols = DECODE_BLOCK_N * col_groups;
    let (groups_n, groups_m) = (p.n.div_ceil(block_cols), p.m.div_ceil(DECODE_BLOCK_M));
    let block = block_idx().x;
    let (z, group_m, group_n) = (block / (groups_n * groups_m), block / groups_n % groups_m, block % groups_n);
    let (block_n0, m0) = (group_n * block_cols, group_m * DECODE_BLOCK_M);
    let (warp, lane) = (thread_rank() / 32, lane_id());
    // This warp's 16 columns (past N for the last block's later groups: read clamped, never
    // stored) and its share of K within its group.
    let (n0, k_part) = if X::GROUPED {
        (block_n0 + warp / group_warps * DECODE_BLOCK_N, warp % group_warps)
    } else {
        (block_n0, warp)
    };
    let (g, t) = (lane / 4, lane % 4);
    let tiles = (p.m - m0).div_ceil(8).min(4);
    let a = (s.a as *const I).wrapping_add((z as u64 * s.stride_a) as usize);
    let b = (s.b as *const I).wrapping_add((z as u64 * s.stride_b) as usize);
    let weight_row = |r: u32| b.wrapping_add(((n0 + r).min(p.n - 1) as u64 * s.b_row_step) as usize);
    let a_row = |j: u32| a.wrapping_add(((m0 + 8 * j + g).min(p.m - 1) as u64 * s.a_row_step) as usize);
    let k = s.k as u64;
    let rows = Rows::<I> {
        lo: weight_row(g),
        hi: weight_row(g + 8),
        x: Regs4::from_fn(|j| a_row(j as u32)),
        a_k_step: s.a_k_step,
        b_k_step: s.b_k_step,
        k,
    };

    // This warp's chunks: an even share of ceil(K / 32) among its group's warps.
    let chunks = k.div_ceil(CHUNK);
    let (part, parts) = (k_part as u64, group_warps as u64);
    let (first, end) = (chunks * part / parts, chunks * (part + 1) / parts);
    let lane_k = 8 * t as u64;
    let mut acc = Regs4::splat(Acc16x8::ZERO);
    let mut c = first;
    // Groups of UNROLL chunks that end before K's last chunk, so wholly inside K.
    while X::UNROLLED && c + UNROLL <= end && c + UNROLL < chunks {
        let kv = c * CHUNK + lane_k;
        // SAFETY: chunks c .. c + UNROLL lie before the last chunk of K, so every vector is
        // inside K; the rows are valid; `tiles` is warp-uniform.
        unsafe {
            let w0 = weights::<I, X, true>(&rows, kv);
            let w1 = weights::<I, X, true>(&rows, kv + CHUNK);
            let w2 = weights::<I, X, true>(&rows, kv + 2 * CHUNK);
            let w3 = weights::<I, X, true>(&rows, kv + 3 * CHUNK);
            chunk::<I, X, true>(&mut acc, &rows, w0, kv, tiles);
            chunk::<I, X, true>(&mut acc, &rows, w1, kv + CHUNK, tiles);
            chunk::<I, X, true>(&mut acc, &rows, w2, kv + 2 * CHUNK, tiles);
            chunk::<I, X, true>(&mut acc, &rows, w3, kv + 3 * CHUNK, tiles);
        }
        c += UNROLL;
    }
    // The rest one chunk at a time, masked past K.
    while c < end {
        let kv = c * CHUNK + lane_k;
        // SAFETY: the rows are valid; `read` masks past K; `tiles` is warp-uniform.
        unsafe {
            let w = weights::<I, X, false>(&rows, kv);
            chunk::<I, X, false>(&mut acc, &rows, w, kv, tiles);
        }
        c += 1;
    }

    // The warps' partial tiles into shared memory: partials[warp][j][reg][lane].
    let mine = partials.add(warp * PARTIALS).as_mut_ptr();
    acc.for_each(|j, tile| {
        let at = |reg: u32| ((j as u32 * 4 + reg) * 32 + lane) as usize;
        // SAFETY: inside this warp's PARTIALS slots; each (j, reg, lane) written once.
        unsafe {
            mine.add(at(0)).write(tile.0);
            mine.add(at(1)).write(tile.1);
            mine.add(at(2)).write(tile.2);
            mine.add(at(3)).write(tile.3);
        }
    });
    // SAFETY: every thread of the block reaches this barrier (no early return above).
    unsafe { sync_threads() };
    // Each thread folds a group's warps' partials of some slots and stores those elements of D.
    let all = partials.as_mut_ptr();
    let group_slots = tiles * 4 * 32;
    let mut slot = thread_rank();
    while slot < col_groups * group_slots {
        let (group, inner) = if X::GROUPED { (slot / group_slots, slot % group_slots) } else { (0, slot) };
        let mut v = 0.0f32;
        for w in group * group_warps..(group + 1) * group_warps {
            // SAFETY: inner < PARTIALS; w < WARPS; written by warp w before the barrier.
            v += unsafe { all.add((w * PARTIALS + inner) as usize).read() };
        }
        let (j, reg, from_lane) = (inner / 128, inner / 32 % 4, inner % 32);
        let (row, col) = Acc16x8::coords(from_lane, reg);
        let (n, m) = (block_n0 + group * DECODE_BLOCK_N + row, m0 + 8 * j + col);
        if n < p.n && m < p.m {
            let at = z as u64 * p.stride_d + m as u64 * p.ldd + n as u64;
            // SAFETY: (z, m, n) is inside D; this thread alone writes it; C and bias as the
            // epilogue's contract (in place: the element is read as C, then written).
            unsafe { (p.d as *mut O).add(at as usize).write(O::from_f32(finish::<O>(p, v, z, m, n))) };
        }
        slot += WARPS * 32;
    }
}

/// Declares `gemm_<access>_<input>_<output>_sm90` entries.
macro_rules! decode_entries {
    ($($name:ident: $input:ty => $output:ty, $access:ty;)*) => {$(
        /// See the module doc; parameters as the host's decode launcher builds them.
        ///
        /// # Safety
        /// The module doc's contract.
        #[kernel(threads = 256)]
        pub unsafe fn $name(p: GemmParams, s: DecodeOperands) {
            // SAFETY: forwarded (the host's contract).
            unsafe { decode::<$input, $output, $access>(&p, &s) }
        }
    )*};
}

decode_entries! {
    gemm_decode_bf16_bf16_sm90: Bf16 => Bf16, Vectors;
    gemm_decode_bf16_f16_sm90: Bf16 => F16, Vectors;
    gemm_decode_bf16_f32_sm90: Bf16 => f32, Vectors;
    gemm_decode_f16_bf16_sm90: F16 => Bf16, Vectors;
    gemm_decode_f16_f16_sm90: F16 => F16, Vectors;
    gemm_decode_f16_f32_sm90: F16 => f32, Vectors;
    gemm_gather_bf16_bf16_sm90: Bf16 => Bf16, Gathered;
    gemm_gather_bf16_f16_sm90: Bf16 => F16, Gathered;
    gemm_gather_bf16_f32_sm90: Bf16 => f32, Gathered;
    gemm_gather_f16_bf16_sm90: F16 => Bf16, Gathered;
    gemm_gather_f16_f16_sm90: F16 => F16, Gathered;
    gemm_gather_f16_f32_sm90: F16 => f32, Gathered;
}
