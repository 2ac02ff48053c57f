//! A persistent kernel that does no math: it walks the static tile schedule and records, per
//! tile, how often it was visited and by whom. It proves the persistent-grid plan and the
//! shared scheduler on hardware exactly as the GEMMs use them.

use warpforge_dsl::abi::TileVisit;
use warpforge_dsl::atomic::AtomicCell;
use warpforge_dsl::kernel;
use warpforge_dsl::logic::schedule::StaticScheduler;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, grid_dim, sm_id, thread_rank};

/// For every tile of a `tiles_m × tiles_n` grid: `visits[tile].count += 1` and the worker,
/// iteration and SM are recorded. Workers are the blocks of the (persistent) grid.
///
/// # Safety
/// `visits` points to `tiles_m · tiles_n` zeroed [`TileVisit`]s. Launch with 128 threads.
#[kernel(threads = 128, min_blocks_per_sm = 1)]
pub unsafe fn persistent_static_visit(tiles_m: u32, tiles_n: u32, visits: *mut TileVisit) {
    let worker = block_idx().x;
    let schedule = StaticScheduler::new(tiles_m, tiles_n, grid_dim().x);
    let mut iteration = 0;
    while let Some(tile) = schedule.tile(worker, iteration) {
        if thread_rank() == 0 {
            // SAFETY: tile.linear < tiles_m · tiles_n, the length of `visits`.
            let v = unsafe { visits.add(tile.linear as usize) };
            // SAFETY: `count` is only ever accessed atomically while the kernel runs.
            let count = unsafe { AtomicCell::new(&raw mut (*v).count) };
            count.fetch_add(1);
            // SAFETY: in-bounds plain stores; racing writers would already show as count > 1.
            unsafe {
                (*v).worker = worker;
                (*v).iteration = iteration;
                (*v).sm = sm_id();
            }
        }
        // Keep the block in lock-step per tile, as a real persistent kernel's roles are.
        // SAFETY: every thread runs the same number of iterations.
        unsafe { sync_threads() };
        iteration += 1;
    }
}
