//! `D = relu(A·Bᵀ)²` in bf16: a persistent, warp-specialised Hopper GEMM assembled from
//! warpforge's L3 parts (`warpforge_dsl::parts`), with an epilogue of its own: squared ReLU,
//! which no warpforge entry offers.
//!
//! Algorithm: a persistent grid works through the 128 × 128 tiles of D in grouped (L2-friendly)
//! order, whole tiles round robin over the CTAs ([`GroupedStreamK`] in data-parallel mode). A
//! (M × K) and B (N × K) are K-major, read by TMA in 64-wide K slices into a 4-stage ring under
//! 128-byte swizzle; boxes past the edges are zero-filled, so ragged M, N and K need no padding.
//!
//! Warp roles (384 threads):
//! - warpgroup 0, producer (registers lowered to 40): one elected thread fills the ring with
//!   [`produce`]: per slot A's two 64-row boxes and B's 128-row box;
//! - warpgroups 1 and 2, consumers (registers raised to 232): each multiplies its 64 rows of the
//!   tile by its 128 columns (`wgmma.m64n128k16`, 64 f32 accumulators per thread) through a
//!   [`Consumer`] with one wgmma group in flight, then writes relu² of its block with
//!   [`store_direct`] (any pitch of D; no staging).
//!
//! Shared memory: 4 stages × (2 × 64×64 + 128×64) bf16 = 128 KiB and the ring's barriers
//! ([`SMEM`](crate::gemm_abi::SMEM), the plan the host sizes the launch from). An example of
//! the parts, not a tuned kernel: it has no measurements.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::kernel;
use warpforge_dsl::logic::schedule::stream_k::{StreamKMode, StreamKScheduler};
use warpforge_dsl::logic::schedule::swizzled::{Raster, Rasterization};
use warpforge_dsl::math::relu;
use warpforge_dsl::mbarrier::Mbarrier;
use warpforge_dsl::num::Bf16;
use warpforge_dsl::parts::epilogue::{DirectStore, store_direct};
use warpforge_dsl::parts::mainloop::{Consumer, OwnCta, SsStage, StageRelease, produce};
use warpforge_dsl::parts::schedule::{GroupedStreamK, TileGeometry, TileScheduler};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, block_idx_x_in_place, grid_dim, thread_rank, warp_id, warpgroup_id};
use warpforge_dsl::tile::{RingOf, TileOf};
use warpforge_dsl::warpgroup::{self, acc::Acc64x128F32};
use warpforge_dsl::{tma, warp};

use crate::gemm_abi::{ATile, BLOCK_K, BLOCK_M, BLOCK_N, BTile, GemmRelu2Params, STAGES};
use crate::logic::tile_spec::Tile;

const RING: usize = STAGES as usize;
/// Register budgets after `setmaxnreg`: 128 × 40 + 256 × 232 ≤ 64 Ki registers per SM.
const PRODUCER_REGS: u32 = 40;
const CONSUMER_REGS: u32 = 232;
/// Consumer warpgroups, each releasing every slot once per lap.
const CONSUMERS: u32 = 2;
/// Tile rows per band of the grouped order.
const RASTER_GROUP: u32 = 8;

type ARing = RingOf<ATile, RING>; // (RING × ATile)
type BRing = RingOf<BTile, RING>; // (RING × BTile)

/// The epilogue: squared ReLU of the f32 accumulator (rounded to bf16 by the store).
#[inline(always)]
fn relu2(_row: u32, _col: u32, acc: f32) -> f32 {
    let r = relu(acc);
    r * r
}

/// `D = relu(A·Bᵀ)²`; see the module docs.
///
/// # Safety
/// `a_map` describes A (K × M × 1) and `b_map` B (K × N × 1), built for [`ATile`] and
/// [`BTile`] (`TensorMapBuilder::for_tile`); `p.d` addresses D, valid for every element
/// inside `p.m × p.n` at row pitch `p.ldd`; all stay valid for the launch. 384 threads and
/// [`SMEM`](crate::gemm_abi::SMEM)`.launch_bytes()` of dynamic shared memory.
#[kernel(threads = 384, min_blocks_per_sm = 1)]
pub unsafe fn gemm_relu2_bf16(
    #[grid_constant] a_map: &TensorMap,
    #[grid_constant] b_map: &TensorMap,
    p: GemmRelu2Params,
) {
    // Shared-memory plan.
    let mut smem = DynamicShared::window();
    let a_top = ARing::alloc(&mut smem);
    let a_bottom = ARing::alloc(&mut smem);
    let b_ring = BRing::alloc(&mut smem);
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(a_map);
        tma::prefetch(b_map);
        // SAFETY: one thread; each consumer warpgroup releases each slot once per lap.
        unsafe { pipe.init(CONSUMERS * OwnCta::CTAS) };
    }
    // SAFETY: all 384 threads reach this barrier.
    unsafe { sync_threads() };

    // Schedule, the same for every role so they agree on the ring's order without talking.
    let tiles_m = p.m.div_ceil(BLOCK_M);
    let raster = Rasterization::new(tiles_m, p.n.div_ceil(BLOCK_N), RASTER_GROUP, Raster::AlongM);
    let k_slices = p.k.div_ceil(BLOCK_K).max(1);
    let schedule = StreamKScheduler::new(raster.tile_count(), k_slices, grid_dim().x, StreamKMode::DataParallel);
    let geometry =
        TileGeometry { block_m: BLOCK_M, block_n: BLOCK_N, raster_rows: tiles_m, ctas_per_worker: 1, rank: 0 };
    let units = GroupedStreamK { raster, schedule, geometry };

    if warpgroup_id() == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let mut state = PipelineState::<RING>::START;
            let mut index = 0;
            while let Some(unit) = units.unit(block_idx().x, index) {
                let load = |stage: u32, slice: u32, full: &Mbarrier| {
                    let (k0, m1) = ((slice * BLOCK_K) as i32, unit.m0 + ATile::ROWS as i32);
                    // SAFETY: the maps' boxes match the tiles (kernel contract); `produce`
                    // acquired the slot free.
                    unsafe {
                        tma::load_3d(&a_top.stage(stage), a_map, k0, unit.m0, 0, full);
                        tma::load_3d(&a_bottom.stage(stage), a_map, k0, m1, 0, full);
                        tma::load_3d(&b_ring.stage(stage), b_map, k0, unit.n0, 0, full);
                    }
                };
                // SAFETY: the one producer thread; each slot gets both A boxes and the B box,
                // exactly the stage type's bytes (whole boxes, out-of-bounds elements zero).
                unsafe {
                    produce::<(TileOf<ATile>, TileOf<ATile>, TileOf<BTile>), RING>(
                        &pipe,
                        &mut state,
                        unit.k_begin..unit.k_end,
                        load,
                    )
                };
                index += 1;
            }
        }
        return;
    }

    // Consumers.
    // SAFETY: the whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let half = warpgroup_id() - 1;
    let stage_mma = SsStage { a: if half == 0 { a_top } else { a_bottom }, b: b_ring };
    let mut consumer = Consumer::new(pipe, OwnCta, warpgroup::thread_index() == 0);
    let d = DirectStore { d: p.d as *mut Bf16, ld: p.ldd as u64, batch_stride: 0, rows: p.m, cols: p.n };
    let mut index = 0;
    // The worker is read in place per trip: held across the main loop it would cost registers.
    while let Some(unit) = units.unit(block_idx_x_in_place(), index) {
        // SAFETY: the whole warpgroup, convergently; the producer fills these slots in order.
        let acc: Acc64x128F32 = unsafe { consumer.mainloop(unit.slices(), &stage_mma) };
        // SAFETY: the whole warpgroup, once after the main loop; `acc` is readable after it.
        unsafe { consumer.drain() };
        let row0 = unit.m0 as u32 + half * ATile::ROWS;
        // SAFETY: D is valid for every element inside m × n at pitch `ldd` (kernel contract).
        unsafe { store_direct(&acc, &d, (0, row0, unit.n0 as u32), relu2) };
        index += 1;
    }
}
