//! Persistent-style warp-specialised bf16 GEMM for Blackwell (sm_100a): TMA → shared-memory
//! ring → `tcgen05.mma` into Tensor Memory → `tcgen05.ld` epilogue, scheduled by cluster launch
//! control. **Compile-verified, not run**: it assembles with ptxas for sm_100a (registers, smem
//! and spills are in the build's `sm_100a.report.txt`); no Blackwell GPU has executed it, so no
//! performance ratio against cuBLAS exists yet.
//!
//! Algorithm: C (M × N, bf16, row-major) = A (M × K, bf16, K contiguous) · Bᵀ (B is N × K, K
//! contiguous), f32 accumulation. One CTA per 128 × 256 output tile is launched; a running CTA
//! steals the tiles of CTAs that have not started yet (`clusterlaunchcontrol.try_cancel`), so the
//! grid load-balances like a persistent kernel and leaves SMs busy with other work alone (the CPU
//! simulation in `logic::clc` compares it with a static persistent schedule).
//!
//! The warp roles, pipelines and epilogue are the shared tcgen05 skeleton
//! (`warpforge_dsl::parts::tcgen05`); this file is its ring contents (A and B tiles) and the
//! per-K-block MMAs: `BLK_K / 16` dense `kind::f16` MMAs of 128 × 256 × 16 per stage.
//!
//! Shared memory: A stages 4 × 16 KiB (128 × 64 bf16, 128B swizzle) + B stages 4 × 32 KiB
//! (256 × 64) = 192 KiB, + the skeleton's barriers and slots, and up to 1 KiB of alignment:
//! launch with 197 KiB of dynamic shared memory. TMEM: 2 × 256 f32 accumulator columns.
//!
//! Launch contract: grid = ⌈M/128⌉ · ⌈N/256⌉ CTAs (x), 192 threads, cluster 1; tensor maps with
//! boxes 64 × 128 (A) and 64 × 256 (B), 128B swizzle; K a multiple of 8 (16-byte TMA rows).
//! Partial tiles are zero-filled by TMA and masked in the epilogue.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::blackwell::tmem::{Tmem, TmemAddr};
use warpforge_dsl::blackwell::umma::{self, Accumulate, Umma};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::tcgen05_desc::{AccType, CtaGroup, DenseKind, DenseMma, ElemType};
use warpforge_dsl::mbarrier::Mbarrier;
use warpforge_dsl::num::Bf16;
use warpforge_dsl::parts::tcgen05::{self, TMEM_COLS, UmmaMainloop};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::tile::{SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::tma;
use warpforge_dsl::warp::Elected;

const BLK_M: u32 = 128;
const BLK_N: u32 = 256;
const BLK_K: u32 = 64;
const STAGES: usize = 4;

type TileA = SmemTile<Bf16, { BLK_M as usize }, { BLK_K as usize }, Swizzle128B>; // (BLK_M, BLK_K)
type TileB = SmemTile<Bf16, { BLK_N as usize }, { BLK_K as usize }, Swizzle128B>; // (BLK_N, BLK_K)
type RingA = SmemTileRing<Bf16, { BLK_M as usize }, { BLK_K as usize }, Swizzle128B, STAGES>; // STAGES × (BLK_M, BLK_K)
type RingB = SmemTileRing<Bf16, { BLK_N as usize }, { BLK_K as usize }, Swizzle128B, STAGES>; // STAGES × (BLK_N, BLK_K)

const MMA: Umma =
    Umma::new(DenseMma::new(DenseKind::F16, ElemType::Bf16, ElemType::Bf16, AccType::F32, BLK_M, BLK_N, CtaGroup::One));
/// MMAs per K block, and the bytes each advances inside the 128-byte swizzle atom.
const K_STEPS: u32 = BLK_K / MMA.k();
const K_STEP_BYTES: u32 = MMA.k() * 2;

const _: () = assert!(TileA::BYTES + TileB::BYTES == 48 * 1024);

/// The ring (A and B tiles) and the tensor maps it is filled from.
struct DenseBf16<'a> {
    a: RingA,
    b: RingB,
    map_a: &'a TensorMap,
    map_b: &'a TensorMap,
}

impl UmmaMainloop for DenseBf16<'_> {
    type Stage = (TileA, TileB);

    #[inline(always)]
    unsafe fn load(&self, slot: u32, kb: u32, m0: u32, n0: u32, full: &Mbarrier) {
        // SAFETY: the producer's thread, free slot, `full` armed for (TileA, TileB) (caller).
        unsafe {
            tma::load_2d(&self.a.stage(slot), self.map_a, (kb * BLK_K) as i32, m0 as i32, full);
            tma::load_2d(&self.b.stage(slot), self.map_b, (kb * BLK_K) as i32, n0 as i32, full);
        }
    }

    #[inline(always)]
    unsafe fn mma(&self, e: &Elected, _tmem: Tmem<TMEM_COLS>, slot: u32, d: TmemAddr, first: bool) {
        let (a_tile, b_tile) = (self.a.stage(slot), self.b.stage(slot));
        for ks in 0..K_STEPS {
            let a = umma::desc_k_major_sw128(&a_tile, ks * K_STEP_BYTES);
            let b = umma::desc_k_major_sw128(&b_tile, ks * K_STEP_BYTES);
            // SAFETY: the slot's data landed and `d` was drained (caller); D fits the allocation.
            unsafe { MMA.issue(e, d, a, b, Accumulate::unless_first(first && ks == 0)) };
        }
    }
}

/// C = A · Bᵀ in bf16 with f32 accumulation; see the module doc for the launch contract.
///
/// # Safety
/// `map_a`/`map_b` describe A (M × K) and B (N × K) bf16 with the boxes above; `c` points to
/// M × N bf16; launched as the module doc states.
#[kernel(threads = 192, min_blocks_per_sm = 1)]
pub unsafe fn gemm_bf16_tcgen05_clc_sm100(
    #[grid_constant] map_a: &TensorMap,
    #[grid_constant] map_b: &TensorMap,
    c: *mut Bf16,
    m: u32,
    n: u32,
    k: u32,
) {
    let mut smem = DynamicShared::window();
    let mainloop = DenseBf16 { a: RingA::alloc(&mut smem), b: RingB::alloc(&mut smem), map_a, map_b };
    // SAFETY: every thread, the rest of the window after the rings; the launch contract (caller).
    unsafe { tcgen05::gemm::<_, BLK_M, BLK_N, BLK_K, STAGES>(smem, &mainloop, c, m, n, k) };
}
