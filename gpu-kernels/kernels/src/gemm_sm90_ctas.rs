//! The two CTA arrangements of the sm_90 GEMM bodies (16-bit and block-scaled FP8): one CTA
//! per worker, or 2 × 1 clusters whose CTAs take vertically adjacent tiles and share each B
//! slice by multicast. Everything that differs between them (release policy, worker barrier,
//! the B load) is here, so the bodies have no branch on the arrangement.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::mbarrier::Mbarrier;
use warpforge_dsl::parts::mainloop::{OwnAndPeer, OwnCta, StageRelease};
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::tile::{SmemTileRing, Swizzle128B};
use warpforge_dsl::{cluster, tma};
/// Multicast mask: both CTAs of the cluster.
const BOTH_CTAS: u16 = 0b11;

/// Single CTAs, or 2 × 1 clusters whose CTAs take vertically adjacent tiles and share each B
/// slice by multicast: everything that differs between the two arrangements.
pub(crate) trait CtaGroup {
    /// CTAs per worker, stacked along M.
    const CTAS: u32;
    /// How a consumer releases a slot (to every CTA whose multicasts fill it).
    type Release: StageRelease;
    /// This CTA's release policy.
    fn release() -> Self::Release;
    /// This CTA's rank in its worker.
    fn rank() -> u32;
    /// A barrier over the worker's CTAs (a cluster barrier for pairs).
    ///
    /// # Safety
    /// Every non-exited thread of the worker's CTAs reaches it once per call site.
    unsafe fn sync();
    /// Issues the B load of one slot (`BN` rows of `K`; a pair's CTAs load `HALF` = `BN / 2`
    /// rows each, checked at compile time).
    ///
    /// # Safety
    /// As for `tma::load_3d` (the map's box is the tile, or half of it for pairs); one producer
    /// thread; the slot is free in every CTA written.
    unsafe fn load_b<T: Copy, const BN: usize, const HALF: usize, const K: usize, const RING: usize>(
        b_ring: &SmemTileRing<T, BN, K, Swizzle128B, RING>,
        stage: u32,
        b_map: &TensorMap,
        k0_n0_batch: (i32, i32, i32),
        full: &Mbarrier,
    );
}

/// One CTA per worker.
pub(crate) struct Solo;
/// 2 × 1 clusters.
pub(crate) struct Pair;

impl CtaGroup for Solo {
    const CTAS: u32 = 1;
    type Release = OwnCta;
    fn release() -> OwnCta {
        OwnCta
    }
    fn rank() -> u32 {
        0
    }
    unsafe fn sync() {
        // SAFETY: forwarded to the caller.
        unsafe { sync_threads() };
    }
    #[inline(always)]
    unsafe fn load_b<T: Copy, const BN: usize, const HALF: usize, const K: usize, const RING: usize>(
        b_ring: &SmemTileRing<T, BN, K, Swizzle128B, RING>,
        stage: u32,
        b_map: &TensorMap,
        (k0, n0, batch): (i32, i32, i32),
        full: &Mbarrier,
    ) {
        // SAFETY: forwarded to the caller.
        unsafe { tma::load_3d(&b_ring.stage(stage), b_map, k0, n0, batch, full) };
    }
}

impl CtaGroup for Pair {
    const CTAS: u32 = 2;
    type Release = OwnAndPeer;
    fn release() -> OwnAndPeer {
        OwnAndPeer { peer: cluster::rank() ^ 1 }
    }
    fn rank() -> u32 {
        cluster::rank()
    }
    unsafe fn sync() {
        // SAFETY: forwarded to the caller (it also publishes each CTA's barrier inits to the
        // peer before either multicasts into the other).
        unsafe { cluster::sync() };
    }
    #[inline(always)]
    unsafe fn load_b<T: Copy, const BN: usize, const HALF: usize, const K: usize, const RING: usize>(
        b_ring: &SmemTileRing<T, BN, K, Swizzle128B, RING>,
        stage: u32,
        b_map: &TensorMap,
        (k0, n0, batch): (i32, i32, i32),
        full: &Mbarrier,
    ) {
        const { assert!(2 * HALF == BN, "a pair's CTAs load half of B each") };
        // Each CTA loads its half of the slice and multicasts it to both: the slot receives
        // both halves, the bytes its producer announced for a whole B tile.
        let rank = cluster::rank();
        let half = b_ring.stage(stage).rows::<HALF>(rank);
        let n_half = n0 + (rank * HALF as u32) as i32;
        // SAFETY: forwarded to the caller (B's box is half the tile for pairs).
        unsafe { tma::load_3d(tma::multicast(&half, BOTH_CTAS), b_map, k0, n_half, batch, full) };
    }
}
