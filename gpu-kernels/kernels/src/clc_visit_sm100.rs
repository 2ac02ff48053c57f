//! CLC-scheduled kernels that do no math (sm_100a): one CTA per tile is launched, and running
//! CTAs (clusters) steal the tiles of unlaunched ones through cluster launch control, recording
//! per tile how often it was visited and by whom. They are the Blackwell counterpart of
//! `persistent_static_visit` and will prove on a B200 what the CPU simulation in `logic::clc`
//! checks today: every tile exactly once, no request after a failed cancel. **Compile-verified,
//! not run** (no Blackwell GPU here).
//!
//! Roles: every warp reads every response (4 reader warps); warp 0 also issues. Shared memory:
//! one `ClcPipeline<2>` (launch with at least 128 bytes of dynamic shared memory).

use warpforge_dsl::abi::TileVisit;
use warpforge_dsl::atomic::AtomicCell;
use warpforge_dsl::blackwell::clc::{ClcCursor, ClcPipeline};
use warpforge_dsl::cluster;
use warpforge_dsl::kernel;
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, sm_id, thread_rank, warp_id};
use warpforge_dsl::warp::elect_one;

const CLC_SLOTS: usize = 2;
const READER_WARPS: u32 = 4;

/// The shared loop: `visits[tile].count += 1` for every tile this CTA computes.
///
/// # Safety
/// `visits` has one zeroed entry per CTA of the grid; 128 threads; when `in_cluster`, the launch
/// has clusters and every CTA of the cluster runs this.
#[inline(always)]
unsafe fn visit_tiles(visits: *mut TileVisit, in_cluster: bool) {
    let mut smem = DynamicShared::window();
    let clc = ClcPipeline::<CLC_SLOTS>::alloc(&mut smem);
    if thread_rank() == 0 {
        // SAFETY: one thread, before the barriers below.
        unsafe { clc.init(READER_WARPS) };
    }
    // SAFETY: every thread of the block (and of the cluster) reaches these barriers.
    unsafe {
        sync_threads();
        if in_cluster {
            cluster::sync();
        }
    }
    // SAFETY: all lanes of every warp are converged here.
    let elected = unsafe { elect_one() };
    let mut cursor = ClcCursor::<CLC_SLOTS>::start();
    let mut iteration = 0;
    while let Some(tile) = cursor.tile() {
        if warp_id() == 0 {
            // SAFETY: warp 0 is the only issuing warp, once per tile, before its advance.
            unsafe { cursor.request(&clc, elected.as_ref()) };
        }
        if thread_rank() == 0 {
            // SAFETY: tile < grid size = length of `visits`.
            let v = unsafe { visits.add(tile as usize) };
            // SAFETY: `count` is only accessed atomically while the kernel runs.
            let count = unsafe { AtomicCell::new(&raw mut (*v).count) };
            count.fetch_add(1);
            // SAFETY: in-bounds plain stores; racing writers would already show as count > 1.
            unsafe {
                (*v).worker = block_idx().x;
                (*v).iteration = iteration;
                (*v).sm = sm_id();
            }
        }
        // SAFETY: each of the 4 reader warps, converged, once per tile.
        unsafe { cursor.advance(&clc, elected.as_ref()) };
        iteration += 1;
    }
    if in_cluster {
        // SAFETY: peers may still arrive on this CTA's barriers until every CTA is done.
        unsafe { cluster::sync() };
    }
}

/// CLC visit with one-CTA clusters: grid = one CTA per tile.
///
/// # Safety
/// `visits` points to `gridDim.x` zeroed [`TileVisit`]s; 128 threads; ≥ 128 B dynamic smem.
#[kernel(threads = 128)]
pub unsafe fn clc_visit_sm100(visits: *mut TileVisit) {
    // SAFETY: forwarded launch contract.
    unsafe { visit_tiles(visits, false) };
}

/// CLC visit with 2-CTA clusters: rank 0 issues the multicast request, both CTAs take
/// `first + rank` of each stolen cluster.
///
/// # Safety
/// As [`clc_visit_sm100`], with an even grid.
#[kernel(threads = 128, cluster = (2, 1, 1))]
pub unsafe fn clc_visit_cluster2_sm100(visits: *mut TileVisit) {
    // SAFETY: forwarded launch contract.
    unsafe { visit_tiles(visits, true) };
}
