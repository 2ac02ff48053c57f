//! Persistent, warp-specialised 16-bit GEMM for Hopper: `D = act(alpha·A·Bᵀ + beta·C + bias)`.
//!
//! Algorithm: each CTA owns 128 × 256 tiles of D handed out by a grouped (L2-friendly) static
//! schedule over a persistent grid of one CTA per SM. A and B are K-major (A: M × K, B: N × K),
//! read by TMA in 64-wide K slices into a 4-stage shared-memory ring under 128-byte swizzle;
//! out-of-bounds boxes are zero-filled, so ragged M, N and K need no padding.
//!
//! Warp roles (384 threads):
//! - warpgroup 0, producer: one elected thread issues the TMA loads of every stage
//!   (registers lowered to 40 with `setmaxnreg`);
//! - warpgroups 1 and 2, consumers: each multiplies its 64 rows of the tile by the 256 columns
//!   with `wgmma.m64n256k16` (128 f32 accumulators per thread, registers raised to 232), keeps
//!   one wgmma group in flight, releases each stage after the next one's wgmmas are issued, and
//!   writes its half of the tile straight from registers (masked at the edges).
//!
//! Shared memory: 4 stages × (2 × 64×64 + 256×64) bf16 = 192 KiB + 8 barriers.
//! Pipeline depth: 4. Measured ratio vs cuBLAS: see docs/PERF.md (H200, 2026-11-29).

use warpforge_dsl::abi::gemm_sm90::{A_BOX_ROWS, BLOCK_K, BLOCK_M, BLOCK_N, STAGES};
use warpforge_dsl::abi::{Activation, GemmParams, TensorMap};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::fragment::acc_coord;
use warpforge_dsl::logic::schedule::swizzled::{Raster, Rasterization, SwizzledScheduler};
use warpforge_dsl::math;
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, grid_dim, thread_rank, warp_id, warpgroup_id};
use warpforge_dsl::tile::{SmemTile, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{Accumulator, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement, acc::Acc64x256F32};
use warpforge_dsl::{tma, warp};

const RING: usize = STAGES as usize;
const K_SLICE: usize = BLOCK_K as usize;
/// Consumer warpgroups, each owning 64 rows of the tile; each releases a stage once.
const CONSUMERS: u32 = 2;
/// Register budgets after `setmaxnreg`: 128 × 40 + 256 × 232 ≤ 64 Ki registers per SM.
const PRODUCER_REGS: u32 = 40;
const CONSUMER_REGS: u32 = 232;
/// Tile rows per band of the grouped schedule.
const DEFAULT_RASTER_GROUP: u32 = 8;

type ATile<T> = SmemTile<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B>; // (64, BLOCK_K)
type BTile<T> = SmemTile<T, { BLOCK_N as usize }, K_SLICE, Swizzle128B>; // (BLOCK_N, BLOCK_K)
type Acc = Acc64x256F32; // (64, BLOCK_N) per consumer warpgroup

/// An output element type of the epilogue.
trait Output: Copy {
    /// Rounds an f32 result.
    fn from_f32(v: f32) -> Self;
    /// Reads an element of C as f32.
    fn to_f32(self) -> f32;
}
impl Output for Bf16 {
    fn from_f32(v: f32) -> Self {
        Bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
}
impl Output for F16 {
    fn from_f32(v: f32) -> Self {
        F16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }
}
impl Output for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

/// The whole kernel, generic over input and output types; the entries below instantiate it.
///
/// # Safety
/// `a_map`/`b_map` describe A (K × M × batch) and B (K × N × batch) with boxes 64 × 64 × 1 and
/// 64 × 256 × 1 under 128-byte swizzle; `p` describes D (and C, bias) as documented on
/// [`GemmParams`], all valid for the launch; 384 threads, `gemm_sm90::SMEM_BYTES` of dynamic
/// shared memory.
#[inline(always)]
unsafe fn gemm<T: WgmmaElement, O: Output>(a_map: &TensorMap, b_map: &TensorMap, p: &GemmParams)
where
    Acc: WgmmaSs<T::Kind, T::Kind>,
{
    // Shared-memory plan.
    let mut smem = DynamicShared::window();
    let a_top = SmemTileRing::<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
    let a_bottom = SmemTileRing::<T, { A_BOX_ROWS as usize }, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
    let b_ring = SmemTileRing::<T, { BLOCK_N as usize }, K_SLICE, Swizzle128B, RING>::alloc(&mut smem);
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

    // Schedule (shared by every role so they agree on the tile sequence).
    let group = if p.raster_group == 0 { DEFAULT_RASTER_GROUP } else { p.raster_group };
    let raster = Rasterization::new(p.tiles_m * p.batch, p.tiles_n, group, Raster::AlongM);
    let schedule = SwizzledScheduler::new(raster, grid_dim().x);
    let worker = block_idx().x;
    let k_slices = p.k.div_ceil(BLOCK_K).max(1);

    if warpgroup_id() == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let mut state = PipelineState::<RING>::START;
            let mut iteration = 0;
            while let Some(tile) = schedule.tile(worker, iteration) {
                let (batch, m0, n0) = tile_origin(p, tile.m, tile.n);
                for slice in 0..k_slices {
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
                iteration += 1;
            }
        }
        return;
    }

    // Consumers.
    // SAFETY: whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let half = warpgroup_id() - 1;
    let a_ring = if half == 0 { a_top } else { a_bottom };
    let leader = warpgroup::thread_index() == 0;
    let mut state = PipelineState::<RING>::START;
    let mut iteration = 0;
    while let Some(tile) = schedule.tile(worker, iteration) {
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
            if slice >= k_slices {
                break;
            }
        }
        // SAFETY: whole warpgroup; completes every wgmma writing `acc` and reading `previous`.
        unsafe { warpgroup::wait::<0>() };
        if leader {
            // SAFETY: as above.
            unsafe { pipe.consumer_release(previous) };
        }
        let (batch, m0, n0) = tile_origin(p, tile.m, tile.n);
        // SAFETY: `p` describes D/C/bias valid for the launch (kernel contract).
        unsafe { epilogue::<O>(&acc, p, batch as u32, m0 as u32 + half * A_BOX_ROWS, n0 as u32) };
        iteration += 1;
    }
}

/// (batch, first row, first column) of a scheduled tile; the schedule's M axis runs over
/// `tiles_m` tile rows of each batch in turn.
#[inline(always)]
fn tile_origin(p: &GemmParams, tile_m: u32, tile_n: u32) -> (i32, i32, i32) {
    let batch = tile_m / p.tiles_m;
    let m0 = (tile_m % p.tiles_m) * BLOCK_M;
    (batch as i32, m0 as i32, (tile_n * BLOCK_N) as i32)
}

/// Writes this warpgroup's 64 × 256 accumulator block at (`row0`, `col0`) of batch `batch`.
///
/// # Safety
/// `p.d` (and `p.c`, `p.bias` when non-zero) are valid for every in-bounds element.
#[inline(always)]
unsafe fn epilogue<O: Output>(acc: &Acc, p: &GemmParams, batch: u32, row0: u32, col0: u32) {
    let t = warpgroup::thread_index();
    let d = p.d as *mut O;
    let c = p.c as *const O;
    let bias = p.bias as *const f32;
    let activation = Activation::from_code(p.activation);
    let d_batch = batch as u64 * p.stride_d;
    let c_batch = batch as u64 * p.stride_c;
    acc.for_each(|i, value| {
        let (r, col) = acc_coord(t, i as u32);
        let (row, col) = (row0 + r, col0 + col);
        if row >= p.m || col >= p.n {
            return;
        }
        let mut v = p.alpha * value;
        if !c.is_null() {
            // SAFETY: in-bounds element of C (kernel contract).
            v += p.beta * unsafe { *c.add((c_batch + row as u64 * p.ldc + col as u64) as usize) }.to_f32();
        }
        if !bias.is_null() {
            // SAFETY: col < n, the bias length.
            v += unsafe { *bias.add(col as usize) };
        }
        v = match activation {
            Activation::None => v,
            Activation::Relu => math::relu(v),
            Activation::Silu => math::silu(v),
            Activation::GeluTanh => math::gelu_tanh(v),
        };
        // SAFETY: in-bounds element of D (kernel contract).
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
        pub unsafe fn $name(#[grid_constant] a_map: &TensorMap, #[grid_constant] b_map: &TensorMap, params: GemmParams) {
            // SAFETY: forwarded to the launcher's contract.
            unsafe { gemm::<$input, $output>(a_map, b_map, &params) }
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
