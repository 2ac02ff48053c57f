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
//! - warpgroups 1 and 2, consumers: each multiplies its 64 rows of the tile by the 256 columns
//!   with `wgmma.m64n256k16` (128 f32 accumulators per thread, registers raised to 232), keeps
//!   one wgmma group in flight, releases each stage after the next one's wgmmas are issued, and
//!   writes its half of the tile through shared memory and TMA stores (direct stores when D
//!   cannot be written by TMA), overlapping the stores with the next tile's main loop.
//!
//! Shared memory: 4 stages × (2 × 64×64 + 256×64) bf16 = 192 KiB, 32 KiB of output staging
//! (each consumer warpgroup stages its 64 × 256 block in two passes of 128 columns), and the
//! ring's barriers. Measured ratio vs cuBLAS: see docs/PERF.md (H200).

use warpforge_dsl::abi::gemm_sm90::{
    A_BOX_ROWS, BLOCK_K, BLOCK_M, BLOCK_N, CONSUMERS, EPILOGUE_COLS, STAGES, STORE_BOX_COLS,
};
use warpforge_dsl::abi::{GemmParams, TensorMap};

use crate::gemm_epilogue::{Output, finish};
use crate::gemm_stream_k::PartialSlots;
use warpforge_dsl::kernel;
use warpforge_dsl::logic::fragment::acc_coord;
use warpforge_dsl::logic::schedule::stream_k::{StreamKMode, StreamKScheduler, UnitRole};
use warpforge_dsl::logic::schedule::swizzled::{Raster, Rasterization};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::{NamedBarrier, fence_proxy_async_shared, sync_threads};
use warpforge_dsl::thread::{block_idx, block_idx_x_in_place, grid_dim, thread_rank, warp_id, warpgroup_id};
use warpforge_dsl::tile::{SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{Accumulator, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement, acc::Acc64x256F32};
use warpforge_dsl::{tma, warp};

const RING: usize = STAGES as usize;
const K_SLICE: usize = BLOCK_K as usize;
/// Register budgets after `setmaxnreg`: 128 × 40 + 256 × 232 ≤ 64 Ki registers per SM.
const PRODUCER_REGS: u32 = 40;
const CONSUMER_REGS: u32 = 232;
/// Tile rows per band of the grouped schedule.
const DEFAULT_RASTER_GROUP: u32 = 8;

type ATile<T> = SmemTile<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B>; // (64, BLOCK_K)
type BTile<T> = SmemTile<T, { BLOCK_N as usize }, K_SLICE, Swizzle128B>; // (BLOCK_N, BLOCK_K)
type Acc = Acc64x256F32; // (64, BLOCK_N) per consumer warpgroup

/// One consumer warpgroup's 64 × EPILOGUE_COLS pass of its output block, as 64 × 64 TMA store
/// boxes.
type Staging<O> = SmemTileRing<<O as Output>::Staged, { A_BOX_ROWS as usize }, STORE_COLS, Swizzle128B, STORE_BOXES>;
const STORE_COLS: usize = STORE_BOX_COLS as usize;
const STORE_BOXES: usize = (EPILOGUE_COLS / STORE_BOX_COLS) as usize;
/// Accumulator registers per epilogue pass (two per column of a thread's rows; see `acc_coord`).
const PASS_REGS: usize = (EPILOGUE_COLS / 2) as usize;
const _: () = assert!(BLOCK_N == 2 * EPILOGUE_COLS, "the epilogue is written as two passes");

/// The whole kernel, generic over input and output types; the entries below instantiate it.
///
/// # Safety
/// `a_map`/`b_map` describe A (K × M × batch) and B (K × N × batch) with boxes 64 × 64 × 1 and
/// 64 × 256 × 1 under 128-byte swizzle; `p` describes D (and C, bias) as documented on
/// [`GemmParams`], all valid for the launch; 384 threads, `gemm_sm90::SMEM_BYTES` of dynamic
/// shared memory.
#[inline(always)]
unsafe fn gemm<T: WgmmaElement, O: Output>(a_map: &TensorMap, b_map: &TensorMap, d_map: &TensorMap, p: &GemmParams)
where
    Acc: WgmmaSs<T::Kind, T::Kind>,
{
    // Shared-memory plan.
    let mut smem = DynamicShared::window();
    let a_top = SmemTileRing::<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
    let a_bottom = SmemTileRing::<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
    let b_ring = SmemTileRing::<T, { BLOCK_N as usize }, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
    let staging = [Staging::<O>::alloc(&mut smem), Staging::<O>::alloc(&mut smem)];
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(a_map);
        tma::prefetch(b_map);
        // SAFETY: one thread; each consumer warpgroup releases each stage once per lap.
        unsafe { pipe.init(CONSUMERS) };
    }
    // SAFETY: all 384 threads reach this barrier.
    unsafe { sync_threads() };

    // Schedule (shared by every role so they agree on the unit sequence): tiles of every batch
    // stacked along M, visited in grouped order; whole tiles or stream-K runs of K slices.
    let group = if p.raster_group == 0 { DEFAULT_RASTER_GROUP } else { p.raster_group };
    let raster = Rasterization::new(p.tiles_m * p.batch, p.tiles_n, group, Raster::AlongM);
    let k_slices = p.k.div_ceil(BLOCK_K).max(1);
    let mode = StreamKMode::from_code(p.stream_k);
    let schedule = StreamKScheduler::new(raster.tile_count(), k_slices, grid_dim().x, mode);
    let worker = block_idx().x;

    if warpgroup_id() == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let mut state = PipelineState::<RING>::START;
            let mut index = 0;
            while let Some(unit) = work_unit(p, &raster, &schedule, worker, index) {
                let (batch, m0, n0) = (unit.batch, unit.m0, unit.n0);
                for slice in unit.k_begin..unit.k_end {
                    let k0 = (slice * BLOCK_K) as i32;
                    // SAFETY: one producer thread; the three loads below deliver exactly the
                    // announced bytes (full boxes, out-of-bounds elements zero-filled).
                    let full = unsafe { pipe.producer_acquire::<(ATile<T>, ATile<T>, BTile<T>)>(state) };
                    // SAFETY: the maps' boxes match the tile types (host contract); each slot
                    // is free (acquired above) until the consumers release it.
                    unsafe {
                        tma::load_3d(&a_top.stage(state.stage), a_map, k0, m0, batch, &full);
                        tma::load_3d(&a_bottom.stage(state.stage), a_map, k0, m0 + A_BOX_ROWS as i32, batch, &full);
                        tma::load_3d(&b_ring.stage(state.stage), b_map, k0, n0, batch, &full);
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
    let a_ring = if half == 0 { a_top } else { a_bottom };
    let my_staging = if half == 0 { staging[0] } else { staging[1] };
    // SAFETY: ids 1 and 2 are used only here, each by exactly its warpgroup's 128 threads.
    let wg_barrier = unsafe { NamedBarrier::<128>::new(1 + half) };
    let leader = warpgroup::thread_index() == 0;
    // SAFETY: the host passes a workspace and zeroed flags for the grid whenever it schedules
    // stream-K units; without them no unit has a Partial or Finalize role.
    let slots = unsafe { PartialSlots::new(p) };
    let mut state = PipelineState::<RING>::START;
    let mut index = 0;
    // The unit is decoded per trip from a block index read in place: decoding is a few
    // divisions per tile, while hoisted it would hold registers through the main loop.
    while let Some(unit) = work_unit(p, &raster, &schedule, block_idx_x_in_place(), index) {
        let mut acc = Acc::ZERO;
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
                // pending); one release per warpgroup per stage.
                unsafe { pipe.consumer_release(previous) };
            }
            previous = state;
            state.advance();
            slice += 1;
            if slice >= unit.k_end - unit.k_begin {
                break;
            }
        }
        // SAFETY: whole warpgroup; completes every wgmma writing `acc` and reading `previous`.
        unsafe { warpgroup::wait::<0>() };
        if leader {
            // SAFETY: as above.
            unsafe { pipe.consumer_release(previous) };
        }
        match unit.role {
            UnitRole::Whole => {}
            UnitRole::Partial => {
                // SAFETY: the whole warpgroup, once per launch (a CTA's only Partial unit is its
                // first stream-K unit); `acc` was waited for above.
                unsafe { slots.publish(&acc, worker, half, &wg_barrier, leader) };
                index += 1;
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
        let row0 = m0 as u32 + half * A_BOX_ROWS;
        if p.d_tma != 0 {
            // SAFETY: `d_map` describes D (host contract when d_tma = 1); the staging tiles belong
            // to this warpgroup; `wg_barrier` counts its 128 threads.
            unsafe { epilogue_staged::<O>(&acc, p, d_map, &my_staging, &wg_barrier, leader, batch, row0, n0 as u32) };
        } else {
            // SAFETY: `p` describes D/C/bias valid for the launch (kernel contract).
            unsafe { epilogue::<O>(&acc, p, batch as u32, row0, n0 as u32) };
        }
        index += 1;
    }
    if leader && p.d_tma != 0 {
        // The staged tiles must stay readable until the last stores have read them.
        tma::wait_group::<0>();
    }
}

/// One scheduled piece of work: K slices `k_begin..k_end` of an output tile of a batch.
struct WorkUnit {
    batch: i32,
    m0: i32,
    n0: i32,
    /// `k_begin < k_end`: the schedule never hands out an empty run.
    k_begin: u32,
    k_end: u32,
    role: UnitRole,
    /// The CTAs that compute part of this tile (`first..=last`; the first finalises it).
    contributors: (u32, u32),
}

/// The `index`-th unit of `worker`, decoded: the rasterisation's M axis runs over the
/// `tiles_m` tile rows of each batch, batch after batch.
#[inline(always)]
fn work_unit(
    p: &GemmParams,
    raster: &Rasterization,
    schedule: &StreamKScheduler,
    worker: u32,
    index: u32,
) -> Option<WorkUnit> {
    let unit = schedule.unit(worker, index)?;
    let tile = raster.coord(unit.tile)?;
    let contributors = match unit.role {
        UnitRole::Finalize => schedule.contributors(unit.tile)?,
        _ => (worker, worker),
    };
    Some(WorkUnit {
        batch: (tile.m / p.tiles_m) as i32,
        m0: ((tile.m % p.tiles_m) * BLOCK_M) as i32,
        n0: (tile.n * BLOCK_N) as i32,
        k_begin: unit.k_begin,
        k_end: unit.k_end,
        role: unit.role,
        contributors,
    })
}

/// Writes this warpgroup's 64 × 256 block through shared memory and TMA stores, in two passes
/// of 128 columns: each pass rounds its values into the two 64 × 64 staging boxes (128-byte
/// swizzle, so the pairs written by a warp land in distinct banks), then one thread stores them
/// asynchronously. The second pass waits only until the first pass's stores have *read* the
/// staging boxes; the global writes overlap the next tile's mainloop, and TMA clips the ragged
/// edges.
///
/// # Safety
/// `d_map` is a 3-D map of D (N × M × batch, box 64 × 64 × 1, 128-byte swizzle) of the staged
/// type; `staging` belongs to this warpgroup; `barrier` counts exactly its 128 threads; the
/// whole warpgroup calls this together; `p` as for [`finish`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn epilogue_staged<O: Output>(
    acc: &Acc,
    p: &GemmParams,
    d_map: &TensorMap,
    staging: &Staging<O>,
    barrier: &NamedBarrier<128>,
    leader: bool,
    batch: i32,
    row0: u32,
    col0: u32,
) {
    // SAFETY (both passes): forwarded (function contract).
    unsafe {
        epilogue_pass::<O, 0>(acc, p, d_map, staging, barrier, leader, batch, row0, col0);
        epilogue_pass::<O, 1>(acc, p, d_map, staging, barrier, leader, batch, row0, col0);
    }
}

/// Pass `PASS` of [`epilogue_staged`]: columns `PASS·EPILOGUE_COLS ..` of the block.
///
/// # Safety
/// As for [`epilogue_staged`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn epilogue_pass<O: Output, const PASS: usize>(
    acc: &Acc,
    p: &GemmParams,
    d_map: &TensorMap,
    staging: &Staging<O>,
    barrier: &NamedBarrier<128>,
    leader: bool,
    batch: i32,
    row0: u32,
    col0: u32,
) {
    if leader {
        // The previous pass's stores have finished reading the staging boxes.
        tma::wait_group_read::<0>();
    }
    // SAFETY: all 128 threads of the warpgroup arrive (function contract).
    unsafe { barrier.sync() };
    let t = warpgroup::thread_index_in_place();
    if p.c == 0 && p.bias == 0 && p.activation == 0 {
        // The common case gets its own unrolled copy with no per-element branches.
        // SAFETY: forwarded (function contract).
        unsafe { stage_pass::<O, PASS>(acc, staging, t, |_, _, v| p.alpha * v) };
    } else {
        // SAFETY: forwarded (function contract).
        unsafe {
            stage_pass::<O, PASS>(acc, staging, t, |r, c, v| {
                finish::<O>(p, v, p.alpha, batch as u32, row0 + r, col0 + c)
            })
        };
    }
    fence_proxy_async_shared();
    // SAFETY: as above.
    unsafe { barrier.sync() };
    if leader {
        let pass_col0 = col0 + PASS as u32 * EPILOGUE_COLS;
        for j in 0..STORE_BOXES as u32 {
            let x = (pass_col0 + j * STORE_BOX_COLS) as i32;
            // SAFETY: the box was written and fenced above; the map matches its type (contract).
            unsafe { tma::store_3d(d_map, x, row0 as i32, batch, &staging.stage(j)) };
        }
        tma::commit_group();
    }
}

/// Rounds `value(row, col, acc)` for the accumulator elements of thread `t` in pass `PASS`'s
/// columns into the staging boxes (`row` and `col` relative to the warpgroup's block). Each
/// warp owns 16 rows; every 16 × 16 block (four 8 × 8 matrices: two row halves × two column
/// groups, the accumulator's own fragment order) leaves the registers in one `stmatrix.x4`.
///
/// # Safety
/// `staging` belongs to this warpgroup and no TMA store still reads it; the whole warpgroup
/// calls this together; `value` is safe to call for every element (it is `finish`, whose
/// contract the caller upholds, or plain arithmetic).
#[inline(always)]
unsafe fn stage_pass<O: Output, const PASS: usize>(
    acc: &Acc,
    staging: &Staging<O>,
    t: u32,
    value: impl Fn(u32, u32, f32) -> f32,
) {
    // Lane l addresses row l % 8 of matrix l / 8: matrices 0/1 are the warp's rows 0–7 / 8–15
    // of the first 8-column group, 2/3 the same rows of the next group.
    let (warp, lane) = (t / 32, t % 32);
    let row = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
    let row_bytes = row * 128;
    // 128-byte swizzle: 16-byte chunk `c` of row `r` sits at chunk `c ^ (r % 8)`. The chunk of
    // column group `2q + lane / 16` is `2q ^ (lane / 16)` (2q even), so one XOR per store.
    let chunk_xor = ((lane / 16) ^ (lane % 8)) * 16;
    let mut words = [0u32; 4];
    let mut low = 0.0f32;
    acc.for_each(|i, v| {
        // Registers PASS·PASS_REGS.. hold exactly this pass's columns (`acc_coord`: 8 columns
        // per 4 registers); `i` is a constant in the unrolled body, so this test folds away.
        if i / PASS_REGS != PASS {
            return;
        }
        let (r, c) = acc_coord(t, i as u32);
        let x = value(r, c, v);
        if i % 2 == 0 {
            low = x;
            return;
        }
        // Registers 2j and 2j+1 hold columns c-1 and c of one row; four pairs make a 16 × 16
        // block: (row half, column group) = (0,0), (1,0), (0,1), (1,1).
        words[(i % 8) / 2] = O::staged_pair(low, x);
        if i % 8 == 7 {
            let q = ((i % PASS_REGS) / 8) as u32; // 16-column block of the pass, 0..8
            let boxed = staging.stage(q / 4);
            let addr = boxed.addr() + row_bytes + (((2 * (q % 4)) * 16) ^ chunk_xor);
            // SAFETY: the whole warp is here (the warpgroup calls this together); each lane's
            // address is a 16-byte chunk of this warpgroup's staging box, which no pending
            // store reads (function contract).
            unsafe { warp::store_matrices_x4(addr, words) };
        }
    });
}

/// Writes this warpgroup's 64 × 256 block at (`row0`, `col0`) of `batch` with direct stores
/// (any output type and pitch; the fallback when D cannot be written by TMA).
///
/// # Safety
/// `p.d` valid for every in-bounds element; `p` as for [`finish`].
#[inline(always)]
unsafe fn epilogue<O: Output>(acc: &Acc, p: &GemmParams, batch: u32, row0: u32, col0: u32) {
    let t = warpgroup::thread_index_in_place();
    let d = p.d as *mut O;
    let d_batch = batch as u64 * p.stride_d;
    acc.for_each(|i, value| {
        let (r, col) = acc_coord(t, i as u32);
        let (row, col) = (row0 + r, col0 + col);
        if row >= p.m || col >= p.n {
            return;
        }
        // SAFETY: forwarded (function contract).
        let v = unsafe { finish::<O>(p, value, p.alpha, batch, row, col) };
        // SAFETY: in-bounds element of D (function contract).
        unsafe { *d.add((d_batch + row as u64 * p.ldd + col as u64) as usize) = O::from_f32(v) };
    });
}

macro_rules! gemm_entries {
    ($($name:ident: $input:ty => $output:ty;)*) => {$(
        /// GEMM entry point; see the module docs and [`GemmParams`].
        ///
        /// # Safety
        /// See `gemm`: tensor maps and parameters as the host launcher builds them.
        #[kernel(threads = 384, min_blocks_per_sm = 1)]
        pub unsafe fn $name(
            #[grid_constant] a_map: &TensorMap,
            #[grid_constant] b_map: &TensorMap,
            #[grid_constant] d_map: &TensorMap,
            params: GemmParams,
        ) {
            // SAFETY: forwarded to the launcher's contract.
            unsafe { gemm::<$input, $output>(a_map, b_map, d_map, &params) }
        }
    )*};
}

gemm_entries! {
    gemm_bf16_bf16_ws_persistent_sm90: Bf16 => Bf16;
    gemm_bf16_f16_ws_persistent_sm90: Bf16 => F16;
    gemm_bf16_f32_ws_persistent_sm90: Bf16 => f32;
    gemm_f16_bf16_ws_persistent_sm90: F16 => Bf16;
    gemm_f16_f16_ws_persistent_sm90: F16 => F16;
    gemm_f16_f32_ws_persistent_sm90: F16 => f32;
}
