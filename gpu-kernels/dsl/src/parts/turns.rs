//! L3 issue order of two consumer warpgroups: [`TakeTurns`] makes them issue their K blocks'
//! wgmmas alternately (FlashAttention-3's and CUTLASS's ordered ping-pong, here inside one
//! cooperative tile). A promoting FP8 consumer waits for its own wgmmas before it promotes them
//! on the CUDA cores; when both warpgroups run in step the tensor cores idle through both
//! promotions. Taking turns puts one warpgroup's wgmmas in the tensor pipe while the other
//! promotes.
//!
//! Protocol, two named barriers of 256 threads (both warpgroups): warpgroup `h` syncs on its own
//! barrier before issuing and arrives on the other's after committing. Warpgroup 1 arrives on
//! warpgroup 0's once at the start (0 goes first) and warpgroup 0 syncs once more at the end
//! ([`TakeTurns::finish`]), so every phase of both barriers completes: warpgroup 0's k-th issue
//! follows warpgroup 1's (k − 1)-th, warpgroup 1's k-th follows warpgroup 0's k-th.

use super::mainloop::IssueOrder;
use crate::sync::NamedBarrier;

/// Threads in each phase of a turn barrier: both consumer warpgroups.
const BOTH: u32 = 256;

/// Alternating issue between two consumer warpgroups (see the module docs).
#[derive(Clone, Copy)]
pub struct TakeTurns {
    mine: NamedBarrier<BOTH>,
    theirs: NamedBarrier<BOTH>,
    first: bool,
}

impl TakeTurns {
    /// The turns of consumer warpgroup `half` (0 or 1) on barriers `first_id` and
    /// `first_id + 1`; warpgroup 1 hands warpgroup 0 the first turn here.
    ///
    /// # Safety
    /// Both consumer warpgroups (256 threads) call it once, with the same `first_id`, which no
    /// other code in the kernel uses (nor `first_id + 1`); afterwards both issue the same number
    /// of K blocks through [`IssueOrder`] and both call [`TakeTurns::finish`] once.
    #[inline(always)]
    pub unsafe fn new(first_id: u32, half: u32) -> Self {
        // SAFETY: the ids are this protocol's alone (contract); 256 threads in each phase.
        let (zero, one) = unsafe { (NamedBarrier::new(first_id), NamedBarrier::new(first_id + 1)) };
        let first = half == 0;
        let (mine, theirs) = if first { (zero, one) } else { (one, zero) };
        if !first {
            // SAFETY: warpgroup 1's opening arrival, matched by warpgroup 0's first sync.
            unsafe { theirs.arrive() };
        }
        TakeTurns { mine, theirs, first }
    }

    /// Completes the protocol after a warpgroup's last issue: warpgroup 0 takes the turn that
    /// warpgroup 1's last arrival handed it (so no phase is left open at exit).
    ///
    /// # Safety
    /// As for [`TakeTurns::new`]: once per warpgroup, after its last issue.
    #[inline(always)]
    pub unsafe fn finish(&self) {
        if self.first {
            // SAFETY: matched by warpgroup 1's arrival after its last issue.
            unsafe { self.mine.sync() };
        }
    }
}

impl IssueOrder for TakeTurns {
    #[inline(always)]
    unsafe fn before_issue(&self) {
        // SAFETY: the other warpgroup arrives once per issue (and once at the start for 1→0).
        unsafe { self.mine.sync() };
    }

    #[inline(always)]
    unsafe fn after_issue(&self) {
        // SAFETY: the other warpgroup syncs once per issue (and once at the end for 0).
        unsafe { self.theirs.arrive() };
    }
}
