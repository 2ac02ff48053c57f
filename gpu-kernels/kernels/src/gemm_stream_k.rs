//! Stream-K fix-up of the sm_90 GEMM: how the CTAs that share one output tile combine their
//! partial accumulators. Which CTA computes which K range of which tile, and in which role, is
//! `logic::schedule::stream_k`; this module is only the hand-over.
//!
//! A `Partial` unit's consumer warpgroup stores its accumulator registers as they are into its
//! CTA's slot of the workspace (register `i` of thread `t` at `i·128 + t`: coalesced, and no
//! coordinates needed, because the finalising warpgroup holds the same fragment of the tile),
//! then raises its flag. The `Finalize` unit's warpgroup takes the contributors in order: waits
//! for the flag, clears it (so every flag is zero again when the kernel ends), and adds the
//! slot into its registers; the order makes the sum deterministic. Contributors never wait and
//! each publishes at most once (its first unit), so every wait ends once the grid is resident.

use warpforge_dsl::abi::GemmParams;
use warpforge_dsl::abi::gemm_sm90::{FLAGS_PER_CTA, PARTIAL_SLOT_FLOATS};
use warpforge_dsl::atomic::AtomicCell;
use warpforge_dsl::sync::{NamedBarrier, fence_acq_rel_gpu};
use warpforge_dsl::warpgroup::{self, acc::Accumulator};

/// Threads of a consumer warpgroup; one slot half holds `REGS × 128` f32.
const WARPGROUP_THREADS: usize = 128;
/// f32 per consumer warpgroup in a CTA's slot.
const HALF_SLOT_FLOATS: usize = PARTIAL_SLOT_FLOATS as usize / FLAGS_PER_CTA as usize;

/// The workspace and flags of a stream-K launch.
#[derive(Clone, Copy)]
pub struct PartialSlots {
    workspace: *mut f32,
    flags: *mut u32,
}

impl PartialSlots {
    /// The slots of `p`.
    ///
    /// # Safety
    /// `p.workspace` holds `PARTIAL_SLOT_FLOATS` f32 and `p.flags` `FLAGS_PER_CTA` u32, zero at
    /// launch, for every CTA of the grid; nothing else touches them during the launch.
    #[inline(always)]
    pub unsafe fn new(p: &GemmParams) -> Self {
        PartialSlots { workspace: p.workspace as *mut f32, flags: p.flags as *mut u32 }
    }

    /// The part of `cta`'s slot that consumer warpgroup `half` uses.
    #[inline(always)]
    fn slot(&self, cta: u32, half: u32) -> *mut f32 {
        let at = cta as usize * PARTIAL_SLOT_FLOATS as usize + half as usize * HALF_SLOT_FLOATS;
        self.workspace.wrapping_add(at)
    }

    /// The flag of (`cta`, `half`).
    #[inline(always)]
    fn flag(&self, cta: u32, half: u32) -> AtomicCell {
        // SAFETY: inside the flags of the grid (constructor contract); only atomics touch them.
        unsafe { AtomicCell::new(self.flags.wrapping_add((cta * FLAGS_PER_CTA + half) as usize)) }
    }

    /// Stores this warpgroup's partial accumulator in `cta`'s slot and raises the flag.
    ///
    /// # Safety
    /// The whole consumer warpgroup `half` of CTA `cta` calls it together, once per launch (its
    /// `Partial` unit), after a wgmma wait covering `acc`; `barrier` counts exactly its threads.
    #[inline(always)]
    pub unsafe fn publish<A: Accumulator<Elem = f32>>(
        &self,
        acc: &A,
        cta: u32,
        half: u32,
        barrier: &NamedBarrier<128>,
        leader: bool,
    ) {
        const { assert!(A::REGS * WARPGROUP_THREADS == HALF_SLOT_FLOATS, "one accumulator fills half a slot") };
        let (slot, t) = (self.slot(cta, half), warpgroup::thread_index() as usize);
        acc.for_each(|i, v| {
            // SAFETY: i·128 + t < HALF_SLOT_FLOATS, inside this warpgroup's half slot, which no
            // one reads before the flag below is raised.
            unsafe { *slot.add(i * WARPGROUP_THREADS + t) = v };
        });
        // SAFETY: every thread of the warpgroup arrives (function contract): all stores above
        // happen before the leader's release.
        unsafe { barrier.sync() };
        if leader {
            fence_acq_rel_gpu();
            self.flag(cta, half).fetch_add(1);
        }
    }

    /// Adds the partial accumulators of CTAs `first..=last` (warpgroup `half` of each) into
    /// `acc`, in that order, waiting for each to be published.
    ///
    /// # Safety
    /// The whole consumer warpgroup `half` calls it together, after a wgmma wait covering `acc`
    /// and before anything reads it; each of those CTAs publishes exactly once in this launch;
    /// `barrier` counts exactly this warpgroup's threads.
    #[inline(always)]
    pub unsafe fn accumulate<A: Accumulator<Elem = f32>>(
        &self,
        acc: &mut A,
        first: u32,
        last: u32,
        half: u32,
        barrier: &NamedBarrier<128>,
        leader: bool,
    ) {
        let t = warpgroup::thread_index() as usize;
        for cta in first..=last {
            if leader {
                // Consume the flag (1 → 0): it is zero again for the next launch.
                let flag = self.flag(cta, half);
                while flag.compare_exchange(1, 0) != 1 {}
                fence_acq_rel_gpu();
            }
            // SAFETY: every thread of the warpgroup arrives; the leader's acquire above orders
            // the publisher's stores before every thread's loads below.
            unsafe { barrier.sync() };
            let slot = self.slot(cta, half);
            acc.for_each_mut(|i, v| {
                // SAFETY: inside that CTA's published half slot, written once and not again.
                *v += unsafe { *slot.add(i * WARPGROUP_THREADS + t) };
            });
        }
    }
}
