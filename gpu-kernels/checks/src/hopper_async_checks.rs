//! Hardware checks of the Hopper async DSL (sm_90a): small kernels, one per mechanism, that the
//! host runs on the H200 and compares against the pure logic in `warpforge_logic` (swizzle,
//! fragment maps). Each kernel's doc states its launch, parameters and what the host checks.
//!
//! Shared tile type of the TMA checks: a 64 × 64 bf16 box (128-byte rows) under 128-byte
//! swizzle, i.e. a tensor map with `boxDim = {64, 64}`, `SWIZZLE_128B`, dtype BFLOAT16. The load
//! check also comes in 32-byte, 64-byte and no-swizzle variants (one span-wide box each).

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::cluster;
use warpforge_dsl::kernel;
use warpforge_dsl::mbarrier::{Mbarrier, Phase, fence_init};
use warpforge_dsl::num::Bf16;
use warpforge_dsl::pipeline::{Pipeline, PipelineState, TmaLoad};
use warpforge_dsl::shared::{DynamicShared, SharedPtr};
use warpforge_dsl::thread::{block_rank, lane_id, thread_rank, thread_rank_in_place, warpgroup_id};
use warpforge_dsl::tile::{NoSwizzle, SmemTile, SmemTileRing, Swizzle32B, Swizzle64B, Swizzle128B, SwizzleMode};
use warpforge_dsl::tma;
use warpforge_dsl::warpgroup::{self, Accumulator};

/// The TMA box of the load/store checks. // (64 rows, 64 bf16 = 128 B)
pub type BoxTile = SmemTile<Bf16, 64, 64, Swizzle128B>;
/// Half of [`BoxTile`], what each CTA of the multicast check loads. // (32 rows, 64 bf16)
pub type HalfBoxTile = SmemTile<Bf16, 32, 64, Swizzle128B>;
/// B operand of the wgmma check. // (N = 128 rows, K = 64 bf16)
pub type WgmmaBTile = SmemTile<Bf16, 128, 64, Swizzle128B>;
/// Accumulator of the wgmma check (m64n128, f32).
pub type WgmmaAcc = warpgroup::acc::Acc64x128F32;

/// Dynamic shared memory the TMA checks need: two boxes plus alignment slack and barriers.
pub const TMA_CHECK_SMEM_BYTES: u32 = 2 * BoxTile::BYTES + 2048;
/// Stages of [`mbarrier_pipeline_sm90a`].
pub const PIPELINE_STAGES: usize = 4;
/// u32 words per pipeline slot (one per consumer lane).
pub const PIPELINE_SLOT_WORDS: u32 = 32;

/// Copies `bytes` of shared memory at `src` to `dst` word by word, block-strided.
///
/// # Safety
/// `src` holds `bytes` readable bytes visible to every thread; `dst` has room for them.
unsafe fn copy_smem_to_global(src: u32, bytes: u32, dst: *mut u32, threads: u32) {
    let mut i = thread_rank();
    while i < bytes / 4 {
        // SAFETY: i < bytes / 4, within both buffers.
        unsafe { *dst.add(i as usize) = SharedPtr::<u32>::from_addr(src).add(i).as_mut_ptr().read_volatile() };
        i += threads;
    }
}

/// Body of the TMA load checks: loads the `ROWS × COLS` bf16 box at (`x`, `y`) into a tile under
/// swizzle `S` and copies the tile's shared-memory bytes, as stored, to `out`.
///
/// # Safety
/// The whole block (128 threads) calls it once; `map`'s box is `COLS × ROWS` bf16 with swizzle
/// `S`; `out` holds `ROWS · COLS · 2` bytes; the dynamic smem holds the tile plus a barrier.
#[inline(always)]
unsafe fn load_box_to_global<const ROWS: usize, const COLS: usize, S: SwizzleMode>(
    map: &TensorMap,
    x: i32,
    y: i32,
    out: *mut u32,
) {
    let mut smem = DynamicShared::window();
    let tile = SmemTile::<Bf16, ROWS, COLS, S>::alloc(&mut smem); // (ROWS, COLS)
    // SAFETY: initialised below by thread 0 and published by the block barrier.
    let bar = unsafe { Mbarrier::at(Mbarrier::alloc(&mut smem)) };
    if thread_rank() == 0 {
        tma::prefetch(map);
        // SAFETY: one thread initialises before any use.
        unsafe { bar.init(1) };
        fence_init();
    }
    // SAFETY: every thread reaches it (a cluster barrier, because it tolerates the divergent
    // copies LLVM may make of it; see `cluster::sync`).
    unsafe { cluster::sync() };
    // Thread 0 again, read afresh (`thread_rank_in_place`, here and after every barrier below):
    // with the same value as the branch above, LLVM threads the two branches into one and
    // gives lane 0 its own copy of the barrier, which compute-sanitizer's synccheck reports as
    // a divergent barrier.
    if thread_rank_in_place() == 0 {
        // SAFETY: the barrier expects exactly the tile's bytes, which this one load delivers.
        unsafe {
            bar.arrive_expect_tx(SmemTile::<Bf16, ROWS, COLS, S>::BYTES);
            tma::load_2d(&tile, map, x, y, &bar);
        }
    }
    bar.wait_phase(Phase::ZERO);
    // SAFETY: the phase completed, so the tile is visible; `out` holds the tile's bytes.
    unsafe { copy_smem_to_global(tile.addr(), SmemTile::<Bf16, ROWS, COLS, S>::BYTES, out, 128) };
}

/// (a) TMA 2-D load under 128-byte swizzle. Launch: 1 block × 128 threads,
/// [`TMA_CHECK_SMEM_BYTES`] dynamic smem. `map`: bf16 tensor, box 64 × 64, SWIZZLE_128B;
/// (`x`, `y`): box origin (elements, innermost first). `out`: 8192 bytes.
/// Host checks: `out` byte `Swizzle::B128.offset(r, 2c)` holds element (y + r, x + c) of the
/// tensor (zero where out of bounds).
///
/// # Safety
/// As described; `map` is a valid tensor map.
#[kernel(threads = 128)]
pub unsafe fn tma_load_swizzle_sm90a(#[grid_constant] map: &TensorMap, x: i32, y: i32, out: *mut u32) {
    // SAFETY: forwarded to the caller (launch contract above).
    unsafe { load_box_to_global::<64, 64, Swizzle128B>(map, x, y, out) }
}

/// (a, 64 B) As [`tma_load_swizzle_sm90a`] under 64-byte swizzle: box 32 × 64 (32 bf16 = 64 B
/// rows), SWIZZLE_64B; `out`: 4096 bytes; byte `Swizzle::B64.offset(r, 2c)` holds (y + r, x + c).
///
/// # Safety
/// As for [`tma_load_swizzle_sm90a`].
#[kernel(threads = 128)]
pub unsafe fn tma_load_swizzle64_sm90a(#[grid_constant] map: &TensorMap, x: i32, y: i32, out: *mut u32) {
    // SAFETY: forwarded to the caller.
    unsafe { load_box_to_global::<64, 32, Swizzle64B>(map, x, y, out) }
}

/// (a, 32 B) As [`tma_load_swizzle_sm90a`] under 32-byte swizzle: box 16 × 64 (16 bf16 = 32 B
/// rows), SWIZZLE_32B; `out`: 2048 bytes; byte `Swizzle::B32.offset(r, 2c)` holds (y + r, x + c).
///
/// # Safety
/// As for [`tma_load_swizzle_sm90a`].
#[kernel(threads = 128)]
pub unsafe fn tma_load_swizzle32_sm90a(#[grid_constant] map: &TensorMap, x: i32, y: i32, out: *mut u32) {
    // SAFETY: forwarded to the caller.
    unsafe { load_box_to_global::<64, 16, Swizzle32B>(map, x, y, out) }
}

/// (a, none) As [`tma_load_swizzle_sm90a`] without swizzle: box 64 × 64, SWIZZLE_NONE; `out`:
/// 8192 bytes, the box rows packed (byte `128 r + 2c` holds (y + r, x + c)).
///
/// # Safety
/// As for [`tma_load_swizzle_sm90a`].
#[kernel(threads = 128)]
pub unsafe fn tma_load_unswizzled_sm90a(#[grid_constant] map: &TensorMap, x: i32, y: i32, out: *mut u32) {
    // SAFETY: forwarded to the caller.
    unsafe { load_box_to_global::<64, 64, NoSwizzle>(map, x, y, out) }
}

/// (b) TMA store round trip. Launch: 1 block × 128 threads, [`TMA_CHECK_SMEM_BYTES`].
/// `src_map`, `dst_map`: bf16 tensors of the same shape, box 64 × 64, SWIZZLE_128B; the box at
/// (`x`, `y`) is loaded from `src` and stored to `dst`; when `reduce != 0` it is then also
/// added into `dst` with a TMA reduce-add. Host checks: the `dst` box equals the `src` box
/// (`reduce == 0`) or twice it (`reduce != 0`, exact in bf16); the rest of `dst` is untouched.
///
/// # Safety
/// As described; the maps are valid.
#[kernel(threads = 128)]
pub unsafe fn tma_store_roundtrip_sm90a(
    #[grid_constant] src_map: &TensorMap,
    #[grid_constant] dst_map: &TensorMap,
    x: i32,
    y: i32,
    reduce: u32,
) {
    let mut smem = DynamicShared::window();
    let tile = BoxTile::alloc(&mut smem);
    // SAFETY: initialised below by thread 0 and published by the block barrier.
    let bar = unsafe { Mbarrier::at(Mbarrier::alloc(&mut smem)) };
    if thread_rank() == 0 {
        // SAFETY: one thread initialises before any use.
        unsafe { bar.init(1) };
        fence_init();
    }
    // SAFETY: every thread reaches it (a cluster barrier, because it tolerates the divergent
    // copies LLVM may make of it; see `cluster::sync`).
    unsafe { cluster::sync() };
    if thread_rank_in_place() == 0 {
        // SAFETY: one load of exactly the announced bytes.
        unsafe {
            bar.arrive_expect_tx(BoxTile::BYTES);
            tma::load_2d_streaming(&tile, src_map, x, y, &bar);
        }
        bar.wait_phase(Phase::ZERO);
        // SAFETY: the tile was written by TMA only (no generic writes to fence); it stays
        // untouched until the waits below.
        unsafe { tma::store_2d(dst_map, x, y, &tile) };
        tma::commit_group();
        tma::wait_group::<0>();
        if reduce != 0 {
            // SAFETY: as for the store; the store's writes completed above.
            unsafe { tma::reduce_add_2d(dst_map, x, y, &tile) };
            tma::commit_group();
            tma::wait_group_read::<0>();
            tma::wait_group::<0>();
        }
    }
}

/// (c) Multi-stage mbarrier pipeline between a producer warpgroup and a consumer warpgroup,
/// with a register split (producer 40, consumers 232 registers). Launch: `blocks` × 256 threads,
/// dynamic smem ≥ 1 KiB. `iters`: slots to pass. `out`: `blocks · 128` u32.
/// The producer (thread 0) fills slot word j with `it · 32 + j` for iteration `it`; consumer
/// thread c (0..128) sums word `c % 32` of every slot.
/// Host checks: `out[b·128 + c] = Σ_{it<iters} (it·32 + c%32)` (wrapping u32).
///
/// # Safety
/// As described.
#[kernel(threads = 256, min_blocks_per_sm = 1, max_registers = 168)]
pub unsafe fn mbarrier_pipeline_sm90a(iters: u32, out: *mut u32) {
    let mut smem = DynamicShared::window();
    // SAFETY: every thread runs the same smem plan; init below precedes use.
    let pipe = unsafe { Pipeline::<PIPELINE_STAGES>::alloc(&mut smem) };
    let slots = smem.alloc::<u32>(PIPELINE_STAGES as u32 * PIPELINE_SLOT_WORDS, 16); // (STAGES, 32)
    if thread_rank() == 0 {
        // SAFETY: one thread; each of the 128 consumer threads releases every slot once per lap.
        unsafe { pipe.init(128) };
    }
    // SAFETY: every thread reaches it (a cluster barrier, because it tolerates the divergent
    // copies LLVM may make of it; see `cluster::sync`).
    unsafe { cluster::sync() };
    let mut state = PipelineState::<PIPELINE_STAGES>::START;
    if warpgroup_id() == 0 {
        // SAFETY: the whole warpgroup executes it; `max_registers = 168` fixes the entry count, and
        // 128 · 40 + 128 · 232 registers fit the register file.
        unsafe { warpgroup::setmaxnreg_dec::<40>() };
        if thread_rank_in_place() == 0 {
            for it in 0..iters {
                pipe.producer_wait(state);
                let slot = slots.add(state.stage * PIPELINE_SLOT_WORDS);
                for j in 0..PIPELINE_SLOT_WORDS {
                    // SAFETY: the slot is free (its empty phase completed) and inside the ring.
                    unsafe { slot.add(j).as_mut_ptr().write_volatile(it * PIPELINE_SLOT_WORDS + j) };
                }
                // SAFETY: the single producer arrival of this stage and lap, after its writes.
                unsafe { pipe.producer_commit(state) };
                state.advance();
            }
        }
    } else {
        // SAFETY: as for the producer's dec.
        unsafe { warpgroup::setmaxnreg_inc::<232>() };
        let mut sum = 0u32;
        for _ in 0..iters {
            pipe.consumer_wait(state);
            let word = slots.add(state.stage * PIPELINE_SLOT_WORDS + lane_id());
            // SAFETY: the full phase completed, so the producer's writes are visible.
            sum = sum.wrapping_add(unsafe { word.as_mut_ptr().read_volatile() });
            // SAFETY: one release per consumer thread per stage and lap, after its read.
            unsafe { pipe.consumer_release(state) };
            state.advance();
        }
        let c = thread_rank() - 128;
        // SAFETY: `out` holds blocks · 128 words.
        unsafe { *out.add((block_rank() * 128 + c) as usize) = sum };
    }
}

/// (e) Cluster DSMEM exchange in 2-CTA clusters. Launch: `2k` blocks × 128 threads, cluster
/// (2, 1, 1), dynamic smem ≥ 2 KiB. Each thread t writes `(rank << 16) | t` into slot t of its
/// peer CTA (mapa + st.shared::cluster), then thread 0 arrives on the peer's mbarrier. After a
/// cluster barrier each thread reads its own slot t, and slot t of the peer (ld.shared::cluster).
/// `out`: `blocks · 256` u32. Host checks, for block b with rank r = b % 2 and peer p = r ^ 1:
/// `out[b·256 + t] = (p << 16) | t` (written by the peer) and `out[b·256 + 128 + t] = (r << 16) | t`
/// (what this CTA wrote into the peer).
///
/// # Safety
/// As described.
#[kernel(threads = 128, cluster = (2, 1, 1))]
pub unsafe fn cluster_dsmem_exchange_sm90a(out: *mut u32) {
    let mut smem = DynamicShared::window();
    let slots = smem.alloc::<u32>(128, 16);
    // SAFETY: initialised below by thread 0 and published by the cluster barrier.
    let bar = unsafe { Mbarrier::at(Mbarrier::alloc(&mut smem)) };
    let (rank, t) = (cluster::rank(), thread_rank());
    let peer = rank ^ 1;
    if t == 0 {
        // SAFETY: one thread initialises; one remote arrival per phase.
        unsafe { bar.init(1) };
        fence_init();
    }
    // SAFETY: every thread of both CTAs reaches it; afterwards the peer's smem and barrier exist.
    unsafe { cluster::sync() };
    // SAFETY: peer < cluster size; slot t is written only by this thread of the peer CTA.
    unsafe { cluster::map(slots.add(t), peer).write((rank << 16) | t) };
    if t == 0 {
        // SAFETY: the peer's barrier expects exactly this arrival.
        unsafe { bar.arrive_remote(peer) };
        bar.wait_phase_cluster(Phase::ZERO);
    }
    // SAFETY: every thread of both CTAs reaches it; it orders the remote writes before the reads.
    unsafe { cluster::sync() };
    // SAFETY: both slots were written before the barrier and are not written again.
    unsafe {
        let own = slots.add(t).as_mut_ptr().read_volatile();
        let remote = cluster::map(slots.add(t), peer).read();
        *out.add((block_rank() * 256 + t) as usize) = own;
        *out.add((block_rank() * 256 + 128 + t) as usize) = remote;
    }
    // SAFETY: every thread reaches it; no CTA exits while its peer may still read its smem.
    unsafe { cluster::sync() };
}

/// (f) TMA multicast into 2-CTA clusters: CTA rank r loads rows `[32r, 32r + 32)` of the box
/// at (`x`, `y`) and multicasts them to both CTAs. Launch: `2k` blocks × 128 threads, cluster
/// (2, 1, 1), [`TMA_CHECK_SMEM_BYTES`]. `map`: bf16 tensor, box 64 × 32, SWIZZLE_128B. `out`:
/// `blocks · 8192` bytes. Host checks: every block's 8192 bytes equal what
/// [`tma_load_swizzle_sm90a`] writes for the 64-row box at (`x`, `y`) (the two halves are
/// atom-aligned, so the pattern is the same as one 64-row tile).
///
/// # Safety
/// As described.
#[kernel(threads = 128, cluster = (2, 1, 1))]
pub unsafe fn tma_multicast_sm90a(#[grid_constant] map: &TensorMap, x: i32, y: i32, out: *mut u32) {
    let mut smem = DynamicShared::window();
    let halves = [HalfBoxTile::alloc(&mut smem), HalfBoxTile::alloc(&mut smem)]; // 2 × (32, 64)
    // SAFETY: initialised below by thread 0 and published by the cluster barrier.
    let bar = unsafe { Mbarrier::at(Mbarrier::alloc(&mut smem)) };
    let rank = cluster::rank();
    if thread_rank() == 0 {
        // SAFETY: one thread initialises; it announces both halves (one from each CTA).
        unsafe {
            bar.init(1);
            fence_init();
            bar.arrive_expect_tx(<(HalfBoxTile, HalfBoxTile) as TmaLoad>::BYTES);
        }
    }
    // SAFETY: every thread of both CTAs reaches it: both barriers are armed before any load.
    unsafe { cluster::sync() };
    if thread_rank_in_place() == 0 {
        let half = if rank == 0 { &halves[0] } else { &halves[1] };
        // SAFETY: both CTAs run the same smem plan and armed their barrier with both halves.
        unsafe { tma::load_2d_multicast(half, map, x, y + 32 * rank as i32, &bar, 0b11) };
    }
    bar.wait_phase(Phase::ZERO);
    // SAFETY: both halves are contiguous (4 KiB each, 1 KiB aligned) and visible.
    unsafe {
        copy_smem_to_global(halves[0].addr(), 2 * HalfBoxTile::BYTES, out.add(block_rank() as usize * 2048), 128)
    };
    // SAFETY: every thread reaches it; no CTA exits while a multicast into it may be pending.
    unsafe { cluster::sync() };
}

/// Stages of [`wgmma_pipelined_bf16_sm90a`].
pub const GEMM_CHECK_STAGES: usize = 2;
/// Dynamic shared memory of [`wgmma_pipelined_bf16_sm90a`] (needs the > 48 KiB opt-in).
pub const GEMM_CHECK_SMEM_BYTES: u32 = GEMM_CHECK_STAGES as u32 * (BoxTile::BYTES + WgmmaBTile::BYTES) + 2048;

/// (g) The TMA → mbarrier pipeline → wgmma loop of a GEMM tile, warp-specialised:
/// `D(64×128) = A(64×K) · B(128×K)ᵀ` with K = 64 · `k_tiles`. Warpgroup 0 (40 registers):
/// thread 0 issues the TMA loads of each K-slice into a 2-stage ring; warpgroup 1 (232
/// registers) waits, runs the wgmmas and releases the slot. Launch: 1 block × 256 threads,
/// [`GEMM_CHECK_SMEM_BYTES`]. `a_map`: bf16 [64][K] row-major, box 64 × 64; `b_map`: bf16
/// [128][K], box 64 × 128; both SWIZZLE_128B. `d`: 64 × 128 f32 row-major.
/// Host checks: `d[m][n] = Σ_k a[m][k] · b[n][k]` (f32 tolerance), for several `k_tiles` ≥ 3
/// so that the ring wraps and the phases flip.
///
/// # Safety
/// As described.
#[kernel(threads = 256, min_blocks_per_sm = 1, max_registers = 168)]
pub unsafe fn wgmma_pipelined_bf16_sm90a(
    #[grid_constant] a_map: &TensorMap,
    #[grid_constant] b_map: &TensorMap,
    k_tiles: u32,
    d: *mut f32,
) {
    let mut smem = DynamicShared::window();
    let a = SmemTileRing::<Bf16, 64, 64, Swizzle128B, GEMM_CHECK_STAGES>::alloc(&mut smem); // STAGES × (M = 64, K = 64)
    let b = SmemTileRing::<Bf16, 128, 64, Swizzle128B, GEMM_CHECK_STAGES>::alloc(&mut smem); // STAGES × (N = 128, K = 64)
    // SAFETY: every thread runs the same smem plan; init below precedes use.
    let pipe = unsafe { Pipeline::<GEMM_CHECK_STAGES>::alloc(&mut smem) };
    if thread_rank() == 0 {
        // SAFETY: one thread; every consumer thread releases each slot once per lap.
        unsafe { pipe.init(128) };
    }
    // SAFETY: every thread reaches it (a cluster barrier, because it tolerates the divergent
    // copies LLVM may make of it; see `cluster::sync`).
    unsafe { cluster::sync() };
    let mut state = PipelineState::<GEMM_CHECK_STAGES>::START;
    if warpgroup_id() == 0 {
        // SAFETY: the whole warpgroup; `max_registers = 168` fixes the entry count, and
        // 128 · 40 + 128 · 232 registers fit the register file.
        unsafe { warpgroup::setmaxnreg_dec::<40>() };
        if thread_rank_in_place() == 0 {
            for kt in 0..k_tiles {
                let (a_s, b_s) = (a.stage(state.stage), b.stage(state.stage));
                // SAFETY: one producer; the two loads deliver exactly (A, B) tile bytes.
                unsafe {
                    let full = pipe.producer_acquire::<(BoxTile, WgmmaBTile)>(state);
                    tma::load_2d(&a_s, a_map, 64 * kt as i32, 0, &full);
                    tma::load_2d(&b_s, b_map, 64 * kt as i32, 0, &full);
                }
                state.advance();
            }
        }
    } else {
        // SAFETY: as for the producer's dec.
        unsafe { warpgroup::setmaxnreg_inc::<232>() };
        let mut acc = WgmmaAcc::ZERO;
        for kt in 0..k_tiles {
            let (a_s, b_s) = (a.stage(state.stage), b.stage(state.stage));
            pipe.consumer_wait(state);
            // SAFETY: the whole consumer warpgroup, convergent; the slot stays until released.
            unsafe {
                warpgroup::fence();
                warpgroup::mma(&mut acc, &a_s, &b_s, kt > 0);
                warpgroup::commit();
                warpgroup::wait::<0>();
                pipe.consumer_release(state);
            }
            state.advance();
        }
        // SAFETY: every wgmma writing `acc` was waited for; `d` holds 64 × 128 f32.
        unsafe { warpgroup::for_each_element(&acc, |row, col, v| *d.add((row * 128 + col) as usize) = v) };
    }
}
