//! L2 scope `cluster::`: the cluster barrier and distributed shared memory (REFERENCE §5).
//!
//! A [`ClusterPtr`] is a `.shared::cluster` address: the same smem-plan offset in a chosen CTA of
//! the cluster. Remote accesses are `unsafe`: the peer must be running and its data initialised,
//! which only a cluster barrier establishes.

use core::marker::PhantomData;

use crate::ptx::{cluster as raw, sreg};
use crate::shared::SharedPtr;

/// Rank of this CTA in its cluster.
#[inline(always)]
pub fn rank() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::cluster_ctarank() }
}

/// CTAs in this cluster.
#[inline(always)]
pub fn size() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::cluster_nctarank() }
}

/// Whether the launch has explicit cluster dimensions.
#[inline(always)]
pub fn is_explicit() -> bool {
    // SAFETY: special-register read.
    unsafe { raw::is_explicit_cluster() }
}

/// Arrive (release) + wait (acquire) on the cluster barrier: all CTAs' prior writes, smem and
/// mbarrier inits included, are visible afterwards.
///
/// Every CTA on sm_90+ belongs to a cluster (1 × 1 × 1 when launched without one), so this is
/// also a block barrier. It uses the non-`.aligned` forms on purpose: `asm!` blocks are not
/// `convergent` to LLVM, which may duplicate a barrier into both sides of a thread-divergent
/// branch (seen with `if thread_rank() == 0 { .. } barrier; if thread_rank() == 0 { .. }`:
/// jump threading gives lane 0 and lanes 1–31 different copies). An `.aligned` barrier (which
/// `bar.sync` is) reached at different PCs within a warp is undefined; these forms are not.
///
/// # Safety
/// Every non-exited thread of every CTA of the cluster calls it.
#[inline(always)]
pub unsafe fn sync() {
    // SAFETY: forwarded to the caller.
    unsafe {
        raw::barrier_cluster_arrive_release();
        raw::barrier_cluster_wait_acquire();
    }
}

/// The arrive half of [`sync`], to overlap independent work before [`wait`].
///
/// # Safety
/// As for [`sync`]; each thread alternates arrive and wait.
#[inline(always)]
pub unsafe fn arrive() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::barrier_cluster_arrive_release() }
}

/// An arrive that orders nothing ("I exist"), e.g. at kernel start before the smem plan is used.
///
/// # Safety
/// As for [`arrive`].
#[inline(always)]
pub unsafe fn arrive_relaxed() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::barrier_cluster_arrive_relaxed() }
}

/// The wait half of [`sync`].
///
/// # Safety
/// As for [`arrive`].
#[inline(always)]
pub unsafe fn wait() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::barrier_cluster_wait_acquire() }
}

/// Acquire-release fence at cluster scope.
#[inline(always)]
pub fn fence_acq_rel() {
    // SAFETY: a fence has no preconditions.
    unsafe { raw::fence_acq_rel_cluster() }
}

/// A `T` in the shared memory of some CTA of this cluster.
#[derive(Debug)]
pub struct ClusterPtr<T> {
    addr: u32,
    _ty: PhantomData<*mut T>,
}

impl<T> Clone for ClusterPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ClusterPtr<T> {}

/// The address of `local`'s offset in the CTA of rank `rank`.
///
/// # Safety
/// `rank < size()`.
#[inline(always)]
pub unsafe fn map<T>(local: SharedPtr<T>, rank: u32) -> ClusterPtr<T> {
    // SAFETY: forwarded to the caller; mapa is pure arithmetic.
    ClusterPtr { addr: unsafe { raw::mapa_shared_cluster(local.addr(), rank) }, _ty: PhantomData }
}

impl<T> ClusterPtr<T> {
    /// The `.shared::cluster` address.
    #[inline(always)]
    pub const fn addr(self) -> u32 {
        self.addr
    }

    /// Rank of the CTA this address lives in.
    #[inline(always)]
    pub fn owner(self) -> u32 {
        // SAFETY: the address came from `map`.
        unsafe { raw::getctarank_shared_cluster(self.addr) }
    }
}

impl ClusterPtr<u32> {
    /// Loads the value.
    ///
    /// # Safety
    /// The owning CTA is running and the access does not race with a write (order both with a
    /// cluster barrier or release/acquire).
    #[inline(always)]
    pub unsafe fn read(self) -> u32 {
        // SAFETY: forwarded to the caller.
        unsafe { raw::ld_shared_cluster_u32(self.addr) }
    }

    /// Stores the value.
    ///
    /// # Safety
    /// As for [`Self::read`].
    #[inline(always)]
    pub unsafe fn write(self, value: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { raw::st_shared_cluster_u32(self.addr, value) }
    }
}
