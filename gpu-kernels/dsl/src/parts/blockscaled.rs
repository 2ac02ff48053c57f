//! L3 block-scaled FP8 stage: the [`PromotingStage`] hook of a GEMM whose operands carry one
//! scale per row (A) or per column block (B) and per 128-wide K block, promoted into an f32 sum
//! on the CUDA cores (DeepGEMM's scheme).
//!
//! Per ring slot (one K block), [`BlockScaledStage::issue`] first reads this thread's two row
//! scales for the block ([`BlockScales::load`]; [`SlotScales`]: from the slot itself, where TMA
//! put them with the operands, so no global load's latency sits between the wgmmas and the
//! promotion), then issues the slot's wgmmas into one of two scratch tiles (overwriting it;
//! consecutive slots alternate, [`Part`]); once they complete, [`BlockScaledStage::promote`]
//! adds `part · scale(row)` into the running `sum` with one `fma` per register — while the next
//! slot's wgmmas run on the tensor cores. Every accumulator register of a thread lies in one of
//! two rows (`logic::fragment::acc_thread_row` and 8 below), so two scales per thread and K
//! block suffice.
//!
//! Nothing reads the slot after its wgmmas (the scales are in registers by then), so the
//! consumer may release it as soon as a wait covers them.

use crate::logic::fragment::acc_row_offset;
use crate::math::fma;
use crate::parts::mainloop::{Part, PromotingStage, SsStage, StageMma};
use crate::tile::{SmemTile, SmemVectorRing, SwizzleMode};
use crate::warpgroup::acc::{Accumulator, WgmmaSs};
use crate::warpgroup::{self, KMajor, SmemOperand, WgmmaElement};

/// The combined scales (A's row scale × B's block scale) of one K block for a thread's two
/// accumulator rows.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowScales {
    /// Scale of the upper row (`acc_thread_row`).
    pub upper: f32,
    /// Scale of the row 8 below it.
    pub lower: f32,
}

/// A promoting main loop's registers: the running f32 `sum`, the tensor cores' two scratch
/// tiles (the K blocks in flight and being promoted) and each one's block scales.
#[derive(Clone, Copy)]
pub struct Promoted<A> {
    /// The promoted sum: after the main loop, the unit's result.
    pub sum: A,
    even: A,
    odd: A,
    even_scales: RowScales,
    odd_scales: RowScales,
}

impl<A> Promoted<A> {
    /// Scratch tile `part` and its scales.
    #[inline(always)]
    fn part(&mut self, part: Part) -> (&mut A, &mut RowScales) {
        match part {
            Part::Even => (&mut self.even, &mut self.even_scales),
            Part::Odd => (&mut self.odd, &mut self.odd_scales),
        }
    }
}

/// Where a consumer thread finds the scales of each K block of its unit.
pub trait BlockScales {
    /// The scales for this thread of the unit's K block `slice` (counted from the unit's first),
    /// which ring slot `stage` holds.
    ///
    /// # Safety
    /// `slice` is one of the unit's slices; slot `stage` has landed (its full barrier awaited)
    /// and holds that slice.
    unsafe fn load(&self, stage: u32, slice: u32) -> RowScales;
}

/// The stage of a block-scaled GEMM: the plain SS operands of the slot and the unit's scales.
#[derive(Clone, Copy)]
pub struct BlockScaledStage<T, S: SwizzleMode, C, const AR: usize, const BN: usize, const K: usize, const RING: usize> {
    /// The slot's operands (this warpgroup's A rows, B).
    pub operands: SsStage<T, S, AR, BN, K, RING>,
    /// The unit's scales.
    pub scales: C,
}

impl<T, S, C, A, const AR: usize, const BN: usize, const K: usize, const RING: usize> PromotingStage<Promoted<A>>
    for BlockScaledStage<T, S, C, AR, BN, K, RING>
where
    T: WgmmaElement,
    S: SwizzleMode,
    C: BlockScales,
    SmemTile<T, AR, K, S>: SmemOperand<Major = KMajor, Elem = T>,
    SmemTile<T, BN, K, S>: SmemOperand<Major = KMajor, Elem = T>,
    A: Accumulator<Elem = f32> + WgmmaSs<T::Kind, T::Kind>,
{
    #[inline(always)]
    fn start(&self) -> Promoted<A> {
        let none = RowScales { upper: 0.0, lower: 0.0 };
        let mut start = Promoted { sum: A::ZERO, even: A::ZERO, odd: A::ZERO, even_scales: none, odd_scales: none };
        // The odd tile's zeros would otherwise be copied in after the even tile's first wgmma,
        // from its registers (C7514).
        warpgroup::pin(&mut start.even);
        warpgroup::pin(&mut start.odd);
        start
    }

    #[inline(always)]
    unsafe fn issue(&self, acc: &mut Promoted<A>, part: Part, stage: u32, slice: u32) {
        let (tile, scales) = acc.part(part);
        // SAFETY: the slice is the unit's (the consumer walks exactly its slices) and slot
        // `stage` holds it, landed (the trait's contract).
        *scales = unsafe { self.scales.load(stage, slice) };
        // Slice 0 for the operands: the block's product overwrites the tile.
        // SAFETY: forwarded to the caller (the trait's contract).
        unsafe { self.operands.issue(tile, stage, 0) };
    }

    #[inline(always)]
    unsafe fn promote(&self, acc: &mut Promoted<A>, part: Part) {
        let (tile, scales) = acc.part(part);
        let (tile, scales) = (*tile, *scales);
        acc.sum.for_each_mut(|i, sum| {
            let scale = if acc_row_offset(i as u32) == 0 { scales.upper } else { scales.lower };
            *sum = fma(tile.get(i), scale, *sum);
        });
    }
}

/// The scales of one K block that ride its ring slot with the operands (DeepGEMM's layout of a
/// stage): the tile's `AR` rows of A's per-token scales (a TMA box of A's scale map, rows past
/// M zero-filled) and B's block scale, for one thread: its rows within the tile. B's scales are
/// one flattened f32 buffer, and a TMA box must start on a 16-byte chunk, so the slot holds the
/// box from the chunk that contains the block's scale: the scale of the unit's slice `s` sits
/// at `(b_first + s) % 4` in it.
#[derive(Clone, Copy)]
pub struct SlotScales<const AR: usize, const BV: usize, const RING: usize> {
    a: SmemVectorRing<f32, AR, RING>,
    b: SmemVectorRing<f32, BV, RING>,
    upper: u32,
    b_first: u32,
}

impl<const AR: usize, const BV: usize, const RING: usize> SlotScales<AR, BV, RING> {
    /// The scales in `a` and `b` for the thread whose upper accumulator row is tile row `upper`
    /// (its lower row is `upper + 8`), B's scale of the unit's first K block (its slice 0) at
    /// flat index `b_first`.
    ///
    /// # Panics
    /// At compile time when `AR` ≤ 8 or `BV` < 4 (a box shorter than a 16-byte chunk);
    /// `upper + 8 < AR` is the caller's to keep.
    #[inline(always)]
    pub fn new(a: SmemVectorRing<f32, AR, RING>, b: SmemVectorRing<f32, BV, RING>, upper: u32, b_first: u32) -> Self {
        const { assert!(AR > 8 && BV >= 4, "a slot holds the tile's row scales and a 16-byte chunk of B's") };
        SlotScales { a, b, upper, b_first }
    }
}

impl<const AR: usize, const BV: usize, const RING: usize> BlockScales for SlotScales<AR, BV, RING> {
    #[inline(always)]
    unsafe fn load(&self, stage: u32, slice: u32) -> RowScales {
        let (a, b) = (self.a.stage(stage), self.b.stage(stage));
        // SAFETY: the slot's loads completed (the caller waited for its full barrier) and it is
        // not released before the wgmmas issued after this read; `upper + 8 < AR` (constructor)
        // and the chunk offset is below 4 ≤ BV.
        unsafe {
            let b = b.read((self.b_first + slice) % 4);
            RowScales { upper: a.read(self.upper) * b, lower: a.read(self.upper + 8) * b }
        }
    }
}
