//! A kernel author's own device crate on warpforge's DSL: a 256-bin byte histogram (here) and,
//! for Hopper, a GEMM with its own epilogue assembled from the DSL's L3 parts (`gemm.rs`).
//!
//! The histogram: each block counts into a static shared-memory histogram with shared atomics,
//! then adds its counts to the global histogram with one global atomic per non-empty bin.
#![no_std]
#![feature(abi_ptx)]

// wgmma, TMA and setmaxnreg are Hopper's: the builder sets `warpforge_arch` per module.
#[cfg(warpforge_arch = "sm_90a")]
mod gemm;
pub mod gemm_abi;
/// The logic crate under the name the shared `gemm_abi.rs` uses on both sides.
use warpforge_dsl::logic;

use warpforge_dsl::atomic::{AtomicCell, shared_fetch_add};
use warpforge_dsl::kernel;
use warpforge_dsl::shared::StaticShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_size, global_x, grid_stride_x, thread_rank};

/// Number of bins: one per byte value.
pub const BINS: u32 = 256;

/// `hist[b] += |{ i < n : bytes[i] == b }|`.
///
/// # Safety
/// `bytes` holds `n` bytes, `hist` 256 u32 counters accessed only atomically during the launch.
#[kernel(max_threads = 1024)]
pub unsafe fn histogram_u8(n: u64, bytes: *const u8, hist: *mut u32) {
    // SAFETY: declared once, at the top of the kernel.
    let local = unsafe { StaticShared::<{ BINS as usize * 4 }, 16>::declare::<u32>() };
    let mut b = thread_rank();
    while b < BINS {
        // SAFETY: b < BINS, inside the static array.
        unsafe { *local.add(b).as_mut_ptr() = 0 };
        b += block_size();
    }
    // SAFETY: every thread of the block reaches each barrier.
    unsafe { sync_threads() };
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n.
        let value = unsafe { *bytes.add(i) } as u32;
        shared_fetch_add(local.add(value), 1);
        i += grid_stride_x();
    }
    // SAFETY: as above.
    unsafe { sync_threads() };
    let mut b = thread_rank();
    while b < BINS {
        // SAFETY: b < BINS.
        let count = unsafe { *local.add(b).as_mut_ptr() };
        if count != 0 {
            // SAFETY: b < 256 and the launch contract says hist is accessed only atomically.
            unsafe { AtomicCell::new(hist.add(b as usize)) }.fetch_add(count);
        }
        b += block_size();
    }
}
