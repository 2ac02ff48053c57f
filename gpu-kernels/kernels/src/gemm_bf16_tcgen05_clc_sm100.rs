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
//! Warp roles (192 threads):
//! | warp | role |
//! | --- | --- |
//! | 0 | TMA producer (elected lane) and CLC issuer |
//! | 1 | TMEM allocator/deallocator and MMA issuer (elected lane) |
//! | 2–5 | epilogue: TMEM lane quarter `warp % 4` → 32 rows each, bf16 stores to global |
//! All six warps read every CLC response (the response ring's reader count).
//!
//! Pipelines: smem ring of `STAGES` = 4 (full: TMA bytes; empty: `tcgen05.commit` of the MMAs
//! that read the stage); accumulator ring of 2 TMEM buffers (full: `tcgen05.commit` after the
//! tile's last MMA; empty: one arrival per epilogue warp), so the epilogue of tile i overlaps the
//! MMAs of tile i+1; CLC ring of 2 response slots.
//!
//! Shared memory: A stages 4 × 16 KiB (128 × 64 bf16, 128B swizzle) + B stages 4 × 32 KiB
//! (256 × 64) = 192 KiB, + 18 mbarriers, 2 CLC slots, the TMEM address slot, and up to 1 KiB of
//! alignment: launch with 197 KiB of dynamic shared memory. TMEM: 512 columns = 2 × 256 f32.
//!
//! Launch contract: grid = ⌈M/128⌉ · ⌈N/256⌉ CTAs (x), 192 threads, cluster 1; tensor maps with
//! boxes 64 × 128 (A) and 64 × 256 (B), 128B swizzle; K a multiple of 8 (16-byte TMA rows).
//! Partial tiles are zero-filled by TMA and masked in the epilogue.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::blackwell::clc::{ClcCursor, ClcPipeline};
use warpforge_dsl::blackwell::tmem::{Tmem, TmemAccumulator, TmemOwner};
use warpforge_dsl::blackwell::umma::{self, Accumulate, Umma};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::tcgen05_desc::{AccType, CtaGroup, DenseKind, DenseMma, ElemType};
use warpforge_dsl::num::Bf16;
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{thread_rank, warp_id};
use warpforge_dsl::tile::{SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::tma;
use warpforge_dsl::warp::{Elected, elect_one};

use crate::tmem_epilogue_sm100::{store_tiles, tile_origin};

const BLK_M: u32 = 128;
const BLK_N: u32 = 256;
const BLK_K: u32 = 64;
const STAGES: usize = 4;
const ACC_BUFFERS: usize = 2;
const CLC_SLOTS: usize = 2;
const PRODUCER_WARP: u32 = 0;
const MMA_WARP: u32 = 1;
const EPILOGUE_WARPS: u32 = 4;
const READER_WARPS: u32 = 2 + EPILOGUE_WARPS;
const TMEM_COLS: u32 = 512;

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
const _: () = assert!(ACC_BUFFERS as u32 * BLK_N <= TMEM_COLS);

/// Everything the roles share, carved once at the top.
struct Plan {
    a: RingA,
    b: RingB,
    ring: Pipeline<STAGES>,
    acc_ring: Pipeline<ACC_BUFFERS>,
    clc: ClcPipeline<CLC_SLOTS>,
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
    // ---- smem plan
    let mut smem = DynamicShared::window();
    let a = RingA::alloc(&mut smem);
    let b = RingB::alloc(&mut smem);
    // SAFETY: every thread carves the same plan in the same order.
    let (ring, acc_ring) = unsafe { (Pipeline::alloc(&mut smem), Pipeline::alloc(&mut smem)) };
    let clc = ClcPipeline::alloc(&mut smem);
    let tmem_slot = smem.alloc::<u32>(1, 4);
    let plan = Plan { a, b, ring, acc_ring, clc };

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
        PRODUCER_WARP => produce(&plan, &mut cursor, elected.as_ref(), map_a, map_b, tiles_n, k_blocks),
        MMA_WARP => issue_mmas(&plan, &mut cursor, elected.as_ref(), acc, k_blocks),
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

/// Warp 0: asks CLC for the next tile, then streams the tile's K blocks into the ring.
#[inline(always)]
fn produce(
    plan: &Plan,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    map_a: &TensorMap,
    map_b: &TensorMap,
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
                // SAFETY: the one producer thread; the two loads deliver exactly (TileA, TileB) bytes
                // on the returned barrier, into the slot the empty barrier handed back.
                unsafe {
                    let full = plan.ring.producer_acquire::<(TileA, TileB)>(state);
                    tma::load_2d(&a, map_a, (kb * BLK_K) as i32, m0 as i32, &full);
                    tma::load_2d(&b, map_b, (kb * BLK_K) as i32, n0 as i32, &full);
                }
            }
            state.advance();
        }
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(&plan.clc, elected) };
    }
}

/// Warp 1: per tile, waits for a drained accumulator buffer, issues BLK_K / 16 MMAs per ring
/// stage (each stage freed by a commit), and publishes the buffer with a final commit.
#[inline(always)]
fn issue_mmas(
    plan: &Plan,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
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
                for ks in 0..K_STEPS {
                    let a = umma::desc_k_major_sw128(&a_tile, ks * K_STEP_BYTES);
                    let b = umma::desc_k_major_sw128(&b_tile, ks * K_STEP_BYTES);
                    // SAFETY: the stage's TMA data is complete (full barrier); the buffer was
                    // drained by the epilogue (empty barrier + fence); D fits the allocation.
                    unsafe { MMA.issue(e, d.addr(), a, b, Accumulate::unless_first(kb == 0 && ks == 0)) };
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
