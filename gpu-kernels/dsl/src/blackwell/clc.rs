//! Cluster-launch-control tile scheduling for warp-specialised kernels (sm_100a, one-CTA
//! clusters): the response ring in shared memory and each warp's cursor over it, driving the
//! shared state machine `logic::clc::ClcScheduler` (the one the CPU simulation checks).
//!
//! Protocol (REFERENCE §12), per work unit, with `SLOTS` response slots so the issuer can ask
//! for unit i+1 while readers still decode unit i's answer:
//! 1. the issuing warp's elected lane waits `empty[slot]`, arms `full[slot]` with
//!    `arrive.expect_tx(16)` and issues `try_cancel` into `resp[slot]` (the response is an async
//!    write completed by `complete_tx(16)` on `full[slot]` — the only completion signal);
//! 2. every reader warp waits `full[slot]` (acquire), decodes the 16 bytes inside one asm block,
//!    fences `fence.proxy.async.shared::cta` (its generic read must precede the next async write
//!    of the slot), and its elected lane arrives on `empty[slot]`;
//! 3. a failed cancel ends every reader's loop, and the issuer's state machine refuses any later
//!    request — issuing after a failed cancel is undefined behaviour in the ISA.
//!
//! The cursor is per thread (registers), so every thread of a reader warp holds an identical
//! copy; only the issuing lane touches the instruction. Clusters of more than one CTA need the
//! multicast form and a cluster-wide slot-release protocol; this wrapper is for `cluster = 1`.

use crate::logic::clc::{CancelResponse, ClcScheduler, Step};
use crate::ptx::{bar, clc, fence, mbarrier};
use crate::shared::DynamicShared;
use crate::thread::block_idx;
use crate::warp::Elected;

/// Bytes of one CLC response.
pub const CLC_RESPONSE_BYTES: u32 = 16;

const FULL_WARP: u32 = 0xFFFF_FFFF;

/// The response slots and their full/empty barriers in shared memory.
#[derive(Clone, Copy, Debug)]
pub struct ClcPipeline<const SLOTS: usize> {
    resp: u32,
    full: u32,
    empty: u32,
}

impl<const SLOTS: usize> ClcPipeline<SLOTS> {
    const VALID: () = assert!(SLOTS >= 1 && SLOTS <= 8, "1..=8 CLC response slots");

    /// Carves the slots (16-byte aligned) and barriers from the kernel's shared memory.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        let () = Self::VALID;
        let resp = smem.alloc::<[u32; 4]>(SLOTS as u32, CLC_RESPONSE_BYTES).addr();
        let full = smem.alloc::<u64>(SLOTS as u32, 8).addr();
        let empty = smem.alloc::<u64>(SLOTS as u32, 8).addr();
        ClcPipeline { resp, full, empty }
    }

    /// Shared-memory bytes [`ClcPipeline::alloc`] takes (plus up to 15 bytes of alignment).
    pub const fn smem_bytes() -> u32 {
        SLOTS as u32 * (CLC_RESPONSE_BYTES + 16)
    }

    /// Initialises the barriers: `full` expects the issuer's one arrival (+16 tx bytes), `empty`
    /// one arrival per reader warp.
    ///
    /// # Safety
    /// One thread, before any use, followed by a block barrier.
    #[inline(always)]
    pub unsafe fn init(&self, reader_warps: u32) {
        for s in 0..SLOTS as u32 {
            // SAFETY: the barriers were carved for this pipeline; nobody uses them yet.
            unsafe {
                mbarrier::init(self.full + 8 * s, 1);
                mbarrier::init(self.empty + 8 * s, reader_warps);
            }
        }
        // SAFETY: publishes the inits to the async proxy (CLC completes on `full`).
        unsafe { mbarrier::fence_mbarrier_init_release_cluster() };
    }
}

#[inline(always)]
fn wait(bar: u32, parity: u32) {
    // SAFETY: `bar` is an initialised barrier of the pipeline; the cursor's parity never falls
    // two phases behind because each slot is released before it is reissued.
    while !unsafe { mbarrier::try_wait_parity(bar, parity) } {}
}

/// One warp's position in the CLC work sequence.
#[derive(Clone, Copy, Debug)]
pub struct ClcCursor<const SLOTS: usize> {
    sched: ClcScheduler,
    slot: u32,
    phase: u32,
}

impl<const SLOTS: usize> ClcCursor<SLOTS> {
    /// Starts at this CTA's own tile, `%ctaid.x` (the launch is one CTA per tile).
    #[inline(always)]
    pub fn start() -> Self {
        ClcCursor { sched: ClcScheduler::new(block_idx().x, 1), slot: 0, phase: 0 }
    }

    /// The tile to compute now, or `None` once a cancel has failed.
    #[inline(always)]
    pub fn tile(&self) -> Option<u32> {
        self.sched.cta_tile(0)
    }

    /// Asks for the next tile (issuing warp only; the whole warp calls, `issuer` is `Some` on
    /// one lane). Does nothing after a failed cancel or while a request is in flight.
    ///
    /// # Safety
    /// Exactly one warp of the CTA issues, once per tile, before it calls [`Self::advance`] for
    /// that tile; the pipeline was initialised.
    #[inline(always)]
    pub unsafe fn request(&mut self, pipe: &ClcPipeline<SLOTS>, issuer: Option<&Elected>) {
        if self.sched.request().is_err() {
            return;
        }
        if issuer.is_some() {
            let full = pipe.full + 8 * self.slot;
            wait(pipe.empty + 8 * self.slot, self.phase ^ 1);
            // SAFETY: the slot was released by every reader (empty barrier) and is armed for the
            // 16 response bytes before the request; the state machine forbids a request after a
            // failed cancel.
            unsafe {
                mbarrier::arrive_expect_tx(full, CLC_RESPONSE_BYTES);
                clc::try_cancel(pipe.resp + CLC_RESPONSE_BYTES * self.slot, full);
            }
        }
    }

    /// Waits for the answer to the current tile's request and moves to the next tile; `None`
    /// ends the loop. Whole warp; `releaser` is `Some` on one lane.
    ///
    /// # Safety
    /// Every reader warp (the count given to [`ClcPipeline::init`]) calls this once per tile,
    /// converged, after the issuing warp's [`Self::request`] for the tile.
    #[inline(always)]
    pub unsafe fn advance(&mut self, pipe: &ClcPipeline<SLOTS>, releaser: Option<&Elected>) -> Option<u32> {
        // Readers other than the issuer record the request the issuer made for this tile.
        let _ = self.sched.request();
        let slot = self.slot;
        wait(pipe.full + 8 * slot, self.phase);
        // SAFETY: the full barrier's completion made the async response write visible.
        let (canceled, first_cta_x) = unsafe { clc::query_cancel_x(pipe.resp + CLC_RESPONSE_BYTES * slot) };
        // SAFETY: fences and warp sync order this warp's reads of the slot before its release.
        unsafe {
            fence::fence_proxy_async_shared_cta();
            bar::bar_warp_sync(FULL_WARP);
        }
        if releaser.is_some() {
            // SAFETY: one arrival per reader warp per use of the slot, as initialised.
            unsafe { mbarrier::arrive(pipe.empty + 8 * slot) };
        }
        self.slot += 1;
        if self.slot == SLOTS as u32 {
            self.slot = 0;
            self.phase ^= 1;
        }
        let response = if canceled { CancelResponse::Canceled { first_cta_x } } else { CancelResponse::NotCanceled };
        match self.sched.respond(response) {
            Ok(Step::Work { first_cta_x }) => Some(first_cta_x),
            Ok(Step::Stop) | Err(_) => None,
        }
    }
}
