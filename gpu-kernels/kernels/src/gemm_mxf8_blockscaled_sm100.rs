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
//! Warp roles (192 threads): warp 0 TMA producer + CLC issuer; warp 1 TMEM owner, scale copies
//! and MMA issuer; warps 2–5 epilogue (TMEM lane quarter `warp % 4`). All six read every CLC
//! response.
//!
//! Pipelines: smem ring of `STAGES` = 6 (full: TMA bytes of A, B, SFA, SFB; empty:
//! `tcgen05.commit`); 2 TMEM accumulator buffers (MMA of tile i+1 overlaps the epilogue of tile
//! i); 2 CLC response slots. Each stage owns its 8 TMEM scale columns, so a stage's scales are
//! overwritten only after the commit that freed the stage, i.e. after the MMAs that read them.
//!
//! Shared memory: 6 × (16 KiB A + 16 KiB B + 512 B SFA + 512 B SFB) = 198 KiB + barriers and
//! slots + up to 1 KiB alignment: launch with 200 KiB. TMEM: 512 columns allocated (2 × 128 f32
//! accumulator columns + 6 × 8 scale columns = 304 used; allocations are powers of two).
//!
//! Launch contract: grid = ⌈M/128⌉ · ⌈N/128⌉ CTAs (x), 192 threads, cluster 1; tensor maps:
//! A and B boxes 128 × 128 bytes with 128B swizzle, SFA and SFB boxes 4 × 32 u32 without
//! swizzle; K a multiple of 128 (whole scale cells). Partial M/N tiles are zero-filled by TMA
//! and masked in the epilogue.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::blackwell::clc::{ClcCursor, ClcPipeline};
use warpforge_dsl::blackwell::tmem::{Tmem, TmemAccumulator, TmemOwner};
use warpforge_dsl::blackwell::umma::{self, Accumulate, ScaledUmma};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::tcgen05_desc::{BlockScaledMma, CtaGroup, ElemType};
use warpforge_dsl::num::Bf16;
use warpforge_dsl::pipeline::{Pipeline, PipelineState, TmaLoad};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{thread_rank, warp_id};
use warpforge_dsl::tile::{NoSwizzle, SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::tma;
use warpforge_dsl::warp::{Elected, elect_one};

use crate::tmem_epilogue_sm100::{store_tiles, tile_origin};

const BLK_M: u32 = 128;
const BLK_N: u32 = 128;
const BLK_K: u32 = 128;
const STAGES: usize = 6;
const ACC_BUFFERS: usize = 2;
const CLC_SLOTS: usize = 2;
const PRODUCER_WARP: u32 = 0;
const MMA_WARP: u32 = 1;
const EPILOGUE_WARPS: u32 = 4;
const READER_WARPS: u32 = 2 + EPILOGUE_WARPS;
const TMEM_COLS: u32 = 512;

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

/// Everything the roles share, carved once at the top.
struct Plan {
    a: RingA,
    b: RingB,
    sfa: RingScale,
    sfb: RingScale,
    ring: Pipeline<STAGES>,
    acc_ring: Pipeline<ACC_BUFFERS>,
    clc: ClcPipeline<CLC_SLOTS>,
}

/// The four tensor maps of one launch.
struct Maps<'a> {
    a: &'a TensorMap,
    b: &'a TensorMap,
    sfa: &'a TensorMap,
    sfb: &'a TensorMap,
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
    // ---- smem plan
    let mut smem = DynamicShared::window();
    let a = RingA::alloc(&mut smem);
    let b = RingB::alloc(&mut smem);
    let sfa = RingScale::alloc(&mut smem);
    let sfb = RingScale::alloc(&mut smem);
    // SAFETY: every thread carves the same plan in the same order.
    let (ring, acc_ring) = unsafe { (Pipeline::alloc(&mut smem), Pipeline::alloc(&mut smem)) };
    let clc = ClcPipeline::alloc(&mut smem);
    let tmem_slot = smem.alloc::<u32>(1, 4);
    let plan = Plan { a, b, sfa, sfb, ring, acc_ring, clc };

    // ---- barrier init and TMEM allocation
    let warp = warp_id();
    if thread_rank() == 0 {
        // SAFETY: one thread, before the block barrier below.
        unsafe {
            plan.ring.init(1);
            plan.acc_ring.init(EPILOGUE_WARPS);
            plan.clc.init(READER_WARPS);
        }
    }
    // SAFETY: the whole MMA warp; the slot is reserved for it; nothing else allocates.
    let owner = if warp == MMA_WARP { Some(unsafe { TmemOwner::<TMEM_COLS>::allocate(tmem_slot) }) } else { None };
    // SAFETY: every thread reaches this barrier.
    unsafe { sync_threads() };
    // SAFETY: the barrier above published the allocation.
    let tmem = unsafe { Tmem::<TMEM_COLS>::published(tmem_slot) };
    let acc = tmem.accumulator::<0, BLK_N>();

    // ---- persistent loop per role
    let tiles_n = n.div_ceil(BLK_N);
    let k_blocks = k.div_ceil(BLK_K);
    // SAFETY: all 32 lanes of every warp are converged here.
    let elected = unsafe { elect_one() };
    let mut cursor = ClcCursor::<CLC_SLOTS>::start();
    match warp {
        PRODUCER_WARP => {
            let maps = Maps { a: map_a, b: map_b, sfa: map_sfa, sfb: map_sfb };
            produce(&plan, &mut cursor, elected.as_ref(), &maps, tiles_n, k_blocks)
        }
        MMA_WARP => issue_mmas(&plan, &mut cursor, elected.as_ref(), tmem, acc, k_blocks),
        _ => store_tiles::<BLK_M, BLK_N, ACC_BUFFERS, CLC_SLOTS>(
            &plan.acc_ring,
            &plan.clc,
            &mut cursor,
            elected.as_ref(),
            acc,
            c,
            m,
            n,
            tiles_n,
        ),
    }

    // ---- teardown: every TMEM reader fenced before its last arrival; then free TMEM
    // SAFETY: every thread reaches this barrier.
    unsafe { sync_threads() };
    if let Some(owner) = owner {
        // SAFETY: the allocating warp, after all TMEM traffic completed (barrier above).
        unsafe { owner.deallocate(tmem) };
    }
}

/// Warp 0: asks CLC for the next tile, then streams the tile's K blocks (operands and scale
/// cells) into the ring.
#[inline(always)]
fn produce(
    plan: &Plan,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    maps: &Maps<'_>,
    tiles_n: u32,
    k_blocks: u32,
) {
    let mut state = PipelineState::<STAGES>::START;
    while let Some(tile) = cursor.tile() {
        // SAFETY: the only issuing warp, once per tile, before its advance.
        unsafe { cursor.request(&plan.clc, elected) };
        let (m0, n0) = tile_origin::<BLK_M, BLK_N>(tile, tiles_n);
        for kb in 0..k_blocks {
            if elected.is_some() {
                let (a, b) = (plan.a.stage(state.stage), plan.b.stage(state.stage));
                let (sfa, sfb) = (plan.sfa.stage(state.stage), plan.sfb.stage(state.stage));
                let sfa_row = ((m0 / BLK_M) * k_blocks + kb) * 32;
                let sfb_row = ((n0 / BLK_N) * k_blocks + kb) * 32;
                // SAFETY: the one producer thread; the four loads deliver exactly `Stage` bytes on
                // the returned barrier, into the slot the empty barrier handed back.
                unsafe {
                    let full = plan.ring.producer_acquire::<Stage>(state);
                    tma::load_2d(&a, maps.a, (kb * BLK_K) as i32, m0 as i32, &full);
                    tma::load_2d(&b, maps.b, (kb * BLK_K) as i32, n0 as i32, &full);
                    tma::load_2d(&sfa, maps.sfa, 0, sfa_row as i32, &full);
                    tma::load_2d(&sfb, maps.sfb, 0, sfb_row as i32, &full);
                }
            }
            state.advance();
        }
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(&plan.clc, elected) };
    }
}

/// Warp 1: per tile, waits for a drained accumulator buffer; per ring stage copies the scale
/// cells into the stage's TMEM columns and issues 4 block-scaled MMAs (each stage freed by a
/// commit); publishes the buffer with a final commit.
#[inline(always)]
fn issue_mmas(
    plan: &Plan,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    tmem: Tmem<TMEM_COLS>,
    acc: TmemAccumulator<BLK_N>,
    k_blocks: u32,
) {
    let mut state = PipelineState::<STAGES>::START;
    let mut acc_state = PipelineState::<ACC_BUFFERS>::START;
    while cursor.tile().is_some() {
        if let Some(e) = elected {
            plan.acc_ring.producer_wait(acc_state);
            let d = acc.buffer(acc_state.stage);
            d.acquire();
            for kb in 0..k_blocks {
                plan.ring.consumer_wait(state);
                let (a_tile, b_tile) = (plan.a.stage(state.stage), plan.b.stage(state.stage));
                let (sfa_tile, sfb_tile) = (plan.sfa.stage(state.stage), plan.sfb.stage(state.stage));
                let sf_cols = tmem.columns::<SF_BASE_COL, { STAGES as u32 * SF_COLS_PER_STAGE }>();
                let sfa_tmem = sf_cols.offset(0, state.stage * SF_COLS_PER_STAGE);
                let sfb_tmem = sfa_tmem.offset(0, SF_COLS_PER_STAGE / 2);
                // SAFETY: the scale cells arrived with the stage (full barrier); the stage's TMEM
                // columns were last read by MMAs that completed before the stage was freed.
                unsafe {
                    umma::copy_scales_32x128b(e, sfa_tmem, umma::desc_scale_block(&sfa_tile));
                    umma::copy_scales_32x128b(e, sfb_tmem, umma::desc_scale_block(&sfb_tile));
                }
                for ks in 0..K_STEPS {
                    let a = umma::desc_k_major_sw128(&a_tile, ks * K_STEP_BYTES);
                    let b = umma::desc_k_major_sw128(&b_tile, ks * K_STEP_BYTES);
                    let mode = Accumulate::unless_first(kb == 0 && ks == 0);
                    // SAFETY: operands complete (full barrier); scales copied above by this thread
                    // (cp → mma is pipelined); the buffer was drained by the epilogue.
                    unsafe { MMA.issue(e, d.addr(), a, b, sfa_tmem, sfb_tmem, ks as usize, mode) };
                }
                // SAFETY: the ring's empty barriers expect one arrival per stage and lap.
                unsafe { umma::commit(e, plan.ring.empty(state.stage).addr()) };
                state.advance();
            }
            // SAFETY: the accumulator's full barrier expects this one arrival per lap.
            unsafe { umma::commit(e, plan.acc_ring.full(acc_state.stage).addr()) };
        }
        acc_state.advance();
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(&plan.clc, elected) };
    }
}
