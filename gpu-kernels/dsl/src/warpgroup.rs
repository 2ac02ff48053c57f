//! L2 scope `warpgroup::`: operations that all 128 threads of a warpgroup (4 consecutive warps,
//! first warp index a multiple of 4) execute together — wgmma and its fence/commit/wait, and
//! register reallocation. Everything here is `unsafe` for one shared reason: a warpgroup
//! operation reached by only part of the warpgroup, or with differing operands, is undefined.
//!
//! `mma(&mut acc, &a_tile, &b_tile, accumulate)` issues the wgmma sequence covering the tiles'
//! whole K, with descriptors built from the tile types; the accumulator type (e.g.
//! `Acc64x128F32`) fixes N, and the element types pick the instruction at compile time.

use crate::logic::fragment::{WARPGROUP_THREADS, acc_coord};
use crate::num::{Bf16, F16};
use crate::ptx::warpgroup as raw;
pub use crate::ptx::wgmma::{Accumulator, RegA, WgmmaRs, WgmmaSs, dtype};
use crate::tile::{SmemTile, SwizzleMode};

/// The accumulator tile types (`Acc64x{N}F32`, `Acc64x{N}F16`) and the wgmma traits.
pub mod acc {
    pub use crate::ptx::wgmma::*;
}

/// A storage type wgmma reads, with its instruction K.
pub trait WgmmaElement: Copy {
    /// The generated marker type ([`dtype`]).
    type Kind;
    /// K of one instruction (32 bytes of K).
    const K: usize;
}

impl WgmmaElement for Bf16 {
    type Kind = dtype::Bf16;
    const K: usize = 16;
}
impl WgmmaElement for F16 {
    type Kind = dtype::F16;
    const K: usize = 16;
}
/// f32 storage is read as tf32 by wgmma.
impl WgmmaElement for f32 {
    type Kind = dtype::Tf32;
    const K: usize = 8;
}

/// This thread's index in its warpgroup (0..128).
#[inline(always)]
pub fn thread_index() -> u32 {
    crate::thread::thread_rank() % WARPGROUP_THREADS
}

/// Makes prior register/smem writes visible to the next wgmma (needed before the first wgmma
/// and whenever the accumulator was written by other code).
///
/// # Safety
/// The whole warpgroup executes it convergently.
#[inline(always)]
pub unsafe fn fence() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::wgmma_fence() }
}

/// Closes the group of wgmmas issued since the last commit.
///
/// # Safety
/// As for [`fence`].
#[inline(always)]
pub unsafe fn commit() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::wgmma_commit_group() }
}

/// Waits until at most `N` committed groups are pending: their accumulators are readable and
/// their shared-memory tiles reusable.
///
/// # Safety
/// As for [`fence`].
#[inline(always)]
pub unsafe fn wait<const N: u32>() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::wgmma_wait_group::<N>() }
}

/// `acc = a · bᵀ (+ acc if accumulate)` over the tiles' whole K: `a` is 64 × K (M × K,
/// K-major), `b` is N × K (K-major), both in shared memory; one wgmma per instruction K.
///
/// # Safety
/// The whole warpgroup executes it convergently after [`fence`]; the tiles hold their data
/// (TMA barrier waited, or generic stores fenced with `sync::fence_proxy_async_shared` + a
/// barrier) and are not overwritten, nor `acc` read, before a [`commit`] + [`wait`] covering it.
#[inline(always)]
pub unsafe fn mma<Acc, TA, TB, const M: usize, const KA: usize, const N: usize, const KB: usize, SA, SB>(
    acc: &mut Acc,
    a: &SmemTile<TA, M, KA, SA>,
    b: &SmemTile<TB, N, KB, SB>,
    accumulate: bool,
) where
    TA: WgmmaElement,
    TB: WgmmaElement,
    SA: SwizzleMode,
    SB: SwizzleMode,
    Acc: WgmmaSs<TA::Kind, TB::Kind>,
{
    const {
        assert!(M == 64, "wgmma A tiles have 64 rows");
        assert!(KA == KB && TA::K == TB::K && KA.is_multiple_of(TA::K), "A and B cover the same K in whole steps");
        assert!(N as u32 == Acc::N, "B rows must equal the accumulator's N");
    };
    let (da, db) = (a.desc_k_major(), b.desc_k_major());
    let step_a = (TA::K * core::mem::size_of::<TA>()) as u32;
    let step_b = (TB::K * core::mem::size_of::<TB>()) as u32;
    for k in 0..(KA / TA::K) as u32 {
        // SAFETY: forwarded to the caller; K-major operands take trans = 0 and scale 1.
        unsafe { acc.mma_ss::<1, 1, 0, 0>(da.advance(k * step_a).0, db.advance(k * step_b).0, accumulate || k > 0) };
    }
}

/// `acc = a · b[k-step]ᵀ (+ acc if accumulate)` for one instruction K: A from registers (the
/// RS form, fragment map in `logic::fragment`), B the `k_step`-th K-slice of an N × K tile.
///
/// # Safety
/// As for [`mma`]; additionally `a` holds this thread's fragment of the 64 × K-step slice of A
/// and `k_step < KB / TB::K`.
#[inline(always)]
pub unsafe fn mma_rs<Acc, TB, const N: usize, const KB: usize, SB>(
    acc: &mut Acc,
    a: &RegA,
    b: &SmemTile<TB, N, KB, SB>,
    k_step: u32,
    accumulate: bool,
) where
    TB: WgmmaElement,
    SB: SwizzleMode,
    Acc: WgmmaRs<TB::Kind, TB::Kind>,
{
    const { assert!(N as u32 == Acc::N && KB.is_multiple_of(TB::K), "B rows = accumulator N, whole K steps") };
    let step = (TB::K * core::mem::size_of::<TB>()) as u32;
    // SAFETY: forwarded to the caller; a K-major B takes trans = 0 and scale 1.
    unsafe { acc.mma_rs::<1, 1, 0>(a, b.desc_k_major().advance(k_step * step).0, accumulate) };
}

/// Calls `f(row, col, value)` for every accumulator element this thread holds (the m64nN
/// fragment map of REFERENCE §8.5): the way to write a tile out.
///
/// # Safety
/// A [`wait`] covering every wgmma that writes `acc` has returned.
#[inline(always)]
pub unsafe fn for_each_element<Acc: Accumulator>(acc: &Acc, mut f: impl FnMut(u32, u32, Acc::Elem)) {
    let t = thread_index();
    acc.for_each(|i, v| {
        let (row, col) = acc_coord(t, i as u32);
        f(row, col, v)
    });
}

/// Raises this warpgroup's per-thread register budget to `REGS` (consumer warpgroups).
///
/// # Safety
/// The whole warpgroup executes it; the kernel declares a fixed entry register count
/// (`max_registers`, or `threads` + `min_blocks_per_sm`); the sum over the block fits.
#[inline(always)]
pub unsafe fn setmaxnreg_inc<const REGS: u32>() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::setmaxnreg_inc::<REGS>() }
}

/// Lowers this warpgroup's per-thread register budget to `REGS` (producer warpgroups).
///
/// # Safety
/// As for [`setmaxnreg_inc`].
#[inline(always)]
pub unsafe fn setmaxnreg_dec<const REGS: u32>() {
    // SAFETY: forwarded to the caller.
    unsafe { raw::setmaxnreg_dec::<REGS>() }
}
