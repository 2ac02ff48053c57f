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

use warpforge_dsl::abi::gemm_sm90::{A_BOX_ROWS, BLOCK_K, BLOCK_N, CONSUMERS, NARROW_BLOCK_N, NARROW_STAGES, STAGES};
use warpforge_dsl::abi::{GemmParams, TensorMap};

use crate::gemm_epilogue::Output;
use crate::gemm_sm90_store::{StagedStore, Staging, epilogue, epilogue_staged};
use crate::gemm_sm90_units::{Tiling, raster_rows, unit_worker, work_unit};
use crate::gemm_stream_k::PartialSlots;
use warpforge_dsl::kernel;
use warpforge_dsl::logic::schedule::stream_k::{StreamKMode, StreamKScheduler, UnitRole};
use warpforge_dsl::logic::schedule::swizzled::{Raster, Rasterization};
use warpforge_dsl::mbarrier::{Mbarrier, Phase};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::{NamedBarrier, sync_threads};
use warpforge_dsl::thread::{block_idx, grid_dim, thread_rank, warp_id, warpgroup_id};
use warpforge_dsl::tile::{SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{Acc64x128F32, Acc64x256F32, Accumulator, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement};
use warpforge_dsl::{cluster, tma, warp};

const K_SLICE: usize = BLOCK_K as usize;
/// Register budgets after `setmaxnreg`: 128 × 40 + 256 × 232 ≤ 64 Ki registers per SM.
const PRODUCER_REGS: u32 = 40;
const CONSUMER_REGS: u32 = 232;
/// Tile rows per band of the grouped schedule.
const DEFAULT_RASTER_GROUP: u32 = 8;
/// Arrivals that hand the ping-pong turn over: every thread of a consumer warpgroup.
const TURN_ARRIVALS: u32 = 128;
/// Rows of B each CTA of a 2 × 1 cluster loads and multicasts (half the wide tile).
const HALF_B: usize = BLOCK_N as usize / 2;
/// Multicast mask: both CTAs of the cluster.
const BOTH_CTAS: u16 = 0b11;

type ATile<T> = SmemTile<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B>; // (64, BLOCK_K)
type BTile<T, const BN: usize> = SmemTile<T, BN, K_SLICE, Swizzle128B>; // (BN, BLOCK_K)
type ARing<T, const RING: usize> = SmemTileRing<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B, RING>;

/// The whole kernel, generic over input and output types, the consumer arrangement and the
/// tile width; the entries below instantiate it. Each consumer warpgroup accumulates a 64 × `BN`
/// block in `W` (`Acc64x256F32` for the wide tiles, `Acc64x128F32` for the narrow ones) from a
/// `RING`-stage ring. `PINGPONG = false` (cooperative): both consumer warpgroups work on one
/// 128 × `BN` tile, 64 rows each. `PINGPONG = true`: every unit is a 64 × `BN` tile,
/// and the warpgroups take the CTA's units alternately (consumer `h` takes units `h`, `h + 2`,
/// …), so one warpgroup's epilogue runs while the other's main loop keeps the tensor cores
/// busy. Two "turn" barriers order the main loops: a warpgroup starts waiting on the ring only
/// after the other has waited on every earlier stage, so every parity wait is within one phase
/// of its barrier. Ping-pong schedules are data-parallel (whole tiles only).
///
/// # Safety
/// `a_map`/`b_map` describe A (K × M × batch) and B (K × N × batch) with boxes 64 × 64 × 1 and
/// 64 × `BN` × 1 under 128-byte swizzle; `p` describes D (and C, bias) as documented on
/// [`GemmParams`] (with `tiles_m` counting 64-row tiles when `PINGPONG`), all valid for the
/// launch; 384 threads, `gemm_sm90::SMEM_BYTES` of dynamic shared memory.
#[inline(always)]
unsafe fn gemm<T, O, W, const PINGPONG: bool, const CLUSTER: bool, const BN: usize, const RING: usize>(
    a_map: &TensorMap,
    b_map: &TensorMap,
    d_map: &TensorMap,
    p: &GemmParams,
) where
    T: WgmmaElement,
    O: Output,
    W: Accumulator<Elem = f32> + WgmmaSs<T::Kind, T::Kind>,
{
    // Shared-memory plan.
    let mut smem = DynamicShared::window();
    let a_top = ARing::<T, RING>::alloc(&mut smem);
    let a_bottom = ARing::<T, RING>::alloc(&mut smem);
    let b_ring = SmemTileRing::<T, BN, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
    let staging = [Staging::<O>::alloc(&mut smem), Staging::<O>::alloc(&mut smem)];
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
        // lap; ping-pong: only the warpgroup that read it. A turn phase completes when all 128
        // threads of the handing-over warpgroup arrive.
        unsafe {
            turns[0].init(TURN_ARRIVALS);
            turns[1].init(TURN_ARRIVALS);
            pipe.init(if PINGPONG {
                1
            } else if CLUSTER {
                2 * CONSUMERS
            } else {
                CONSUMERS
            });
        }
    }
    if CLUSTER {
        // SAFETY: all 384 threads of both CTAs reach it; it also publishes each CTA's barrier
        // inits to the peer before either multicasts into the other.
        unsafe { cluster::sync() };
    } else {
        // SAFETY: all 384 threads reach this barrier.
        unsafe { sync_threads() };
    }

    // Schedule (shared by every role so they agree on the unit sequence): tiles of every batch
    // stacked along M, visited in grouped order; whole tiles or stream-K runs of K slices. A
    // cluster is one worker that takes pairs of vertically adjacent tiles, one per CTA.
    let group = if p.raster_group == 0 { DEFAULT_RASTER_GROUP } else { p.raster_group };
    let raster = Rasterization::new(raster_rows::<CLUSTER>(p) * p.batch, p.tiles_n, group, Raster::AlongM);
    let k_slices = p.k.div_ceil(BLOCK_K).max(1);
    let mode = if PINGPONG || CLUSTER { StreamKMode::DataParallel } else { StreamKMode::from_code(p.stream_k) };
    let workers = if CLUSTER { grid_dim().x / 2 } else { grid_dim().x };
    let schedule = StreamKScheduler::new(raster.tile_count(), k_slices, workers, mode);
    let worker = if CLUSTER { block_idx().x / 2 } else { block_idx().x };
    let (rank, peer) = if CLUSTER { (cluster::rank(), cluster::rank() ^ 1) } else { (0, 0) };
    let tiling = Tiling { block_n: BN as u32, rank };

    if warpgroup_id() == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let mut state = PipelineState::<RING>::START;
            let mut index = 0;
            while let Some(unit) = work_unit::<PINGPONG, CLUSTER>(p, &raster, &schedule, tiling, worker, index) {
                let (batch, m0, n0) = (unit.batch, unit.m0, unit.n0);
                for slice in unit.k_begin..unit.k_end {
                    let k0 = (slice * BLOCK_K) as i32;
                    if CLUSTER {
                        // SAFETY: one producer thread per CTA; this CTA's slot receives its two A
                        // boxes and both halves of B (its own multicast and the peer's): exactly
                        // the announced bytes. Both consumers of both CTAs release the slot.
                        let full = unsafe { pipe.producer_acquire::<(ATile<T>, ATile<T>, BTile<T, BN>)>(state) };
                        let (m1, b_half) = (m0 + A_BOX_ROWS as i32, b_ring.stage(state.stage).rows::<HALF_B>(rank));
                        let n_half = n0 + (rank * HALF_B as u32) as i32;
                        // SAFETY: the maps' boxes match the tile types (host contract: B's box is
                        // half the tile); the slot is free in both CTAs (acquired above, and the
                        // peer runs the same ring), which run the same smem plan.
                        unsafe {
                            tma::load_3d(&a_top.stage(state.stage), a_map, k0, m0, batch, &full);
                            tma::load_3d(&a_bottom.stage(state.stage), a_map, k0, m1, batch, &full);
                            tma::load_3d(tma::multicast(&b_half, BOTH_CTAS), b_map, k0, n_half, batch, &full);
                        }
                    } else if PINGPONG {
                        // SAFETY: one producer thread; the two loads below deliver exactly the
                        // announced bytes (full boxes, out-of-bounds elements zero-filled).
                        let full = unsafe { pipe.producer_acquire::<(ATile<T>, BTile<T, BN>)>(state) };
                        // SAFETY: the maps' boxes match the tile types (host contract); the slot
                        // is free (acquired above) until the consumer releases it.
                        unsafe {
                            tma::load_3d(&a_top.stage(state.stage), a_map, k0, m0, batch, &full);
                            tma::load_3d(&b_ring.stage(state.stage), b_map, k0, n0, batch, &full);
                        }
                    } else {
                        // SAFETY: as above, for the three loads below.
                        let full = unsafe { pipe.producer_acquire::<(ATile<T>, ATile<T>, BTile<T, BN>)>(state) };
                        let m1 = m0 + A_BOX_ROWS as i32;
                        // SAFETY: as above; both consumers release the slot.
                        unsafe {
                            tma::load_3d(&a_top.stage(state.stage), a_map, k0, m0, batch, &full);
                            tma::load_3d(&a_bottom.stage(state.stage), a_map, k0, m1, batch, &full);
                            tma::load_3d(&b_ring.stage(state.stage), b_map, k0, n0, batch, &full);
                        }
                    }
                    state.advance();
                }
                index += 1;
            }
        }
        return;
    }

    // Consumers.
    // SAFETY: whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let half = warpgroup_id() - 1;
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
    let slots = unsafe { PartialSlots::new(p) };
    let mut state = PipelineState::<RING>::START;
    let mut index = first_unit;
    // The unit is decoded per trip from a block index read in place: decoding is a few
    // divisions per tile, while hoisted it would hold registers through the main loop.
    while let Some(unit) =
        work_unit::<PINGPONG, CLUSTER>(p, &raster, &schedule, tiling, unit_worker::<CLUSTER>(), index)
    {
        if PINGPONG && index > 0 {
            // The other warpgroup's unit `index - 1` fills the ring just before this one: skip
            // its stages, and start once its main loop has waited on all of them.
            if let Some(other) =
                work_unit::<PINGPONG, CLUSTER>(p, &raster, &schedule, tiling, unit_worker::<CLUSTER>(), index - 1)
            {
                state.advance_by(other.k_end - other.k_begin);
            }
            my_turn.wait(&mut turn);
        }
        let mut acc = W::ZERO;
        let mut previous = state;
        // At least one slice (k ≥ 1), written as a do-while: a zero-trip path would hand the
        // accumulator registers to the final wait from ordinary moves, and ptxas would then
        // serialise every wgmma (C7515).
        let mut slice = 0;
        loop {
            pipe.consumer_wait(state);
            // SAFETY: the whole warpgroup runs this loop convergently; the stage's TMA data has
            // landed (waited above) and is not overwritten before this warpgroup releases it,
            // which happens only after a `wait` covering these wgmmas.
            unsafe {
                warpgroup::fence();
                warpgroup::mma(&mut acc, &a_ring.stage(state.stage), &b_ring.stage(state.stage), slice > 0);
                warpgroup::commit();
                warpgroup::wait::<1>();
            }
            if slice > 0 && leader {
                // SAFETY: the wgmmas reading `previous` completed (at most the newest group is
                // pending); one release per warpgroup per stage (and CTA of the cluster).
                unsafe { release::<RING, CLUSTER>(&pipe, previous, peer) };
            }
            previous = state;
            state.advance();
            slice += 1;
            if slice >= unit.k_end - unit.k_begin {
                break;
            }
        }
        if PINGPONG {
            // Every thread arrives (no branch on the leader here: LLVM would duplicate the
            // `.aligned` wgmma wait below into both arms, and a warp split over two copies of
            // an aligned instruction hangs).
            // SAFETY: one arrival per thread and unit on the other warpgroup's turn barrier
            // (count 128); the other waits once per unit of its own, and cannot fall two
            // phases behind (this warpgroup waits for its arrivals before its next main loop).
            unsafe { their_turn.arrive() };
        }
        // SAFETY: whole warpgroup; completes every wgmma writing `acc` and reading `previous`.
        unsafe { warpgroup::wait::<0>() };
        if leader {
            // SAFETY: as above.
            unsafe { release::<RING, CLUSTER>(&pipe, previous, peer) };
        }
        match unit.role {
            UnitRole::Whole => {}
            UnitRole::Partial => {
                // SAFETY: the whole warpgroup, once per launch (a CTA's only Partial unit is its
                // first stream-K unit); `acc` was waited for above.
                unsafe { slots.publish(&acc, worker, half, &wg_barrier, leader) };
                index += unit_step;
                continue;
            }
            UnitRole::Finalize => {
                let (_, last) = unit.contributors;
                // SAFETY: the whole warpgroup; CTAs worker+1..=last each publish this tile's
                // partial once (the schedule's contract).
                unsafe { slots.accumulate(&mut acc, worker + 1, last, half, &wg_barrier, leader) };
            }
        }
        let (batch, m0, n0) = (unit.batch, unit.m0, unit.n0);
        let row0 = m0 as u32 + if PINGPONG { 0 } else { half * A_BOX_ROWS };
        if p.d_tma != 0 {
            let target = StagedStore {
                p,
                d_map,
                staging: &my_staging,
                barrier: &wg_barrier,
                leader,
                batch,
                row0,
                col0: n0 as u32,
            };
            // SAFETY: `d_map` describes D (host contract when d_tma = 1); the staging tiles belong
            // to this warpgroup; `wg_barrier` counts its 128 threads.
            unsafe { epilogue_staged::<O, W>(&acc, &target) };
        } else {
            // SAFETY: `p` describes D/C/bias valid for the launch (kernel contract).
            unsafe { epilogue::<O, W>(&acc, p, batch as u32, row0, n0 as u32) };
        }
        index += unit_step;
    }
    if leader && p.d_tma != 0 {
        // The staged tiles must stay readable until the last stores have read them.
        tma::wait_group::<0>();
    }
    if CLUSTER {
        // Neither CTA exits while the other may still arrive on its barriers.
        // SAFETY: every non-exited thread of both CTAs (the consumers; the producer warpgroup
        // has returned) reaches it once.
        unsafe { cluster::sync() };
    }
}

/// Hands a ring slot back: to this CTA's producer, and with clusters to the peer's too (its
/// multicasts write this CTA's slot).
///
/// # Safety
/// As for `Pipeline::consumer_release` (and `consumer_release_peer` with `CLUSTER`).
#[inline(always)]
unsafe fn release<const RING: usize, const CLUSTER: bool>(pipe: &Pipeline<RING>, slot: PipelineState<RING>, peer: u32) {
    // SAFETY: forwarded to the caller.
    unsafe {
        pipe.consumer_release(slot);
        if CLUSTER {
            pipe.consumer_release_peer(slot, peer);
        }
    }
}

/// The wide tile (128 × 256, or 64 × 256 per ping-pong warpgroup): accumulator, columns, stages.
macro_rules! wide {
    ($input:ty, $output:ty, $pingpong:literal) => {
        gemm::<$input, $output, Acc64x256F32, $pingpong, false, { BLOCK_N as usize }, { STAGES as usize }>
    };
}
/// The narrow tile (128 × 128, cooperative).
macro_rules! narrow {
    ($input:ty, $output:ty, $pingpong:literal) => {
        gemm::<$input, $output, Acc64x128F32, $pingpong, false, { NARROW_BLOCK_N as usize }, { NARROW_STAGES as usize }>
    };
}
/// The wide cooperative tile in 2 × 1 clusters: each CTA loads half of every B slice and
/// multicasts it to both.
macro_rules! wide_pair {
    ($input:ty, $output:ty, $pingpong:literal) => {
        gemm::<$input, $output, Acc64x256F32, $pingpong, true, { BLOCK_N as usize }, { STAGES as usize }>
    };
}

macro_rules! gemm_entries {
    ($($name:ident: $input:ty => $output:ty, $tile:ident, pingpong = $pingpong:literal
        $(, cluster = $cluster:tt)?;)*) => {$(
        /// GEMM entry point; see the module docs and [`GemmParams`].
        ///
        /// # Safety
        /// See `gemm`: tensor maps and parameters as the host launcher builds them.
        #[kernel(threads = 384, min_blocks_per_sm = 1 $(, cluster = $cluster)?)]
        pub unsafe fn $name(
            #[grid_constant] a_map: &TensorMap,
            #[grid_constant] b_map: &TensorMap,
            #[grid_constant] d_map: &TensorMap,
            params: GemmParams,
        ) {
            // SAFETY: forwarded to the launcher's contract.
            unsafe { $tile!($input, $output, $pingpong)(a_map, b_map, d_map, &params) }
        }
    )*};
}

gemm_entries! {
    gemm_bf16_bf16_ws_persistent_sm90: Bf16 => Bf16, wide, pingpong = false;
    gemm_bf16_f16_ws_persistent_sm90: Bf16 => F16, wide, pingpong = false;
    gemm_bf16_f32_ws_persistent_sm90: Bf16 => f32, wide, pingpong = false;
    gemm_f16_bf16_ws_persistent_sm90: F16 => Bf16, wide, pingpong = false;
    gemm_f16_f16_ws_persistent_sm90: F16 => F16, wide, pingpong = false;
    gemm_f16_f32_ws_persistent_sm90: F16 => f32, wide, pingpong = false;
    gemm_bf16_bf16_pingpong_sm90: Bf16 => Bf16, wide, pingpong = true;
    gemm_f16_f16_pingpong_sm90: F16 => F16, wide, pingpong = true;
    gemm_bf16_bf16_narrow_sm90: Bf16 => Bf16, narrow, pingpong = false;
    gemm_f16_f16_narrow_sm90: F16 => F16, narrow, pingpong = false;
    gemm_bf16_bf16_cluster_sm90: Bf16 => Bf16, wide_pair, pingpong = false, cluster = (2, 1, 1);
    gemm_f16_f16_cluster_sm90: F16 => F16, wide_pair, pingpong = false, cluster = (2, 1, 1);
}
