//! Thread-block clusters: the split cluster barrier, distributed shared memory (DSMEM)
//! addressing and remote loads/stores (REFERENCE §5).
//!
//! A `.shared::cluster` address names a byte in the shared memory of any CTA of the cluster;
//! [`mapa_shared_cluster`] turns this CTA's shared-window address into the same offset in CTA
//! `rank`. The cluster special registers are in [`super::sreg`].

use core::arch::asm;

macro_rules! cluster_barrier {
    ($($(#[$doc:meta])* $name:ident => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, "`.")]
        ///
        /// # Safety
        /// Every non-exited thread of every CTA of the cluster arrives exactly once per phase and
        /// then waits (arrive and wait alternate per thread), or the cluster hangs; the `.aligned`
        /// forms are executed convergently by whole warps *at the same instruction* — check the
        /// PTX: LLVM may duplicate an `asm!` into both sides of a thread-divergent branch.
        #[inline(always)]
        pub unsafe fn $name() {
            // SAFETY: forwarded to the caller.
            unsafe { asm!($ptx, options(nostack)) };
        }
    )*};
}

cluster_barrier! {
    /// Arrives on the cluster barrier with release semantics (the default).
    barrier_cluster_arrive => "barrier.cluster.arrive;";
    /// Arrives on the cluster barrier with release semantics, spelled out.
    barrier_cluster_arrive_release => "barrier.cluster.arrive.release;";
    /// Arrives on the cluster barrier without ordering memory (pair with a cluster fence when data
    /// must flow): the cheapest way to say "my smem/mbarriers exist".
    barrier_cluster_arrive_relaxed => "barrier.cluster.arrive.relaxed;";
    /// Release arrive executed convergently by the whole warp.
    barrier_cluster_arrive_aligned => "barrier.cluster.arrive.release.aligned;";
    /// Waits for the current cluster-barrier phase with acquire semantics (the default).
    barrier_cluster_wait => "barrier.cluster.wait;";
    /// Waits with acquire semantics, spelled out.
    barrier_cluster_wait_acquire => "barrier.cluster.wait.acquire;";
    /// Acquire wait executed convergently by the whole warp.
    barrier_cluster_wait_aligned => "barrier.cluster.wait.acquire.aligned;";
}

/// Acquire-release fence at cluster scope.
///
/// Emits `fence.acq_rel.cluster;`.
///
/// # Safety
/// None: a fence only orders.
#[inline(always)]
pub unsafe fn fence_acq_rel_cluster() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.acq_rel.cluster;", options(nostack)) };
}

/// The `.shared::cluster` address of the byte at this CTA's shared-window address `addr` in the
/// CTA of rank `rank`.
///
/// Emits `mapa.shared::cluster.u32 r, addr, rank;`.
///
/// # Safety
/// `rank < %cluster_nctarank`; `addr` is a shared-window address of this CTA.
#[inline(always)]
pub unsafe fn mapa_shared_cluster(addr: u32, rank: u32) -> u32 {
    let r: u32;
    // SAFETY: pure address arithmetic.
    unsafe {
        asm!("mapa.shared::cluster.u32 {0}, {1}, {2};", out(reg32) r, in(reg32) addr, in(reg32) rank,
             options(pure, nomem, nostack))
    };
    r
}

/// Rank of the CTA that owns the `.shared::cluster` address `addr`.
///
/// Emits `getctarank.shared::cluster.u32 r, addr;`.
///
/// # Safety
/// `addr` is a `.shared::cluster` address of this cluster.
#[inline(always)]
pub unsafe fn getctarank_shared_cluster(addr: u32) -> u32 {
    let r: u32;
    // SAFETY: pure address arithmetic.
    unsafe {
        asm!("getctarank.shared::cluster.u32 {0}, {1};", out(reg32) r, in(reg32) addr, options(pure, nomem, nostack))
    };
    r
}

/// Loads a `u32` from (possibly another CTA's) shared memory.
///
/// Emits `ld.shared::cluster.u32 v, [addr];`.
///
/// # Safety
/// `addr` is a 4-byte-aligned `.shared::cluster` address in a CTA of this cluster that has not
/// exited; the access does not race with a write (order it with a cluster barrier).
#[inline(always)]
pub unsafe fn ld_shared_cluster_u32(addr: u32) -> u32 {
    let v: u32;
    // SAFETY: forwarded to the caller.
    unsafe { asm!("ld.shared::cluster.u32 {0}, [{1}];", out(reg32) v, in(reg32) addr, options(nostack)) };
    v
}

/// Stores a `u32` into (possibly another CTA's) shared memory.
///
/// Emits `st.shared::cluster.u32 [addr], v;`.
///
/// # Safety
/// As for [`ld_shared_cluster_u32`].
#[inline(always)]
pub unsafe fn st_shared_cluster_u32(addr: u32, value: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { asm!("st.shared::cluster.u32 [{0}], {1};", in(reg32) addr, in(reg32) value, options(nostack)) };
}

/// Whether the launch has explicit cluster dimensions (`%is_explicit_cluster` is a predicate, so
/// it is converted inside the asm scope).
///
/// Emits `mov.pred p, %is_explicit_cluster; selp.u32 r, 1, 0, p;`.
///
/// # Safety
/// None beyond running on sm_90+.
#[inline(always)]
pub unsafe fn is_explicit_cluster() -> bool {
    let r: u32;
    // SAFETY: a special-register read has no side effects.
    unsafe {
        asm!("{{ .reg .pred %p; mov.pred %p, %is_explicit_cluster; selp.u32 {0}, 1, 0, %p; }}", out(reg32) r,
             options(pure, nomem, nostack))
    };
    r != 0
}
