//! Block-level barriers: barrier 0 for the whole block (`barrier.sync`), named barriers with a
//! thread count (`bar.sync`, `bar.arrive`).

use core::arch::asm;

/// Waits until every thread of the block arrives at barrier 0.
///
/// Emits `barrier.sync 0;` — the non-`.aligned` form: LLVM does not treat `asm!` as convergent
/// and may duplicate the barrier into both arms of a branch that splits a warp, which the
/// aligned `bar.sync` forbids.
///
/// # Safety
/// Every non-exited thread of the block must reach this barrier (or the block hangs), and the
/// call must not sit in divergent control flow within a warp.
#[inline(always)]
pub unsafe fn bar_sync_all() {
    // SAFETY: caller guarantees the whole block arrives.
    unsafe { asm!("barrier.sync 0;", options(nostack)) };
}

// LLVM's own barrier intrinsics, not `asm!`: LLVM marks them convergent, so no pass moves or
// duplicates one into a branch that splits a warp, and they may take the `.aligned` form, which
// tells ptxas that every lane of a warp arrives at the same instruction. ptxas then knows each
// warp is converged after the barrier; behind a non-aligned barrier it treats the code that
// follows as possibly divergent: what a warp derives from uniform values there (a ring slot's
// wgmma descriptors) stays in vector registers, and every wgmma pays two `R2UR`s.
unsafe extern "C" {
    #[link_name = "llvm.nvvm.barrier.cta.sync.aligned.count"]
    fn barrier_cta_sync_aligned_count(id: u32, threads: u32);
    #[link_name = "llvm.nvvm.barrier.cta.arrive.aligned.count"]
    fn barrier_cta_arrive_aligned_count(id: u32, threads: u32);
    #[link_name = "llvm.nvvm.bar.warp.sync"]
    fn bar_warp_sync_intrinsic(mask: u32);
}

/// Waits on named barrier `id` until `threads` threads have arrived.
///
/// Emits `bar.sync id, threads;` (`barrier.sync.aligned`) through LLVM's convergent intrinsic.
///
/// # Safety
/// `id < 16`; `threads` is a non-zero multiple of 32, the same for every participant, and
/// exactly that many threads (whole warps) arrive at `id` in this phase, each warp with all 32
/// lanes converged at this call.
#[inline(always)]
pub unsafe fn bar_sync(id: u32, threads: u32) {
    // SAFETY: caller upholds the count and convergence contract above.
    unsafe { barrier_cta_sync_aligned_count(id, threads) }
}

/// Arrives at named barrier `id` without waiting (producer side of a named barrier).
///
/// Emits `bar.arrive id, threads;` (`barrier.arrive.aligned`) through LLVM's convergent
/// intrinsic.
///
/// # Safety
/// As for [`bar_sync`]; the arrivals plus the waiters must add up to `threads`.
#[inline(always)]
pub unsafe fn bar_arrive(id: u32, threads: u32) {
    // SAFETY: caller upholds the count contract above.
    unsafe { barrier_cta_arrive_aligned_count(id, threads) }
}

/// Synchronises the threads of the calling warp named in `mask`.
///
/// Emits `bar.warp.sync mask;` through LLVM's convergent intrinsic: LLVM neither duplicates it
/// into the arms of a branch nor merges the block holding it into its predecessors.
///
/// # Safety
/// Every thread in `mask` must execute the same `bar.warp.sync` with the same mask.
#[inline(always)]
pub unsafe fn bar_warp_sync(mask: u32) {
    // SAFETY: caller guarantees the lanes of `mask` converge here.
    unsafe { bar_warp_sync_intrinsic(mask) }
}
