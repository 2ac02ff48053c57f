//! Warp-scope collectives over the full warp: shuffles, reductions and scans (generic over a
//! [`ReduceOp`] and a [`Word32`] value: `f32`, `i32`, `u32`), vote, match, elect.
//!
//! Each function must be called by all 32 lanes of the warp together (full-mask collectives);
//! that is a convergence requirement no type can express, hence `unsafe`.

use crate::ptx::warp as raw;
use crate::ptx::warpgroup as matrix;
pub use crate::reduce::{Max, Min, ReduceOp, Sum, Word32};
use crate::thread::lane_id;

const FULL: u32 = 0xffff_ffff;

/// Value of `value` on lane `src_lane`.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn shuffle(value: u32, src_lane: u32) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::shfl_sync_idx(FULL, value, src_lane, 0x1f) }
}

/// Value of `value` on lane `lane + delta` (own value past the end).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn shuffle_down(value: u32, delta: u32) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::shfl_sync_down(FULL, value, delta, 0x1f) }
}

/// Value of `value` on lane `lane ^ mask`.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn shuffle_xor(value: u32, mask: u32) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::shfl_sync_bfly(FULL, value, mask, 0x1f) }
}

/// Value of `value` on lane `lane - delta` (own value below lane `delta`).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn shuffle_up(value: u32, delta: u32) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::shfl_sync_up(FULL, value, delta, 0) }
}

/// `Op` over `value` of all 32 lanes, returned on every lane: a butterfly of five
/// `shfl.sync.bfly` steps (masks 16, 8, 4, 2, 1). Every lane combines the same pairs, and the ops
/// are commutative, so the result is bitwise the same on every lane.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn reduce<Op: ReduceOp<T>, T: Word32>(value: T) -> T {
    let mut v = value;
    let mut mask = 16;
    while mask > 0 {
        // SAFETY: forwarded.
        v = Op::combine(v, T::from_word(unsafe { shuffle_xor(v.to_word(), mask) }));
        mask >>= 1;
    }
    v
}

/// Sum over the warp, on every lane ([`reduce`] with [`Sum`]; integers wrap).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn sum<T: Word32>(value: T) -> T
where
    Sum: ReduceOp<T>,
{
    // SAFETY: forwarded.
    unsafe { reduce::<Sum, T>(value) }
}

/// Maximum over the warp, on every lane ([`reduce`] with [`Max`]).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn max<T: Word32>(value: T) -> T
where
    Max: ReduceOp<T>,
{
    // SAFETY: forwarded.
    unsafe { reduce::<Max, T>(value) }
}

/// Minimum over the warp, on every lane ([`reduce`] with [`Min`]).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn min<T: Word32>(value: T) -> T
where
    Min: ReduceOp<T>,
{
    // SAFETY: forwarded.
    unsafe { reduce::<Min, T>(value) }
}

/// Sum of `value` over the warp, returned on every lane: [`sum`] for `f32`.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn sum_f32(value: f32) -> f32 {
    // SAFETY: forwarded.
    unsafe { sum(value) }
}

/// Inclusive scan: lane `l` gets `Op` over `value` of lanes `0..=l` (Hillis–Steele, five
/// `shfl.sync.up` steps, each combined where the source lane exists).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn inclusive_scan<Op: ReduceOp<T>, T: Word32>(value: T) -> T {
    let lane = lane_id();
    let mut v = value;
    let mut delta = 1;
    while delta < 32 {
        // SAFETY: forwarded.
        let below = T::from_word(unsafe { shuffle_up(v.to_word(), delta) });
        if lane >= delta {
            v = Op::combine(below, v);
        }
        delta <<= 1;
    }
    v
}

/// Inclusive prefix sum over the lanes ([`inclusive_scan`] with [`Sum`]).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn inclusive_sum<T: Word32>(value: T) -> T
where
    Sum: ReduceOp<T>,
{
    // SAFETY: forwarded.
    unsafe { inclusive_scan::<Sum, T>(value) }
}

/// Bit i set iff lane i has `pred`.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn ballot(pred: bool) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::vote_sync_ballot(FULL, pred) }
}

/// True iff every lane has `pred`.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn all(pred: bool) -> bool {
    // SAFETY: forwarded.
    unsafe { raw::vote_sync_all(FULL, pred) }
}

/// True iff any lane has `pred`.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn any(pred: bool) -> bool {
    // SAFETY: forwarded.
    unsafe { raw::vote_sync_any(FULL, pred) }
}

/// Mask of the lanes holding the same `value` as the caller.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn match_any(value: u32) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::match_any_sync(FULL, value) }
}

/// `value`, which every lane holds alike, as ptxas sees a warp-uniform value: the result of a
/// warp reduction lives in a uniform register, and what convergent code derives from it (a
/// ring slot's shared addresses, wgmma descriptors, loop counts) stays on the uniform
/// datapath. A value read from memory or derived after a divergent branch is a vector
/// register to ptxas even when it is uniform, and every wgmma descriptor built from it costs
/// an `R2UR` per 32-bit half at each use.
///
/// # Safety
/// All 32 lanes call this together; `value` is the same on each (otherwise every lane gets
/// the smallest).
#[inline(always)]
pub unsafe fn uniform(value: u32) -> u32 {
    // SAFETY: forwarded.
    unsafe { raw::redux_sync_min_u32(FULL, value) }
}

/// Reconverges the warp (`bar.warp.sync` over all lanes, a convergent intrinsic). At the end
/// of a loop body whose lanes branch apart (per-thread bounds on stores, a leader's section),
/// it makes the loop's back-edge one block that the whole warp reaches together: LLVM otherwise
/// folds the latch into the branches, each back-edge is then taken by part of the warp, and
/// ptxas treats the whole loop as divergent (no uniform datapath for what the next iteration
/// derives from warp-uniform values: `R2UR` for every wgmma descriptor).
///
/// # Safety
/// All 32 lanes call it together.
#[inline(always)]
pub unsafe fn converge() {
    // SAFETY: forwarded.
    unsafe { crate::ptx::bar::bar_warp_sync(FULL) }
}

/// Proof that the holder is the one lane `elect_one` chose in its warp.
#[derive(Debug)]
pub struct Elected(());

/// Elects one lane of the warp: `Some(Elected)` on that lane, `None` on the others.
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn elect_one() -> Option<Elected> {
    // SAFETY: forwarded.
    if unsafe { raw::elect_sync(FULL) } { Some(Elected(())) } else { None }
}

/// Loads four 8 × 8 matrices of 16-bit elements from shared memory, each transposed, with one
/// instruction: lane `l` supplies the address of row `l % 8` of matrix `l / 8` (16 contiguous
/// bytes), and word `m` of the result is lane `l`'s pair of matrix `m` transposed — the stored
/// matrix's rows `2·(l % 4)` and `2·(l % 4) + 1` of column `l / 4`, the lower row in the low
/// half: an `mma.sync` B fragment of a row-major `[k][n]` tile (e.g. V's `[key][column]` for
/// `P·V`).
///
/// # Safety
/// All 32 lanes call this together; every lane's `row_addr` is a 16-byte-aligned shared-window
/// address of 16 initialised bytes not written meanwhile.
#[inline(always)]
pub unsafe fn load_matrices_x4_trans(row_addr: u32) -> [u32; 4] {
    // SAFETY: forwarded.
    let (a, b, c, d) = unsafe { matrix::ldmatrix_x4_trans(row_addr) };
    [a, b, c, d]
}

/// Stores four 8 × 8 matrices of 16-bit elements to shared memory with one instruction: lane
/// `l` supplies the address of row `l % 8` of matrix `l / 8` (16 contiguous bytes), and
/// `words[m]` holds lane `l`'s pair of matrix `m` (row `l / 4`, columns `2·(l % 4)` and
/// `2·(l % 4) + 1`, the lower column in the low half) — the wgmma accumulator order of one 8 × 8
/// slab, so four accumulator pairs of a 16 × 16 block go out together.
///
/// # Safety
/// All 32 lanes call this together; every lane's `row_addr` is a 16-byte-aligned shared-window
/// address of 16 bytes that nothing else accesses meanwhile.
#[inline(always)]
pub unsafe fn store_matrices_x4(row_addr: u32, words: [u32; 4]) {
    // SAFETY: forwarded.
    unsafe { matrix::stmatrix_x4(row_addr, words[0], words[1], words[2], words[3]) }
}
