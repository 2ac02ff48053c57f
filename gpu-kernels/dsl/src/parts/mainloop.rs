//! L3 mainloop collective of a warp-specialised Hopper GEMM: the producer's TMA ring and the
//! consumer warpgroup's wgmma loop with its release protocol.
//!
//! - **Producer** ([`produce`]): one elected thread walks a unit's K slices; for each it
//!   acquires the next ring slot, announcing the bytes of the stage type `S` (a tuple of tile
//!   types: what one slot holds), and lets the kernel's `load` closure issue the slot's TMA
//!   loads (which tiles, which coordinates, multicast or not). A kernel cannot announce bytes
//!   that disagree with its tile types.
//! - **Consumer** ([`Consumer`]): a warpgroup multiplies a unit's slices into a fresh
//!   accumulator with one wgmma group in flight: it waits for slot `s`, issues its wgmmas
//!   through the kernel's [`StageMma`] (the hook per K block, e.g. a plain `mma`), waits until
//!   at most that group is pending, and only then releases slot
//!   `s − 1`, whose readers have completed. A promoting stage ([`PromotingStage`], e.g.
//!   [`super::blockscaled`]) multiplies each slot into one of two scratch tiles, alternating
//!   ([`Part`]): it issues slot `s`'s wgmmas, waits until only they are pending, folds slot
//!   `s − 1`'s completed product into the running sum and releases that slot
//!   ([`Consumer::promoting_mainloop`]), so the tensor cores always hold this warpgroup's next
//!   block while its CUDA cores promote the last one. The loops are do-whiles (at least one
//!   slice): a zero-trip path would hand the accumulator to the final wait from ordinary moves
//!   and ptxas would serialise every wgmma (C7515). [`Consumer::drain`] retires the last group
//!   and its slot, so a kernel can act between the last issue and that wait (a ping-pong turn
//!   hand-over).
//! - **Release** ([`StageRelease`]): to this CTA's producer ([`OwnCta`]) or, when the slot is
//!   filled by multicast, to both CTAs of a pair ([`OwnAndPeer`]). The pipeline's consumer
//!   arrival count is the number of releasing warpgroups times [`StageRelease::CTAS`].

use core::ops::Range;

use crate::mbarrier::Mbarrier;
use crate::pipeline::{Pipeline, PipelineState, TmaLoad};
use crate::tile::{SmemTile, SmemTileRing, SwizzleMode};
use crate::warpgroup::acc::{Accumulator, WgmmaSs};
use crate::warpgroup::{self, KMajor, SmemOperand, WgmmaElement};

/// What a consumer's main loop accumulates into: a wgmma accumulator tile, or a tile plus the
/// registers a promoting hook keeps beside it ([`super::blockscaled::Promoted`]).
pub trait MainloopAcc: Copy {
    /// The value a unit's main loop starts from.
    const START: Self;
}

impl<A: Accumulator> MainloopAcc for A {
    const START: Self = A::ZERO;
}

/// When a consumer warpgroup may issue a slot's wgmmas: at once ([`Unordered`]), or in turn
/// with the other consumer warpgroup ([`super::turns::TakeTurns`]).
pub trait IssueOrder: Copy {
    /// Called by the whole warpgroup before the slot's wgmmas.
    ///
    /// # Safety
    /// The whole warpgroup, convergently, once per slot, paired with [`IssueOrder::after_issue`].
    unsafe fn before_issue(&self);
    /// Called by the whole warpgroup once the slot's wgmmas are committed.
    ///
    /// # Safety
    /// As for [`IssueOrder::before_issue`].
    unsafe fn after_issue(&self);
}

/// Each warpgroup issues as soon as its slot has landed.
#[derive(Clone, Copy)]
pub struct Unordered;

impl IssueOrder for Unordered {
    #[inline(always)]
    unsafe fn before_issue(&self) {}
    #[inline(always)]
    unsafe fn after_issue(&self) {}
}

/// Issues the wgmmas of one ring slot into an accumulator: the consumer's per-K-block hook.
pub trait StageMma<A> {
    /// Issues the wgmmas reading slot `stage` into `acc`; `slice` counts the unit's slices from
    /// 0 (a plain hook overwrites `acc` on slice 0 and accumulates after).
    ///
    /// # Safety
    /// The whole warpgroup calls it convergently after `warpgroup::fence` and before
    /// `warpgroup::commit`; slot `stage` holds landed data that stays unmodified until a wait
    /// covers these wgmmas.
    unsafe fn issue(&self, acc: &mut A, stage: u32, slice: u32);
}

/// One of a promoting stage's two scratch tiles: consecutive slots alternate between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The unit's slices 0, 2, 4, …
    Even,
    /// The unit's slices 1, 3, 5, …
    Odd,
}

impl Part {
    /// The other tile.
    #[inline(always)]
    pub fn other(self) -> Part {
        match self {
            Part::Even => Part::Odd,
            Part::Odd => Part::Even,
        }
    }
}

/// The per-K-block hook of a promoting main loop ([`Consumer::promoting_mainloop`]): the slot's
/// wgmmas go into scratch tile `part` of `acc`, and once they complete their product is folded
/// into the running sum on the CUDA cores.
pub trait PromotingStage<A> {
    /// The registers a unit's main loop starts from: the sum at zero, and both scratch tiles
    /// defined at this point, before the unit's first wgmma.
    fn start(&self) -> A;

    /// Issues the wgmmas reading slot `stage` (the unit's slice `slice`), overwriting scratch
    /// tile `part`, and keeps what [`PromotingStage::promote`] needs of the slot in registers.
    ///
    /// # Safety
    /// As for [`StageMma::issue`]; tile `part` was promoted (or never written) since its last
    /// issue.
    unsafe fn issue(&self, acc: &mut A, part: Part, stage: u32, slice: u32);

    /// Folds scratch tile `part`'s completed product into the sum. It must not read shared
    /// memory: its slot is released right after.
    ///
    /// # Safety
    /// The whole warpgroup calls it convergently after a `warpgroup::wait` covering the wgmmas
    /// that last wrote `part`.
    unsafe fn promote(&self, acc: &mut A, part: Part);
}

/// How a consumer hands a ring slot back to the producer(s) that fill it.
pub trait StageRelease: Copy {
    /// Producers (CTAs) each release arrives at.
    const CTAS: u32;
    /// Releases `slot`.
    ///
    /// # Safety
    /// Once per releasing warpgroup, slot and lap, after the wgmmas reading the slot completed;
    /// the pipeline counts these arrivals ([`StageRelease::CTAS`] per warpgroup).
    unsafe fn release<const RING: usize>(&self, pipe: &Pipeline<RING>, slot: PipelineState<RING>);
}

/// Releases to this CTA's producer only.
#[derive(Clone, Copy, Debug)]
pub struct OwnCta;

impl StageRelease for OwnCta {
    const CTAS: u32 = 1;
    #[inline(always)]
    unsafe fn release<const RING: usize>(&self, pipe: &Pipeline<RING>, slot: PipelineState<RING>) {
        // SAFETY: forwarded to the caller.
        unsafe { pipe.consumer_release(slot) };
    }
}

/// Releases to this CTA's producer and to the cluster peer `peer`'s, whose multicasts write
/// this CTA's slot too (see `Pipeline::consumer_release_peer`).
#[derive(Clone, Copy, Debug)]
pub struct OwnAndPeer {
    /// Cluster rank of the peer CTA.
    pub peer: u32,
}

impl StageRelease for OwnAndPeer {
    const CTAS: u32 = 2;
    #[inline(always)]
    unsafe fn release<const RING: usize>(&self, pipe: &Pipeline<RING>, slot: PipelineState<RING>) {
        // SAFETY: forwarded to the caller; the peer runs the same ring and outlives the
        // arrival (its contract, which the caller upholds with a cluster barrier before exit).
        unsafe {
            pipe.consumer_release(slot);
            pipe.consumer_release_peer(slot, self.peer);
        }
    }
}

/// Producer: fills one ring slot per K slice of `slices`, starting at `state` (advanced past
/// them). `load(stage, slice, full)` issues the slot's TMA loads, completing on `full`.
///
/// # Safety
/// Called by the one producer thread of the ring; `load` issues loads into slot `stage` that
/// deliver exactly `S::BYTES` and complete on `full`; consumers release every slot (the ring's
/// arrival count).
#[inline(always)]
pub unsafe fn produce<S: TmaLoad, const RING: usize>(
    pipe: &Pipeline<RING>,
    state: &mut PipelineState<RING>,
    slices: Range<u32>,
    mut load: impl FnMut(u32, u32, &Mbarrier),
) {
    for slice in slices {
        // SAFETY: one producer thread; `load` delivers `S::BYTES` on this barrier (contract).
        let full = unsafe { pipe.producer_acquire::<S>(*state) };
        load(state.stage, slice, &full);
        state.advance();
    }
}

/// Producer of two rings walked in step (slot `i` of each holds slice `i`: a key block's K in
/// one and its V in the other, so a consumer can hand K back as soon as it has read it, while
/// V is still needed): per slice, acquires `a`'s slot and issues `load_a`, then `b`'s and
/// `load_b`. `state` is both rings' position (advanced past the slices).
///
/// # Safety
/// As for [`produce`], for each ring: the one producer thread of both; `load_a` delivers
/// exactly `A::BYTES` into slot `stage` of `a` completing on its full barrier, `load_b`
/// `B::BYTES` into `b`'s; consumers release every slot of both.
#[inline(always)]
pub unsafe fn produce_pair<A: TmaLoad, B: TmaLoad, const RING: usize>(
    (a, b): (&Pipeline<RING>, &Pipeline<RING>),
    state: &mut PipelineState<RING>,
    slices: Range<u32>,
    mut load_a: impl FnMut(u32, u32, &Mbarrier),
    mut load_b: impl FnMut(u32, u32, &Mbarrier),
) {
    for slice in slices {
        // SAFETY: one producer thread; each load delivers its ring's bytes on the barrier it is
        // given (contract).
        let full = unsafe { a.producer_acquire::<A>(*state) };
        load_a(state.stage, slice, &full);
        // SAFETY: as for `a`.
        let full = unsafe { b.producer_acquire::<B>(*state) };
        load_b(state.stage, slice, &full);
        state.advance();
    }
}

/// Where a promoting main loop stands within its unit.
struct PromotingWalk<const RING: usize> {
    /// The slot of the group issued last.
    previous: PipelineState<RING>,
    /// Slices issued so far.
    slice: u32,
    /// The unit's slices.
    slices: u32,
}

/// One consumer warpgroup's side of the ring: its position, release policy and leader.
#[derive(Clone, Copy)]
pub struct Consumer<R, const RING: usize, O = Unordered> {
    pipe: Pipeline<RING>,
    release: R,
    order: O,
    leader: bool,
    state: PipelineState<RING>,
    /// The slot of the group still in flight after [`Consumer::mainloop`].
    pending: PipelineState<RING>,
}

impl<R: StageRelease, const RING: usize> Consumer<R, RING> {
    /// A consumer at the ring's start; `leader` is one thread of the warpgroup (it releases).
    #[inline(always)]
    pub fn new(pipe: Pipeline<RING>, release: R, leader: bool) -> Self {
        Consumer::ordered(pipe, release, leader, Unordered)
    }
}

impl<R: StageRelease, const RING: usize, O: IssueOrder> Consumer<R, RING, O> {
    /// A consumer at the ring's start whose issues follow `order`.
    #[inline(always)]
    pub fn ordered(pipe: Pipeline<RING>, release: R, leader: bool, order: O) -> Self {
        let start = PipelineState::START;
        Consumer { pipe, release, order, leader, state: start, pending: start }
    }

    /// Skips `slices` slots that another warpgroup consumes (ping-pong).
    #[inline(always)]
    pub fn skip(&mut self, slices: u32) {
        self.state.advance_by(slices);
    }

    /// Multiplies the next `slices` (≥ 1; 0 counts as 1) slots into a fresh accumulator and
    /// returns it with its last wgmma group still in flight: call [`Consumer::drain`] before
    /// reading it.
    ///
    /// # Safety
    /// The whole warpgroup calls it convergently; the producer fills these slots in order;
    /// `mma` as [`StageMma::issue`] requires.
    #[inline(always)]
    pub unsafe fn mainloop<A: MainloopAcc, M: StageMma<A>>(&mut self, slices: u32, mma: &M) -> A {
        let mut acc = A::START;
        let mut previous = self.state;
        let mut slice = 0;
        loop {
            self.pipe.consumer_wait(self.state);
            // SAFETY: the whole warpgroup, convergent (contract); the slot's data has landed
            // (waited above) and stays until this warpgroup releases it, after a covering wait.
            unsafe {
                self.order.before_issue();
                warpgroup::fence();
                mma.issue(&mut acc, self.state.stage, slice);
                warpgroup::commit();
                self.order.after_issue();
            }
            // SAFETY: whole warpgroup.
            unsafe { warpgroup::wait::<1>() };
            if slice > 0 && self.leader {
                // SAFETY: the wgmmas reading `previous` completed (at most the newest group is
                // pending); one release per warpgroup, slot and lap.
                unsafe { self.release.release(&self.pipe, previous) };
            }
            previous = self.state;
            self.state.advance();
            slice += 1;
            if slice >= slices {
                break;
            }
        }
        self.pending = previous;
        acc
    }

    /// Multiplies the next `slices` (≥ 1; 0 counts as 1) slots through a promoting stage and
    /// returns the complete sum (see the module docs: slot `s`'s wgmmas are issued before slot
    /// `s − 1`'s product is promoted); the last slot stays held until [`Consumer::drain`].
    ///
    /// # Safety
    /// As for [`Consumer::mainloop`].
    #[inline(always)]
    pub unsafe fn promoting_mainloop<A, M: PromotingStage<A>>(&mut self, slices: u32, mma: &M) -> A {
        let mut acc = mma.start();
        let mut walk = PromotingWalk { previous: self.state, slice: 0, slices };
        // The first slot goes into the even tile; then the loop, unrolled by two so that each
        // tile is a fixed set of registers, enters every iteration with exactly the even
        // tile's group pending, and every exit with one group pending (ptxas serialises the
        // wgmmas when a loop head or a join is reached with different groups in flight: C7514,
        // C7518).
        // SAFETY: forwarded to the caller (contract); the even tile was never written.
        unsafe { self.promoting_issue(&mut acc, mma, Part::Even, &mut walk) };
        if walk.slice >= slices {
            // SAFETY: whole warpgroup; the wait covers the even tile's wgmmas.
            unsafe { Self::promote_last(&mut acc, mma, Part::Even) };
        } else {
            loop {
                // SAFETY: as above; each step's tile was promoted by the step before it, and a
                // slice remains (checked before the step).
                unsafe { self.promoting_step(&mut acc, mma, Part::Odd, &mut walk) };
                if walk.slice >= slices {
                    // SAFETY: whole warpgroup; only the odd tile's group is pending.
                    unsafe { Self::promote_last(&mut acc, mma, Part::Odd) };
                    break;
                }
                // SAFETY: as above.
                unsafe { self.promoting_step(&mut acc, mma, Part::Even, &mut walk) };
                if walk.slice >= slices {
                    // SAFETY: as above, for the even tile.
                    unsafe { Self::promote_last(&mut acc, mma, Part::Even) };
                    break;
                }
            }
        }
        self.pending = walk.previous;
        acc
    }

    /// Waits for the next slot and issues its wgmmas into scratch tile `part`.
    ///
    /// # Safety
    /// As for [`Consumer::mainloop`]; `part` was promoted since its last issue (or never written).
    #[inline(always)]
    unsafe fn promoting_issue<A, M: PromotingStage<A>>(
        &mut self,
        acc: &mut A,
        mma: &M,
        part: Part,
        walk: &mut PromotingWalk<RING>,
    ) {
        self.pipe.consumer_wait(self.state);
        // SAFETY: the whole warpgroup, convergent (contract); the slot's data has landed (waited
        // above) and stays until this warpgroup releases it, after a covering wait.
        unsafe {
            self.order.before_issue();
            warpgroup::fence();
            mma.issue(acc, part, self.state.stage, walk.slice);
            warpgroup::commit();
            self.order.after_issue();
        }
        walk.previous = self.state;
        self.state.advance();
        walk.slice += 1;
    }

    /// With the other tile's group pending: issues the next slot into `part`, waits for the
    /// other tile's group, promotes it and releases its slot.
    ///
    /// # Safety
    /// As for [`Consumer::mainloop`]; only `part.other()`'s group is pending, `part` was
    /// promoted; a slice remains.
    #[inline(always)]
    unsafe fn promoting_step<A, M: PromotingStage<A>>(
        &mut self,
        acc: &mut A,
        mma: &M,
        part: Part,
        walk: &mut PromotingWalk<RING>,
    ) {
        let issued = walk.previous;
        // SAFETY: forwarded (contract).
        unsafe { self.promoting_issue(acc, mma, part, walk) };
        // SAFETY: whole warpgroup; after the wait only the group just issued is pending, so the
        // other tile's (the previous slot's) completed.
        unsafe {
            warpgroup::wait::<1>();
            mma.promote(acc, part.other());
        }
        if self.leader {
            // SAFETY: the previous slot's wgmmas, its only readers, completed; one release per
            // warpgroup, slot and lap.
            unsafe { self.release.release(&self.pipe, issued) };
        }
    }

    /// Waits for every group and promotes `part` (the unit's last slot's tile).
    ///
    /// # Safety
    /// The whole warpgroup, convergently; `part`'s group is the newest.
    #[inline(always)]
    unsafe fn promote_last<A, M: PromotingStage<A>>(acc: &mut A, mma: &M, part: Part) {
        // SAFETY: whole warpgroup (contract); the wait covers `part`'s wgmmas.
        unsafe {
            warpgroup::wait::<0>();
            mma.promote(acc, part);
        }
    }

    /// Waits for the last wgmma group of [`Consumer::mainloop`] (its accumulator is then
    /// readable) and releases its slot.
    ///
    /// # Safety
    /// The whole warpgroup calls it convergently, once after each `mainloop`.
    #[inline(always)]
    pub unsafe fn drain(&mut self) {
        // SAFETY: whole warpgroup (contract).
        unsafe { warpgroup::wait::<0>() };
        if self.leader {
            // SAFETY: every wgmma reading the slot completed; its one release per lap.
            unsafe { self.release.release(&self.pipe, self.pending) };
        }
    }
}

/// The plain SS stage: `acc (+)= A_slot · B_slotᵀ`, both operands K-major tiles of the slot
/// (this warpgroup's 64 rows of A, and B's `N` rows).
#[derive(Clone, Copy)]
pub struct SsStage<T, S: SwizzleMode, const AR: usize, const BN: usize, const K: usize, const RING: usize> {
    /// This warpgroup's A rows, one tile per slot.
    pub a: SmemTileRing<T, AR, K, S, RING>,
    /// B, one tile per slot.
    pub b: SmemTileRing<T, BN, K, S, RING>,
}

impl<T, S, A, const AR: usize, const BN: usize, const K: usize, const RING: usize> StageMma<A>
    for SsStage<T, S, AR, BN, K, RING>
where
    T: WgmmaElement,
    S: SwizzleMode,
    SmemTile<T, AR, K, S>: SmemOperand<Major = KMajor, Elem = T>,
    SmemTile<T, BN, K, S>: SmemOperand<Major = KMajor, Elem = T>,
    A: WgmmaSs<T::Kind, T::Kind>,
{
    #[inline(always)]
    unsafe fn issue(&self, acc: &mut A, stage: u32, slice: u32) {
        // SAFETY: forwarded to the caller (the trait's contract is `warpgroup::mma`'s).
        unsafe { warpgroup::mma(acc, &self.a.stage(stage), &self.b.stage(stage), slice > 0) };
    }
}
