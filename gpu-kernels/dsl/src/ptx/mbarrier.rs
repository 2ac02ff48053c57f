//! mbarrier: the shared-memory transaction barrier that TMA, bulk copies and producer/consumer
//! warps synchronise on (REFERENCE §4).
//!
//! A barrier is 8 bytes of shared memory holding a phase bit, a pending-arrival count and a
//! transaction-byte count; a phase completes when both reach zero. Every `bar` operand here is
//! the 32-bit shared-window address of that object (8-byte aligned). Waits report success as a
//! `bool` built from a predicate inside the asm scope, since predicates cannot cross `asm!`.

use core::arch::asm;

/// Initialises the barrier at `bar` to phase 0 with `count` expected arrivals and tx = 0.
///
/// Emits `mbarrier.init.shared::cta.b64 [bar], count;`.
///
/// # Safety
/// `bar` is an 8-byte-aligned shared-window address of this block; `1 <= count < 2^20`; no
/// other thread uses the barrier until the init is published ([`fence_mbarrier_init_release_cluster`]
/// for the async proxy or other CTAs, then a block/cluster barrier).
#[inline(always)]
pub unsafe fn init(bar: u32, count: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { asm!("mbarrier.init.shared::cta.b64 [{0}], {1};", in(reg32) bar, in(reg32) count, options(nostack)) };
}

/// Invalidates the barrier so its 8 bytes may be reused for other data.
///
/// Emits `mbarrier.inval.shared::cta.b64 [bar];`.
///
/// # Safety
/// `bar` is an initialised barrier that no thread or async operation still uses.
#[inline(always)]
pub unsafe fn inval(bar: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { asm!("mbarrier.inval.shared::cta.b64 [{0}];", in(reg32) bar, options(nostack)) };
}

/// Makes prior `mbarrier.init`s visible to the async proxy and to the other CTAs of the cluster.
///
/// Emits `fence.mbarrier_init.release.cluster;`.
///
/// # Safety
/// None: a fence only orders (only the `.release.cluster` form exists, REFERENCE §14).
#[inline(always)]
pub unsafe fn fence_mbarrier_init_release_cluster() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
}

/// Arrives once on the barrier and returns the opaque phase state.
///
/// Emits `mbarrier.arrive.shared::cta.b64 state, [bar];`.
///
/// # Safety
/// `bar` is an initialised barrier of this block; the arrival does not exceed the pending count
/// of the current phase.
#[inline(always)]
pub unsafe fn arrive(bar: u32) -> u64 {
    let state: u64;
    // SAFETY: forwarded to the caller.
    unsafe { asm!("mbarrier.arrive.shared::cta.b64 {0}, [{1}];", out(reg64) state, in(reg32) bar, options(nostack)) };
    state
}

/// Arrives `count` times at once.
///
/// Emits `mbarrier.arrive.shared::cta.b64 state, [bar], count;`.
///
/// # Safety
/// As for [`arrive`]; `count` is at most the pending count of the current phase.
#[inline(always)]
pub unsafe fn arrive_count(bar: u32, count: u32) -> u64 {
    let state: u64;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.arrive.shared::cta.b64 {0}, [{1}], {2};",
             out(reg64) state, in(reg32) bar, in(reg32) count, options(nostack))
    };
    state
}

/// Arrives once with release semantics at cluster scope (the data written before it is visible
/// to a waiter anywhere in the cluster that acquires at cluster scope).
///
/// Emits `mbarrier.arrive.release.cluster.shared::cta.b64 state, [bar];`.
///
/// # Safety
/// As for [`arrive`].
#[inline(always)]
pub unsafe fn arrive_release_cluster(bar: u32) -> u64 {
    let state: u64;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.arrive.release.cluster.shared::cta.b64 {0}, [{1}];",
             out(reg64) state, in(reg32) bar, options(nostack))
    };
    state
}

/// Adds `bytes` to the expected transaction count, then arrives once: the producer step before
/// issuing TMA loads that complete on this barrier.
///
/// Emits `mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], bytes;`.
///
/// # Safety
/// As for [`arrive`]; `bytes < 2^20` and equals what the copies completing on `bar` in this
/// phase deliver, or the phase never completes (or completes early).
#[inline(always)]
pub unsafe fn arrive_expect_tx(bar: u32, bytes: u32) -> u64 {
    let state: u64;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 {0}, [{1}], {2};",
             out(reg64) state, in(reg32) bar, in(reg32) bytes, options(nostack))
    };
    state
}

/// Adds `bytes` to the expected transaction count without arriving.
///
/// Emits `mbarrier.expect_tx.shared::cta.b64 [bar], bytes;`.
///
/// # Safety
/// As for [`arrive_expect_tx`].
#[inline(always)]
pub unsafe fn expect_tx(bar: u32, bytes: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { asm!("mbarrier.expect_tx.shared::cta.b64 [{0}], {1};", in(reg32) bar, in(reg32) bytes, options(nostack)) };
}

/// Subtracts `bytes` from the transaction count, as a finished async copy does.
///
/// Emits `mbarrier.complete_tx.shared::cta.b64 [bar], bytes;`.
///
/// # Safety
/// `bar` is an initialised barrier of this block and `bytes` were announced by an expect-tx of
/// the current phase.
#[inline(always)]
pub unsafe fn complete_tx(bar: u32, bytes: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.complete_tx.shared::cta.b64 [{0}], {1};", in(reg32) bar, in(reg32) bytes, options(nostack))
    };
}

/// Tests whether the phase with parity `parity` has completed, possibly suspending the thread
/// for a system-defined time first. `true` means complete (with acquire semantics at CTA scope).
///
/// Emits `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;`.
///
/// # Safety
/// `bar` is an initialised barrier of this block; `parity` (0 or 1) names the current or the
/// immediately preceding phase (never two phases behind).
#[inline(always)]
pub unsafe fn try_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("{{ .reg .pred %p; mbarrier.try_wait.parity.shared::cta.b64 %p, [{b}], {ph}; selp.u32 {d}, 1, 0, %p; }}",
             b = in(reg32) bar, ph = in(reg32) parity, d = out(reg32) done, options(nostack))
    };
    done != 0
}

/// As [`try_wait_parity`], with a suspend-time hint of `suspend_ns` nanoseconds.
///
/// Emits `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity, suspend_ns;`.
///
/// # Safety
/// As for [`try_wait_parity`].
#[inline(always)]
pub unsafe fn try_wait_parity_suspend(bar: u32, parity: u32, suspend_ns: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("{{ .reg .pred %p; mbarrier.try_wait.parity.shared::cta.b64 %p, [{b}], {ph}, {ns}; selp.u32 {d}, 1, 0, %p; }}",
             b = in(reg32) bar, ph = in(reg32) parity, ns = in(reg32) suspend_ns, d = out(reg32) done,
             options(nostack))
    };
    done != 0
}

/// As [`try_wait_parity`], acquiring at cluster scope: pairs with arrivals from other CTAs
/// ([`arrive_remote_release_cluster`]) so their prior writes are visible.
///
/// Emits `mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [bar], parity;`.
///
/// # Safety
/// As for [`try_wait_parity`].
#[inline(always)]
pub unsafe fn try_wait_parity_acquire_cluster(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("{{ .reg .pred %p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p, [{b}], {ph}; selp.u32 {d}, 1, 0, %p; }}",
             b = in(reg32) bar, ph = in(reg32) parity, d = out(reg32) done, options(nostack))
    };
    done != 0
}

/// Polls (never suspends) whether the phase with parity `parity` has completed.
///
/// Emits `mbarrier.test_wait.parity.shared::cta.b64 p, [bar], parity;`.
///
/// # Safety
/// As for [`try_wait_parity`].
#[inline(always)]
pub unsafe fn test_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("{{ .reg .pred %p; mbarrier.test_wait.parity.shared::cta.b64 %p, [{b}], {ph}; selp.u32 {d}, 1, 0, %p; }}",
             b = in(reg32) bar, ph = in(reg32) parity, d = out(reg32) done, options(nostack))
    };
    done != 0
}

/// Arrives once, with release at cluster scope, on a barrier of (possibly) another CTA of the
/// cluster. `remote_bar` is a `.shared::cluster` address from
/// [`super::cluster::mapa_shared_cluster`]; a remote arrive cannot return a state (`_` sink).
///
/// Emits `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote_bar];`.
///
/// # Safety
/// `remote_bar` addresses an initialised barrier in a CTA of this cluster that is still running
/// (its init was published with a cluster barrier); the arrival does not exceed its pending count.
#[inline(always)]
pub unsafe fn arrive_remote_release_cluster(remote_bar: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{0}];", in(reg32) remote_bar, options(nostack))
    };
}

/// Arrives once, with release at CTA scope only, on a barrier of (possibly) another CTA of the
/// cluster (`remote_bar` as for [`arrive_remote_release_cluster`]). The cluster-scope form is
/// compiled to `MEMBAR.ALL.GPU` before the arrive (checked in the sm_90a SASS); this one is a
/// bare `SYNCS.ARRIVE`, for hand-overs that order no generic memory accesses across CTAs (a
/// ring slot whose wgmma reads completed, refilled by async copies).
///
/// Emits `mbarrier.arrive.release.cta.shared::cluster.b64 _, [remote_bar];`.
///
/// # Safety
/// As for [`arrive_remote_release_cluster`].
#[inline(always)]
pub unsafe fn arrive_remote_release_cta(remote_bar: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.arrive.release.cta.shared::cluster.b64 _, [{0}];", in(reg32) remote_bar, options(nostack))
    };
}

/// Adds `bytes` to the expected transaction count of a barrier of (possibly) another CTA of the
/// cluster and arrives once on it.
///
/// Emits `mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [remote_bar], bytes;`.
///
/// # Safety
/// As for [`arrive_remote_release_cluster`] and [`arrive_expect_tx`].
#[inline(always)]
pub unsafe fn arrive_expect_tx_remote_release_cluster(remote_bar: u32, bytes: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [{0}], {1};",
             in(reg32) remote_bar, in(reg32) bytes, options(nostack))
    };
}
