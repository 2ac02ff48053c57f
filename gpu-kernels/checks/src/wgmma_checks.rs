//! Single-tile wgmma checks (sm_90a): each entry computes one `D(64×N) = A(64×K) · B(K×N)` with
//! the typed `warpgroup::` layer, for one input type, accumulator, N, form (SS or RS) and operand
//! majors; `tests/gpu_wgmma.rs` compares every entry with a float64 reference.
//!
//! **Launch (every entry):** 1 block × 128 threads (one warpgroup), [`WGMMA_TILE_SMEM_BYTES`] of
//! dynamic shared memory. Parameters `(a_map, b_map, d)`: two grid-constant tensor maps under
//! 128-byte swizzle and the output.
//!
//! **K** is one 128-byte swizzle span of the input type (64 bf16/f16, 32 tf32, 128 fp8): four
//! instructions of K, so each entry also steps the descriptors through a swizzle atom.
//!
//! **Loads** are TMA, one box per 128-byte-wide block, waited on one mbarrier:
//! - K-major A: global `[64][K]` row-major (K inner), box K × 64. K-major B: `[N][K]`, box K × N.
//! - MN-major A (`_m?` entries): global `[K][64]` (M inner, i.e. A column-major), box 64 × K.
//!   MN-major B (`_?m`): global `[K][N]` (N inner), N/64 boxes of 64 × K at x = 0, 64, …, one
//!   block each (the canonical MN-major layout: blocks one span of N wide, LBO = block bytes,
//!   SBO = 8 K-rows).
//!
//! **RS** entries read A's fragment for each K-slice from the K-major A tile with ordinary shared
//! loads at the positions of `logic::fragment` (not ldmatrix: the maps, tf32 and fp8 included,
//! are what is under test), then fence, issue, commit and wait before the next slice.
//!
//! **Output** `d`, 64 × N row-major: f32 for f32 accumulators; for f16 accumulators u32 words
//! each packing the f16 pair (row, 2c) low and (row, 2c + 1) high, i.e. a row-major f16 array.
//!
//! Entry names: `wgmma_<A>[_<B>]_<acc>_n<N>_<ss|rs>_<majors>_sm90a`, majors `k`/`m` for A then B
//! (SS) or for B alone (RS).

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::cluster;
use warpforge_dsl::kernel;
use warpforge_dsl::mbarrier::{Mbarrier, Phase, fence_init};
use warpforge_dsl::num::{Bf16, E4m3, E5m2, F16};
use warpforge_dsl::pipeline::TmaLoad;
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::thread::{thread_rank, thread_rank_in_place};
use warpforge_dsl::tile::{SmemTile, SmemTileMn, Swizzle128B};
use warpforge_dsl::tma;
use warpforge_dsl::warpgroup::acc::{
    Acc64x8F32, Acc64x64F32, Acc64x128F16, Acc64x128F32, Acc64x256F32, Accumulator, WgmmaRs, WgmmaSs,
};
use warpforge_dsl::warpgroup::{self, KindOf, RsMajor, SmemOperand, SsMajors, WgmmaElement};

/// Dynamic shared memory of every entry: A (8 KiB) + the largest B (256 rows × 128 B = 32 KiB)
/// + 1 KiB alignment of the window + the barrier.
pub const WGMMA_TILE_SMEM_BYTES: u32 = 8192 + 32768 + 2048;

/// K-major operand of `ROWS` rows (M or N) × one 128-byte span of K. // (ROWS, K)
type KTile<T, const ROWS: usize, const K: usize> = SmemTile<T, ROWS, K, Swizzle128B>;
/// MN-major 16-bit operand, K = 64 rows × `BLOCKS` · 64 of M or N. // (K = 64, 64 · BLOCKS)
type MnTile<T, const BLOCKS: usize> = SmemTileMn<T, 64, 64, BLOCKS, Swizzle128B>;

/// An operand tile of these checks: carved from the window and filled by TMA.
trait CheckTile: SmemOperand + TmaLoad + Copy {
    /// Carves the tile.
    fn alloc(smem: &mut DynamicShared) -> Self;
    /// Issues the tile's TMA loads of the box(es) at the origin of `map`, completing on `bar`.
    ///
    /// # Safety
    /// One thread; `bar` expects these bytes; `map`'s box matches the tile (module doc).
    unsafe fn load(&self, map: &TensorMap, bar: &Mbarrier);
}

impl<T: WgmmaElement, const ROWS: usize, const K: usize> CheckTile for KTile<T, ROWS, K> {
    #[inline(always)]
    fn alloc(smem: &mut DynamicShared) -> Self {
        SmemTile::alloc(smem)
    }
    #[inline(always)]
    unsafe fn load(&self, map: &TensorMap, bar: &Mbarrier) {
        // SAFETY: forwarded to the caller.
        unsafe { tma::load_2d(self, map, 0, 0, bar) }
    }
}

impl<T: WgmmaElement, const BLOCKS: usize> CheckTile for MnTile<T, BLOCKS> {
    #[inline(always)]
    fn alloc(smem: &mut DynamicShared) -> Self {
        SmemTileMn::alloc(smem)
    }
    #[inline(always)]
    unsafe fn load(&self, map: &TensorMap, bar: &Mbarrier) {
        for j in 0..BLOCKS as u32 {
            // SAFETY: forwarded to the caller; block j is the 64 × 64 box at x = 64 j.
            unsafe { tma::load_2d(&self.block(j), map, 64 * j as i32, 0, bar) }
        }
    }
}

/// Carves A, B and a barrier, loads both operands by TMA and waits for them.
///
/// # Safety
/// The whole block calls it once, as the module's launch contract describes.
#[inline(always)]
unsafe fn load_operands<A: CheckTile, B: CheckTile>(a_map: &TensorMap, b_map: &TensorMap) -> (A, B) {
    let mut smem = DynamicShared::window();
    let (a, b) = (A::alloc(&mut smem), B::alloc(&mut smem));
    // SAFETY: initialised below by thread 0 and published by the block-wide barrier.
    let full = unsafe { Mbarrier::at(Mbarrier::alloc(&mut smem)) };
    if thread_rank() == 0 {
        // SAFETY: one thread initialises before any use.
        unsafe { full.init(1) };
        fence_init();
    }
    // SAFETY: every thread reaches it (a cluster barrier, because it tolerates the divergent
    // copies LLVM may make of it; see `cluster::sync`).
    unsafe { cluster::sync() };
    // Thread 0 read afresh, so LLVM cannot thread this branch into the one above and give lane 0
    // its own copy of the barrier (synccheck: divergent barrier); see `hopper_async_checks`.
    if thread_rank_in_place() == 0 {
        // SAFETY: the loads deliver exactly the bytes of (A, B), announced first.
        unsafe {
            full.arrive_expect_tx(<(A, B) as TmaLoad>::BYTES);
            a.load(a_map, &full);
            b.load(b_map, &full);
        }
    }
    full.wait_phase(Phase::ZERO);
    (a, b)
}

/// Writes the accumulator to `d` (module doc: f32 elements, or f16 pairs per u32 word).
///
/// # Safety
/// A wait covering every wgmma writing `acc` returned; `d` holds 64 · N · 4 / (elements per
/// register) bytes.
#[inline(always)]
unsafe fn store<Acc: Accumulator>(acc: &Acc, d: *mut Acc::Elem) {
    let per_reg = Acc::N / 2 / Acc::REGS as u32;
    // SAFETY: forwarded to the caller; (row, col) < (64, N) and col is even when per_reg = 2.
    unsafe { warpgroup::for_each_element(acc, |row, col, v| *d.add(((row * Acc::N + col) / per_reg) as usize) = v) }
}

/// SS body: `D = A · B` with both operands from shared memory.
///
/// # Safety
/// The module's launch contract.
#[inline(always)]
unsafe fn ss<A: CheckTile, B: CheckTile, Acc>(a_map: &TensorMap, b_map: &TensorMap, d: *mut Acc::Elem)
where
    (A::Major, B::Major): SsMajors,
    Acc: WgmmaSs<KindOf<A>, KindOf<B>>,
{
    // SAFETY: forwarded to the caller.
    let (a, b) = unsafe { load_operands::<A, B>(a_map, b_map) };
    let mut acc = Acc::ZERO;
    // SAFETY: the whole warpgroup, convergent; the tiles are loaded and stay unchanged; `acc` is
    // read only after the wait; `d` is the caller's 64 × N output.
    unsafe {
        warpgroup::fence();
        warpgroup::mma(&mut acc, &a, &b, false);
        warpgroup::commit();
        warpgroup::wait::<0>();
        store(&acc, d);
    }
}

/// RS body: `D = A · B` with A (K-major in shared memory, `K` columns of `T`) moved to
/// registers one K-slice at a time.
///
/// # Safety
/// The module's launch contract.
#[inline(always)]
unsafe fn rs<T: WgmmaElement, const K: usize, B: CheckTile<Elem = T>, Acc>(
    a_map: &TensorMap,
    b_map: &TensorMap,
    d: *mut Acc::Elem,
) where
    B::Major: RsMajor,
    Acc: WgmmaRs<KindOf<B>, KindOf<B>>,
{
    // SAFETY: forwarded to the caller.
    let (a, b) = unsafe { load_operands::<KTile<T, 64, K>, B>(a_map, b_map) };
    let mut acc = Acc::ZERO;
    for k in 0..(K / T::K) as u32 {
        // SAFETY: the tile is loaded (barrier waited); k < K / T::K. The whole warpgroup runs
        // the rest convergently; the fence orders the fragment's register writes before the
        // wgmma, and the wait precedes the next slice's writes and the final read of `acc`.
        unsafe {
            let frag = warpgroup::load_a_fragment(&a, k);
            warpgroup::fence();
            warpgroup::mma_rs(&mut acc, &frag, &b, k, k > 0);
            warpgroup::commit();
            warpgroup::wait::<0>();
        }
    }
    // SAFETY: every wgmma writing `acc` was waited for; `d` is the caller's output.
    unsafe { store(&acc, d) };
}

/// One entry per line: `name, body[generic arguments], output element, doc`.
macro_rules! entries {
    ($($name:ident, $body:ident[$($generics:tt)*], $out:ty, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[doc = ""]
        #[doc = "Launch and parameters: see the module doc."]
        ///
        /// # Safety
        /// The module doc's launch contract, with the boxes its layout list gives this entry.
        #[kernel(threads = 128)]
        pub unsafe fn $name(#[grid_constant] a_map: &TensorMap, #[grid_constant] b_map: &TensorMap, d: *mut $out) {
            // SAFETY: forwarded to the caller.
            unsafe { $body::<$($generics)*>(a_map, b_map, d) }
        }
    )*};
}

entries! {
    wgmma_bf16_f32_n8_ss_kk_sm90a, ss[KTile<Bf16, 64, 64>, KTile<Bf16, 8, 64>, Acc64x8F32], f32,
        "bf16, f32 accumulator, N = 8, SS, A and B K-major.";
    wgmma_bf16_f32_n256_ss_kk_sm90a, ss[KTile<Bf16, 64, 64>, KTile<Bf16, 256, 64>, Acc64x256F32], f32,
        "bf16, f32 accumulator, N = 256, SS, A and B K-major.";
    wgmma_bf16_f32_n64_ss_km_sm90a, ss[KTile<Bf16, 64, 64>, MnTile<Bf16, 1>, Acc64x64F32], f32,
        "bf16, f32 accumulator, N = 64, SS, A K-major, B N-major (one block).";
    wgmma_bf16_f32_n128_ss_mm_sm90a, ss[MnTile<Bf16, 1>, MnTile<Bf16, 2>, Acc64x128F32], f32,
        "bf16, f32 accumulator, N = 128, SS, A M-major, B N-major (two blocks: LBO in use).";
    wgmma_bf16_f32_n64_rs_k_sm90a, rs[Bf16, 64, KTile<Bf16, 64, 64>, Acc64x64F32], f32,
        "bf16, f32 accumulator, N = 64, RS, B K-major.";
    wgmma_f16_f32_n64_ss_kk_sm90a, ss[KTile<F16, 64, 64>, KTile<F16, 64, 64>, Acc64x64F32], f32,
        "f16, f32 accumulator, N = 64, SS, A and B K-major.";
    wgmma_f16_f16_n128_ss_kk_sm90a, ss[KTile<F16, 64, 64>, KTile<F16, 128, 64>, Acc64x128F16], u32,
        "f16, f16 accumulator, N = 128, SS, A and B K-major.";
    wgmma_f16_f32_n64_ss_mk_sm90a, ss[MnTile<F16, 1>, KTile<F16, 64, 64>, Acc64x64F32], f32,
        "f16, f32 accumulator, N = 64, SS, A M-major, B K-major.";
    wgmma_f16_f32_n128_rs_m_sm90a, rs[F16, 64, MnTile<F16, 2>, Acc64x128F32], f32,
        "f16, f32 accumulator, N = 128, RS, B N-major (two blocks).";
    wgmma_tf32_f32_n64_ss_kk_sm90a, ss[KTile<f32, 64, 32>, KTile<f32, 64, 32>, Acc64x64F32], f32,
        "tf32 (f32 storage), f32 accumulator, N = 64, SS, A and B K-major.";
    wgmma_tf32_f32_n128_rs_k_sm90a, rs[f32, 32, KTile<f32, 128, 32>, Acc64x128F32], f32,
        "tf32 (f32 storage), f32 accumulator, N = 128, RS, B K-major.";
    wgmma_e4m3_f32_n128_ss_kk_sm90a, ss[KTile<E4m3, 64, 128>, KTile<E4m3, 128, 128>, Acc64x128F32], f32,
        "e4m3, f32 accumulator, N = 128, SS, A and B K-major.";
    wgmma_e5m2_f32_n64_ss_kk_sm90a, ss[KTile<E5m2, 64, 128>, KTile<E5m2, 64, 128>, Acc64x64F32], f32,
        "e5m2, f32 accumulator, N = 64, SS, A and B K-major.";
    wgmma_e4m3_e5m2_f32_n256_ss_kk_sm90a, ss[KTile<E4m3, 64, 128>, KTile<E5m2, 256, 128>, Acc64x256F32], f32,
        "e4m3 A × e5m2 B, f32 accumulator, N = 256, SS, A and B K-major.";
    wgmma_e4m3_f32_n64_rs_k_sm90a, rs[E4m3, 128, KTile<E4m3, 64, 128>, Acc64x64F32], f32,
        "e4m3, f32 accumulator, N = 64, RS, B K-major.";
    wgmma_e5m2_f16_n128_ss_kk_sm90a, ss[KTile<E5m2, 64, 128>, KTile<E5m2, 128, 128>, Acc64x128F16], u32,
        "e5m2, f16 accumulator, N = 128, SS, A and B K-major.";
}
