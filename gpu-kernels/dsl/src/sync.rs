//! Block-level synchronisation and fences.
//!
//! Barriers are `unsafe`: a barrier that not every participant reaches hangs the block, and no
//! type can prove participation. Fences are safe.

use crate::ptx::{bar, fence};

/// `__syncthreads()`: waits for every thread of the block.
///
/// # Safety
/// Every non-exited thread of the block reaches this call, in warp-uniform control flow.
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: forwarded to the caller.
    unsafe { bar::bar_sync_all() }
}

/// A named hardware barrier (ids 1–15; 0 is [`sync_threads`]) shared by `THREADS` threads.
#[derive(Clone, Copy, Debug)]
pub struct NamedBarrier<const THREADS: u32> {
    id: u32,
}

impl<const THREADS: u32> NamedBarrier<THREADS> {
    const VALID: () = assert!(THREADS > 0 && THREADS % 32 == 0, "a named barrier counts whole warps");

    /// Barrier `id` (1..16).
    ///
    /// # Safety
    /// No other code in the kernel uses `id` with a different thread count.
    #[inline(always)]
    pub const unsafe fn new(id: u32) -> Self {
        let () = Self::VALID;
        assert!(id >= 1 && id < 16, "named barrier ids are 1..16");
        NamedBarrier { id }
    }

    /// Waits until `THREADS` threads have arrived or synced.
    ///
    /// # Safety
    /// Exactly `THREADS` threads (whole warps, each warp converged at the call) take part in
    /// each phase.
    #[inline(always)]
    pub unsafe fn sync(&self) {
        // SAFETY: forwarded to the caller.
        unsafe { bar::bar_sync(self.id, THREADS) }
    }

    /// Arrives without waiting.
    ///
    /// # Safety
    /// As for [`Self::sync`].
    #[inline(always)]
    pub unsafe fn arrive(&self) {
        // SAFETY: forwarded to the caller.
        unsafe { bar::bar_arrive(self.id, THREADS) }
    }
}

/// Sequentially consistent fence at GPU scope.
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: fences have no preconditions.
    unsafe { fence::fence_sc_gpu() }
}

/// Acquire-release fence at GPU scope (publish results before a flag, or read after one).
#[inline(always)]
pub fn fence_acq_rel_gpu() {
    // SAFETY: fences have no preconditions.
    unsafe { fence::fence_acq_rel_gpu() }
}

/// Acquire-release fence at block scope.
#[inline(always)]
pub fn fence_acq_rel_block() {
    // SAFETY: fences have no preconditions.
    unsafe { fence::fence_acq_rel_cta() }
}

/// Makes this thread's generic shared-memory writes visible to later async-proxy reads
/// (TMA stores, wgmma operands).
#[inline(always)]
pub fn fence_proxy_async_shared() {
    // SAFETY: fences have no preconditions.
    unsafe { fence::fence_proxy_async_shared_cta() }
}

/// Waits until every grid this one depends on (the stream's previous kernel, when this grid was
/// a programmatic dependent launch) has completed and its memory is visible; returns at once
/// otherwise. A kernel the host may launch programmatically calls it, in every thread, before
/// its first access to global memory (kernel parameters, its grid-constant tensor maps and
/// shared memory are safe before it): the host launcher enables such launches only for entries
/// whose body contains this wait.
///
/// Emits `griddepcontrol.wait;`.
#[inline(always)]
pub fn wait_for_prerequisite_grids() {
    // SAFETY: waiting has no precondition on sm_90+, the only arches these kernels build for.
    unsafe { crate::ptx::warpgroup::griddepcontrol_wait() }
}

/// Lets the stream's next kernel, when launched programmatically, start on the SMs this grid
/// frees before it completes (that kernel still waits at [`wait_for_prerequisite_grids`] before
/// it reads what this grid writes). Takes effect once every block of the grid has called it or
/// exited.
///
/// Emits `griddepcontrol.launch_dependents;`.
#[inline(always)]
pub fn allow_dependent_grids() {
    // SAFETY: a scheduling hint with no memory effect on this grid.
    unsafe { crate::ptx::warpgroup::griddepcontrol_launch_dependents() }
}
