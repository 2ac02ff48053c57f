//! Warp-scope collectives over the full warp: shuffles, reductions, vote, match, elect.
//!
//! Each function must be called by all 32 lanes of the warp together (full-mask collectives);
//! that is a convergence requirement no type can express, hence `unsafe`.

use crate::ptx::warp as raw;
use crate::ptx::warpgroup as matrix;

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

/// Sum of `value` over the warp, returned on every lane (butterfly reduction).
///
/// # Safety
/// All 32 lanes call this together.
#[inline(always)]
pub unsafe fn sum_f32(value: f32) -> f32 {
    let mut v = value;
    let mut mask = 16;
    while mask > 0 {
        // SAFETY: forwarded.
        v += f32::from_bits(unsafe { shuffle_xor(v.to_bits(), mask) });
        mask >>= 1;
    }
    v
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
