//! Persistent, warp-specialised 16-bit GEMM for Hopper: `D = act(alpha·A·Bᵀ + beta·C + bias)`.
//!
//! Algorithm: a persistent grid of one CTA per SM works through 128 × 256 tiles of D in a
//! grouped (L2-friendly) order. The schedule (`logic::schedule::stream_k`, chosen per launch by
//! the host) is data-parallel — whole tiles round robin — or stream-K / hybrid, where the
//! last, partial wave's K loops are split evenly over the CTAs and the CTAs sharing a tile
//! combine their partial sums through [`crate::gemm_stream_k`]. A and B are K-major (A: M × K, B: N × K),
//! read by TMA in 64-wide K slices into a 4-stage shared-memory ring under 128-byte swizzle;
//! out-of-bounds boxes are zero-filled, so ragged M, N and K need no padding.
//!
//! Warp roles (384 threads):
//! - warpgroup 0, producer: one elected thread issues the TMA loads of every stage
//!   (registers lowered to 40 with `setmaxnreg`);
//! - warpgroups 1 and 2, consumers: each multiplies 64 rows by the 256 columns with
//!   `wgmma.m64n256k16` (128 f32 accumulators per thread, registers raised to 232), keeps
//!   one wgmma group in flight, releases each stage after the next one's wgmmas are issued, and
//!   writes its block through `stmatrix` staging and TMA stores ([`crate::gemm_sm90_store`];
//!   direct stores when D cannot be written by TMA), the stores overlapping the next main loop.
//!   Cooperative entries: both consumers share each 128 × 256 tile. Ping-pong entries
//!   (`*_pingpong_sm90`, data-parallel only): each consumer owns whole 64 × 256 tiles and the
//!   two alternate, so one's epilogue runs under the other's main loop. Narrow entries
//!   (`*_narrow_sm90`): cooperative on 128 × 128 tiles (`wgmma.m64n128k16`), for problems whose
//!   wide tiles quantise badly over the SMs. Cluster entries (`*_cluster_sm90`, data-parallel
//!   only): 2 × 1 clusters whose CTAs take vertically adjacent 128 × 256 tiles; each producer
//!   loads half of every B slice and multicasts it to both CTAs, and each consumer releases a
//!   stage to both producers.
//!
//! Shared memory: 4 stages × (2 × 64×64 + 256×64) bf16 = 192 KiB (narrow: 6 stages ×
//! (2 × 64×64 + 128×64), the same bytes), 32 KiB of output staging (each consumer warpgroup
//! stages its 64 × N block in passes of 128 columns), and the ring's barriers. Measured ratio
//! vs cuBLAS: see docs/PERF.md (H200).

use warpforge_dsl::abi::gemm_sm90::{A_BOX_ROWS, BLOCK_K, BLOCK_M, BLOCK_N, CONSUMERS, PARTIAL_SLOT_FLOATS, STAGES};
use warpforge_dsl::abi::{GemmParams, TensorMap, TilePlan};
use warpforge_dsl::logic::schedule::stream_k::UnitRole;
use warpforge_dsl::mbarrier::{Mbarrier, Phase};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::epilogue::{Output, Staging};
use warpforge_dsl::parts::mainloop::{Consumer, SsStage, StageRelease, produce};
#[cfg(doc)]
use warpforge_dsl::parts::schedule::ExpertTiles;
use warpforge_dsl::parts::schedule::{GroupedStreamK, TileGeometry, TileScheduler};
use warpforge_dsl::parts::stream_k::{HandOverSide, PartialSlots};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::NamedBarrier;
use warpforge_dsl::thread::{block_idx, block_idx_x_in_place, thread_rank, warp_id};
use warpforge_dsl::tile::{SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{Acc64x256F32, Accumulator, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement};
use warpforge_dsl::{tma, warp};

use crate::gemm_epilogue::Linear;
use crate::gemm_sm90_ctas::{CtaGroup, Pair};

const K_SLICE: usize = BLOCK_K as usize;
/// Rows of B each CTA of a 2 × 1 cluster loads and multicasts (half the wide tile).
const HALF_B: usize = BLOCK_N as usize / 2;
/// Register budgets after `setmaxnreg`: 128 × 40 + 256 × 232 ≤ 64 Ki registers per SM.
const PRODUCER_REGS: u32 = 40;
const CONSUMER_REGS: u32 = 232;
/// Arrivals that hand the ping-pong turn over: every thread of a consumer warpgroup.
const TURN_ARRIVALS: u32 = 128;

type ATile<T> = SmemTile<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B>; // (64, BLOCK_K)
type BTile<T, const BN: usize> = SmemTile<T, BN, K_SLICE, Swizzle128B>; // (BN, BLOCK_K)
type ARing<T, const RING: usize> = SmemTileRing<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B, RING>;
type BRing<T, const BN: usize, const RING: usize> = SmemTileRing<T, BN, K_SLICE, Swizzle128B, RING>;

/// Where a consumer warpgroup's finished 64 × BN block goes: the launch parameters, D's tensor
/// map (valid when `p.d_tma != 0`), this warpgroup's staging boxes, named barrier and leader,
/// and the block's batch and top-left element in the tile grid (row of D, column of the tile
/// grid — the column of D for a plain GEMM).
pub struct BlockTarget<'a, O: Output> {
    pub p: &'a GemmParams,
    pub d_map: &'a TensorMap,
    pub staging: &'a Staging<O>,
    pub barrier: &'a NamedBarrier<128>,
    pub leader: bool,
    pub batch: u32,
    pub row0: u32,
    pub col0: u32,
}

/// What the GEMM body does with a finished accumulator block `W` (after any stream-K fix-up):
/// the one slot a GEMM-like kernel on this body fills.
pub trait TileEpilogue<W> {
    /// Element type of D.
    type Out: Output;
    /// Writes the block.
    ///
    /// # Safety
    /// The whole consumer warpgroup calls it together; `target` as built by the body for a
    /// launch whose parameters satisfy the kernel's contract.
    unsafe fn write(acc: &W, target: &BlockTarget<'_, Self::Out>);
}

/// The whole kernel, generic over the input type, the epilogue, the accumulator `W` (the tile
/// width `BN`: `Acc64x256F32` wide, `Acc64x128F32` narrow), the ring depth, the consumer
/// arrangement and the CTA group. `PINGPONG = false` (cooperative): both consumer warpgroups
/// work on one 128 × `BN` tile, 64 rows each. `PINGPONG = true`: every unit is a 64 × `BN` tile,
/// and the warpgroups take the CTA's units alternately (consumer `h` takes units `h`, `h + 2`,
/// …), so one warpgroup's epilogue runs while the other's main loop keeps the tensor cores
/// busy. Two "turn" barriers order the main loops: a warpgroup starts waiting on the ring only
/// after the other has waited on every earlier stage, so every parity wait is within one phase
/// of its barrier. Ping-pong and pairs run data-parallel schedules (whole tiles only).
///
/// # Safety
/// `a_map`/`b_map` describe A (K × M × batch) and B (K × N × batch) with boxes 64 × 64 × 1 and
/// 64 × `BN` × 1 (half of it for pairs) under 128-byte swizzle; `p` describes D (and C, bias)
/// as documented on [`GemmParams`]; `plan` over 64-row tiles when `PINGPONG`, 128-row ones
/// otherwise, over the launch's grid (÷ 2 for pairs), data-parallel for ping-pong and pairs; all
/// valid for the launch; 384 threads, `gemm_sm90::SMEM_BYTES` of dynamic shared memory.
/// `schedule` turns the CTA's tile geometry into the units every role follows: [`dense`] for
/// `plan` as it is, or a grouped GEMM's [`ExpertTiles`] over it (whose batches of B may differ
/// from A's and whose units may be skipped: cooperative only).
#[inline(always)]
pub(crate) unsafe fn gemm<T, E, W, G, S, const PINGPONG: bool, const BN: usize, const RING: usize>(
    a_map: &TensorMap,
    b_map: &TensorMap,
    d_map: &TensorMap,
    p: &GemmParams,
    plan: &TilePlan,
    schedule: impl FnOnce(TileGeometry) -> S,
) where
    T: WgmmaElement,
    E: TileEpilogue<W>,
    W: Accumulator<Elem = f32> + WgmmaSs<T::Kind, T::Kind>,
    G: CtaGroup,
    S: TileScheduler,
{
    // Ping-pong consumers skip the other warpgroup's stages by count: every unit must load.
    const { assert!(!(PINGPONG && S::SKIPS), "ping-pong consumers need schedules without skipped units") };
    // Shared-memory plan.
    let mut smem = DynamicShared::window();
    let a_top = ARing::<T, RING>::alloc(&mut smem);
    let a_bottom = ARing::<T, RING>::alloc(&mut smem);
    let b_ring = BRing::<T, BN, RING>::alloc(&mut smem);
    let staging = [Staging::<E::Out>::alloc(&mut smem), Staging::<E::Out>::alloc(&mut smem)];
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };
    let turn_slots = [Mbarrier::alloc(&mut smem), Mbarrier::alloc(&mut smem)];
    // SAFETY: initialised below by thread 0 (before the pipeline's init fence) and published by
    // the block barrier; used only in ping-pong.
    let turns = unsafe { [Mbarrier::at(turn_slots[0]), Mbarrier::at(turn_slots[1])] };

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(a_map);
        tma::prefetch(b_map);
        // SAFETY: one thread. Cooperative: each consumer warpgroup releases each stage once per
        // lap, to each CTA of the group; ping-pong: only the warpgroup that read it. A turn
        // phase completes when all 128 threads of the handing-over warpgroup arrive.
        unsafe {
            turns[0].init(TURN_ARRIVALS);
            turns[1].init(TURN_ARRIVALS);
            pipe.init(if PINGPONG { 1 } else { CONSUMERS * G::Release::CTAS });
        }
    }
    // SAFETY: all 384 threads (of every CTA of the group) reach this barrier.
    unsafe { G::sync() };

    // The host's schedule, shared by every role so they agree on the unit sequence: tiles of
    // every batch stacked along M, visited in grouped order; whole tiles or stream-K runs.
    let block_m = if PINGPONG { A_BOX_ROWS } else { BLOCK_M };
    let geometry = TileGeometry {
        block_m,
        block_n: BN as u32,
        raster_rows: plan.raster_rows,
        ctas_per_worker: G::CTAS,
        rank: G::rank(),
    };
    let units = schedule(geometry);
    let worker = block_idx().x / G::CTAS;
    // SAFETY: every thread of the block, convergently (after the barrier above).
    let role = unsafe { warpgroup::uniform_id() };

    if role == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let mut state = PipelineState::<RING>::START;
            let mut index = 0;
            while let Some(unit) = units.unit(worker, index) {
                if unit.skip {
                    index += 1;
                    continue;
                }
                let (batch, b_batch, m0, n0) = (unit.batch, unit.b_batch, unit.m0, unit.n0);
                let slices = unit.k_begin..unit.k_end;
                if PINGPONG {
                    let load = |stage: u32, slice: u32, full: &Mbarrier| {
                        let k0 = (slice * BLOCK_K) as i32;
                        // SAFETY: the maps' boxes match the tiles (host contract); the slot was
                        // acquired free by `produce`.
                        unsafe {
                            tma::load_3d(&a_top.stage(stage), a_map, k0, m0, batch, full);
                            G::load_b::<T, BN, HALF_B, K_SLICE, RING>(&b_ring, stage, b_map, (k0, n0, b_batch), full);
                        }
                    };
                    // SAFETY: the one producer thread; each slot gets this warpgroup tile's A rows
                    // and B: exactly the stage type's bytes (full boxes, out-of-bounds elements
                    // zero-filled).
                    unsafe { produce::<(ATile<T>, BTile<T, BN>), RING>(&pipe, &mut state, slices, load) };
                } else {
                    let load = |stage: u32, slice: u32, full: &Mbarrier| {
                        let (k0, m1) = ((slice * BLOCK_K) as i32, m0 + A_BOX_ROWS as i32);
                        // SAFETY: as above.
                        unsafe {
                            tma::load_3d(&a_top.stage(stage), a_map, k0, m0, batch, full);
                            tma::load_3d(&a_bottom.stage(stage), a_map, k0, m1, batch, full);
                            G::load_b::<T, BN, HALF_B, K_SLICE, RING>(&b_ring, stage, b_map, (k0, n0, b_batch), full);
                        }
                    };
                    // SAFETY: as above, with both warpgroups' A rows.
                    unsafe { produce::<(ATile<T>, ATile<T>, BTile<T, BN>), RING>(&pipe, &mut state, slices, load) };
                }
                index += 1;
            }
        }
        return;
    }

    // Consumers.
    // SAFETY: whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let half = role - 1;
    let a_ring = if PINGPONG || half == 0 { a_top } else { a_bottom };
    // Ping-pong: this warpgroup's units are `half`, `half + 2`, …
    let (first_unit, unit_step) = if PINGPONG { (half, 2) } else { (0, 1) };
    // This warpgroup waits on `my_turn` and hands the turn over on `their_turn`.
    let (my_turn, their_turn) = if half == 0 { (turns[0], turns[1]) } else { (turns[1], turns[0]) };
    let mut turn = Phase::ZERO;
    let my_staging = if half == 0 { staging[0] } else { staging[1] };
    // SAFETY: ids 1 and 2 are used only here, each by exactly its warpgroup's 128 threads.
    let wg_barrier = unsafe { NamedBarrier::<128>::new(1 + half) };
    let leader = warpgroup::thread_index() == 0;
    // SAFETY: the host passes a workspace and zeroed flags for the grid whenever it schedules
    // stream-K units; without them no unit has a Partial or Finalize role.
    let slots = unsafe { PartialSlots::<CONSUMERS, PARTIAL_SLOT_FLOATS>::new(p.workspace, p.flags) };
    let side = HandOverSide { half, barrier: &wg_barrier, leader };
    let stage_mma = SsStage { a: a_ring, b: b_ring };
    let mut consumer = Consumer::new(pipe, G::release(), leader);
    let mut index = first_unit;
    // The worker is read in place per trip (`block_idx_x_in_place`): held across the main loop
    // it would cost registers there.
    loop {
        // SAFETY: the consumer warpgroup's lanes reach here together (converged at the loop's end).
        let Some(unit) = (unsafe { units.unit_uniform(block_idx_x_in_place() / G::CTAS, index) }) else { break };
        'unit: {
            if unit.skip {
                break 'unit;
            }
            if PINGPONG && index > 0 {
                // The other warpgroup's unit `index - 1` fills the ring just before this one: skip
                // its stages (a whole tile's: ping-pong plans are data-parallel), and start once its
                // main loop has waited on all of them.
                consumer.skip(plan.units.k_iters_per_tile());
                my_turn.wait(&mut turn);
            }
            // SAFETY: the whole warpgroup, convergently; the producer fills these slots in order.
            let mut acc: W = unsafe { consumer.mainloop(unit.slices(), &stage_mma) };
            if PINGPONG {
                // Every thread arrives (no branch on the leader here: LLVM would duplicate the
                // `.aligned` wgmma wait below into both arms, and a warp split over two copies of
                // an aligned instruction hangs).
                // SAFETY: one arrival per thread and unit on the other warpgroup's turn barrier
                // (count 128); the other waits once per unit of its own, and cannot fall two
                // phases behind (this warpgroup waits for its arrivals before its next main loop).
                unsafe { their_turn.arrive() };
            }
            // SAFETY: whole warpgroup, once after the main loop; `acc` is readable after it.
            unsafe { consumer.drain() };
            match unit.role {
                UnitRole::Whole => {}
                UnitRole::Partial => {
                    // SAFETY: the whole warpgroup, once per launch (a CTA's only Partial unit is its
                    // first stream-K unit); `acc` was waited for above.
                    unsafe { slots.publish(&acc, worker, side) };
                    break 'unit;
                }
                UnitRole::Finalize => {
                    let (_, last) = unit.contributors;
                    // SAFETY: the whole warpgroup; CTAs worker+1..=last each publish this tile's
                    // partial once (the schedule's contract).
                    unsafe { slots.accumulate(&mut acc, worker + 1, last, side) };
                }
            }
            let row0 = unit.m0 as u32 + if PINGPONG { 0 } else { half * A_BOX_ROWS };
            let target = BlockTarget {
                p,
                d_map,
                staging: &my_staging,
                barrier: &wg_barrier,
                leader,
                batch: unit.batch as u32,
                row0,
                col0: unit.n0 as u32,
            };
            // SAFETY: the whole warpgroup; the staging and barrier are this warpgroup's.
            unsafe { E::write(&acc, &target) };
        }
        index += unit_step;
        // The loop's one back-edge, reached by the whole warp (`warp::converge`): the stream-K
        // hand-over and the direct stores branch per thread.
        // SAFETY: the whole warpgroup, at the end of each unit.
        unsafe { warp::converge() };
    }
    if leader && p.d_tma != 0 {
        // The staged tiles must stay readable until the last stores have read them.
        tma::wait_group::<0>();
    }
    if G::CTAS > 1 {
        // Neither CTA exits while the other may still arrive on its barriers.
        // SAFETY: every non-exited thread of both CTAs (the consumers; the producer warpgroup
        // has returned) reaches it once.
        unsafe { G::sync() };
    }
}

/// The units of a dense (batched) GEMM: `plan` as the host built it.
#[inline(always)]
pub(crate) fn dense(plan: &TilePlan, geometry: TileGeometry) -> GroupedStreamK {
    GroupedStreamK { raster: plan.raster, schedule: plan.units, geometry }
}

/// The wide tile (128 × 256, or 64 × 256 per ping-pong warpgroup): accumulator, columns, stages.
macro_rules! wide {
    ($input:ty, $epilogue:ty, $pingpong:literal) => {
        $crate::gemm_bf16_ws_persistent_sm90::wide!(
            $input,
            $epilogue,
            $pingpong,
            warpforge_dsl::parts::schedule::GroupedStreamK
        )
    };
    ($input:ty, $epilogue:ty, $pingpong:literal, $schedule:ty) => {
        $crate::gemm_bf16_ws_persistent_sm90::gemm::<
            $input,
            $epilogue,
            warpforge_dsl::warpgroup::acc::Acc64x256F32,
            $crate::gemm_sm90_ctas::Solo,
            $schedule,
            $pingpong,
            { warpforge_dsl::abi::gemm_sm90::BLOCK_N as usize },
            { warpforge_dsl::abi::gemm_sm90::STAGES as usize },
        >
    };
}
/// The narrow tile (128 × 128, cooperative).
macro_rules! narrow {
    ($input:ty, $epilogue:ty, $pingpong:literal) => {
        $crate::gemm_bf16_ws_persistent_sm90::gemm::<
            $input,
            $epilogue,
            warpforge_dsl::warpgroup::acc::Acc64x128F32,
            $crate::gemm_sm90_ctas::Solo,
            warpforge_dsl::parts::schedule::GroupedStreamK,
            $pingpong,
            { warpforge_dsl::abi::gemm_sm90::NARROW_BLOCK_N as usize },
            { warpforge_dsl::abi::gemm_sm90::NARROW_STAGES as usize },
        >
    };
}
/// The wide cooperative tile in 2 × 1 clusters: each CTA loads half of every B slice and
/// multicasts it to both.
macro_rules! wide_pair {
    ($input:ty, $epilogue:ty, $pingpong:literal) => {
        gemm::<
            $input,
            $epilogue,
            Acc64x256F32,
            Pair,
            GroupedStreamK,
            $pingpong,
            { BLOCK_N as usize },
            { STAGES as usize },
        >
    };
}
pub(crate) use {narrow, wide};

/// `#[kernel]` entries over [`gemm`]: name, input type, epilogue, tile macro, arrangement.
macro_rules! gemm_entries {
    ($($name:ident: $input:ty => $epilogue:ty, $tile:ident, pingpong = $pingpong:literal
        $(, cluster = $cluster:tt)?;)*) => {$(
        /// GEMM entry point; see the module docs and [`GemmParams`](warpforge_dsl::abi::GemmParams).
        ///
        /// # Safety
        /// See `gemm`: tensor maps and parameters as the host launcher builds them.
        #[warpforge_dsl::kernel(threads = 384, min_blocks_per_sm = 1 $(, cluster = $cluster)?)]
        pub unsafe fn $name(
            #[grid_constant] a_map: &warpforge_dsl::abi::TensorMap,
            #[grid_constant] b_map: &warpforge_dsl::abi::TensorMap,
            #[grid_constant] d_map: &warpforge_dsl::abi::TensorMap,
            params: warpforge_dsl::abi::GemmParams,
            plan: warpforge_dsl::abi::TilePlan,
        ) {
            // SAFETY: forwarded to the launcher's contract.
            unsafe { $tile!($input, $epilogue, $pingpong)(a_map, b_map, d_map, &params, &plan, |geometry| $crate::gemm_bf16_ws_persistent_sm90::dense(&plan, geometry)) }
        }
    )*};
}
pub(crate) use gemm_entries;

gemm_entries! {
    gemm_bf16_bf16_ws_persistent_sm90: Bf16 => Linear<Bf16>, wide, pingpong = false;
    gemm_bf16_f16_ws_persistent_sm90: Bf16 => Linear<F16>, wide, pingpong = false;
    gemm_bf16_f32_ws_persistent_sm90: Bf16 => Linear<f32>, wide, pingpong = false;
    gemm_f16_bf16_ws_persistent_sm90: F16 => Linear<Bf16>, wide, pingpong = false;
    gemm_f16_f16_ws_persistent_sm90: F16 => Linear<F16>, wide, pingpong = false;
    gemm_f16_f32_ws_persistent_sm90: F16 => Linear<f32>, wide, pingpong = false;
    gemm_bf16_bf16_pingpong_sm90: Bf16 => Linear<Bf16>, wide, pingpong = true;
    gemm_f16_f16_pingpong_sm90: F16 => Linear<F16>, wide, pingpong = true;
    gemm_bf16_bf16_narrow_sm90: Bf16 => Linear<Bf16>, narrow, pingpong = false;
    gemm_f16_f16_narrow_sm90: F16 => Linear<F16>, narrow, pingpong = false;
    gemm_bf16_bf16_cluster_sm90: Bf16 => Linear<Bf16>, wide_pair, pingpong = false, cluster = (2, 1, 1);
    gemm_f16_f16_cluster_sm90: F16 => Linear<F16>, wide_pair, pingpong = false, cluster = (2, 1, 1);
}
