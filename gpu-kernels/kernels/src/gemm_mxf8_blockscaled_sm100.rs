//! Block-scaled FP8 GEMM (MXFP8: E4M3 operands, one UE8M0 scale per 32 K-elements) for
//! Blackwell (sm_100a): TMA → shared-memory ring (operands and scale factors) → `tcgen05.cp` of
//! the scales into Tensor Memory → `tcgen05.mma.kind::mxf8f6f4.block_scale` into TMEM →
//! `tcgen05.ld` epilogue, scheduled by cluster launch control. **Compile-verified, not run**: it
//! assembles with ptxas for sm_100a (figures in the build's `sm_100a.report.txt`); no Blackwell
//! GPU has executed it, so no ratio against cuBLASLt's MXFP8 GEMM exists yet.
//!
//! Algorithm: C (M × N, bf16) = (A ⊙ 2^SFA) · (B ⊙ 2^SFB)ᵀ, A M × K and B N × K E4M3 with K
//! contiguous, f32 accumulation in TMEM. Per 128-wide K block and 128-row tile the scales are
//! one u32 "cell" per row (byte j = scale of K-group j of 32); the MMA warp copies a stage's
//! cells into TMEM with `tcgen05.cp 32x128b.warpx4` (replicated into the four lane quarters, as
//! the block-scaled MMA reads them) and issues 4 MMAs of K = 32, the j-th selecting byte j (the
//! SF id of the instruction descriptor). `cp → mma` from one thread is pipelined: no wait.
//!
//! Scale-factor layout in global memory (the host packs it; one 2-D u32 tensor per operand,
//! 4 columns): the block of tile t (of 128 rows) and K block kb is rows
//! `(t · ⌈K/128⌉ + kb) · 32 … +31`; row l holds the cells of tile rows l, 32+l, 64+l, 96+l —
//! the smem image `tcgen05.cp 32x128b.warpx4` expects (REFERENCE §11), so TMA copies it as is.
//!
//! The warp roles, pipelines and epilogue are the shared tcgen05 skeleton
//! (`warpforge_dsl::parts::tcgen05`); this file is its ring contents (A, B and their scale
//! cells: 6 stages) and the per-K-block work of the MMA warp. Each stage owns its 8 TMEM scale
//! columns, so a stage's scales are overwritten only after the commit that freed the stage, i.e.
//! after the MMAs that read them.
//!
//! Shared memory: 6 × (16 KiB A + 16 KiB B + 512 B SFA + 512 B SFB) = 198 KiB + barriers and
//! slots + up to 1 KiB alignment: launch with 200 KiB. TMEM: of the skeleton's 512 columns,
//! 2 × 128 f32 accumulator columns + 6 × 8 scale columns = 304 are used.
//!
//! Launch contract: grid = ⌈M/128⌉ · ⌈N/128⌉ CTAs (x), 192 threads, cluster 1; tensor maps:
//! A and B boxes 128 × 128 bytes with 128B swizzle, SFA and SFB boxes 4 × 32 u32 without
//! swizzle; K a multiple of 128 (whole scale cells). Partial M/N tiles are zero-filled by TMA
//! and masked in the epilogue.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::blackwell::tmem::{Tmem, TmemAddr};
use warpforge_dsl::blackwell::umma::{self, Accumulate, ScaledUmma};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::tcgen05_desc::{BlockScaledMma, CtaGroup, ElemType};
use warpforge_dsl::mbarrier::Mbarrier;
use warpforge_dsl::num::Bf16;
use warpforge_dsl::parts::tcgen05::{self, ACC_BUFFERS, TMEM_COLS, UmmaMainloop};
use warpforge_dsl::pipeline::TmaLoad;
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::tile::{NoSwizzle, SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::tma;
use warpforge_dsl::warp::Elected;

const BLK_M: u32 = 128;
const BLK_N: u32 = 128;
const BLK_K: u32 = 128;
const STAGES: usize = 6;

/// TMEM columns of one stage's scale factors: 4 for A (128 rows / 32 lanes), 4 for B.
const SF_COLS_PER_STAGE: u32 = 8;
/// First TMEM column of the scale factors, after the accumulator buffers.
const SF_BASE_COL: u32 = ACC_BUFFERS as u32 * BLK_N;

/// E4M3 values as raw bytes.
type TileA = SmemTile<u8, { BLK_M as usize }, { BLK_K as usize }, Swizzle128B>; // (BLK_M, BLK_K)
type TileB = SmemTile<u8, { BLK_N as usize }, { BLK_K as usize }, Swizzle128B>; // (BLK_N, BLK_K)
type RingA = SmemTileRing<u8, { BLK_M as usize }, { BLK_K as usize }, Swizzle128B, STAGES>; // STAGES × (BLK_M, BLK_K)
type RingB = SmemTileRing<u8, { BLK_N as usize }, { BLK_K as usize }, Swizzle128B, STAGES>; // STAGES × (BLK_N, BLK_K)
/// One K block's scale cells of 128 rows, transposed for `tcgen05.cp 32x128b.warpx4`.
type ScaleTile = SmemTile<u32, 32, 4, NoSwizzle>; // (32 lanes, 4 row groups)
type RingScale = SmemTileRing<u32, 32, 4, NoSwizzle, STAGES>; // STAGES × (32, 4)
type Stage = ((TileA, TileB), (ScaleTile, ScaleTile));

const MMA: ScaledUmma =
    ScaledUmma::new(BlockScaledMma::mxf8f6f4(ElemType::E4M3, ElemType::E4M3, BLK_M, BLK_N, CtaGroup::One));
/// MMAs per K block (K = 32 each, one scale byte each), and the bytes each advances inside
/// the 128-byte swizzle atom.
const K_STEPS: u32 = 4;
const K_STEP_BYTES: u32 = BLK_K / K_STEPS;

const _: () = assert!(<Stage as TmaLoad>::BYTES == 33 * 1024);
const _: () = assert!(SF_BASE_COL + STAGES as u32 * SF_COLS_PER_STAGE <= TMEM_COLS);

/// The ring (A, B and their scale cells) and the four tensor maps it is filled from.
struct BlockScaled<'a> {
    a: RingA,
    b: RingB,
    sfa: RingScale,
    sfb: RingScale,
    maps: [&'a TensorMap; 4],
    /// K blocks per tile row of scale cells (the scale tensors' row pitch in blocks).
    k_blocks: u32,
}

impl UmmaMainloop for BlockScaled<'_> {
    type Stage = Stage;

    #[inline(always)]
    unsafe fn load(&self, slot: u32, kb: u32, m0: u32, n0: u32, full: &Mbarrier) {
        let [map_a, map_b, map_sfa, map_sfb] = self.maps;
        let sfa_row = ((m0 / BLK_M) * self.k_blocks + kb) * 32;
        let sfb_row = ((n0 / BLK_N) * self.k_blocks + kb) * 32;
        // SAFETY: the producer's thread, free slot, `full` armed for `Stage`'s bytes (caller).
        unsafe {
            tma::load_2d(&self.a.stage(slot), map_a, (kb * BLK_K) as i32, m0 as i32, full);
            tma::load_2d(&self.b.stage(slot), map_b, (kb * BLK_K) as i32, n0 as i32, full);
            tma::load_2d(&self.sfa.stage(slot), map_sfa, 0, sfa_row as i32, full);
            tma::load_2d(&self.sfb.stage(slot), map_sfb, 0, sfb_row as i32, full);
        }
    }

    /// Copies the slot's scale cells into its TMEM columns, then issues 4 block-scaled MMAs.
    #[inline(always)]
    unsafe fn mma(&self, e: &Elected, tmem: Tmem<TMEM_COLS>, slot: u32, d: TmemAddr, first: bool) {
        let (a_tile, b_tile) = (self.a.stage(slot), self.b.stage(slot));
        let sf_cols = tmem.columns::<SF_BASE_COL, { STAGES as u32 * SF_COLS_PER_STAGE }>();
        let sfa_tmem = sf_cols.offset(0, slot * SF_COLS_PER_STAGE);
        let sfb_tmem = sfa_tmem.offset(0, SF_COLS_PER_STAGE / 2);
        // SAFETY: the scale cells arrived with the slot (caller); the slot's TMEM columns were
        // last read by MMAs that completed before the slot was freed.
        unsafe {
            umma::copy_scales_32x128b(e, sfa_tmem, umma::desc_scale_block(&self.sfa.stage(slot)));
            umma::copy_scales_32x128b(e, sfb_tmem, umma::desc_scale_block(&self.sfb.stage(slot)));
        }
        for ks in 0..K_STEPS {
            let a = umma::desc_k_major_sw128(&a_tile, ks * K_STEP_BYTES);
            let b = umma::desc_k_major_sw128(&b_tile, ks * K_STEP_BYTES);
            let mode = Accumulate::unless_first(first && ks == 0);
            // SAFETY: operands landed and `d` drained (caller); scales copied above by this
            // thread (cp → mma is pipelined).
            unsafe { MMA.issue(e, d, a, b, sfa_tmem, sfb_tmem, ks as usize, mode) };
        }
    }
}

/// C = (A·SFA)(B·SFB)ᵀ in bf16 with f32 accumulation; see the module doc for the launch
/// contract and the scale-factor layout.
///
/// # Safety
/// The maps describe A (M × K) and B (N × K) E4M3 and their packed UE8M0 scale tensors with the
/// boxes above; `c` points to M × N bf16; launched as the module doc states.
#[kernel(threads = 192, min_blocks_per_sm = 1)]
pub unsafe fn gemm_mxf8_blockscaled_sm100(
    #[grid_constant] map_a: &TensorMap,
    #[grid_constant] map_b: &TensorMap,
    #[grid_constant] map_sfa: &TensorMap,
    #[grid_constant] map_sfb: &TensorMap,
    c: *mut Bf16,
    m: u32,
    n: u32,
    k: u32,
) {
    let mut smem = DynamicShared::window();
    let mainloop = BlockScaled {
        a: RingA::alloc(&mut smem),
        b: RingB::alloc(&mut smem),
        sfa: RingScale::alloc(&mut smem),
        sfb: RingScale::alloc(&mut smem),
        maps: [map_a, map_b, map_sfa, map_sfb],
        k_blocks: k.div_ceil(BLK_K),
    };
    // SAFETY: every thread, the rest of the window after the rings; the launch contract (caller).
    unsafe { tcgen05::gemm::<_, BLK_M, BLK_N, BLK_K, STAGES>(smem, &mainloop, c, m, n, k) };
}
