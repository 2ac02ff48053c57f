//! Cluster-launch-control tile scheduling for warp-specialised kernels (sm_100a): the response
//! ring in shared memory and each warp's cursor over it, driving the shared state machine
//! `logic::clc::ClcScheduler` (the one the CPU simulation checks). Work is cluster-granular:
//! a response names the first CTA of a cancelled cluster and CTA `rank` of this cluster takes
//! tile `first + rank`. Clusters are one-dimensional along x (`cluster = (C, 1, 1)`).
//!
//! Protocol (REFERENCE §12), per work unit, with `SLOTS` response slots so the issuer can ask
//! for unit i+1 while readers still decode unit i's answer:
//! 1. in every CTA the issuing warp's elected lane waits its local `empty[slot]` (all local
//!    readers are done with the slot) and arms `full[slot]` with `arrive.expect_tx(16)`; the
//!    response is an async write completed by `complete_tx(16)` on `full[slot]`, the only
//!    completion signal. In rank 0 it then waits `cluster_empty[slot]` (every reader of every CTA
//!    released the slot, acquire at cluster scope) and issues `try_cancel` — the multicast form
//!    when the cluster has several CTAs, so each CTA gets the answer in its own slot;
//! 2. every reader warp waits `full[slot]` (acquire), decodes the 16 bytes inside one asm block,
//!    fences `fence.proxy.async.shared::cta` (its generic read must precede the next async write
//!    of the slot), and its elected lane arrives on the local `empty[slot]` and, in a cluster, on
//!    rank 0's `cluster_empty[slot]` (release at cluster scope);
//! 3. a failed cancel ends every reader's loop in every CTA (all CTAs read the same answer), and
//!    the state machine refuses any later request — issuing after a failed cancel is undefined
//!    behaviour in the ISA.
//!
//! The cursor is per thread (registers), so every thread of a reader warp holds an identical
//! copy; only the issuing lane touches the instruction. With clusters, the kernel ends with a
//! cluster barrier so no CTA exits while a peer may still arrive on its barriers.

use crate::cluster;
use crate::logic::clc::{CancelResponse, ClcScheduler, Step};
use crate::mbarrier::{MBARRIER_BYTES, Mbarrier, Phase};
use crate::pipeline::PipelineState;
use crate::ptx::{bar, clc, fence};
use crate::shared::{DynamicShared, SharedPtr};
use crate::thread::block_idx;
use crate::warp::Elected;

/// Bytes of one CLC response.
pub const CLC_RESPONSE_BYTES: u32 = 16;

const FULL_WARP: u32 = 0xFFFF_FFFF;

/// The response slots and their barriers in shared memory (same offsets in every CTA).
#[derive(Clone, Copy, Debug)]
pub struct ClcPipeline<const SLOTS: usize> {
    resp: u32,
    /// `full[0..SLOTS]`, `empty[0..SLOTS]`, `cluster_empty[0..SLOTS]`.
    barriers: u32,
}

impl<const SLOTS: usize> ClcPipeline<SLOTS> {
    const VALID: () = assert!(SLOTS >= 1 && SLOTS <= 8, "1..=8 CLC response slots");

    /// Carves the slots (16-byte aligned) and barriers from the kernel's shared memory.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        let () = Self::VALID;
        let resp = smem.alloc::<[u32; 4]>(SLOTS as u32, CLC_RESPONSE_BYTES).addr();
        let barriers = smem.alloc::<u64>(3 * SLOTS as u32, MBARRIER_BYTES).addr();
        ClcPipeline { resp, barriers }
    }

    /// Shared-memory bytes [`ClcPipeline::alloc`] takes (plus up to 15 bytes of alignment).
    pub const fn smem_bytes() -> u32 {
        SLOTS as u32 * (CLC_RESPONSE_BYTES + 3 * MBARRIER_BYTES)
    }

    fn barrier(&self, array: u32, slot: u32) -> Mbarrier {
        let addr = self.barriers + (array * SLOTS as u32 + slot) * MBARRIER_BYTES;
        // SAFETY: carved by `alloc`; `init` runs before use (its contract).
        unsafe { Mbarrier::at(SharedPtr::from_addr(addr)) }
    }

    fn full(&self, slot: u32) -> Mbarrier {
        self.barrier(0, slot)
    }

    fn empty(&self, slot: u32) -> Mbarrier {
        self.barrier(1, slot)
    }

    fn cluster_empty(&self, slot: u32) -> Mbarrier {
        self.barrier(2, slot)
    }

    /// Initialises the barriers: `full` expects the local issuer's one arrival (+16 tx bytes),
    /// `empty` one arrival per local reader warp, `cluster_empty` one per reader warp of the
    /// whole cluster (used in rank 0 only).
    ///
    /// # Safety
    /// One thread per CTA, before any use, followed by a block barrier — and by a cluster
    /// barrier when the cluster has several CTAs (peers arrive remotely).
    #[inline(always)]
    pub unsafe fn init(&self, reader_warps: u32) {
        for s in 0..SLOTS as u32 {
            // SAFETY: the barriers were carved for this pipeline; nobody uses them yet.
            unsafe {
                self.full(s).init(1);
                self.empty(s).init(reader_warps);
                self.cluster_empty(s).init(reader_warps * cluster::size());
            }
        }
        crate::mbarrier::fence_init();
    }
}

/// One warp's position in the CLC work sequence.
#[derive(Clone, Copy, Debug)]
pub struct ClcCursor<const SLOTS: usize> {
    sched: ClcScheduler,
    rank: u32,
    cluster_size: u32,
    /// Response slot of the current tile and the parity of its barriers (the ring rule
    /// host-tested in `logic::pipeline_ring`).
    ring: PipelineState<SLOTS>,
}

impl<const SLOTS: usize> ClcCursor<SLOTS> {
    /// Starts at this CTA's own tile, `%ctaid.x` (the launch is one CTA per tile).
    #[inline(always)]
    pub fn start() -> Self {
        let (rank, cluster_size) = (cluster::rank(), cluster::size());
        ClcCursor {
            sched: ClcScheduler::for_cta(block_idx().x, rank, cluster_size),
            rank,
            cluster_size,
            ring: PipelineState::START,
        }
    }

    /// The tile of this CTA to compute now, or `None` once a cancel has failed.
    #[inline(always)]
    pub fn tile(&self) -> Option<u32> {
        self.sched.cta_tile(self.rank)
    }

    /// Asks for the next work unit (the issuing warp of each CTA; the whole warp calls,
    /// `issuer` is `Some` on one lane). Does nothing after a failed cancel or while a request
    /// is in flight.
    ///
    /// # Safety
    /// Exactly one warp per CTA issues, once per tile, before it calls [`Self::advance`] for that
    /// tile; the pipeline was initialised (and published cluster-wide).
    #[inline(always)]
    pub unsafe fn request(&mut self, pipe: &ClcPipeline<SLOTS>, issuer: Option<&Elected>) {
        if self.sched.request().is_err() || issuer.is_none() {
            return;
        }
        let slot = self.ring.stage;
        let resp = pipe.resp + CLC_RESPONSE_BYTES * slot;
        pipe.empty(slot).wait_phase(Phase::from_parity(self.ring.producer_parity()));
        let full = pipe.full(slot);
        // SAFETY: the local readers released the slot (empty barrier); the full barrier is armed
        // for the 16 response bytes of this phase (they may land before or after the arming).
        unsafe { full.arrive_expect_tx(CLC_RESPONSE_BYTES) };
        if self.rank != 0 {
            return;
        }
        if self.cluster_size == 1 {
            // SAFETY: slot released and armed; the state machine forbids a request after a
            // failed cancel.
            unsafe { clc::try_cancel(resp, full.addr()) };
        } else {
            pipe.cluster_empty(slot).wait_phase_cluster(Phase::from_parity(self.ring.producer_parity()));
            // SAFETY: every reader of every CTA released the slot (cluster_empty, acquire at
            // cluster scope); every CTA arms its own full barrier for this phase; no CTA has
            // exited (all leave only after the same failed answer, which ends requests).
            unsafe { clc::try_cancel_multicast(resp, full.addr()) };
        }
    }

    /// Waits for the answer to the current tile's request and moves to the next tile; `None`
    /// ends the loop. Whole warp; `releaser` is `Some` on one lane.
    ///
    /// # Safety
    /// Every reader warp (the count given to [`ClcPipeline::init`]) of every CTA calls this once
    /// per tile, converged, after its CTA's issuing warp called [`Self::request`] for the tile.
    #[inline(always)]
    pub unsafe fn advance(&mut self, pipe: &ClcPipeline<SLOTS>, releaser: Option<&Elected>) -> Option<u32> {
        // Readers other than the issuer record the request the issuer made for this tile.
        let _ = self.sched.request();
        let slot = self.ring.stage;
        pipe.full(slot).wait_phase(Phase::from_parity(self.ring.consumer_parity()));
        // SAFETY: the full barrier's completion made the async response write visible.
        let (canceled, first_cta_x) = unsafe { clc::query_cancel_x(pipe.resp + CLC_RESPONSE_BYTES * slot) };
        // SAFETY: fences and warp sync order this warp's reads of the slot before its release.
        unsafe {
            fence::fence_proxy_async_shared_cta();
            bar::bar_warp_sync(FULL_WARP);
        }
        if releaser.is_some() {
            // SAFETY: one arrival per reader warp per use of the slot, locally and on rank 0,
            // as initialised; rank 0 is running (cluster barrier before any CTA exits). The
            // remote arrival is a CTA-scope release (no `MEMBAR.ALL.GPU`): this warp only read
            // the slot, and rank 0's next write to it is an async-proxy response ordered after
            // those reads by the proxy fence above; no generic write of ours must reach rank 0.
            unsafe {
                pipe.empty(slot).arrive();
                if self.cluster_size > 1 {
                    pipe.cluster_empty(slot).arrive_remote_cta(0);
                }
            }
        }
        self.ring.advance();
        let response = if canceled { CancelResponse::Canceled { first_cta_x } } else { CancelResponse::NotCanceled };
        match self.sched.respond(response) {
            Ok(Step::Work { .. }) => self.tile(),
            Ok(Step::Stop) | Err(_) => None,
        }
    }
}
