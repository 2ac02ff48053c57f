//! Assembly coverage of the Hopper L0 wrappers (sm_90a): one kernel that calls every raw PTX
//! form of `ptx::{mbarrier, tma, cluster, warpgroup, wgmma}` not already used by the typed
//! layer in `hopper_async_checks`, so that ptxas assembles each spelling for sm_90a (a wrapper
//! that is never called emits nothing and would go unchecked).
//!
//! It lives in the coverage crate, not the kernel library: it imports `ptx::` directly (its job
//! is to check the raw layer itself), it is never launched (operands are placeholders), and it
//! must not bloat the shipped PTX. `tests/builder.rs` builds and assembles it.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::kernel;
use warpforge_dsl::ptx::wgmma::{self, RegA, WgmmaRs, WgmmaSs, dtype};
use warpforge_dsl::ptx::{cluster, mbarrier, smem, sreg, tma, warpgroup};

/// Raw register bits of an accumulator element.
trait Bits: Copy {
    fn bits(self) -> u32;
}
impl Bits for f32 {
    fn bits(self) -> u32 {
        self.to_bits()
    }
}
impl Bits for u32 {
    fn bits(self) -> u32 {
        self
    }
}

/// One SS and one RS wgmma of a K-major form, accumulator written to `out`.
///
/// # Safety
/// Assembly coverage only (see the file doc).
#[inline(always)]
unsafe fn exercise<Acc, A, B>(out: *mut u32, a_desc: u64, b_desc: u64, a: &RegA)
where
    Acc: WgmmaSs<A, B> + WgmmaRs<A, B>,
    Acc::Elem: Bits,
{
    let mut acc = Acc::ZERO;
    // SAFETY: assembly coverage only.
    unsafe {
        warpgroup::wgmma_fence();
        acc.mma_ss::<1, -1, 0, 0>(a_desc, b_desc, false);
        acc.mma_rs::<-1, 1, 0>(a, b_desc, true);
        warpgroup::wgmma_commit_group();
        warpgroup::wgmma_wait_group::<0>();
        acc.for_each(|i, v| out.add(i).write_volatile(v.bits()));
    }
}

/// As [`exercise`], plus the transposed (MN-major) immediates of the 16-bit forms.
///
/// # Safety
/// Assembly coverage only.
#[inline(always)]
unsafe fn exercise_transposed<Acc, A, B>(out: *mut u32, a_desc: u64, b_desc: u64, a: &RegA)
where
    Acc: WgmmaSs<A, B> + WgmmaRs<A, B>,
    Acc::Elem: Bits,
{
    let mut acc = Acc::ZERO;
    // SAFETY: assembly coverage only.
    unsafe {
        warpgroup::wgmma_fence();
        acc.mma_ss::<1, 1, 1, 1>(a_desc, b_desc, false);
        acc.mma_rs::<1, 1, 1>(a, b_desc, true);
        warpgroup::wgmma_commit_group();
        warpgroup::wgmma_wait_group::<1>();
        warpgroup::wgmma_wait_group::<0>();
        acc.for_each(|i, v| out.add(i).write_volatile(v.bits()));
    }
}

/// Calls every remaining L0 wrapper once. Assembly coverage only: never launched.
///
/// # Safety
/// Not to be launched.
#[kernel(threads = 128, cluster = (2, 1, 1))]
pub unsafe fn hopper_l0_forms_sm90a(#[grid_constant] map: &TensorMap, g: *mut u8, out: *mut u32, form: u32) {
    // SAFETY: assembly coverage only; nothing here runs.
    unsafe {
        let base = smem::dynamic_smem_base();
        let (dst, bar) = (base + 1024, base + 64);
        let peer = sreg::cluster_ctarank() ^ 1;

        mbarrier::init(bar, 1);
        mbarrier::fence_mbarrier_init_release_cluster();
        let mut sink = mbarrier::arrive(bar) ^ mbarrier::arrive_count(bar, 2) ^ mbarrier::arrive_release_cluster(bar);
        sink ^= mbarrier::arrive_expect_tx(bar, 4096);
        mbarrier::expect_tx(bar, 16);
        mbarrier::complete_tx(bar, 16);
        let remote_bar = cluster::mapa_shared_cluster(bar, peer);
        mbarrier::arrive_remote_release_cluster(remote_bar);
        mbarrier::arrive_expect_tx_remote_release_cluster(remote_bar, 16);
        let waited = mbarrier::try_wait_parity(bar, 0) as u32
            + mbarrier::try_wait_parity_suspend(bar, 1, 1000) as u32
            + mbarrier::try_wait_parity_acquire_cluster(bar, 0) as u32
            + mbarrier::test_wait_parity(bar, 1) as u32;

        let (first, last) = (tma::create_policy_evict_first(), tma::create_policy_evict_last());
        tma::prefetch_tensormap(map);
        tma::load_1d(dst, map, 0, bar);
        tma::load_3d(dst, map, 0, 1, 2, bar);
        tma::load_4d(dst, map, 0, 1, 2, 3, bar);
        tma::prefetch_l2_4d(map, 0, 1, 2, 3);
        tma::load_5d(dst, map, 0, 1, 2, 3, 4, bar);
        tma::load_1d_cache_hint(dst, map, 0, bar, first);
        tma::load_3d_cache_hint(dst, map, 0, 1, 2, bar, last);
        tma::load_4d_cache_hint(dst, map, 0, 1, 2, 3, bar, first);
        tma::load_5d_cache_hint(dst, map, 0, 1, 2, 3, 4, bar, last);
        tma::load_1d_multicast(dst, map, 0, bar, 3);
        tma::load_3d_multicast(dst, map, 0, 1, 2, bar, 3);
        tma::load_4d_multicast(dst, map, 0, 1, 2, 3, bar, 3);
        tma::load_5d_multicast(dst, map, 0, 1, 2, 3, 4, bar, 3);
        tma::load_1d_multicast_cache_hint(dst, map, 0, bar, 3, first);
        tma::load_2d_multicast_cache_hint(dst, map, 0, 1, bar, 3, first);
        tma::load_3d_multicast_cache_hint(dst, map, 0, 1, 2, bar, 3, last);
        tma::load_4d_multicast_cache_hint(dst, map, 0, 1, 2, 3, bar, 3, last);
        tma::load_5d_multicast_cache_hint(dst, map, 0, 1, 2, 3, 4, bar, 3, last);
        tma::bulk_load(dst, g, 1024, bar);
        tma::bulk_copy_to_cluster(cluster::mapa_shared_cluster(dst, peer), dst, 1024, remote_bar);
        tma::fence_proxy_async();
        tma::fence_proxy_async_shared_cluster();
        tma::store_1d(map, 0, dst);
        tma::store_3d(map, 0, 1, 2, dst);
        tma::store_4d(map, 0, 1, 2, 3, dst);
        tma::store_5d(map, 0, 1, 2, 3, 4, dst);
        tma::reduce_add_1d(map, 0, dst);
        tma::reduce_add_3d(map, 0, 1, 2, dst);
        tma::reduce_add_4d(map, 0, 1, 2, 3, dst);
        tma::reduce_add_5d(map, 0, 1, 2, 3, 4, dst);
        tma::bulk_store(g, dst, 1024);
        tma::bulk_commit_group();
        tma::bulk_wait_group_read::<1>();
        tma::bulk_wait_group::<0>();

        cluster::barrier_cluster_arrive();
        cluster::barrier_cluster_wait();
        cluster::barrier_cluster_arrive_relaxed();
        cluster::fence_acq_rel_cluster();
        cluster::barrier_cluster_wait();
        cluster::barrier_cluster_arrive_aligned();
        cluster::barrier_cluster_wait_aligned();
        let remote = cluster::mapa_shared_cluster(dst, peer);
        cluster::st_shared_cluster_u32(remote, peer);
        let owner = cluster::getctarank_shared_cluster(remote) + cluster::ld_shared_cluster_u32(remote);
        let shape = sreg::clusterid_y()
            + sreg::clusterid_z()
            + sreg::nclusterid_y()
            + sreg::nclusterid_z()
            + sreg::cluster_ctaid_y()
            + sreg::cluster_ctaid_z()
            + sreg::cluster_nctaid_x()
            + sreg::cluster_nctaid_y()
            + sreg::cluster_nctaid_z()
            + cluster::is_explicit_cluster() as u32;

        warpgroup::griddepcontrol_wait();
        warpgroup::griddepcontrol_launch_dependents();
        let row = dst + 16 * sreg::laneid();
        let (m0,) = warpgroup::ldmatrix_x1(row);
        let (m1, m2) = warpgroup::ldmatrix_x2(row);
        let (m3, m4, m5, m6) = warpgroup::ldmatrix_x4(row);
        let (t0,) = warpgroup::ldmatrix_x1_trans(row);
        let (t1, t2) = warpgroup::ldmatrix_x2_trans(row);
        let (t3, t4, t5, t6) = warpgroup::ldmatrix_x4_trans(row);
        warpgroup::stmatrix_x1(row, m0);
        warpgroup::stmatrix_x2(row, m1, m2);
        warpgroup::stmatrix_x4(row, m3, m4, m5, m6);
        warpgroup::stmatrix_x1_trans(row, t0);
        warpgroup::stmatrix_x2_trans(row, t1, t2);
        warpgroup::stmatrix_x4_trans(row, t3, t4, t5, t6);
        mbarrier::inval(bar);

        *out = (sink as u32) ^ waited ^ owner ^ shape;
        let out = out.add(1);
        let (ad, bd) = (base as u64, (base as u64) << 1);
        let a = RegA(m0, m1, m2, m3);
        // One wgmma form per branch: registers are allocated per branch, not summed.
        match form {
            0 => exercise_transposed::<wgmma::Acc64x256F32, dtype::Bf16, dtype::Bf16>(out, ad, bd, &a),
            1 => exercise_transposed::<wgmma::Acc64x200F32, dtype::Bf16, dtype::Bf16>(out, ad, bd, &a),
            2 => exercise_transposed::<wgmma::Acc64x24F32, dtype::F16, dtype::F16>(out, ad, bd, &a),
            3 => exercise_transposed::<wgmma::Acc64x16F16, dtype::F16, dtype::F16>(out, ad, bd, &a),
            4 => exercise::<wgmma::Acc64x32F32, dtype::Tf32, dtype::Tf32>(out, ad, bd, &a),
            5 => exercise::<wgmma::Acc64x64F32, dtype::E4m3, dtype::E4m3>(out, ad, bd, &a),
            6 => exercise::<wgmma::Acc64x16F32, dtype::E4m3, dtype::E5m2>(out, ad, bd, &a),
            7 => exercise::<wgmma::Acc64x8F32, dtype::E5m2, dtype::E4m3>(out, ad, bd, &a),
            8 => exercise::<wgmma::Acc64x48F32, dtype::E5m2, dtype::E5m2>(out, ad, bd, &a),
            9 => exercise::<wgmma::Acc64x256F16, dtype::E4m3, dtype::E4m3>(out, ad, bd, &a),
            10 => exercise::<wgmma::Acc64x8F16, dtype::E4m3, dtype::E5m2>(out, ad, bd, &a),
            11 => exercise::<wgmma::Acc64x32F16, dtype::E5m2, dtype::E4m3>(out, ad, bd, &a),
            12 => exercise::<wgmma::Acc64x128F16, dtype::E5m2, dtype::E5m2>(out, ad, bd, &a),
            _ => {}
        }
    }
}
