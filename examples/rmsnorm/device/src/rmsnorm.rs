//! Fused RMSNorm over bf16 rows: `y = x / √(mean(x²) + eps) · w`, f32 math, bf16 out.
//!
//! One block per row. Each thread holds up to four 16-byte vectors of its row in registers
//! (`Regs4<Bf16x8>`, vector `j` at `thread + j·block` of the row), so x is read once: squares
//! summed per thread, a block sum ([`ReduceScratch`]), one `rsqrt`, then `x · scale · w` per
//! element, stored as bf16. The host sizes the block to the row (whole warps, at most 1024, so
//! rows up to `abi::RMSNORM_MAX_COLS` elements). A memory-bound example of the DSL's
//! vocabulary: its bandwidth prints from the example's `main`.

use warpforge_dsl::block::ReduceScratch;
use warpforge_dsl::global::{self, Bf16x8, ReadOnly, ReadOnlyNoL1, Streaming};
use warpforge_dsl::kernel;
use warpforge_dsl::math::{fma, rsqrt};
use warpforge_dsl::num::Bf16;
use warpforge_dsl::regs::{RegArray, Regs4};
use warpforge_dsl::thread::{block_idx, block_size, thread_rank};

use crate::abi::{RMSNORM_VECTOR, RMSNORM_VECTORS_PER_THREAD};

const _: () = assert!(Regs4::<Bf16x8>::LEN == RMSNORM_VECTORS_PER_THREAD as usize);

/// `y[r] = x[r] · rsqrt(mean(x[r]²) + eps) · w` for row `r = blockIdx.x`.
///
/// # Safety
/// `x` and `y` hold `gridDim.x` rows of `cols` bf16 and `w` holds `cols`, all 16-byte aligned;
/// `cols` is a multiple of 8 and at most
/// [`RMSNORM_MAX_COLS`](crate::abi::RMSNORM_MAX_COLS); the block is whole warps with at least
/// `cols / 32` threads; nothing writes `x` or `w`, or touches `y`, during the launch.
#[kernel(max_threads = 1024)]
pub unsafe fn rmsnorm_bf16(x: *const Bf16, w: *const Bf16, y: *mut Bf16, cols: u32, eps: f32) {
    // SAFETY: once, at the top, outside loops.
    let scratch = unsafe { ReduceScratch::<f32>::declare() };
    let vectors = cols / RMSNORM_VECTOR;
    let row = block_idx().x as usize * cols as usize;
    let slot = |j: usize| thread_rank() + j as u32 * block_size();
    let xs = Regs4::from_fn(|j| match slot(j) < vectors {
        // SAFETY: vector `slot(j)` lies inside row `row` of x (launch contract).
        true => unsafe { global::load::<Bf16x8, ReadOnlyNoL1>(x.add(row + 8 * slot(j) as usize)) },
        false => Bf16x8::default(),
    });
    let mut squares = 0.0;
    xs.for_each(|_, v| v.to_f32().for_each(|_, e| squares = fma(e, e, squares)));
    // SAFETY: every thread of the block reaches this, uniformly; the block is whole warps.
    let scale = rsqrt(unsafe { scratch.sum(squares) } / cols as f32 + eps);
    xs.for_each(|j, v| {
        if slot(j) < vectors {
            let at = 8 * slot(j) as usize;
            // SAFETY: vector `slot(j)` of w and of row `row` of y (launch contract).
            unsafe {
                let g = global::load::<Bf16x8, ReadOnly>(w.add(at)).to_f32();
                let out = v.to_f32().zip_with(&g, |e, g| e * scale * g);
                global::store::<_, Streaming>(y.add(row + at), Bf16x8::from_f32(&out));
            }
        }
    });
}
