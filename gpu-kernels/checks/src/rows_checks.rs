//! Hardware check of `parts::rows`, the register-tile vocabulary of attention, apart from any
//! pipeline: one warpgroup (128 threads, one block) takes a 64 × 128 f32 tile `x` (row-major)
//! into an m64n128 accumulator by the fragment map, and writes
//!
//! - `out[0 .. 128]`: per row `r`, `(row_max, row_sum)` at `2r, 2r + 1` (the quad reductions);
//! - `out[128 .. 128 + 64·128]`: P of one `OnlineSoftmax` step with `scale` (base-2 units:
//!   the softmax scale times log2 e; row-major), then
//!   `out[8320 .. 8320 + 128]`: per row `(max, total)` of the softmax state;
//! - `out[8448 .. 8448 + 64·64]`: `P·I` by RS wgmma (P rounded to bf16 by `AFragments8`, I the
//!   128 × 64 identity written MN-major into shared memory with generic stores): element
//!   (r, n) must be P[r][n] rounded to bf16 (row-major, 64 columns).
//!
//! `tests/gpu_attention.rs` (`rows_vocabulary_on_the_gpu`) checks all three against the CPU.

use warpforge_dsl::kernel;
use warpforge_dsl::logic::acc_rows::slot_row;
use warpforge_dsl::logic::fragment::acc_coord;
use warpforge_dsl::num::Bf16;
use warpforge_dsl::parts::rows::{self, AFragments, AFragments8, OnlineSoftmax};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::{fence_proxy_async_shared, sync_threads};
use warpforge_dsl::thread::thread_rank;
use warpforge_dsl::tile::{SmemTileMn, Swizzle128B};
use warpforge_dsl::warpgroup;
use warpforge_dsl::warpgroup::acc::{Acc64x64F32, Acc64x128F32, Accumulator};

/// Offsets of the three outputs in `out`.
pub const ROWS_OUT_P: usize = 128;
/// Offset of the softmax state.
pub const ROWS_OUT_STATE: usize = ROWS_OUT_P + 64 * 128;
/// Offset of `P·I`.
pub const ROWS_OUT_PV: usize = ROWS_OUT_STATE + 128;
/// Dynamic shared memory the entry needs: the identity (128 × 64 bf16) and alignment slack.
pub const ROWS_SMEM_BYTES: u32 = 128 * 64 * 2 + 1024;

/// The V operand: 128 rows of K (keys) × 64 columns, MN-major. // (128, 64)
type Identity = SmemTileMn<Bf16, 128, 64, 1, Swizzle128B>;

/// See the module doc.
///
/// # Safety
/// One block of 128 threads with [`ROWS_SMEM_BYTES`] of dynamic shared memory; `x` holds
/// 64 × 128 f32, `out` `ROWS_OUT_PV + 64 · 64`.
#[kernel(threads = 128)]
pub unsafe fn rows_vocab_sm90a(x: *const f32, scale: f32, out: *mut f32) {
    let t = thread_rank();
    let mut acc = Acc64x128F32::ZERO;
    acc.for_each_mut(|i, v| {
        let (r, c) = acc_coord(t, i as u32);
        // SAFETY: inside the 64 × 128 input (contract).
        *v = unsafe { *x.add((r * 128 + c) as usize) };
    });
    // SAFETY: the whole warpgroup is here, convergent.
    let (max, sum) = unsafe { (rows::row_max(&acc), rows::row_sum(&acc)) };
    let mut softmax = OnlineSoftmax::START;
    // SAFETY: as above.
    let total = unsafe {
        softmax.step(&mut acc, scale);
        softmax.total()
    };
    if t % 4 == 0 {
        for slot in 0..2 {
            let r = slot_row(t, slot) as usize;
            // SAFETY: inside `out` (contract).
            unsafe {
                *out.add(2 * r) = max.get(slot);
                *out.add(2 * r + 1) = sum.get(slot);
                *out.add(ROWS_OUT_STATE + 2 * r) = softmax.max.get(slot);
                *out.add(ROWS_OUT_STATE + 2 * r + 1) = total.get(slot);
            }
        }
    }
    acc.for_each(|i, v| {
        let (r, c) = acc_coord(t, i as u32);
        // SAFETY: inside `out` (contract).
        unsafe { *out.add(ROWS_OUT_P + (r * 128 + c) as usize) = v };
    });

    let mut smem = DynamicShared::window();
    let identity = Identity::alloc(&mut smem);
    let tile = identity.block(0);
    for e in (t..128 * 64).step_by(128) {
        let (key, n) = (e / 64, e % 64);
        // SAFETY: (key, n) inside the 128 × 64 tile; each element written by one thread.
        unsafe { tile.write(key, n, Bf16::from_f32(if key == n { 1.0 } else { 0.0 })) };
    }
    fence_proxy_async_shared();
    // SAFETY: all 128 threads.
    unsafe { sync_threads() };
    let probs = AFragments8::of::<Bf16, _>(&acc);
    let mut pv = Acc64x64F32::ZERO;
    // SAFETY: the whole warpgroup, convergently; the identity is written and fenced; the wait
    // covers the wgmmas before `pv` is read.
    unsafe {
        warpgroup::fence();
        for k in 0..AFragments8::STEPS {
            warpgroup::mma_rs(&mut pv, probs.step(k), &identity, k, k > 0);
        }
        warpgroup::commit();
        warpgroup::wait::<0>();
    }
    pv.for_each(|i, v| {
        let (r, c) = acc_coord(t, i as u32);
        // SAFETY: inside `out` (contract).
        unsafe { *out.add(ROWS_OUT_PV + (r * 64 + c) as usize) = v };
    });
}
