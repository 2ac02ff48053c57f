//! Decode GEMM on the tensor cores with the operands swapped: `D = act(alpha·A·Bᵀ + beta·C +
//! bias)` for at most [`DECODE_MAX_ROWS`] rows of A, computed as `Dᵀ = B·Aᵀ` so that the weight
//! B (N × K, K contiguous), the operand streamed from HBM, fills the instruction's 16-row side
//! and the few activation rows its 8-column side (`mma.sync.m16n8k16`, one 8-column tile per 8
//! rows of A). A 64- or 128-row wgmma tile would spend most of its math on padding rows and,
//! with N/256 tiles, leave SMs idle; here every block streams 16 rows of B.
//!
//! Work split: block = 16 rows of B (columns of D) of one batch; its [`WARPS`] warps split K
//! in 32-element chunks, and each thread loads its fragments straight from global memory as
//! 16-byte vectors (`mma::k32_steps`: eight consecutive K elements per thread, so a warp reads
//! 64 contiguous bytes of each of its 16 weight rows per chunk). A warp keeps [`UNROLL`]
//! chunks of weights in flight (`ld.global.nc.L1::no_allocate`: read once); the activations
//! (plain loads: every block rereads them from L1/L2) are loaded per chunk. The warps' partial
//! tiles meet in shared memory and the block's threads apply the GEMM epilogue
//! (`gemm_epilogue::finish`) per element of D.
//!
//! Rows of B past N and rows of A past M are read clamped to the last valid row: they only
//! feed outputs that are never stored. K elements past K (the last chunk) are zeroed in both
//! operands by a mask, so the tail adds nothing, even with a non-finite element in the clamped
//! row. Every `mma.sync` runs under warp-uniform control flow.
//!
//! Contract (checked by the host before it picks this path): rows ≤ [`DECODE_MAX_ROWS`]; K, the
//! row pitches of A and B and their batch strides multiples of 8 elements; A and B 16-byte
//! aligned; M, N, K ≥ 1.

use warpforge_dsl::abi::{GemmParams, SkinnyOperands};
use warpforge_dsl::global::{self, Bf16x8, Cached, F16x8, ReadOnlyNoL1, Vector16, Words};
use warpforge_dsl::kernel;
use warpforge_dsl::mma::{self, Acc16x8, MmaInput};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::epilogue::Output;
use warpforge_dsl::regs::{RegArray, Regs4};
use warpforge_dsl::shared::StaticShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, lane_id, thread_rank};

use crate::gemm_epilogue::finish;

/// Most rows of D (of A) one launch handles: four 8-column tiles of the instruction.
pub const DECODE_MAX_ROWS: u32 = 32;
/// Rows of B (columns of D) per block: the instruction's 16-row side.
pub const DECODE_BLOCK_N: u32 = 16;
/// Warps per block, splitting K.
pub const WARPS: u32 = 8;
/// 32-element K chunks of weights each warp keeps in flight.
pub const UNROLL: u64 = 4;
/// Elements of K per chunk (4 threads × 8).
const CHUNK: u64 = 32;
/// 8-column tiles of A's rows.
const TILES: u32 = DECODE_MAX_ROWS / 8;
/// f32 partials per warp in shared memory: TILES tiles × 4 registers × 32 lanes.
const PARTIALS: u32 = TILES * 4 * 32;

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

/// Where one thread's operands of a batch start: its two weight rows (g and g + 8 of the
/// block's 16, clamped to N - 1) and its activation row in each tile (g + 8j, clamped to M - 1).
struct Rows<I> {
    lo: *const I,
    hi: *const I,
    x: Regs4<*const I>,
}

impl<I: DecodeInput> Rows<I> {
    /// The 16-byte vectors at K offset `kv` of both weight rows (read-once policy).
    ///
    /// # Safety
    /// `kv + 8 ≤ k`; the rows as the module contract.
    #[inline(always)]
    unsafe fn weights(&self, kv: u64) -> (Words, Words) {
        // SAFETY: caller.
        unsafe {
            (
                global::load::<I::Vector, ReadOnlyNoL1>(self.lo.add(kv as usize)).words(),
                global::load::<I::Vector, ReadOnlyNoL1>(self.hi.add(kv as usize)).words(),
            )
        }
    }

    /// The activation vector at K offset `kv` of the row at `x` (one of `self.x`).
    ///
    /// # Safety
    /// As [`Rows::weights`].
    #[inline(always)]
    unsafe fn activations(&self, x: *const I, kv: u64) -> Words {
        // SAFETY: caller.
        unsafe { global::load::<I::Vector, Cached>(x.add(kv as usize)).words() }
    }
}

/// `acc[j] += W·Xⱼᵀ` over the chunk whose weights are `w`, for the `tiles` live tiles.
///
/// # Safety
/// Whole warp, converged (`tiles` is warp-uniform); `kv` as [`Rows::activations`].
#[inline(always)]
unsafe fn chunk<I: DecodeInput>(
    acc: &mut Regs4<Acc16x8>,
    rows: &Rows<I>,
    w: (Words, Words),
    kv: u64,
    tiles: u32,
    mask: u32,
) {
    let masked = |v: Words| (v.0 & mask, v.1 & mask, v.2 & mask, v.3 & mask);
    let (lo, hi) = (masked(w.0), masked(w.1));
    macro_rules! tile {
        ($j:tt) => {
            if $j < tiles {
                // SAFETY: caller (kv in range, warp converged, uniform branch).
                unsafe { mma::mma_k32::<I>(&mut acc.$j, lo, hi, masked(rows.activations(rows.x.$j, kv))) };
            }
        };
    }
    tile!(0);
    tile!(1);
    tile!(2);
    tile!(3);
}

/// The body of every `gemm_decode_*_sm90` entry.
///
/// # Safety
/// The module doc's contract; `p` and `s` describe live buffers of `I` (A, B) and `O` (C, D);
/// launched with [`WARPS`] warps per block and `ceil(N / 16) · batch` blocks.
#[inline(always)]
pub unsafe fn decode<I: DecodeInput, O: Output>(p: &GemmParams, s: &SkinnyOperands) {
    // SAFETY: declared once, at the top; WARPS · PARTIALS f32.
    let partials = unsafe { StaticShared::<{ (WARPS * PARTIALS * 4) as usize }, 16>::declare::<f32>() };
    let groups = p.n.div_ceil(DECODE_BLOCK_N);
    let (z, group) = (block_idx().x / groups, block_idx().x % groups);
    let n0 = group * DECODE_BLOCK_N;
    let (warp, lane) = (thread_rank() / 32, lane_id());
    let (g, t) = (lane / 4, lane % 4);
    let tiles = p.m.div_ceil(8);
    let a = (s.a as *const I).wrapping_add((z as u64 * s.stride_a) as usize);
    let b = (s.b as *const I).wrapping_add((z as u64 * s.stride_b) as usize);
    let weight_row = |r: u32| b.wrapping_add(((n0 + r).min(p.n - 1) as u64 * s.ldb) as usize);
    let act_row = |j: u32| a.wrapping_add(((8 * j + g).min(p.m - 1) as u64 * s.lda) as usize);
    let rows = Rows::<I> { lo: weight_row(g), hi: weight_row(g + 8), x: Regs4::from_fn(|j| act_row(j as u32)) };

    // This warp's chunks: an even share of ceil(K / 32).
    let k = s.k as u64;
    let chunks = k.div_ceil(CHUNK);
    let (first, end) = (chunks * warp as u64 / WARPS as u64, chunks * (warp as u64 + 1) / WARPS as u64);
    let lane_k = 8 * t as u64;
    let mut acc = Regs4::splat(Acc16x8::ZERO);
    let mut c = first;
    // Whole groups of UNROLL chunks, all inside K except possibly the very last chunk of K.
    while c + UNROLL < end {
        let kv = c * CHUNK + lane_k;
        // SAFETY: chunks c .. c + UNROLL are before `end - 1`, so inside K (K is a multiple of
        // 8, each vector is all in or all out; all of these are in); the rows are valid.
        unsafe {
            let w0 = rows.weights(kv);
            let w1 = rows.weights(kv + CHUNK);
            let w2 = rows.weights(kv + 2 * CHUNK);
            let w3 = rows.weights(kv + 3 * CHUNK);
            chunk(&mut acc, &rows, w0, kv, tiles, u32::MAX);
            chunk(&mut acc, &rows, w1, kv + CHUNK, tiles, u32::MAX);
            chunk(&mut acc, &rows, w2, kv + 2 * CHUNK, tiles, u32::MAX);
            chunk(&mut acc, &rows, w3, kv + 3 * CHUNK, tiles, u32::MAX);
        }
        c += UNROLL;
    }
    // The rest one chunk at a time; a vector past K reads the row's last vector and is masked.
    while c < end {
        let kv = c * CHUNK + lane_k;
        let inside = kv < k;
        let kv_read = if inside { kv } else { k - 8 };
        let mask = 0u32.wrapping_sub(inside as u32);
        // SAFETY: kv_read + 8 ≤ k; the rows are valid; `tiles` is warp-uniform.
        unsafe {
            let w = rows.weights(kv_read);
            chunk(&mut acc, &rows, w, kv_read, tiles, mask);
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
    // Each thread folds the warps' partials of some slots and stores those elements of D.
    let all = partials.as_mut_ptr();
    let mut slot = thread_rank();
    while slot < tiles * 4 * 32 {
        let mut v = 0.0f32;
        for w in 0..WARPS {
            // SAFETY: slot < PARTIALS; written by warp w before the barrier.
            v += unsafe { all.add((w * PARTIALS + slot) as usize).read() };
        }
        let (j, reg, from_lane) = (slot / 128, slot / 32 % 4, slot % 32);
        let (row, col) = Acc16x8::coords(from_lane, reg);
        let (n, m) = (n0 + row, 8 * j + col);
        if n < p.n && m < p.m {
            let at = z as u64 * p.stride_d + m as u64 * p.ldd + n as u64;
            // SAFETY: (z, m, n) is inside D; this thread alone writes it; C and bias as the
            // epilogue's contract (in place: the element is read as C, then written).
            unsafe { (p.d as *mut O).add(at as usize).write(O::from_f32(finish::<O>(p, v, z, m, n))) };
        }
        slot += WARPS * 32;
    }
}

/// Declares a `gemm_decode_<input>_<output>_sm90` entry.
macro_rules! decode_entries {
    ($($name:ident: $input:ty => $output:ty;)*) => {$(
        /// See the module doc; parameters as the host's decode launcher builds them.
        ///
        /// # Safety
        /// The module doc's contract.
        #[kernel(threads = 256)]
        pub unsafe fn $name(p: GemmParams, s: SkinnyOperands) {
            // SAFETY: forwarded (the host's contract).
            unsafe { decode::<$input, $output>(&p, &s) }
        }
    )*};
}

decode_entries! {
    gemm_decode_bf16_bf16_sm90: Bf16 => Bf16;
    gemm_decode_bf16_f16_sm90: Bf16 => F16;
    gemm_decode_bf16_f32_sm90: Bf16 => f32;
    gemm_decode_f16_bf16_sm90: F16 => Bf16;
    gemm_decode_f16_f16_sm90: F16 => F16;
    gemm_decode_f16_f32_sm90: F16 => f32;
}
