//! Block reduction: each block sums a grid-stride share of the input and writes one partial.
//!
//! Algorithm: per-thread sum → butterfly shuffle within each warp → one value per warp in
//! static shared memory → warp 0 reduces those. Block size is fixed at 256 (8 warps).

use warpforge_dsl::kernel;
use warpforge_dsl::shared::StaticShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, global_x, grid_stride_x, lane_id, warp_id};
use warpforge_dsl::warp;

/// Threads per block of [`block_sum_f32`].
pub const BLOCK_SUM_THREADS: u32 = 256;
const WARPS: u32 = BLOCK_SUM_THREADS / 32;

/// `partials[blockIdx.x] = Σ x[i]` over the indices `i < n` of this block's grid-stride share.
///
/// # Safety
/// `x` points to `n` valid f32; `partials` to `gridDim.x` f32. Launch with 256 threads.
#[kernel(threads = 256)]
pub unsafe fn block_sum_f32(n: u64, x: *const f32, partials: *mut f32) {
    // SAFETY: declared once, at the top of the kernel.
    let warp_sums = unsafe { StaticShared::<{ WARPS as usize * 4 }, 16>::declare::<f32>() };

    let mut sum = 0.0f32;
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n.
        sum += unsafe { *x.add(i) };
        i += grid_stride_x();
    }
    // SAFETY: all 32 lanes of every warp reach this point (the loop above has no early exit).
    sum = unsafe { warp::sum_f32(sum) };
    if lane_id() == 0 {
        // SAFETY: warp_id() < WARPS for a 256-thread block.
        unsafe { *warp_sums.add(warp_id()).as_mut_ptr() = sum };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { sync_threads() };
    if warp_id() == 0 {
        let lane = lane_id();
        // SAFETY: lanes < WARPS read written slots; the barrier above ordered the writes.
        let v = if lane < WARPS { unsafe { *warp_sums.add(lane).as_mut_ptr() } } else { 0.0 };
        // SAFETY: the whole of warp 0 is here.
        let total = unsafe { warp::sum_f32(v) };
        if lane == 0 {
            // SAFETY: blockIdx.x < gridDim.x, the length of `partials`.
            unsafe { *partials.add(block_idx().x as usize) = total };
        }
    }
}
