//! L3 stream-K fix-up: how the CTAs that share one output tile combine their partial
//! accumulators (a third way out of the consumer's registers, beside the stores of
//! [`super::epilogue`]). Which CTA computes which K range of which tile, and in which role, is
//! `logic::schedule::stream_k`; this module is only the hand-over.
//!
//! A `Partial` unit's consumer warpgroup stores its accumulator registers as they are into its
//! CTA's slot of the workspace, four at a time: registers `4j..4j+4` of thread `t` are the 16
//! bytes at float `(j·128 + t)·4` (a warp's store is 512 contiguous bytes, and no coordinates
//! are needed, because the finalising warpgroup holds the same fragment of the tile), then
//! raises its flag. The `Finalize` unit's warpgroup waits for every contributor's flag and
//! clears it (so every flag is zero again when the kernel ends), then adds the slots into its
//! registers in contributor order, which makes the sum deterministic. A CTA publishes at most
//! once, in its first stream-K unit, before any wait of its own, so every wait ends once the
//! grid is resident.
//!
//! A block whose lower rows lie past the output (a decode GEMM's few rows in a 64-row block)
//! hands over only the rows that hold results ([`PartialSlots::publish_rows`],
//! [`PartialSlots::accumulate_rows`]): a thread whose upper row (`logic::fragment::acc_thread_row`)
//! is past them neither stores nor loads (its lower row, 8 further, is past them too), so a
//! one-row block moves 1/16 of the bytes and the finaliser's serial sum shrinks with it.

use crate::atomic::AtomicCell;
use crate::global::{F32x4, load_f32x4_l2, store_f32x4};
use crate::logic::fragment::acc_thread_row;
use crate::sync::{NamedBarrier, fence_acq_rel_gpu};
use crate::warpgroup::{self, acc::Accumulator};

/// Threads of a consumer warpgroup; one slot half holds `REGS × 128` f32.
const WARPGROUP_THREADS: usize = 128;

/// The calling consumer warpgroup's side of a hand-over: the half of every slot and the flag
/// it owns (`half`), its named barrier (counting exactly its threads) and whether this thread
/// is its leader (the one that raises and consumes flags).
#[derive(Clone, Copy)]
pub struct HandOverSide<'a> {
    /// Consumer warpgroup index within the CTA.
    pub half: u32,
    /// The warpgroup's own named barrier.
    pub barrier: &'a NamedBarrier<128>,
    /// This thread raises and consumes the warpgroup's flags.
    pub leader: bool,
}

/// The workspace and flags of a stream-K launch whose CTAs have `CONSUMERS` consumer
/// warpgroups and a slot of `SLOT_FLOATS` f32 each (one partial accumulator tile).
#[derive(Clone, Copy)]
pub struct PartialSlots<const CONSUMERS: u32, const SLOT_FLOATS: u32> {
    workspace: *mut f32,
    flags: *mut u32,
}

impl<const CONSUMERS: u32, const SLOT_FLOATS: u32> PartialSlots<CONSUMERS, SLOT_FLOATS> {
    /// f32 per consumer warpgroup in a CTA's slot.
    const HALF_SLOT_FLOATS: usize = (SLOT_FLOATS / CONSUMERS) as usize;

    /// The slots at `workspace` and `flags` (device addresses).
    ///
    /// # Safety
    /// `workspace` holds `SLOT_FLOATS` f32 (16-byte aligned) and `flags` `CONSUMERS` u32, zero at
    /// launch, for every CTA of the grid, whenever the schedule has stream-K units (without them
    /// nothing is touched); nothing else touches them during the launch.
    #[inline(always)]
    pub unsafe fn new(workspace: u64, flags: u64) -> Self {
        PartialSlots { workspace: workspace as *mut f32, flags: flags as *mut u32 }
    }

    /// The part of `cta`'s slot that consumer warpgroup `half` uses.
    #[inline(always)]
    fn slot(&self, cta: u32, half: u32) -> *mut f32 {
        let at = cta as usize * SLOT_FLOATS as usize + half as usize * Self::HALF_SLOT_FLOATS;
        self.workspace.wrapping_add(at)
    }

    /// Where thread `t`'s registers `4j..4j+4` live in a half slot starting at `slot`.
    #[inline(always)]
    fn quad(slot: *mut f32, j: usize, t: usize) -> *mut f32 {
        slot.wrapping_add((j * WARPGROUP_THREADS + t) * 4)
    }

    /// The flag of (`cta`, `half`).
    #[inline(always)]
    fn flag(&self, cta: u32, half: u32) -> AtomicCell {
        // SAFETY: inside the flags of the grid (constructor contract); only atomics touch them.
        unsafe { AtomicCell::new(self.flags.wrapping_add((cta * CONSUMERS + half) as usize)) }
    }

    /// Stores this warpgroup's partial accumulator in `cta`'s slot and raises the flag.
    ///
    /// # Safety
    /// The whole consumer warpgroup `side.half` of CTA `cta` calls it together, once per launch
    /// (its `Partial` unit), after a wgmma wait covering `acc`.
    #[inline(always)]
    pub unsafe fn publish<A: Accumulator<Elem = f32>>(&self, acc: &A, cta: u32, side: HandOverSide<'_>) {
        // SAFETY: forwarded (function contract); every row is handed over.
        unsafe { self.publish_inner::<A, false>(acc, 0, cta, side) }
    }

    /// [`Self::publish`] of the block's first `rows` rows only (the rest lie past the output and
    /// are never read); the finaliser reads them with [`Self::accumulate_rows`] and the same
    /// `rows`.
    ///
    /// # Safety
    /// As for [`Self::publish`].
    #[inline(always)]
    pub unsafe fn publish_rows<A: Accumulator<Elem = f32>>(
        &self,
        acc: &A,
        rows: u32,
        cta: u32,
        side: HandOverSide<'_>,
    ) {
        // SAFETY: forwarded (function contract).
        unsafe { self.publish_inner::<A, true>(acc, rows, cta, side) }
    }

    /// The hand-over's store side; with `LIMIT`, only threads whose upper row is below `rows`
    /// store.
    ///
    /// # Safety
    /// As for [`Self::publish`].
    #[inline(always)]
    unsafe fn publish_inner<A: Accumulator<Elem = f32>, const LIMIT: bool>(
        &self,
        acc: &A,
        rows: u32,
        cta: u32,
        side: HandOverSide<'_>,
    ) {
        const { assert!(A::REGS * WARPGROUP_THREADS <= Self::HALF_SLOT_FLOATS, "one accumulator fits half a slot") };
        const { assert!(A::REGS % 4 == 0, "registers move four at a time") };
        let HandOverSide { half, barrier, leader } = side;
        let (slot, t) = (self.slot(cta, half), warpgroup::thread_index_in_place() as usize);
        if !LIMIT || acc_thread_row(t as u32) < rows {
            let mut quad = F32x4::default();
            acc.for_each(|i, v| {
                match i % 4 {
                    0 => quad.0 = v,
                    1 => quad.1 = v,
                    2 => quad.2 = v,
                    _ => {
                        quad.3 = v;
                        // SAFETY: (i/4·128 + t)·4 + 3 < half slot, 16-byte aligned (the slots
                        // are), inside this warpgroup's half slot, which no one reads before the
                        // flag below is raised.
                        unsafe { store_f32x4(Self::quad(slot, i / 4, t), quad) };
                    }
                }
            });
        }
        // SAFETY: every thread of the warpgroup arrives (function contract): all stores above
        // happen before the leader's release.
        unsafe { barrier.sync() };
        if leader {
            fence_acq_rel_gpu();
            self.flag(cta, half).fetch_add(1);
        }
    }

    /// Adds the partial accumulators of CTAs `first..=last` (warpgroup `side.half` of each) into
    /// `acc`, in that order, once all of them are published.
    ///
    /// # Safety
    /// The whole consumer warpgroup `side.half` calls it together, after a wgmma wait covering
    /// `acc` and before anything reads it; each of those CTAs publishes exactly once in this
    /// launch (with [`Self::publish`]).
    #[inline(always)]
    pub unsafe fn accumulate<A: Accumulator<Elem = f32>>(
        &self,
        acc: &mut A,
        first: u32,
        last: u32,
        side: HandOverSide<'_>,
    ) {
        // SAFETY: forwarded (function contract); every row was handed over.
        unsafe { self.accumulate_inner::<A, false>(acc, 0, first, last, side) }
    }

    /// [`Self::accumulate`] of the block's first `rows` rows, as [`Self::publish_rows`] stored
    /// them: a thread whose rows lie past them adds nothing (its registers are not results).
    ///
    /// # Safety
    /// As for [`Self::accumulate`], each contributor having published with `publish_rows` and
    /// the same `rows`.
    #[inline(always)]
    pub unsafe fn accumulate_rows<A: Accumulator<Elem = f32>>(
        &self,
        acc: &mut A,
        rows: u32,
        first: u32,
        last: u32,
        side: HandOverSide<'_>,
    ) {
        // SAFETY: forwarded (function contract).
        unsafe { self.accumulate_inner::<A, true>(acc, rows, first, last, side) }
    }

    /// The hand-over's load side; with `LIMIT`, only threads whose upper row is below `rows`
    /// load.
    ///
    /// # Safety
    /// As for [`Self::accumulate_rows`].
    #[inline(always)]
    unsafe fn accumulate_inner<A: Accumulator<Elem = f32>, const LIMIT: bool>(
        &self,
        acc: &mut A,
        rows: u32,
        first: u32,
        last: u32,
        side: HandOverSide<'_>,
    ) {
        let HandOverSide { half, barrier, leader } = side;
        let t = warpgroup::thread_index_in_place() as usize;
        // Every flag first, one barrier, then one straight run of loads and adds: the loads of
        // all partials can be in flight together instead of one partial per round trip.
        if leader {
            for cta in first..=last {
                // Consume the flag (1 → 0): it is zero again for the next launch.
                let flag = self.flag(cta, half);
                while flag.compare_exchange(1, 0) != 1 {}
            }
            fence_acq_rel_gpu();
        }
        // SAFETY: every thread of the warpgroup arrives; the leader's acquire above orders
        // every publisher's stores before every thread's loads below.
        unsafe { barrier.sync() };
        if LIMIT && acc_thread_row(t as u32) >= rows {
            return;
        }
        for cta in first..=last {
            let slot = self.slot(cta, half);
            let mut quad = F32x4::default();
            acc.for_each_mut(|i, v| {
                if i % 4 == 0 {
                    // SAFETY: inside that CTA's published half slot (16-byte aligned), written
                    // once and not again in this launch; with `LIMIT` this thread's rows are
                    // among those published.
                    quad = unsafe { load_f32x4_l2(Self::quad(slot, i / 4, t)) };
                }
                *v += match i % 4 {
                    0 => quad.0,
                    1 => quad.1,
                    2 => quad.2,
                    _ => quad.3,
                };
            });
        }
    }
}
