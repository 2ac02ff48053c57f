//! Which tile scheduler a persistent GEMM-like kernel should use for a given problem.
//!
//! The choice depends on three numbers: how many output tiles there are, how many workers the
//! GPU runs at once (SMs, or clusters), and how long each tile's K loop is. The rule, in order:
//! 1. Tiles of uneven cost ([`TileCost::Varying`]) → [`Scheduler::Dynamic`]: only run-time
//!    claiming balances work that is not known in advance.
//! 2. Stream-K for the partial last wave when it pays: the tiles of that wave (all tiles when
//!    there is less than one wave) are split over more workers only if [`pure_stream_k_grid`]'s
//!    cost model — the longest worker's iterations plus the measured fix-up — beats keeping
//!    them whole. Then [`StreamKMode::Pure`] when there is less than one wave of tiles, the
//!    [`StreamKMode::Hybrid`] (full waves data-parallel, the last one streamed) otherwise.
//! 3. Otherwise (full waves, a split that does not pay, fewer than [`STREAM_K_MIN_K_ITERS`]
//!    iterations, or a stream-K iteration space beyond `u32`) data-parallel:
//!    [`Scheduler::Static`] when the whole grid runs in one wave (order cannot matter for L2),
//!    otherwise [`Scheduler::Swizzled`], banded across the longer side of the grid.

use super::stream_k::{StreamKMode, StreamKScheduler};
use super::swizzled::Raster;

/// Splitting a K loop shorter than this costs more in partial-tile traffic than it saves.
pub const STREAM_K_MIN_K_ITERS: u32 = 4;

/// Fix-up cost of a tile split over two CTAs, in main-loop iterations of one CTA: the
/// partial's stores, fence and flag, the finaliser's wait and loads, all on the critical path.
/// Measured with the sm_90 GEMM on the H200 (docs/PERF.md, 2026-12-01 K sweep at M = 128):
/// about 5.5 µs over data-parallel at 0.58 µs per 128 × 256 × 64 iteration.
pub const STREAM_K_FIRST_PARTIAL_ITERS: u64 = 10;
/// Each further CTA on the same tile: about 2.5 µs more (same sweep).
pub const STREAM_K_NEXT_PARTIAL_ITERS: u64 = 4;

/// Most workers one tile's K loop is split over: beyond four, the extra workers only compete
/// for DRAM while the fix-up grows (measured at M = 128 on the H200: eight per tile was slower
/// than four for K ≤ 14336).
pub const STREAM_K_MAX_SPLITS: u32 = 4;

/// Grid for pure stream-K (fewer tiles than workers): `tiles · s` CTAs (at most `workers`) for
/// the `s` in `1..=max_splits` that minimises the modelled time, the most iterations any CTA
/// runs plus the fix-up of up to `⌈grid / tiles⌉` CTAs per tile ([`STREAM_K_FIRST_PARTIAL_ITERS`],
/// [`STREAM_K_NEXT_PARTIAL_ITERS`]); ties go to fewer CTAs. Below the worker count only splits
/// that divide the K loop evenly are considered (an uneven one makes ranges straddle tiles,
/// so some workers pay two fix-ups: measured slower); the whole GPU is allowed even when its
/// ranges straddle (measured no worse at M = 128). A result equal to `tiles` means splitting
/// does not pay: run the tiles data-parallel.
pub const fn pure_stream_k_grid(tiles: u32, k_iters_per_tile: u32, workers: u32, max_splits: u32) -> u32 {
    split_grid(tiles, k_iters_per_tile, workers, max_splits, true)
}

/// Workers for the stream-K tail of the hybrid (the `tiles` of the partial last wave, after
/// full data-parallel waves): as [`pure_stream_k_grid`], but only with even splits. A tail whose
/// ranges straddle tiles has its workers reading scattered K offsets of many tiles at once; on
/// the H200 that measured up to 15 % slower than data-parallel (4096 × 4096 × 14336, 116 tail
/// tiles on 132 SMs; docs/PERF.md).
pub const fn tail_stream_k_grid(tiles: u32, k_iters_per_tile: u32, workers: u32, max_splits: u32) -> u32 {
    split_grid(tiles, k_iters_per_tile, workers, max_splits, false)
}

/// The model behind [`pure_stream_k_grid`] and [`tail_stream_k_grid`]; `straddle` admits the
/// worker-bound grid whose ranges cross tile boundaries.
const fn split_grid(tiles: u32, k_iters_per_tile: u32, workers: u32, max_splits: u32, straddle: bool) -> u32 {
    split_plan(tiles, k_iters_per_tile, workers, max_splits, straddle).1
}

/// [`split_grid`]'s choice as (modelled cost in iterations, grid).
const fn split_plan(tiles: u32, k_iters_per_tile: u32, workers: u32, max_splits: u32, straddle: bool) -> (u64, u32) {
    let tiles = if tiles == 0 { 1 } else { tiles as u64 };
    let workers = if workers == 0 { 1 } else { workers as u64 };
    let iters = tiles * k_iters_per_tile as u64;
    let mut best = (u64::MAX, tiles);
    let mut s = 1;
    while s <= max_splits as u64 {
        let grid = if tiles * s < workers { tiles * s } else { workers };
        let even = tiles * s <= workers && (k_iters_per_tile as u64).is_multiple_of(s);
        if s > 1 && !even && !(straddle && grid == workers) {
            s += 1;
            continue;
        }
        let sharing = grid.div_ceil(tiles);
        let fix_up =
            if sharing <= 1 { 0 } else { STREAM_K_FIRST_PARTIAL_ITERS + STREAM_K_NEXT_PARTIAL_ITERS * (sharing - 2) };
        let cost = iters.div_ceil(grid) + fix_up;
        if cost < best.0 {
            best = (cost, grid);
        }
        s += 1;
    }
    (best.0, best.1 as u32)
}

/// Modelled length, in main-loop iterations of one worker, of the schedule [`choose_scheduler`]
/// picks for uniform tiles: full waves of whole tiles, then the last partial wave either whole
/// (one more tile's loop) or split by the stream-K model (its longest worker plus the fix-up).
/// Kernels with tiles of different sizes compare their variants with it (in iterations scaled
/// to a common tile).
pub const fn modeled_iterations(tiles_m: u32, tiles_n: u32, k_iters_per_tile: u32, workers: u32) -> u64 {
    let workers = if workers == 0 { 1 } else { workers } as u64;
    let tiles = tiles_m as u64 * tiles_n as u64;
    let k = k_iters_per_tile as u64;
    let (waves, last_wave) = (tiles / workers, tiles % workers);
    if last_wave == 0 {
        return waves * k;
    }
    if k_iters_per_tile < STREAM_K_MIN_K_ITERS || tiles > u32::MAX as u64 {
        return (waves + 1) * k;
    }
    let (cost, grid) = split_plan(last_wave as u32, k_iters_per_tile, workers as u32, STREAM_K_MAX_SPLITS, waves == 0);
    if grid as u64 == last_wave { (waves + 1) * k } else { waves * k + cost }
}

/// Band width of the grouped rasterisation (Triton's usual `GROUP_M`): eight tile-rows of A
/// stay in L2 while a wave sweeps the columns of B.
pub const SWIZZLE_GROUP: u32 = 8;

/// Whether every tile costs the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileCost {
    /// Dense GEMM: every tile runs the same K loop.
    Uniform,
    /// Causal attention, grouped GEMM with ragged groups, …
    Varying,
}

/// A tile-scheduler choice, with the parameters the kernel needs to build it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// [`super::StaticScheduler`]: row-major round robin.
    Static,
    /// [`super::swizzled::SwizzledScheduler`] with this band width and orientation.
    Swizzled {
        /// Band width in tiles.
        group: u32,
        /// Band orientation.
        raster: Raster,
    },
    /// [`super::dynamic::DynamicScheduler`] over this grouped rasterisation.
    Dynamic {
        /// Band width in tiles.
        group: u32,
        /// Band orientation.
        raster: Raster,
    },
    /// [`super::stream_k::StreamKScheduler`] in this mode.
    StreamK(StreamKMode),
}

/// Bands across the longer side: a wave then spans `group` short-side tiles and many long-side
/// ones, the squarest block available.
const fn banding(tiles_m: u32, tiles_n: u32) -> (u32, Raster) {
    let (raster, banded) = if tiles_n >= tiles_m { (Raster::AlongM, tiles_m) } else { (Raster::AlongN, tiles_n) };
    (if banded < SWIZZLE_GROUP { banded } else { SWIZZLE_GROUP }, raster)
}

/// Picks the scheduler for a `tiles_m × tiles_n` tile grid with `k_iters_per_tile` main-loop
/// iterations per tile on `workers` concurrent workers (0 counts as 1). See the module doc.
pub const fn choose_scheduler(
    tiles_m: u32,
    tiles_n: u32,
    k_iters_per_tile: u32,
    workers: u32,
    cost: TileCost,
) -> Scheduler {
    let workers = if workers == 0 { 1 } else { workers };
    let (group, raster) = banding(tiles_m, tiles_n);
    if let TileCost::Varying = cost {
        return Scheduler::Dynamic { group, raster };
    }
    // u64: a u32 × u32 product cannot overflow it.
    let tiles = tiles_m as u64 * tiles_n as u64;
    let data_parallel = if tiles <= workers as u64 { Scheduler::Static } else { Scheduler::Swizzled { group, raster } };
    let last_wave = tiles % workers as u64;
    if last_wave == 0 || k_iters_per_tile < STREAM_K_MIN_K_ITERS || tiles > u32::MAX as u64 {
        return data_parallel;
    }
    // last_wave < workers fits u32.
    let split = if tiles < workers as u64 {
        pure_stream_k_grid(last_wave as u32, k_iters_per_tile, workers, STREAM_K_MAX_SPLITS)
    } else {
        tail_stream_k_grid(last_wave as u32, k_iters_per_tile, workers, STREAM_K_MAX_SPLITS)
    };
    if split as u64 == last_wave {
        return data_parallel;
    }
    let mode = if tiles < workers as u64 { StreamKMode::Pure } else { StreamKMode::Hybrid };
    // The hybrid splits its tail with the same model (`StreamKScheduler::try_new`).
    match StreamKScheduler::try_new(tiles as u32, k_iters_per_tile, workers, mode) {
        Some(_) => Scheduler::StreamK(mode),
        None => data_parallel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H200_SMS: u32 = 132;

    fn check(tiles_m: u32, tiles_n: u32, k: u32, expected: Scheduler) {
        assert_eq!(
            choose_scheduler(tiles_m, tiles_n, k, H200_SMS, TileCost::Uniform),
            expected,
            "{tiles_m}×{tiles_n}, k {k}"
        );
    }

    #[test]
    fn choices_on_an_h200() {
        // 256 tiles = 2 waves at 97 %: splitting the last 124 tiles does not pay; data-parallel,
        // banded along M of a square grid.
        check(16, 16, 64, Scheduler::Swizzled { group: 8, raster: Raster::AlongM });
        // Tall grid, 4 full waves: bands across N.
        check(132, 4, 64, Scheduler::Swizzled { group: 4, raster: Raster::AlongN });
        // 128 tiles in one wave at 97 %: order is irrelevant.
        check(8, 16, 64, Scheduler::Static);
        // 100 tiles, one wave at 76 %: split K over all SMs.
        check(10, 10, 64, Scheduler::StreamK(StreamKMode::Pure));
        // 144 tiles = one full wave + 12: hybrid.
        check(12, 12, 64, Scheduler::StreamK(StreamKMode::Hybrid));
        // 288 tiles (1152 × 8192): two full waves and 24 tiles, split four ways.
        check(9, 32, 64, Scheduler::StreamK(StreamKMode::Hybrid));
        // 344 tiles (M = 1024, N = 11008): two full waves and 80 tiles, which would only split
        // unevenly over the 132 SMs: data-parallel.
        check(8, 43, 64, Scheduler::Swizzled { group: 8, raster: Raster::AlongM });
        // Same shapes with a K loop too short to split stay data-parallel.
        check(10, 10, 2, Scheduler::Static);
        check(12, 12, 3, Scheduler::Swizzled { group: 8, raster: Raster::AlongM });
    }

    #[test]
    fn pure_stream_k_splits_only_when_the_loop_outweighs_the_fix_up() {
        // 16 tiles (M = 128, N = 4096) on 132 SMs, at most 4 CTAs per tile.
        // K = 256 (4 iterations) and K = 1024 (16): the fix-up costs more than it saves.
        assert_eq!(pure_stream_k_grid(16, 4, H200_SMS, 4), 16);
        assert_eq!(pure_stream_k_grid(16, 16, H200_SMS, 4), 16);
        // K = 2048 (32): two CTAs per tile (three would straddle tiles, four ties with two);
        // K = 4096 (64): four (the measured best).
        assert_eq!(pure_stream_k_grid(16, 32, H200_SMS, 4), 32);
        assert_eq!(pure_stream_k_grid(16, 64, H200_SMS, 4), 64);
        // 100 tiles: the grid is the whole GPU when splitting pays.
        assert_eq!(pure_stream_k_grid(100, 64, H200_SMS, 4), H200_SMS);
        assert_eq!(pure_stream_k_grid(100, 8, H200_SMS, 4), 100);
        // Degenerate inputs stay valid.
        assert_eq!(pure_stream_k_grid(0, 0, 0, 0), 1);
        // The hybrid's tail splits only evenly: 116 tiles (4096² with K = 11008) would need the
        // straddling whole-GPU grid, which the pure model accepts and the tail model refuses.
        assert_eq!(pure_stream_k_grid(116, 172, H200_SMS, 4), H200_SMS);
        assert_eq!(tail_stream_k_grid(116, 172, H200_SMS, 4), 116);
        assert_eq!(tail_stream_k_grid(24, 64, H200_SMS, 4), 96);
    }

    #[test]
    fn modeled_iterations_follow_the_chosen_schedule() {
        // Full waves: whole loops only.
        assert_eq!(modeled_iterations(8, 33, 64, H200_SMS), 2 * 64);
        // A partial wave left whole (too short a loop to split): one more loop.
        assert_eq!(modeled_iterations(12, 12, 3, H200_SMS), 2 * 3);
        // 1152 × 8192 in 128 × 256 tiles: two waves, then 24 tiles split four ways (16
        // iterations each, plus the fix-up of four CTAs per tile: 10 + 2 · 4).
        assert_eq!(modeled_iterations(9, 32, 64, H200_SMS), 2 * 64 + 16 + 18);
        // M = 128, N = 4096, K = 4096: 16 tiles over 64 CTAs.
        assert_eq!(modeled_iterations(1, 16, 64, H200_SMS), 16 + 18);
        // 80 tail tiles that only split unevenly stay whole.
        assert_eq!(modeled_iterations(8, 43, 64, H200_SMS), 3 * 64);
        assert_eq!(modeled_iterations(0, 0, 0, 0), 0);
    }

    #[test]
    fn varying_cost_is_dynamic() {
        assert_eq!(
            choose_scheduler(3, 40, 8, H200_SMS, TileCost::Varying),
            Scheduler::Dynamic { group: 3, raster: Raster::AlongM }
        );
    }

    proptest! {
        #[test]
        fn the_pure_grid_is_between_the_tiles_and_the_split_bound(
            tiles in 1u32..200, k in 0u32..10_000, workers in 1u32..300, max_splits in 1u32..9,
        ) {
            let grid = pure_stream_k_grid(tiles, k, workers, max_splits);
            prop_assert!(grid >= tiles.min(workers));
            prop_assert!(grid as u64 <= (tiles as u64 * max_splits as u64).max(tiles as u64));
            prop_assert!(grid <= workers.max(tiles.min(workers)));
        }

        #[test]
        fn the_choice_can_always_be_built(
            tm in 0u32..5000, tn in 0u32..5000, k in 0u32..100_000, workers in 0u32..1000,
        ) {
            match choose_scheduler(tm, tn, k, workers, TileCost::Uniform) {
                Scheduler::StreamK(mode) => {
                    prop_assert!(k >= STREAM_K_MIN_K_ITERS);
                    prop_assert!(StreamKScheduler::try_new(tm * tn, k, workers, mode).is_some());
                }
                Scheduler::Swizzled { group, .. } => prop_assert!((1..=SWIZZLE_GROUP).contains(&group)),
                Scheduler::Static => prop_assert!(tm * tn <= workers.max(1), "static only for a single wave"),
                Scheduler::Dynamic { .. } => prop_assert!(false, "uniform cost never picks dynamic"),
            }
        }
    }
}
