//! L2 scope `warpgroup::`: operations that all 128 threads of a warpgroup (4 consecutive warps,
//! first warp index a multiple of 4) execute together — wgmma and its fence/commit/wait, and
//! register reallocation. Everything here is `unsafe` for one shared reason: a warpgroup
//! operation reached by only part of the warpgroup, or with differing operands, is undefined.
//!
//! `mma(&mut acc, &a_tile, &b_tile, accumulate)` issues the wgmma sequence covering the tiles'
//! whole K, with descriptors built from the tile types; the accumulator type (e.g.
//! `Acc64x128F32`) fixes N, the element types pick the instruction, and the tile types
//! ([`SmemTile`] K-major, [`SmemTileMn`] MN-major) pick the transpose immediates, all at compile
//! time: an MN-major fp8 or tf32 operand does not compile.

use crate::logic::fragment::{
    WARPGROUP_THREADS, WGMMA_M, a_frag_coord_8bit, a_frag_coord_16bit, a_frag_coord_tf32, acc_coord,
};
use crate::logic::wgmma_desc::WgmmaDesc;
use crate::num::{Bf16, E4m3, E5m2, F16};
use crate::ptx::warpgroup as raw;
pub use crate::ptx::wgmma::{Accumulator, RegA, WgmmaRs, WgmmaSs, dtype};
use crate::shared::SharedPtr;
use crate::tile::{SmemTile, SmemTileMn, SwizzleMode};

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
impl WgmmaElement for E4m3 {
    type Kind = dtype::E4m3;
    const K: usize = 32;
}
impl WgmmaElement for E5m2 {
    type Kind = dtype::E5m2;
    const K: usize = 32;
}

/// K-major operand marker (`imm-trans = 0`).
#[derive(Clone, Copy, Debug)]
pub enum KMajor {}
/// MN-major operand marker (`imm-trans = 1`).
#[derive(Clone, Copy, Debug)]
pub enum MnMajor {}

/// A wgmma operand in shared memory: its element, major-ness, extents and the descriptor of
/// each instruction-K slice.
pub trait SmemOperand {
    /// Element type.
    type Elem: WgmmaElement;
    /// [`KMajor`] or [`MnMajor`].
    type Major;
    /// Extent along M (operand A) or N (operand B).
    const MN: usize;
    /// Extent along K.
    const K: usize;
    /// Descriptor of K-slice `k_step` (`< K / Elem::K`).
    fn desc(&self, k_step: u32) -> WgmmaDesc;
}

/// A K-major tile: rows are M or N, columns K; a K step moves the start along the row.
impl<T: WgmmaElement, const ROWS: usize, const COLS: usize, S: SwizzleMode> SmemOperand for SmemTile<T, ROWS, COLS, S> {
    type Elem = T;
    type Major = KMajor;
    const MN: usize = ROWS;
    const K: usize = COLS;
    #[inline(always)]
    fn desc(&self, k_step: u32) -> WgmmaDesc {
        self.desc_k_major().advance(k_step * (T::K * core::mem::size_of::<T>()) as u32)
    }
}

/// An MN-major tile: rows are K; a K step moves the start by `T::K` whole rows.
impl<T: WgmmaElement, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode> SmemOperand
    for SmemTileMn<T, K, COLS, BLOCKS, S>
{
    type Elem = T;
    type Major = MnMajor;
    const MN: usize = COLS * BLOCKS;
    const K: usize = K;
    #[inline(always)]
    fn desc(&self, k_step: u32) -> WgmmaDesc {
        self.desc_mn_major().advance(k_step * (T::K * COLS * core::mem::size_of::<T>()) as u32)
    }
}

/// The (A, B) majors of an SS wgmma: issue it with the matching transpose immediates.
pub trait SsMajors {
    /// Issues `acc (+)= A·B` with these majors (scales 1).
    ///
    /// # Safety
    /// As for [`WgmmaSs::mma_ss`].
    unsafe fn issue<X, Y, Acc: WgmmaSs<X, Y>>(acc: &mut Acc, a: WgmmaDesc, b: WgmmaDesc, scale_d: bool);
}

macro_rules! ss_majors {
    ($($a:ident, $b:ident => $ta:literal, $tb:literal;)*) => {$(
        impl SsMajors for ($a, $b) {
            #[inline(always)]
            unsafe fn issue<X, Y, Acc: WgmmaSs<X, Y>>(acc: &mut Acc, a: WgmmaDesc, b: WgmmaDesc, scale_d: bool) {
                // SAFETY: forwarded to the caller.
                unsafe { acc.mma_ss::<1, 1, $ta, $tb>(a.0, b.0, scale_d) }
            }
        }
    )*};
}
ss_majors! {
    KMajor, KMajor => 0, 0;
    KMajor, MnMajor => 0, 1;
    MnMajor, KMajor => 1, 0;
    MnMajor, MnMajor => 1, 1;
}

/// B's major in an RS wgmma: issue it with the matching transpose immediate.
pub trait RsMajor {
    /// Issues `acc (+)= A·B` with A from registers (scales 1).
    ///
    /// # Safety
    /// As for [`WgmmaRs::mma_rs`].
    unsafe fn issue<X, Y, Acc: WgmmaRs<X, Y>>(acc: &mut Acc, a: &RegA, b: WgmmaDesc, scale_d: bool);
}

impl RsMajor for KMajor {
    #[inline(always)]
    unsafe fn issue<X, Y, Acc: WgmmaRs<X, Y>>(acc: &mut Acc, a: &RegA, b: WgmmaDesc, scale_d: bool) {
        // SAFETY: forwarded to the caller.
        unsafe { acc.mma_rs::<1, 1, 0>(a, b.0, scale_d) }
    }
}
impl RsMajor for MnMajor {
    #[inline(always)]
    unsafe fn issue<X, Y, Acc: WgmmaRs<X, Y>>(acc: &mut Acc, a: &RegA, b: WgmmaDesc, scale_d: bool) {
        // SAFETY: forwarded to the caller.
        unsafe { acc.mma_rs::<1, 1, 1>(a, b.0, scale_d) }
    }
}

/// The `dtype` marker of an operand's element.
pub type KindOf<O> = <<O as SmemOperand>::Elem as WgmmaElement>::Kind;

/// This warpgroup's index in the block ([`crate::thread::warpgroup_id`]) as ptxas sees a
/// warp-uniform value ([`crate::warp::uniform`]). ptxas cannot tell that `tid.x / 128` is the
/// same across a warp, so a branch on it makes every role's code divergent to ptxas: each
/// ring slot's wgmma descriptors are then built in vector registers and moved to uniform ones
/// by two `R2UR` per wgmma. Branch on this, and derive the role's smem plan from it.
///
/// # Safety
/// All 32 lanes of the calling warp call it together.
#[inline(always)]
pub unsafe fn uniform_id() -> u32 {
    // SAFETY: forwarded; every lane of a warp has the same warpgroup.
    unsafe { crate::warp::uniform(crate::thread::warpgroup_id()) }
}

/// This thread's index in its warpgroup (0..128).
#[inline(always)]
pub fn thread_index() -> u32 {
    crate::thread::thread_rank() % WARPGROUP_THREADS
}

/// [`thread_index`], computed where it is called (see [`crate::thread::thread_rank_in_place`]).
#[inline(always)]
pub fn thread_index_in_place() -> u32 {
    crate::thread::thread_rank_in_place() % WARPGROUP_THREADS
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

/// Makes every register of `acc` defined here (see `ptx::warpgroup::pin_register`): a tile
/// initialised before a wgmma that writes another tile stays initialised before it, instead of
/// being copied in later from that tile's registers, which ptxas reads as touching them
/// while the wgmma runs (C7514) and answers by serialising the wgmmas.
#[inline(always)]
pub fn pin<A: Accumulator<Elem = f32>>(acc: &mut A) {
    acc.for_each_mut(|_, r| raw::pin_register(r));
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

/// `acc = a · b (+ acc if accumulate)` over the operands' whole K: `a` is 64 × K, `b` is N × K,
/// each K-major ([`SmemTile`]) or MN-major ([`SmemTileMn`]); one wgmma per instruction K.
///
/// # Safety
/// The whole warpgroup executes it convergently after [`fence`]; the tiles hold their data
/// (TMA barrier waited, or generic stores fenced with `sync::fence_proxy_async_shared` + a
/// barrier) and are not overwritten, nor `acc` read, before a [`commit`] + [`wait`] covering it.
#[inline(always)]
pub unsafe fn mma<Acc, A, B>(acc: &mut Acc, a: &A, b: &B, accumulate: bool)
where
    A: SmemOperand,
    B: SmemOperand,
    (A::Major, B::Major): SsMajors,
    Acc: WgmmaSs<KindOf<A>, KindOf<B>>,
{
    const {
        assert!(A::MN == WGMMA_M as usize, "wgmma A tiles have 64 rows");
        assert!(A::K == B::K && A::Elem::K == B::Elem::K, "A and B cover the same K");
        assert!(A::K.is_multiple_of(A::Elem::K), "whole K steps");
        assert!(B::MN as u32 == Acc::N, "B's N must equal the accumulator's N");
    };
    for k in 0..(A::K / A::Elem::K) as u32 {
        // SAFETY: forwarded to the caller.
        unsafe { <(A::Major, B::Major) as SsMajors>::issue(acc, a.desc(k), b.desc(k), accumulate || k > 0) };
    }
}

/// `acc = a · b[k-step] (+ acc if accumulate)` for one instruction K: A from registers (the RS
/// form, e.g. from [`load_a_fragment`]), B the `k_step`-th K-slice of an N × K operand of either
/// major.
///
/// # Safety
/// As for [`mma`], and [`fence`] after `a` was written; additionally `a` holds this thread's
/// fragment of the 64 × K-step slice of A and `k_step < B::K / Elem::K`; `a` stays unmodified
/// until the covering [`wait`].
#[inline(always)]
pub unsafe fn mma_rs<Acc, B>(acc: &mut Acc, a: &RegA, b: &B, k_step: u32, accumulate: bool)
where
    B: SmemOperand,
    B::Major: RsMajor,
    Acc: WgmmaRs<KindOf<B>, KindOf<B>>,
{
    const { assert!(B::MN as u32 == Acc::N && B::K.is_multiple_of(B::Elem::K), "B's N = accumulator N, whole K steps") };
    // SAFETY: forwarded to the caller.
    unsafe { <B::Major as RsMajor>::issue(acc, a, b.desc(k_step), accumulate) };
}

/// This thread's RS-form A fragment of K-slice `k_step` of a 64 × K K-major tile, read with
/// ordinary shared loads at the positions of the fragment map (`logic::fragment`: 16-bit
/// two elements per register, tf32 one, fp8 four; low bits first).
///
/// # Safety
/// The tile holds its data and is visible to this thread (TMA barrier waited, or generic stores
/// after a block barrier); `k_step < K / T::K`.
#[inline(always)]
pub unsafe fn load_a_fragment<T: WgmmaElement, const K: usize, S: SwizzleMode>(
    a: &SmemTile<T, 64, K, S>,
    k_step: u32,
) -> RegA {
    let (t, size) = (thread_index(), core::mem::size_of::<T>() as u32);
    let per_reg = 4 / size;
    let k0 = k_step * T::K as u32;
    let reg = |r: u32| {
        let mut word = 0u32;
        for j in 0..per_reg {
            let e = r * per_reg + j;
            let (row, k) = match size {
                1 => a_frag_coord_8bit(t, e),
                2 => a_frag_coord_16bit(t, e),
                _ => a_frag_coord_tf32(t, e),
            };
            let addr = a.addr() + SmemTile::<T, 64, K, S>::byte_offset(row, k0 + k);
            // SAFETY: (row, k0 + k) lies in the tile (the maps stay inside 64 × T::K, and
            // k_step < K / T::K); the element is visible by the contract and aligned for its size.
            let bits = unsafe {
                match size {
                    1 => SharedPtr::<u8>::from_addr(addr).as_mut_ptr().read_volatile() as u32,
                    2 => SharedPtr::<u16>::from_addr(addr).as_mut_ptr().read_volatile() as u32,
                    _ => SharedPtr::<u32>::from_addr(addr).as_mut_ptr().read_volatile(),
                }
            };
            word |= bits << (8 * size * j);
        }
        word
    };
    RegA(reg(0), reg(1), reg(2), reg(3))
}

/// Calls `f(row, col, value)` for every accumulator register this thread holds (the m64nN
/// fragment map of REFERENCE §8.5): the way to write a tile out. An f32 register is element
/// (row, col); an f16 register packs (row, col) in its low half and (row, col + 1) in its high.
///
/// # Safety
/// A [`wait`] covering every wgmma that writes `acc` has returned.
#[inline(always)]
pub unsafe fn for_each_element<Acc: Accumulator>(acc: &Acc, mut f: impl FnMut(u32, u32, Acc::Elem)) {
    let t = thread_index();
    // Elements per register: 1 for f32 (N/2 registers), 2 for packed f16 (N/4).
    let per_reg = Acc::N / 2 / Acc::REGS as u32;
    acc.for_each(|i, v| {
        let (row, col) = acc_coord(t, per_reg * i as u32);
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
