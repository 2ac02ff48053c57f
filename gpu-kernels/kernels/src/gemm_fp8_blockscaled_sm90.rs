//! Block-scaled FP8 GEMM for Hopper (DeepGEMM's scheme): `D = A·Bᵀ` in bf16, A (M × K) and B
//! (N × K) e4m3 and K-major, A with one f32 scale per row and 128 K (per-token groups), B with
//! one per 128 × 128 block, as `logic::quant`'s quantisers write them.
//!
//! Algorithm: the persistent, warp-specialised structure of the 16-bit GEMM body
//! ([`crate::gemm_bf16_ws_persistent_sm90`]) built from the same parts: the host's tile plan
//! (data-parallel, stream-K or hybrid, `parts::schedule`), the TMA ring (`parts::mainloop`), the
//! stream-K hand-over (`parts::stream_k`) and the GEMM epilogue writing the sum as is ([`Plain`]). What differs
//! is the stage: one ring slot holds one 128-wide K block of e4m3 (128 bytes per row, the
//! 128-byte swizzle span), and its hook is `parts::blockscaled`'s issue-and-promote: the four
//! `wgmma.m64n128k32` of the block go into one of two scratch tiles (consecutive blocks
//! alternate), and once they complete the consumer adds `scratch · scale_a[row, kb] ·
//! scale_b[nb, kb]` into an f32 sum on the CUDA cores (promotion every `PROMOTE_EVERY_K` = 128)
//! while the next block's wgmmas already run (`Consumer::promoting_mainloop`). The scales
//! ride the ring with the operands (DeepGEMM's stage): the producer's TMA loads put the tile's 128 A scales of the block and
//! its B scale into the slot beside A and B, so a consumer reads its two rows' scales from
//! shared memory once the slot has landed ([`SlotScales`]) and no global load's latency sits
//! between the wgmmas and the promotion (measured: 42 % of the warps' stall samples on the
//! earlier global loads, docs/PERF.md). Out-of-bounds TMA boxes are zero-filled: ragged M and
//! N, and a partial last K block, need no padding (rows past M get zero scales and zero A).
//!
//! Warp roles (384 threads), as in the body: warpgroup 0 is the producer (one elected thread
//! issues each slot's five TMA loads; registers lowered to 40), warpgroups 1 and 2 are the
//! consumers (64 rows × 128 columns each: a 64-register sum and two 64-register scratch tiles
//! per thread; registers raised to 232), cooperative on 128 × 128 tiles. A consumer issues a
//! block's wgmmas before it waits for the previous block's and promotes them, so the tensor
//! cores always hold one block of each warpgroup (waiting for its own block before promoting
//! left them idle between blocks: docs/PERF.md, 2026-12-04); each issues as soon as its slot
//! has landed (with the scales in the slot, taking turns through named barriers only added
//! waits).
//!
//! Shared memory: 5 slots × ((128 + 128) × 128 B of operands + 640 B of scales) ≈ 163 KiB of
//! ring, 32 KiB of output staging, the ring's barriers: `gemm_fp8_sm90::SMEM_BYTES`. Measured ratio vs cuBLASLt: docs/PERF.md.
//!
//! The wide entry (`WIDE`) arranges the same two consumers side by side on 64 × 256 tiles:
//! each slot holds one 64-row A box, which both read, and two 128-row B tiles, one each, with
//! a B scale box per tile (4 slots: `gemm_fp8_sm90::WIDE_SMEM_BYTES`). At M ≤ 64, where the
//! problem streams B, a quarter of each slot's bytes is A instead of half (most of it re-read
//! from L2 by every column tile), and four slots hold 128 KiB of B in flight instead of five
//! slots' 80 KiB.

use warpforge_dsl::abi::gemm_fp8_sm90::{
    A_BOX_ROWS, B_SCALE_BOX, BLOCK_K, BLOCK_M, BLOCK_N, STAGES, WIDE_BLOCK_M, WIDE_BLOCK_N, WIDE_STAGES,
};
use warpforge_dsl::abi::gemm_sm90::{CONSUMERS, PARTIAL_SLOT_FLOATS};
use warpforge_dsl::abi::{BlockScaleParams, GemmParams, TensorMap, TilePlan};
use warpforge_dsl::logic::fragment::acc_thread_row;
use warpforge_dsl::logic::schedule::stream_k::UnitRole;
use warpforge_dsl::num::{Bf16, E4m3};
use warpforge_dsl::parts::blockscaled::{BlockScaledStage, Promoted, SlotScales};
use warpforge_dsl::parts::epilogue::Staging;
use warpforge_dsl::parts::mainloop::{Consumer, SsStage, StageRelease, produce};
use warpforge_dsl::parts::schedule::{GroupedStreamK, TileGeometry, TileScheduler};
use warpforge_dsl::parts::stream_k::{HandOverSide, PartialSlots};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::{self, NamedBarrier};
use warpforge_dsl::thread::{block_idx, block_idx_x_in_place, thread_rank, warp_id};
use warpforge_dsl::tile::{SmemTile, SmemTileRing, SmemVector, SmemVectorRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::Acc64x128F32;
use warpforge_dsl::{tma, warp, warpgroup};

use crate::gemm_bf16_ws_persistent_sm90::{BlockTarget, TileEpilogue};
use crate::gemm_epilogue::Plain;
use crate::gemm_sm90_ctas::{CtaGroup, Pair, Solo};

const K_BLOCK: usize = BLOCK_K as usize;
/// Ring depths of the stacked (128 × 128) and wide (64 × 256) arrangements.
pub(crate) const RING: usize = STAGES as usize;
pub(crate) const WIDE_RING: usize = WIDE_STAGES as usize;
const A_ROWS: usize = A_BOX_ROWS as usize;
const B_ROWS: usize = BLOCK_N as usize;
/// Rows of B each CTA of a 2 × 1 cluster loads and multicasts.
const HALF_B: usize = B_ROWS / 2;
/// Register budgets after `setmaxnreg`: 128 × 40 + 256 × 232 = 384 × 168, the registers the
/// launch gives the CTA (a `setmaxnreg.inc` past that pool waits forever: 48 + 232 hung on the
/// H200; at 224 the consumers spill).
const PRODUCER_REGS: u32 = 40;
const CONSUMER_REGS: u32 = 232;

type ATile = SmemTile<E4m3, A_ROWS, K_BLOCK, Swizzle128B>; // (64, BLOCK_K)
type BTile = SmemTile<E4m3, B_ROWS, K_BLOCK, Swizzle128B>; // (BLOCK_N, BLOCK_K)
type ARing<const RING: usize> = SmemTileRing<E4m3, A_ROWS, K_BLOCK, Swizzle128B, RING>;
type BRing<const RING: usize> = SmemTileRing<E4m3, B_ROWS, K_BLOCK, Swizzle128B, RING>;
const TILE_ROWS: usize = BLOCK_M as usize;
const B_SCALES: usize = B_SCALE_BOX as usize;
/// A's scales of one K block for the tile's rows, and B's (element 0) for its columns.
type AScales = SmemVector<f32, TILE_ROWS>;
type BScales = SmemVector<f32, B_SCALES>;
type AScaleRing<const RING: usize> = SmemVectorRing<f32, TILE_ROWS, RING>;
type BScaleRing<const RING: usize> = SmemVectorRing<f32, B_SCALES, RING>;
/// One consumer warpgroup's 64 × 128 block of D.
type Acc = Acc64x128F32;

/// f32 per 16-byte chunk: where a box of B's flattened scales may start.
const B_SCALE_ALIGN: u32 = 4;

/// Consumer `second`'s (warpgroup 2's) half of a pair, else the first's.
#[inline(always)]
fn pick<T: Copy>(pair: [T; 2], second: bool) -> T {
    if second { pair[1] } else { pair[0] }
}

/// Flat index of the B scale of K block 0 for the 128 columns from `n0` of B batch `b_batch`
/// (K block `kb`'s is `kb` further on).
#[inline(always)]
fn b_scale_first(s: &BlockScaleParams, b_batch: u32, n0: u32) -> u32 {
    b_batch * s.b_stride + (n0 / BLOCK_N) * s.k_blocks
}

/// The kernel body.
///
/// # Safety
/// `a_map`/`b_map` describe A (K × M × 1) and B (K × N × 1) as bytes with boxes 128 × 64 × 1
/// and 128 × 128 × 1 under 128-byte swizzle; `d_map` (when `p.d_tma != 0`) D as bf16 N × M × 1
/// with 64 × 64 × 1 boxes; `sa_map` A's scales as f32 M × k_blocks × batches with 128 × 1 × 1
/// boxes, `sb_map` B's whole scale buffer as f32 (len × 1 × 1) with 32 × 1 × 1 boxes, both
/// without swizzle ([`BlockScaleParams`]); `p` describes D as on [`GemmParams`] with
/// `alpha = 1`, no C, bias or activation, `m ≥ 1`; `s` the K blocks (`ceil(K / 128)`) and B's
/// per-expert stride, every flat B-scale index below 2^31;
/// `plan` over 128 × 128 tiles (64 × 256 when `WIDE`) of one batch and `k_blocks` slices per
/// tile, for the launch's grid; 384 threads, `gemm_fp8_sm90::SMEM_BYTES` of dynamic shared
/// memory (`WIDE_SMEM_BYTES` when `WIDE`); `RING` is `STAGES` (`WIDE_STAGES` when `WIDE`); `WIDE`
/// only with `Solo` CTAs and, for each wide tile, B's scale index of its second 128 columns
/// (`s.b_stride · b_batch + (n0 / 128 + 1) · k_blocks + kb`) below 2^31. `schedule` turns
/// the tile geometry into the units every role follows (the dense plan, or a grouped GEMM's
/// `ExpertTiles` over it, whose A/D batch `b` reads batch `b` of `sa_map` and whose B batch `e`
/// reads B scales from flat index `e · s.b_stride`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm<S: TileScheduler, G: CtaGroup, const WIDE: bool, const RING: usize>(
    a_map: &TensorMap,
    b_map: &TensorMap,
    d_map: &TensorMap,
    scale_maps: (&TensorMap, &TensorMap),
    p: &GemmParams,
    plan: &TilePlan,
    s: &BlockScaleParams,
    schedule: impl FnOnce(TileGeometry) -> S,
) {
    let (sa_map, sb_map) = scale_maps;
    const { assert!(RING == if WIDE { WIDE_RING } else { self::RING }, "the arrangement's ring depth") };
    // Shared-memory plan: each consumer's A rows and B columns of a slot — stacked, two A boxes
    // and one B tile; wide, one A box and two B tiles — the output staging, the scales.
    let mut smem = DynamicShared::window();
    let (a_rings, b_rings) = if WIDE {
        let a = ARing::<RING>::alloc(&mut smem);
        ([a, a], [BRing::<RING>::alloc(&mut smem), BRing::alloc(&mut smem)])
    } else {
        let a = [ARing::<RING>::alloc(&mut smem), ARing::alloc(&mut smem)];
        let b = BRing::<RING>::alloc(&mut smem);
        (a, [b, b])
    };
    let staging = [Staging::<Bf16>::alloc(&mut smem), Staging::<Bf16>::alloc(&mut smem)];
    let a_scale_ring = AScaleRing::<RING>::alloc(&mut smem);
    let b_scale_rings = if WIDE {
        [BScaleRing::<RING>::alloc(&mut smem), BScaleRing::alloc(&mut smem)]
    } else {
        let b = BScaleRing::<RING>::alloc(&mut smem);
        [b, b]
    };
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(a_map);
        tma::prefetch(b_map);
        tma::prefetch(sa_map);
        tma::prefetch(sb_map);
        // SAFETY: one thread; each consumer warpgroup releases each slot once per lap, to each
        // CTA of the group.
        unsafe { pipe.init(CONSUMERS * G::Release::CTAS) };
    }
    // SAFETY: all 384 threads (of every CTA of the group) reach it.
    unsafe { G::sync() };
    // Up to here only parameters, tensor maps and shared memory: a programmatic launch may run
    // it under the previous kernel's tail. Every global access (the schedule's reads, TMA loads,
    // the stream-K slots and flags, D) comes after the previous kernel has completed.
    sync::wait_for_prerequisite_grids();
    sync::allow_dependent_grids();

    let geometry = TileGeometry {
        block_m: if WIDE { WIDE_BLOCK_M } else { BLOCK_M },
        block_n: if WIDE { WIDE_BLOCK_N } else { BLOCK_N },
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
            // The worker read in place per unit, as the consumers do (the paired producer
            // spilled a register holding it at 40 registers).
            while let Some(unit) = units.unit(block_idx_x_in_place() / G::CTAS, index) {
                if unit.skip {
                    index += 1;
                    continue;
                }
                let (batch, b_batch, m0, n0) = (unit.batch, unit.b_batch, unit.m0, unit.n0);
                let b_scales0 = b_scale_first(s, b_batch as u32, n0 as u32);
                let load = |stage: u32, slice: u32, full: &warpforge_dsl::mbarrier::Mbarrier| {
                    let k0 = (slice * BLOCK_K) as i32;
                    // A box's first element must start a 16-byte chunk: load from the chunk
                    // holding slice's scale (`SlotScales` reads it at its offset).
                    let b_chunk = |first: u32| ((first + slice) & !(B_SCALE_ALIGN - 1)) as i32;
                    // SAFETY: the maps' boxes match the tiles (host contract); the slot was
                    // acquired free by `produce`.
                    unsafe {
                        if WIDE {
                            let right = b_scales0 + s.k_blocks;
                            tma::load_3d(&a_rings[0].stage(stage), a_map, k0, m0, batch, full);
                            tma::load_3d(&b_rings[0].stage(stage), b_map, k0, n0, b_batch, full);
                            tma::load_3d(&b_rings[1].stage(stage), b_map, k0, n0 + B_ROWS as i32, b_batch, full);
                            tma::load_3d(&b_scale_rings[1].stage(stage), sb_map, b_chunk(right), 0, 0, full);
                        } else {
                            tma::load_3d(&a_rings[0].stage(stage), a_map, k0, m0, batch, full);
                            tma::load_3d(&a_rings[1].stage(stage), a_map, k0, m0 + A_BOX_ROWS as i32, batch, full);
                            G::load_b::<E4m3, B_ROWS, HALF_B, K_BLOCK, RING>(
                                &b_rings[0],
                                stage,
                                b_map,
                                (k0, n0, b_batch),
                                full,
                            );
                        }
                        tma::load_3d(&a_scale_ring.stage(stage), sa_map, m0, slice as i32, batch, full);
                        tma::load_3d(&b_scale_rings[0].stage(stage), sb_map, b_chunk(b_scales0), 0, 0, full);
                    }
                };
                // SAFETY: the one producer thread; each slot gets both warpgroups' A rows and B
                // columns and every scale box: exactly the stage type's bytes (full boxes,
                // out-of-bounds elements zero-filled).
                unsafe {
                    let slices = unit.k_begin..unit.k_end;
                    if WIDE {
                        produce::<((ATile, BTile, BTile), (AScales, BScales, BScales)), RING>(
                            &pipe, &mut state, slices, load,
                        )
                    } else {
                        produce::<((ATile, ATile, BTile), (AScales, BScales)), RING>(&pipe, &mut state, slices, load)
                    }
                };
                index += 1;
            }
        }
        return;
    }

    // Consumers.
    // SAFETY: whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let half = role - 1;
    let second = half == 1;
    let my_staging = pick(staging, second);
    // This warpgroup's rows and columns within the tile.
    let (tile_row, tile_col) = if WIDE { (0, half * B_ROWS as u32) } else { (half * A_BOX_ROWS, 0) };
    // SAFETY: ids 1 and 2 are used only here, each by exactly its warpgroup's 128 threads.
    let wg_barrier = unsafe { NamedBarrier::<128>::new(1 + half) };
    let leader = warpgroup::thread_index() == 0;
    // SAFETY: the host passes a workspace and zeroed flags for the grid whenever it schedules
    // stream-K units; without them no unit has a Partial or Finalize role.
    let slots = unsafe { PartialSlots::<CONSUMERS, PARTIAL_SLOT_FLOATS>::new(p.workspace, p.flags) };
    let side = HandOverSide { half, barrier: &wg_barrier, leader };
    let operands = SsStage { a: pick(a_rings, second), b: pick(b_rings, second) };
    let b_scale_ring = pick(b_scale_rings, second);
    let mut consumer = Consumer::new(pipe, G::release(), leader);
    let mut index = 0;
    loop {
        // SAFETY: the consumer warpgroup's lanes reach here together (converged at the loop's end).
        let Some(unit) = (unsafe { units.unit_uniform(block_idx_x_in_place() / G::CTAS, index) }) else { break };
        'unit: {
            if unit.skip {
                break 'unit;
            }
            let (row0, col0) = (unit.m0 as u32 + tile_row, unit.n0 as u32 + tile_col);
            let upper = tile_row + acc_thread_row(warpgroup::thread_index());
            // The consumer counts slices from the unit's first (a stream-K unit starts mid-K).
            let b_first = b_scale_first(s, unit.b_batch as u32, col0) + unit.k_begin;
            let scales = SlotScales::new(a_scale_ring, b_scale_ring, upper, b_first);
            let stage = BlockScaledStage { operands, scales };
            // SAFETY: the whole warpgroup, convergently; the producer fills these slots in order.
            let promoted: Promoted<Acc> = unsafe { consumer.promoting_mainloop(unit.slices(), &stage) };
            // SAFETY: whole warpgroup, once after the main loop.
            unsafe { consumer.drain() };
            let mut acc = promoted.sum;
            // The block's rows inside D: a stream-K hand-over moves only those (decode rows: a few
            // of the block's 64; every contributor and the finaliser compute the same count).
            let rows = p.m.saturating_sub(row0);
            match unit.role {
                UnitRole::Whole => {}
                UnitRole::Partial => {
                    // SAFETY: the whole warpgroup, once per launch (a CTA's only Partial unit is its
                    // first stream-K unit); the sum is complete (promoted after every wait).
                    unsafe { slots.publish_rows(&acc, rows, worker, side) };
                    break 'unit;
                }
                UnitRole::Finalize => {
                    let (_, last) = unit.contributors;
                    // SAFETY: the whole warpgroup; CTAs worker+1..=last each publish this tile's
                    // partial once (the schedule's contract), with the same rows (same tile, same
                    // warpgroup position).
                    unsafe { slots.accumulate_rows(&mut acc, rows, worker + 1, last, side) };
                }
            }
            let target = BlockTarget {
                p,
                d_map,
                staging: &my_staging,
                barrier: &wg_barrier,
                leader,
                batch: unit.batch as u32,
                row0,
                col0,
            };
            // SAFETY: the whole warpgroup; the staging and barrier are this warpgroup's.
            unsafe { <Plain<Bf16> as TileEpilogue<Acc>>::write(&acc, &target) };
        }
        index += 1;
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

/// `#[kernel]` entries over [`gemm`] for dense problems (one batch, one expert): docs, name,
/// CTA arrangement, cluster shape.
macro_rules! fp8_entries {
    ($($(#[$doc:meta])* $name:ident: $group:ty, wide = $wide:tt, ring = $ring:expr $(, cluster = $cluster:tt)?;)*) => {$(
        $(#[$doc])*
        #[warpforge_dsl::kernel(threads = 384, min_blocks_per_sm = 1 $(, cluster = $cluster)?)]
        pub unsafe fn $name(
            #[grid_constant] a_map: &TensorMap,
            #[grid_constant] b_map: &TensorMap,
            #[grid_constant] d_map: &TensorMap,
            #[grid_constant] a_scale_map: &TensorMap,
            #[grid_constant] b_scale_map: &TensorMap,
            params: GemmParams,
            plan: TilePlan,
            scales: BlockScaleParams,
        ) {
            let dense = |geometry| GroupedStreamK { raster: plan.raster, schedule: plan.units, geometry };
            // SAFETY: forwarded to the launcher's contract (one batch, one expert; pairs of
            // tiles for the cluster entry).
            unsafe {
                gemm::<_, $group, $wide, { $ring }>(a_map, b_map, d_map, (a_scale_map, b_scale_map), &params, &plan, &scales, dense)
            }
        }
    )*};
}

fp8_entries! {
    /// Block-scaled FP8 GEMM, bf16 output; see the module docs, [`GemmParams`] and
    /// [`BlockScaleParams`].
    ///
    /// # Safety
    /// See `gemm`: tensor maps and parameters as the host launcher (`warpforge::gemm_fp8`)
    /// builds them.
    gemm_fp8_blockscaled_bf16_sm90: Solo, wide = false, ring = RING;
    /// Block-scaled FP8 GEMM in 2 × 1 clusters: the two CTAs of a cluster take vertically
    /// adjacent tiles, and each loads half of every B slot and multicasts it to both
    /// (data-parallel plans).
    ///
    /// # Safety
    /// As for [`gemm_fp8_blockscaled_bf16_sm90`], with `b_map`'s box 128 × 64 × 1 (half a
    /// tile's B) and `plan` over pairs of tile rows (two CTAs per worker, a data-parallel
    /// schedule).
    gemm_fp8_blockscaled_bf16_cluster_sm90: Pair, wide = false, ring = RING, cluster = (2, 1, 1);
    /// Block-scaled FP8 GEMM on 64 × 256 tiles, the two consumer warpgroups side by side (the
    /// decode regime's arrangement, see the module docs).
    ///
    /// # Safety
    /// As for [`gemm_fp8_blockscaled_bf16_sm90`], with `plan` over 64 × 256 tiles and B's scale
    /// index of every tile's second 128 columns below 2^31.
    gemm_fp8_blockscaled_bf16_wide_sm90: Solo, wide = true, ring = WIDE_RING;
}
