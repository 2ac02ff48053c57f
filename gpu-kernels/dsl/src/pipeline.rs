//! L2 multi-stage producer/consumer pipeline over mbarriers: `STAGES` shared-memory slots, each
//! with a "full" barrier (the producer's TMA copies complete on it) and an "empty" barrier (the
//! consumers release the slot). The state is just (stage, phase), as in DeepGEMM.
//!
//! The byte count each stage expects comes from the *types* of the tiles moved into it
//! ([`TmaLoad::BYTES`]), so a producer cannot announce a count that disagrees with its copies
//! unless it issues copies of other types. The (stage, parity) state and its wait rule are the
//! host-tested [`crate::logic::pipeline_ring`].

use crate::mbarrier::{MBARRIER_BYTES, Mbarrier, Phase};
use crate::shared::DynamicShared;

/// Something a TMA load fills, with the bytes its completion delivers.
pub trait TmaLoad {
    /// Transaction bytes of one load (box extents × element size, out-of-bounds fill included).
    const BYTES: u32;
}

impl<A: TmaLoad, B: TmaLoad> TmaLoad for (A, B) {
    const BYTES: u32 = A::BYTES + B::BYTES;
}

impl<A: TmaLoad, B: TmaLoad, C: TmaLoad> TmaLoad for (A, B, C) {
    const BYTES: u32 = A::BYTES + B::BYTES + C::BYTES;
}

/// Position in the ring: (stage, parity), with the advance rule host-tested against a CPU
/// model of mbarrier parity waits in `logic::pipeline_ring`.
pub use crate::logic::pipeline_ring::RingState as PipelineState;

/// The barriers of a `STAGES`-deep ring, laid out as `full[0..STAGES]` then `empty[0..STAGES]`.
#[derive(Clone, Copy, Debug)]
pub struct Pipeline<const STAGES: usize> {
    base: u32,
}

impl<const STAGES: usize> Pipeline<STAGES> {
    const VALID: () = assert!(STAGES >= 1 && STAGES <= 32, "a pipeline has 1..=32 stages");

    /// Carves the `2 × STAGES` barriers from the dynamic shared memory.
    ///
    /// # Safety
    /// Every thread that uses the pipeline calls this at the same point of the same smem plan
    /// (so all see the same addresses), and [`Self::init`] runs before first use.
    #[inline(always)]
    pub unsafe fn alloc(smem: &mut DynamicShared) -> Self {
        let () = Self::VALID;
        let slots = smem.alloc::<u64>(2 * STAGES as u32, MBARRIER_BYTES);
        Pipeline { base: slots.addr() }
    }

    /// Initialises every barrier: `full` expects one producer arrival (plus the TMA bytes),
    /// `empty` expects `consumer_arrivals`. Then publishes the inits; the caller follows with a
    /// block (or cluster) barrier before anyone uses the pipeline.
    ///
    /// # Safety
    /// Called by exactly one thread; `consumer_arrivals` is the number of [`Self::consumer_release`]
    /// calls per stage and lap.
    #[inline(always)]
    pub unsafe fn init(&self, consumer_arrivals: u32) {
        for s in 0..STAGES as u32 {
            // SAFETY: forwarded to the caller; the slots were carved by `alloc`.
            unsafe {
                self.full(s).init(1);
                self.empty(s).init(consumer_arrivals);
            }
        }
        crate::mbarrier::fence_init();
    }

    /// The "full" barrier of `stage`.
    #[inline(always)]
    pub fn full(&self, stage: u32) -> Mbarrier {
        // SAFETY: `alloc` carved the slot; `init` runs before any wait or arrive (its contract).
        unsafe { Mbarrier::at(crate::shared::SharedPtr::from_addr(self.base + stage * MBARRIER_BYTES)) }
    }

    /// The "empty" barrier of `stage`.
    #[inline(always)]
    pub fn empty(&self, stage: u32) -> Mbarrier {
        // SAFETY: as for `full`.
        unsafe {
            Mbarrier::at(crate::shared::SharedPtr::from_addr(self.base + (STAGES as u32 + stage) * MBARRIER_BYTES))
        }
    }

    /// Producer: waits until the slot of `state` is free (the first lap passes at once), then
    /// announces the bytes of `L` on its full barrier and returns that barrier, on which the
    /// copies filling the slot must complete.
    ///
    /// # Safety
    /// One producer thread per stage and lap; it then issues loads delivering exactly `L::BYTES`
    /// that complete on the returned barrier.
    #[inline(always)]
    pub unsafe fn producer_acquire<L: TmaLoad>(&self, state: PipelineState<STAGES>) -> Mbarrier {
        self.empty(state.stage).wait_phase(Phase::from_parity(state.producer_parity()));
        let full = self.full(state.stage);
        // SAFETY: forwarded to the caller.
        unsafe { full.arrive_expect_tx(L::BYTES) };
        full
    }

    /// Producer without TMA (generic stores into the slot): waits for the slot to be free.
    #[inline(always)]
    pub fn producer_wait(&self, state: PipelineState<STAGES>) {
        self.empty(state.stage).wait_phase(Phase::from_parity(state.producer_parity()));
    }

    /// Producer without TMA: marks the slot full (one arrival, no bytes).
    ///
    /// # Safety
    /// One producer arrival per stage and lap, after its writes to the slot.
    #[inline(always)]
    pub unsafe fn producer_commit(&self, state: PipelineState<STAGES>) {
        // SAFETY: forwarded to the caller.
        unsafe { self.full(state.stage).arrive() };
    }

    /// Consumer: waits until the slot of `state` is full; its data is then visible.
    #[inline(always)]
    pub fn consumer_wait(&self, state: PipelineState<STAGES>) {
        self.full(state.stage).wait_phase(Phase::from_parity(state.consumer_parity()));
    }

    /// Consumer: hands the slot back to the producer.
    ///
    /// # Safety
    /// Each of the `consumer_arrivals` consumers calls this once per stage and lap, after its
    /// last read of the slot (wgmma reads: after the covering `wait`).
    #[inline(always)]
    pub unsafe fn consumer_release(&self, state: PipelineState<STAGES>) {
        // SAFETY: forwarded to the caller.
        unsafe { self.empty(state.stage).arrive() };
    }

    /// Consumer of a multicast ring: hands the slot back to the producer of the cluster CTA of
    /// rank `peer` too, whose multicasts write this CTA's slot. The peer's producer waits on its
    /// own empty barrier as usual ([`Self::producer_acquire`], counting these arrivals), and
    /// the arrival carries no cluster-scope release: the slot's readers (wgmmas) completed and
    /// only async copies write it next (a cluster-scope release costs a `MEMBAR.ALL.GPU` per
    /// stage, measured 17–22 % of the GEMM on the H200).
    ///
    /// # Safety
    /// As for [`Self::consumer_release`], counted in the peer's `consumer_arrivals`; the peer
    /// runs the same ring and stays running until every such arrival is made (a cluster
    /// barrier before either CTA exits); this consumer wrote nothing to the slot.
    #[inline(always)]
    pub unsafe fn consumer_release_peer(&self, state: PipelineState<STAGES>, peer: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { self.empty(state.stage).arrive_remote_cta(peer) };
    }
}
