//! Block-level barriers (`bar.sync`, `bar.arrive`, `barrier.sync` with a thread count).

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

/// Waits on named barrier `id` until `threads` threads have arrived.
///
/// Emits `barrier.sync id, threads;` (non-aligned, see [`bar_sync_all`]).
///
/// # Safety
/// `id < 16`; `threads` is a non-zero multiple of 32, the same for every participant, and
/// exactly that many threads (whole warps) arrive at `id` in this phase.
#[inline(always)]
pub unsafe fn bar_sync(id: u32, threads: u32) {
    // SAFETY: caller upholds the count contract above.
    unsafe { asm!("barrier.sync {0}, {1};", in(reg32) id, in(reg32) threads, options(nostack)) };
}

/// Arrives at named barrier `id` without waiting (producer side of a named barrier).
///
/// Emits `barrier.arrive id, threads;` (non-aligned, see [`bar_sync_all`]).
///
/// # Safety
/// As for [`bar_sync`]; the arrivals plus the waiters must add up to `threads`.
#[inline(always)]
pub unsafe fn bar_arrive(id: u32, threads: u32) {
    // SAFETY: caller upholds the count contract above.
    unsafe { asm!("barrier.arrive {0}, {1};", in(reg32) id, in(reg32) threads, options(nostack)) };
}

/// Synchronises the threads of the calling warp named in `mask`.
///
/// Emits `bar.warp.sync mask;`.
///
/// # Safety
/// Every thread in `mask` must execute the same `bar.warp.sync` with the same mask.
#[inline(always)]
pub unsafe fn bar_warp_sync(mask: u32) {
    // SAFETY: caller guarantees the lanes of `mask` converge here.
    unsafe { asm!("bar.warp.sync {0};", in(reg32) mask, options(nostack)) };
}
