//! L3 block-scaled FP8 stage: the [`StageMma`] hook of a GEMM whose operands carry one scale
//! per row (A) or per column block (B) and per 128-wide K block, promoted into an f32 sum on the
//! CUDA cores (DeepGEMM's scheme).
//!
//! Per ring slot (one K block), [`BlockScaledStage::issue`] first loads this thread's two row
//! scales for the block ([`BlockScales::load`]: global loads, issued before the wgmmas so their
//! latency hides under them), then issues the slot's wgmmas into a scratch tile `part`
//! (overwriting it); the consumer waits for them and [`BlockScaledStage::promote`] adds
//! `part · scale(row)` into the running `sum` with one `fma` per register. Every accumulator
//! register of a thread lies in one of two rows (`logic::fragment::acc_thread_row` and 8 below),
//! so two scales per thread and K block suffice.
//!
//! The slot itself holds only the wgmma operands: nothing reads it after the wgmma wait, so the
//! consumer may release it as soon as that wait returns.

use crate::logic::fragment::acc_row_offset;
use crate::math::fma;
use crate::parts::mainloop::{MainloopAcc, SsStage, StageMma};
use crate::tile::{SmemTile, SwizzleMode};
use crate::warpgroup::acc::{Accumulator, WgmmaSs};
use crate::warpgroup::{KMajor, SmemOperand, WgmmaElement};

/// The combined scales (A's row scale × B's block scale) of one K block for a thread's two
/// accumulator rows.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowScales {
    /// Scale of the upper row (`acc_thread_row`).
    pub upper: f32,
    /// Scale of the row 8 below it.
    pub lower: f32,
}

/// A promoting main loop's registers: the running f32 `sum`, the tensor cores' scratch `part`
/// for the K block in flight, and that block's scales.
#[derive(Clone, Copy)]
pub struct Promoted<A> {
    /// The promoted sum: after the main loop, the unit's result.
    pub sum: A,
    part: A,
    scales: RowScales,
}

impl<A: Accumulator> MainloopAcc for Promoted<A> {
    const START: Self = Promoted { sum: A::ZERO, part: A::ZERO, scales: RowScales { upper: 0.0, lower: 0.0 } };
}

/// Where a consumer thread finds the scales of each K block of its unit.
pub trait BlockScales {
    /// The scales of the unit's K block `slice` (counted from the unit's first) for this thread.
    ///
    /// # Safety
    /// `slice` is one of the unit's slices; the implementation's pointers cover it.
    unsafe fn load(&self, slice: u32) -> RowScales;
}

/// The stage of a block-scaled GEMM: the plain SS operands of the slot and the unit's scales.
#[derive(Clone, Copy)]
pub struct BlockScaledStage<T, S: SwizzleMode, C, const AR: usize, const BN: usize, const K: usize, const RING: usize> {
    /// The slot's operands (this warpgroup's A rows, B).
    pub operands: SsStage<T, S, AR, BN, K, RING>,
    /// The unit's scales.
    pub scales: C,
}

impl<T, S, C, A, const AR: usize, const BN: usize, const K: usize, const RING: usize> StageMma<Promoted<A>>
    for BlockScaledStage<T, S, C, AR, BN, K, RING>
where
    T: WgmmaElement,
    S: SwizzleMode,
    C: BlockScales,
    SmemTile<T, AR, K, S>: SmemOperand<Major = KMajor, Elem = T>,
    SmemTile<T, BN, K, S>: SmemOperand<Major = KMajor, Elem = T>,
    A: Accumulator<Elem = f32> + WgmmaSs<T::Kind, T::Kind>,
{
    const PROMOTES: bool = true;

    #[inline(always)]
    unsafe fn issue(&self, acc: &mut Promoted<A>, stage: u32, slice: u32) {
        // SAFETY: the slice is the unit's (the consumer walks exactly its slices).
        acc.scales = unsafe { self.scales.load(slice) };
        // Slice 0 for the operands: the block's product overwrites `part`.
        // SAFETY: forwarded to the caller (the trait's contract).
        unsafe { self.operands.issue(&mut acc.part, stage, 0) };
    }

    #[inline(always)]
    unsafe fn promote(&self, acc: &mut Promoted<A>) {
        let (part, scales) = (acc.part, acc.scales);
        acc.sum.for_each_mut(|i, sum| {
            let scale = if acc_row_offset(i as u32) == 0 { scales.upper } else { scales.lower };
            *sum = fma(part.get(i), scale, *sum);
        });
    }
}

/// The scales of the block-scaled FP8 GEMM as `logic::quant` lays them out (A: per-token 1 × 128
/// groups, MN-major with pitch `m_pad`; B: 128 × 128 blocks, row-major over the blocks), for one
/// thread of one unit: pointers to its two rows' scales and its tile's B scales at the unit's
/// first K block.
#[derive(Clone, Copy)]
pub struct GroupBlockScales {
    a_upper: *const f32,
    a_lower: *const f32,
    /// f32 between K blocks of A's scales (`m_pad`).
    a_pitch: u32,
    b: *const f32,
}

impl GroupBlockScales {
    /// The scales of rows `upper` and `upper + 8` (of `m`; rows past it read row `m − 1`'s) and
    /// the 128 columns from `n0` (a multiple of 128), from K block `kb0` on, in A's scales `a`
    /// (pitch `m_pad`) and B's scales `b` (`k_blocks` per block row).
    ///
    /// # Safety
    /// `m ≥ 1`; `a` and `b` hold the scales of an `m`-row A and a B of at least `n0 + 1` rows
    /// over `k_blocks` K blocks, laid out as `logic::blockscaled` says, and `kb0` plus every
    /// slice later loaded is below `k_blocks`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(a: u64, b: u64, m: u32, m_pad: u32, k_blocks: u32, upper: u32, n0: u32, kb0: u32) -> Self {
        use crate::logic::blockscaled::{a_scale_at, b_scale_at};
        let (a, b) = (a as *const f32, b as *const f32);
        GroupBlockScales {
            a_upper: a.wrapping_add(a_scale_at(upper, m, kb0, m_pad)),
            a_lower: a.wrapping_add(a_scale_at(upper + 8, m, kb0, m_pad)),
            a_pitch: m_pad,
            b: b.wrapping_add(b_scale_at(n0, kb0, k_blocks)),
        }
    }
}

impl BlockScales for GroupBlockScales {
    #[inline(always)]
    unsafe fn load(&self, slice: u32) -> RowScales {
        let a_step = slice as usize * self.a_pitch as usize;
        // SAFETY: inside the scales for every slice of the unit (the constructor's contract).
        unsafe {
            let b = *self.b.add(slice as usize);
            RowScales { upper: *self.a_upper.add(a_step) * b, lower: *self.a_lower.add(a_step) * b }
        }
    }
}
